"""Rows moved to a far private mean (mend 101): in memory each pass centres
the block it reads (:class:`~sklearn_dppca._moved.MovedRows`), never a
copy of every row, and the release is the one the copy gave."""

import warnings

import numpy as np
import pytest
from scipy import sparse

import sklearn_dppca._moved as moved_module
from sklearn_dppca import BudgetAccountant, CoherentPowerPCA, PrivatePCA
from sklearn_dppca._moved import MovedRows
from sklearn_dppca._rows import InMemoryRows
from sklearn_dppca._stats import _dense

from .test_matrix_free import traced_peak


def _copied(engine, centre, threads=None):
    """The rows moved as the fit moved them before: one copy of every row."""
    return InMemoryRows(_dense(engine.X) - centre)


def _quiet_fit(estimator, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return estimator.fit(X)


def test_moved_rows_read_as_the_copy_and_never_whole():
    rng = np.random.default_rng(0)
    X = np.exp(rng.normal(size=(300, 7)) * 4.0)  # differences that round
    S = sparse.random(300, 7, density=0.3, format="csr", random_state=1) * 1e3
    for rows in (X, X.astype(np.float32), S, S.astype(np.float32)):
        centre = (rng.normal(size=7) * 1e3).astype(rows.dtype)
        moved = MovedRows(rows, centre)
        copy = (_dense(rows) - centre).astype(np.float64)  # the old copy, read
        for key in (slice(0, 300), slice(17, 123), np.array([5, 2, 299, 5])):
            block = moved[key]
            assert block.dtype == np.float64 and block.flags.c_contiguous
            np.testing.assert_array_equal(block, copy[key])
        with pytest.raises(TypeError, match="never whole"):
            np.asarray(moved)
    before = X.copy()
    MovedRows(X, X[0])[np.arange(3)]
    np.testing.assert_array_equal(X, before)  # the caller's rows untouched


def _far_rows():
    rng = np.random.default_rng(3)
    n, d = 30_000, 40
    X = rng.normal(size=(n, d)) * np.linspace(3.0, 0.5, d) + 500.0
    S = sparse.random(20_000, 499, density=0.01, format="csr", random_state=0) * 0.1
    far = sparse.csr_matrix(100.0 + rng.normal(size=(20_000, 1)))
    return X, sparse.hstack([far, S], format="csr")


_X, _CSR = _far_rows()


@pytest.mark.parametrize("make, params, rows", [
    (PrivatePCA, {}, _X),
    (PrivatePCA, {}, _X.astype(np.float32)),
    (PrivatePCA, {"path": "matrix_free", "svd_solver": "randomized"}, _X),
    (PrivatePCA, {"path": "noisy_power", "svd_solver": "randomized"}, _X),
    (CoherentPowerPCA, {"n_jobs": 2}, _X),
    (PrivatePCA, {"epsilon": 10.0}, _CSR),
])
def test_a_far_mean_gives_the_release_of_the_copied_rows(make, params, rows,
                                                         monkeypatch):
    """Same seed, same data: the fit on rows moved by blocks releases what
    the fit on an explicit copy of the moved rows released (the old code),
    to round-off (here bit for bit: the same blocks, the same sums)."""
    moves, by_blocks = [], moved_module.moved_in_memory

    def spy(engine, centre, threads=None):
        moves.append(engine.X.shape)
        return by_blocks(engine, centre, threads)

    fits = []
    for mover in (_copied, spy):
        monkeypatch.setattr(moved_module, "moved_in_memory", mover)
        fits.append(_quiet_fit(make(3, data_norm="auto", random_state=0,
                                    accountant=BudgetAccountant(),
                                    **{"epsilon": 2.0, **params}), rows))
    assert moves == [rows.shape]  # the mean was far: the rows were moved
    copied, moved = fits
    for name in ("mean_", "components_", "explained_variance_", "noise_variance_",
                 "data_norm_"):
        np.testing.assert_allclose(getattr(moved, name), getattr(copied, name),
                                   rtol=1e-9, atol=1e-12 * np.max(np.abs(
                                       getattr(copied, name))), err_msg=name)


def test_a_far_mean_makes_no_copy_of_the_rows():
    """At 2·10⁵ × 100 (160 MB) the whole copy was the fit's peak; moved by
    blocks it holds a 34 MB block a thread."""
    X = np.random.default_rng(0).normal(size=(200_000, 100)) + 100.0
    peak = traced_peak(PrivatePCA(5, data_norm="auto", epsilon=1.0,
                                  random_state=0, accountant=BudgetAccountant()), X)
    assert peak < 0.6 * X.nbytes  # a copy: 1.0 and more


def test_sparse_rows_far_from_the_origin_move_by_dense_blocks():
    """CSR rows 10⁶ bounds from the origin, beyond their expansion's margin
    (review 62), whose dense copy (160 MB) does not fit in what
    ``memory_limit`` leaves, were refused after the charge; their dense
    blocks fit: they are moved, and the fit runs."""
    rng = np.random.default_rng(0)
    n, d = 40_000, 500
    S = sparse.random(n, d - 1, density=0.01, format="csr", random_state=1)
    X = sparse.hstack([sparse.csr_matrix(1e6 + 3.0 * rng.normal(size=(n, 1))), S],
                      format="csr")
    probe = PrivatePCA(2, data_norm="auto")
    probe._plan_path(n, d, InMemoryRows(X))
    limit = probe._memory_needed(n, d) + probe._moved_bytes(n, d) + 10e6
    assert limit < probe._memory_needed(n, d) + n * d * 8  # no room for a copy
    budget = BudgetAccountant()
    pca = _quiet_fit(PrivatePCA(2, data_norm="auto", epsilon=30.0, random_state=0,
                                accountant=budget, memory_limit=limit), X)
    assert budget.n_charges == 1
    assert pca.mean_[0] == pytest.approx(1e6, abs=1.0)
    assert abs(pca.components_[0, 0]) > 0.99  # the far column's spread leads


def far_noisy_power_fits(X):
    """``(needed, fit)`` for rows ``X`` far from the origin on the noisy
    power path with ``data_norm="auto"``: the plan's bytes (its arrays and
    copies, from the public shape) and ``fit(limit)``, which fits at that
    ``memory_limit`` and gives ``(estimator, traced peak)``."""
    n, d = X.shape

    def fit(limit):
        est = PrivatePCA(3, data_norm="auto", path="noisy_power",
                         svd_solver="randomized", epsilon=30, random_state=0,
                         accountant=BudgetAccountant(), memory_limit=limit)
        return est, traced_peak(est, X)

    plan = PrivatePCA(3, data_norm="auto", path="noisy_power",
                      svd_solver="randomized", memory_limit=1e12)
    plan._plan_path(n, d, InMemoryRows(X[:0]))
    return plan._memory_needed(n, d) + plan._copy_bytes, fit

def test_moved_rows_stay_within_the_plan_of_the_noisy_power_path():
    """Off the dense path the plan counts a moved block a thread of ``n_jobs``
    (one here), not BLAS's: the passes over moved rows (the norms' pass
    included) run in that many threads, and the fit stays in its plan."""
    n, d = 40_000, 500  # blocks of 8 388 rows (34 MB): five
    X = np.random.default_rng(0).standard_normal((n, d)) / np.sqrt(d) + 50.0
    needed, fit = far_noisy_power_fits(X)
    est, peak = fit(1.02 * needed)
    assert est.mean_[0] == pytest.approx(50.0, abs=0.5)  # moved: far
    assert peak <= needed


def test_moved_blocks_beyond_the_plan_are_those_of_sparse_input():
    """Dense input: the plan counts the moved blocks, none is beyond it.
    Sparse input (moved as dense blocks, or a box's dense copy of it read
    by copied blocks): all of them are, and ``translate_if_far`` moves the
    rows only where they fit in what ``memory_limit`` leaves."""
    from sklearn_dppca._bounds import _moved_plan

    n, d = 50_000, 300
    for rows, beyond in ((np.zeros((0, d)), False),
                         (sparse.csr_matrix((0, d)), True)):
        est = PrivatePCA(5, data_norm="auto", bounds=(-1.0, 2.0) if beyond else None)
        est._plan_path(n, d, InMemoryRows(rows))
        moved = _moved_plan(est, n, d)
        assert moved["moved_threads"] >= 1
        assert (moved["moved_bytes"] > 0) == beyond
        if beyond:
            assert moved["moved_bytes"] == est._moved_bytes(n, d) >= 8 * d * 2048
