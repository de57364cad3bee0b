"""Private supervised pipelines: accuracy, fit time and the private choice of k.

Compares, at a whole-pipeline budget ε ∈ {0.5, 1, 3} (δ = 1e-6 for ours,
pure ε-DP for diffprivlib), on breast_cancer, digits, wine and a synthetic
two-class problem of 10⁵ rows, over ``--seeds`` stratified 70/30 splits:

=====================  ======================================================
pipeline               what it is
=====================  ======================================================
ours                   ``PublicScaler(ranges) → PrivatePCA(k,
                       whiten="partial") → PrivateLDA(data_norm=1)``, each
                       private step at ``μ*/√2`` (they compose to
                       ``(ε, δ)``); the PCA's ``data_norm = √d/2`` (the
                       radius of the unit box the scaler maps the ranges
                       to); the head sees each score over
                       ``(λ_j T)^{1/4}``, dimensionless (``--unwhitened``:
                       the pipeline before, raw scores and the head's
                       ``data_norm`` half the PCA's)
ours, "auto" bound     ``ours`` with ``PrivatePCA(data_norm="auto")``: the
                       PCA's bound a private quantile of the row norms (in
                       the same budget); where that is refused before any
                       charge (too few rows for its search), the fit is
                       ``ours`` itself, as a user would fall back
ours, head only        ``PublicScaler(ranges) → PrivateLDA`` at ``(ε, δ)``,
                       ``data_norm = √d/2``
diffprivlib 0.6.6      its documented pipeline ``StandardScaler(bounds) →
                       PCA(k, centered=True, data_norm) →
                       LogisticRegression(data_norm)``, ``ε/3`` each,
                       ``data_norm = √d`` (standard units), in its own
                       environment (``peers.run_diffprivlib_pipeline``); a fit
                       over ``--dpl-timeout`` seconds counts as failed
not private            ``StandardScaler → PCA(k) → LogisticRegression``
=====================  ======================================================

The public ranges of each feature stand in for domain knowledge: the
minimum and maximum over the whole dataset (digits: its pixel range 0–16),
given to our ``PublicScaler`` and to diffprivlib's ``bounds`` alike.

Then the private choice of ``k``: ``PrivateGridSearchCV`` of the pipeline
above over a grid of ``k`` at ε = 3 (3 folds, accuracy, refit included), on
``--search-seeds`` splits, against the non-private test accuracy of every
``k`` (``StandardScaler → PCA(k) → LogisticRegression``, mean over the
same splits, and over ``--reference-seeds`` splits, a finer estimate of
each ``k``'s accuracy): the target is a ``k`` within 0.02 of the best
``k``'s accuracy in at least 8 of 10 seeds.

Run from the repository root::

    python benchmarks/bench_supervised.py                # ~10 min with diffprivlib
    python benchmarks/bench_supervised.py --quick        # 3 seeds, no synthetic
    python benchmarks/bench_supervised.py --no-diffprivlib
    python benchmarks/bench_supervised.py --dpl-from results.csv  # reuse its
                                                  # diffprivlib fits, run the rest

Prints markdown tables (docs/benchmarks.rst shows them) and, with ``--out``,
writes ``results.csv``.
"""

import argparse
import csv
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.decomposition import PCA
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from sklearn_dppca import BudgetAccountant, PrivacyLeakWarning, PrivatePCA
from sklearn_dppca.linear_model import PrivateLDA
from sklearn_dppca.model_selection import PrivateGridSearchCV
from sklearn_dppca.preprocessing import PublicScaler
from sklearn_dppca.privacy import gdp_epsilon, gdp_mu

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402  (benchmarks/ on the path)

EPSILONS = (0.5, 1.0, 3.0)
#: The head's seed is apart from the PCA's: one seed for both steps would
#: start their generators alike, the same noise in both releases.
HEAD_SEEDS = 10_000
AUTO = 'ours, "auto" bound'
DELTA = 1e-6
#: k of the fixed pipelines, and the grid of the private search
K = {"breast_cancer": 5, "digits": 20, "wine": 5, "synthetic": 5}
GRIDS = {"breast_cancer": [2, 5, 10, 20], "digits": [5, 10, 20, 30],
         "wine": [2, 5, 8, 12], "synthetic": [1, 2, 5, 10]}


def synthetic(n=100_000, d=20, seed=0):
    """Two classes, apart along 3 of 20 correlated features."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    mixing = rng.normal(size=(d, d)) / math.sqrt(d)
    X = rng.normal(size=(n, d)) @ mixing
    X[:, :3] += np.outer(2 * y - 1, [0.6, -0.4, 0.3])
    return X, y


def load(name):
    """``(X, y, lower, upper)``: the rows, labels and public ranges."""
    if name == "synthetic":
        X, y = synthetic()
    else:
        X, y = {"breast_cancer": load_breast_cancer, "digits": load_digits,
                "wine": load_wine}[name](return_X_y=True)
    if name == "digits":
        lower, upper = np.zeros(X.shape[1]), np.full(X.shape[1], 16.0)
    else:
        lower, upper = X.min(axis=0), X.max(axis=0)
        upper = np.where(upper > lower, upper, lower + 1.0)
    return X.astype(np.float64), y, lower, upper


#: How the head sees the PCA's scores: ``"partial"`` (each over
#: :math:`(\lambda_j T)^{1/4}`, the head's bound 1) or ``False`` (raw, the
#: head's bound half the PCA's; ``--unwhitened``).
WHITEN = "partial"


def ours(lower, upper, classes, k, epsilon, seed, head_only=False, pca_norm=None):
    d = lower.shape[0]
    norm = math.sqrt(d) / 2.0
    scaler = PublicScaler(ranges=(lower, upper), clip=True)
    if head_only:
        return Pipeline([("scale", scaler), ("lda", PrivateLDA(
            classes, data_norm=norm, epsilon=epsilon, random_state=seed,
            accountant=BudgetAccountant()))])
    step = gdp_epsilon(gdp_mu(epsilon, DELTA) / math.sqrt(2.0), DELTA)
    return Pipeline([
        ("scale", scaler),
        ("pca", PrivatePCA(k, data_norm=norm if pca_norm is None else pca_norm,
                           whiten=WHITEN, epsilon=step, random_state=seed,
                           accountant=BudgetAccountant())),
        ("lda", PrivateLDA(classes, data_norm=1.0 if WHITEN else norm / 2.0,
                           epsilon=step, random_state=HEAD_SEEDS + seed,
                           accountant=BudgetAccountant())),
    ])


def exact(k):
    return Pipeline([("scale", StandardScaler()), ("pca", PCA(k)),
                     ("lr", LogisticRegression(max_iter=2000))])


def timed_score(model, X_train, y_train, X_test, y_test, fallback=None):
    """Test accuracy and fit seconds; ``fallback`` (a model) is fitted
    instead where ``model`` is refused before any charge."""
    start = time.perf_counter()
    try:
        model.fit(X_train, y_train)
    except ValueError as error:
        if fallback is None or "before any charge" not in str(error):
            raise
        model = fallback.fit(X_train, y_train)
    return model.score(X_test, y_test), time.perf_counter() - start


def reused_diffprivlib(path, datasets, seeds):
    """diffprivlib's rows of an earlier ``results.csv`` (its fits do not
    depend on this package)."""
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["method"] == "diffprivlib"
                and r["dataset"] in datasets and int(r["seed"]) in seeds]
    for r in rows:
        r.update(epsilon=float(r["epsilon"]), seed=int(r["seed"]),
                 accuracy=float(r["accuracy"]), seconds=float(r["seconds"]),
                 error=r["error"] or None)
    return rows


def run_accuracy(datasets, seeds, dpl_python, dpl_timeout, log, checkpoint=None,
                 reused=()):
    rows, jobs = [], []
    for name in datasets:
        X, y, lower, upper = load(name)
        classes = np.unique(y)
        k = K[name]
        for seed in seeds:
            X_tr, X_te, y_tr, y_te = train_test_split(
                X, y, test_size=0.3, stratify=y, random_state=seed)
            acc, sec = timed_score(exact(k), X_tr, y_tr, X_te, y_te)
            rows.append(dict(dataset=name, method="not private", epsilon=math.inf,
                             seed=seed, accuracy=acc, seconds=sec))
            for eps in EPSILONS:
                for method, head_only, pca_norm in (
                        ("ours", False, None), (AUTO, False, "auto"),
                        ("ours, head only", True, None)):
                    model = ours(lower, upper, classes, k, eps, seed, head_only,
                                 pca_norm)
                    fallback = None if pca_norm is None else ours(
                        lower, upper, classes, k, eps, seed)
                    acc, sec = timed_score(model, X_tr, y_tr, X_te, y_te,
                                           fallback=fallback)
                    rows.append(dict(dataset=name, method=method, epsilon=eps,
                                     seed=seed, accuracy=acc, seconds=sec))
                if dpl_python is not None and name not in reused:
                    jobs.append(dict(
                        X_train=X_tr, y_train=y_tr, X_test=X_te, y_test=y_te,
                        epsilon=eps, seed=seed, n_components=k,
                        bounds=(lower, upper), data_norm=math.sqrt(X.shape[1]),
                        _key=(name, eps, seed)))
        log(f"{name}: ours done")
    batches = {}
    for job in jobs:
        batches.setdefault(job["_key"][0], []).append(job)
    for name, batch in batches.items():  # one subprocess per dataset
        log(f"diffprivlib on {name}: {len(batch)} pipeline fits ...")
        keys = [job.pop("_key") for job in batch]
        results = peers.run_diffprivlib_pipeline(dpl_python, batch,
                                                 timeout_s=dpl_timeout, log=log)
        for (_, eps, seed), res in zip(keys, results):
            rows.append(dict(dataset=name, method="diffprivlib", epsilon=eps,
                             seed=seed, accuracy=res["accuracy"],
                             seconds=res["fit_seconds"], error=res.get("error")))
        if checkpoint is not None:
            checkpoint(rows)
    return rows


def exact_accuracies(X, y, grid, seeds):
    """The non-private pipeline's test accuracy of every ``k`` of ``grid``,
    mean over the splits ``seeds``."""
    acc = {k: [] for k in grid}
    for seed in seeds:
        X_tr, X_te, y_tr, y_te = train_test_split(
            X, y, test_size=0.3, stratify=y, random_state=seed)
        for k in grid:
            acc[k].append(exact(k).fit(X_tr, y_tr).score(X_te, y_te))
    return {k: float(np.mean(v)) for k, v in acc.items()}


def run_search(datasets, seeds, log, epsilon=3.0, pooled=True,
               reference_seeds=None):
    """Private search's k against the non-private accuracy of every k, its
    mean over the same splits and, with ``reference_seeds``, over those
    splits (a finer estimate of each k's accuracy: on wine the ten splits'
    means carry a standard error of about 0.006); ``pooled=False``: the
    search releases each fold's scores instead of their sums over the folds
    (for comparison)."""
    rows = []
    for name in datasets:
        X, y, lower, upper = load(name)
        classes = np.unique(y)
        grid = [k for k in GRIDS[name] if k <= X.shape[1]]
        picks, refits = [], []
        for seed in seeds:
            X_tr, X_te, y_tr, y_te = train_test_split(
                X, y, test_size=0.3, stratify=y, random_state=seed)
            pipe = ours(lower, upper, classes, grid[0], epsilon, seed)
            pipe.set_params(pca__accountant=None, lda__accountant=None)
            search = PrivateGridSearchCV(  # the search charges its own
                pipe, {"pca__n_components": grid}, cv=3, epsilon=epsilon,
                random_state=seed, accountant=BudgetAccountant())
            search._pool_folds = pooled
            search.fit(X_tr, y_tr)
            picks.append(search.best_params_["pca__n_components"])
            refits.append(search.score(X_te, y_te))  # the refitted pipeline's
        means = exact_accuracies(X, y, grid, seeds)
        good = sum(means[k] >= max(means.values()) - 0.02 for k in picks)
        row = dict(dataset=name, epsilon=epsilon, picks=picks,
                   exact_best=max(means, key=means.get), exact=means,
                   within_002=good, seeds=len(picks), refit=refits)
        if reference_seeds is not None:
            ref = exact_accuracies(X, y, grid, reference_seeds)
            row.update(reference=ref, reference_splits=len(reference_seeds),
                       within_002_reference=sum(
                           ref[k] >= max(ref.values()) - 0.02 for k in picks))
        rows.append(row)
        log(f"{name}: search picks {picks}")
    return rows


def _cell(values):
    values = np.asarray([v for v in values if np.isfinite(v)])
    if values.size == 0:
        return "failed"
    return f"{values.mean():.3f} ± {values.std():.3f}"


def accuracy_table(rows, datasets):
    methods = ["ours", AUTO, "ours, head only", "diffprivlib"]
    lines = ["| dataset | ε | " + " | ".join(methods) + " | not private |",
             "|---|---|" + "---|" * (len(methods) + 1)]
    for name in datasets:
        ref = [r["accuracy"] for r in rows if r["dataset"] == name
               and r["method"] == "not private"]
        for eps in EPSILONS:
            cells = []
            for method in methods:
                sel = [r for r in rows if r["dataset"] == name
                       and r["method"] == method and r["epsilon"] == eps]
                if not sel:
                    cells.append("—")
                    continue
                failed = sum(1 for r in sel if not np.isfinite(r["accuracy"]))
                cell = _cell([r["accuracy"] for r in sel])
                cells.append(cell + (f" ({failed} failed)" if failed else ""))
            lines.append(f"| {name} | {eps:g} | " + " | ".join(cells)
                         + f" | {_cell(ref)} |")
    return "\n".join(lines)


def time_table(rows, datasets):
    lines = ["| dataset | ours (s) | diffprivlib (s) | not private (s) |",
             "|---|---|---|---|"]
    for name in datasets:
        cells = []
        for method in ("ours", "diffprivlib", "not private"):
            sec = [r["seconds"] for r in rows if r["dataset"] == name
                   and r["method"] == method and np.isfinite(r["seconds"])]
            cells.append(f"{np.median(sec):.3f}" if sec else "—")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def search_table(rows):
    reference = rows and "reference" in rows[0]
    extra = (f" | within 0.02, each k's accuracy over "
             f"{rows[0]['reference_splits']} splits" if reference else "")
    lines = ["| dataset | private picks (ε = 3) | best k without privacy | "
             "picks within 0.02 of the best k's accuracy" + extra
             + " | the refit's test accuracy |",
             "|---|---|---|---|---|" + ("---|" if reference else "")]
    for r in rows:
        cell = (f" | {r['within_002_reference']} of {r['seeds']}"
                if reference else "")
        lines.append(f"| {r['dataset']} | {r['picks']} | {r['exact_best']} "
                     f"({r['exact'][r['exact_best']]:.3f}) | "
                     f"{r['within_002']} of {r['seeds']}{cell} | "
                     f"{_cell(r['refit'])} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--search-seeds", type=int, default=10)
    parser.add_argument("--reference-seeds", type=int, default=60,
                        help="splits over which the table also measures each "
                        "k's non-private accuracy (0: only the search's own)")
    parser.add_argument("--fold-scores", action="store_true",
                        help="the search releases each fold's scores, not "
                        "their sums over the folds (for comparison)")
    parser.add_argument("--search-only", action="store_true",
                        help="only the private choice of k")
    parser.add_argument("--quick", action="store_true",
                        help="3 seeds, 3 search seeds, no synthetic set")
    parser.add_argument("--no-diffprivlib", action="store_true")
    parser.add_argument("--dpl-timeout", type=float, default=30.0)
    parser.add_argument("--dpl-from", type=Path, default=None,
                        help="reuse diffprivlib's rows of an earlier results.csv")
    parser.add_argument("--datasets", nargs="*",
                        default=["breast_cancer", "digits", "wine", "synthetic"])
    parser.add_argument("--unwhitened", action="store_true",
                        help="the head reads the PCA's raw scores, its bound "
                        "half the PCA's (the pipeline before whiten='partial')")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    global WHITEN
    WHITEN = False if args.unwhitened else "partial"
    datasets = args.datasets
    if args.quick:
        args.seeds, args.search_seeds, args.reference_seeds = 3, 3, 3
        datasets = [d for d in datasets if d != "synthetic"]
    warnings.filterwarnings("ignore", category=PrivacyLeakWarning)  # seeded
    warnings.filterwarnings("ignore", category=UserWarning)
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    dpl_python = None
    reused = []
    if args.dpl_from is not None:
        reused = reused_diffprivlib(args.dpl_from, datasets, range(args.seeds))
    if not (args.no_diffprivlib or args.search_only) and not (
            {r["dataset"] for r in reused} >= set(datasets)):
        dpl_python, info = peers.diffprivlib_runner(log=log)
        if dpl_python is None:
            log(f"diffprivlib unavailable: {info.get('reason')}")
    with threadpool_limits(limits=1, user_api="blas"):
        checkpoint = None if args.out is None else (
            lambda rows: write_rows(args.out, rows + reused))
        rows = [] if args.search_only else run_accuracy(
            datasets, range(args.seeds), dpl_python, args.dpl_timeout, log,
            checkpoint, reused={r["dataset"] for r in reused}) + reused
        reference = range(args.reference_seeds) if args.reference_seeds else None
        search = run_search(datasets, range(args.search_seeds), log,
                            pooled=not args.fold_scores, reference_seeds=reference)
    if rows:
        print(f"## Test accuracy, mean ± sd over {args.seeds} splits\n")
        print(accuracy_table(rows, datasets))
        print("\n## Median fit time\n")
        print(time_table(rows, datasets))
    print("\n## The private choice of k\n")
    print(search_table(search))
    if args.out is not None:
        write_rows(args.out, rows)


def write_rows(out, rows):
    """``out/results.csv``, one row per fit."""
    out.mkdir(parents=True, exist_ok=True)
    fields = ["dataset", "method", "epsilon", "seed", "accuracy", "seconds",
              "error"]
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: r.get(k) for k in fields})


if __name__ == "__main__":
    main()
