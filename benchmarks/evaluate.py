"""Utility and cost of private PCA across datasets, budgets and peers, in one run.

For every dataset and every ε in {0.1, 0.3, 1, 3, 10} (δ = 1e-6), fits over
``--seeds`` noise seeds (default 10):

=======================  ==========================================================
estimator                what it is
=======================  ==========================================================
PrivatePCA               this package, Gaussian noise on the covariance
ComplexGaussPCA          this package, Hermitian noise (``target="covariance"``)
CoherentPowerPCA         this package, private power method (default selection);
                         with its defaults (see below)
Textbook Gauss           ``peers.TextbookGaussPCA``: PrivatePCA with the classical
                         ``σ = 2C²√(2 ln(1.25/δ))/ε`` (sensitivity 2C²), the
                         baseline that shows what the exact calibration gains
diffprivlib              IBM diffprivlib 0.6.6 ``PCA`` (Amin et al. 2019), pure
                         ε-DP (δ = 0), run in its own environment (``peers.py``)
sklearn PCA              ``sklearn.decomposition.PCA``, not private (ε = ∞): the
                         reference the others are measured against
=======================  ==========================================================

Every private fit gets the same ``data_norm`` ``C``, private centring
(``center=True``; diffprivlib ``centered=False``), ``random_state=seed`` and a
fresh unlimited ``BudgetAccountant()``. Seeds are shared across estimators, so
PrivatePCA, ComplexGaussPCA and the textbook baseline draw the same Gaussian
numbers (scaled differently): their comparison is paired. Fixed seeds make
fits non-private by design; the ``PrivacyLeakWarning`` that says so is
silenced here.

Datasets (``k`` = components fitted, chosen per dataset):

- ``digits``, ``breast_cancer``, ``wine``, ``diabetes``:
  :func:`sklearn_dppca.datasets.load_real_dataset` (digits on its public pixel
  scale, ``C = 8``; the others standardised, ``C = 2√d``), ``k = 2`` (the
  usual two-dimensional view).
- ``synthetic-incoherent`` and ``synthetic-coherent``:
  :func:`~sklearn_dppca.datasets.make_coherent_low_rank` with n = 50 000
  (10 000 in ``--quick``), d = 100, planted rank ``k = 3``, eigengap 0.9,
  ``C = 1``; coherence ``None`` (signal spread over all rows, the regime
  CoherentPowerPCA is designed for) and ``0.05`` (signal on ~1 200 rows).

Utility, against the non-private PCA of the same data (``sklearn_dppca.metrics``):

- captured variance ``tr(X̂ᵀ Cov X̂) / tr(V_kᵀ Cov V_k)`` (1 is perfect);
- ``sin θ = ‖(I − X̂X̂ᵀ) V_k‖₂`` against the non-private top-k (0 is perfect).

Reported per (dataset, ε, estimator): mean, standard deviation, median and
quartiles over the seeds, the median fit time, and for this package's
estimators the share of seeds on which each beats PrivatePCA's ``sin θ``
(paired). A cell of diffprivlib is reported only when every seed finished.

Cost: the fit time of every fit above, and a scan of fit time vs n (d = 50)
and vs d (n = 10 000) on ``bench_fit.make_data`` rows at ε = 1, ``k = 3``:
one warm-up then ``--repeats`` rounds alternating the in-process estimators;
the fastest round is reported (the least disturbed by other load; medians are
in ``timing.csv``). diffprivlib is timed in its subprocess, not interleaved.

Every fit runs with one BLAS thread (``--blas-threads 1``, here and in
diffprivlib's subprocess). On a shared 2-core machine a second BLAS thread
that the operating system deschedules stalls each BLAS call at its barrier:
one PrivatePCA fit on 10 000 × 100 measured 0.01 s single-threaded and a
median of 0.5 s with two threads while other processes ran. The times are
thus per-core costs; ``bench_fit.py`` measures the multi-threaded fit.

CoherentPowerPCA in this benchmark runs with its defaults
(``selection="gdp"``: one short exact-GDP run that releases its power
iterations only where the released values promise a win, and otherwise a
second covariance release; about twice PrivatePCA's fit time).
``--cp-expected-trials`` and ``--cp-n-iter-max`` matter only for
``selection="repetition"`` (the paper's random repetitions), whose trial count
drives its cost and its privacy calibration (``ln(1/θ)``).

diffprivlib: see ``peers.py``. Its environment is created on the first run
under ``benchmarks/.peer-env/`` (needs the package index, ~20 s); with
``--no-diffprivlib``, or when it cannot be created, it is reported as
unavailable with the reason and the run goes on.

Outputs in ``--out`` (default ``benchmarks/results/``): ``results.csv``
(summary, one row per dataset × estimator × ε), ``runs.csv`` (every fit),
``timing.csv`` (the scan), ``results.md`` (the tables, also printed) and the
figures ``utility_captured_variance.png``, ``utility_sin_theta.png``,
``fit_time_vs_n.png``, ``fit_time_vs_d.png``; ``--json PATH`` writes
everything as JSON.

Run from the repository root::

    python benchmarks/evaluate.py --quick     # ~45 s on 2 cores (< 3 minutes)
    python benchmarks/evaluate.py             # full: ~5 minutes on 2 cores
"""

import argparse
import csv
import json
import math
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.decomposition import PCA
from sklearn.utils import Bunch
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fit import environment, make_data, print_environment, time_fit  # noqa: E402
from peers import (  # noqa: E402
    DEFAULT_PEER_ENV,
    TextbookGaussPCA,
    diffprivlib_runner,
    run_diffprivlib,
)

from sklearn_dppca import (  # noqa: E402
    BudgetAccountant,
    CoherentPowerPCA,
    ComplexGaussPCA,
    PrivacyLeakWarning,
    PrivatePCA,
)
from sklearn_dppca.datasets import load_real_dataset, make_coherent_low_rank  # noqa: E402
from sklearn_dppca.metrics import captured_variance, principal_angle_sin  # noqa: E402

EPSILONS = (0.1, 0.3, 1.0, 3.0, 10.0)
DELTA = 1e-6
REAL_K = {"digits": 2, "breast_cancer": 2, "wine": 2, "diabetes": 2}
SYNTHETIC = {
    "synthetic-incoherent": {"coherence": None},
    "synthetic-coherent": {"coherence": 0.05},
}
SYNTHETIC_SHAPE = {"n": 50_000, "d": 100, "k": 3, "eigengap": 0.9}
QUICK_SYNTHETIC_N = 10_000
ALL_DATASETS = (*REAL_K, *SYNTHETIC)
#: Paired comparisons call differences of sin θ below this a tie.
TIE = 1e-3
#: CoherentPowerPCA's settings here: its defaults, unless the CLI changes them.
CP_SETTINGS = {}

PRIVATE = ("PrivatePCA", "ComplexGaussPCA", "CoherentPowerPCA", "Textbook Gauss")
PEER = "diffprivlib"
#: diffprivlib given the data centred on its true (non-private) mean, with
#: ``centered=True``: its whole ε goes to the covariance. Not a private fit;
#: it isolates Amin et al.'s covariance mechanism from diffprivlib's mean.
PEER_CENTRED = "diffprivlib (true mean)"
PEERS = (PEER, PEER_CENTRED)
REFERENCE = "sklearn PCA"
ESTIMATORS = (*PRIVATE, *PEERS, REFERENCE)
STYLE = {  # colour, marker of each estimator in the figures
    "PrivatePCA": ("tab:blue", "o"),
    "ComplexGaussPCA": ("tab:orange", "s"),
    "CoherentPowerPCA": ("tab:green", "^"),
    "Textbook Gauss": ("tab:red", "v"),
    "diffprivlib": ("tab:purple", "D"),
    "diffprivlib (true mean)": ("tab:pink", "d"),
    "sklearn PCA": ("black", "x"),
}


# --------------------------------------------------------------------------
# Data and estimators
# --------------------------------------------------------------------------
def load_dataset(name, quick=False):
    """The data, its norm bound, ``k`` and diffprivlib's per-feature bounds."""
    if name in REAL_K:
        b = load_real_dataset(name)
        X, C = b.data, b.data_norm
        # diffprivlib's mean needs per-feature bounds: the public pixel range
        # for digits, otherwise the range implied by the norm bound alone.
        bounds = (0.0, 1.0) if name == "digits" else (-C, C)
        return Bunch(name=name, X=X, data_norm=C, k=REAL_K[name], bounds=bounds,
                     description=b.description)
    shape = dict(SYNTHETIC_SHAPE)
    if quick:
        shape["n"] = QUICK_SYNTHETIC_N
    coh = SYNTHETIC[name]["coherence"]
    X, _ = make_coherent_low_rank(shape["n"], shape["d"], shape["k"], coherence=coh,
                                  eigengap=shape["eigengap"], data_norm=1.0,
                                  random_state=0)
    desc = (f"make_coherent_low_rank(n={shape['n']}, d={shape['d']}, k={shape['k']}, "
            f"coherence={coh}, eigengap={shape['eigengap']}, data_norm=1, "
            "random_state=0)")
    return Bunch(name=name, X=X, data_norm=1.0, k=shape["k"], bounds=(-1.0, 1.0),
                 description=desc)


def make_private(name, k, epsilon, data_norm, seed):
    """A fresh private estimator of this package (or the textbook baseline)."""
    common = dict(epsilon=epsilon, delta=DELTA, data_norm=data_norm,
                  random_state=seed, accountant=BudgetAccountant())
    if name == "PrivatePCA":
        return PrivatePCA(k, **common)
    if name == "ComplexGaussPCA":
        return ComplexGaussPCA(k, target="covariance", **common)
    if name == "CoherentPowerPCA":
        return CoherentPowerPCA(k, **CP_SETTINGS, **common)
    if name == "Textbook Gauss":
        return TextbookGaussPCA(k, **common)
    raise ValueError(name)


def reference(X, k):
    """Non-private PCA: its components ``V_kᵀ`` and the covariance."""
    pca = PCA(n_components=k, svd_solver="covariance_eigh").fit(X)
    return pca.components_, np.cov(X, rowvar=False)


def utility(components, ref, cov):
    return (captured_variance(components, cov), principal_angle_sin(components, ref))


# --------------------------------------------------------------------------
# Utility runs
# --------------------------------------------------------------------------
def run_dataset(ds, epsilons, seeds, log):
    """Every in-process fit on one dataset: a list of per-fit records."""
    ref, cov = reference(ds.X, ds.k)
    records = []
    for eps in epsilons:
        t0 = time.perf_counter()
        for seed in seeds:
            # Consecutive fits: paired seeds, and times taken under the same load.
            # The non-private reference is refitted each time for its time only.
            for name in (*PRIVATE, REFERENCE):
                if name == REFERENCE:
                    start = time.perf_counter()
                    pca = PCA(n_components=ds.k, svd_solver="covariance_eigh").fit(ds.X)
                    seconds = time.perf_counter() - start
                    cap, sin = utility(pca.components_, ref, cov)
                    records.append(dict(dataset=ds.name, estimator=REFERENCE,
                                        epsilon=math.inf, seed=seed, status="ok",
                                        captured=cap, sin_theta=sin, time_s=seconds,
                                        spent_epsilon=math.inf, note=""))
                    continue
                est = make_private(name, ds.k, eps, ds.data_norm, seed)
                start = time.perf_counter()
                est.fit(ds.X)
                seconds = time.perf_counter() - start
                cap, sin = utility(est.components_, ref, cov)
                note = ""
                if name == "CoherentPowerPCA":
                    radius = est.clip_radius_  # None: the initialisation
                    note = (f"branch={est.branch_} T={est.n_iter_} R="
                            + ("none" if radius is None else f"{radius:.3g}"))
                records.append(dict(dataset=ds.name, estimator=name, epsilon=eps,
                                    seed=seed, status="ok", captured=cap,
                                    sin_theta=sin, time_s=seconds,
                                    spent_epsilon=est.privacy_spent_[0], note=note))
        log(f"  {ds.name}: ε={eps:g} done in {time.perf_counter() - t0:.1f} s")
    return records


def run_diffprivlib_all(python, datasets, epsilons, seeds, timeout_s, group_budget_s,
                        blas_threads):
    """diffprivlib's fits on every dataset (both variants), in one subprocess."""
    fits, arrays = [], []
    for ds in datasets:
        for variant in PEERS:
            if variant == PEER:
                arrays.append(ds.X)
            else:
                arrays.append(ds.X - ds.X.mean(axis=0))
            for eps in epsilons:
                for seed in seeds:
                    fits.append(dict(
                        key=f"{ds.name}|{variant}|{eps!r}|{seed}",
                        group=f"{ds.name}|{variant}", level=eps,
                        data=len(arrays) - 1, k=ds.k, epsilon=eps,
                        data_norm=ds.data_norm, bounds=list(ds.bounds),
                        centered=variant == PEER_CENTRED, seed=seed,
                        dataset=ds.name, variant=variant))
    results, versions, error = run_diffprivlib(python, arrays, fits,
                                               timeout_s=timeout_s,
                                               group_budget_s=group_budget_s,
                                               level_name="epsilon",
                                               blas_threads=blas_threads)
    records = []
    refs = {ds.name: reference(ds.X, ds.k) for ds in datasets}
    for fit in fits:
        name = fit["dataset"]
        rec = dict(dataset=name, estimator=fit["variant"], epsilon=fit["epsilon"],
                   seed=fit["seed"], captured=math.nan, sin_theta=math.nan,
                   time_s=math.nan, spent_epsilon=fit["epsilon"], note="")
        res = results.get(fit["key"], {"status": "error",
                                       "reason": error or "no result"})
        rec["status"] = res["status"]
        if res["status"] == "ok":
            rec["time_s"] = res["time_s"]
            ref, cov = refs[name]
            try:
                rec["captured"], rec["sin_theta"] = utility(res["components"], ref, cov)
            except ValueError as exc:  # e.g. components not orthonormal
                rec.update(status="error", note=str(exc)[:200])
        else:
            rec["note"] = res.get("reason", "")
        records.append(rec)
    return records, versions, error


# --------------------------------------------------------------------------
# Timing scan
# --------------------------------------------------------------------------
def timing_scan(sizes, repeats, k, dpl_python, dpl_timeout, blas_threads, log):
    """Fit time vs size on ``bench_fit.make_data`` rows at ε = 1."""
    rows = []
    dpl_fits, dpl_arrays = [], []
    for scan, n, d in sizes:
        X, C = make_data(n, d, seed=0)
        made = {}

        def maker(name):
            def make():
                if name == REFERENCE:
                    est = PCA(n_components=k, svd_solver="covariance_eigh")
                else:
                    est = make_private(name, k, 1.0, C, None)
                made[name] = est
                return est
            return make

        names = (*PRIVATE, REFERENCE)
        times = {name: [] for name in names}
        for round_ in range(repeats + 1):  # round 0 is the warm-up
            for name in names:
                seconds = time_fit(maker(name), X)
                if round_:
                    times[name].append(seconds)
        for name in names:
            note = ""
            if name == "CoherentPowerPCA":
                cp = made[name]
                note = f"last round: branch={cp.branch_} T={cp.n_iter_}"
            rows.append(dict(scan=scan, n=n, d=d, estimator=name, status="ok",
                             min_s=min(times[name]),
                             median_s=statistics.median(times[name]),
                             rounds=repeats, note=note))
        log(f"  timing {scan}: {n} x {d} done")
        if dpl_python is not None:
            dpl_arrays.append(X)
            for r in range(repeats):
                dpl_fits.append(dict(key=f"{scan}|{n}|{d}|{r}", group=scan,
                                     level=n if scan == "n" else d,
                                     data=len(dpl_arrays) - 1, k=k, epsilon=1.0,
                                     data_norm=C, bounds=[-C, C], centered=False,
                                     seed=r))
    if dpl_python is not None:
        results, _, error = run_diffprivlib(dpl_python, dpl_arrays, dpl_fits,
                                            timeout_s=dpl_timeout, level_name="size",
                                            blas_threads=blas_threads)
        for scan, n, d in sizes:
            res = [results.get(f"{scan}|{n}|{d}|{r}",
                               {"status": "error", "reason": error or "no result"})
                   for r in range(repeats)]
            ok = [r["time_s"] for r in res if r["status"] == "ok"]
            bad = [r for r in res if r["status"] != "ok"]
            rows.append(dict(
                scan=scan, n=n, d=d, estimator=PEER,
                status="ok" if not bad else bad[0]["status"],
                min_s=min(ok) if not bad else math.nan,
                median_s=statistics.median(ok) if not bad else math.nan,
                rounds=repeats,
                note="" if not bad else bad[0].get("reason", "")))
    return rows


# --------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------
def _q(values, q):
    return float(np.quantile(values, q)) if values else math.nan


def summarise(records, seeds):
    """One row per (dataset, estimator, ε)."""
    groups = {}
    for r in records:
        groups.setdefault((r["dataset"], r["estimator"], r["epsilon"]), []).append(r)
    base = {(r["dataset"], r["epsilon"], r["seed"]): r["sin_theta"]
            for r in records if r["estimator"] == "PrivatePCA"}
    rows = []
    for (dataset, est, eps), rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok"]
        complete = len(ok) == len(rs)
        cap = [r["captured"] for r in ok] if complete else []
        sin = [r["sin_theta"] for r in ok] if complete else []
        times = [r["time_s"] for r in ok]
        row = dict(dataset=dataset, estimator=est, epsilon=eps, delta=(
            0.0 if est in PEERS else (math.nan if est == REFERENCE else DELTA)),
            n_seeds=len(rs), n_ok=len(ok),
            captured_mean=float(np.mean(cap)) if cap else math.nan,
            captured_sd=float(np.std(cap, ddof=1)) if len(cap) > 1 else math.nan,
            captured_median=_q(cap, 0.5), captured_q25=_q(cap, 0.25),
            captured_q75=_q(cap, 0.75),
            sin_mean=float(np.mean(sin)) if sin else math.nan,
            sin_sd=float(np.std(sin, ddof=1)) if len(sin) > 1 else math.nan,
            sin_median=_q(sin, 0.5), sin_q25=_q(sin, 0.25), sin_q75=_q(sin, 0.75),
            time_median_s=statistics.median(times) if times else math.nan,
            spent_epsilon=statistics.median(r["spent_epsilon"] for r in rs),
            beats_PrivatePCA=math.nan, status="ok", note="")
        if est in PRIVATE and est != "PrivatePCA":
            # Paired on the seed; differences within TIE count as half a win.
            diff = [r["sin_theta"] - base[(dataset, eps, r["seed"])] for r in ok]
            wins = [1.0 if x < -TIE else (0.0 if x > TIE else 0.5) for x in diff]
            row["beats_PrivatePCA"] = float(np.mean(wins))
        if not complete:
            bad = [r for r in rs if r["status"] != "ok"]
            row["status"] = bad[0]["status"] if bad else "incomplete"
            row["note"] = bad[0]["note"] if bad else ""
        if est == "CoherentPowerPCA":
            branches = [r["note"].split()[0].split("=")[1] for r in rs]
            row["note"] = "branches: " + ", ".join(
                f"{b} {branches.count(b)}/{len(rs)}"
                for b in sorted(set(branches)))
        rows.append(row)
    order = {name: i for i, name in enumerate(ESTIMATORS)}
    rows.sort(key=lambda r: (ALL_DATASETS.index(r["dataset"])
                             if r["dataset"] in ALL_DATASETS else 99,
                             order[r["estimator"]], r["epsilon"]))
    return rows


def _fmt(mean, sd, digits=3):
    if math.isnan(mean):
        return "—"
    if math.isnan(sd):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {sd:.{digits}f}"


def markdown(summary, timing, datasets, epsilons, env, config):
    """The Markdown report (also printed)."""
    out = []
    dpl = config["diffprivlib"]
    out.append("# Utility and cost of private PCA\n")
    out.append(f"Python {env['python']} on {env['machine']}; numpy {env['numpy']}, "
               f"scipy {env['scipy']}, scikit-learn {env['sklearn']}; "
               + (f"diffprivlib {dpl['versions'].get('diffprivlib')} "
                  f"(own environment, scikit-learn {dpl['versions'].get('sklearn')})"
                  if dpl.get("available") else
                  f"diffprivlib unavailable: {dpl.get('reason')}") + ".")
    blas = [f"{t['internal_api']} {t['version']} ({t['architecture']}, "
            f"{t['num_threads']} threads)" for t in env["threadpools"]
            if t["user_api"] == "blas"]
    if blas:
        out.append(f"BLAS: {'; '.join(blas)}.")
    threads = config.get("blas_threads", 0)
    out.append("BLAS threads per fit: "
               f"{threads if threads > 0 else 'library default'}.")
    out.append(f"Mode: {'quick' if config['quick'] else 'full'}; {config['n_seeds']} "
               f"seeds; δ = {DELTA:g} (diffprivlib: δ = 0); CoherentPowerPCA with "
               f"{config['coherent_power'] or 'its defaults'}; diffprivlib per-fit "
               f"limit {config['dpl_timeout']:g} s, "
               f"{config['dpl_budget']:g} s per dataset and variant; "
               f"run time {config['runtime_s']:.0f} s.\n")
    if datasets:
        out.append("| dataset | n × d | k | C |\n|---|---|---|---|")
    for ds in datasets:
        n, d = ds.X.shape
        out.append(f"| {ds.name} | {n} × {d} | {ds.k} | {ds.data_norm:.3g} |")
    out.append("")
    eps_cols = " | ".join(f"ε = {e:g}" for e in epsilons)
    sep = "|---|---|" + "---|" * len(epsilons)
    index = {(r["dataset"], r["estimator"], r["epsilon"]): r for r in summary}
    names = [ds.name for ds in datasets]
    if not datasets:
        return "\n".join(out + _timing_markdown(timing, config))
    for metric, title in (("sin", "sin θ against the non-private top-k "
                           "(mean ± sd over seeds; 0 is perfect)"),
                          ("captured", "Captured variance relative to the "
                           "non-private PCA (mean ± sd over seeds; 1 is perfect)")):
        out.append(f"## {title}\n")
        out.append(f"| dataset | estimator | {eps_cols} |\n{sep}")
        for name in names:
            for est in (*PRIVATE, *PEERS):
                if not any(k[0] == name and k[1] == est for k in index):
                    continue
                cells = []
                for e in epsilons:
                    r = index.get((name, est, e))
                    if r is None:
                        cells.append("n/a")
                    elif r["status"] != "ok":
                        cells.append(f"{r['status']} ({r['n_ok']}/{r['n_seeds']} ok)")
                    else:
                        cells.append(_fmt(r[f"{metric}_mean"], r[f"{metric}_sd"]))
                out.append(f"| {name} | {est} | " + " | ".join(cells) + " |")
        out.append("")
    out.append("## Paired: share of seeds on which the estimator's sin θ beats "
               f"PrivatePCA's (same seed; differences below {TIE:g} count as half)\n")
    out.append(f"| dataset | estimator | {eps_cols} |\n{sep}")
    for name in names:
        for est in PRIVATE[1:]:
            cells = []
            for e in epsilons:
                r = index.get((name, est, e))
                cells.append("—" if r is None or math.isnan(r["beats_PrivatePCA"])
                             else f"{100 * r['beats_PrivatePCA']:.0f}%")
            out.append(f"| {name} | {est} | " + " | ".join(cells) + " |")
    out.append("")
    out.append("## Fit time (s): median over ε of the per-ε medians "
               "[smallest–largest per-ε median]\n")
    out.append("| estimator | " + " | ".join(names) + " |\n|---|"
               + "---|" * len(names))
    for est in ESTIMATORS:
        if not any(k[1] == est for k in index):
            continue
        cells = []
        for name in names:
            rs = [r for r in summary if r["dataset"] == name and r["estimator"] == est
                  and not math.isnan(r["time_median_s"])]
            if not rs:
                cells.append("—")
                continue
            per_eps = [r["time_median_s"] for r in rs]
            t = statistics.median(per_eps)
            partial = any(r["status"] != "ok" for r in
                          (x for x in summary if x["dataset"] == name
                           and x["estimator"] == est))
            spread = (f" [{min(per_eps):.2g}–{max(per_eps):.2g}]"
                      if len(per_eps) > 1 else "")
            cells.append(f"{t:.3g}{spread}" + ("*" if partial else ""))
        out.append(f"| {est} | " + " | ".join(cells) + " |")
    out.append("\n(* finished fits only; the others timed out or were skipped.)\n")
    if any(r["estimator"] == "CoherentPowerPCA" for r in summary):
        out.append("## CoherentPowerPCA: which branch was released?\n")
        out.append(f"| dataset | {eps_cols} |\n|---|" + "---|" * len(epsilons))
        for name in names:
            cells = [index[(name, "CoherentPowerPCA", e)]["note"].replace(
                "branches: ", "") if (name, "CoherentPowerPCA", e) in index
                else "n/a" for e in epsilons]
            out.append(f"| {name} | " + " | ".join(cells) + " |")
        out.append("\n(power: the clipped power iterate; init: the go/no-go kept "
                   "the initialisation; fallback: a second covariance release.)\n")
    return "\n".join(out + _timing_markdown(timing, config))


def _timing_markdown(timing, config):
    out = []
    if timing:
        out.append("## Fit time (s) vs size, ε = 1, k = 3 (fastest of "
                   f"{config['repeats']} rounds; medians in timing.csv)\n")
        sizes = []
        for r in timing:
            if (r["scan"], r["n"], r["d"]) not in sizes:
                sizes.append((r["scan"], r["n"], r["d"]))
        out.append("| estimator | " + " | ".join(f"{n}×{d}" for _, n, d in sizes)
                   + " |\n|---|" + "---|" * len(sizes))
        tindex = {(r["scan"], r["n"], r["d"], r["estimator"]): r for r in timing}
        for est in ESTIMATORS:
            if not any(k[3] == est for k in tindex):
                continue
            cells = []
            for s in sizes:
                r = tindex.get((*s, est))
                if r is None:
                    cells.append("n/a")
                elif r["status"] != "ok":
                    cells.append(r["status"])
                else:
                    cells.append(f"{r['min_s']:.3g}")
            out.append(f"| {est} | " + " | ".join(cells) + " |")
        notes = [f"{n}×{d}: {tindex[(sc, n, d, 'CoherentPowerPCA')]['note']}"
                 for sc, n, d in sizes if (sc, n, d, "CoherentPowerPCA") in tindex]
        out.append("\nCoherentPowerPCA, " + "; ".join(notes) + ".\n")
    return out


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------
def figures(summary, timing, datasets, epsilons, out_dir, config=None):
    config = config or {}
    dpl_timeout = config.get("dpl_timeout", math.nan)
    threads = config.get("blas_threads", 0)
    threads = (f"{threads} BLAS thread{'s' if threads > 1 else ''}" if threads > 0
               else "default BLAS threads")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    index = {(r["dataset"], r["estimator"], r["epsilon"]): r for r in summary}
    names = [ds.name for ds in datasets]
    ncols = 3 if len(names) > 4 else max(1, min(2, len(names)))
    nrows = math.ceil(len(names) / ncols)
    panels = (
        ("captured", "captured variance / non-private",
         "utility_captured_variance.png", 1.0),
        ("sin", "sin θ vs non-private top-k", "utility_sin_theta.png", 0.0),
    )
    for metric, label, fname, ref_value in (panels if datasets else ()):
        fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.5 * nrows),
                                 squeeze=False, sharex=True)
        for ax, ds in zip(axes.flat, datasets):
            for est in (*PRIVATE, *PEERS):
                colour, marker = STYLE[est]
                pts = [(e, index[(ds.name, est, e)]) for e in epsilons
                       if (ds.name, est, e) in index
                       and index[(ds.name, est, e)]["status"] == "ok"]
                if not pts:
                    continue
                x = [e for e, _ in pts]
                med = [r[f"{metric}_median"] for _, r in pts]
                lo = [r[f"{metric}_q25"] for _, r in pts]
                hi = [r[f"{metric}_q75"] for _, r in pts]
                ax.plot(x, med, marker=marker, color=colour, label=est, lw=1.5, ms=5)
                ax.fill_between(x, lo, hi, color=colour, alpha=0.15, lw=0)
            ax.axhline(ref_value, color="black", ls="--", lw=1,
                       label="sklearn PCA (ε = ∞)")
            ax.set_xscale("log")
            ax.set_xticks(list(epsilons))
            ax.set_xticklabels([f"{e:g}" for e in epsilons])
            ax.set_ylim(-0.03, 1.03)
            n, d = ds.X.shape
            ax.set_title(f"{ds.name} ({n}×{d}, k={ds.k})", fontsize=10)
            ax.grid(alpha=0.3)
        for ax in axes[-1]:
            ax.set_xlabel("ε (δ = 1e-6; diffprivlib δ = 0)")
        for ax in axes[:, 0]:
            ax.set_ylabel(label)
        for ax in list(axes.flat)[len(names):]:
            ax.axis("off")
        seen = {}
        for ax in axes.flat:
            for h, lab in zip(*ax.get_legend_handles_labels()):
                seen.setdefault(lab, h)
        labels = [lab for lab in (*PRIVATE, *PEERS, "sklearn PCA (ε = ∞)")
                  if lab in seen]
        handles = [seen[lab] for lab in labels]
        fig.legend(handles, labels, loc="lower center", ncol=len(labels),
                   fontsize=9, frameon=False)
        fig.suptitle(f"{label}: median and interquartile range over seeds",
                     fontsize=11)
        fig.tight_layout(rect=(0, 0.05, 1, 0.97))
        path = out_dir / fname
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    for scan, fname, xlabel in (("n", "fit_time_vs_n.png", "n (rows)"),
                                ("d", "fit_time_vs_d.png", "d (features)")):
        rows = [r for r in timing if r["scan"] == scan]
        if not rows:
            continue
        fixed = (f"d = {rows[0]['d']}" if scan == "n" else f"n = {rows[0]['n']}")
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        for est in ESTIMATORS:
            colour, marker = STYLE[est]
            pts = [(r[scan], r["min_s"]) for r in rows
                   if r["estimator"] == est and r["status"] == "ok"]
            if pts:
                ax.plot(*zip(*pts), marker=marker, color=colour, label=est)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"fit time (s), fastest of {rows[0]['rounds']} rounds")
        dpl_failed = sorted({r[scan] for r in rows if r["estimator"] == PEER
                             and r["status"] != "ok"})
        title = f"Fit time vs {scan} ({fixed}, k = 3, ε = 1, {threads})"
        if dpl_failed:
            title += (f"\ndiffprivlib: over {dpl_timeout:g} s at {scan} = "
                      f"{dpl_failed[0]}, so not run at larger {scan}")
        cp_notes = [r["note"] for r in rows if r["estimator"] == "CoherentPowerPCA"]
        if cp_notes and all("branch=fallback" in note for note in cp_notes):
            title += "\nCoherentPowerPCA: fallback branch (no power iteration)"
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = out_dir / fname
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------
def write_csv(path, rows):
    if not rows:
        return
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _jsonable(obj):
    """NaN and ±inf as null / strings, paths and arrays as text or lists."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float):
        return None if math.isnan(obj) else (str(obj) if math.isinf(obj) else obj)
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.floating, np.integer)):
        return _jsonable(obj.item())
    if isinstance(obj, (str, int, bool)) or obj is None:
        return obj
    return str(obj)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="quick mode: 3 seeds, synthetic n = 10 000, small "
                             "timing scan (< 3 minutes on 2 cores)")
    parser.add_argument("--out",
                        default=str(Path(__file__).resolve().parent / "results"),
                        help="output folder (default: benchmarks/results/)")
    parser.add_argument("--seeds", type=int, default=None,
                        help="noise seeds per cell (default: 10, quick: 3)")
    parser.add_argument("--datasets", nargs="+", default=list(ALL_DATASETS),
                        choices=ALL_DATASETS, metavar="NAME",
                        help=f"datasets (default: all of {', '.join(ALL_DATASETS)})")
    parser.add_argument("--epsilons", nargs="+", type=float, default=list(EPSILONS),
                        help="privacy budgets (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="timed rounds per size in the scan (default: 5, quick: 2)")
    parser.add_argument("--no-diffprivlib", action="store_true",
                        help="skip diffprivlib (reported as unavailable)")
    parser.add_argument("--peer-env", default=str(DEFAULT_PEER_ENV),
                        help="diffprivlib's virtual environment (default: %(default)s)")
    parser.add_argument("--diffprivlib-timeout", type=float, default=None,
                        help="time limit of one diffprivlib fit, s (default: 5, "
                             "quick: 1.5)")
    parser.add_argument("--diffprivlib-budget", type=float, default=None,
                        help="diffprivlib's time per dataset and variant, s, after "
                             "which its remaining fits there are skipped (default: "
                             "30, quick: 4)")
    parser.add_argument("--no-timing", action="store_true", help="skip the timing scan")
    parser.add_argument("--timing-only", action="store_true",
                        help="run only the timing scan (to rerun it on a quieter "
                             "machine); writes timing.csv, timing.md and its figures")
    parser.add_argument("--no-figures", action="store_true", help="write no PNG")
    parser.add_argument("--cp-expected-trials", type=int, default=None,
                        help="CoherentPowerPCA's expected_trials (default: its own, "
                             "'auto')")
    parser.add_argument("--cp-n-iter-max", type=int, default=None,
                        help="CoherentPowerPCA's n_iter_max (default: its own, 32)")
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="BLAS threads of every fit, here and in diffprivlib's "
                             "subprocess (default: 1; 0 keeps the library default)")
    parser.add_argument("--json", metavar="PATH", help="also write everything as JSON")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.blas_threads > 0:
        # One BLAS thread per fit: on a shared 2-core machine a second thread
        # that the OS deschedules stalls every BLAS call at its barrier (we
        # measured 0.5 s instead of 0.01 s for one fit), so multi-threaded
        # times mostly measure the other load. See the module docstring.
        with threadpool_limits(limits=args.blas_threads):
            return _main(args)
    return _main(args)


def _main(args):
    CP_SETTINGS.clear()
    if args.cp_expected_trials:
        CP_SETTINGS["expected_trials"] = args.cp_expected_trials
    if args.cp_n_iter_max:
        CP_SETTINGS["n_iter_max"] = args.cp_n_iter_max
    start_all = time.perf_counter()
    warnings.filterwarnings("ignore", category=PrivacyLeakWarning)
    quick = args.quick
    seeds = list(range(args.seeds if args.seeds else (3 if quick else 10)))
    repeats = args.repeats if args.repeats else (2 if quick else 5)
    dpl_timeout = args.diffprivlib_timeout or (1.5 if quick else 5.0)
    # diffprivlib's time per dataset and variant is capped too (its fits can
    # each take seconds): the rest of that group is then skipped.
    dpl_budget = args.diffprivlib_budget or (4.0 if quick else 30.0)
    epsilons = sorted(args.epsilons)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    env = environment()
    print_environment(env)

    dpl = {"available": False}
    python = None
    if args.no_diffprivlib:
        dpl["reason"] = "skipped (--no-diffprivlib)"
    else:
        python, info = diffprivlib_runner(args.peer_env, log=log)
        dpl.update(info, available=python is not None)
    if not dpl["available"]:
        log(f"diffprivlib unavailable: {dpl['reason']}")

    datasets = [] if args.timing_only else [load_dataset(name, quick)
                                            for name in args.datasets]
    records = []
    for ds in datasets:
        n, d = ds.X.shape
        log(f"{ds.name}: {n} x {d}, k={ds.k}, C={ds.data_norm:.3g}")
        records += run_dataset(ds, epsilons, seeds, log)
    if python is not None and datasets:
        log("diffprivlib fits ...")
        t0 = time.perf_counter()
        dpl_records, versions, error = run_diffprivlib_all(
            python, datasets, epsilons, seeds, dpl_timeout, dpl_budget,
            args.blas_threads)
        log(f"  done in {time.perf_counter() - t0:.0f} s")
        if error:
            dpl.update(available=False, reason=error)
            log(f"diffprivlib failed: {error}")
        else:
            dpl["versions"] = versions or dpl.get("versions", {})
            records += dpl_records

    timing = []
    if not args.no_timing:
        if quick:
            sizes = ([("n", n, 50) for n in (2_000, 10_000, 30_000)]
                     + [("d", 10_000, d) for d in (10, 50, 200)])
        else:
            sizes = ([("n", n, 50) for n in (2_000, 5_000, 20_000, 50_000, 100_000)]
                     + [("d", 10_000, d) for d in (10, 25, 50, 100, 200, 400)])
        log("timing scan ...")
        timing = timing_scan(sizes, repeats, 3, python if dpl["available"] else None,
                             dpl_timeout, args.blas_threads, log)

    summary = summarise(records, seeds)
    config = dict(quick=quick, n_seeds=len(seeds), epsilons=epsilons, delta=DELTA,
                  blas_threads=args.blas_threads,
                  coherent_power=dict(CP_SETTINGS), dpl_timeout=dpl_timeout,
                  dpl_budget=dpl_budget,
                  diffprivlib=dpl, repeats=repeats,
                  runtime_s=time.perf_counter() - start_all)
    report = markdown(summary, timing, datasets, epsilons, env, config)
    write_csv(out_dir / "timing.csv", timing)
    written = ["timing.csv"]
    if args.timing_only:
        (out_dir / "timing.md").write_text(report + "\n")
        written.append("timing.md")
    else:
        write_csv(out_dir / "results.csv", summary)
        write_csv(out_dir / "runs.csv", records)
        (out_dir / "results.md").write_text(report + "\n")
        written += ["results.csv", "runs.csv", "results.md"]
    if not args.no_figures:
        paths = figures(summary, timing, datasets, epsilons, out_dir, config)
        written += [p.name for p in paths]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(_jsonable({"environment": env, "config": config,
                                 "summary": summary, "runs": records,
                                 "timing": timing, "report": report}), f, indent=1)
    print(report)
    log(f"wrote {', '.join(written)} to {out_dir} in "
        f"{time.perf_counter() - start_all:.0f} s")
    return summary


if __name__ == "__main__":
    main()
