"""CoherentPowerPCA against PrivatePCA at ``d = 10⁴``, both paths of each.

Issue 31's claim: on spiked models with incoherent components at ``d ≥
10⁴``, ``CoherentPowerPCA``'s ``sin θ`` is below ``PrivatePCA``'s at the
same ε. The data: ``make_coherent_low_rank(20 000, 10 000, k=3,
coherence=None, eigengap=0.9999, spread=3)`` (rows in the unit ball; the
``d − k`` noise eigenvalues hold about one spike's energy). Each estimator
runs with its default rule on the dense path (``d × d`` releases;
``CoherentPowerPCA`` eigendecomposes two of them: minutes per fit) and on
the noisy power path (no ``d × d`` matrix), both from the covariance
release, and ``CoherentPowerPCA`` as a user gets it (``start="auto"``: here
the random start, with no covariance release and no ``d × d`` matrix).
Printed: ``sin θ`` of the top
``k`` against the centred data's own (``bench_wide.reference_components``),
seconds, and ``CoherentPowerPCA``'s branch.

Run from the repository root (about 25 minutes on 2 cores, 6 GB)::

    nice python benchmarks/bench_coherent_wide.py --epsilons 3 1
"""

import argparse
import time
import warnings

from bench_wide import reference_components  # benchmarks/ is on the path

from sklearn_dppca import BudgetAccountant, CoherentPowerPCA, PrivatePCA
from sklearn_dppca.datasets import make_coherent_low_rank
from sklearn_dppca.metrics import principal_angle_sin

N, D, K = 20_000, 10_000, 3
#: ``--tiny``: the same fits at a smoke-test size
TINY = (2_000, 100)


ESTIMATORS = {
    "PrivatePCA, noisy power": lambda: PrivatePCA(K, path="noisy_power",
                                                  svd_solver="randomized"),
    "CoherentPowerPCA, noisy power": lambda: CoherentPowerPCA(K, path="noisy_power"),
    "PrivatePCA, dense": lambda: PrivatePCA(K, path="dense"),
    "CoherentPowerPCA, dense": lambda: CoherentPowerPCA(K, path="dense"),
    'CoherentPowerPCA, default (start="auto")': lambda: CoherentPowerPCA(K),
}


def run(n, d, epsilons, seed=0):
    """One row per (ε, fit): ``(ε, name, sin θ, seconds, branch)``."""
    X, _ = make_coherent_low_rank(n, d, K, coherence=None, eigengap=0.9999,
                                  spread=3.0, data_norm=1.0, random_state=0)
    ref = reference_components(X, K)
    for eps in epsilons:
        for name, make in ESTIMATORS.items():
            start = time.perf_counter()
            est = make().set_params(epsilon=eps, data_norm=1.0, random_state=seed,
                                    accountant=BudgetAccountant()).fit(X)
            yield (eps, name, principal_angle_sin(est.components_, ref),
                   time.perf_counter() - start, getattr(est, "branch_", "—"))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[3.0, 1.0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tiny", action="store_true",
                        help=f"n, d = {TINY} (seconds)")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # fixed seeds; noisy-release warnings
    n, d = TINY if args.tiny else (N, D)
    print("| ε | fit | sin θ | seconds | branch |\n|---|---|---|---|---|")
    for eps, name, error, seconds, branch in run(n, d, args.epsilons, args.seed):
        print(f"| {eps:g} | {name} | {error:.3f} | {seconds:.1f} | {branch} |",
              flush=True)

if __name__ == "__main__":
    main()
