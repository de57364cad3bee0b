"""Benchmark ``PrivateGridSearchCV`` choosing the mechanism privately.

One search, charged once, chooses among the three mechanisms of the package
at the same ``n_components``::

    PrivateGridSearchCV(
        Pipeline([("pca", None)]),
        {"pca": [PrivatePCA(k, data_norm=C), CoherentPowerPCA(k, data_norm=C),
                 ComplexGaussPCA(k, data_norm=C)]},
        epsilon=ε, delta=1e-6, cv=5, accountant=BudgetAccountant(),
        random_state=seed)

Its budget (``SEARCH_BUDGET_SHARES``, docs/model_selection.rst): 0.45 of
``μ*²`` for the candidate fits, split equally among the 3 mechanisms and the
``K − 1 = 4`` training folds a row sits in (each fold fit gets ``0.0375
μ*²``), 0.1 for the noisy per-fold captured-variance scores, and 0.45 for
the refit of the chosen mechanism on all rows (``best_estimator_["pca"]``).
It is compared with each mechanism fitted **alone** on all rows at the same
total budget: ``PrivatePCA(k)``, ``CoherentPowerPCA(k)`` (its default,
``selection="gdp"``) and ``ComplexGaussPCA(k)``, each with
``epsilon=ε``, ``delta=1e-6``, the same ``data_norm=C``, the same
``random_state=seed`` as the search and a fresh ``BudgetAccountant()``.

Error: ``sklearn_dppca.metrics.principal_angle_sin`` of the released
``components_`` against the data's own top-k eigenvectors of its centred
sample covariance, as in ``benchmarks/bench_coherent.py`` (whose ``load``
and cell definitions are reused: rows divided by the cell's norm bound, so
``C = data_norm = 1``; the data are drawn once, ``--seed``, and the noise
seeds are ``0 … seeds − 1``). ``κ = k σ_k² ‖U‖_∞²`` of the centred rows,
as there.

Cells:

1. Two of ``bench_coherent``'s held-out *incoherent* cells where the
   default ``CoherentPowerPCA`` takes its power branch and about halves
   PrivatePCA's error (``κ ≤ 0.5``; docs/benchmarks.rst,
   "CoherentPowerPCA against PrivatePCA"), the cheapest ones
   (``make_coherent_low_rank``, ``coherence=None``): ``d = 400``,
   ``n = 60 000``, ``k = 3``, eigengap 0.7, spread 3 (κ ≈ 0.36) and
   ``d = 300``, ``n = 100 000``, ``k = 4``, eigengap 0.5, spread 2
   (κ ≈ 0.41), each at ``ε ∈ {1, 3}``; ``--seeds`` noise seeds (default 5).
   (The third winning cell, ``d = 800``, ``n = 30 000``, at ``ε = 10`` takes
   about 150 s per search on 2 cores and is left out.)
2. The bundled ``digits`` dataset (``load_real_dataset``, rows divided by
   its recommended ``data_norm``), ``k = 5``, ``ε ∈ {1, 3, 10}``, where
   PrivatePCA wins or ties; ``--real-seeds`` noise seeds (default 10).

Printed per cell and ε (a markdown table): how often the search chose
PrivatePCA / CoherentPowerPCA / ComplexGaussPCA (P/C/X), the mean ``sin θ``
of its refitted components, the mean ``sin θ`` of each mechanism alone,
``search / best alone`` (the search's mean over the smallest of the three
means alone; above 1 the search loses to the best single mechanism, which a
user would have had to know in advance), and the power branches taken by
CoherentPowerPCA when the search refitted it and when fitted alone.

Fixed seeds make every fit non-private; the ``PrivacyLeakWarning`` is
silenced here.

Run from the repository root::

    nice .venv/bin/python benchmarks/bench_mechanism_choice.py \
        --out docs/_static/model_selection           # ~15 min on 2 cores
    .venv/bin/python benchmarks/bench_mechanism_choice.py --quick  # < 60 s

``--out DIR`` writes ``mechanism_choice.csv`` (the printed table, one row
per cell and ε), ``mechanism_choice_seeds.csv`` (one row per seed: the
pick, every ``sin θ``, the branches and the ε of the fold fits and of the
refit) and ``mechanism_summary.csv`` (the table in
``docs/model_selection.rst``).
"""

import argparse
import csv
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.pipeline import Pipeline

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_coherent import label, load, synthetic  # noqa: E402
from bench_fit import environment, print_environment  # noqa: E402

from sklearn_dppca import (  # noqa: E402
    BudgetAccountant,
    CoherentPowerPCA,
    ComplexGaussPCA,
    PrivacyLeakWarning,
    PrivatePCA,
)
from sklearn_dppca.metrics import principal_angle_sin  # noqa: E402
from sklearn_dppca.model_selection import PrivateGridSearchCV  # noqa: E402

DELTA = 1e-6
FOLDS = 5
DATA_NORM = 1.0  # load() divides the rows by the cell's bound
MECHANISMS = {"P": PrivatePCA, "C": CoherentPowerPCA, "X": ComplexGaussPCA}

CELLS = [
    {**synthetic(400, 60_000, 3, None, 0.7, 3.0, (1.0, 3.0)), "real": False},
    {**synthetic(300, 100_000, 4, None, 0.5, 2.0, (1.0, 3.0)), "real": False},
    {"kind": "real", "name": "digits", "k": 5, "epsilons": (1.0, 3.0, 10.0),
     "real": True},
]
QUICK = [
    {**synthetic(100, 5_000, 3, None, 0.7, 3.0, (3.0,)), "real": False},
    {"kind": "real", "name": "digits", "k": 5, "epsilons": (10.0,), "real": True},
]


def letter(estimator):
    return next(key for key, cls in MECHANISMS.items() if type(estimator) is cls)


def run_seed(X, reference, k, epsilon, seed):
    """One search and the three mechanisms alone, on the same noise seed."""
    grid = {"pca": [cls(k, data_norm=DATA_NORM) for cls in MECHANISMS.values()]}
    accountant = BudgetAccountant()
    search = PrivateGridSearchCV(
        Pipeline([("pca", None)]), grid, epsilon=epsilon, delta=DELTA, cv=FOLDS,
        accountant=accountant, random_state=seed).fit(X)
    refit = search.best_estimator_["pca"]
    pick = letter(refit)
    assert pick == letter(search.best_params_["pca"])
    assert accountant.n_charges == 1
    assert np.isclose(search.privacy_spent_[0], epsilon)
    row = {"seed": seed, "pick": pick,
           "search": principal_angle_sin(refit.components_, reference),
           "refit_branch": getattr(refit, "branch_", ""),
           "fold_epsilon": search.fit_epsilons_[0],
           "refit_epsilon": refit.privacy_spent_[0]}
    for key, cls in MECHANISMS.items():
        alone = cls(k, epsilon=epsilon, delta=DELTA, data_norm=DATA_NORM,
                    random_state=seed, accountant=BudgetAccountant()).fit(X)
        row[key] = principal_angle_sin(alone.components_, reference)
        if key == "C":
            row["alone_branch"] = alone.branch_
    return row


def summarise(cell, kappa, epsilon, rows, seconds):
    means = {key: float(np.mean([r[key] for r in rows]))
             for key in ("search", *MECHANISMS)}
    best = min(MECHANISMS, key=means.get)
    picks = {key: sum(r["pick"] == key for r in rows) for key in MECHANISMS}
    return {
        "cell": label(cell), "epsilon": epsilon, "kappa": kappa,
        "seeds": len(rows),
        "picks_private_pca": picks["P"], "picks_coherent": picks["C"],
        "picks_complex": picks["X"],
        "search_sin": means["search"], "private_pca_sin": means["P"],
        "coherent_sin": means["C"], "complex_sin": means["X"],
        "best_alone": MECHANISMS[best].__name__,
        "search_over_best_alone": means["search"] / means[best],
        "coherent_refit_power": sum(r["refit_branch"] == "power" for r in rows),
        "coherent_alone_power": sum(r["alone_branch"] == "power" for r in rows),
        "fold_epsilon": rows[0]["fold_epsilon"],
        "refit_epsilon": rows[0]["refit_epsilon"],
        "seconds": seconds,
    }


def table_row(s):
    return (f"| {s['cell']} | {s['epsilon']:g} | {s['kappa']:.2f} | "
            f"{s['picks_private_pca']}/{s['picks_coherent']}/{s['picks_complex']} | "
            f"{s['search_sin']:.3f} | {s['private_pca_sin']:.3f} | "
            f"{s['coherent_sin']:.3f} | {s['complex_sin']:.3f} | "
            f"{s['search_over_best_alone']:.2f} | "
            f"{s['coherent_refit_power']}/{s['picks_coherent']} · "
            f"{s['coherent_alone_power']}/{s['seeds']} |")


def docs_row(s):
    """The row of the table in docs/model_selection.rst."""
    cell = s["cell"].replace(" coh=none", "").replace(" gap=", ", gap ")
    return {"cell": cell.replace(" spread=", ", spread "), "ε": f"{s['epsilon']:g}",
            "κ": f"{s['kappa']:.2f}",
            "picks P/C/X": f"{s['picks_private_pca']}/{s['picks_coherent']}/"
                           f"{s['picks_complex']}",
            "search": f"{s['search_sin']:.3f}",
            "PrivatePCA alone": f"{s['private_pca_sin']:.3f}",
            "CoherentPowerPCA alone": f"{s['coherent_sin']:.3f}",
            "ComplexGaussPCA alone": f"{s['complex_sin']:.3f}",
            "search / best alone": f"{s['search_over_best_alone']:.2f}"}


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({key: f"{value:.6g}" if isinstance(value, float)
                             else value for key, value in row.items()})


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5,
                        help="noise seeds per synthetic cell (default 5)")
    parser.add_argument("--real-seeds", type=int, default=10,
                        help="noise seeds for digits (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: d = 100, n = 5 000 and digits at one ε, "
                             "1 seed each")
    parser.add_argument("--out", metavar="DIR",
                        help="write mechanism_choice.csv, "
                             "mechanism_choice_seeds.csv and mechanism_summary.csv "
                             "there")
    return parser.parse_args()


def main():
    args = parse_args()
    warnings.simplefilter("ignore", PrivacyLeakWarning)
    cells = QUICK if args.quick else CELLS
    print_environment(environment())
    print(f"PrivateGridSearchCV over P = PrivatePCA, C = CoherentPowerPCA, "
          f"X = ComplexGaussPCA; cv={FOLDS}, delta={DELTA:g}, data_norm=1. "
          "Mean sin θ against the data's top-k subspace.\n")
    print("| cell | ε | κ | picks (P/C/X) | search sin θ | PrivatePCA alone | "
          "CoherentPowerPCA alone | ComplexGaussPCA alone | search / best alone | "
          "C power branch: refit/C picks · alone/seeds |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    summary, per_seed = [], []
    start = time.perf_counter()
    for cell in cells:
        X, reference, kappa = load(cell, args.seed)
        seeds = 1 if args.quick else (args.real_seeds if cell["real"]
                                      else args.seeds)
        for epsilon in cell["epsilons"]:
            tick = time.perf_counter()
            rows = [run_seed(X, reference, cell["k"], epsilon, seed)
                    for seed in range(seeds)]
            s = summarise(cell, kappa, epsilon, rows, time.perf_counter() - tick)
            summary.append(s)
            per_seed += [{"cell": s["cell"], "epsilon": epsilon, **r} for r in rows]
            print(table_row(s), flush=True)
    print(f"\n({time.perf_counter() - start:.0f} s; fold fits at "
          + ", ".join(f"ε={s['fold_epsilon']:.3g}" for s in summary)
          + "; refits at "
          + ", ".join(f"ε={s['refit_epsilon']:.3g}" for s in summary) + ")")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        write_csv(out / "mechanism_choice.csv", summary)
        write_csv(out / "mechanism_choice_seeds.csv", per_seed)
        write_csv(out / "mechanism_summary.csv", [docs_row(s) for s in summary])
        print(f"written: {out / 'mechanism_choice.csv'}, "
              f"{out / 'mechanism_choice_seeds.csv'}, "
              f"{out / 'mechanism_summary.csv'} (the docs' table)")


if __name__ == "__main__":
    main()
