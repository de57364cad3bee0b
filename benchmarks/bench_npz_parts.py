"""``dppca fit`` on a sparse matrix saved whole and in ``.npz`` row blocks
read with ``--dask``, against scikit-learn's ``PCA()`` on the same matrix.

The matrix is ``bench_wide.py``'s ``csr-1pct`` case (binary topic rows,
10⁵ × 2·10⁴ at 1%; ``--size quick`` and ``tiny`` are smaller), written
uncompressed (``scipy.sparse.save_npz(..., compressed=False)``) as one file
and as ``--parts`` files of consecutive rows into a temporary directory.
Each fit runs in its own process, in rounds (A, B, C, A, B, C, ...):

- ``PCA()``: ``load_npz`` then ``PCA(k).fit`` (ARPACK on sparse rows);
- ``dppca fit all.npz``: the CLI reading the matrix whole (in memory);
- ``dppca fit parts/ --dask``: the CLI reading one file per chunk.

It prints each one's fastest time and the largest peak resident memory of
its runs (the process's ``ru_maxrss``, the rows included, from
``os.wait4``), and their ratios to ``PCA()``'s. One BLAS thread by
default (``--blas-threads``)::

    python benchmarks/bench_npz_parts.py                 # full size, ~4 minutes
    python benchmarks/bench_npz_parts.py --size quick --repeats 1
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

from scipy import sparse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_wide import make_case  # noqa: E402

SKLEARN = """
import sys
from scipy import sparse
from sklearn.decomposition import PCA
PCA(int(sys.argv[2])).fit(sparse.load_npz(sys.argv[1]))
"""


def timed(command, env):
    """Seconds and peak resident bytes of ``command`` run to its end."""
    # stderr to a file: a pipe read only after the wait could fill and block
    with tempfile.TemporaryFile() as errors:
        start = time.perf_counter()
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                stderr=errors)
        _, status, usage = os.wait4(proc.pid, 0)  # reaped here, with its usage
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            errors.seek(0)
            raise RuntimeError(f"{command} failed:\n{errors.read().decode()}")
    return seconds, usage.ru_maxrss * 1024


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=["full", "quick", "tiny"], default="full")
    parser.add_argument("--parts", type=int, default=10)
    parser.add_argument("-k", type=int, default=10)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--blas-threads", type=int, default=1)
    args = parser.parse_args(argv)

    X, meta = make_case("csr-1pct", args.size, seed=0)
    env = dict(os.environ, **{name: str(args.blas_threads) for name in (
        "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    with tempfile.TemporaryDirectory() as folder:
        whole = os.path.join(folder, "all.npz")
        parts = os.path.join(folder, "parts")
        os.mkdir(parts)
        sparse.save_npz(whole, X, compressed=False)
        bounds = [X.shape[0] * i // args.parts for i in range(args.parts + 1)]
        for i, (a, b) in enumerate(zip(bounds, bounds[1:])):
            sparse.save_npz(os.path.join(parts, f"part-{i:03d}.npz"), X[a:b],
                            compressed=False)
        del X
        fit = [sys.executable, "-m", "sklearn_dppca", "fit"]
        options = ["-k", str(args.k), "--epsilon", str(args.epsilon), "--delta",
                   "1e-6", "--data-norm", str(meta["data_norm"]), "-q", "--force",
                   "-o", os.path.join(folder, "model.json")]
        runs = {
            "PCA() (ARPACK)": [sys.executable, "-c", SKLEARN, whole, str(args.k)],
            "dppca fit all.npz": fit + [whole] + options,
            f"dppca fit parts/ --dask ({args.parts} files)": fit + [parts, "--dask"]
            + options,
        }
        best = {name: (float("inf"), 0) for name in runs}
        for _ in range(args.repeats):
            for name, command in runs.items():
                seconds, peak = timed(command, env)
                best[name] = (min(best[name][0], seconds), max(best[name][1], peak))
    print(f"{meta['description']}, {meta['shape'][0]} x {meta['shape'][1]}, "
          f"k = {args.k}, epsilon = {args.epsilon:g}, {args.blas_threads} BLAS "
          f"thread(s), fastest of {args.repeats}; peak resident memory")
    base_time, base_peak = best["PCA() (ARPACK)"]
    for name, (seconds, peak) in best.items():
        print(f"{name:40s} {seconds:7.2f} s {peak / 2**30:6.2f} GB   "
              f"{seconds / base_time:5.2f}x  {peak / base_peak:5.2f}x")


if __name__ == "__main__":
    main()
