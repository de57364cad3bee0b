"""Benchmark ``data_norm="auto"`` against fixed norm bounds, and ``bounds=``.

``PrivatePCA(n_components=2, epsilon=ε, delta=1e-6)`` is fitted with

- ``auto``: ``data_norm="auto"`` (the defaults of ``norm_range``,
  ``norm_quantile`` and the budget share; docs/bounds.rst);
- ``oracle``: ``data_norm`` = the largest row norm of the data (the non-private
  100th percentile, computed here and passed as a constant);
- ``x0.1`` and ``x10``: a tenth and ten times the oracle (bad guesses);
- ``auto X+c``: ``"auto"`` on the data shifted by ``c`` in every coordinate
  (``c = 100``: a hundred standard deviations of a standardised feature, 100
  times the digits' pixel range); its target is the oracle on the unshifted
  data;
- ``box`` (digits only, range [0, 1] after the public scaling by 16):
  ``bounds=(0, 1)``, and ``box+auto``: ``bounds=(0, 1), data_norm="auto"``.

on the bundled datasets (:func:`sklearn_dppca.datasets.load_real_dataset`:
digits, breast_cancer, wine, diabetes) and two synthetic ones of
``n = 20 000`` rows and ``d = 30`` features, ``x = z·diag(√λ)`` with
``λ = (9, 4, 1, …, 1)·0.01``: ``gaussian`` (``z`` standard normal) and
``heavy`` (a multivariate Student t with 3 degrees of freedom: heavy-tailed
norms), for ``ε ∈ {0.3, 1, 3, 10}`` and ``--seeds`` noise seeds (default 10).

Per fit: ``sin θ`` of the largest principal angle to the data's own top-2
eigenvectors and the captured variance ``tr(X̂ᵀ Σ X̂) / tr(V_kᵀ Σ V_k)``
(:mod:`sklearn_dppca.metrics`; ``Σ`` the sample covariance). The table gives
the mean over seeds ("refused" where ``"auto"``'s searches would be drowned
and the fit is refused); the verdict checks the targets at ``ε ≥ 1``: ``auto``
within 1.25× of the better of ``oracle`` and ``x0.1`` (in sin θ), better than
``x10``, and ``auto X+c`` within 1.25× of ``oracle``.

``--sweep`` measures instead the choice of the defaults: ``norm_quantile`` ∈
{0.5, 0.75, 0.9, 0.95, 0.99} and the searches' share of μ*² ∈ {0.02, 0.06, 0.15}
on every dataset at ``ε ∈ {0.3, 1, 3}`` (mean sin θ).

``--robust`` measures instead how often ``"auto"`` chooses a bound far above
the data (docs/bounds.rst, "A wrong comparison"): on wine, breast_cancer,
diabetes and digits, each feature mapped to ``[0, 1]`` by its range and the
rows divided by ``√d`` (so no row norm exceeds 1), at ``ε ∈ {0.5, 1, 2, 3}``,
centred and not, ``--seeds`` seeds per cell (default 200 here). Per cell it
prints the fits refused (the search would be drowned), the fits that warned,
and the fits *without a warning* whose bound exceeds 4× the largest row norm
(the larger of the raw and the centred rows'): the target is 0 in every cell.
It also prints the 99th percentile and the largest second-moment error
``‖get_covariance() − XᵀX/(n−1)‖_F`` (``X`` centred when the fit is) over the
fits, against that of answering the zero matrix.

``--speed`` measures instead the cost of the private bound: the fit time of
``data_norm="auto"`` against a numeric ``data_norm`` and against
scikit-learn's ``PCA(svd_solver="covariance_eigh")``, and of
``CoherentPowerPCA`` at the numeric bound, in this process, on
2e5 × 50 standard normal rows and on the same rows plus 100 (the fastest of
five rounds, alternating the estimators); with ``--density``, on CSR rows of
that density instead (review 78: 2·10⁴ × 10⁵ at 0.05%, without scikit-learn,
which has no covariance solver for them).

``--covariance`` measures instead the released second moment (issue 23),
under the protocol of Dong, Liang & Yi (2022): ``PrivatePCA(center=False,
delta=1e-6)`` with every component (``n_components=None``), rows of norm at
most 1, the error ``‖Σ̂ − XᵀX/n‖_F`` with ``Σ̂ = get_covariance()·(n−1)/n``
(the fit's released second moment, the same post-processing for every
bound), at ρ ∈ {0.01, 0.1, 1} zCDP mapped to ``ε = gdp_epsilon(√(2ρ), δ)``.
Two cells, ``x = Q diag(√λ) z`` with ``Q`` a random rotation: ``spiked``,
20 000 × 50, ``λ = (25, 20, 15, 10, 5, 1, …, 1)``, and ``harmonic``,
60 000 × 200, ``λ_j = 1/j``. ``--scaling model`` (default, as
benchmarks/bench_peers_covariance.py) divides the rows by the model's radius
``√(tr + 4 √(2 Σλ²))`` and clips the few beyond 1; ``--scaling max`` divides
them by the largest row norm. ``"auto"`` (defaults: ``norm_quantile="auto"``)
is compared with the best of a grid of fixed bounds: ``2^{-i/4}``, ``i = 0..4``
(1 is the largest norm), and fourteen quantiles of the norms from 0.5 to
0.999, dense near the top — a non-private oracle, for comparison only. Per
cell and ρ, over ``--seeds`` noise seeds (default 10), it prints the mean
error of ``"auto"`` over the best fixed bound's (the target: at most 1.1)
and over ``data_norm=1``'s, and the mean ``sin θ`` of the top 5 components
for ``"auto"`` with every component, ``"auto"`` with ``n_components=5``, the
best fixed bound and ``data_norm=1``.

Run from the repository root (about a minute on two cores)::

    python benchmarks/bench_norm.py [--seeds 10] [--figure PATH] [--json PATH]
    python benchmarks/bench_norm.py --sweep
    python benchmarks/bench_norm.py --speed [--rows 200000 --features 50]
    python benchmarks/bench_norm.py --speed --rows 20000 --features 100000 \
        --density 0.0005 --rounds 3  # wide sparse rows
    python benchmarks/bench_norm.py --robust [--seeds 200]  # about 10 minutes
    python benchmarks/bench_norm.py --covariance [--scaling max]  # 1-7 minutes each
    python benchmarks/bench_norm.py --datasets digits wine  # a subset
"""

import argparse
import json
import sys
import warnings

import numpy as np

from sklearn_dppca import (
    BudgetAccountant,
    CoherentPowerPCA,
    PrivacyLeakWarning,
    PrivatePCA,
    _bounds,
)
from sklearn_dppca.datasets import REAL_DATASETS, load_real_dataset
from sklearn_dppca.metrics import captured_variance, principal_angle_sin

EPSILONS = (0.3, 1.0, 3.0, 10.0)
SHIFT = 100.0
K = 2


def synthetic(kind, seed=0, n=20000, d=30):
    rng = np.random.default_rng(seed)
    spectrum = np.r_[9.0, 4.0, np.ones(d - 2)] * 0.01
    z = rng.standard_normal((n, d))
    if kind == "heavy":
        z /= np.sqrt(rng.chisquare(3, size=(n, 1)) / 3.0)
    return z * np.sqrt(spectrum)


def datasets(only=None):
    for name in REAL_DATASETS:
        if not only or name in only:
            yield name, load_real_dataset(name).data
    for kind in ("gaussian", "heavy"):
        if not only or kind in only:
            yield kind, synthetic(kind)


def reference(X):
    cov = np.cov(X, rowvar=False)
    values, vectors = np.linalg.eigh(cov)
    return cov, vectors[:, np.argsort(values)[::-1][:K]].T


def fit(X, eps, seed, estimator=PrivatePCA, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)  # seeded on purpose
        return estimator(K, epsilon=eps, delta=1e-6, random_state=seed,
                         accountant=BudgetAccountant(), **params).fit(X)


def methods(name, X):
    oracle = float(np.linalg.norm(X, axis=1).max())
    out = {
        "auto": (X, {"data_norm": "auto"}),
        "oracle": (X, {"data_norm": oracle}),
        "x0.1": (X, {"data_norm": 0.1 * oracle}),
        "x10": (X, {"data_norm": 10.0 * oracle}),
        "auto X+c": (X + SHIFT, {"data_norm": "auto"}),
    }
    if name == "digits":
        out["box"] = (X, {"bounds": (0.0, 1.0)})
        out["box+auto"] = (X, {"bounds": (0.0, 1.0), "data_norm": "auto"})
    return out


def measure(n_seeds, only=None):
    rows = []
    for name, X in datasets(only):
        cov, top = reference(X)
        for label, (data, params) in methods(name, X).items():
            for eps in EPSILONS:
                sins, caps, norms = [], [], []
                for seed in range(n_seeds):
                    try:
                        est = fit(data, eps, seed, **params)
                    except ValueError:  # a drowned search: refused (public)
                        sins = caps = norms = [np.nan]
                        break
                    sins.append(principal_angle_sin(est.components_, top))
                    caps.append(captured_variance(est.components_, cov))
                    norms.append(est.data_norm_)
                rows.append(dict(dataset=name, n=X.shape[0], d=X.shape[1],
                                 method=label, epsilon=eps,
                                 sin_theta=float(np.mean(sins)),
                                 captured=float(np.mean(caps)),
                                 data_norm=float(np.median(norms))))
    return rows


def verdict(rows):
    table = {(r["dataset"], r["method"], r["epsilon"]): r["sin_theta"] for r in rows}
    lines, passed = [], 0
    checks = cells = refused = 0
    for name in sorted({r["dataset"] for r in rows}):
        for eps in (e for e in EPSILONS if e >= 1):
            auto = table[name, "auto", eps]
            best = min(table[name, "oracle", eps], table[name, "x0.1", eps])
            shifted = table[name, "auto X+c", eps]
            oracle = table[name, "oracle", eps]
            cells += 1
            if np.isnan(auto) or np.isnan(shifted):  # refused: nothing to compare
                refused += 1
                lines.append(f"{name:14s} eps={eps:<4g} auto refused (drowned)")
                continue
            ok = (auto <= 1.25 * best, auto < table[name, "x10", eps],
                  shifted <= 1.25 * oracle)
            checks += 3
            passed += sum(ok)
            marks = " ".join("ok" if o else "MISS" for o in ok)
            lines.append(f"{name:14s} eps={eps:<4g} auto/best={auto / best:5.2f} "
                         f"auto<x10 shifted/oracle={shifted / oracle:5.2f}  {marks}")
    lines.append(f"{passed}/{checks} targets met"
                 + (f"; {refused} of {cells} cells refused (not counted)"
                    if refused else ""))
    return lines


def print_table(rows, out=sys.stdout):
    labels = list(dict.fromkeys(r["method"] for r in rows))
    print(f"{'dataset':14s} {'method':9s} " + " ".join(
        f"{'eps=' + format(e, 'g'):>15s}" for e in EPSILONS), file=out)
    print(f"{'':24s} " + " ".join(f"{'sinθ  capt  C':>15s}" for _ in EPSILONS),
          file=out)
    for name in dict.fromkeys(r["dataset"] for r in rows):
        for label in labels:
            cells = [r for r in rows if r["dataset"] == name and r["method"] == label]
            if not cells:
                continue
            text = " ".join(f"{'refused':>15s}" if np.isnan(c["sin_theta"]) else
                            f"{c['sin_theta']:.2f} {c['captured']:.2f} "
                            f"{c['data_norm']:5.3g}" for c in cells)
            print(f"{name:14s} {label:9s} {text}", file=out)


def figure(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(3.0 * len(names), 3.2),
                             sharey=True)
    for ax, name in zip(axes, names):
        for label in dict.fromkeys(r["method"] for r in rows if r["dataset"] == name):
            cells = [r for r in rows if r["dataset"] == name and r["method"] == label]
            ax.plot([c["epsilon"] for c in cells], [c["sin_theta"] for c in cells],
                    marker="o", label=label,
                    linewidth=2.5 if label == "auto" else 1.2)
        ax.set_xscale("log")
        ax.set_title(name)
        ax.set_xlabel("epsilon")
    axes[0].set_ylabel("sin θ (mean over seeds)")
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes:
        h, labs = ax.get_legend_handles_labels()
        if len(labs) > len(labels):
            handles, labels = h, labs
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, dpi=110)


def sweep(n_seeds, only=None):
    quantiles = (0.5, 0.75, 0.9, 0.95, 0.99)
    shares = (0.02, 0.06, 0.15)
    eps_list = (0.3, 1.0, 3.0)
    saved = (_bounds.DEFAULT_QUANTILE, _bounds.BOUND_BUDGET_SHARE)
    print("mean sin θ of data_norm='auto' (rows: quantile, share; columns: "
          "dataset at eps " + "/".join(format(e, "g") for e in eps_list) + ")")
    data = list(datasets(only))
    print(f"{'q':>5s} {'share':>5s} " + " ".join(f"{n[:13]:>14s}" for n, _ in data))
    try:
        for share in shares:
            _bounds.BOUND_BUDGET_SHARE = share
            for q in quantiles:
                cells = []
                for _, X in data:
                    _, top = reference(X)
                    cell = []
                    for eps in eps_list:
                        try:
                            errs = [principal_angle_sin(
                                fit(X, eps, s, data_norm="auto",
                                    norm_quantile=q).components_, top)
                                for s in range(n_seeds)]
                        except ValueError:  # drowned: refused
                            cell.append("-")
                            continue
                        cell.append(f"{np.mean(errs):.2f}")
                    cells.append("/".join(cell))
                print(f"{q:5g} {share:5g} " + " ".join(f"{c:>14s}" for c in cells))
    finally:
        _bounds.DEFAULT_QUANTILE, _bounds.BOUND_BUDGET_SHARE = saved


ROBUST_EPSILONS = (0.5, 1.0, 2.0, 3.0)
ROBUST_DATASETS = ("wine", "breast_cancer", "diabetes", "digits")


def unit_scaled(name):
    """scikit-learn's copy of ``name``, each feature mapped to ``[0, 1]`` by its
    range (a constant feature to 0), the rows divided by ``√d``."""
    import sklearn.datasets

    X = getattr(sklearn.datasets, f"load_{name}")().data.astype(np.float64)
    span = X.max(axis=0) - X.min(axis=0)
    X = (X - X.min(axis=0)) / np.where(span > 0, span, 1.0)
    return X / np.sqrt(X.shape[1])


def robust(n_seeds, only=None):
    """Bounds far above the data, per cell (see the module's docstring)."""
    import time

    start = time.perf_counter()
    print(f"data_norm='auto', {n_seeds} seeds per cell: refused / warned / "
          "unwarned fits with data_norm_ > 4x the largest row norm; "
          "second-moment error p99 and max against the zero matrix's")
    total = 0
    for name in ROBUST_DATASETS:
        if only and name not in only:
            continue
        X = unit_scaled(name)
        n = X.shape[0]
        centred = X - X.mean(axis=0)
        largest = max(np.linalg.norm(X, axis=1).max(),
                      np.linalg.norm(centred, axis=1).max())
        for center in (False, True):
            rows = centred if center else X
            truth = rows.T @ rows / (n - 1)
            zero = float(np.linalg.norm(truth))
            for eps in ROBUST_EPSILONS:
                refused = warned = far = 0
                errors = []
                for seed in range(n_seeds):
                    est = PrivatePCA(K, epsilon=eps, delta=1e-6, center=center,
                                     data_norm="auto", accountant=BudgetAccountant(),
                                     random_state=np.random.default_rng(seed))
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        warnings.simplefilter("ignore", PrivacyLeakWarning)
                        try:
                            est.fit(X)
                        except ValueError:
                            refused += 1
                            continue
                    if caught:
                        warned += 1
                    elif est.data_norm_ > 4.0 * largest:
                        far += 1
                    errors.append(float(np.linalg.norm(est.get_covariance() - truth)))
                total += far
                spread = (f"{np.quantile(errors, 0.99) / zero:9.3g} "
                          f"{max(errors) / zero:9.3g}" if errors else
                          f"{'-':>9s} {'-':>9s}")
                print(f"{name:14s} n={n:<5d} center={center!s:5s} eps={eps:<4g} "
                      f"refused={refused:3d} warned={warned:3d} far={far:3d}  "
                      f"error/zero p99, max: {spread}", flush=True)
    print(f"unwarned fits with a bound > 4x the largest norm: {total} "
          f"({time.perf_counter() - start:.0f} s)")
    return total


COV_RHOS = (0.01, 0.1, 1.0)
COV_CELLS = {
    "spiked": (20_000, np.r_[25.0, 20.0, 15.0, 10.0, 5.0, np.ones(45)]),
    "harmonic": (60_000, 1.0 / np.arange(1, 201)),
}
COV_QUANTILES = (0.5, 0.75, 0.9, 0.93, 0.95, 0.965, 0.975, 0.98, 0.985, 0.99,
                 0.993, 0.995, 0.998, 0.999)
COV_K = 5


def covariance_cell(name, scaling="model", seed=0):
    """Rows ``Q diag(√λ) z`` of the cell ``name`` in the unit ball (see the
    module's docstring): ``model`` divides by the model's radius and clips the
    rows beyond 1, ``max`` divides by the largest norm."""
    n, spectrum = COV_CELLS[name]
    rng = np.random.default_rng(seed + list(COV_CELLS).index(name))
    d = spectrum.shape[0]
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    q *= np.sign(np.diag(r))
    X = (rng.standard_normal((n, d)) * np.sqrt(spectrum)) @ q.T
    if scaling == "max":
        return X / np.linalg.norm(X, axis=1).max()
    X /= np.sqrt(spectrum.sum() + 4.0 * np.sqrt(2.0 * (spectrum**2).sum()))
    return X / np.maximum(np.linalg.norm(X, axis=1), 1.0)[:, None]


def covariance(n_seeds, scaling="model", only=None):
    """The second moment of ``"auto"`` against fixed bounds (module docstring).
    Returns the number of cells where ``"auto"`` misses the 1.1× target."""
    import time

    from sklearn_dppca.privacy import gdp_epsilon

    start = time.perf_counter()
    print(f"second moment, center=False, n_components=None, {n_seeds} seeds, "
          f"scaling={scaling}: error ||get_covariance()(n-1)/n - X'X/n||_F; "
          f"sin θ of the top {COV_K}")
    print(f"{'cell':9s} {'rho':>5s} {'eps':>5s} {'auto':>9s} {'best':>9s} "
          f"{'best C':>7s} {'auto/best':>9s} {'auto/C=1':>8s}  {'sin: auto':>9s} "
          f"{'auto k=5':>8s} {'best':>6s} {'C=1':>6s}  {'auto C':>6s} {'clipped':>7s}")
    misses, rows = 0, []
    for name in COV_CELLS:
        if only and name not in only:
            continue
        X = covariance_cell(name, scaling)
        n = X.shape[0]
        truth = X.T @ X / n
        values, vectors = np.linalg.eigh(truth)
        top = vectors[:, np.argsort(values)[::-1][:COV_K]].T
        norms = np.linalg.norm(X, axis=1)
        largest = float(norms.max())
        grid = sorted({largest * 2.0 ** (-i / 4.0) for i in range(5)}
                      | {float(np.quantile(norms, q)) for q in COV_QUANTILES})

        def run(eps, seed, **params):
            est = PrivatePCA(center=False, epsilon=eps, delta=1e-6,
                             accountant=BudgetAccountant(), random_state=seed,
                             **params)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PrivacyLeakWarning)
                est.fit(X)
            error = float(np.linalg.norm(est.get_covariance() * ((n - 1) / n) - truth))
            return est, error, principal_angle_sin(est.components_[:COV_K], top)

        for rho in COV_RHOS:
            eps = gdp_epsilon(np.sqrt(2.0 * rho), 1e-6)
            fixed = {}
            for bound in grid:
                fits = [run(eps, seed, data_norm=bound) for seed in range(n_seeds)]
                fixed[bound] = (np.mean([f[1] for f in fits]),
                                np.mean([f[2] for f in fits]))
            auto = [run(eps, seed, data_norm="auto") for seed in range(n_seeds)]
            sub = [run(eps, seed, data_norm="auto", n_components=COV_K)
                   for seed in range(n_seeds)]
            best = min(fixed, key=lambda b: fixed[b][0])
            error = float(np.mean([f[1] for f in auto]))
            ratio = error / fixed[best][0]
            misses += ratio > 1.1
            row = dict(cell=name, scaling=scaling, rho=rho, epsilon=eps,
                       auto=error, best=fixed[best][0], best_bound=best,
                       largest=fixed[largest][0], ratio=ratio,
                       sin_auto=float(np.mean([f[2] for f in auto])),
                       sin_auto_k=float(np.mean([f[2] for f in sub])),
                       sin_best=fixed[best][1], sin_largest=fixed[largest][1],
                       auto_bound=float(np.median([f[0].data_norm_ for f in auto])),
                       clipped=float(np.mean([np.mean(norms > f[0].data_norm_)
                                              for f in auto])))
            rows.append(row)
            print(f"{name:9s} {rho:5g} {eps:5.3g} {error:9.3g} {row['best']:9.3g} "
                  f"{best:7.3f} {ratio:9.2f} {error / row['largest']:8.2f}  "
                  f"{row['sin_auto']:9.3f} {row['sin_auto_k']:8.3f} "
                  f"{row['sin_best']:6.3f} {row['sin_largest']:6.3f}  "
                  f"{row['auto_bound']:6.3f} {row['clipped']:7.2%}"
                  + ("" if ratio <= 1.1 else "  MISS"), flush=True)
    print(f"auto within 1.1x of the best fixed bound: {len(rows) - misses}/{len(rows)} "
          f"cells ({time.perf_counter() - start:.0f} s)")
    return misses, rows


def sparse_rows(n, d, density, seed=0):
    """A CSR matrix of ``n × d`` with ``density · d`` entries a row, uniform
    on [0, 0.3), without a dense draw (the ``--density`` rows of ``--speed``)."""
    from scipy import sparse

    rng = np.random.default_rng(seed)
    per = max(1, round(density * d))
    indices = np.sort(rng.integers(0, d, size=(n, per)), axis=1).ravel()
    X = sparse.csr_matrix((rng.random(n * per) * 0.3, indices,
                           np.arange(0, n * per + 1, per)), shape=(n, d))
    X.sum_duplicates()
    return X


def speed(n=200_000, d=50, rounds=5, density=None):
    import time

    from sklearn.decomposition import PCA

    if density is not None:  # wide sparse rows (review 78): no shift, no sklearn
        X = sparse_rows(n, d, density)
        print(f"fit time, CSR {n} x {d} at density {density}, k = 5, eps = 1 "
              f"(fastest of {rounds} rounds)")
    else:
        X = np.random.default_rng(0).normal(size=(n, d))
        print(f"fit time, {n} x {d}, k = 5, eps = 1 (fastest of {rounds} rounds)")
    for shift in (0.0,) if density is not None else (0.0, SHIFT):
        data = X + shift if shift else X
        fits = {
            "sklearn PCA": lambda: PCA(5, svd_solver="covariance_eigh").fit(data),
            "data_norm=10": lambda: fit(data, 1.0, 0, data_norm=10.0),
            'data_norm="auto"': lambda: fit(data, 1.0, 0, data_norm="auto"),
            # issue 34: at most 2x PrivatePCA in memory, at the same bound
            "CoherentPowerPCA 10": lambda: fit(data, 1.0, 0, CoherentPowerPCA,
                                               data_norm=10.0),
        }
        if density is not None:
            del fits["sklearn PCA"], fits["CoherentPowerPCA 10"]
        best = dict.fromkeys(fits, np.inf)
        for _ in range(rounds):
            for name, run in fits.items():
                start = time.perf_counter()
                run()
                best[name] = min(best[name], time.perf_counter() - start)
        fixed = best["data_norm=10"]
        base = best.get("sklearn PCA", fixed)
        for name, seconds in best.items():
            print(f"  X + {shift:<5g} {name:18s} {seconds * 1e3:7.1f} ms  "
                  f"{seconds / base:5.2f}x sklearn  {seconds / fixed:5.2f}x fixed")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=None)
    parser.add_argument("--figure", metavar="PATH")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--speed", action="store_true")
    parser.add_argument("--rows", type=int, default=200_000,
                        help="--speed: rows (on many, the centre comes from the "
                             "first rows: docs/privacy.rst §5)")
    parser.add_argument("--features", type=int, default=50, help="--speed: columns")
    parser.add_argument("--density", type=float, default=None,
                        help="--speed: CSR rows of this density instead (review 78: "
                             "--rows 20000 --features 100000 --density 0.0005)")
    parser.add_argument("--rounds", type=int, default=5, help="--speed: rounds")
    parser.add_argument("--robust", action="store_true",
                        help="count bounds far above the data (default 200 seeds)")
    parser.add_argument("--covariance", action="store_true",
                        help="the second moment against fixed bounds (issue 23)")
    parser.add_argument("--scaling", choices=("model", "max"), default="model",
                        help="--covariance: rows into the unit ball by the model's "
                             "radius (and clipped) or by the largest norm")
    parser.add_argument("--datasets", nargs="+", metavar="NAME",
                        help="only these (default: all)")
    args = parser.parse_args(argv)
    if args.robust:
        return 1 if robust(args.seeds or 200, args.datasets) else 0
    if args.covariance:
        misses, rows = covariance(args.seeds or 10, args.scaling, args.datasets)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
        return 1 if misses else 0
    args.seeds = args.seeds or 10
    if args.sweep:
        sweep(args.seeds, args.datasets)
        return 0
    if args.speed:
        speed(args.rows, args.features, args.rounds, args.density)
        return 0
    rows = measure(args.seeds, args.datasets)
    print_table(rows)
    print()
    print("\n".join(verdict(rows)))
    if args.figure:
        figure(rows, args.figure)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
