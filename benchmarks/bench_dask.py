"""Fit on a Dask array that is never materialised, and measure the client.

The array (default 1 000 000 × 100 = 10⁸ float64 elements, 800 MB) is generated
chunk by chunk on the workers of a ``dask.distributed.LocalCluster`` (worker
processes) by ``dask.array.random``: no process ever holds more than a few
chunks. The script fits ``PrivatePCA`` (and ``CoherentPowerPCA`` with fixed
``(R, T)``) on it and reports, for the client process:

- wall time of the fit;
- peak memory traced by ``tracemalloc`` during the fit (Python and NumPy
  allocations of the client: the O(d²) statistics and noise), and the growth of
  its resident set size (``psutil``), against the array's size.

Run from the repository root with the ``dask`` extra installed::

    python benchmarks/bench_dask.py            # 10⁸ elements
    python benchmarks/bench_dask.py --quick    # 10⁷ elements
"""

import argparse
import time
import tracemalloc
import warnings

import numpy as np
import psutil


def fit_and_measure(make_estimator, X):
    process = psutil.Process()
    rss_before = process.memory_info().rss
    tracemalloc.start()
    start = time.perf_counter()
    estimator = make_estimator().fit(X)
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_growth = process.memory_info().rss - rss_before
    return estimator, elapsed, peak, rss_growth


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--chunk-rows", type=int, default=50_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="10x fewer rows")
    args = parser.parse_args()
    rows = args.rows // 10 if args.quick else args.rows

    import dask
    import dask.array as da
    import distributed

    from sklearn_dppca import CoherentPowerPCA, PrivacyLeakWarning, PrivatePCA

    warnings.simplefilter("ignore", PrivacyLeakWarning)
    with distributed.LocalCluster(
        n_workers=args.workers, threads_per_worker=1, processes=True,
        dashboard_address=":0",
    ) as cluster, distributed.Client(cluster):
        spectrum = 1.0 / np.sqrt(np.arange(1, args.features + 1))
        rng = da.random.default_rng(0)
        X = rng.normal(size=(rows, args.features),
                       chunks=(args.chunk_rows, args.features)) * (spectrum / 4)
        size = rows * args.features * 8
        print(f"dask {dask.__version__}, distributed {distributed.__version__}, "
              f"{args.workers} worker processes")
        print(f"array: {rows} x {args.features} = {rows * args.features:.2e} "
              f"elements ({size / 1e6:.0f} MB), chunks of {args.chunk_rows} rows, "
              "generated on the workers, never materialised\n")
        print(f"{'estimator':>26} {'time':>8} {'client peak (traced)':>21} "
              f"{'client RSS growth':>18}")
        for name, make in [
            ("PrivatePCA", lambda: PrivatePCA(5, data_norm=1.0)),
            ("CoherentPowerPCA R,T=2", lambda: CoherentPowerPCA(
                5, data_norm=1.0, clip_radius=0.01, n_iter=2)),
        ]:
            _, elapsed, peak, rss = fit_and_measure(make, X)
            print(f"{name:>26} {elapsed:>7.1f}s {peak / 1e6:>15.1f} MB "
                  f"({peak / size:.4f}x) {rss / 1e6:>11.1f} MB")


if __name__ == "__main__":
    main()
