"""PrivatePCA's noisy power path (issue 31): ``L`` releases ``M V + G``.

Each pass releases the product of the centred, clipped scatter matrix with
an orthonormal ``d × p`` basis, with i.i.d. Gaussian noise: no ``d × d``
matrix and no ``d²`` noise. The tests check the sensitivity on adversarial
neighbours, the calibration of every pass (σ recovered from the draws, the
shares composing to ``μ_cov``), an audit, the accuracy against the dense
release, memory on sparse rows and the path's choice (the same answer on
NumPy, CSR and Dask: tests/test_matrix_free.py).
"""

import math
import warnings

import numpy as np
import pytest
from scipy import sparse

import sklearn_dppca._private_pca as private_pca
from sklearn_dppca import BudgetAccountant, PrivatePCA
from sklearn_dppca._private_pca import NOISY_POWER_PASSES, noisy_power_shares
from sklearn_dppca.audit import audit, neighbouring_datasets, subspace_statistic
from sklearn_dppca.metrics import principal_angle_sin
from sklearn_dppca.noise import kernel_bytes
from sklearn_dppca.privacy import gdp_mu

from .test_matrix_free import paths_over_seeds, spiked, traced_peak

pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")


def npm(k=3, **params):
    params.setdefault("accountant", BudgetAccountant())
    return PrivatePCA(k, svd_solver="randomized", path="noisy_power", **params)


def test_sensitivity_of_a_pass_with_its_trace_is_attained_and_not_exceeded():
    """``‖(aaᵀ − bbᵀ) V‖_F² + (‖a‖² − ‖b‖²)² ≤ 2C⁴`` for orthonormal ``V``:
    attained by orthogonal rows of norm C in the span of ``V`` and by a row
    of norm C against zero; never exceeded on adversarial and random pairs."""
    rng = np.random.default_rng(0)
    d, p, C = 30, 5, 1.7

    def squared(a, b, V):
        delta = np.outer(a, a) - np.outer(b, b)
        return float(np.sum((delta @ V) ** 2) + (a @ a - b @ b) ** 2)

    V = np.linalg.qr(rng.standard_normal((d, p)))[0]
    a, b = C * V[:, 0], C * V[:, 1]
    assert math.isclose(squared(a, b, V), 2 * C**4)
    assert math.isclose(squared(a, np.zeros(d), V), 2 * C**4)
    assert squared(a, -a, V) == pytest.approx(0.0)
    worst = 0.0
    for _ in range(2000):
        V = np.linalg.qr(rng.standard_normal((d, p)))[0]
        a, b = rng.standard_normal((2, d))
        if rng.random() < 0.5:  # in the span of V, where the bound is tight
            a, b = V @ rng.standard_normal(p), V @ rng.standard_normal(p)
        a *= C * rng.random() ** 0.2 / np.linalg.norm(a)
        b *= C * rng.random() ** 0.2 / np.linalg.norm(b)
        worst = max(worst, squared(a, b, V))
    assert 1.5 * C**4 < worst <= 2 * C**4 * (1 + 1e-12)


def test_every_pass_is_calibrated_to_its_share(monkeypatch):
    """σ recovered from each pass's draws; the passes' μ_l = √2 C² / σ_l
    compose to ``μ_cov = √0.9 μ*`` (the mean takes the rest), the trace is
    drawn at the last pass's σ."""
    passes, traces = [], []
    real_add, real_draw = private_pca.add_dense_noise, private_pca.dense_noise

    def adding(rng, matrix, sigma):
        before = matrix.copy()
        real_add(rng, matrix, sigma)
        passes.append((sigma, matrix - before))
        return matrix

    def drawing(rng, shape, sigma):
        noise = real_draw(rng, shape, sigma)
        traces.append((sigma, noise))
        return noise

    monkeypatch.setattr(private_pca, "add_dense_noise", adding)
    monkeypatch.setattr(private_pca, "dense_noise", drawing)
    X, _ = spiked(2000, 800)
    est = npm(5, epsilon=1.0, delta=1e-6, data_norm=1.5, random_state=0).fit(X)
    assert est.path_ == "noisy_power"
    (trace,) = traces
    assert len(passes) == NOISY_POWER_PASSES
    mus = []
    for (sigma, noise), share in zip(passes, noisy_power_shares(len(passes))):
        assert noise.shape == (800, 15)
        assert abs(noise.std() / sigma - 1.0) < 4 * math.sqrt(0.5 / noise.size)
        mus.append(math.sqrt(2.0) * 1.5**2 / sigma)
    mu_cov = gdp_mu(1.0, 1e-6) * math.sqrt(0.9)
    assert math.isclose(math.hypot(*mus), mu_cov, rel_tol=1e-9)
    shares = np.array(mus) ** 2 / mu_cov**2
    assert np.allclose(shares, noisy_power_shares(len(passes)))
    assert np.all(np.diff(shares) > 0)  # later passes, less noise
    assert trace[0] == passes[-1][0] and np.shape(trace[1]) == ()
    assert est.privacy_spent_ == (1.0, 1e-6)


def test_an_audit_of_the_noisy_power_release_finds_no_more_than_its_claim():
    """A black-box audit at ε = 1 on neighbours that differ in one row:
    the released components' threshold test stays under the claim."""
    X, Y = neighbouring_datasets(300, 3, kind="orthogonal", scale=0.3)
    params = dict(epsilon=1.0, delta=1e-5, data_norm=1.0, n_oversamples=1,
                  svd_solver="randomized", path="noisy_power")
    result = audit(PrivatePCA(1, **params), X, Y, subspace_statistic, n_fits=300,
                   random_state=8)
    assert result.epsilon_lower <= 1.0


def test_accuracy_and_spectrum_near_the_dense_release():
    """Over seeds, on many rows: the subspace error within 1.8× the dense
    release's, and the spectrum's attributes within a few percent."""
    X, basis = spiked(20_000, 400, k=3, seed=2)
    errors, spectra, first = paths_over_seeds(X, basis, ("dense", "noisy_power"))
    fit = first["noisy_power"]
    assert np.allclose(fit.components_ @ fit.components_.T, np.eye(3))
    assert fit.n_resolved_ == 3
    assert errors["dense"] < 0.2
    assert errors["noisy_power"] < 1.8 * errors["dense"]
    assert np.allclose(spectra["noisy_power"], spectra["dense"], rtol=0.05)


def test_without_noise_it_is_the_power_method():
    """``epsilon=inf``: the top k of scikit-learn's PCA, to its accuracy."""
    from sklearn.decomposition import PCA

    X, _ = spiked(3000, 200, k=3, seed=3)
    X /= np.linalg.norm(X, axis=1).max()
    est = npm(3, epsilon=math.inf, data_norm=1.0, iterated_power=10,
              random_state=0).fit(X)
    ref = PCA(3).fit(X)
    assert principal_angle_sin(est.components_, ref.components_) < 1e-6
    assert np.allclose(est.explained_variance_, ref.explained_variance_, rtol=1e-6)
    assert math.isclose(est.noise_variance_, ref.noise_variance_, rel_tol=1e-6)
    assert np.allclose(est.mean_, ref.mean_)


def test_float32_sparse_and_auto_bounds():
    X, basis = spiked(6000, 300, seed=5)
    est = npm(epsilon=2.0, data_norm="auto", random_state=0).fit(X.astype(np.float32))
    assert est.components_.dtype == np.float32
    assert principal_angle_sin(est.components_, basis.T) < 0.6
    sp = sparse.random(3000, 500, density=0.02, format="csr", random_state=0,
                       dtype=np.float32)
    est = npm(epsilon=1.0, data_norm="auto", random_state=0).fit(sp)
    assert est.components_.dtype == np.float32 and est.path_ == "noisy_power"


def test_auto_passes_follow_the_public_shape():
    """"auto": 4 passes below 100 d rows, 8 from there on (with many rows
    the passes are limited by convergence, not by their noise); the plan
    and the passes made agree."""
    from sklearn_dppca._private_pca import NOISY_POWER_PASSES_MANY_ROWS

    est = npm(epsilon=1.0, data_norm=1.5)
    assert est._noisy_power_passes(99 * 20, 20) == NOISY_POWER_PASSES == 4
    assert est._noisy_power_passes(100 * 20, 20) == NOISY_POWER_PASSES_MANY_ROWS == 8
    X, _ = spiked(2_000, 20)
    seen = []
    npm(epsilon=1.0, data_norm=1.5, random_state=0)._fit(X, progress=seen.append)
    assert len([line for line in seen if "products" in line]) == 8


def test_passes_are_those_stated():
    """``iterated_power`` passes of products (4 for "auto"), no more."""
    X, _ = spiked(500, 100)
    for power, expected in (("auto", NOISY_POWER_PASSES), (2, 2)):
        seen = []
        npm(epsilon=1.0, data_norm=1.5, iterated_power=power, random_state=0)._fit(
            X, progress=seen.append)
        assert len([line for line in seen if "products" in line]) == expected


def test_refused_before_the_charge_where_it_cannot_run():
    X, _ = spiked(300, 40)
    budget = BudgetAccountant()
    for params in ({"svd_solver": "full"}, {"n_components": 35}):
        params = {"n_components": 3, "svd_solver": "randomized", **params}
        with pytest.raises(ValueError, match="path='noisy_power' needs"):
            PrivatePCA(data_norm=1.5, path="noisy_power", accountant=budget,
                       **params).fit(X)
    assert budget.n_charges == 0


def test_auto_takes_it_where_the_kernel_would_be_redrawn_in_every_product():
    """``path="auto"``: where neither the dense matrices fit in
    ``memory_limit`` nor the matrix-free kernel's blocks in its cache (an
    eighth of it), the noisy power method; with room, the matrix-free
    path."""
    X, _ = spiked(300, 3000)
    dense_bytes = PrivatePCA(3, svd_solver="randomized")._memory_needed(
        300, 3000, "dense")
    limit = min(dense_bytes, 8 * kernel_bytes(3000)) - 1
    est = PrivatePCA(3, epsilon=1.0, data_norm=1.5, svd_solver="randomized",
                     memory_limit=limit, accountant=BudgetAccountant(),
                     random_state=0).fit(X)
    assert est.path_ == "noisy_power"
    assert est._memory_needed(300, 3000) < 0.1 * dense_bytes
    # with the default limit, the same release as the dense path
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = PrivatePCA(3, epsilon=1.0, data_norm=1.5, svd_solver="randomized",
                         accountant=BudgetAccountant(), random_state=0).fit(X)
    assert est.path_ == "matrix_free"
    # a limit below even its blocks: refused before the charge, saying so
    budget = BudgetAccountant()
    with pytest.raises(MemoryError, match="noisy power method"):
        npm(data_norm=1.5, memory_limit=1e4, accountant=budget).fit(X)
    assert budget.n_charges == 0


def test_a_sparse_fit_never_densifies_its_rows():
    """CSR rows of 30 000 columns, nearly every one clipped (a small bound):
    the traced peak is the method's ``d × p`` blocks, not a dense block of
    rows (2 000 of them would be 480 MB)."""
    # a Generator: with an int seed scipy permutes all 6 * 10**7 cells (6 s)
    X = sparse.random(2000, 30_000, density=0.002, format="csr",
                      random_state=np.random.default_rng(0))
    assert traced_peak(npm(3, epsilon=1.0, data_norm=0.5, random_state=0), X) < 60e6


def test_auto_keeps_the_matrix_free_path_on_sparse_wide_rows():
    """Mend 111: on CSR 10⁵ × 2·10⁴ rows ``path="auto"`` keeps the
    matrix-free path while the kernel's blocks fit in their cache (an eighth
    of ``memory_limit``), although the noisy power path takes less memory:
    on sparse rows with planted topics the noisy power method was a random
    subspace wherever the matrix-free release was informative
    (docs/scaling.rst, "What the targets say"). Under eight times the
    kernel's bytes ``"auto"`` takes the noisy power method, and
    ``path="matrix_free"`` keeps its path there. Plans only, public values."""
    from sklearn_dppca._rows import InMemoryRows

    n, d = 100_000, 20_000
    rows = InMemoryRows(sparse.csr_matrix((0, d)))
    under = 0.99 * 8 * kernel_bytes(d)
    for k, eps in [(10, 1.0), (50, 3.0)]:
        def plan(path, limit):
            est = PrivatePCA(k, epsilon=eps, data_norm=1.0, path=path,
                             memory_limit=limit)
            est._plan_path(n, d, rows)
            return est._fit_path

        assert plan("auto", 20e9) == "matrix_free"
        assert plan("auto", under) == "noisy_power"
        assert plan("matrix_free", under) == "matrix_free"
