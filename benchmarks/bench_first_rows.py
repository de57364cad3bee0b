"""The first rows' centre against the mean released from every row.

On many rows (docs/privacy.rst §5, "The first rows") ``PrivatePCA`` takes the
centre it clips the rows around from the first rows, so that a numeric bound
reads every row once and ``data_norm="auto"`` twice. This script measures
what that costs in quality: the same fits with the first rows (the default)
and with every row for the mean (``_norm_plan.PILOT_FACTOR`` set to infinity,
the design before), on ``--rows`` × 50 rows with variances 0.09, 0.04, 0.02
and 0.01 (the others), in five orders and places:

- ``iid``: Gaussian rows around 0;
- ``+0.3``: the same plus 0.3 in every coordinate (raw norms about 2.3, so a
  numeric bound of 1 clips most rows around the origin);
- ``heavy``: a multivariate Student t with 3 degrees of freedom;
- ``sorted``: the ``iid`` rows sorted by their first feature (the first rows
  are the smallest);
- ``two groups``: half the rows plus 0.5, then half minus 0.5 (the first
  rows all come from one group);
- ``+2000``: the ``iid`` rows plus 2000 (``"auto"`` only).

For ``data_norm`` ∈ {1, ``"auto"``}, ε ∈ {1, 3} and ``--seeds`` seeds (default
3), ``n_components=3``, it prints the mean over seeds of ``sin θ`` (the
largest principal angle to the data's top 3 eigenvectors), the error of
``get_covariance()`` against the sample covariance (Frobenius), and the error
of ``mean_`` (Euclidean), for both designs, and the passes over every row
that a Dask fit of the same rows makes with the first rows (the fit's
progress lines, in memory; a Dask fit makes the same passes, less the
in-memory Gram matrix's own first pass with ``"auto"``).

Run from the repository root (about five minutes on two cores)::

    python benchmarks/bench_first_rows.py [--rows 400000] [--seeds 3]
"""

import argparse
import math
import warnings

import numpy as np

from sklearn_dppca import PrivacyLeakWarning, PrivatePCA, _norm_plan
from sklearn_dppca.privacy import BudgetAccountant


def datasets(n, seed=1):
    rng = np.random.default_rng(seed)
    d = 50
    lam = np.r_[9.0, 4.0, 2.0, np.ones(d - 3)] * 0.01
    Z = rng.normal(size=(n, d)) * np.sqrt(lam)
    heavy = Z / np.sqrt(rng.chisquare(3, size=(n, 1)) / 3)
    return {
        "iid": Z,
        "+0.3": Z + 0.3,
        "heavy": heavy,
        "sorted": Z[np.argsort(Z[:, 0])],
        "two groups": np.r_[Z[: n // 2] + 0.5, Z[n // 2:] - 0.5],
        "+2000": Z + 2000.0,
    }


def sin_theta(components, basis):
    cosines = np.linalg.svd(components @ basis, compute_uv=False)
    return float(np.sqrt(max(0.0, 1.0 - cosines.min() ** 2)))


def measure(X, data_norm, epsilon, seeds, first_rows):
    """Mean (sin θ, covariance error, mean error) over seeds, and passes."""
    centred = X - X.mean(axis=0)
    covariance = centred.T @ centred / (X.shape[0] - 1)
    basis = np.linalg.eigh(covariance)[1][:, ::-1][:, :3]
    factor = _norm_plan.PILOT_FACTOR
    _norm_plan.PILOT_FACTOR = factor if first_rows else math.inf
    try:
        scores, passes = [], 0
        for seed in range(seeds):
            lines = []
            fit = PrivatePCA(3, epsilon=epsilon, data_norm=data_norm,
                             random_state=seed, accountant=BudgetAccountant())
            fit._fit(X, progress=lines.append)
            passes = max(passes, sum(line.startswith("pass ") for line in lines))
            scores.append((sin_theta(fit.components_, basis),
                           np.linalg.norm(fit.get_covariance() - covariance),
                           np.linalg.norm(fit.mean_ - X.mean(axis=0))))
        return np.mean(scores, axis=0), passes
    finally:
        _norm_plan.PILOT_FACTOR = factor


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", PrivacyLeakWarning)
    print(f"{args.rows} rows x 50, {args.seeds} seeds; every row for the mean | "
          "the first rows (passes in memory)")
    print("| data | data_norm | ε | sin θ | cov. error | mean error | sin θ | "
          "cov. error | mean error | passes |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, X in datasets(args.rows).items():
        for data_norm in (1.0, "auto"):
            if name == "+2000" and data_norm == 1.0:
                continue  # a bound of 1 for rows 14 000 from the origin
            for epsilon in (1.0, 3.0):
                whole, _ = measure(X, data_norm, epsilon, args.seeds, False)
                first, passes = measure(X, data_norm, epsilon, args.seeds, True)
                print(f"| {name} | {data_norm} | {epsilon:g} | " + " | ".join(
                    f"{v:.3g}" for v in (*whole, *first)) + f" | {passes} |",
                    flush=True)


if __name__ == "__main__":
    main()
