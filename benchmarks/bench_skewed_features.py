"""Skewed features through ``PrivateStandardScaler → PrivatePCA``: the box's bias.

The example of docs/choosing.rst ("That box cuts **skewed** features"). On a
table of four features (``make_table``, below: 20 000 rows by default)

=======  ================================================================
income   ``exp(10.4 + 0.012 (age − 46) + 0.7 w)``, clipped to [0, 500 000]
         (log-normal)
age      ``N(46, 16)`` rounded, clipped to [18, 90]
visits   negative binomial of shape 0.5 and mean
         ``exp(1 + 0.5 w + 0.01 (age − 46))``, clipped to [0, 365]
score    ``round(3 + 0.6 w + 0.8 N(0, 1))``, clipped to [1, 5]
=======  ================================================================

(``w`` a latent ``N(0, 1)`` shared by income, visits and score; the
clipping ranges are the features' public ranges), it fits at a pipeline
budget ε ∈ {∞, 3, 0.5}:

- ``PrivateStandardScaler(bounds=ranges, epsilon=0.3 ε) →
  PrivatePCA(3, epsilon=0.7 ε, bounds=B)`` (the docs' example, its ε split
  0.3 / 0.7) with ``B = (−3, 3)`` and ``(−10, 10)``, on the raw table and
  on the table with ``np.log1p`` of income and visits (the scaler then gets
  the mapped ranges);
- ``PublicScaler(ranges) → PrivatePCA(3, epsilon=ε, bounds=(0, 1))``, raw and
  logged, for comparison.

Reported: the sine of the largest principal angle between the pipeline's
top 2 components and those of the non-private PCA on the exactly scaled
table (``StandardScaler`` on the same raw or logged table; for the
public-range rows, ``PCA`` on the range-scaled table), median [min, max]
over the noise seeds (scaler seeded ``s``, PCA ``10 000 + s``; ε = ∞ is one
fit); and, per feature, the skew and the share of rows beyond 3 and 10
standard deviations (what the box clips). The data has its own seed
(``--data-seed``).

Run from the repository root::

    python benchmarks/bench_skewed_features.py            # 20 noise seeds, ~15 s
    python benchmarks/bench_skewed_features.py --quick    # 2 seeds, 5 000 rows
    python benchmarks/bench_skewed_features.py --data-seed 1
"""

import argparse
import math
import warnings

import numpy as np
from sklearn.decomposition import PCA
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_dppca import BudgetAccountant, PrivatePCA
from sklearn_dppca.metrics import principal_angle_sin
from sklearn_dppca.preprocessing import PrivateStandardScaler, PublicScaler

FEATURES = ["income", "age", "visits", "score"]
LOWER = np.array([0.0, 18.0, 0.0, 1.0])  # the public ranges
UPPER = np.array([500_000.0, 90.0, 365.0, 5.0])
LOGGED = [0, 2]  # income, visits
EPSILONS = (math.inf, 3.0, 0.5)
#: the share of the pipeline's ε that the private scaler spends
SCALER_SHARE = 0.3


def make_table(n=20_000, seed=0):
    """Income, age, visits and score (the docstring's model), ``(n, 4)``."""
    rng = np.random.default_rng(seed)
    age = np.clip(rng.normal(46, 16, n), 18, 90).round()
    w = rng.normal(size=n)
    income = np.clip(np.exp(10.4 + 0.012 * (age - 46) + 0.7 * w), 0, 500_000)
    mean_visits = np.exp(1.0 + 0.5 * w + 0.01 * (age - 46))
    shape = 0.5
    visits = np.clip(rng.negative_binomial(shape, shape / (shape + mean_visits)),
                     0, 365)
    score = np.clip(np.round(3 + 0.6 * w + 0.8 * rng.normal(size=n)), 1, 5)
    return np.column_stack([income, age, visits.astype(float), score])


def log_map(X):
    """``np.log1p`` of income and visits: a public map of each row."""
    X = X.copy()
    X[:, LOGGED] = np.log1p(X[:, LOGGED])
    return X


def log_ranges():
    lower, upper = LOWER.copy(), UPPER.copy()
    lower[LOGGED], upper[LOGGED] = np.log1p(LOWER[LOGGED]), np.log1p(UPPER[LOGGED])
    return lower, upper


def private_scaled(X, ranges, epsilon, box, seed):
    """Top 2 of ``PrivateStandardScaler → PrivatePCA(3, bounds=box)``."""
    share = SCALER_SHARE * epsilon, (1 - SCALER_SHARE) * epsilon
    pipe = make_pipeline(
        PrivateStandardScaler(bounds=ranges, epsilon=share[0], random_state=seed,
                              accountant=BudgetAccountant()),
        PrivatePCA(3, epsilon=share[1], bounds=box, random_state=10_000 + seed,
                   accountant=BudgetAccountant()))
    return pipe.fit(X)[-1].components_[:2]


def public_scaled(X, ranges, epsilon, seed):
    """Top 2 of ``PublicScaler(ranges) → PrivatePCA(3, bounds=(0, 1))``."""
    pipe = make_pipeline(
        PublicScaler(ranges),
        PrivatePCA(3, epsilon=epsilon, bounds=(0, 1), random_state=10_000 + seed,
                   accountant=BudgetAccountant()))
    return pipe.fit(X)[-1].components_[:2]


def exact_top2(X_scaled):
    return PCA(3).fit(X_scaled).components_[:2]


def pipelines(raw):
    """``[(label, fit(ε, seed) → top 2, exact top 2)]``, the table's rows."""
    logged, ranges, log_r = log_map(raw), (LOWER, UPPER), log_ranges()
    ref = {"raw": exact_top2(StandardScaler().fit_transform(raw)),
           "log": exact_top2(StandardScaler().fit_transform(logged)),
           "raw public": exact_top2(PublicScaler(ranges).fit_transform(raw)),
           "log public": exact_top2(PublicScaler(log_r).fit_transform(logged))}
    rows = []
    for label, X, r, key in (("raw", raw, ranges, "raw"),
                             ("log1p", logged, log_r, "log")):
        for box in ((-3, 3), (-10, 10)):
            rows.append((f"{label}, box {box}", ref[key],
                         lambda e, s, X=X, r=r, box=box:
                         private_scaled(X, r, e, box, s)))
    for label, X, r, key in (("raw", raw, ranges, "raw public"),
                             ("log1p", logged, log_r, "log public")):
        rows.append((f"{label}, public ranges", ref[key],
                     lambda e, s, X=X, r=r: public_scaled(X, r, e, s)))
    return rows


def run(n_rows, seeds, data_seed=0, epsilons=EPSILONS):
    """``{label: {ε: [sine per seed]}}`` (one value at ε = ∞)."""
    raw = make_table(n_rows, data_seed)
    results = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seeded fits, ε = ∞: PrivacyLeakWarning
        for label, reference, fit in pipelines(raw):
            results[label] = {
                eps: [principal_angle_sin(fit(eps, s), reference)
                      for s in ([0] if math.isinf(eps) else seeds)]
                for eps in epsilons}
    return raw, results


def tails(raw):
    lines = []
    for j, name in enumerate(FEATURES):
        z = (raw[:, j] - raw[:, j].mean()) / raw[:, j].std()
        lines.append(f"{name:<7} skew {np.mean(z ** 3):5.2f}, rows beyond 3 sd "
                     f"{np.mean(np.abs(z) > 3):.4f}, beyond 10 sd "
                     f"{np.mean(np.abs(z) > 10):.4f}")
    return "\n".join(lines)


def summary(values):
    v = np.asarray(values)
    if v.size == 1:
        return f"{v[0]:.3f}"
    return f"{np.median(v):.3f} [{v.min():.3f}, {v.max():.3f}]"


def table(results, epsilons=EPSILONS):
    lines = ["| pipeline | " + " | ".join(f"ε = {e:g}" for e in epsilons) + " |",
             "|---|" + "---|" * len(epsilons)]
    for label, by_eps in results.items():
        lines.append(f"| {label} | "
                     + " | ".join(summary(by_eps[e]) for e in epsilons) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="noise seeds")
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--data-seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="2 seeds, 5 000 rows")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.rows = 2, 5_000
    seeds = range(args.seeds)
    raw, results = run(args.rows, seeds, args.data_seed)
    print(f"## {args.rows} rows, data seed {args.data_seed}\n")
    print(tails(raw))
    print(f"\n## sine(top 2, exact top 2): median [min, max] over {args.seeds} "
          f"noise seeds; the scaler spends {SCALER_SHARE:g} of ε\n")
    print(table(results))
    return results


if __name__ == "__main__":
    main()
