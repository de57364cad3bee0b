"""Benchmark ``ComplexGaussPCA`` against ``PrivatePCA``: utility and fit time.

Both estimators release the centred, clipped scatter matrix at the same
``(epsilon, delta)`` and the same noise scale ``σ``; ``ComplexGaussPCA`` adds
Hermitian (GUE) noise whose real part is exactly ``PrivatePCA``'s GOE noise
and returns ``Ψ``, the best real rank-k approximation of ``Re Ψ̂`` (ALGORITHMS.md
§6). Three fits are compared, all with ``delta=1e-6``, ``data_norm=1.0``,
``center=True``:

- ``PrivatePCA(n_components=k, ...)``;
- ``ComplexGaussPCA(n_components=k, target="covariance", ...)``;
- ``ComplexGaussPCA(n_components=k, target="subspace", ...)``.

1. Utility. Synthetic data, one data set per spectrum (``--seed``): ``n`` rows
   (default 20 000) ``x = (z * sqrt(λ)) @ Qᵀ`` with ``Q`` a random
   orthogonal matrix and ``z`` standard normal rows, centred and whitened (QR)
   so that the sample covariance of ``z`` is exactly ``I_d``; ``d = 50``; the
   few rows of norm above 1 (about 0.1%) are then scaled down to norm 1. So
   the sample spectrum of the data is the designed ``λ``, up to that scaling,
   instead of being blurred by sampling error (about ``λ √(2/n)``, which would
   exceed the gaps of the last two families). Spectra (``k = 5``, a flat tail
   of 0.0005 beyond the listed values):

   - ``large gaps``: ``λ_i = 0.08 · 2^-(i-1)``, i = 1..k (ratio 2);
   - ``small gaps``: ``λ_1..λ_k`` evenly spread over [0.0294, 0.03] (within
     2% of each other), then the tail: a clear gap after ``λ_k`` only;
   - ``no gap``: ``large gaps``, but ``λ_{k+1} = 0.995 λ_k`` and
     ``λ_{k+2} = 0.99 λ_k``, so there is no gap at ``k``.

   The reference is the data set's own sample covariance ``np.cov(X)`` (true
   mean, divided by ``n - 1``), its top-k eigenvectors ``V_k`` and its best
   rank-k approximation ``M_k``. For each spectrum, each
   ``epsilon ∈ {0.1, 0.3, 1, 3}`` and each noise seed ``s = 0..seeds-1``
   (default 50), the three estimators are fitted with ``random_state=s``, so
   they share the noise of the private mean and the real part of the
   covariance noise. Per fit:

   (a) the rank-k covariance error ``‖Ψ − M_k‖_F / ‖M_k‖_F``, with
       ``Ψ = covariance_approximation_`` for ``ComplexGaussPCA`` and
       ``components_ᵀ diag(explained_variance_) components_`` for
       ``PrivatePCA``;
   (b) the subspace error ``sin θ = ‖(I − X̂X̂ᵀ) V_k‖₂`` (largest principal
       angle), ``X̂ = components_ᵀ``.

   Reported: mean ± standard deviation over the seeds, the median over seeds
   of the paired ratio ComplexGauss / PrivatePCA, and the fraction of seeds
   on which ComplexGauss (``target="covariance"``) has the smaller error.

2. Fit time on ``n x d = 100 000 x 1000``, ``k = 10``, the data of
   ``bench_fit.py`` (Gaussian rows with variances ``1/j``, a non-zero mean,
   ``data_norm`` the 99th-percentile row norm), ``epsilon=1``,
   ``random_state=None``: one warm-up fit of each, then ``--repeats``
   (default 9) rounds alternating ComplexGaussPCA (``target="covariance"``),
   PrivatePCA, timed with ``bench_fit.time_fit``. Reported: median times, the
   median of the per-round ratios ComplexGauss / PrivatePCA (the number the
   target applies to) and, as a check on interference from other load, the
   fastest time of each and their ratio. Target: ratio <= 1.5, reported, not
   enforced (the exit status is 0 either way).

Fixed seeds make the fits non-private; the :class:`PrivacyLeakWarning` they
raise is silenced here. Nothing is tuned per estimator.

Run from the repository root with the package installed::

    python benchmarks/bench_complex.py            # full run, about a minute
    python benchmarks/bench_complex.py --quick    # smoke run, under 30 s
    python benchmarks/bench_complex.py --seeds 100 --json out.json
"""

import argparse
import json
import math
import os
import statistics
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_fit import (  # noqa: E402
    environment,
    make_data,
    print_environment,
    time_fit,
)

from sklearn_dppca import ComplexGaussPCA, PrivacyLeakWarning, PrivatePCA  # noqa: E402
from sklearn_dppca._base import MEAN_BUDGET_SHARE  # noqa: E402
from sklearn_dppca.privacy import gdp_mu  # noqa: E402

TIME_RATIO_TARGET = 1.5
DELTA = 1e-6
TAIL = 0.0005  # population variance of every direction beyond the listed ones
SPECTRA = ("large gaps", "small gaps", "no gap")
ESTIMATORS = ("PrivatePCA", "CG covariance", "CG subspace")


def population_spectrum(name, d, k):
    """The ``d`` population eigenvalues of the spectrum family ``name``."""
    lam = np.full(d, TAIL)
    if name == "large gaps":
        lam[:k] = 0.08 * 0.5 ** np.arange(k)
    elif name == "small gaps":
        lam[:k] = 0.03 * (1.0 - 0.02 * np.arange(k) / max(k - 1, 1))
    elif name == "no gap":
        lam[:k] = 0.08 * 0.5 ** np.arange(k)
        lam[k:k + 2] = lam[k - 1] * np.array([0.995, 0.99])[: d - k]
    else:
        raise ValueError(name)
    return lam


def make_spectral_data(n, d, eigenvalues, seed):
    """Rows ``(z * sqrt(λ)) @ Qᵀ``, ``z`` whitened, scaled to norm <= 1.

    Returns ``X`` and the fraction of rows that were scaled down.
    """
    rng = np.random.default_rng(seed)
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    q *= np.sign(np.diag(r))  # Haar-distributed orthogonal matrix
    z = rng.standard_normal((n, d))
    z -= z.mean(axis=0)
    z = np.linalg.qr(z)[0] * math.sqrt(n - 1)  # sample covariance exactly I
    X = (z * np.sqrt(eigenvalues)) @ q.T
    norms = np.linalg.norm(X, axis=1)
    X /= np.maximum(norms, 1.0)[:, None]
    return X, float(np.mean(norms > 1.0))


def noise_level(epsilon, n, d):
    """``σ√(2d)/(n−1)``: about ``‖GOE noise‖₂`` in covariance units."""
    mu_cov = gdp_mu(epsilon, DELTA) * math.sqrt(1.0 - MEAN_BUDGET_SHARE)
    return math.sqrt(2.0) / mu_cov * math.sqrt(2.0 * d) / (n - 1)


def utility_estimators(k, epsilon, seed):
    """The three fits of one (epsilon, seed), sharing ``random_state``."""
    common = dict(n_components=k, epsilon=epsilon, delta=DELTA, data_norm=1.0,
                  center=True, random_state=seed)
    return {
        "PrivatePCA": PrivatePCA(**common),
        "CG covariance": ComplexGaussPCA(target="covariance", **common),
        "CG subspace": ComplexGaussPCA(target="subspace", **common),
    }


def rank_k_matrix(est):
    """``components_ᵀ diag(explained_variance_) components_``, covariance units."""
    if isinstance(est, ComplexGaussPCA):
        return est.covariance_approximation_
    return (est.components_.T * est.explained_variance_) @ est.components_


def errors(est, top_vectors, m_k):
    """Relative rank-k covariance error and ``sin θ`` of a fitted estimator."""
    cov_error = np.linalg.norm(rank_k_matrix(est) - m_k) / np.linalg.norm(m_k)
    x_hat = est.components_.T
    residual = top_vectors - x_hat @ (x_hat.T @ top_vectors)
    return float(cov_error), float(np.linalg.norm(residual, 2))


def summarise(values, baseline):
    """Mean, sd, median paired ratio to ``baseline`` and fraction below it."""
    values, baseline = np.asarray(values), np.asarray(baseline)
    return {
        "mean": float(values.mean()),
        "sd": float(values.std(ddof=1)) if len(values) > 1 else 0.0,
        "median_ratio": float(np.median(values / baseline)),
        "fraction_better": float(np.mean(values < baseline)),
    }


def bench_utility(spectrum, n, d, k, epsilons, seeds, data_seed):
    """All fits for one spectrum; per-seed errors and their summaries."""
    spectrum_values = population_spectrum(spectrum, d, k)
    X, clipped = make_spectral_data(n, d, spectrum_values, data_seed)
    values, vectors = np.linalg.eigh(np.cov(X, rowvar=False))
    values, vectors = values[::-1], vectors[:, ::-1]
    top = vectors[:, :k]
    m_k = (top * values[:k]) @ top.T
    cells = []
    for epsilon in epsilons:
        per_seed = {name: {"cov": [], "sin": []} for name in ESTIMATORS}
        for seed in range(seeds):
            for name, est in utility_estimators(k, epsilon, seed).items():
                cov_error, sin_theta = errors(est.fit(X), top, m_k)
                per_seed[name]["cov"].append(cov_error)
                per_seed[name]["sin"].append(sin_theta)
        base = per_seed["PrivatePCA"]
        cells.append({
            "epsilon": epsilon,
            "noise_level": noise_level(epsilon, n, d),
            "per_seed": per_seed,
            "summary": {
                name: {metric: summarise(per_seed[name][metric], base[metric])
                       for metric in ("cov", "sin")}
                for name in ESTIMATORS
            },
        })
    return {"spectrum": spectrum, "n": n, "d": d, "k": k, "seeds": seeds,
            "fraction_scaled": clipped,
            "sample_eigenvalues": values[:k + 2].tolist(),
            "results": cells}


def bench_time(n, d, k, repeats, seed):
    """Alternating ComplexGaussPCA / PrivatePCA fits after one warm-up of each."""
    X, data_norm = make_data(n, d, seed)
    common = dict(n_components=k, epsilon=1.0, delta=DELTA, data_norm=data_norm,
                  random_state=None)
    makers = {
        "ComplexGaussPCA": lambda: ComplexGaussPCA(target="covariance", **common),
        "PrivatePCA": lambda: PrivatePCA(**common),
    }
    times = {name: [] for name in makers}
    for round_ in range(repeats + 1):  # round 0 is the warm-up
        for name, make in makers.items():
            seconds = time_fit(make, X)
            if round_:
                times[name].append(seconds)
    ratio = statistics.median(
        a / b for a, b in zip(times["ComplexGaussPCA"], times["PrivatePCA"]))
    return {"n": n, "d": d, "k": k, "data_norm": data_norm, "times_s": times,
            "median_s": {name: statistics.median(t) for name, t in times.items()},
            "min_s": {name: min(t) for name, t in times.items()},
            "ratio": ratio, "target": TIME_RATIO_TARGET,
            "target_met": ratio <= TIME_RATIO_TARGET}


def fmt(s):
    return f"{s['mean']:.3g} ± {s['sd']:.2g}"


def markdown_tables(utility):
    """One Markdown table per metric, a row per (spectrum, epsilon)."""
    titles = {"cov": "Rank-k covariance error ‖Ψ − M_k‖_F / ‖M_k‖_F",
              "sin": "Subspace error sin θ = ‖(I − X̂X̂ᵀ) V_k‖₂"}
    tables = {}
    for metric, title in titles.items():
        lines = [
            f"**{title}** (mean ± sd over seeds; ratio: median of per-seed "
            "ComplexGauss / PrivatePCA; CG better: fraction of seeds with "
            "CG covariance < PrivatePCA)",
            "",
            "| spectrum | ε | PrivatePCA | CG covariance | CG subspace "
            "| ratio CG cov | ratio CG sub | CG better |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for block in utility:
            for cell in block["results"]:
                s = cell["summary"]
                lines.append(
                    f"| {block['spectrum']} | {cell['epsilon']:g} "
                    f"| {fmt(s['PrivatePCA'][metric])} "
                    f"| {fmt(s['CG covariance'][metric])} "
                    f"| {fmt(s['CG subspace'][metric])} "
                    f"| {s['CG covariance'][metric]['median_ratio']:.3f} "
                    f"| {s['CG subspace'][metric]['median_ratio']:.3f} "
                    f"| {s['CG covariance'][metric]['fraction_better']:.2f} |")
        tables[metric] = "\n".join(lines)
    return tables


def print_report(env, utility, tables, timing):
    print_environment(env)
    if utility:
        first = utility[0]
        print(f"Utility: n={first['n']}, d={first['d']}, k={first['k']}, "
              f"{first['seeds']} noise seeds, delta={DELTA:g}, data_norm=1")
        for block in utility:
            eig = ", ".join(f"{v:.4g}" for v in block["sample_eigenvalues"])
            print(f"  {block['spectrum']:>10}: sample λ_1..λ_k+2 = {eig}; "
                  f"rows scaled to norm 1: {100 * block['fraction_scaled']:.2f}%")
        print("  noise level σ√(2d)/(n−1) ≈ ‖GOE noise‖₂ in covariance units: "
              + ", ".join(f"ε={c['epsilon']:g}: {c['noise_level']:.2g}"
                          for c in first["results"]))
        print()
        for metric in ("cov", "sin"):
            print(tables[metric])
            print()
    if timing:
        t = timing
        print(f"Fit time, {t['n']}x{t['d']} k={t['k']}, "
              f"{len(t['times_s']['PrivatePCA'])} alternating rounds after a warm-up:")
        print(f"  ComplexGaussPCA {t['median_s']['ComplexGaussPCA']:.3f}s, "
              f"PrivatePCA {t['median_s']['PrivatePCA']:.3f}s (medians); "
              f"ratio {t['ratio']:.2f} (median of per-round ratios)")
        fastest = t["min_s"]
        print(f"  fastest rounds: ComplexGaussPCA {fastest['ComplexGaussPCA']:.3f}s, "
              f"PrivatePCA {fastest['PrivatePCA']:.3f}s, ratio "
              f"{fastest['ComplexGaussPCA'] / fastest['PrivatePCA']:.2f}")
        print(f"  Target ratio <= {TIME_RATIO_TARGET}: "
              f"{'met' if t['target_met'] else 'NOT met'}")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--n-samples", type=int, default=20_000,
                        help="rows of the utility data (default: %(default)s)")
    parser.add_argument("-d", "--n-features", type=int, default=50,
                        help="features of the utility data (default: %(default)s)")
    parser.add_argument("-k", "--n-components", type=int, default=5,
                        help="components of the utility fits (default: %(default)s)")
    parser.add_argument("--epsilons", type=float, nargs="+",
                        default=[0.1, 0.3, 1.0, 3.0],
                        help="privacy levels (default: %(default)s)")
    parser.add_argument("--spectra", nargs="+", choices=SPECTRA, default=list(SPECTRA),
                        help="spectrum families (default: all)")
    parser.add_argument("--seeds", type=int, default=50,
                        help="noise seeds per cell (default: %(default)s)")
    parser.add_argument("--time-shape", default="100000x1000", metavar="NxD",
                        help="shape of the timing data (default: %(default)s)")
    parser.add_argument("--time-k", type=int, default=10,
                        help="components of the timed fits (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=9,
                        help="timed rounds after the warm-up (default: %(default)s)")
    parser.add_argument("--no-utility", action="store_true", help="skip part 1")
    parser.add_argument("--no-timing", action="store_true", help="skip part 2")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: n/4 rows and 10 seeds for utility, "
                        "n/10 rows and at most 5 rounds for timing")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data")
    parser.add_argument("--json", metavar="PATH", help="also write results as JSON")
    return parser.parse_args()


def main():
    args = parse_args()
    warnings.filterwarnings("ignore", category=PrivacyLeakWarning)
    start = time.perf_counter()
    n = args.n_samples // 4 if args.quick else args.n_samples
    seeds = min(args.seeds, 10) if args.quick else args.seeds
    utility = [] if args.no_utility else [
        bench_utility(spectrum, n, args.n_features, args.n_components,
                      args.epsilons, seeds, args.seed)
        for spectrum in args.spectra
    ]
    tables = markdown_tables(utility)
    timing = None
    if not args.no_timing:
        tn, td = map(int, args.time_shape.lower().split("x"))
        repeats = min(args.repeats, 5) if args.quick else args.repeats
        timing = bench_time(tn // 10 if args.quick else tn, td, args.time_k,
                            repeats, args.seed)
    env = environment()
    print_report(env, utility, tables, timing)
    elapsed = time.perf_counter() - start
    print(f"\nTotal {elapsed:.0f}s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "quick": args.quick, "args": vars(args),
                       "elapsed_s": elapsed, "utility": utility,
                       "tables_markdown": tables, "timing": timing}, f, indent=2)


if __name__ == "__main__":
    main()
