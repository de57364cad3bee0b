"""Benchmark ``PrivateGridSearchCV``: does a private search pick the planted rank?

1. **Planted rank.** For ``k ∈ {2, 5, 10}``, ``d = 50``, ``n = 50 000`` and
   seeds 0–9: Gaussian rows with covariance ``τ (Q diag(s) Qᵀ)``, ``Q`` a
   random rotation, ``s_j`` from 5 down to 3 for the ``k`` spikes (``4`` for
   ``k = 1``) and 1 for the ``d − k`` floor directions, scaled so the longest
   row has norm 1 (``data_norm=1``). Every method searches
   ``n_components ∈ {1, …, 15}`` with 5 folds:

   - ``private`` — ``PrivateGridSearchCV(PrivatePCA(data_norm=1),
     epsilon=ε)``: the whole search, refit included, is ``(ε, 1e-6)``-DP;
   - ``GridSearchCV(PrivatePCA)`` — scikit-learn's search over the same grid,
     each of its 76 fits at the ``ε`` that makes the fits compose to ``ε``
     (``gdp_epsilon(gdp_mu(ε)/√76)``), scored by ``PrivatePCA.score`` (the
     probabilistic-PCA log-likelihood) **without noise**: its choice is not
     private;
   - ``GridSearchCV(PCA)`` — the non-private reference, scikit-learn's PCA
     and its log-likelihood score;
   - ``fixed k = 5`` — a public guess, ``PrivatePCA(5, epsilon=ε)`` on all
     rows; and ``oracle`` — ``PrivatePCA(k, epsilon=ε)``, knowing ``k``.

   The two GridSearchCV baselines (76 fits each) run on the first
   ``--baseline-seeds`` seeds only (default 2), ``GridSearchCV(PrivatePCA)``
   at the largest ``ε`` only, to keep the run short.

   Reported: how often each search picks ``k`` (of 10 seeds) and the mean
   projection distance ``‖X̂X̂ᵀ − VVᵀ‖_F`` of the refitted (or fixed)
   components to the planted subspace ``V`` (0 is perfect; a wrong rank
   costs at least ``√|k̂ − k|``).
2. **Bundled datasets** (``sklearn_dppca.datasets.load_real_dataset``, their
   recommended ``data_norm``): the median and range of the private pick over
   10 seeds against ``GridSearchCV(PCA)``'s pick, grid
   ``{1, …, min(15, d)}``.

Run from the repository root::

    python benchmarks/bench_model_selection.py            # full (~5 min alone)
    python benchmarks/bench_model_selection.py --quick    # 2 seeds, n = 20 000
    python benchmarks/bench_model_selection.py --out docs/_static/model_selection

``--out`` writes ``results.csv`` (one row per fit), ``summary.csv`` (the
table printed, shown in ``docs/model_selection.rst``) and ``picks.png`` (pick
frequencies); ``--append`` adds to an existing ``results.csv``, so the parts
can run separately (``--ks 2``, ``--ks 5``, ``--ks 10``, then ``--ks`` alone
for the bundled datasets), each within a few minutes.
"""

import argparse
import csv
import math
import sys
import warnings
from pathlib import Path

import numpy as np
from sklearn.decomposition import PCA
from sklearn.model_selection import GridSearchCV

from sklearn_dppca import BudgetAccountant, PrivacyLeakWarning, PrivatePCA
from sklearn_dppca.datasets import REAL_DATASETS, load_real_dataset
from sklearn_dppca.metrics import projection_distance
from sklearn_dppca.model_selection import PrivateGridSearchCV
from sklearn_dppca.privacy import gdp_epsilon, gdp_mu

DELTA = 1e-6
GRID = list(range(1, 16))
FIXED_K = 5


def planted(n, d, k, seed):
    """Rows with ``k`` spikes of 5…3 times an isotropic floor, in the unit ball."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.normal(size=(d, d)))
    scale = np.ones(d)
    scale[:k] = np.linspace(5.0, 3.0, k) if k > 1 else 4.0
    X = (rng.normal(size=(n, d)) * np.sqrt(scale)) @ basis.T
    X /= np.linalg.norm(X, axis=1).max()
    return X, basis[:, :k].T


def private_search(X, epsilon, seed):
    return PrivateGridSearchCV(
        PrivatePCA(data_norm=1.0), {"n_components": GRID}, epsilon=epsilon,
        delta=DELTA, accountant=BudgetAccountant(), random_state=seed,
    ).fit(X)


def sklearn_search(X, epsilon, seed):
    fits = len(GRID) * 5 + 1
    per_fit = gdp_epsilon(gdp_mu(epsilon, DELTA) / math.sqrt(fits), DELTA)
    est = PrivatePCA(epsilon=per_fit, delta=DELTA, data_norm=1.0,
                     accountant=BudgetAccountant(), random_state=seed)
    return GridSearchCV(est, {"n_components": GRID}, cv=5,
                        error_score="raise").fit(X)


def planted_rows(n, seeds, epsilons, baseline_seeds, ks=(2, 5, 10)):
    rows = []
    for k in ks:
        for seed in seeds:
            X, V = planted(n, 50, k, seed)
            baseline = seed in baseline_seeds
            if baseline:
                exact = GridSearchCV(PCA(), {"n_components": GRID}, cv=5).fit(X)
                rows.append(dict(part="planted", data=f"k={k}", epsilon="inf",
                                 seed=seed, method="GridSearchCV(PCA)",
                                 pick=exact.best_params_["n_components"],
                                 distance=projection_distance(
                                     exact.best_estimator_.components_, V)))
            for eps in epsilons:
                fits = {"private": private_search(X, eps, seed)}
                if baseline and eps == max(epsilons):
                    fits["GridSearchCV(PrivatePCA)"] = sklearn_search(X, eps, seed)
                results = fits["private"].cv_results_
                released = results["released_test_score"]
                floor_only = released - results["mean_n_components"] * results[
                    "floor_per_component"]
                for method, scores in (("private, no penalty", released),
                                       ("private, floor only (z=0)", floor_only)):
                    rows.append(dict(part="planted", data=f"k={k}", epsilon=eps,
                                     seed=seed, method=method,
                                     pick=GRID[int(np.argmax(scores))],
                                     distance=""))
                for method, fit in fits.items():
                    rows.append(dict(part="planted", data=f"k={k}", epsilon=eps,
                                     seed=seed, method=method,
                                     pick=fit.best_params_["n_components"],
                                     distance=projection_distance(
                                         fit.best_estimator_.components_, V)))
                for method, kk in ((f"fixed k={FIXED_K}", FIXED_K), ("oracle", k)):
                    est = PrivatePCA(kk, epsilon=eps, delta=DELTA, data_norm=1.0,
                                     accountant=BudgetAccountant(),
                                     random_state=seed).fit(X)
                    rows.append(dict(part="planted", data=f"k={k}", epsilon=eps,
                                     seed=seed, method=method, pick=kk,
                                     distance=projection_distance(
                                         est.components_, V)))
            print(f"  planted k={k} seed={seed} done", file=sys.stderr, flush=True)
    return rows


def dataset_rows(seeds, epsilons):
    rows = []
    for name in REAL_DATASETS:
        data = load_real_dataset(name)
        X = data.data
        grid = list(range(1, min(15, X.shape[1]) + 1))
        exact = GridSearchCV(PCA(), {"n_components": grid}, cv=5).fit(X)
        rows.append(dict(part="dataset", data=name, epsilon="inf", seed=0,
                         method="GridSearchCV(PCA)",
                         pick=exact.best_params_["n_components"], distance=""))
        for eps in epsilons:
            for seed in seeds:
                fit = PrivateGridSearchCV(
                    PrivatePCA(data_norm=data.data_norm), {"n_components": grid},
                    epsilon=eps, delta=DELTA, accountant=BudgetAccountant(),
                    random_state=seed).fit(X)
                rows.append(dict(part="dataset", data=name, epsilon=eps, seed=seed,
                                 method="private",
                                 pick=fit.best_params_["n_components"],
                                 distance=""))
    return rows


def summarise(rows):
    """One line per (data, ε, method): seeds that picked ``k``, the median
    and range of the picks, the mean projection distance."""
    groups = {}
    for r in rows:
        groups.setdefault((r["part"], r["data"], str(r["epsilon"]), r["method"]),
                          []).append(r)
    table = []
    for (part, data, eps, method), rs in groups.items():
        picks = [int(r["pick"]) for r in rs]
        hit = dist = ""
        if part == "planted":
            k = int(data.split("=")[1])
            hit = f"{sum(p == k for p in picks)}/{len(picks)}"
            dists = [float(r["distance"]) for r in rs if r["distance"] != ""]
            dist = f"{np.mean(dists):.3f}" if dists else ""
        spread = (f"{int(np.median(picks))} [{min(picks)}–{max(picks)}]"
                  if len(picks) > 1 else str(picks[0]))
        table.append([data, eps, method, hit, spread, dist])
    header = ["data", "ε", "method", "picks k", "picks: median [range]",
              "distance"]
    print(f"{header[0]:<14}{header[1]:>5}  {header[2]:<26}{header[3]:>9}"
          f"{header[4]:>24}{header[5]:>10}")
    for line in table:
        print(f"{line[0]:<14}{line[1]:>5}  {line[2]:<26}{line[3]:>9}"
              f"{line[4]:>24}{line[5]:>10}")
    return [header] + table


def figure(rows, path):
    """Top: how often each search picks each ``n_components``; bottom: mean
    projection distance of the released components to the planted subspace."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    planted_rows_ = [r for r in rows if r["part"] == "planted"]
    epsilons = sorted({r["epsilon"] for r in planted_rows_ if r["epsilon"] != "inf"})
    top = max(epsilons, default=3.0)
    series = [("private", e) for e in epsilons] + [
        ("private, floor only (z=0)", top), ("GridSearchCV(PrivatePCA)", top),
        ("GridSearchCV(PCA)", "inf")]
    bars = ["private", "GridSearchCV(PrivatePCA)", f"fixed k={FIXED_K}", "oracle"]
    fig, axes = plt.subplots(2, 3, figsize=(12, 6.2))
    for col, k in enumerate((2, 5, 10)):
        here = [r for r in planted_rows_ if r["data"] == f"k={k}"]
        ax = axes[0, col]
        width = 0.8 / len(series)
        for i, (m, e) in enumerate(series):
            picks = [r["pick"] for r in here if r["method"] == m and r["epsilon"] == e]
            if not picks:
                continue
            counts = np.bincount(picks, minlength=GRID[-1] + 1)[1: GRID[-1] + 1]
            label = m if e == "inf" else f"{m}, ε={e:g}"
            ax.bar(np.array(GRID) + (i - len(series) / 2 + 0.5) * width,
                   counts / len(picks), width, label=label)
        ax.axvline(k, color="k", lw=0.8, ls=":")
        ax.set_title(f"planted k = {k}")
        ax.set_xlabel("chosen n_components")
        ax.set_xticks(GRID)
        ax = axes[1, col]
        width = 0.8 / len(epsilons)
        for j, e in enumerate(epsilons):
            means = [np.mean([r["distance"] for r in here if r["method"] == m
                              and r["epsilon"] == e] or [np.nan]) for m in bars]
            ax.bar(np.arange(len(bars)) + (j - len(epsilons) / 2 + 0.5) * width,
                   means, width, label=f"ε={e:g}")
        ax.set_xticks(np.arange(len(bars)),
                      ["private", "GridSearchCV\n(PrivatePCA)", f"fixed k={FIXED_K}",
                       "oracle"], fontsize=8)
        if here:
            ax.set_yscale("log")
    axes[0, 0].set_ylabel("fraction of seeds")
    axes[1, 0].set_ylabel("projection distance to V")
    axes[0, 0].legend(fontsize=7)
    axes[1, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="2 seeds, n = 20 000, ε = 3 only")
    parser.add_argument("--baseline-seeds", type=int, default=2,
                        help="seeds on which the GridSearchCV baselines run "
                        "(76 fits each; at the largest ε only for PrivatePCA)")
    parser.add_argument("--ks", type=int, nargs="*", default=[2, 5, 10],
                        help="planted ranks to run (none: skip the planted part)")
    parser.add_argument("--no-datasets", action="store_true",
                        help="skip the bundled datasets")
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for results.csv and picks.png")
    parser.add_argument("--append", action="store_true",
                        help="add to --out's results.csv and report on all of it "
                        "(run the parts separately, e.g. one --ks at a time)")
    args = parser.parse_args(argv)
    seeds = range(2) if args.quick else range(10)
    epsilons = [3.0] if args.quick else [1.0, 3.0]
    n = 20_000 if args.quick else 50_000
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # seeded by design
        baseline_seeds = set(seeds[: args.baseline_seeds])
        rows = planted_rows(n, seeds, epsilons, baseline_seeds, args.ks)
        if not args.no_datasets:
            rows += dataset_rows(seeds, epsilons)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / "results.csv"
        if args.append and path.exists():
            rows = read_rows(path) + rows
        with open(path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows(rows)
        figure(rows, args.out / "picks.png")
    table = summarise(rows)
    if args.out is not None:
        with open(args.out / "summary.csv", "w", newline="") as fh:
            csv.writer(fh).writerows(table)
    return rows


FIELDS = ["part", "data", "epsilon", "seed", "method", "pick", "distance"]


def read_rows(path):
    """Rows of a results.csv, typed as the benchmark makes them."""
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        r["epsilon"] = r["epsilon"] if r["epsilon"] == "inf" else float(r["epsilon"])
        r["seed"], r["pick"] = int(r["seed"]), int(r["pick"])
        r["distance"] = float(r["distance"]) if r["distance"] else ""
    return rows


if __name__ == "__main__":
    main()
