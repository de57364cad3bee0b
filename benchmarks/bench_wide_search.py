"""A private search over ``n_components`` on wide rows: its time and memory.

The figure of docs/model_selection.rst ("Candidate fits"): from 2 048
features the search's shared fold fit keeps the grid's largest
``n_components`` instead of every component, which makes a search on wide
rows take seconds and about a gigabyte rather than a ``d × d``
eigendecomposition per fold.

The search: ``PrivateGridSearchCV(PrivatePCA(data_norm=1), {"n_components":
[5, 10, 20]}, cv=3, epsilon=1, random_state=0)`` (``delta=1e-6``, refit
included), fitted once, on dense float64 rows of shape ``--rows`` ×
``--features`` (default 2 000 × 20 000; ``make_rows``, below): a rank-30
signal (standard deviations 5 down to 2 in a random orthonormal basis) plus
isotropic noise of standard deviation 0.05, scaled so the longest row has
norm 1; seed 0.

Printed: the shape and X's size; the wall and CPU time of ``fit`` (CPU time
of every thread of the process; on a shared machine it moves less than wall
time); the process's peak resident memory at the end (``ru_maxrss``: X, the
interpreter and the libraries included) and what the fit added to the
resident memory it started from (Linux: the high-water mark ``VmHWM``,
reset through ``/proc/self/clear_refs`` before the fit, minus ``VmRSS``
then; it counts LAPACK's and BLAS's work arrays); with ``--tracemalloc``,
also the peak of Python-traced allocations during the fit (NumPy's buffers
are traced; slows the fit a little). The rows are generated in blocks, so
that generating them does not set the process's peak. ``--blas-threads``
sets the BLAS threads (default: the library's own).

Run from the repository root::

    python benchmarks/bench_wide_search.py --blas-threads 1  # 2 000 x 20 000, ~1 min
    python benchmarks/bench_wide_search.py                   # BLAS's own threads
    python benchmarks/bench_wide_search.py --quick           # 300 x 3 000, seconds
"""

import argparse
import contextlib
import time
import tracemalloc
import warnings

import numpy as np
from bench_wide import (  # memory readings of this process
    _maxrss_bytes,
    _reset_high_water_mark,
    _status_kb,
    _trim_heap,
)
from threadpoolctl import threadpool_limits

from sklearn_dppca import BudgetAccountant, PrivatePCA
from sklearn_dppca.model_selection import PrivateGridSearchCV

GRID = [5, 10, 20]
RANK = 30


def make_rows(n, d, seed=0, block=256):
    """Rank-30 signal plus noise, longest row of norm 1, ``(n, d)``."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.normal(size=(d, RANK)))[0]
    spread = np.linspace(5.0, 2.0, RANK)
    X = np.empty((n, d))
    for start in range(0, n, block):
        rows = min(block, n - start)
        X[start: start + rows] = (rng.normal(size=(rows, RANK)) * spread) @ basis.T
        X[start: start + rows] += 0.05 * rng.normal(size=(rows, d))
    X /= np.linalg.norm(X, axis=1).max()
    return X


def measure(X, trace=False):
    """Fit the search on ``X``: its seconds, memory and pick."""
    search = PrivateGridSearchCV(
        PrivatePCA(data_norm=1.0), {"n_components": GRID}, cv=3, epsilon=1.0,
        random_state=0, accountant=BudgetAccountant())
    _trim_heap()
    resettable = _reset_high_water_mark()
    before = _status_kb("VmRSS") if resettable else None
    if trace:
        tracemalloc.start()
    wall, cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seeded: PrivacyLeakWarning
        search.fit(X)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    result = dict(wall_s=wall, cpu_s=cpu, peak_rss_bytes=_maxrss_bytes(),
                  best=search.best_params_["n_components"])
    if resettable:
        result["fit_added_bytes"] = _status_kb("VmHWM") - before
    if trace:
        result["traced_bytes"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000)
    parser.add_argument("--features", type=int, default=20_000)
    parser.add_argument("--quick", action="store_true", help="300 x 3 000")
    parser.add_argument("--blas-threads", type=int, default=0,
                        help="BLAS threads (0: the library's default)")
    parser.add_argument("--tracemalloc", action="store_true",
                        help="also the traced peak of the fit")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.features = 300, 3_000
    X = make_rows(args.rows, args.features)
    limits = (threadpool_limits(limits=args.blas_threads, user_api="blas")
              if args.blas_threads else contextlib.nullcontext())
    with limits:
        result = measure(X, args.tracemalloc)
    threads = args.blas_threads or "the library's default"
    print(f"{args.rows} x {args.features} (X {X.nbytes / 1e9:.2f} GB), cv=3, "
          f"n_components in {GRID}, BLAS threads: {threads}")
    print(f"fit: {result['wall_s']:.1f} s wall, {result['cpu_s']:.1f} s CPU; "
          f"peak RSS {result['peak_rss_bytes'] / 1e9:.2f} GB", end="")
    if "fit_added_bytes" in result:
        print(f" (the fit added {result['fit_added_bytes'] / 1e9:.2f} GB)", end="")
    if "traced_bytes" in result:
        print(f"; traced peak {result['traced_bytes'] / 1e9:.2f} GB", end="")
    print(f"; best n_components {result['best']}")
    return result


if __name__ == "__main__":
    main()
