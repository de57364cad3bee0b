"""``PrivatePCA(n_components="mle")``: how many components it keeps.

The claim of docs/user_guide.rst ("What differs from scikit-learn's PCA"):
``"mle"`` is Minka's choice on the *released* eigenvalues, capped at the
components that stand out of the noise (``n_resolved_``). On 20 000 × 50
rows with five spikes, in the unit ball (``data_norm=1``), two spectra:

- ``planted``: ``bench_model_selection.planted`` (spikes 5, 4.5, 4, 3.5, 3
  times an isotropic floor of 1, in a random orthonormal basis), the data of
  docs/model_selection.rst;
- ``strong``: spikes 25, 20, 15, 10, 5 over a floor of 1 (``strong``, below).

For each ε ∈ {1, 3, 10, 30, 100} (``delta=1e-6``) and data seed ``s`` (the
fits seeded ``s`` too), it prints the ``n_components_`` of
``PrivatePCA("mle")``, beside: ``n_resolved_`` of ``PrivatePCA(None)`` from
the same seed (the same release, every component kept: how many stand out
of the noise, before the cap at Minka's choice); Minka's rule alone on that
release (``_spectrum.minka_dimension`` of its ``noisy_variance_`` clamped at
0, what ``"mle"`` would keep without the cap); and scikit-learn's
``PCA("mle")`` on the same rows.

Run from the repository root::

    python benchmarks/bench_mle.py            # 5 seeds, about a minute
    python benchmarks/bench_mle.py --quick    # 1 seed, 5 000 rows
"""

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np
from sklearn.decomposition import PCA

from sklearn_dppca import BudgetAccountant, PrivatePCA
from sklearn_dppca._spectrum import minka_dimension

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_model_selection import planted  # noqa: E402  (benchmarks/)

EPSILONS = (1.0, 3.0, 10.0, 30.0, 100.0)
N_FEATURES = 50
STRONG = (25.0, 20.0, 15.0, 10.0, 5.0)


def strong(n, d, seed):
    """Rows with spikes of 25, 20, 15, 10 and 5 times an isotropic floor,
    in a random orthonormal basis, scaled into the unit ball."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.normal(size=(d, d)))
    scale = np.ones(d)
    scale[: len(STRONG)] = STRONG
    X = (rng.normal(size=(n, d)) * np.sqrt(scale)) @ basis.T
    return X / np.linalg.norm(X, axis=1).max()


SPECTRA = {"planted": lambda n, seed: planted(n, N_FEATURES, 5, seed)[0],
           "strong": lambda n, seed: strong(n, N_FEATURES, seed)}


def counts(X, epsilon, seed):
    """``(mle keeps, n_resolved_, Minka alone, scikit-learn)`` on ``X``."""
    common = dict(epsilon=epsilon, data_norm=1.0, random_state=seed,
                  accountant=BudgetAccountant())
    mle = PrivatePCA("mle", **common).fit(X)
    full = PrivatePCA(None, **common).fit(X)  # the same release, every rank
    released = np.sort(np.maximum(full.noisy_variance_, 0.0))[::-1]
    return (mle.n_components_, full.n_resolved_,
            minka_dimension(released, X.shape[0]),
            PCA("mle").fit(X).n_components_)


def run(spectra, n_rows, seeds, epsilons=EPSILONS):
    """``{(spectrum, ε): [counts per seed]}``."""
    res = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seeded fits: PrivacyLeakWarning
        for name in spectra:
            for seed in seeds:
                X = SPECTRA[name](n_rows, seed)
                for eps in epsilons:
                    res.setdefault((name, eps), []).append(counts(X, eps, seed))
    return res


def table(res):
    columns = ("mle keeps", "n_resolved_", "Minka alone", "scikit-learn")
    lines = ["| spectrum | ε | " + " | ".join(columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for (name, eps), rows in res.items():
        cells = [", ".join(str(int(r[j])) for r in rows) for j in range(4)]
        lines.append(f"| {name} | {eps:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--spectra", nargs="*", default=list(SPECTRA),
                        choices=list(SPECTRA))
    parser.add_argument("--quick", action="store_true", help="1 seed, 5 000 rows")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.rows = 1, 5_000
    res = run(args.spectra, args.rows, range(args.seeds))
    print(f"## {args.rows} x {N_FEATURES} rows, five spikes; one value per "
          f"seed (0 to {args.seeds - 1})\n")
    print(table(res))
    return res


if __name__ == "__main__":
    main()
