"""Issue 34: the passes of ``data_norm="auto"`` made cheaper at small n
(the read's squared norms kept for the Gram's first pass) release bit for bit
what they released before. Checked against a slow reference of
:func:`~sklearn_dppca._norm_stats._around` written here from its contract:
the same blocks, each centred into a new array, its rows added to their
bins one at a time in row order (the order of the sparse indicator product),
the blocks' sums added to the pass's accumulators; and whole fits with the
reference in place of the pass, every fitted float compared exactly."""

import warnings

import numpy as np
import pytest
from scipy import sparse

from sklearn_dppca import BudgetAccountant, PrivatePCA, _norm_stats
from sklearn_dppca._norm_plan import norm_grid
from sklearn_dppca._stats import _norm_margin, _sq_norms, row_sq_norms


def reference_around(X, centre, sq_edges, sums=False, radius=None, sq=None,
                     keep=None):
    """Slow :func:`_around` for dense rows (and sparse ones uncentred); the
    norms it keeps (``keep``) are computed on their own, in other blocks
    (:func:`row_sq_norms`), as the Gram's first pass computed them before."""
    if keep is not None and (centre is None or not centre.any()):
        keep[:] = row_sq_norms(X)
    if radius is not None or (sparse.issparse(X) and centre is not None
                              and centre.any()):
        return _original(X, centre, sq_edges, sums, radius, sq)
    n_bins, d = sq_edges.shape[0] + 1, X.shape[1]
    counts = np.zeros(n_bins, dtype=np.int64)
    totals, units = np.zeros((n_bins, d)), np.zeros((n_bins, d))
    raw = centre is None or not centre.any()
    for block, block_sq in _norm_stats._blocks(X, sq, norms=raw):
        rows = block.toarray() if sparse.issparse(block) else block
        if raw:
            rows_sq = block_sq
        else:
            rows = rows - centre  # a new array a block
            rows_sq = _sq_norms(rows)
        counts += np.bincount(np.searchsorted(sq_edges, rows_sq), minlength=n_bins)
        if not sums:
            continue
        enlarged = rows_sq * (1.0 + _norm_margin(rows, rows_sq))
        index = np.searchsorted(sq_edges, enlarged)
        with np.errstate(divide="ignore"):
            scale = np.where(enlarged == 0.0, 0.0, 1.0 / np.sqrt(enlarged))
        part, part_units = np.zeros((n_bins, d)), np.zeros((n_bins, d))
        for i in range(rows.shape[0]):  # one row at a time, in order
            part[index[i]] += rows[i]
            part_units[index[i]] += scale[i] * rows[i]
        totals += part
        units += part_units
    if not sums:
        totals = units = np.zeros(0)
    return _norm_stats.Around(counts, totals, units, np.zeros(0))


_original = _norm_stats._around


def _data(kind, shift, n=6000, d=100, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.2, 2.0, d) + shift
    if kind == "csr":
        X = sparse.random(n, d, density=0.05, format="csr", random_state=seed,
                          data_rvs=rng.standard_normal) * 3.0
    if kind == "fortran":  # float64 views of columns: strided rows
        X = np.asfortranarray(X)
    return X


@pytest.mark.parametrize("kind", ["dense", "csr", "float32", "fortran"])
@pytest.mark.parametrize("centred", [False, True])
def test_around_equals_reference_bitwise(kind, centred):
    X = _data("dense" if kind == "float32" else kind, 4.0 if centred else 0.0)
    if kind == "float32":
        X = X.astype(np.float32)
    edges = norm_grid((1e-2, 1e3))
    centre = None
    if centred and kind != "csr":
        centre = np.asarray(X[:50].mean(axis=0)).ravel() + 0.25
    sq = _sq_norms(X)
    if kind != "float32":  # several blocks of 2 621 rows, the last short
        assert X.shape[0] > 2 * _norm_stats._scan_rows(X.shape[1])
    got = _norm_stats._around(X, centre, edges**2, sums=True, sq=sq)
    want = reference_around(X, centre, edges**2, sums=True, sq=sq)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert got.counts.sum() == X.shape[0]
    assert np.count_nonzero(got.counts) > 3  # rows in several bins


def _fitted_floats(est):
    return {k: np.asarray(v) for k, v in vars(est).items()
            if k.endswith("_") and not k.startswith("_")
            and np.asarray(v).dtype.kind == "f"}


@pytest.mark.parametrize("kind,shape,shift", [
    ("dense", (6000, 100), 0.0), ("dense", (6000, 100), 100.0),
    ("dense", (3000, 7), 5.0), ("csr", (6000, 300), 0.0),
    ("fortran", (6000, 100), 0.0), ("fortran", (3000, 7), 5.0)])
@pytest.mark.parametrize("center", [True, False])
def test_auto_fit_equals_reference_fit_bitwise(monkeypatch, kind, shape, shift,
                                               center):
    X = _data(kind, shift, *shape, seed=3)
    before = X.copy()

    def fit():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return PrivatePCA(3, epsilon=1.0, delta=1e-6, random_state=7,
                              data_norm="auto", center=center,
                              accountant=BudgetAccountant()).fit(X)

    got = _fitted_floats(fit())
    calls = []

    def reference(*args, **kwargs):
        calls.append(args[1] is not None)
        return reference_around(*args, **kwargs)

    monkeypatch.setattr(_norm_stats, "_around", reference)
    want = _fitted_floats(fit())
    assert calls and any(calls) == center  # the passes, centred
    assert got.keys() == want.keys() and "components_" in got
    for key in got:
        assert np.array_equal(got[key], want[key], equal_nan=True), key
    assert (X != before).nnz == 0 if kind == "csr" else np.array_equal(X, before)


def test_read_norms_kept_for_the_first_pass(monkeypatch):
    """In memory the read pass's squared norms serve the Gram's first pass:
    every row's norm is computed once around the origin (and once around
    each mean step's centre), not twice."""
    from sklearn_dppca import _stats

    rows, norms = [0], _stats._sq_norms

    def counted(block):
        rows[0] += block.shape[0]
        return norms(block)

    monkeypatch.setattr(_stats, "_sq_norms", counted)
    monkeypatch.setattr(_norm_stats, "_sq_norms", counted)
    X = _data("dense", 0.0, n=20000, d=100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = PrivatePCA(3, epsilon=1.0, delta=1e-6, random_state=7,
                         data_norm="auto", center=False,
                         accountant=BudgetAccountant()).fit(X)
    assert est.mean_ is None or not np.any(est.mean_)
    assert rows[0] < 1.5 * X.shape[0]  # 2n before: the read's and the Gram's


@pytest.mark.parametrize("dtype,order", [(np.float32, "C"), (np.float32, "F"),
                                         (np.int64, "C")])
def test_cast_rows_come_in_the_parts_of_whole_blocks(monkeypatch, dtype, order):
    """Rows not float64 are cast a part at a time (mend 116: a whole block's
    cast, held while the next was cast, peaked at two blocks), the parts
    those the passes read before from the cast blocks of ``iter_blocks``, in
    the same values: blocks of 300 rows here, parts of 70."""
    from sklearn_dppca import _blocks, _stats

    monkeypatch.setattr(_blocks, "_BLOCK_BYTES", 8 * 40 * 300)
    monkeypatch.setattr(_blocks, "_MIN_BLOCK_ROWS", 1)
    monkeypatch.setattr(_stats, "_SCAN_BYTES", 8 * 40 * 70)
    rng = np.random.default_rng(0)
    X = np.asarray(rng.normal(size=(1000, 40)) * 50, dtype=dtype, order=order)
    want = [(block[a:a + 70], _sq_norms(block[a:a + 70]))
            for _, _, block in _blocks.iter_blocks(X)
            for a in range(0, block.shape[0], 70)]
    sq = _sq_norms(np.asarray(X, dtype=np.float64))
    for norms in (None, sq):
        got = list(_norm_stats._blocks(X, norms))
        assert [p.shape[0] for p, _ in got] == [p.shape[0] for p, _ in want]
        assert [p.shape[0] for p, _ in got][:6] == [70] * 4 + [20, 70]
        start = 0
        for (p, p_sq), (q, q_sq) in zip(got, want):
            assert p.dtype == np.float64 and p.flags.c_contiguous
            assert np.array_equal(p, q)  # given norms: their slice
            q_sq = q_sq if norms is None else norms[start:start + q.shape[0]]
            assert np.array_equal(p_sq, q_sq)
            start += q.shape[0]
        assert start == X.shape[0]


@pytest.mark.parametrize("d", [7, 100, 333])
def test_kept_norms_equal_row_sq_norms_in_either_layout(d):
    """The norms the read keeps are row_sq_norms' bit for bit, as the Gram's
    first pass computed them before they were kept: on a column-major
    float64 X they were the sums over its strided views, which differ in
    the last bits (review 104 F4: fits changed bits since 9cf455b)."""
    X = np.asfortranarray(np.random.default_rng(0).standard_normal((5000, d)) * 3 + 1)
    keep = np.empty(X.shape[0])
    for _ in _norm_stats._blocks(X, None, keep=keep):
        pass
    assert np.array_equal(keep, row_sq_norms(X))
