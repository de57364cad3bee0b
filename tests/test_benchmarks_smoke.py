"""Smoke test of benchmarks/evaluate.py, peers.py, bench_coherent.py and
bench_complex.py (a few seconds).

Runs the runner's core on a tiny synthetic dataset with 2 seeds, without
diffprivlib, the timing scan or figures, and checks the textbook baseline's
calibration.
"""

import math
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

evaluate = pytest.importorskip("evaluate")
peers = pytest.importorskip("peers")

from sklearn.utils import Bunch  # noqa: E402

from sklearn_dppca import BudgetAccountant, PrivacyLeakWarning, PrivatePCA  # noqa: E402
from sklearn_dppca.datasets import make_coherent_low_rank  # noqa: E402
from sklearn_dppca.privacy import gdp_epsilon  # noqa: E402


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        yield


def test_textbook_sigma_and_exact_spend():
    eps, delta, C = 0.5, 1e-6, 2.0
    est = peers.TextbookGaussPCA(2, epsilon=eps, delta=delta, data_norm=C)
    plan = est._privacy_plan(1000, 5)
    # PrivatePCA's release draws σ = √2 C² / μ_cov: it must be the textbook σ
    # on the covariance's 90% share of the (GDP-split) textbook budget.
    sigma = math.sqrt(2.0) * C**2 / plan.mus["covariance"]
    mu_tb = eps / math.sqrt(2.0 * math.log(1.25 / delta))
    assert sigma == pytest.approx(2.0 * C**2 / (math.sqrt(0.9) * mu_tb))
    sigma_mean = 2.0 * C / plan.mus["mean"]
    assert sigma_mean == pytest.approx(2.0 * C / (math.sqrt(0.1) * mu_tb))
    mu_true = math.hypot(plan.mus["mean"], plan.mus["covariance"])
    assert plan.charge == {"mu": pytest.approx(mu_true)}
    assert plan.spent[0] == pytest.approx(gdp_epsilon(mu_true, delta))
    assert plan.spent[0] < eps  # the textbook calibration overpays


def test_textbook_is_paired_with_private_pca():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    X /= np.linalg.norm(X, axis=1).max()
    acc = BudgetAccountant()
    a = PrivatePCA(2, epsilon=1.0, data_norm=1.0, random_state=3, accountant=acc).fit(X)
    b = peers.TextbookGaussPCA(2, epsilon=1.0, data_norm=1.0, random_state=3,
                               accountant=acc).fit(X)
    # Same draws, different scale: the mean errors are proportional.
    ratio = (b.mean_ - X.mean(axis=0)) / (a.mean_ - X.mean(axis=0))
    assert np.allclose(ratio, ratio[0])
    assert b.privacy_spent_[0] < 1.0
    assert acc.n_charges == 2


def test_runner_core_on_tiny_data():
    X, _ = make_coherent_low_rank(600, 8, 2, eigengap=0.8, random_state=0)
    ds = Bunch(name="tiny", X=X, data_norm=1.0, k=2, bounds=(-1.0, 1.0),
               description="tiny")
    seeds = [0, 1]
    records = evaluate.run_dataset(ds, [1.0, 10.0], seeds, log=lambda m: None)
    n_private = len(evaluate.PRIVATE)
    assert len(records) == 2 * len(seeds) * (n_private + 1)
    summary = evaluate.summarise(records, seeds)
    by = {(r["estimator"], r["epsilon"]): r for r in summary}
    ref = by[(evaluate.REFERENCE, math.inf)]
    assert ref["captured_mean"] == pytest.approx(1.0)
    assert ref["sin_mean"] == pytest.approx(0.0, abs=1e-8)
    for name in evaluate.PRIVATE:
        for eps in (1.0, 10.0):
            row = by[(name, eps)]
            assert row["n_ok"] == len(seeds)
            assert 0.0 <= row["sin_mean"] <= 1.0
            assert row["captured_mean"] <= 1.0 + 1e-9
    assert by[("PrivatePCA", 10.0)]["sin_mean"] < by[("PrivatePCA", 1.0)]["sin_mean"]
    env = {"python": "3", "machine": "m", "numpy": "n", "scipy": "s", "sklearn": "k",
           "threadpools": []}
    config = dict(quick=True, n_seeds=2, dpl_timeout=1.0, dpl_budget=1.0,
                  runtime_s=0.0, repeats=1, coherent_power={},
                  diffprivlib={"available": False, "reason": "test"})
    report = evaluate.markdown(summary, [], [ds], [1.0, 10.0], env, config)
    assert "| tiny | PrivatePCA |" in report
    assert "diffprivlib unavailable: test" in report


def test_gpu_benchmark_smoke(monkeypatch, capsys):
    """benchmarks/bench_gpu.py: a tiny CPU-tensor run, and a clear exit without CUDA."""
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")  # before the script's own setdefault
    import bench_gpu

    assert bench_gpu.main(["--device", "cpu", "--n", "600", "--d", "6", "-k", "2",
                           "--repeats", "1", "--cpu-repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "600x6 float32 on cpu: PrivatePCA" in out and "ratio" in out
    if not torch.cuda.is_available():
        assert bench_gpu.main([]) == 0
        assert "no CUDA device" in capsys.readouterr().out
    assert bench_gpu.main(["--device", "cpu", "--accuracy", "--n", "600",
                           "--d", "6"]) == 0
    assert "float32 Gram relative error" in capsys.readouterr().out


def test_bench_coherent_cell_and_targets():
    bench = pytest.importorskip("bench_coherent")
    cell = bench.synthetic(10, 3000, 2, None, 0.9, 1.0, (2.0,))
    (row,) = bench.run_cell(cell, seeds=2, data_seed=0)
    assert row["kappa"] > 0 and 0 < row["ratio"] < 2
    assert sum(row["branches"].values()) == 2
    assert bench.target("spikes", row) == 1.10
    assert bench.target("incoherent", dict(row, kappa=0.4, private_pca=0.5)) == 0.75
    assert bench.target("incoherent", dict(row, kappa=0.4, private_pca=0.9)) is None


def test_bench_complex_errors_follow_the_bound_shape():
    bench = pytest.importorskip("bench_complex")
    small, large = (bench.cell(40, k, 2.0, 8.0, seeds=3) for k in (1, 8))
    for row in (small, large):
        # ‖Ψ − M_k‖_F ≈ σ√(kd)·λ_k/gap at a large gap, for both mechanisms
        assert 1.5 < row["real"] < 2.5 and 1.5 < row["complex"] < 2.5
        assert not row["violates_gap_assumption"]
    assert bench.cell(40, 2, 2.0, 0.5, seeds=2)["violates_gap_assumption"]


def test_bench_mechanism_choice_one_seed():
    """One private choice of the mechanism against the three alone."""
    bench = pytest.importorskip("bench_mechanism_choice")
    X = make_coherent_low_rank(3000, 8, 2, eigengap=0.5, random_state=0)[0]
    top = np.linalg.eigh(np.cov(X.T))[1][:, ::-1][:, :2].T
    row = bench.run_seed(X, top, 2, 3.0, seed=0)
    assert row["pick"] in bench.MECHANISMS
    assert 0 <= row["search"] <= 1 and all(0 <= row[m] <= 1 for m in bench.MECHANISMS)
