"""PrivatePCA's matrix-free and noisy power paths on sparse rows with planted
spikes: which is more accurate where a private fit is informative (mend 111).

Issue 31's CSR 10⁵ × 2·10⁴ case (``bench_wide.py --cases csr-1pct``) has
``n = 5 d`` and topics of equal weight: every private fit there is a random
subspace, so it cannot tell the paths' accuracy apart. Here the rows are
binary CSR rows of a topic mixture with distinct topic weights and
``n ≥ 10 d``: a row is in topic ``t`` with probability ``p_t`` (10 strong
topics of weights 4 down to 2, 40 weak ones of 1 down to 0.5, geometric;
10% of the rows in none), and has ``m`` ones: ``m/2`` drawn without
replacement from its topic's ``m`` columns and the rest uniformly (all
``m`` uniformly for a row in no topic). ``data_norm = √m`` is public and
exact (at most ``m`` ones a row). The top 10 eigenvalues stand about twice
above the next 40, so ``k = 10`` has a gap; ``k = 50`` is against the bulk.

Each fit: ``PrivatePCA(path="matrix_free")`` (the dense release's law, what
``path="auto"`` takes on these shapes), ``PrivatePCA(path="noisy_power")``
and ``CoherentPowerPCA()`` (its default start), at ``δ = 1e-6`` and a fresh
accountant. Printed, one JSON line a fit: ``sin θ`` of the top ``k``
against the centred rows' own top ``k``
(``bench_wide.reference_components``), the seconds of ``fit`` and the path
taken.

Run from the repository root (one BLAS thread; about 5 minutes a seed at
``d = 2·10⁴`` on 2 cores, 1.5 GB)::

    OPENBLAS_NUM_THREADS=1 nice python benchmarks/bench_sparse_paths.py \\
        --shape 5000,50000,50 --seeds 0,1,2
    OPENBLAS_NUM_THREADS=1 nice python benchmarks/bench_sparse_paths.py \\
        --shape 20000,200000,50 --seeds 0,1,2
    python benchmarks/bench_sparse_paths.py --tiny     # smoke run
"""

import argparse
import json
import math
import time
import warnings

import numpy as np
from bench_wide import reference_components  # benchmarks/ is on the path
from scipy import sparse

from sklearn_dppca import BudgetAccountant, CoherentPowerPCA, PrivatePCA
from sklearn_dppca.metrics import principal_angle_sin

#: topic weights: 10 strong (4 to 2), 40 weak (1 to 0.5); a tenth of the rows
#: in no topic
WEIGHTS = np.r_[np.geomspace(4, 2, 10), np.geomspace(1, 0.5, 40)]
BACKGROUND = 0.1
FITS = {
    "matrix_free": lambda k: PrivatePCA(k, path="matrix_free"),
    "noisy_power": lambda k: PrivatePCA(k, path="noisy_power"),
    "CoherentPowerPCA()": lambda k: CoherentPowerPCA(k),
}
#: ``--tiny``: (d, n, m) at a smoke-test size, k = 10 only
TINY = (600, 4000, 10)


def make_rows(n, d, m, seed):
    """The binary CSR topic mixture (see the module's docstring) and its
    public ``data_norm``."""
    if d < WEIGHTS.size * m:
        raise ValueError(f"d = {d} < {WEIGHTS.size} topics × m = {m} columns")
    rng = np.random.default_rng(seed)
    topics, half = WEIGHTS.size, m // 2
    p = (1.0 - BACKGROUND) * WEIGHTS / WEIGHTS.sum()
    support = rng.permutation(d)[:topics * m].reshape(topics, m)
    topic = rng.choice(topics + 1, size=n, p=np.r_[p, BACKGROUND])
    blocks = []
    for start in range(0, n, 20_000):
        rows = topic[start:start + 20_000]
        b = rows.size
        uniform = rng.integers(d, size=(b, m))
        own = np.argsort(rng.random((b, m)), axis=1)[:, :half]
        topical = support[np.minimum(rows, topics - 1)[:, None], own]
        columns = np.where((rows < topics)[:, None],
                           np.c_[topical, uniform[:, half:]], uniform)
        block = sparse.csr_matrix(
            (np.ones(b * m), columns.ravel(), np.arange(0, b * m + 1, m)),
            shape=(b, d))
        block.sum_duplicates()
        block.data[:] = 1.0
        blocks.append(block)
    return sparse.vstack(blocks, format="csr"), math.sqrt(m)


def run(d, n, m, seeds, ks=(10, 50), epsilons=(1.0, 3.0), fits=tuple(FITS)):
    """One dict per fit: shape, seed, k, ε, fit, ``sin``, ``seconds``, ``path``."""
    for seed in seeds:
        X, data_norm = make_rows(n, d, m, 1000 + seed)
        reference = reference_components(X, max(ks))
        for k in ks:
            for eps in epsilons:
                for name in fits:
                    est = FITS[name](k).set_params(
                        epsilon=eps, delta=1e-6, data_norm=data_norm,
                        random_state=seed, accountant=BudgetAccountant())
                    start = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # the fixed seed's warning
                        est.fit(X)
                    yield dict(d=d, n=n, m=m, nnz=int(X.nnz), seed=seed, k=k,
                               eps=eps, fit=name,
                               sin=float(principal_angle_sin(est.components_,
                                                             reference[:k])),
                               seconds=time.perf_counter() - start,
                               path=getattr(est, "path_", None))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="5000,50000,50", metavar="D,N,M",
                        help="features, rows, ones per row")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--ks", default="10,50")
    parser.add_argument("--epsilons", default="1,3")
    parser.add_argument("--fits", default=",".join(FITS),
                        help=f"some of {', '.join(FITS)}")
    parser.add_argument("--tiny", action="store_true", help="smoke test size")
    args = parser.parse_args(argv)
    d, n, m = TINY if args.tiny else (int(v) for v in args.shape.split(","))
    ks = (10,) if args.tiny else tuple(int(v) for v in args.ks.split(","))
    for row in run(d, n, m, [int(v) for v in args.seeds.split(",")], ks,
                   tuple(float(v) for v in args.epsilons.split(",")),
                   tuple(args.fits.split(","))):
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
