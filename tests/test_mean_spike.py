"""The private mean's error as a component (review 122 F1).

Centring the rows on the private mean :math:`\\hat m = m - \\delta` adds
:math:`n \\delta\\delta^\\top` to their scatter: a rank-one term of noise in
a direction no one knows. On wide rows (:math:`d` large next to :math:`n`)
it leaves the noise's bulk, and the released top component was that
direction, counted in ``n_resolved_`` and given 55% of the variance on
isotropic rows whose true top ratio is 0.16%. The spectrum now counts an
eigenvalue only above where that term's would lie (public: the mean's noise
scale, ``n`` and ``d``), and the noise warning says what to change.
"""

import math
import warnings

import numpy as np
import pytest

from sklearn_dppca import BudgetAccountant, ComplexGaussPCA, PrivatePCA, _spectrum
from sklearn_dppca._released import NoisyReleaseWarning

pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")


def test_mean_spike_is_the_expected_and_an_upper_size():
    assert _spectrum.mean_spike(None, 100) == (0.0, 0.0)
    expected, upper = _spectrum.mean_spike(_spectrum.gaussian_error(0.1, 50), 100)
    assert expected == pytest.approx(100 * 50 * 0.01)
    assert upper == pytest.approx(100 * 0.01 * (50 + 2 * math.sqrt(100)))
    # the upper size bounds n‖δ‖² for δ of N(0, sd²) coordinates
    rng = np.random.default_rng(0)
    draws = 100 * (0.1 * rng.standard_normal((2000, 50))) ** 2
    assert 0.93 < (draws.sum(axis=1) <= upper).mean() < 0.99


def _released(d, spikes, seed=0):
    """Eigenvalues of GOE noise (σ = 1) plus rank-one terms, decreasing."""
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((d, d))
    matrix = (g + g.T) / 2.0
    for size in spikes:
        u = rng.standard_normal(d)
        matrix += size * np.outer(u, u) / (u @ u)
    return np.sort(np.linalg.eigvalsh(matrix))[::-1]


def test_resolved_weights_do_not_count_the_mean_spike():
    d = 400  # bulk edge 2√d τ ≈ 28; a spike of 60 leaves it at about 63
    lam = _released(d, [60.0])
    assert _spectrum.resolved_weights(lam, 1.0).shape[0] == 1
    assert _spectrum.resolved_weights(lam, 1.0, spike=66.0).shape[0] == 0
    lam = _released(d, [60.0, 200.0])  # a component beyond the spike's reach
    assert _spectrum.resolved_weights(lam, 1.0, spike=66.0).shape[0] == 1
    # a spike inside the bulk (below √d τ ≈ 14) changes nothing
    lam = _released(d, [120.0])
    assert (_spectrum.resolved_weights(lam, 1.0, spike=10.0).shape[0]
            == _spectrum.resolved_weights(lam, 1.0).shape[0] == 1)


def _isotropic(n, d):
    return np.random.default_rng(0).standard_normal((n, d)) / np.sqrt(d)


@pytest.mark.parametrize("make", [
    lambda s: PrivatePCA(2, path="dense", random_state=s),
    lambda s: PrivatePCA(2, path="matrix_free", svd_solver="randomized",
                         random_state=s),
    lambda s: PrivatePCA(2, path="noisy_power", svd_solver="randomized",
                         random_state=s),
    lambda s: ComplexGaussPCA(2, random_state=s),
])
def test_on_rows_with_nothing_to_find_the_mean_error_is_not_a_component(make):
    X = _isotropic(500, 400)
    counted = 0
    for seed in range(6):  # 1 or 2 resolved each, 0.68-0.74 of the variance
        est = make(seed).set_params(epsilon=1.0, data_norm=1.5,
                                    accountant=BudgetAccountant())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est.fit(X)
        noise = [str(w.message) for w in caught if w.category is NoisyReleaseWarning]
        assert len(noise) == 1 and "center=False" in noise[0]
        counted += est.n_resolved_ > 0
        if not est.n_resolved_:
            # the noisy power path's estimates of unresolved components
            # were the noise's too (0.19-0.27 of the variance each)
            assert "none of them does" in noise[0]
            assert est.explained_variance_ratio_[0] < 0.01
    # the upper size is exceeded by 2-5% of the mean's errors: then counted
    assert counted <= 1


def test_a_component_beyond_the_mean_error_is_still_counted():
    n, d = 1500, 400
    rng = np.random.default_rng(0)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    X = (0.5 * rng.standard_normal((n, d)) / np.sqrt(d)
         + 1.05 * rng.standard_normal((n, 1)) * u)
    for seed in range(3):
        est = PrivatePCA(2, epsilon=1.0, data_norm=1.5, random_state=seed,
                         accountant=BudgetAccountant()).fit(X)
        assert est.n_resolved_ == 1  # counted 2: the mean's error second
        assert abs(est.components_[0] @ u) > 0.95
        assert est.explained_variance_ratio_[0] > 0.5


def test_a_search_refit_from_pooled_folds_does_not_count_their_means_errors():
    # the pooled release holds each fold's n_i δ_i δ_iᵀ / r: the refit
    # counted two components with 0.12-0.16 of the variance each on rows
    # with nothing to find (review 123 F3)
    from sklearn.model_selection import KFold

    from sklearn_dppca._private_pca import pooled_release

    X = _isotropic(1500, 400)
    kept = []
    for f, (train, _) in enumerate(KFold(3, shuffle=True, random_state=0).split(X)):
        fold = PrivatePCA(2, epsilon=1.0, data_norm=1.5, random_state=f,
                          accountant=BudgetAccountant())
        fold._keep_release = 2**29
        kept.append(fold.fit(X[train])._kept)
        assert kept[-1].spike[1] > 0
    refit = PrivatePCA(2, epsilon=1.0, data_norm=1.5, accountant=BudgetAccountant())
    refit._fit_released(X, pooled_release(kept, 2), (1.0, 1e-6))
    assert refit.n_resolved_ == 0
    assert refit.explained_variance_ratio_[0] < 0.01


def test_the_shrunk_steps_error_is_estimated_from_the_move():
    from sklearn_dppca._norm_plan import shrink_step, shrunk_error

    rng = np.random.default_rng(0)
    d, sigma = 400, 0.1
    noise = _spectrum.gaussian_error(sigma, d)
    # a centre at the data already: the move is noise, shrunk nearly to 0;
    # the estimate's upper side (two of its standard deviations) kept, one
    # margin only, well below the unshrunk noise's
    moves = sigma * rng.standard_normal((200, d))
    bounds = [shrunk_error(move, sigma) for move in moves]
    assert all(e <= u < 0.35 * noise[0] for e, u in bounds)
    errors = [float(shrink_step(m, sigma) @ shrink_step(m, sigma)) for m in moves]
    assert np.mean([err <= u for err, (_, u) in zip(errors, bounds)]) > 0.95
    # a long true move: barely shrunk, the error about the noise's
    far = 50 * sigma * np.ones(d) + sigma * rng.standard_normal(d)
    assert shrunk_error(far, sigma)[0] == pytest.approx(noise[0], rel=0.2)
    assert shrunk_error(far[:2], sigma) == _spectrum.gaussian_error(sigma, 2)


def test_auto_keeps_a_dominant_component():
    # data_norm="auto" took the last mean step's sigma for the mean's error,
    # 100-1000 times its size after the James-Stein shrinkage: a component
    # with half the variance was no longer counted (review 124 F1)
    n, d = 1000, 400
    rng = np.random.default_rng(1000)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    X = rng.standard_normal((n, d)) / np.sqrt(d) + rng.standard_normal((n, 1)) * u
    for seed in range(2):
        est = PrivatePCA(3, path="dense", epsilon=1.77, data_norm="auto",
                         random_state=seed, accountant=BudgetAccountant()).fit(X)
        assert est.n_resolved_ >= 1 and abs(est.components_[0] @ u) > 0.95
        assert est.explained_variance_ratio_[0] > 0.3


def test_the_random_start_levels_the_mean_errors_direction():
    # its iterations find the mean's error on rows with nothing to find:
    # 0.27-0.43 of the variance, no word of center=False (review 124 F2)
    from sklearn_dppca import CoherentPowerPCA

    X = _isotropic(1000, 400)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = CoherentPowerPCA(3, start="random", epsilon=1.0, data_norm=1.5,
                               random_state=0, accountant=BudgetAccountant()).fit(X)
    assert est.branch_ == "random" and est.n_resolved_ == 0
    assert est.explained_variance_ratio_[0] < 0.01
    noise = [str(w.message) for w in caught if w.category is NoisyReleaseWarning]
    assert len(noise) == 1 and "center=False" in noise[0]


def test_auto_does_not_count_the_mean_error_on_rows_with_nothing_to_find():
    # Stein's estimate alone (0 where the step shrinks to 0) let the mean's
    # error count as a component in 4 of 12 fits (review 126 F2)
    n, d = 1000, 400
    rng = np.random.default_rng(5)
    u = rng.standard_normal(d)
    u /= np.linalg.norm(u)
    X = rng.standard_normal((n, d)) / np.sqrt(d) + 0.3 * u
    counted = sum(
        PrivatePCA(3, path="dense", epsilon=1.77, data_norm="auto", random_state=seed,
                   accountant=BudgetAccountant()).fit(X).n_resolved_ > 0
        for seed in range(12))
    assert counted <= 2  # the bulk's edge alone: 9-19% of fits of pure noise


def _tall(n, d):
    rng = np.random.default_rng(n + d)
    Q = np.linalg.qr(rng.standard_normal((d, 4)))[0]
    X = (rng.standard_normal((n, 4)) * np.array([3.0, 2.0, 1.2, 0.8]) @ Q.T
         + 0.3 * rng.standard_normal((n, d)) + 2.0)
    return X, Q


def test_auto_on_a_tall_table_counts_the_components_it_finds():
    # one margin on the shrunk step's error, not two: with the chi factor on
    # top of Stein's estimate's two standard deviations, components found
    # with |cos| 0.97-0.99 were not counted on tall tables (review 127 F3)
    X, Q = _tall(1000, 50)
    est = PrivatePCA(5, epsilon=1.0, random_state=7, data_norm="auto",
                     accountant=BudgetAccountant()).fit(X)
    found = int((np.abs(est.components_ @ Q).max(axis=1) > 0.8).sum())
    assert found == 3 and est.n_resolved_ >= 3
    X, Q = _tall(2000, 20)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = PrivatePCA(5, epsilon=0.3, random_state=7, data_norm="auto",
                         accountant=BudgetAccountant()).fit(X)
    noise = [str(w.message) for w in caught if w.category is NoisyReleaseWarning]
    # below the reach of the mean's error a component is not called random
    # (the third, |cos| 0.92, was called a random direction)
    assert est._mean_error_out and len(noise) == 1
    assert "cannot be told from noise" in noise[0]
    assert "random directions" not in noise[0]


def test_no_counted_component_is_the_mean_error():
    # counting m - 1 of the m eigenvalues above the bulk's own edge (what
    # interlacing guarantees are the data's) counted the top ones, and the
    # top one was the mean's error, with 0.8 of the variance (review 129)
    X = _isotropic(1000, 400)
    for seed in range(8):
        est = PrivatePCA(3, path="dense", epsilon=0.397, data_norm=1.5,
                         random_state=seed, accountant=BudgetAccountant()).fit(X)
        error = est.mean_ - X.mean(axis=0)
        cos = np.abs(est.components_[:est.n_resolved_] @ error) / np.linalg.norm(error)
        assert (cos < 0.5).all(), seed
