"""After the fit on wide rows: ``score`` and the search's validation scores
beside scikit-learn's ``PCA.score``, in one process (issue 31).

scikit-learn's ``PCA.score_samples`` forms the model's ``d × d`` precision
matrix and multiplies every centred row by it (``O(n d²)`` time, ``d²``
memory beside two ``n × d`` copies); ours computes the same log-likelihood
from the ``k`` components (``O(n d k)``, blocks of rows; sparse rows
implicitly centred, never densified). For each case the script fits
``PCA(k)`` and ``PrivatePCA(k, epsilon=1)`` (``path="noisy_power"``, a fast
fit: the method timed is the same whatever the path), then times
``score(X)`` of each (median of ``--repeats``) and its peak memory
(``tracemalloc``, one more call), and prints the ratios ours/scikit-learn.
It also times :func:`sklearn_dppca.model_selection.captured_variance_rows`,
the private search's per-row validation score, on the same rows.
scikit-learn refuses sparse rows in ``score``: its cells say so.

Cases, with ``bench_wide.py``'s data: its planted spikes, dense 2 000 ×
5 000 and 4 000 × 10 000, and its binary topic rows, CSR 10⁵ × 2·10⁴ at 1%
(``--quick``: 500 × 1 000, 1 000 × 2 000, 2 000 × 5 000 CSR). One BLAS
thread unless ``--blas-threads`` says otherwise.

Run it with::

    python benchmarks/bench_score.py            # about four minutes
    python benchmarks/bench_score.py --quick    # seconds
"""

import argparse
import statistics
import time
import tracemalloc
import warnings

from bench_wide import make_spiked, make_topics  # benchmarks/ is on the path
from sklearn.decomposition import PCA
from threadpoolctl import threadpool_limits

from sklearn_dppca import BudgetAccountant, PrivatePCA
from sklearn_dppca.model_selection import captured_variance_rows

FULL = [("dense", 2000, 5000), ("dense", 4000, 10_000), ("csr", 100_000, 20_000)]
QUICK = [("dense", 500, 1000), ("dense", 1000, 2000), ("csr", 2000, 5000)]
K = 10


def make(kind, n, d, seed=0):
    """The case's rows and public ``data_norm``: ``bench_wide.py``'s planted
    spikes (dense) or its topic rows at 1% (CSR)."""
    X, meta = (make_topics(n, d, 0.01, seed) if kind == "csr"
               else make_spiked(n, d, seed))
    return X, meta["data_norm"]


def measure(call, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    tracemalloc.start()
    try:
        call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return statistics.median(times), peak


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="BLAS threads (0: the library's default)")
    args = parser.parse_args(argv)
    limit = None if args.blas_threads == 0 else args.blas_threads
    print(f"k = {K}, BLAS threads: {limit or 'default'}, median of {args.repeats}")
    print(f"{'case':<24} {'fit':<8} {'score':>10} {'peak MB':>9} "
          f"{'time ratio':>11} {'peak ratio':>11} {'rows score':>11}")
    with threadpool_limits(limits=limit), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixed seed's PrivacyLeakWarning
        for kind, n, d in QUICK if args.quick else FULL:
            X, bound = make(kind, n, d)
            ours = PrivatePCA(K, epsilon=1.0, delta=1e-6, data_norm=bound,
                              path="noisy_power", random_state=0,
                              accountant=BudgetAccountant()).fit(X)
            name = f"{kind} {n} x {d}"
            rows_time, _ = measure(lambda: captured_variance_rows(
                X, ours.mean_, ours.components_, bound), args.repeats)
            mine = measure(lambda: ours.score(X), args.repeats)
            if kind == "csr":
                theirs = None
            else:
                reference = PCA(K).fit(X)
                theirs = measure(lambda: reference.score(X), args.repeats)
                print(f"{name:<24} {'sklearn':<8} {theirs[0]:>9.3f}s "
                      f"{theirs[1] / 2**20:>9.0f}")
            ratios = (f"{mine[0] / theirs[0]:>11.4f} {mine[1] / theirs[1]:>11.3f}"
                      if theirs else f"{'(refuses':>11} {'sparse)':>11}")
            print(f"{name:<24} {'ours':<8} {mine[0]:>9.3f}s {mine[1] / 2**20:>9.0f} "
                  f"{ratios} {rows_time:>10.3f}s")


if __name__ == "__main__":
    main()
