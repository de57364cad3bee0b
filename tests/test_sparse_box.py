"""A box of ``bounds`` on sparse rows whose zeros it keeps (issue 31; review
103 F2, mend 118): the rows' values clipped a block at a time as the passes
read them (:class:`~sklearn_dppca._blocks.BoxedCSR`), never a copy of every
stored value; the plan counts a block a thread, the peak stays within it on
every path, and the release is that of the rows clipped whole."""

import numpy as np
import pytest
from scipy import sparse

from sklearn_dppca import CoherentPowerPCA, PrivatePCA
from sklearn_dppca._rows import InMemoryRows
from sklearn_dppca.privacy import BudgetAccountant

from .test_matrix_free import traced_peak


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_a_box_that_keeps_sparse_rows_sparse_peaks_within_its_plan(fmt):
    """A box holding 0, uncentred, clips a CSR matrix's stored values: it
    copied the matrix whole, with three temporaries as long as its values,
    none in the plan (review 103 F2: dense-valued CSR peaked at 4.75 times
    it); CSC rows' copy as CSR was not in it either (2 times the plan). Now
    a clipped copy of the values beside the matrix's own indices, counted
    at n d values; the release is the same (the old clip, inline)."""
    n, d = 6000, 300
    rng = np.random.default_rng(0)
    X = sparse.random(n, d, density=1.0, format=fmt, random_state=0,
                      data_rvs=lambda k: rng.standard_normal(k) / np.sqrt(d))
    X.data[::7] *= 400.0  # entries beyond the box
    before = X.copy()

    def pca():
        return PrivatePCA(3, data_norm="auto", bounds=(-2.0, 3.0), center=False,
                          epsilon=30.0, random_state=0,
                          accountant=BudgetAccountant())

    est = pca()
    peak = traced_peak(est, X)
    assert peak <= est._memory_needed(n, d) + est._copy_bytes
    assert (X != before).nnz == 0 and X.format == fmt
    old = X.tocsr(copy=True)  # the box as it was clipped before
    old.data = np.clip(old.data, -2.0, 3.0)
    reference = pca().fit(old)
    np.testing.assert_array_equal(est.components_, reference.components_)
    np.testing.assert_array_equal(est.explained_variance_,
                                  reference.explained_variance_)


@pytest.mark.parametrize("make", [
    lambda: PrivatePCA(5, path="matrix_free", svd_solver="randomized"),
    lambda: PrivatePCA(5, path="noisy_power", svd_solver="randomized"),
    lambda: CoherentPowerPCA(5),
])
def test_a_wide_sparse_box_is_planned_at_a_block_a_thread(make):
    """A box that keeps CSR rows sparse was planned at a clipped copy of
    n d values (issue 31: 16 GB at 10⁵ × 2·10⁴, 80 GB at 10⁵ × 10⁵, where
    1% of the values take 0.2 and 0.8 GB): such fits were refused where
    they ran without the box. The passes clip each block as they read it,
    and the plan counts a block's values a thread, whatever n and d."""
    for n, d in [(100_000, 20_000), (100_000, 100_000)]:
        plans = []
        for bounds in (None, (-1.0, 1.0)):
            est = make().set_params(bounds=bounds, center=False, memory_limit=1e15)
            est._plan_path(n, d, InMemoryRows(sparse.csr_matrix((n, d))))
            plans.append(est._memory_needed(n, d) + est._copy_bytes)
        assert plans[0] < plans[1] <= plans[0] + 300e6, (n, d, plans)


@pytest.mark.parametrize("path", ["dense", "matrix_free", "noisy_power"])
@pytest.mark.parametrize("center, bounds", [(False, (-2.0, 3.0)), (True, (-2.0, 2.0))])
def test_wide_sparse_rows_boxed_as_the_passes_read_them_peak_within_the_plan(
        path, center, bounds):
    """The box's clipped values are a block's a thread (never the n d the
    plan counted, nor a copy of every stored value): wide sparse rows peak
    within a plan that no longer grows with n d, on every path, with the
    release of the rows clipped whole first. The boxed rows keep the fit's
    choice of no raw Gram matrix in the first pass: they formed a d x d one
    on the matrix-free and noisy power paths, which plan none."""
    n, d = 30_000, 1500
    rng = np.random.default_rng(0)
    X = sparse.random(n, d, density=0.01, format="csr", random_state=0,
                      data_rvs=lambda k: 3.0 * rng.standard_normal(k))
    before = X.copy()

    def estimator():
        return PrivatePCA(3, path=path, data_norm="auto", bounds=bounds,
                          center=center, epsilon=30.0, random_state=0,
                          accountant=BudgetAccountant())

    est = estimator()
    peak = traced_peak(est, X)
    assert est._copy_bytes < n * d * 8 / 10  # before: n d values and more
    assert peak <= est._memory_needed(n, d) + est._copy_bytes
    assert (X != before).nnz == 0
    old = X.copy()  # the box as it was clipped before, whole
    old.data = np.clip(old.data, *bounds)
    reference = estimator().fit(old)
    np.testing.assert_array_equal(est.components_, reference.components_)
    np.testing.assert_array_equal(est.mean_, reference.mean_)
    np.testing.assert_array_equal(est.explained_variance_,
                                  reference.explained_variance_)


@pytest.mark.parametrize("path", ["matrix_free", "noisy_power"])
def test_boxed_sparse_rows_form_no_gram_matrix_where_the_path_plans_none(path):
    """The boxed rows keep the fit's choice of no raw Gram matrix in the
    first pass: they formed a d x d one (2 000 x 4 000 CSR: 263 MB) on the
    matrix-free and noisy power paths, which plan none (193 and 126 MB)."""
    n, d = 2000, 4000
    rng = np.random.default_rng(0)
    X = sparse.random(n, d, density=0.005, format="csr", random_state=0,
                      data_rvs=lambda k: 3.0 * rng.standard_normal(k))
    est = PrivatePCA(3, path=path, data_norm="auto", bounds=(-2.0, 3.0),
                     center=False, epsilon=30.0, random_state=0,
                     accountant=BudgetAccountant())
    peak = traced_peak(est, X)
    assert peak <= est._memory_needed(n, d) + est._copy_bytes
    assert peak < d * d * 8  # no d x d matrix


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_boxed_csr_blocks_are_the_rows_clipped_whole(dtype):
    """BoxedCSR's blocks (slices, rows by index, a head, threaded product
    passes) hold the values of the rows clipped whole, in the same order:
    the statistics of every pass are those of the clipped copy, bit for
    bit; the matrix itself is never written nor read whole."""
    from sklearn_dppca._blocks import BoxedCSR, iter_blocks

    X = sparse.random(3000, 400, density=0.05, format="csr", random_state=1,
                      dtype=dtype) * 4.0 - sparse.random(
        3000, 400, density=0.05, format="csr", random_state=2, dtype=dtype) * 4.0
    X = X.astype(dtype)
    X.sum_duplicates()
    lower, upper = -np.linspace(0.5, 2.0, 400), np.full(400, 1.5)
    before = X.copy()
    boxed, whole = BoxedCSR(X, lower, upper), X.copy()  # the box clipped whole
    whole.data = np.clip(whole.data, lower.astype(dtype)[whole.indices],
                         upper.astype(dtype)[whole.indices])
    for rows in (slice(10, 2000), np.array([5, 2999, 7, 7]), slice(0, 0)):
        block = boxed[rows]
        assert block.dtype == dtype
        np.testing.assert_array_equal(block.toarray(), whole[rows].toarray())
    np.testing.assert_array_equal(boxed.head(100)[0:100].toarray(),
                                  whole[:100].toarray())
    for (a, b, got), (c, e, want) in zip(iter_blocks(boxed), iter_blocks(whole)):
        assert (a, b) == (c, e)
        np.testing.assert_array_equal(got.data, want.data)
        np.testing.assert_array_equal(got.indices, want.indices)
    W = np.random.default_rng(0).standard_normal((400, 2, 3))
    sums = []
    for rows in (boxed, whole):
        engine = InMemoryRows(rows)
        engine.largest_norm()
        engine.first_pass(3.0, with_sum=True)
        centred = engine.rows(3.0, np.full(400, 0.01))
        sums.append([engine.first.clipped_sum,
                     *centred.clipped_products(W, np.array([0.5, 2.0]), n_jobs=2)])
    for got, want in zip(*sums):
        np.testing.assert_array_equal(got, want)
    assert (X != before).nnz == 0
    with pytest.raises(TypeError, match="never whole"):
        np.asarray(boxed)
