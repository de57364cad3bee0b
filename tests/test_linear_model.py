"""The private supervised heads: their one release, its calibration and
sensitivity, what they compute from it, and their refusals."""

import math
import os
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LinearRegression

import sklearn_dppca.linear_model as linear_model
from sklearn_dppca import BudgetAccountant, PrivacyLeakWarning
from sklearn_dppca.audit import audit
from sklearn_dppca.linear_model import PrivateLDA, PrivateRidge, _augmented_gram
from sklearn_dppca.noise import noise_scale
from sklearn_dppca.privacy import gdp_mu

pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")


def blobs(n=4000, d=3, seed=0, classes=(0, 1, 2)):
    rng = np.random.default_rng(seed)
    y = rng.choice(classes, n)
    centres = {c: rng.normal(size=d) for c in classes}
    X = 0.3 * rng.normal(size=(n, d)) + np.array([centres[c] for c in y])
    return X, y


def reach(est):
    """``R²/C²`` of the augmented rows."""
    return 1.0 + sum(w * w for w in est._weights)


@pytest.fixture
def released(monkeypatch):
    """Capture (exact, released) of every head fit."""
    seen = []
    real = linear_model.add_goe_noise

    def spy(rng, matrix, sigma):
        exact = matrix.copy()
        out = real(rng, matrix, sigma)
        seen.append((exact, out.copy(), sigma))
        return out

    monkeypatch.setattr(linear_model, "add_goe_noise", spy)
    return seen


@pytest.mark.parametrize("make", [
    lambda **kw: PrivateLDA([0, 1, 2], data_norm=2.0, **kw),
    lambda **kw: PrivateRidge((-3.0, 3.0), data_norm=2.0, **kw),
], ids=["lda", "ridge"])
def test_noise_is_calibrated_to_the_stated_sensitivity(make, released):
    """The calibration oracle: the released matrix minus the exact one has
    GOE entries of the σ that the analytic Gaussian mechanism needs for
    sensitivity √2 R² at (ε, δ) — measured on the entries of 60 fits."""
    X, y = blobs(300)
    y = y if make().__class__ is PrivateLDA else y.astype(float)
    for seed in range(60):
        make(epsilon=1.0, random_state=seed, accountant=BudgetAccountant()).fit(X, y)
    est = make()
    sigma = noise_scale(math.sqrt(2.0) * reach(est) * 4.0, gdp_mu(1.0, 1e-6))
    # the analytic Gaussian mechanism's own (ε, δ) curve at this σ (Balle &
    # Wang 2018): δ(ε) = Φ(−εσ/Δ + Δ/2σ) − e^ε Φ(−εσ/Δ − Δ/2σ)
    delta_of = (stats.norm.cdf(-sigma / (math.sqrt(2) * reach(est) * 4.0)
                               + math.sqrt(2) * reach(est) * 4.0 / (2 * sigma))
                - math.e * stats.norm.cdf(-sigma / (math.sqrt(2) * reach(est) * 4.0)
                                          - math.sqrt(2) * reach(est) * 4.0
                                          / (2 * sigma)))
    assert delta_of == pytest.approx(1e-6, rel=1e-6)
    diag, off = [], []
    for exact, out, s in released:
        assert s == pytest.approx(sigma, rel=1e-12)
        noise = out - exact
        np.testing.assert_allclose(noise, noise.T, atol=1e-9)
        diag.append(np.diag(noise))
        off.append(noise[np.triu_indices_from(noise, 1)])
    diag, off = np.concatenate(diag), np.concatenate(off)
    assert np.std(diag) == pytest.approx(sigma, rel=0.12)
    assert np.std(off) == pytest.approx(sigma / math.sqrt(2), rel=0.06)


def test_sensitivity_is_attained_by_adversarial_neighbours():
    """‖Σaaᵀ − Σbbᵀ‖_F ≤ √2 R² for every pair of rows and labels, with
    equality for full rows whose augmented dot product is 0: x·x' = −g₁²
    and two different classes."""
    est = PrivateLDA([0, 1], data_norm=1.0)
    w1, wt = est._weights
    base = np.random.default_rng(0).normal(size=(20, 3)) * 0.1
    x = np.array([1.0, 0.0, 0.0])
    x_prime = -w1**2 * x + math.sqrt(1 - w1**4) * np.array([0.0, 1.0, 0.0])
    worst = 0.0
    rng = np.random.default_rng(1)
    pairs = [(x, x_prime, 1, 0)] + [
        (u / max(1.0, np.linalg.norm(u)), v / max(1.0, np.linalg.norm(v)),
         int(rng.integers(2)), int(rng.integers(2)))
        for u, v in rng.normal(size=(500, 2, 3))]
    for a, b, ca, cb in pairs:
        ta, tb = np.zeros((21, 2)), np.zeros((21, 2))
        ta[:20, 0] = tb[:20, 0] = 1.0
        ta[20, ca], tb[20, cb] = 1.0, 1.0
        diff = (_augmented_gram(np.vstack([base, a]), ta, 1.0, est._weights)
                - _augmented_gram(np.vstack([base, b]), tb, 1.0, est._weights))
        worst = max(worst, np.linalg.norm(diff) / (math.sqrt(2) * reach(est)))
    assert worst <= 1.0 + 1e-12
    assert worst == pytest.approx(1.0, rel=1e-9)  # the first pair attains it


def test_lda_without_noise_is_linear_discriminant_analysis():
    """At epsilon=inf (no noise, no ridge) the discriminant is scikit-learn's
    on the clipped rows: the same predictions and probabilities."""
    X, y = blobs(3000)
    ours = PrivateLDA([0, 1, 2], data_norm=100.0, epsilon=math.inf).fit(X, y)
    ref = LinearDiscriminantAnalysis(solver="lsqr").fit(X, y)
    assert (ours.predict(X) == ref.predict(X)).mean() > 0.999
    np.testing.assert_allclose(ours.means_, ref.means_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ours.priors_, ref.priors_, rtol=1e-12)
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-2)


def test_ridge_without_noise_is_least_squares():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(5000, 4))
    y = X @ [1.0, -2.0, 0.5, 0.0] + 0.3 + rng.normal(0, 0.1, 5000)
    ours = PrivateRidge((-10, 10), data_norm=10.0, epsilon=math.inf,
                        alpha=0.0).fit(X, y)
    ref = LinearRegression().fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-8)
    assert ours.intercept_ == pytest.approx(ref.intercept_, rel=1e-8)
    # labels beyond the bounds are clipped; so are predictions
    tight = PrivateRidge((-1, 1), data_norm=10.0, epsilon=math.inf).fit(X, y)
    assert np.abs(tight.predict(X)).max() <= 1.0


def test_private_heads_are_accurate_on_many_rows():
    X, y = blobs(20_000, d=5, seed=3)
    clf = PrivateLDA([0, 1, 2], data_norm=4.0, epsilon=1.0, random_state=0,
                     accountant=BudgetAccountant()).fit(X, y)
    exact = LinearDiscriminantAnalysis().fit(X, y).score(X, y)
    assert clf.score(X, y) > exact - 0.02
    proba = clf.predict_proba(X[:10])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert clf.decision_function(X[:10]).shape == (10, 3)
    binary = PrivateLDA(["no", "yes"], data_norm=4.0, random_state=0,
                        accountant=BudgetAccountant())
    binary.fit(X, np.where(y == 0, "no", "yes"))
    assert binary.decision_function(X[:10]).shape == (10,)
    assert set(binary.predict(X)) <= {"no", "yes"}

    rng = np.random.default_rng(0)
    Xr = rng.uniform(-1, 1, size=(20_000, 3))
    yr = Xr @ [2.0, -1.0, 0.5] + rng.normal(0, 0.2, 20_000)
    reg = PrivateRidge((-4, 4), data_norm=2.0, epsilon=1.0, random_state=0,
                       accountant=BudgetAccountant()).fit(Xr, yr)
    assert reg.score(Xr, yr) > 0.9
    np.testing.assert_allclose(reg.coef_, [2.0, -1.0, 0.5], atol=0.15)


def test_each_fit_is_one_charge_and_all_or_nothing():
    X, y = blobs(500)
    budget = BudgetAccountant(epsilon=1.2)
    clf = PrivateLDA([0, 1, 2], data_norm=2.0, accountant=budget).fit(X, y)
    assert budget.n_charges == 1 and clf.privacy_spent_ == (1.0, 1e-6)
    before = clf.coef_.copy()
    with pytest.raises(Exception, match="budget"):
        clf.fit(X, y)
    assert budget.n_charges == 1
    np.testing.assert_array_equal(clf.coef_, before)  # the old model stays


@pytest.mark.parametrize("make, X, y, error, match", [
    (lambda acc: PrivateLDA(data_norm=1.0, accountant=acc),
     np.ones((5, 2)), [0, 1, 0, 1, 0], ValueError, "needs classes"),
    (lambda acc: PrivateLDA([0], data_norm=1.0, accountant=acc),
     np.ones((5, 2)), [0] * 5, ValueError, "at least two"),
    (lambda acc: PrivateLDA([0, 1], accountant=acc),
     np.ones((5, 2)), [0, 1, 0, 1, 0], ValueError, "needs data_norm"),
    (lambda acc: PrivateLDA([0, 1], data_norm=1.0, accountant=acc),
     np.ones((5, 2)), [0, 1, 2, 1, 0], ValueError, "outside classes"),
    (lambda acc: PrivateLDA([0, 1], data_norm=1.0, accountant=acc),
     np.ones((5, 2)), [0.5, 1.2, 2.1, 1.0, 0.0], ValueError, "Unknown label type"),
    (lambda acc: PrivateLDA([0, 1], data_norm=1.0, accountant=acc),
     np.array([[1.0, np.nan]] * 5), [0, 1, 0, 1, 0], ValueError, "NaN"),
    (lambda acc: PrivateRidge(data_norm=1.0, accountant=acc),
     np.ones((5, 2)), [0.0] * 5, ValueError, "needs y_bounds"),
    (lambda acc: PrivateRidge((0, 1), data_norm=1.0, accountant=acc),
     np.ones((5, 2)), ["a"] * 5, ValueError, "numeric labels"),
    (lambda acc: PrivateRidge((0, 1), data_norm=1.0, accountant=acc),
     np.ones((5, 2)), ["0.5", "1", "0", "1", "0"], ValueError, "numeric labels"),
    (lambda acc: PrivateRidge((0, 1), data_norm=1.0, accountant=acc),
     np.ones((5, 2)), np.array([0.5, "1", 0, 1, 0], dtype=object), ValueError,
     "numeric labels"),
    (lambda acc: PrivateLDA([0, 1], data_norm=1.0, accountant=acc),
     np.ones((5, 2)), np.array(["x", 0, 1, 0, 1], dtype=object), ValueError,
     "outside classes"),
    (lambda acc: PrivateRidge((0, 1), data_norm=1.0, accountant=acc),
     np.ones((5, 2)), [0.0, np.nan, 1.0, 0.0, 1.0], ValueError, "NaN"),
    # review 54: a complex y was refused by scikit-learn's message, which
    # prints every label; mixed classes became text; n C² overflowed after
    # the charge (a NaN model, or an OverflowError)
    (lambda acc: PrivateRidge((0, 1), data_norm=1.0, accountant=acc),
     np.ones((5, 2)), np.array([123.456 + 0j, 1, 0, 1, 0]), ValueError,
     r"Complex data not supported \(y"),
    (lambda acc: PrivateLDA([0, 1], data_norm=1.0, accountant=acc),
     np.ones((5, 2)), np.array([123.456 + 0j, 1, 0, 1, 0]), ValueError,
     r"Complex data not supported \(y"),
    (lambda acc: PrivateLDA([0, "unknown"], data_norm=1.0, accountant=acc),
     np.ones((5, 2)), [0, 0, 0, 0, 0], ValueError, "mixes text and numbers"),
    # review 68 F5: labels NumPy cannot sort, or that cannot be hashed, gave a
    # bare TypeError from np.unique
    (lambda acc: PrivateLDA([None, 1], data_norm=1.0, accountant=acc),
     np.ones((5, 2)), [0, 1, 0, 1, 0], ValueError, "classes must be labels that "
     "can be sorted and hashed"),
    (lambda acc: PrivateLDA([{0: 1}, {1: 0}], data_norm=1.0, accountant=acc),
     np.ones((5, 2)), [0, 1, 0, 1, 0], ValueError, "classes must be labels that "
     "can be sorted and hashed"),
    (lambda acc: PrivateRidge((0, 1), data_norm=1e153, accountant=acc),
     np.ones((500, 2)), [0.0] * 500, ValueError, "too large for 500 rows"),
])
def test_bad_input_is_refused_before_the_charge(make, X, y, error, match):
    budget = BudgetAccountant()
    X_before = np.array(X, copy=True)
    with pytest.raises(error, match=match):
        make(budget).fit(X, y)
    assert budget.n_charges == 0
    np.testing.assert_array_equal(X, X_before)


def test_budget_and_memory_are_checked_before_the_data_is_read(monkeypatch):
    """The budget was checked after X was read (a NaN then named the data
    first), and the (d + K + 1)² release was allocated after the charge
    (review 54)."""
    spent = BudgetAccountant(epsilon=1.0)
    spent.spend(mu=gdp_mu(1.0, 1e-6))
    X = np.array([[1.0, np.nan]] * 4)
    for make in (lambda a: PrivateLDA([0, 1], data_norm=1.0, accountant=a),
                 lambda a: PrivateRidge((0, 1), data_norm=1.0, accountant=a)):
        with pytest.raises(Exception, match="budget"):
            make(spent).fit(X, [0, 1, 0, 1])
        monkeypatch.setattr(linear_model, "physical_memory", lambda: 2**30)
        budget = BudgetAccountant()
        with pytest.raises(MemoryError, match="Refused before any charge"):
            make(budget).fit(np.ones((4, 6000)), [0, 1, 0, 1])
        assert budget.n_charges == 0
        monkeypatch.undo()


@pytest.mark.parametrize("options", [{"bounds": (0.0, 1.0)}, {"non_finite": "clip"}])
def test_the_rows_copy_after_the_charge_is_counted(monkeypatch, options):
    """With ``bounds`` or ``non_finite="clip"`` a head copies its rows; that
    copy was not in the memory check, so a fit whose release fitted failed
    after the charge. 2¹⁹ × 4 rows (16 MiB) on a machine of 16 MiB: the
    release fits, the copy does not."""
    monkeypatch.setattr(linear_model, "physical_memory", lambda: 16 * 2**20)
    X, y = np.full((2**19, 4), 0.5), np.arange(2**19) % 2
    budget = BudgetAccountant()
    head = PrivateRidge((0, 1), data_norm=1.0, accountant=budget, **options)
    with pytest.raises(MemoryError, match="beside a copy of its rows"):
        head.fit(X, y)
    assert budget.n_charges == 0
    with pytest.raises(MemoryError, match="beside a copy"):
        head._bound(4, 2**19)
    head.set_params(bounds=None, non_finite="raise")._bound(4, 2**19)  # no copy


@pytest.mark.parametrize("data_norm", [1e-150, 1e-70, 1e70, 1e150])
def test_lda_class_counts_hold_at_any_admitted_norm_bound(data_norm):
    """The counts' weights were (w C)⁴: NaN models, or counts n/K whatever
    the data, far from C = 1 (review 54)."""
    X, y = blobs(2000, seed=1, classes=(0, 1))
    clf = PrivateLDA([0, 1], data_norm=3.0 * data_norm, epsilon=1e4,
                     accountant=BudgetAccountant()).fit(X * data_norm, y)
    np.testing.assert_allclose(clf.class_count_, np.bincount(y), rtol=0.02)
    assert np.isfinite(clf.coef_).all()


def test_sparse_and_weights_are_refused_with_the_reason():
    from scipy import sparse

    budget = BudgetAccountant()
    clf = PrivateLDA([0, 1], data_norm=1.0, accountant=budget)
    with pytest.raises(TypeError, match="dense rows"):
        clf.fit(sparse.csr_matrix(np.ones((4, 2))), [0, 1, 0, 1])
    with pytest.raises(TypeError, match="takes no sample_weight"):
        clf.fit(np.ones((4, 2)), [0, 1, 0, 1], sample_weight=np.ones(4))
    assert budget.n_charges == 0


def test_a_fixed_seed_warns():
    X, y = blobs(100)
    with pytest.warns(PrivacyLeakWarning, match="random_state=0"):
        PrivateLDA([0, 1, 2], data_norm=2.0, random_state=0,
                   accountant=BudgetAccountant()).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        PrivateLDA([0, 1, 2], data_norm=2.0, accountant=BudgetAccountant()).fit(X, y)


def test_audits_of_the_heads_stay_below_epsilon():
    """Black-box audits at ε = 1 on neighbours that differ in one row and its
    label, in the worst-case direction: the lower bound on ε stays below 1."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-0.3, 0.3, size=(40, 2))
    y = rng.integers(0, 2, 40)
    X_prime, y_prime = X.copy(), y.copy()
    X[0], y[0] = [1.0, 0.0], 1
    X_prime[0], y_prime[0] = [-1.0, 0.0], 0

    def first_sum(fitted):  # Σ x₀ from the released class sums (Gaussian)
        return float(fitted.means_[:, 0] @ fitted.class_count_)

    first_sum.gaussian = True
    result = audit(PrivateLDA([0, 1], data_norm=1.0, epsilon=1.0), X, X_prime,
                   first_sum, n_fits=300, random_state=0, y=y, y_prime=y_prime)
    assert result.epsilon_lower < 1.0
    # the statistic sees the row: Σx₀ shifts by 2 under noise of sd σ/g_t
    # (two off-diagonal entries of sd σ/√2, in units of g_t)
    est = PrivateLDA([0, 1], data_norm=1.0)
    sigma = noise_scale(math.sqrt(2.0) * reach(est), gdp_mu(1.0, 1e-6))
    expected = 2.0 / (sigma / est._weights[1])
    assert result.mu_estimate == pytest.approx(expected, abs=0.25)

    def fitted_value(fitted):
        return float(fitted.predict([[1.0, 0.0]])[0])

    yr, yr_prime = y.astype(float), y.astype(float)
    yr[0], yr_prime[0] = 3.0, -3.0
    result = audit(PrivateRidge((-3, 3), data_norm=1.0, epsilon=1.0), X, X_prime,
                   fitted_value, n_fits=300, random_state=1, y=yr, y_prime=yr_prime)
    assert result.epsilon_lower < 1.0


def test_a_public_box_bounds_the_rows_around_its_midpoint():
    """bounds=(lower, upper): rows clipped into the box and translated by its
    midpoint (absorbed by the intercept), the norm bound the box's radius
    around it — the same model as data_norm on pre-translated rows."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 5000)
    X = np.clip(rng.normal(0.5, 0.15, size=(5000, 4)) + 0.2 * y[:, None], 0, 1)
    boxed = PrivateLDA([0, 1], bounds=(0, 1), random_state=3,
                       accountant=BudgetAccountant()).fit(X, y)
    assert boxed.data_norm_ == pytest.approx(1.0)  # √4 / 2
    moved = PrivateLDA([0, 1], data_norm=1.0, random_state=3,
                       accountant=BudgetAccountant()).fit(X - 0.5, y)
    np.testing.assert_allclose(boxed.coef_, moved.coef_, rtol=1e-9)
    np.testing.assert_allclose(boxed.decision_function(X),
                               moved.decision_function(X - 0.5), rtol=1e-9,
                               atol=1e-9)
    np.testing.assert_allclose(boxed.means_, moved.means_ + 0.5, rtol=1e-12)
    reg = PrivateRidge((0, 2), bounds=(0, 1), random_state=3,
                       accountant=BudgetAccountant()).fit(X, X.sum(axis=1) / 2)
    assert reg.score(X, X.sum(axis=1) / 2) > 0.9
    with pytest.raises(ValueError, match="needs data_norm or bounds"):
        PrivateLDA([0, 1]).fit(X, y)


def test_a_release_of_noise_warns_from_released_values_only():
    """Class means within twice their (public) noise of one another warn:
    on classes that do not differ, and not where the release resolves them."""
    from sklearn_dppca import NoisyReleaseWarning

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    same = rng.normal(size=(200, 10)) * 0.3
    with pytest.warns(NoisyReleaseWarning, match="within twice their noise"):
        PrivateLDA([0, 1], data_norm=2.0, epsilon=0.5, random_state=1,
                   accountant=BudgetAccountant()).fit(same, y)
    apart = same + y[:, None] * 0.3
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoisyReleaseWarning)
        PrivateLDA([0, 1], data_norm=2.0, epsilon=5.0, random_state=1,
                   accountant=BudgetAccountant()).fit(apart, y)


def test_predictions_see_rows_through_the_fits_public_map():
    """A row beyond data_norm is scored as the fit saw such rows: clipped to
    the bound (not extrapolated from the clipped rows the model was fitted
    on); rows inside are scored by coef_ and intercept_ as they are."""
    X, y = blobs(3000)
    clf = PrivateLDA([0, 1, 2], data_norm=1.0, random_state=0,
                     accountant=BudgetAccountant()).fit(X, y)
    inside = X[np.linalg.norm(X, axis=1) < 1.0]
    np.testing.assert_allclose(clf.decision_function(inside),
                               inside @ clf.coef_.T + clf.intercept_)
    far = X * 10.0
    clipped = far / np.maximum(1.0, np.linalg.norm(far, axis=1, keepdims=True))
    np.testing.assert_allclose(clf.decision_function(far),
                               clf.decision_function(clipped), rtol=1e-12)


def test_non_finite_clip_maps_each_value_publicly():
    X, y = blobs(2000)
    X[3, 1], X[7, 0] = np.nan, np.inf
    kw = dict(data_norm=2.0, random_state=0)
    clip = PrivateLDA([0, 1, 2], non_finite="clip", accountant=BudgetAccountant(),
                      **kw).fit(X, y)
    mapped = PrivateLDA([0, 1, 2], accountant=BudgetAccountant(),
                        **kw).fit(np.nan_to_num(X), y)
    np.testing.assert_allclose(clip.coef_, mapped.coef_)
    np.testing.assert_allclose(clip.decision_function(X),
                               mapped.decision_function(np.nan_to_num(X)))
    budget = BudgetAccountant()
    with pytest.raises(ValueError, match="NaN"):
        PrivateLDA([0, 1, 2], accountant=budget, **kw).fit(X, y)
    assert budget.n_charges == 0


def test_a_heads_memory_check_counts_the_rows_it_gathers_from_dask(monkeypatch):
    """A head fits in memory: the rows of a Dask array are gathered, and its
    memory check did not count them (review 68: a 96 MiB array fitted on a
    machine of 64 MiB). Refused before the gather and the charge."""
    da = pytest.importorskip("dask.array")
    import sklearn_dppca.linear_model as heads

    monkeypatch.setattr(heads, "physical_memory", lambda: 64 * 2**20)
    X = da.zeros((1_500_000, 8), chunks=(100_000, 8))  # 96 MiB
    budget = BudgetAccountant()
    with pytest.raises(MemoryError, match="gathers from the Dask array"):
        PrivateLDA([0, 1], data_norm=3.0, accountant=budget).fit(
            X, np.zeros(1_500_000, dtype=int))
    assert budget.n_charges == 0


_HEAD_PEAK = """
import re, sys, warnings
import numpy as np
from sklearn_dppca import BudgetAccountant
from sklearn_dppca.linear_model import PrivateLDA, PrivateRidge
warnings.simplefilter("ignore")
def kib(what):
    status = open("/proc/self/status").read()
    return 1024 * int(re.search(what + r":\\s+(\\d+)", status).group(1))
d = int(sys.argv[2])
X, y = np.random.default_rng(0).normal(size=(6, d)), np.array([0, 1] * 3)
head = PrivateLDA([0, 1], data_norm=1.0) if sys.argv[1] == "lda" else \\
    PrivateRidge((0, 1), data_norm=1.0)
head.set_params(accountant=BudgetAccountant())
np.linalg.eigh(np.eye(300))[1] @ np.eye(300)  # LAPACK's and BLAS's buffers
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
start = kib("VmRSS")
head.fit(X, y)
print(kib("VmHWM") - start)
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"),
                    reason="resets the peak RSS with /proc/self/clear_refs")
@pytest.mark.parametrize("kind, extra", [("lda", 3), ("ridge", 2)])
def test_a_heads_fit_peaks_within_the_matrices_its_check_counts(kind, extra):
    """The memory check refuses before the charge a head whose release does
    not fit: it counted 5 matrices of the release's width, NumPy's, and the
    fit peaked at about 7 (LAPACK's eigh copies its input and works in two
    more), so a width near the limit was charged, then ran out of memory
    (review 88 F1)."""
    import subprocess
    import sys

    d = 1500
    out = subprocess.run([sys.executable, "-c", _HEAD_PEAK, kind, str(d)],
                         check=True, capture_output=True, text=True).stdout
    width = d + extra
    assert int(out) <= 8 * linear_model._HEAD_MATRICES * width**2, (
        int(out) / (8 * width**2))
