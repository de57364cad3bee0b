"""Smoke test of benchmarks/evaluate.py, peers.py, bench_coherent.py,
bench_complex.py and the other scripts (a few seconds each).

Runs the runner's core on a tiny synthetic dataset with 2 seeds, without
diffprivlib, the timing scan or figures, and checks the textbook baseline's
calibration.
"""

import json
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

import sklearn_dppca  # noqa: E402
from sklearn_dppca import BudgetAccountant, PrivacyLeakWarning, PrivatePCA  # noqa: E402
from sklearn_dppca.datasets import make_coherent_low_rank  # noqa: E402
from sklearn_dppca.metrics import principal_angle_sin  # noqa: E402
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


# --- benchmarks/bench_peers_covariance.py: the peers of issue 23 -------------
def _peers_bench():
    return pytest.importorskip("bench_peers_covariance")


def test_peers_covariance_mu_gdp_is_rho_zcdp():
    """One Gaussian release at μ = √(2ρ) is exactly ρ-zCDP (and μ-GDP)."""
    from scipy import integrate, stats

    from sklearn_dppca.privacy import gaussian_rdp

    bench = _peers_bench()
    for rho in bench.RHOS:
        mu = math.sqrt(2.0 * rho)
        for alpha in (1.5, 2.0, 5.0, 20.0):
            # D_α(N(μ,1) ‖ N(0,1)) = log ∫ p^α q^{1−α} / (α − 1), by quadrature
            def integrand(x, alpha=alpha, mu=mu):
                return math.exp(alpha * stats.norm.logpdf(x, mu)
                                + (1.0 - alpha) * stats.norm.logpdf(x))
            value = integrate.quad(integrand, -np.inf, np.inf)[0]
            renyi = math.log(value) / (alpha - 1.0)
            assert renyi == pytest.approx(alpha * rho, rel=1e-6)
            assert gaussian_rdp(mu, [alpha])[0] == pytest.approx(alpha * rho, rel=1e-12)
    # the ε the issue quotes for ρ = 0.01, 0.1, 1 at δ = 1e-6
    quoted = [float(f"{gdp_epsilon(math.sqrt(2 * r), 1e-6):.3g}") for r in bench.RHOS]
    assert quoted == [0.575, 1.99, 7.29]
    n, d = 1000, 7
    for rho in bench.RHOS:
        est = PrivatePCA(center=False, data_norm=1.0, epsilon=bench.epsilon_for(rho))
        plan = est._privacy_plan(n, d)
        # a single release with μ = √(2ρ): our σ on XᵀX/n is GaussCov's 1/(n√ρ)
        assert set(plan.mus) == {"covariance"}
        assert plan.mus["covariance"] == pytest.approx(math.sqrt(2 * rho), rel=1e-9)
        ours = math.sqrt(2.0) / plan.mus["covariance"] / n
        assert ours == pytest.approx(1.0 / (n * math.sqrt(rho)), rel=1e-9)
        peer = bench.gaussian_sigma(bench.cov_sensitivity(n), rho)
        assert peer == pytest.approx(ours)


def test_peers_covariance_auto_is_one_mu_charge_and_scale():
    """The multi-release "auto" fit is charged one μ* = √(2ρ) (μ-GDP, hence
    ρ-zCDP with ρ = μ²/2); get_covariance()·(n−1)/n is XᵀX/n at ε = ∞."""
    bench = _peers_bench()
    rng = np.random.default_rng(0)
    X = bench.clip_rows(rng.normal(size=(400, 5)) * [3.0, 2.0, 1.0, 0.5, 0.2] / 4.0)
    acc = BudgetAccountant()
    PrivatePCA(center=False, data_norm="auto", epsilon=bench.epsilon_for(0.1),
               random_state=0, accountant=acc).fit(X)
    (charge,) = acc.charges
    assert charge["mu"] == pytest.approx(math.sqrt(0.2), rel=1e-9)
    n = X.shape[0]
    exact = PrivatePCA(center=False, data_norm=1.0, epsilon=math.inf,
                       accountant=BudgetAccountant()).fit(X)
    assert np.allclose(exact.get_covariance() * (n - 1) / n, X.T @ X / n, atol=1e-14)


def test_peers_covariance_each_mechanism_once(monkeypatch):
    bench = _peers_bench()
    rng = np.random.default_rng(1)
    scales = np.array([3.0, 2.0, 1.0, 1.0, 0.5, 0.5]) / 5.0
    X = bench.clip_rows(rng.normal(size=(300, 6)) * scales)
    assert np.linalg.norm(X, axis=1).max() <= 1.0
    n, d = X.shape
    sigmas = []
    real_noise = bench.sym_noise

    def recording(rng, d, sigma):
        sigmas.append(sigma)
        return real_noise(rng, d, sigma)

    monkeypatch.setattr(bench, "sym_noise", recording)
    rho = 0.1
    for name, fit in bench.FITS.items():
        sigmas.clear()
        cov, vecs = fit(X, rho, np.random.default_rng(2))
        assert cov.shape == (d, d) and np.allclose(cov, cov.T)
        assert np.linalg.eigvalsh(cov).min() >= -1e-12  # PSD
        if name == "zero":
            assert vecs is None and not cov.any()
            continue
        assert vecs.shape[0] == d and np.allclose(vecs.T @ vecs, np.eye(vecs.shape[1]))
        # the documented noise scales on XᵀX/n (rows of norm ≤ 1, replace-one)
        if name == "GaussCov":
            assert sigmas == [pytest.approx(1.0 / (n * math.sqrt(rho)))]
        elif name == "SeparateCov":
            assert sigmas == [pytest.approx(1.0 / (n * math.sqrt(rho / 2)))]
        elif name == "AdaptiveCov":
            (sigma,) = sigmas  # √2 τ²/n at 0.45 ρ, τ on the public grid
            tau2 = sigma * n * math.sqrt(2 * 0.45 * rho) / math.sqrt(2.0)
            assert np.isclose(bench.ADAPTIVE_GRID**2, tau2).any()
        elif name == "CoinPress":
            assert len(sigmas) == len(bench.COINPRESS_SHARES)
            # the first step whitens by A_0 = I: radius 1, ρ/8
            assert sigmas[0] == pytest.approx(
                math.sqrt(2.0) / n / math.sqrt(2 * rho / 8))
    # EMCov: the d − 1 draws are ε_i-bounded-range, ε_i = 2η, so ε_i²/8-zCDP:
    # they share ρ/2
    eta = bench.emcov_eta(rho, d)
    assert (d - 1) * (2 * eta) ** 2 / 8 == pytest.approx(rho / 2)
    assert sum(bench.COINPRESS_SHARES) == pytest.approx(1.0)
    # the symmetric noise: i.i.d. N(0, σ²) on and above the diagonal
    noise = real_noise(np.random.default_rng(3), 300, 2.0)
    assert np.array_equal(noise, noise.T)
    assert np.std(noise[np.triu_indices(300)]) == pytest.approx(2.0, rel=0.02)


def test_peers_covariance_bingham_sampler():
    """The exact sampler of EMCov's exponential mechanism, on the circle:
    density ∝ exp(κ cos²θ), E cos²θ = (1 + I₁(κ/2)/I₀(κ/2)) / 2."""
    from scipy.special import ive

    bench = _peers_bench()
    rng = np.random.default_rng(4)
    kappa = 3.0
    m = np.diag([kappa, 0.0])
    draws = np.array([bench.sample_bingham(m, 1.0, rng)[0] for _ in range(3000)])
    assert np.allclose(np.linalg.norm(draws, axis=1), 1.0)
    expected = 0.5 * (1.0 + ive(1, kappa / 2) / ive(0, kappa / 2))
    cos2 = draws[:, 0] ** 2
    assert abs(cos2.mean() - expected) < 4 * cos2.std() / math.sqrt(len(cos2))


def test_peers_covariance_quick_tables(tmp_path):
    bench = _peers_bench()
    cells = [bench.real_cell("wine")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        records = bench.run_cell(cells[0], 0, (0.1, 1.0), 2, 0, log=lambda m: None)
    summary = bench.summarise(records)
    assert len(summary) == 2 * len(bench.MECHANISMS)
    tabs = bench.tables(summary, cells, (0.1, 1.0))
    header, rows = tabs["ratio"]
    assert rows[0][header.index("PrivatePCA")] == "1.00"
    zero = {r["rho"]: r["frob_mean"] for r in summary if r["mechanism"] == "zero"}
    X = cells[0].X
    assert zero[0.1] == pytest.approx(np.linalg.norm(X.T @ X / len(X)))


def test_cov_oracle_split_and_bounds():
    """benchmarks/bench_cov_oracle.py: ours² = eigenvalue part² + oracle², and
    the oracles order as they must (the linear shrinkage keeps our eigenvectors;
    α = 1, β = 0 is ours)."""
    bench = pytest.importorskip("bench_cov_oracle")
    X = _peers_bench().real_cell("wine").X
    truth = X.T @ X / len(X)
    row = bench.ours_row(X, truth, 0.1, np.random.default_rng(0))
    assert row["ours"] ** 2 == pytest.approx(
        row["eigenvalues"] ** 2 + row["oracle eig"] ** 2, rel=1e-9)
    assert row["oracle eig"] <= row["oracle αΣ̂+βI"] * (1 + 1e-9)
    assert row["oracle αΣ̂+βI"] <= row["ours"] * (1 + 1e-9)
    head, rows = bench.run(["wine"], [1.0], 2, 2, 0, log=lambda m: None)
    assert len(rows) == 1 and len(rows[0]) == len(head)


# --- benchmarks/bench_out_of_core.py: fits on Parquet files (issue 24) -------
def test_out_of_core_model_bounds_rows():
    """The public divisor keeps all but ~0.2% of the model's rows within C = 1."""
    bench = pytest.importorskip("bench_out_of_core")
    for d in (8, 100):
        std, mean, divisor = bench.model(d)
        rows = (np.random.default_rng(0).standard_normal((20_000, d)) * std
                + mean) / divisor
        norms = np.linalg.norm(rows, axis=1)
        assert np.mean(norms > 1.0) < 5e-3 and np.median(norms) > 0.3


def test_out_of_core_tiny_run(tmp_path):
    """A tiny run on a LocalCluster: passes counted from outside the package."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("distributed")
    pytest.importorskip("dask.dataframe")
    bench = pytest.importorskip("bench_out_of_core")
    data, out = tmp_path / "data", tmp_path / "out"
    result = bench.main(["--tiny", "--workers", "1", "--data-dir", str(data),
                         "--out", str(out), "--pca-baseline", "svd_compressed"])
    summary = result["summary"]
    assert not any(row["errors"] for row in summary.values())
    assert result["config"]["npartitions"] == 4
    for name in ("read", "lengths", "Gram"):  # one read of each partition
        assert summary[name]["passes_tasks"] == 1.0
    assert summary["overhead"]["passes_tasks"] == 0.0
    for name in ("PrivatePCA numeric", 'PrivatePCA "auto"', "CoherentPowerPCA"):
        passes = summary[name]["passes_tasks"]
        assert passes >= 1 and passes == int(passes)  # whole passes only
        assert summary[name]["gram_passes"] >= 1
    assert (summary["PrivatePCA numeric, array"]["passes_tasks"]
            <= summary["PrivatePCA numeric"]["passes_tasks"])
    if result["config"]["exact_probe"]:  # Linux: bytes read by the workers
        assert summary["read"]["passes_bytes"] >= 1.0
    assert "| PrivatePCA numeric |" in (out / "results.md").read_text()
    assert (out / "results.json").exists()
    assert not any(data.iterdir())  # without --keep the files are gone


# --- benchmarks/bench_first_rows.py: the first rows' centre (issue 24) -------
def test_first_rows_cell_runs_both_designs():
    """One cell: the fits with the first rows make one pass, those with every
    row for the mean two, and both measure the same data."""
    bench = pytest.importorskip("bench_first_rows")
    X = bench.datasets(140_000)["iid"]
    whole, whole_passes = bench.measure(X, 1.0, 3.0, 1, first_rows=False)
    first, passes = bench.measure(X, 1.0, 3.0, 1, first_rows=True)
    assert (whole_passes, passes) == (2, 1)
    assert first[0] < 0.1 and whole[0] < 0.1  # sin θ
    assert bench._norm_plan.PILOT_FACTOR == 4  # restored


# --- benchmarks/bench_wide.py: wide and sparse data (issue 31) ---------------
def test_wide_cases_and_public_norm_bounds():
    """The cases' shapes and public data_norm: about 1% of the spiked rows
    beyond it, no CSR or genotype row (the bounds come from the models)."""
    bench = pytest.importorskip("bench_wide")
    for name, (kind, shapes) in bench.CASES.items():
        X, meta = bench.make_case(name, "tiny", seed=0)
        assert X.shape == shapes["tiny"][:2] and meta["sparse"] == (kind == "csr")
        norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel()
                        if meta["sparse"] else np.einsum("ij,ij->i", X, X))
        beyond = np.mean(norms > meta["data_norm"])
        assert beyond < (0.05 if kind == "spiked" else 1e-12)
    X, meta = bench.make_case("dense-2k", "quick", seed=0)
    beyond = np.mean(np.linalg.norm(X, axis=1) > meta["data_norm"])
    assert 0.002 < beyond < 0.03
    reference = bench.reference_components(X, 10)
    top = np.linalg.eigh(np.cov(X.T))[1][:, ::-1][:, :10].T
    assert principal_angle_sin(reference, top) < 1e-8
    for name in bench.ESTIMATORS:
        solvers = bench.accepted_solvers(getattr(sklearn_dppca, name))
        assert solvers[0] == "auto" and "randomized" in solvers


def test_wide_tiny_run(tmp_path, capsys):
    bench = pytest.importorskip("bench_wide")
    out = tmp_path / "wide.json"
    result = bench.main(["--tiny", "--cases", "dense-2k,csr-0.1pct", "--epsilons",
                         "1", "--ks", "2", "--solvers", "auto,randomized",
                         "--param", "not_a_parameter=1", "--out", str(out)])
    table = capsys.readouterr().out
    rows = result["results"]
    assert json.loads(out.read_text())["config"]["ks"] == [2]
    for case in ("dense-2k", "csr-0.1pct"):
        cells = [r for r in rows if r["case"] == case]
        names = [(r["estimator"], r["svd_solver"]) for r in cells]
        expected = {("PCA auto", None), ("PCA randomized", None)}
        expected |= {(e, s) for e in bench.ESTIMATORS for s in ("auto", "randomized")}
        if case.startswith("csr"):
            expected.add(("TruncatedSVD", None))
        assert set(names) == expected and len(names) == len(expected)
        for r in cells:
            if r["estimator"] == "PCA randomized" and case.startswith("csr"):
                continue  # scikit-learn may refuse sparse input here
            assert r["status"] == "ok", r
            assert r["time_s"] > 0 and r["peak_bytes"] >= 0
            assert 0.0 <= r["sin_theta"] <= 1.0
            if r["estimator"] in bench.ESTIMATORS:
                assert r["params_skipped"] == ["not_a_parameter"]
        auto = next(r for r in cells if r["estimator"] == "PCA auto")
        assert auto["time_ratio"] == 1.0
        if case == "dense-2k":  # an exact solver: the reference itself
            assert auto["sin_theta"] < 1e-6
    assert "| PrivatePCA | auto" in table and "| TruncatedSVD |" in table
    assert "data_norm = " in table


def test_wide_runs_each_path(capsys):
    bench = pytest.importorskip("bench_wide")
    result = bench.main(["--tiny", "--cases", "dense-2k", "--epsilons", "1",
                         "--ks", "2", "--solvers", "randomized", "--estimators",
                         "PrivatePCA", "--paths", "auto,dense,matrix_free"])
    cells = [r for r in result["results"] if r["estimator"] == "PrivatePCA"]
    assert [r["path"] for r in cells] == ["auto", "dense", "matrix_free"]
    assert [r["fit_path"] for r in cells[1:]] == ["dense", "matrix_free"]
    assert all(r["status"] == "ok" for r in cells)
    assert "path=matrix_free" in capsys.readouterr().out


def test_wide_limits_are_reported_not_fatal(tmp_path):
    """A fit past its time or memory reads "timeout" / "out of memory", and the
    next fit runs in a new worker."""
    bench = pytest.importorskip("bench_wide")
    X, meta = bench.make_case("dense-2k", "tiny", seed=0)
    bench.write_case(tmp_path / "case", X, bench.reference_components(X, 2), meta)
    cell = dict(estimator="PrivatePCA", svd_solver="auto", epsilon=1.0, k=2,
                case="dense-2k", seed=0, params={})
    quiet = lambda message: None  # noqa: E731
    # the first round times out, and a later round of a cell that failed is
    # not run again (one worker started, not two: each start takes ~2 s)
    late, again = bench.run_case(tmp_path / "case", [cell, cell], 1e-3, 20e9, quiet,
                                 keys=[0, 0])
    assert late["status"] == "timeout"
    assert again is late and late["status"] == "timeout"
    # 3 000 features: PrivatePCA's d × d matrices (72 MB each) exceed 10 MB
    wide = np.random.default_rng(0).standard_normal((40, 3000)) / 60
    bench.write_case(tmp_path / "wide", wide, np.eye(2, 3000), dict(data_norm=1.0))
    (starved,) = bench.run_case(tmp_path / "wide", [cell], 60, 1e7, quiet)
    assert starved["status"].startswith("out of memory")
    (ok,) = bench.run_case(tmp_path / "case", [cell], 60, 20e9, quiet)
    assert ok["status"] == "ok"


def test_bench_supervised_quick_tables(capsys, tmp_path):
    import bench_supervised

    bench_supervised.main(["--no-diffprivlib", "--seeds", "1", "--search-seeds",
                           "1", "--reference-seeds", "2", "--datasets", "wine",
                           "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "| wine | 3 |" in out and "picks within 0.02" in out
    assert "each k's accuracy over 2 splits" in out
    rows = (tmp_path / "results.csv").read_text().splitlines()
    assert len(rows) == 1 + 1 + 3 * 3  # header, not private, 3 ε × 3 of ours
    bench_supervised.main(["--seeds", "1", "--search-seeds", "1", "--datasets",
                           "wine", "--no-diffprivlib", "--reference-seeds", "0",
                           "--dpl-from", str(tmp_path / "results.csv")])


def test_coherent_wide_runs_every_fit():
    """The d = 10⁴ comparison at a smoke size: four fits per ε, each path of
    each estimator, CoherentPowerPCA's branch named."""
    bench = pytest.importorskip("bench_coherent_wide")
    rows = list(bench.run(*bench.TINY, [3.0]))
    assert [name for _, name, _, _, _ in rows] == list(bench.ESTIMATORS)
    assert all(0.0 <= error <= 1.0 for _, _, error, _, _ in rows)
    assert rows[1][4] in ("power", "init", "fallback")



def test_sparse_paths_runs_each_fit():
    """benchmarks/bench_sparse_paths.py (mend 111): each fit on the planted
    topics at a smoke size, on the path it names, sin θ in [0, 1]."""
    bench = pytest.importorskip("bench_sparse_paths")
    rows = list(bench.run(*bench.TINY, [0], ks=(10,), epsilons=(3.0,)))
    assert [row["fit"] for row in rows] == list(bench.FITS)
    assert [row["path"] for row in rows] == ["matrix_free", "noisy_power",
                                             "noisy_power"]
    assert all(0.0 <= row["sin"] <= 1.0 for row in rows)
    X, data_norm = bench.make_rows(200, 600, 10, 0)
    assert X.shape == (200, 600) and data_norm == math.sqrt(10)
    assert X.getnnz(axis=1).max() <= 10 and set(X.data) == {1.0}

# --- benchmarks/bench_frontier.py: n close to d (issue 34) ------------------
def test_adaptive_oja_noise_and_radius_match_their_sensitivities():
    """The reconstructed peer: on all-zero rows its gradient is its noise,
    of deviation 2τ/(μ_m B) per entry (the clipped sum's sensitivity 2τ);
    its radius is the lowest bin edge when every norm is zero, and a bin edge
    above most rows otherwise; its components are orthonormal."""
    est = peers.AdaptiveOjaPCA(2, epsilon=1.0, delta=1e-5)
    rng = np.random.default_rng(0)
    W = np.linalg.qr(rng.standard_normal((400, 2)))[0]
    mu_m = 0.7
    g, tau = est._noisy_gradient(np.zeros((50, 400)), W, 100.0, mu_m, rng)
    assert tau == est._EDGES[0]
    assert np.std(g) * 50 * mu_m / (2 * tau) == pytest.approx(1.0, rel=0.1)
    norms = np.exp(rng.uniform(0, 5, 5_000))
    radius = est._radius(norms, 100.0, rng)  # little noise: near its quantile
    assert radius in est._EDGES
    assert np.mean(norms >= radius) <= 1 - est.clip_quantile + 0.01
    X = rng.standard_normal((300, 10))
    C = peers.AdaptiveOjaPCA(3, random_state=0).fit(X).components_
    np.testing.assert_allclose(C @ C.T, np.eye(3), atol=1e-10)


def test_paper_peers_orthonormal_on_a_spiked_case():
    """DP-PCA (k = 1) and k-DP-PCA (k = 2), written from the papers: each
    runs on a tiny spiked case and returns orthonormal components of the
    right shape; without noise worth the name (ε large) they find the
    spikes."""
    rng = np.random.default_rng(0)
    d, n = 10, 4_000
    basis = np.linalg.qr(rng.standard_normal((d, 2)))[0]
    X = rng.standard_normal((n, d)) + (rng.standard_normal((n, 2))
                                       * np.sqrt([10.0, 5.0])) @ basis.T
    for est, k in ((peers.DPPCA(epsilon=1.0, delta=0.01, random_state=0), 1),
                   (peers.KDPPCA(2, epsilon=1.0, delta=0.01, random_state=0), 2)):
        C = est.fit(X).components_
        assert C.shape == (k, d)
        np.testing.assert_allclose(C @ C.T, np.eye(k), atol=1e-10)
    loose = dict(epsilon=1e6, delta=0.01, n_steps=3, alpha=1e4, random_state=1)
    C1 = peers.DPPCA(**loose).fit(X).components_
    C2 = peers.KDPPCA(2, **loose).fit(X).components_
    assert principal_angle_sin(C1, basis.T[:1]) < 0.2
    assert principal_angle_sin(C2, basis.T) < 0.3


def test_paper_peers_noise_matches_sensitivities():
    """The peers' releases: the gradient mean's noise has deviation
    2r/(μ_m B) per entry (clipped sum of sensitivity 2r, here r the lowest
    bin edge as every gradient is zero); the range is the fullest bin's
    upper edge; the top eigenvalue is of the noisy scatter matrix."""
    rng = np.random.default_rng(0)
    mu, B, d = 0.7, 50, 400
    w = np.linalg.qr(rng.standard_normal((d, 1)))[0][:, 0]
    g = peers.private_gradient_mean(np.zeros((B, d)), w, mu, rng,
                                    hist_share=0.5, radius_factor=1.0)
    mu_m = math.sqrt(0.5) * mu
    r = peers._DYADIC[0]
    assert np.std(g) * B * mu_m / (2 * r) == pytest.approx(1.0, rel=0.1)
    values = np.full(1_000, 5.0)  # bin [4, 8)
    assert peers._mode_range(values, 100.0, rng) == 8.0
    rows = np.zeros((20, 30))
    rows[:, 0] = 1.0  # squared norms 1: bin [1, 2), clip r² = 2 · 2
    lam = peers.private_top_eigenvalue(rows, 1e9, rng)
    assert lam == pytest.approx(1.0, rel=1e-6)


def test_frontier_tiny_run(tmp_path):
    """One seed at d = 20: every method and n runs, "auto" refused on the
    fewest rows before any charge, the public bound near the model's 99th
    percentile, and the table and CSV written."""
    bench = pytest.importorskip("bench_frontier")
    assert bench.main(["--tiny", "--csv", str(tmp_path / "f.csv")]) == 0
    text = (tmp_path / "f.csv").read_text().splitlines()
    # every method, and the k = 1 peers
    methods = set(bench.METHODS) | set(bench.PEERS)
    assert len(methods) == len(bench.METHODS) + 2
    assert len(text) == 1 + len(bench.MULTIPLES) * len(methods)
    assert len(bench.load([tmp_path / "f.csv"])) == len(text) - 1
    rng = np.random.default_rng(0)
    basis = np.linalg.qr(rng.standard_normal((20, 2)))[0]
    norms = np.linalg.norm(bench.spiked_rows(50_000, basis, rng), axis=1)
    assert 0.985 < np.mean(norms <= bench.public_bound(20)) < 0.995


def test_bench_fit_times_either_reference_solver():
    """benchmarks/bench_fit.py: alternating rounds against scikit-learn's
    covariance_eigh (the Gram fit's targets) or any other solver (issue 31's
    3x, no memory target)."""
    bench = pytest.importorskip("bench_fit")
    result = bench.bench_shape(300, 20, 2, 1, 0, "auto")
    assert result["sklearn_solver"] == "auto" and result["ratio"] > 0
    assert set(result["times_s"]) == {"PrivatePCA", "sklearn"}
    assert bench.targets("auto") == (3.0, None)
    assert bench.targets("covariance_eigh") == (1.0, 0.3)


def test_bench_score_quick(capsys):
    """benchmarks/bench_score.py: our score beside scikit-learn's, and the
    rows' validation score, on the quick cases."""
    bench = pytest.importorskip("bench_score")
    bench.main(["--quick", "--repeats", "1"])
    out = capsys.readouterr().out
    assert "dense 1000 x 2000" in out and "(refuses" in out
    assert out.count(" ours ") == 3 and out.count(" sklearn ") == 2


def test_bench_npz_parts_tiny(capsys):
    """benchmarks/bench_npz_parts.py: PCA(), the CLI on one .npz and on its
    row blocks with --dask, each in its own process."""
    pytest.importorskip("dask.array")
    bench = pytest.importorskip("bench_npz_parts")
    bench.main(["--size", "tiny", "--repeats", "1", "--parts", "3"])
    out = capsys.readouterr().out
    assert "500 x 100" in out and "--dask (3 files)" in out
    assert out.count(" GB ") == 3


def test_wide_rounds_repeat_the_baselines_and_keep_the_fastest():
    """The baselines run in more rounds than the private fits, every round
    in the table's order, and a cell reads its fastest time and its median
    peak (a failed run makes its status)."""
    bench = pytest.importorskip("bench_wide")
    cells = [dict(estimator="PCA auto"), dict(estimator="PrivatePCA"),
             dict(estimator="TruncatedSVD")]
    assert bench.round_robin(cells, 1, 3) == [0, 1, 2, 0, 2, 0, 2]
    assert bench.round_robin(cells, 2, 0) == [0, 1, 2, 0, 1, 2]
    runs = [dict(status="ok", time_s=t, peak_bytes=p, k=10)
            for t, p in ((3.0, 10), (1.0, 30), (2.0, 20))]
    merged = bench.merge_runs(runs)
    assert (merged["time_s"], merged["peak_bytes"], merged["runs"]) == (1.0, 20, 3)
    assert merged["times_s"] == [3.0, 1.0, 2.0]
    failed = bench.merge_runs(runs[:1] + [dict(status="timeout", k=10)])
    assert failed["status"] == "timeout" and "time_s" not in failed


# --- the scripts behind figures in the guides (review 40) -------------------
def test_skewed_features_tiny_run(capsys):
    """benchmarks/bench_skewed_features.py: the table in its public ranges,
    every pipeline and ε, the box's bias on the raw table at ε = ∞."""
    bench = pytest.importorskip("bench_skewed_features")
    raw = bench.make_table(2_000, seed=0)
    assert np.all(raw >= bench.LOWER) and np.all(raw <= bench.UPPER)
    results = bench.main(["--seeds", "1", "--rows", "2000"])
    assert len(results) == 6
    for by_eps in results.values():
        assert set(by_eps) == set(bench.EPSILONS)
        assert all(0.0 <= v <= 1.0 for values in by_eps.values() for v in values)
    inf = math.inf
    assert results["raw, box (-3, 3)"][inf][0] > results["log1p, box (-3, 3)"][inf][0]
    assert results["raw, public ranges"][inf][0] < 1e-6
    out = capsys.readouterr().out
    assert "| raw, box (-3, 3) |" in out and "skew" in out


def test_head_weights_tiny_run(capsys):
    """benchmarks/bench_head_weights.py: a subclass carries the weights, the
    ridge's scale is the module's and is restored, and both tables print."""
    bench = pytest.importorskip("bench_head_weights")
    from sklearn_dppca import linear_model

    heavy = bench.weighted(linear_model.PrivateLDA, (1.0, 1.0))
    assert heavy._weights == (1.0, 1.0)
    assert linear_model.PrivateLDA._weights != (1.0, 1.0)
    X, y, lower, upper = bench.load_any("wine")
    fits = []
    for c in (1.0, 16.0):
        with bench.ridge_edges(c):
            assert linear_model.AUTO_RIDGE_EDGES == c
            model = bench.head_model("wine", y, lower, upper, 3.0, 0,
                                     linear_model.PrivateLDA._weights)
            fits.append(model.fit(X, y)[-1].covariance_)
    assert linear_model.AUTO_RIDGE_EDGES == 1.0
    assert not np.allclose(fits[0], fits[1])
    res, ridge = bench.main(["--splits", "2", "--cells", "wine:3", "diabetes:3"])
    assert len(res) == 2 * len(bench.WEIGHTS) and set(ridge) == set(bench.RIDGE_EDGES)
    assert all(len(v) == 2 for v in res.values())
    out = capsys.readouterr().out
    assert "| (0.2, 1.2) |" in out and "(0.3, 0.7) minus, diabetes" in out
    assert "| 16 |" in out


def test_wide_search_tiny_run(capsys):
    """benchmarks/bench_wide_search.py on rows just past the wide rule's
    2 048 features: times, memory and the pick printed."""
    bench = pytest.importorskip("bench_wide_search")
    X = bench.make_rows(50, 2_100)
    assert np.linalg.norm(X, axis=1).max() == pytest.approx(1.0)
    result = bench.main(["--rows", "90", "--features", "2100", "--blas-threads",
                         "1", "--tracemalloc"])
    assert result["wall_s"] > 0 and result["cpu_s"] > 0
    assert result["best"] in bench.GRID
    assert result["traced_bytes"] > 0 and result["peak_rss_bytes"] > 0
    out = capsys.readouterr().out
    assert "90 x 2100" in out and "s CPU" in out and "peak RSS" in out


def test_mle_tiny_run(capsys):
    """benchmarks/bench_mle.py: its reading of the release matches the fit's
    rule (Minka's choice on the released spectrum, capped at n_resolved_)."""
    bench = pytest.importorskip("bench_mle")
    res = bench.main(["--seeds", "1", "--rows", "3000"])
    assert len(res) == 2 * len(bench.EPSILONS)
    for rows in res.values():
        for kept, resolved, minka, _ in rows:
            assert kept == max(1, min(minka, resolved))
    out = capsys.readouterr().out
    assert "| planted | 1 |" in out and "| strong | 100 |" in out


def test_bench_summed_csr_matches_scipy(capsys):
    """benchmarks/bench_summed_csr.py: the summed copy is SciPy's, bit for bit."""
    import bench_summed_csr

    assert bench_summed_csr.main(["--repeats", "1", "--shapes", "2000x30x0.1"]) == 0
    assert "same arrays: True" in capsys.readouterr().out
