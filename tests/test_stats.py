"""The clipped statistics equal their definitions on every input layout."""

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from scipy import sparse
from threadpoolctl import threadpool_info

from sklearn_dppca import _stats, _threads
from sklearn_dppca._stats import (
    clipped_gram,
    clipped_sum,
    first_pass,
    max_row_norm,
    row_sq_norms,
)

from .conftest import interrupted_at


def clip(rows, bound):
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return rows * np.where(norms > bound, bound / norms, 1.0)


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 7)) + [0.5, 0, 0, 1, 0, 0, 0]
    X[::50] *= 40.0  # some rows far beyond the bound
    return X


@pytest.mark.parametrize("layout", ["C", "F", "float32", "csr", "csc-as-csr"])
@pytest.mark.parametrize("centre", [False, True])
def test_clipped_gram_and_sum_match_definition(data, layout, centre):
    X = data
    if layout == "F":
        X = np.asfortranarray(X)
    elif layout == "float32":
        X = X.astype(np.float32)
    elif layout == "csr":
        X = sparse.csr_matrix(np.where(np.abs(X) > 1.0, X, 0.0))
    elif layout == "csc-as-csr":
        X = sparse.csc_matrix(np.where(np.abs(X) > 1.0, X, 0.0)).tocsr()
    dense = X.toarray() if sparse.issparse(X) else np.asarray(X, dtype=np.float64)
    bound = 3.0
    mean = np.array([0.4, -0.1, 0.0, 0.9, 0.0, 0.2, 0.0]) if centre else None
    sq = row_sq_norms(X)
    np.testing.assert_allclose(sq, (dense**2).sum(1), rtol=1e-6)

    gram, n_clipped = clipped_gram(X, bound, mean)
    Y = clip(dense - (0.0 if mean is None else mean), bound)
    np.testing.assert_allclose(gram, Y.T @ Y, rtol=1e-9, atol=1e-8)
    assert np.array_equal(gram, gram.T)
    shifted = dense - (0.0 if mean is None else mean)
    assert n_clipped == int((np.linalg.norm(shifted, axis=1) > bound).sum())
    # without the first pass's raw Gram matrix (data_norm="auto"): the same
    # sums from every row scaled at once
    first = first_pass(X, bound, with_sum=False, with_gram=False)
    scratch, n_scratch, total = clipped_gram(X, bound, mean, first, with_sum=True)
    np.testing.assert_allclose(scratch, Y.T @ Y, rtol=1e-9, atol=1e-8)
    np.testing.assert_allclose(total, Y.sum(axis=0), rtol=1e-9, atol=1e-8)
    assert np.array_equal(scratch, scratch.T) and n_scratch == n_clipped

    for total in (first_pass(X, bound).clipped_sum, clipped_sum(X, bound)):
        np.testing.assert_allclose(
            total, clip(dense, bound).sum(0), rtol=1e-9, atol=1e-9
        )


def test_huge_rows_do_not_overflow():
    """Rows whose squared norm overflows float64 are clipped, not turned to inf."""
    X = np.array([[1e200, 1e200], [0.3, 0.4], [-1e300, 0.0]])
    sq = row_sq_norms(X)
    assert max_row_norm(X, sq) == pytest.approx(1e300)
    gram, n_clipped = clipped_gram(X, 1.0)
    for mean in (None, np.array([0.1, -0.2])):
        centred, _ = clipped_gram(X, 1.0, mean)
        assert np.all(np.isfinite(centred))
    Y = np.array([[2**-0.5, 2**-0.5], [0.3, 0.4], [-1.0, 0.0]])
    np.testing.assert_allclose(gram, Y.T @ Y, atol=1e-12)
    assert n_clipped == 2
    np.testing.assert_allclose(first_pass(X, 1.0).clipped_sum, Y.sum(0), atol=1e-12)


def test_inputs_are_not_modified(data):
    X = data.copy()
    X.setflags(write=False)  # read-only: any write would raise
    clipped_gram(X, 2.0, np.ones(7) * 0.1, first_pass(X, 2.0))
    np.testing.assert_array_equal(X, data)


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 64 rows, scans of 16, three threads, corrections in fives.

    So that every multi-block and multi-thread path runs: runs of rows that
    end inside a thread's range, scans that end inside a run, an uneven split.
    """
    import sklearn_dppca._blocks as blocks
    import sklearn_dppca._stats as stats
    import sklearn_dppca._threads as threads

    for module in (stats, blocks):  # the blocks' sizes live in _blocks
        monkeypatch.setattr(module, "_BLOCK_BYTES", 64 * 8 * 7)
        monkeypatch.setattr(module, "_MIN_BLOCK_ROWS", 64)
    monkeypatch.setattr(stats, "_SCAN_BYTES", 16 * 8 * 7)
    monkeypatch.setattr(stats, "_RUN_BYTES", 100 * 8 * 7)
    monkeypatch.setattr(stats, "_RUN_ROWS_PER_FEATURE", 1)
    monkeypatch.setattr(threads, "_MIN_PARALLEL_BYTES", 0)
    monkeypatch.setattr(stats, "_MIN_CORRECTION_ROWS", 5)
    monkeypatch.setattr(threads._SINGLE_THREADED_BLAS, "n_threads", lambda: 3)


@pytest.mark.parametrize("layout", ["C", "F", "float32", "csr"])
@pytest.mark.parametrize("shift", [0.0, 2.5])
def test_multi_block_paths_match_definition(small_blocks, layout, shift):
    """Many blocks, a mean far from 0, rows in (C, 8C] and beyond 8C, sorted rows.

    The first block's clipped mean (the direction used to skip rows that the
    centring cannot clip) points away from the final mean, and the bound must
    still never skip a clipped row.
    """
    rng = np.random.default_rng(7)
    X = rng.normal(size=(1500, 7))
    X[:64] += 3.0 * np.eye(7)[2]  # the first block leans another way
    X += shift * np.eye(7)[0]
    X[5::97] *= 3.0  # moderately clipped rows
    X[9::211] *= 1e3  # rows beyond 8C
    dense = X
    if layout == "float32":
        X = X.astype(np.float32)
        dense = X.astype(np.float64)
    elif layout == "csr":
        X = sparse.csr_matrix(X)
    elif layout == "F":
        X = np.asfortranarray(X)
    bound = 2.0
    first = first_pass(X, bound)
    np.testing.assert_allclose(first.sq_norms, (dense**2).sum(1), rtol=1e-12)
    np.testing.assert_array_equal(row_sq_norms(X), first.sq_norms)
    np.testing.assert_allclose(
        first.clipped_sum, clip(dense, bound).sum(0), rtol=1e-9, atol=1e-9
    )
    mean = first.clipped_sum / len(dense) + 0.1
    gram, n_clipped = clipped_gram(X, bound, mean, first)
    Y = clip(dense - mean, bound)
    np.testing.assert_allclose(gram, Y.T @ Y, rtol=1e-9, atol=1e-8)
    assert n_clipped == int((np.linalg.norm(dense - mean, axis=1) > bound).sum())


@pytest.mark.parametrize("container", [sparse.csr_matrix, sparse.csr_array])
def test_csr_blocks_are_read_only_views_of_the_rows(small_blocks, container):
    """A pass over float64 CSR rows copies none of them (SciPy's row slice
    would) and cannot write into them; the blocks are the slices, and the
    caller's matrix stays as it was, writeable."""
    rng = np.random.default_rng(3)
    X = container(sparse.random(1000, 40, density=0.1, random_state=rng))
    data, indices = X.data.copy(), X.indices.copy()
    blocks = list(_stats.iter_blocks(X))
    assert len(blocks) > 2 and blocks[-1][1] == X.shape[0]
    for start, stop, block in blocks:
        assert type(block) is type(X) and block.shape == (stop - start, 40)
        assert np.shares_memory(block.data, X.data)
        assert np.shares_memory(block.indices, X.indices)
        assert (block != X[start:stop]).nnz == 0
        with pytest.raises(ValueError, match="read-only"):
            block.data *= 2.0
    np.testing.assert_array_equal(X.data, data)
    np.testing.assert_array_equal(X.indices, indices)
    assert X.data.flags.writeable and X.indices.flags.writeable
    X32 = X.astype(np.float32)  # other dtypes: float64 copies, as before
    assert all(not np.shares_memory(b.data, X32.data)
               for _, _, b in _stats.iter_blocks(X32))


def _blas_threads():
    libs = threadpool_info()
    return [lib["num_threads"] for lib in libs if lib["user_api"] == "blas"]


def test_a_dask_chunks_pass_runs_in_its_task_alone(monkeypatch):
    """A float32 chunk is read by first_pass in Dask's task: with 128 MiB
    of rows or more it started threads of ours inside each of Dask's, each
    with two d × d matrices, which the plan for a Dask array does not count
    (review 102 F1's follow-up). The threshold is lowered so that small
    chunks are read as large ones are."""
    dask = pytest.importorskip("dask")
    import dask.array as da

    from sklearn_dppca import BudgetAccountant, PrivatePCA

    monkeypatch.setattr(_threads, "blas_threads", lambda: 4)
    monkeypatch.setattr(_threads, "_MIN_PARALLEL_BYTES", 1)
    seen = []
    mapped = _stats._map_ranges

    def spy(function, n_rows, n_threads):
        seen.append((_threads._IN_CHUNK_TASK.get(), n_threads))
        return mapped(function, n_rows, n_threads)

    monkeypatch.setattr(_stats, "_map_ranges", spy)
    X = np.random.default_rng(0).normal(size=(4000, 60)).astype(np.float32) / 10
    assert _threads._n_threads(X) == 4  # in memory: threads of ours
    chunked = da.from_array(X, chunks=(1000, 60))
    with dask.config.set(scheduler="threads", num_workers=2):
        PrivatePCA(3, data_norm=1.0, random_state=0, path="dense",
                   accountant=BudgetAccountant()).fit(chunked)
    in_tasks = [threads for in_task, threads in seen if in_task]
    assert in_tasks and set(in_tasks) == {1}


def test_parallel_pass_restores_the_blas_threads(small_blocks, data):
    """BLAS runs single-threaded inside the pass, and is given back after it,
    also when the pass fails on its data."""
    before = _blas_threads()
    first_pass(data, 3.0)
    assert _blas_threads() == before
    bad = data.copy()
    bad[2000, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        first_pass(bad, 3.0)
    assert _blas_threads() == before


def test_concurrent_passes_share_one_blas_limit(small_blocks, data):
    """Fits in concurrent threads: the first in limits BLAS, the last out restores
    it (overlapping limiters would restore each other's limit), and each gets
    the same result as alone."""
    before = _blas_threads()
    alone = first_pass(data, 3.0)
    with ThreadPoolExecutor(4) as pool:  # passes of different lengths overlap
        passes = list(pool.map(lambda n: first_pass(data[:n], 3.0), [300, 3000] * 8))
    for result in passes[1::2]:
        np.testing.assert_array_equal(result.gram, alone.gram)
        np.testing.assert_array_equal(result.clipped_sum, alone.clipped_sum)
    assert _blas_threads() == before


def test_overlapping_blas_limits_end_with_the_last():
    """A fit that ends while another still runs leaves BLAS single-threaded; the
    last one out restores the original thread counts (not the limited ones it
    found on entering)."""
    from sklearn_dppca._threads import _SINGLE_THREADED_BLAS as single

    before = _blas_threads()
    with single:
        single.__enter__()  # a second fit starts before the first ends
        assert set(_blas_threads()) == {1}
    assert set(_blas_threads()) == {1}  # the second one still runs
    single.__exit__(None, None, None)
    assert _blas_threads() == before


@pytest.fixture
def tiny_buffers(monkeypatch):
    """Blocks, runs and buffers of a few kB, so that 2 MB of data is "big"."""
    import sklearn_dppca._blocks as blocks
    import sklearn_dppca._stats as stats

    for name, value in [("_BLOCK_BYTES", 2**16), ("_MIN_BLOCK_ROWS", 64),
                        ("_RUN_BYTES", 2**16), ("_SCAN_BYTES", 2**14),
                        ("_MIN_CORRECTION_ROWS", 64)]:
        monkeypatch.setattr(stats, name, value)
        if hasattr(blocks, name):  # the blocks' sizes live in _blocks
            monkeypatch.setattr(blocks, name, value)


def _peak_memory(function):
    import tracemalloc

    tracemalloc.start()
    try:
        result = function()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_rows_beyond_8c_do_not_copy_the_data(tiny_buffers):
    """A row of huge norm is left out of the raw Gram matrix without copying
    all the other rows: at most a block of them at a time."""
    X = np.random.default_rng(0).normal(size=(100_000, 10))
    X[500] *= 1e6
    first, peak = _peak_memory(lambda: first_pass(X, 5.0))
    assert peak < 0.3 * X.nbytes
    kept = np.delete(X, 500, axis=0)
    np.testing.assert_allclose(first.gram, kept.T @ kept, rtol=1e-12)


def test_memory_does_not_grow_with_the_clipped_rows(tiny_buffers):
    """float32 rows (copied block by block), most of them clipped once
    centred: memory stays within the blocks and correction buffers."""
    rng = np.random.default_rng(1)
    X = (rng.normal(size=(40_000, 50)) + 3.0 * np.eye(50)[0]).astype(np.float32)
    first = first_pass(X, 7.0)
    mean = first.clipped_sum / len(X) + 0.3  # off-centre: most rows clipped
    (gram, n_clipped), peak = _peak_memory(lambda: clipped_gram(X, 7.0, mean, first))
    assert n_clipped > 0.5 * len(X)
    assert peak < 0.3 * X.nbytes
    Y = clip(X.astype(np.float64) - mean, 7.0)
    np.testing.assert_allclose(gram, Y.T @ Y, rtol=1e-9)


@pytest.mark.parametrize("layout", ["C", "float32", "csr"])
def test_clipped_products_match_definition(layout):
    """Σ a Clip_R(aᵀW) with a = clip_C(x − m)/C, computed without centring the
    rows, equals its definition, also for rows whose products overflow, and on
    the second call (which reuses the clipping scales)."""
    from sklearn_dppca._rows import CentredRows

    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 6)) + [2.0, 0, 0, 0, 0, 0]
    X[7] *= 1e3
    if layout != "float32":
        X[11, :2] = 1e308  # ‖x‖² and x W overflow
    dense = X
    if layout == "float32":
        X = X.astype(np.float32)
        dense = X.astype(np.float64)
    elif layout == "csr":
        X = sparse.csr_matrix(X)
    bound, mean = 2.5, np.array([1.8, 0.1, 0, 0, -0.2, 0])
    rows = CentredRows(X, bound, mean, row_sq_norms(X))
    shifted = dense - mean
    top = np.abs(shifted).max(axis=1, keepdims=True)  # norms without overflow
    norms = top * np.linalg.norm(shifted / top, axis=1, keepdims=True)
    A = shifted * np.minimum(1.0 / bound, 1.0 / norms)
    W = rng.normal(size=(6, 2, 3))
    W[:2] = 1.5
    radii = np.array([0.5, 50.0])
    for _ in range(2):
        got, counts = rows.clipped_products(W, radii)
        for j, R in enumerate(radii):
            P = A @ W[:, j]
            norms = np.linalg.norm(P, axis=1, keepdims=True)
            expected = A.T @ (P * np.minimum(1.0, R / norms))
            np.testing.assert_allclose(got[:, j], expected, rtol=1e-9, atol=1e-12)
            assert counts[j] == int((norms[:, 0] > R).sum())


@pytest.mark.parametrize("kernel", [True, False])
@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_transposed_products_add_into_the_sum(kernel, index, monkeypatch):
    """``total += blockᵀ products`` for a CSR block: by SciPy's kernel in
    place, or (a SciPy without it) by bands; dense blocks by BLAS."""
    from sklearn_dppca import _rows

    calls = []
    if kernel:  # counted, so that the test knows which way ran
        real = _rows._csc_matvecs
        monkeypatch.setattr(_rows, "_csc_matvecs",
                            lambda *args: calls.append(1) or real(*args))
    else:
        monkeypatch.setattr(_rows, "_csc_matvecs", None)
    monkeypatch.setattr(_rows, "_SCAN_BYTES", 8 * 3 * 40)  # bands of 40 features
    rng = np.random.default_rng(0)
    block = sparse.random(300, 130, density=0.05, format="csr", random_state=1)
    block.indices = block.indices.astype(index)
    block.indptr = block.indptr.astype(index)
    products = rng.normal(size=(3, 300)).T  # not C-contiguous
    total = rng.normal(size=(130, 3))
    expected = total + block.toarray().T @ products
    _rows._add_transposed_product(total, block, products)
    np.testing.assert_allclose(total, expected, rtol=1e-12, atol=1e-12)
    assert len(calls) == kernel
    dense_total = rng.normal(size=(130, 3))
    expected = dense_total + block.toarray().T @ products
    _rows._add_transposed_product(dense_total, block.toarray(), products)
    np.testing.assert_allclose(dense_total, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("far", [0.0, 30.0])
def test_clipped_rows_have_true_norm_at_most_the_bound(dtype, far):
    # rows at the bound to within rounding, around a centre up to 30 bounds
    # away (FAR_MEAN = 32 keeps centring by expansion within this): every
    # scaled row, computed exactly from the float scale, has norm <= C
    from fractions import Fraction

    from sklearn_dppca._stats import _clip_scales, _sq_norms

    rng = np.random.default_rng(3)
    d, bound = 13, 1.7
    mean = (rng.normal(size=d) * far * bound / np.sqrt(d)).astype(dtype)
    directions = rng.normal(size=(400, d))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    wiggle = 1.0 + rng.uniform(-4, 4, size=(400, 1)) * np.finfo(dtype).eps
    block = (mean + directions * bound * wiggle).astype(dtype)
    sq = _sq_norms(block.astype(np.float64) if dtype == np.float64 else block)
    scales = _clip_scales(block, sq, bound, None if far == 0.0 else mean)
    limit = Fraction(bound) ** 2
    for row, s in zip(block, scales):
        centred = [Fraction(float(v)) - Fraction(float(m)) for v, m in zip(row, mean)]
        assert Fraction(float(s)) ** 2 * sum(c * c for c in centred) <= limit
    # a margin of about γ(1 + far)², not a different bound
    gamma = (d + 8) * np.finfo(dtype).eps
    assert scales.min() > 1 - 8 * gamma * (1 + far) ** 2


# ------------------------------------- issue 31: d x d matrices, at most two
def test_symmetric_and_outer_updates_work_in_place():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(301, 301))
    expected = (A + A.T) / 2.0
    out = _stats._symmetric(A)
    assert out is A and np.array_equal(A, A.T)
    np.testing.assert_allclose(A, expected, rtol=0, atol=1e-15)
    x, y = rng.normal(size=(2, 301))
    before = A.copy()
    assert _stats.add_outer(A, x, y, -3.0) is A
    np.testing.assert_allclose(A, before - 3.0 * np.outer(x, y), rtol=1e-14,
                               atol=1e-14)


@pytest.mark.parametrize("center, n", [(True, 600), (False, 600), (True, 4200)])
def test_a_wide_fit_holds_about_two_d_by_d_matrices(center, n):
    """The dense path on n × 2 500 rows (wide: the Gram matrix formed once,
    after the bound and the centre): the weighted pass's Gram matrix and its
    product buffer beside a block of scaled rows, the corrections added into
    it, the symmetrisation in place, then one matrix with its noise added in
    place and the top k by the randomized solver (before: above four). The
    fit forces path="dense": "auto" took the matrix-free path here, and the
    test measured that path (review 102 F2). At 4 200 rows the previous
    block's scaled copy was kept while the next was made: two blocks of
    2 048 rows, 3.6 d² at 6 000 rows against 2.8."""
    import tracemalloc

    from sklearn_dppca import PrivatePCA
    from sklearn_dppca._blocks import _MIN_BLOCK_ROWS, _block_rows

    rng = np.random.default_rng(0)
    d = 2500
    X = rng.normal(size=(n, d))
    bound = float(np.linalg.norm(X, axis=1).max())
    PrivatePCA(5, data_norm=bound).fit(X[:, :50])  # imports, outside the count
    tracemalloc.start()
    try:
        pca = PrivatePCA(5, data_norm=bound, center=center, path="dense").fit(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert pca.path_ == "dense" and pca._fit_svd_solver == "randomized"
    # the rows of _weighted_sums's blocks, and a few vectors of n or d floats
    block = min(n, max(_MIN_BLOCK_ROWS, _block_rows(d) // 2))
    assert peak <= 8 * (2 * d * d + block * d + 16 * (n + d)), peak / 8 / d**2


@pytest.mark.parametrize("dtype, huge, C", [("float32", 3e38, 6.7e-7),
                                             ("float64", 1e308, 7.9e-16),
                                             ("float64", 1.7e308, 1e-15)])
def test_a_subnormal_scale_keeps_the_row_in_the_ball(dtype, huge, C):
    """C / ‖x‖ for a row of 1e308 and C = 1e-15 is subnormal: its roundings
    erred by 25%, and the scaled row's true norm was 1.25 C (an outside
    review of the Array API engine, which shares the rule)."""
    from fractions import Fraction

    from sklearn_dppca._stats import _clip_scales, _sq_norms

    X = np.array([[huge, huge / 3], [0.5 * C, 0.0]], dtype=dtype)
    scales = _clip_scales(X, _sq_norms(X), C)
    rows = X * scales[:, None].astype(dtype)
    exact = [math.sqrt(sum(Fraction(float(v)) ** 2 for v in row)) for row in rows]
    assert max(exact) <= C and scales[1] == 1.0


@pytest.mark.parametrize("layout", ["dense", "csr"])
def test_clipped_products_of_huge_rows_keep_their_sensitivity(layout):
    """A row of norm 1.7e308 whose product is clipped to a small R: its
    term's q_i = t_i Clip(y_i) was subnormal, rounded by up to half a
    subnormal step, which x_i multiplied back: neighbours' sums differed
    by 3.24 R for a stated 2 R (an outside review). Those terms are now
    formed from normal numbers."""
    from fractions import Fraction

    from sklearn_dppca._rows import CentredRows

    angle = np.deg2rad(80.0)
    C = 1e10
    huge = 1.7e308 * np.array([np.cos(angle), np.sin(angle)])
    other = C * np.array([np.cos(-angle), np.sin(-angle)])
    filler = np.array([0.3 * C, 0.1 * C])
    W = np.array([[[1.0]], [[0.0]]])

    def total(rows, R):
        rows = sparse.csr_matrix(rows) if layout == "csr" else rows
        engine = CentredRows(rows, C, None, row_sq_norms(rows))
        return engine.clipped_products(W, [R])[0][:, 0, :]

    worst = 0.0
    for R in np.geomspace(1e-17, 1e-14, 40):
        diff = (total(np.vstack([huge, filler]), R)
                - total(np.vstack([other, filler]), R))
        exact = sum(Fraction(float(v)) ** 2 for v in diff.ravel()) / Fraction(R) ** 2
        worst = max(worst, math.sqrt(exact))
    assert worst <= 2.0


@pytest.mark.parametrize("caller", ["__enter__", "_heal"])
def test_an_interrupted_blas_limit_heals(small_blocks, data, monkeypatch, caller):
    """A Ctrl-C inside the limit or the restore of BLAS's threads left them
    at one for the rest of the process: the next pass read 1 as the limit to
    restore, and the next fit saw one core, so never took the threaded pass
    that would have mended it. The counts are recorded before any change,
    and the next look at the threads restores them."""
    before = _blas_threads()
    with pytest.raises(KeyboardInterrupt), interrupted_at("set_num_threads", caller):
        first_pass(data, 3.0)
    monkeypatch.delattr(_threads._SINGLE_THREADED_BLAS, "n_threads")  # the real one
    assert _threads.blas_threads() == min(before)
    assert _blas_threads() == before
