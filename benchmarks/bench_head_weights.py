"""The supervised heads' fixed weights ``(w₁, w_t)`` and the ridge's scale.

The two measurements of docs/supervised.rst, "How the heads were chosen",
on the head alone with the whole budget (no PCA before it):

1. **The weights** of the constant and the label in the augmented row
   ``(x, w₁C, w_t C·t)``. They are the class attribute ``_weights``
   (``PrivateLDA``: (0.2, 1.2), ``PrivateRidge``: (0.3, 0.7)); each row of
   the table fits a subclass that sets it to one of
   (0.71, 0.71), (0.2, 1.2), (0.3, 0.7), (0.2, 0.5), (1.0, 1.0). Cells:
   test accuracy of ``PublicScaler(ranges, clip=True) → PrivateLDA`` on
   breast_cancer, wine and digits at ε = 1 and 3, and test R² of
   ``PublicScaler(ranges, clip=True) → PrivateRidge(y_bounds=(min y,
   max y))`` on diabetes at ε = 3. Printed: mean ± standard error over the
   splits, the best weights of each cell, and the paired differences
   (same split, same seed) between each head's weights and the others.
2. **The ridge's scale**: ``alpha="auto"`` adds ``c`` times the edge of the
   noise's spectrum, ``2σ√(d + K + 1)``, to the within-class covariance,
   ``c`` the module constant ``linear_model.AUTO_RIDGE_EDGES`` (1). The
   script sets it to ``c`` ∈ {1/4, 1/2, 1, 2, 4, 16} and reports the test
   accuracy of ``PrivateLDA`` on digits at ε = 1.

The head's bound (``--rows``): ``box`` (default), ``bounds=(0, 1)``, the
rows the scaler maps into the unit box clipped to it and translated to its
midpoint (radius ``√d/2``), as docs/supervised.rst recommends after a
``PublicScaler``; or ``norm``, ``data_norm=√d/2`` around the origin, as
``bench_supervised.py``'s "ours, head only".

Data: scikit-learn's bundled datasets, the public ranges of
``bench_supervised.load`` (each feature's minimum and maximum over the whole
dataset; digits 0–16; diabetes its features' and its target's). Splits: 70/30,
stratified (diabetes plain), ``random_state`` 0, 1, …; the head seeded
``10 000`` + the split's seed. One BLAS thread.

Run from the repository root::

    python benchmarks/bench_head_weights.py                # 30 splits, ~30 s
    python benchmarks/bench_head_weights.py --quick        # 3 splits
    python benchmarks/bench_head_weights.py --rows norm
"""

import argparse
import contextlib
import math
import sys
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from threadpoolctl import threadpool_limits

from sklearn_dppca import BudgetAccountant, linear_model
from sklearn_dppca.linear_model import PrivateLDA, PrivateRidge
from sklearn_dppca.preprocessing import PublicScaler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_supervised import HEAD_SEEDS, load  # noqa: E402  (benchmarks/)

WEIGHTS = [(0.71, 0.71), (0.2, 1.2), (0.3, 0.7), (0.2, 0.5), (1.0, 1.0)]
CELLS = [("breast_cancer", 1.0), ("breast_cancer", 3.0), ("wine", 1.0),
         ("wine", 3.0), ("digits", 1.0), ("digits", 3.0), ("diabetes", 3.0)]
SHORT = {"breast_cancer": "bc", "wine": "wine", "digits": "digits",
         "diabetes": "diabetes"}
RIDGE_EDGES = (0.25, 0.5, 1.0, 2.0, 4.0, 16.0)


def weighted(base, weights):
    """``base`` with its ``_weights`` set to ``weights``."""
    return type(f"{base.__name__}{tuple(weights)}", (base,),
                {"_weights": tuple(weights)})


@contextlib.contextmanager
def ridge_edges(c):
    """``alpha="auto"`` at ``c`` noise edges, as the module sets it."""
    saved = linear_model.AUTO_RIDGE_EDGES
    linear_model.AUTO_RIDGE_EDGES = c
    try:
        yield
    finally:
        linear_model.AUTO_RIDGE_EDGES = saved


def load_any(name):
    """``(X, y, lower, upper)``: rows, labels or targets, public ranges."""
    if name == "diabetes":
        X, y = load_diabetes(return_X_y=True)
        return X, y, X.min(axis=0), X.max(axis=0)
    return load(name)


def split(name, X, y, seed):
    return train_test_split(X, y, test_size=0.3, random_state=seed,
                            stratify=None if name == "diabetes" else y)


def head_model(name, y, lower, upper, epsilon, seed, weights, rows="box"):
    """``PublicScaler(ranges) → head`` with ``_weights = weights``."""
    d = lower.shape[0]
    bound = (dict(bounds=(0, 1)) if rows == "box"
             else dict(data_norm=math.sqrt(d) / 2))
    common = dict(**bound, epsilon=epsilon, random_state=HEAD_SEEDS + seed,
                  accountant=BudgetAccountant())
    if name == "diabetes":
        head = weighted(PrivateRidge, weights)((float(y.min()), float(y.max())),
                                               **common)
    else:
        head = weighted(PrivateLDA, weights)(np.unique(y), **common)
    return Pipeline([("scale", PublicScaler(ranges=(lower, upper), clip=True)),
                     ("head", head)])


def mean_se(values, sign=""):
    v = np.asarray(values, dtype=float)
    return f"{v.mean():{sign}.3f} ± {v.std(ddof=1) / math.sqrt(len(v)):.3f}"


def weights_scores(seeds, rows="box", cells=CELLS, weights=WEIGHTS):
    """``{(weights, dataset, ε): [score per split]}``."""
    res = {}
    for name in dict.fromkeys(n for n, _ in cells):
        X, y, lower, upper = load_any(name)
        for seed in seeds:
            X_tr, X_te, y_tr, y_te = split(name, X, y, seed)
            for eps in [e for n, e in cells if n == name]:
                for w in weights:
                    model = head_model(name, y, lower, upper, eps, seed, w, rows)
                    res.setdefault((w, name, eps), []).append(
                        model.fit(X_tr, y_tr).score(X_te, y_te))
    return res


def weights_table(res, cells=CELLS, weights=WEIGHTS):
    lines = ["| (w₁, w_t) | " + " | ".join(f"{SHORT[n]} ε={e:g}" for n, e in cells)
             + " |", "|---|" + "---|" * len(cells)]
    for w in weights:
        lines.append(f"| {w} | " + " | ".join(mean_se(res[(w, n, e)])
                                              for n, e in cells) + " |")
    lines.append("\nbest: " + ", ".join(
        f"{SHORT[n]} ε={e:g} {max(weights, key=lambda w: np.mean(res[(w, n, e)]))}"
        for n, e in cells))
    for n, e in cells:
        chosen = (PrivateRidge if n == "diabetes" else PrivateLDA)._weights
        if chosen not in weights:
            continue
        ours = np.asarray(res[(chosen, n, e)])
        diffs = [f"{w} {mean_se(ours - np.asarray(res[(w, n, e)]), '+')}"
                 for w in weights if w != chosen]
        lines.append(f"{chosen} minus, {SHORT[n]} ε={e:g}: " + "; ".join(diffs))
    return "\n".join(lines)


def ridge_scores(seeds, rows="box", edges=RIDGE_EDGES, epsilon=1.0):
    """``{c: [accuracy per split]}``: PrivateLDA on digits, ridge at ``c``
    noise edges."""
    X, y, lower, upper = load_any("digits")
    res = {}
    for c in edges:
        with ridge_edges(c):
            for seed in seeds:
                X_tr, X_te, y_tr, y_te = split("digits", X, y, seed)
                model = head_model("digits", y, lower, upper, epsilon, seed,
                                   PrivateLDA._weights, rows)
                res.setdefault(c, []).append(model.fit(X_tr, y_tr).score(X_te, y_te))
    return res


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="3 splits")
    parser.add_argument("--rows", choices=["box", "norm"], default="box",
                        help="the head's bound: bounds=(0, 1) (default) or "
                        "data_norm=sqrt(d)/2")
    parser.add_argument("--cells", nargs="*", default=None,
                        help="dataset:epsilon of the weights table (default all)")
    args = parser.parse_args(argv)
    seeds = range(3 if args.quick else args.splits)
    cells = CELLS if args.cells is None else [
        (c.split(":")[0], float(c.split(":")[1])) for c in args.cells]
    with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
        warnings.simplefilter("ignore")  # seeded fits: PrivacyLeakWarning
        res = weights_scores(seeds, args.rows, cells)
        ridge = ridge_scores(seeds, args.rows)
    print(f"## Weights (w₁, w_t): the head alone, rows '{args.rows}'; test "
          f"accuracy (diabetes R²), mean ± s.e. over {len(seeds)} splits\n")
    print(weights_table(res, cells))
    print(f"\n## Ridge scale: PrivateLDA on digits at ε = 1, alpha = c × "
          f"2σ√(d + K + 1); mean ± s.e. over {len(seeds)} splits\n")
    print("| c | accuracy |\n|---|---|")
    for c, accs in ridge.items():
        print(f"| {c:g} | {mean_se(accs)} |")
    return res, ridge


if __name__ == "__main__":
    main()
