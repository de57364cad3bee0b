"""Review 78: ``data_norm="auto"`` on sparse rows. Its passes (the counts of
the row norms around a centre and the sums per bin of the norm grid) keep
sparse rows sparse and add a block's sums into the pass's accumulators
without a dense bins × d array a block, and release what they released
before: the same values from a CSR matrix as from its dense copy, and as
the code before the change."""

import tracemalloc
import warnings

import numpy as np
import pytest
from scipy import sparse

from sklearn_dppca import (
    BudgetAccountant,
    CoherentPowerPCA,
    ComplexGaussPCA,
    PrivatePCA,
    _norm_stats,
)
from sklearn_dppca._norm_plan import norm_grid

ESTIMATORS = {"P": (PrivatePCA, {"delta": 1e-5}), "C": (CoherentPowerPCA, {}),
              "G": (ComplexGaussPCA, {"delta": 1e-5})}

#: Released by the code before review 78 (commit b83655b) on :func:`_rows`
#: with random_state=11: the bound, mean[:4] and |components_[0, :4]|, from
#: the CSR input (its dense copy released the same to 1e-15).
PINNED = {
    "P": (1.295742473509583,
          [0.028305364167571182, 0.027837850038572764, 0.026068250291617984,
           0.025565648265465854],
          [0.009589192126689416, 0.09518590728983257, 0.21238054898172687,
           0.0825020050126939]),
    "C": (1.293734773520678,
          [0.0280895869445591, 0.028182058681346198, 0.025684165381994212,
           0.025878772222156312],
          [0.0739354372738658, 0.15467998236055888, 0.05305948186608727,
           0.18046341366676524]),
    "G": (1.295742473509583,
          [0.028305364167571182, 0.027837850038572764, 0.026068250291617984,
           0.025565648265465854],
          [0.20685825730625498, 0.27375607098493415, 0.0569904338089504,
           0.05557651065888592]),
}


def _rows():
    rng = np.random.default_rng(7)
    X = sparse.random(3000, 60, density=0.1, format="csr", random_state=3)
    X.data = rng.normal(size=X.nnz) * 0.5 + 0.3
    return X


def _fit(name, X):
    cls, kw = ESTIMATORS[name]
    est = cls(n_components=3, data_norm="auto", epsilon=2.0, random_state=11,
              accountant=BudgetAccountant(), **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return est.fit(X)


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_csr_and_its_dense_copy_release_the_same_as_before(name):
    X = _rows()
    fits = [_fit(name, X), _fit(name, X.toarray())]
    norm, mean, comp = PINNED[name]
    for est in fits:
        assert est.data_norm_ == pytest.approx(norm, rel=1e-12)
        np.testing.assert_allclose(est.mean_[:4], mean, rtol=0, atol=1e-10)
        np.testing.assert_allclose(np.abs(est.components_[0, :4]), comp,
                                   rtol=0, atol=1e-10)
    a, b = fits
    np.testing.assert_allclose(a.mean_, b.mean_, rtol=0, atol=1e-10)
    np.testing.assert_allclose(np.abs(a.components_), np.abs(b.components_),
                               rtol=0, atol=1e-10)
    np.testing.assert_allclose(a.explained_variance_, b.explained_variance_,
                               rtol=1e-10)


def _far_rows(n=300, d=40, seed=0, huge=1e200):
    """Sparse rows with one dense column far from the origin (their norms
    around the mean cancel in the sparse expansion: centred explicitly),
    a few rows near the mean, some duplicated entries and a row of huge norm."""
    rng = np.random.default_rng(seed)
    S = sparse.random(n, d - 1, density=0.1, format="csr", random_state=seed)
    first = np.where(rng.random(n) < 0.5, 1e6 + rng.normal(size=n), 0.0)
    X = sparse.hstack([sparse.csr_matrix(first[:, None]), S], format="csr").tolil()
    X[7, 3] = huge
    X = X.tocsr()
    coo = X.tocoo()  # duplicated entries: their sum is the value
    half = coo.data / 2
    return sparse.csr_matrix((np.r_[half, half], (np.r_[coo.row, coo.row],
                                                  np.r_[coo.col, coo.col])),
                             shape=X.shape), X.toarray()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_pass_on_sparse_rows_equals_the_pass_on_their_dense_copy(dtype):
    """Counts, per-bin sums and the clipped sum of one pass around centres
    near and far from the rows: equal on CSR and dense rows."""
    S, D = _far_rows(huge=1e200 if dtype == np.float64 else 1e30)
    S, D = S.astype(dtype), D.astype(dtype)
    edges = norm_grid((1e-2, 1e4))
    finite = np.abs(D).max(axis=1) < 1e10
    for centre in (None, np.asarray(D[finite].mean(axis=0), dtype=np.float64),
                   np.full(D.shape[1], 0.01)):
        for kw in ({"sums": True}, {"radius": 3.0}):
            a = _norm_stats._around(S, centre, edges**2, **kw)
            b = _norm_stats._around(D, centre, edges**2, **kw)
            np.testing.assert_array_equal(a.counts, b.counts)
            for x, y in ((a.sums, b.sums), (a.units, b.units), (a.fixed, b.fixed)):
                top = max(1.0, np.abs(y).max(initial=0.0))
                np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-10 * top)


@pytest.mark.parametrize("kind", ["csr", "dense"])
def test_a_pass_holds_no_bins_by_d_array_per_block(kind, monkeypatch):
    """The sums per bin of wide rows: the pass's two B × d accumulators and
    at most a block's rows beside them (before review 78 every block made a
    dense 2B × d product, and from sparse rows its dense copy too: four
    more B × d arrays, a 2·10⁴ × 10⁵ CSR fit did not finish in 10 minutes)."""
    n, d = 400, 5000
    rng = np.random.default_rng(0)
    X = sparse.random(n, d, density=0.002, format="csr", random_state=0)
    X.data = rng.uniform(0, 3, X.nnz)
    X = X if kind == "csr" else X.toarray()
    edges = norm_grid((1e-9, 1e9))
    bins_bytes = 2 * 8 * (edges.shape[0] + 1) * d
    centre = np.full(d, 1e-3)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        _norm_stats._around(X, centre, edges**2, sums=True)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    # a block of dense rows is 2 MiB, and its product with the bins it uses
    # (at most its rows) twice that
    assert peak <= bins_bytes + 8 * 2**20, (peak, bins_bytes)


def test_sparse_rows_fuller_than_half_their_width_are_centred_explicitly(monkeypatch):
    """The O(nnz) norm around a centre errs by up to (d + 2 nnz + 3) u of
    itself: within the margin (2d + 16) u only where 2 nnz <= d + 13 (review
    81 measured fuller rows at 0.96 of it). Fuller rows are centred
    explicitly, as the dense rows are."""
    d = 40
    rng = np.random.default_rng(0)
    dense = np.zeros((6, d))
    dense[:3] = rng.uniform(5, 6, (3, d))  # full rows
    dense[3:, :5] = rng.uniform(5, 6, (3, 5))  # sparse ones
    explicit = []
    parts = _norm_stats.dense_parts

    def spy(block, rows, centre):
        explicit.extend(rows)
        return parts(block, rows, centre)

    monkeypatch.setattr(_norm_stats, "dense_parts", spy)
    _norm_stats._around(sparse.csr_matrix(dense), np.full(d, 0.1),
                        norm_grid((1e-2, 1e4)) ** 2, sums=True)
    assert sorted(explicit) == [0, 1, 2]


@pytest.mark.parametrize("kind", ["dense", "csr"])
def test_a_rows_sum_bin_is_its_enlarged_norms_even_on_a_dense_grid(kind):
    """The sums' bin of a row comes from its count's bin, moved on by one
    where the round-off margin crosses an edge (a grid step is far wider
    than the margin): on edges closer than the margin, the rows are still
    placed by a search of their enlarged norms, each summed whole in its
    bin."""
    from sklearn_dppca._stats import _norm_margin

    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 30))
    sq = np.einsum("ij,ij->i", X, X)
    gamma = _norm_margin(X, sq)
    # edges packed around every row's norm, closer than its margin
    sq_edges = np.sort(np.concatenate(
        [sq * (1.0 + gamma * f) for f in (-0.5, 0.2, 0.4, 0.6, 2.0)]))
    rows = sparse.csr_matrix(X) if kind == "csr" else X
    got = _norm_stats._around(rows, None, sq_edges, sums=True)
    index = np.searchsorted(sq_edges, sq * (1.0 + gamma))
    want = np.zeros_like(got.sums)
    np.add.at(want, index, X)
    np.testing.assert_allclose(got.sums, want, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(got.counts, np.bincount(
        np.searchsorted(sq_edges, sq), minlength=sq_edges.shape[0] + 1))
