"""Where ``n`` is close to ``d``: the spiked setting of issue 34.

Rows ``x = z + √10 g₁ u₁ + √5 g₂ u₂`` with ``z`` standard normal in ``d``
dimensions and ``u₁, u₂`` a random orthonormal pair (covariance ``I + 10
u₁u₁ᵀ + 5 u₂u₂ᵀ``), ``k = 2``, ``ε = 1``, ``δ = 0.01``, and a public norm
bound: the 99th percentile of the model's row norm, simulated from the model
alone (not from the data). For ``d ∈ {200, 1000}`` and ``n ∈ {d, 2d, 5d,
10d, 20d}`` it fits, on the same rows per seed:

- ``PrivatePCA`` with that bound, and with ``data_norm="auto"``;
- ``CoherentPowerPCA`` with that bound, as a user gets it (``start="auto"``:
  the random start, power iterations from a random basis with no covariance
  release, wherever public values say the covariance release would be
  noise; the branch it took is counted), and with ``start="covariance"``
  (the covariance start and its branch rule);
- the peers, written from their papers (``peers.KDPPCA``: Düngler &
  Sanyal's k-DP-PCA at ``k = 2``, deflation over two disjoint halves of the
  rows; ``peers.DPPCA``: Liu et al.'s DP-PCA, ``k = 1``: a private top
  eigenvalue on part of the rows, then one pass of minibatch Oja steps with
  a privately estimated clipping range per batch), and, as a labelled
  variant, the earlier reconstruction ``peers.AdaptiveOjaPCA`` at ``k = 2``
  and ``k = 1``; each peer in each cell with the constants the papers leave
  open (:data:`PEER_GRIDS`) that did best on four tuning seeds of its own
  (:func:`tune_peer`, without privacy: kind to the peers);
- scikit-learn's ``PCA`` (no privacy: the sampling error alone);

and reports the ``sin θ`` of the top ``k`` against ``u₁, u₂`` (mean ± sd
over the seeds) beside ``PrivatePCA``'s predicted one (:func:`predicted`, from
public values), and the ``sin θ`` of the first component against ``u₁`` (the
``k = 1`` problem of DP-PCA; ours are the same fits' first components), as
tables in Markdown, the rows as CSV, and a figure.

Run from the repository root (about 25 minutes on 2 cores)::

    nice python benchmarks/bench_frontier.py --seeds 20 \\
        --csv docs/_static/benchmarks/frontier.csv \\
        --plot docs/_static/benchmarks/frontier.png

``--tiny`` runs one seed at ``d = 20`` (a smoke test).
"""

import argparse
import csv
import functools
import math
import time
import warnings

import numpy as np
from peers import DPPCA, KDPPCA, AdaptiveOjaPCA
from sklearn.decomposition import PCA

from sklearn_dppca import BudgetAccountant, CoherentPowerPCA, PrivatePCA
from sklearn_dppca.metrics import principal_angle_sin

K, EPSILON, DELTA = 2, 1.0, 0.01
SPIKES = (10.0, 5.0)
MULTIPLES = (1, 2, 5, 10, 20)
OURS = ("PrivatePCA", 'PrivatePCA, "auto"', "CoherentPowerPCA",
        'CoherentPowerPCA, start="covariance"')
#: The peers: k-DP-PCA at k = 2; DP-PCA at k = 1 (only its first component
#: scored); the earlier reconstruction at both, a labelled variant.
K_DP_PCA, DP_PCA = "k-DP-PCA", "DP-PCA (k = 1)"
OJA_2, OJA_1 = "adaptive Oja (rec.)", "adaptive Oja (rec., k = 1)"
EXACT = "PCA (not private)"
METHODS = OURS + (K_DP_PCA, OJA_2, EXACT)
#: The constants the papers leave to their theory (peers.py, section 4),
#: searched per cell on TUNING_SEEDS (disjoint from the evaluation seeds
#: ``0 … seeds − 1``): the number of Oja steps (minibatches), α of
#: ``η_t = α/(λ̂₁(ξ + t))`` (ξ = 1; large α: steps close to power steps),
#: the clipping radius over the private range, and the share of the rows
#: spent on λ̂₁ (0.5: DP-PCA's half; less is kinder to the peer). A wider
#: search at d = 200 (4 steps, α from 1, radius from 0.06 to 2, shares down
#: to 0.05) found nothing better outside this grid by more than 0.01.
_PAPER_GRID = [dict(n_steps=t, alpha=a, radius_factor=r, eig_fraction=f)
               for t in (2, 3) for a in (64.0, 1e4) for r in (0.125, 0.25, 0.5)
               for f in (0.5, 0.2, 0.05)]
_OJA_GRID = [dict(n_batches=b, learning_rate=lr, clip_quantile=q)
             for b in (1, 2, 3, 5) for lr in (1.0, math.inf)
             for q in (0.02, 0.1, 0.2, 0.35)]
#: name -> (class, k, grid)
PEERS = {K_DP_PCA: (KDPPCA, K, _PAPER_GRID), DP_PCA: (DPPCA, 1, _PAPER_GRID),
         OJA_2: (AdaptiveOjaPCA, K, _OJA_GRID),
         OJA_1: (AdaptiveOjaPCA, 1, _OJA_GRID)}
PEER_GRIDS = {name: grid for name, (_, _, grid) in PEERS.items()}
TUNING_SEEDS = range(1_000, 1_004)


def spiked_rows(n, basis, rng):
    """``n`` rows of covariance ``I + Σ_j s_j u_j u_jᵀ``."""
    X = rng.standard_normal((n, basis.shape[0]))
    X += (rng.standard_normal((n, len(SPIKES))) * np.sqrt(SPIKES)) @ basis.T
    return X


@functools.lru_cache(maxsize=None)
def public_bound(d, quantile=0.99, draws=100_000, seed=12345):
    """The model's row-norm quantile, by simulation from its parameters (the
    norm's law does not depend on the basis)."""
    basis = np.eye(d)[:, :len(SPIKES)]
    rng = np.random.default_rng(seed)
    norms = np.concatenate([
        np.linalg.norm(spiked_rows(min(draws, 20_000), basis, rng), axis=1)
        for _ in range(max(1, draws // 20_000))])
    return float(np.quantile(norms, quantile))


def make(method, bound, seed):
    common = dict(epsilon=EPSILON, delta=DELTA, random_state=seed,
                  accountant=BudgetAccountant())
    if method == "PrivatePCA":
        return PrivatePCA(K, data_norm=bound, **common)
    if method == 'PrivatePCA, "auto"':
        return PrivatePCA(K, data_norm="auto", **common)
    if method == "CoherentPowerPCA":
        return CoherentPowerPCA(K, data_norm=bound, **common)
    if method == 'CoherentPowerPCA, start="covariance"':
        return CoherentPowerPCA(K, data_norm=bound, start="covariance", **common)
    return PCA(K, svd_solver="full")


def sample(d, n, seed):
    rng = np.random.default_rng(1_000 * seed + d)
    basis = np.linalg.qr(rng.standard_normal((d, K)))[0]
    return spiked_rows(n, basis, rng), basis


def _peer(name, params, X, seed):
    """The peer ``name`` with the constants ``params``, fitted."""
    cls, k, _ = PEERS[name]
    kwargs = dict(epsilon=EPSILON, delta=DELTA, random_state=seed, **params)
    return (cls(**kwargs) if cls is DPPCA else cls(k, **kwargs)).fit(X)


def _peer_sin(name, params, X, basis, seed):
    k = PEERS[name][1]
    return principal_angle_sin(_peer(name, params, X, seed).components_,
                               basis.T[:k])


@functools.lru_cache(maxsize=None)
def tune_peer(d, n, name):
    """The grid point with the least mean ``sin θ`` on ``TUNING_SEEDS``."""
    grid = PEERS[name][2]
    data = [sample(d, n, seed) for seed in TUNING_SEEDS]
    scores = [np.mean([_peer_sin(name, params, X, basis, seed)
                       for seed, (X, basis) in zip(TUNING_SEEDS, data)])
              for params in grid]
    return grid[int(np.argmin(scores))]


def run(dims, multiples, seeds, log=print):
    rows = []
    for d in dims:
        bound = public_bound(d)
        for m in multiples:
            n = m * d
            start = time.perf_counter()
            tuned = {name: tune_peer(d, n, name) for name in PEERS}
            log(f"d={d} n={m}d: peers tuned to {tuned} "
                f"({time.perf_counter() - start:.1f}s)")
            for seed in seeds:
                X, basis = sample(d, n, seed)
                for method, (_, k, _) in PEERS.items():
                    est = _peer(method, tuned[method], X, seed)
                    rows.append(dict(
                        d=d, n=n, multiple=m, seed=seed, method=method,
                        sin_theta=(principal_angle_sin(est.components_, basis.T)
                                   if k == K else math.nan),
                        sin_theta_1=principal_angle_sin(est.components_[:1],
                                                        basis.T[:1]),
                        branch=""))
                for method in OURS + (EXACT,):
                    sin = sin_1 = math.nan
                    branch = "refused"
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # fixed seeds, noise
                        try:
                            est = make(method, bound, seed).fit(X)
                        except ValueError as error:
                            # "auto" on too few rows: refused before any
                            # charge (its searches would drown in noise)
                            if "before any charge" not in str(error):
                                raise
                        else:
                            sin = principal_angle_sin(est.components_, basis.T)
                            sin_1 = principal_angle_sin(est.components_[:1],
                                                        basis.T[:1])
                            branch = getattr(est, "branch_", "")
                    rows.append(dict(d=d, n=n, multiple=m, seed=seed,
                                     method=method, sin_theta=sin,
                                     sin_theta_1=sin_1, branch=branch))
            log(f"d={d} n={m}d: {time.perf_counter() - start:.1f}s")
    return rows


def summary(rows, metric="sin_theta"):
    """``{(d, multiple, method): (mean, sd, branches)}`` of ``metric``."""
    cells = {}
    for r in rows:
        cells.setdefault((r["d"], r["multiple"], r["method"]), []).append(r)
    out = {}
    for key, group in cells.items():
        values = np.array([r[metric] for r in group], dtype=float)
        values = values[np.isfinite(values)]  # refused fits apart
        branches = {}
        for r in group:
            if r["branch"]:
                branches[r["branch"]] = branches.get(r["branch"], 0) + 1
        out[key] = (values.mean() if values.size else math.nan,
                    values.std() if values.size else math.nan, branches)
    return out


def predicted(n, d):
    """``PrivatePCA``'s (fixed bound) predicted ``sin θ`` of the top 2: the
    weaker spike's ``min(1, n*/n)``, ``n* = C² √d / (μ s)`` with the
    covariance's ``μ`` from its plan (the BBP threshold of the GOE release;
    docs/benchmarks.rst, "Where n is close to d"). Public values only."""
    bound = public_bound(d)
    mu = PrivatePCA(K, epsilon=EPSILON, delta=DELTA, data_norm=bound)._privacy_plan(
        n, d).mus["covariance"]
    threshold = bound**2 * math.sqrt(d) / (mu * min(SPIKES))
    return min(1.0, threshold / n)


def table(rows):
    stats = summary(rows)
    firsts = summary(rows, "sin_theta_1")
    dims = sorted({r["d"] for r in rows})
    multiples = sorted({r["multiple"] for r in rows})
    first_methods = OURS + (DP_PCA, K_DP_PCA, OJA_1)
    lines = []
    for d in dims:
        lines += [f"d = {d} (k = {K}, ε = {EPSILON:g}, δ = {DELTA:g}; sin θ of "
                  "the top 2, mean ± sd)", "",
                  "| n | " + " | ".join(METHODS) + " | CoherentPowerPCA's branch "
                  "| predicted, PrivatePCA | best of ours / peer |",
                  "|---" * (len(METHODS) + 4) + "|"]
        for m in multiples:
            cells = [_cell(stats[d, m, meth]) for meth in METHODS]
            branches = ", ".join(f"{b} {c}" for b, c in sorted(
                stats[d, m, "CoherentPowerPCA"][2].items()))
            lines.append(f"| {m}d | " + " | ".join(cells) + f" | {branches} "
                         f"| {predicted(m * d, d):.2f} | "
                         f"{_versus(stats, d, m, (K_DP_PCA, OJA_2))} |")
        lines += ["", f"d = {d}: sin θ of the first component against u₁", "",
                  "| n | " + " | ".join(first_methods) + " | best of ours / "
                  "best peer |", "|---" * (len(first_methods) + 2) + "|"]
        for m in multiples:
            cells = [_cell(firsts[d, m, meth]) for meth in first_methods]
            lines.append(f"| {m}d | " + " | ".join(cells) + " | "
                         f"{_versus(firsts, d, m, first_methods[-3:])} |")
        lines.append("")
    return "\n".join(lines)


def _versus(stats, d, m, peers):
    """The best of our means over the best peer's (≤ 1: ours wins)."""
    ours = min(stats[d, m, meth][0] for meth in OURS
               if math.isfinite(stats[d, m, meth][0]))
    theirs = min(stats[d, m, meth][0] for meth in peers)
    return f"{ours:.3f} / {theirs:.3f}"


def _cell(stat):
    mean, sd, branches = stat
    refused = branches.get("refused", 0)
    if not math.isfinite(mean):
        return f"refused ({refused})"
    return f"{mean:.3f} ± {sd:.3f}" + (f" ({refused} refused)" if refused else "")


def plot(rows, path):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    stats = summary(rows)
    dims = sorted({r["d"] for r in rows})
    multiples = sorted({r["multiple"] for r in rows})
    fig = Figure(figsize=(4.2 * len(dims), 3.4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = np.atleast_1d(fig.subplots(1, len(dims)))
    for ax, d in zip(axes, dims):
        for method in METHODS:
            mean = np.array([stats[d, m, method][0] for m in multiples])
            sd = np.array([stats[d, m, method][1] for m in multiples])
            ax.errorbar(multiples, mean, yerr=sd, marker="o", capsize=3,
                        label=method)
        ax.set_xscale("log")
        ax.set_xticks(multiples, labels=[f"{m}d" for m in multiples])
        ax.minorticks_off()
        ax.set_ylim(-0.03, 1.05)
        ax.set_xlabel("n")
        ax.set_ylabel("sin θ of the top 2")
        ax.set_title(f"d = {d}")
        ax.grid(alpha=0.3)
    axes[0].legend(loc="lower left", fontsize=8)
    fig.suptitle(f"Spiked covariance I + 10 u₁u₁ᵀ + 5 u₂u₂ᵀ, ε = {EPSILON:g}, "
                 f"δ = {DELTA:g}")
    fig.savefig(path, dpi=120)


def load(paths):
    """The rows of earlier runs' CSVs, typed as :func:`run` gives them."""
    rows = []
    for path in paths:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                rows.append(dict(r, d=int(r["d"]), n=int(r["n"]),
                                 multiple=int(r["multiple"]), seed=int(r["seed"]),
                                 sin_theta=float(r["sin_theta"]),
                                 sin_theta_1=float(r["sin_theta_1"])))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--dims", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--csv")
    parser.add_argument("--plot")
    parser.add_argument("--tiny", action="store_true")
    parser.add_argument("--load", nargs="+", metavar="CSV",
                        help="table and plot the rows of earlier runs' CSVs "
                             "(e.g. one per --dims) instead of running")
    args = parser.parse_args(argv)
    dims, seeds = args.dims, range(args.seeds)
    if args.tiny:
        dims, seeds = [20], range(1)
    rows = load(args.load) if args.load else run(dims, MULTIPLES, seeds)
    print(table(rows))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
