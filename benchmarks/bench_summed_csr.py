"""The summed CSR copy of CSC rows that store a cell more than once
(``sklearn_dppca._rows.summed_csr``), against SciPy's ``X.tocsr()`` then
``sum_duplicates()`` in the same process.

SciPy's way holds an unsummed CSR copy beside the summed one, outside a
fit's memory plan; ``summed_csr`` sums a part of the columns at a time into
the copy the plan counts (docs/scaling.rst). This prints its time, SciPy's
(the median of ``--repeats`` runs each, alternating), their ratio, and
whether the two copies are the same arrays bit for bit, on CSC matrices
that store every cell twice (each value halved)::

    python benchmarks/bench_summed_csr.py   # 10⁵ × 100 at 5%, 10⁴ × 10⁴ at 0.1%
    python benchmarks/bench_summed_csr.py --repeats 9 --shapes 100000x100x0.05
"""

import argparse
import time

import numpy as np
from scipy import sparse

from sklearn_dppca._rows import summed_csr


def stored_twice(n, d, density, seed=0):
    """A CSC matrix storing each of its cells twice, halves summing to it."""
    base = sparse.random(n, d, density=density, format="csc", random_state=seed)
    return sparse.csc_matrix((np.repeat(base.data / 2, 2), np.repeat(base.indices, 2),
                              2 * base.indptr), shape=(n, d))


def scipy_summed(X):
    Y = X.tocsr()
    Y.sum_duplicates()
    return Y


def median_times(functions, repeats):
    """The median time of each function, run alternately ``repeats`` times."""
    times = [[] for _ in functions]
    for _ in range(repeats):
        for f, kept in zip(functions, times):
            start = time.perf_counter()
            f()
            kept.append(time.perf_counter() - start)
    return [float(np.median(t)) for t in times]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--shapes", nargs="+",
                        default=["100000x100x0.05", "10000x10000x0.001"],
                        help="NxDxDENSITY of the summed matrix")
    args = parser.parse_args(argv)
    for shape in args.shapes:
        n, d, density = shape.split("x")
        X = stored_twice(int(n), int(d), float(density))
        ours, scipy_time = median_times(
            [lambda: summed_csr(X), lambda: scipy_summed(X)], args.repeats)
        a, b = summed_csr(X), scipy_summed(X)
        same = all(np.array_equal(getattr(a, k), getattr(b, k))
                   for k in ("data", "indices", "indptr"))
        print(f"{shape}: summed_csr {ours * 1e3:.1f} ms, "
              f"SciPy {scipy_time * 1e3:.1f} ms, ratio {ours / scipy_time:.2f}, "
              f"same arrays: {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
