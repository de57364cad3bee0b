"""The private heads at their extremes (review 120): a ridge of 0, a row
whose scores overflow between two private steps, and the softmax under
``np.seterr``. Each is a failure, a non-finite value or a warning that one
row would decide after a charge, or a score whose per-row bound fails."""

import warnings

import numpy as np
import pytest
from scipy import sparse
from sklearn.datasets import load_breast_cancer
from sklearn.pipeline import Pipeline

from sklearn_dppca import BudgetAccountant, PrivatePCA
from sklearn_dppca._supervised_search import fold_statistics
from sklearn_dppca.linear_model import PrivateLDA, PrivateRidge
from sklearn_dppca.preprocessing import PublicScaler

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _ridge(seed, X, y, C):
    return PrivateRidge(y_bounds=(0, 1), data_norm=C, alpha=0, random_state=seed,
                        accountant=BudgetAccountant()).fit(X, y)


@pytest.mark.parametrize("C", [1.0, 10.0])
def test_ridge_without_ridge_predicts_finite_values(C):
    # alpha=0: the noisy Gram's negative eigenvalues clamped at 0 were
    # floored at tiny · max, inverted to ~1e307: coefficients of inf, NaN
    # predictions for some rows of norm ≤ C and not others
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(30, 6)) * C, rng.uniform(0, 1, 30)
    rows = rng.normal(size=(200, 6))
    rows *= C * rng.uniform(0, 1, (200, 1)) / np.linalg.norm(rows, axis=1)[:, None]
    for seed in range(30):
        model = _ridge(seed, X, y, C)
        assert np.isfinite(model.coef_).all() and np.isfinite(model.intercept_)
        assert np.isfinite(model.predict(rows)).all()


def test_lda_without_ridge_has_finite_coefficients():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 3)), rng.integers(0, 2, 50)
    for seed in range(5):  # coefficients near ±1e307 or inf before
        model = PrivateLDA(classes=[0, 1], data_norm=1, alpha=0, random_state=seed,
                           accountant=BudgetAccountant()).fit(X, y)
        assert np.abs(model.coef_).max() < 1e6 and np.abs(model.intercept_).max() < 1e6
        assert np.isfinite(model.covariance_).all()


class _Plan:
    scoring, labels = "r2", (0.5, 0.5)


def test_a_nan_prediction_keeps_the_fold_statistic_bounded():
    # the search's summed squared errors: a row's term is in [0, 4]
    # whatever the model predicts; a NaN prediction made the sum NaN
    y = np.array([0.0, 1.0, 0.25])
    per, _ = fold_statistics(_Plan, y, [np.array([np.nan, 1.0, 0.25])])
    assert per[0, 0] == pytest.approx((0.0 - (-1.0)) ** 2)
    per, _ = fold_statistics(_Plan, y, [np.array([np.inf, -np.inf, 0.25])])
    assert per[0, 0] == pytest.approx(4.0 + 4.0)


def _pipeline(accountant, whiten):
    X, _ = load_breast_cancer(return_X_y=True)
    ranges = (X.min(axis=0), X.max(axis=0))
    return Pipeline([
        ("scale", PublicScaler(ranges)),
        ("pca", PrivatePCA(5, data_norm=3, whiten=whiten, accountant=accountant,
                           random_state=0)),
        ("lda", PrivateLDA(classes=[0, 1], data_norm=1, accountant=accountant,
                           random_state=0))])


@pytest.mark.parametrize("whiten", ["partial", False])
@pytest.mark.parametrize("big", [-1e308, 1e308])
def test_a_row_whose_scores_overflow_does_not_fail_the_head(whiten, big):
    # the scaler saturates the row at -1.797e308, the PCA's fit clips it,
    # but its projection of the training rows overflowed to ±inf (or NaN):
    # the head refused it after the PCA's charge, the neighbour fitted
    X, y = load_breast_cancer(return_X_y=True)
    X = X.copy()
    X[0] = big
    accountant = BudgetAccountant(epsilon=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="raise"):
            model = _pipeline(accountant, whiten).fit(X, y)
    assert accountant.n_charges == 2
    scores = model[:-1].transform(X[:1])
    assert np.isfinite(scores).all() and np.abs(scores).max() > 1e300


def test_saturated_scores_on_every_input_kind():
    # dense float64 and float32, CSR: rows of finite entries never map to a
    # non-finite score; a row holding inf keeps its scores; other rows'
    # scores are the plain product's, bit for bit
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 4))
    pca = PrivatePCA(2, data_norm=5, epsilon=10, accountant=BudgetAccountant(),
                     random_state=0).fit(X)
    rows = np.vstack([X[:3], np.full((1, 4), 1e308), [[-1e308, 1e308, 1.0, 0.0]]])
    plain = rows[:3] @ pca.components_.T - pca.mean_ @ pca.components_.T
    rows32 = np.where(np.abs(rows) > 1e300, np.sign(rows) * 3e38, rows)
    for given in (rows, rows32.astype(np.float32), sparse.csr_matrix(rows),
                  sparse.csr_array(rows)):
        out = pca.transform(given)
        assert np.isfinite(out).all()
        if not sparse.issparse(given) and given.dtype == np.float64:
            np.testing.assert_array_equal(out[:3], plain)
        # the dtype of ordinary rows', saturated or not (review 123 F1)
        assert out.dtype == pca.transform(given[:3]).dtype
    with np.errstate(over="ignore", invalid="ignore"):
        kept = pca._saturated(np.array([[np.inf, 0, 0, 0]]),
                              np.array([[np.inf, -np.inf]]),
                              pca.components_, pca.mean_)
    assert np.isinf(kept).all()


def test_softmax_silent_under_seterr():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, 3000)
    X = rng.normal(size=(3000, 2)) * 0.05 + np.eye(3)[y][:, :2] * 3
    model = PrivateLDA(classes=[0, 1, 2], data_norm=4, epsilon=50,
                       accountant=BudgetAccountant()).fit(X, y)
    with np.errstate(all="raise"):
        proba = model.predict_proba(X[:50])
        log_proba = model.predict_log_proba(X[:50])
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert np.isfinite(log_proba).all()
    np.testing.assert_allclose(np.exp(log_proba), proba)


def test_a_float32_sparse_fit_after_an_overflowing_row_stays_float32():
    # the saturated rows were computed in float64 and promoted every score:
    # the next private step's fitted dtypes told whether a row overflowed
    rng = np.random.default_rng(0)
    X = sparse.random(300, 6, density=0.5, random_state=0, dtype=np.float32,
                      format="csr")
    pca = PrivatePCA(2, data_norm=3, whiten=True, epsilon=10, random_state=0,
                     accountant=BudgetAccountant()).fit(X)
    rows = sparse.csr_matrix(np.vstack([rng.normal(size=(2, 6)),
                                        np.full((1, 6), 3e38)]).astype(np.float32))
    with np.errstate(over="ignore"):
        assert pca.transform(rows).dtype == np.float32


def test_a_dask_projection_stays_lazy():
    # the saturation's check on the scores computed the caller's graph at
    # transform(), in a Pipeline outside the next private step's silence
    # (a warning of a step of the caller's escaped; review 123 F2)
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 50))
    pca = PrivatePCA(2, data_norm=5, epsilon=10, whiten=True, random_state=0,
                     accountant=BudgetAccountant()).fit(X)
    calls = []

    def chunk(block):
        calls.append(block.shape)
        return block

    lazy = da.from_array(X, chunks=(100, 25)).map_blocks(chunk, dtype=float)
    out = pca.transform(lazy)
    computed = len(calls)  # Dask may probe a chunk of no rows for its meta
    assert all(shape[0] == 0 for shape in calls)
    big = np.vstack([X, 1.7e308 * np.sign(pca.components_[:1])])
    np.testing.assert_array_equal(np.asarray(out), pca.transform(X))
    assert len(calls) > computed
    saturated = pca.transform(da.from_array(big, chunks=(100, 25)))
    assert np.isfinite(np.asarray(saturated)).all()


def test_a_dask_projection_of_sparse_chunks_declares_its_dtype():
    # float64 CSR chunks times float32 components are float64 scores: the
    # lazy array said float32, and a next private step fitted in float32
    # what the same scores in memory fitted in float64 (review 126 F1)
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    pca = PrivatePCA(2, data_norm=3, epsilon=10, random_state=0,
                     accountant=BudgetAccountant()).fit(X.astype(np.float32))
    lazy = da.from_array(X, chunks=(100, 6)).map_blocks(
        sparse.csr_matrix, dtype=X.dtype, meta=sparse.csr_matrix((0, 0)))
    out = pca.transform(lazy)
    assert out.dtype == np.asarray(out.compute()).dtype == pca.transform(X).dtype
