"""Memory plans that count what runs at large k: the dense path's truncated
solver (its d × p blocks) and the threads of a pass over the rows (each
holding its block's products and its part of the sum), measured as the peak
RSS of a fit in a fresh interpreter; and the threaded pass's own threads."""

import os

import joblib
import numpy as np
import pytest

from sklearn_dppca import CoherentPowerPCA, PrivatePCA
from sklearn_dppca._rows import CentredRows, InMemoryRows
from sklearn_dppca._stats import first_pass

from .test_matrix_free import traced_peak

_PEAK = """
import json, re, sys, warnings
import numpy as np
import sklearn_dppca
import sklearn_dppca._blocks as blocks
from sklearn_dppca import BudgetAccountant
warnings.simplefilter("ignore")
def kib(what):
    status = open("/proc/self/status").read()
    return 1024 * int(re.search(what + r":\\s+(\\d+)", status).group(1))
name, d, n, k, rows, params = sys.argv[1:7]
d, n, k, rows = int(d), int(n), int(k), int(rows)
if rows:  # blocks of `rows` rows, the passes' and the plan's
    blocks._BLOCK_BYTES, blocks._MIN_BLOCK_ROWS = 8 * d * rows, rows
X = np.random.default_rng(0).normal(size=(n, d))
est = getattr(sklearn_dppca, name)(
    n_components=k, data_norm=float(np.linalg.norm(X, axis=1).max()),
    random_state=0, epsilon=3.0, accountant=BudgetAccountant(), **json.loads(params))
np.linalg.eigh(np.eye(300))[1] @ np.eye(300)  # LAPACK's and BLAS's buffers
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
start = kib("VmRSS")
est.fit(X)
print(kib("VmHWM") - start, est._memory_needed(n, d, est._fit_path), est._fit_path)
"""


def _peak(name, d, n, k, params, rows=0):
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _PEAK, name, str(d), str(n), str(k), str(rows),
         json.dumps(params)], check=True, capture_output=True, text=True).stdout
    peak, plan, path = out.split()
    return int(peak), float(plan), path


_PEAKS = pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"),
                            reason="resets the peak RSS with /proc/self/clear_refs")


@_PEAKS
@pytest.mark.parametrize("name", ["PrivatePCA", "ComplexGaussPCA"])
def test_a_truncated_solvers_fit_peaks_within_its_plan(name):
    """The dense path counted the release alone beside a truncated solver:
    its d × p blocks (ten at the peak) were not counted, and a fit of
    k = 550 of 700 features peaked at 9.3 d² against a plan of 7.0
    (ComplexGaussPCA, complex blocks: 19.9 against 8.0)."""
    d = 700
    params = {"path": "dense", "svd_solver": "randomized"}
    peak, plan, path = _peak(name, d, 2 * d, 550, params)
    assert path == "dense"
    assert peak <= plan, (peak / 8 / d**2, plan / 8 / d**2)



def _blas_after_plan(monkeypatch, est, blas):
    """Once ``est`` has planned its fit, BLAS reports 8 threads again (the
    other fit's pass, which made it report ``blas[0]`` while planning,
    ended): the race a fit's one planned thread count closes."""
    plan_path = est._plan_path

    def planned(*args):
        plan_path(*args)
        blas[0] = 8

    monkeypatch.setattr(est, "_plan_path", planned)

def test_the_plan_counts_the_solvers_blocks_by_k():
    """Few components: the Gram pass's two matrices as before; near d: the
    release and ten d × p blocks (p = k + n_oversamples)."""
    few, many = PrivatePCA(10), PrivatePCA(1100, svd_solver="randomized")
    assert few._dense_release(3000, 1500) < 2
    assert many._dense_release(3000, 1500) == pytest.approx(1 + 10 * 1110 / 1500)
    every = PrivatePCA(1100, svd_solver="full")
    assert every._dense_release(3000, 1500) == 6


@_PEAKS
@pytest.mark.parametrize("path", ["noisy_power", "dense"])
def test_a_threaded_fit_peaks_within_its_plan(path):
    """CoherentPowerPCA(n_jobs=4): each pass ran in a fresh pool of joblib's
    threads, and each thread's products and part (allocated in its thread)
    stayed in an allocator's arena of its own, up to 8 a core: the noisy
    power path peaked at 19.9–21.1 d² against a plan of 9.9 (blocks of 800
    rows, d = 1 000, k = 700), and grew with the passes. Threads of ours now
    write into arrays of the calling thread's, and the plan counts each
    thread's (n_jobs' count, not BLAS's)."""
    d = 1000
    params = {"path": path, "clip_radius": 0.1, "n_iter": 3, "n_jobs": 4}
    peak, plan, taken = _peak("CoherentPowerPCA", d, 4000, 700, params, rows=800)
    assert taken == path
    assert peak <= plan, (peak / 8 / d**2, plan / 8 / d**2)


def test_the_plan_counts_the_threads_of_n_jobs():
    """A pass's threads are n_jobs' (at most one a block of dense rows),
    each with its part and its block's products: more threads, a larger
    plan, by those arrays only (uncentred: rows no far private mean moves).
    Centred, each thread also holds a float64 copy of its block, which a
    far private mean makes (mend 101: ``MovedRows``; its first pass runs in
    as many threads)."""
    n, d, k = 9000, 2000, 200  # blocks of 2 097 rows: five
    plans = {}
    for center in (False, True):
        for jobs in (1, 2, 4, 8):
            est = CoherentPowerPCA(k, path="noisy_power", data_norm=1.0, n_jobs=jobs,
                                   clip_radius=0.1, n_iter=1, epsilon=1.0,
                                   center=center)
            est._plan_path(n, d, InMemoryRows(np.zeros((1, d))))  # reads no row
            plans[center, jobs] = (est._jobs(n, d),
                                   est._memory_needed(n, d, "noisy_power"))
    assert [plans[False, j][0] for j in (1, 2, 4, 8)] == [1, 2, 4, 5]
    p, b = k + 10, 2097  # each thread: 2 d × p and 2 b × p (the last block's rows)
    assert plans[False, 4][1] - plans[False, 2][1] == pytest.approx(
        16 * (2 * d * p + 2 * b * p))
    assert plans[False, 8][1] - plans[False, 4][1] == pytest.approx(
        16 * (d * p + (n - 4 * b) * p))
    # centred: a moved block a thread of n_jobs' (at most one a block)
    for few, many in ((1, 2), (2, 4), (4, 8)):
        blocks = min(many, 5) - min(few, 5)
        assert plans[True, many][1] - plans[True, few][1] == pytest.approx(
            plans[False, many][1] - plans[False, few][1] + 8 * d * b * blocks)


def test_a_threaded_pass_runs_in_threads_whatever_joblibs_backend():
    """The pass ran in joblib's Parallel(prefer="threads"), which a user's
    backend overrides: under loky the first pass computed the rows' scales
    in worker processes, and the next pass clipped with uninitialised ones
    (differences of 1.4 at R = 0.05)."""
    import sklearn_dppca._blocks as blocks

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 50))
    W = rng.normal(size=(50, 1, 3)) * 0.1

    def two_passes(n_jobs):
        norms = first_pass(X, 5.0, with_sum=False).sq_norms
        rows = CentredRows(X, 5.0, X.mean(0), norms)
        rows.clipped_products(W, np.array([0.05]), n_jobs)
        return rows.clipped_products(W, np.array([0.05]), n_jobs)[0]

    expected = two_passes(None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(blocks, "_BLOCK_BYTES", 8 * 50 * 100)
        patch.setattr(blocks, "_MIN_BLOCK_ROWS", 100)
        with joblib.parallel_config(backend="loky"):
            threaded = two_passes(2)
    np.testing.assert_allclose(threaded, expected, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name, data_norm", [
    ("PrivatePCA", 0.9), ("PrivatePCA", "auto"), ("ComplexGaussPCA", 0.9),
    ("CoherentPowerPCA", 0.9)])
def test_a_threaded_gram_pass_peaks_within_its_plan(monkeypatch, name, data_norm):
    """Each thread of the dense path's first pass sums a raw Gram matrix of
    its own with a product buffer (each thread of data_norm="auto"'s
    weighted pass too): two d × d matrices a thread, which the plan counted
    as two in all (20 000 × 1 500 rows in eight threads peaked at 16.0 d²
    against a plan of 8.7; review 102). Eight threads, as BLAS would report
    on eight cores, on rows read in threads as 128 MiB or more are."""
    import sklearn_dppca
    from sklearn_dppca import BudgetAccountant, _paths, _threads

    monkeypatch.setattr(_threads, "blas_threads", lambda: 8)
    monkeypatch.setattr(_paths, "blas_threads", lambda: 8)
    monkeypatch.setattr(_threads, "_MIN_PARALLEL_BYTES", 1)
    # 1 500 rows a thread: long enough products that the eight threads'
    # matrices are alive together on two cores (with 200 rows a thread the
    # first threads could finish before the last started: a CI run peaked
    # at 9.3 d², below the 10 asserted)
    n, d = 12_000, 800
    X = np.random.default_rng(0).normal(size=(n, d)) / np.sqrt(d)  # norms near 1
    assert _threads._n_threads(X) == 8
    est = getattr(sklearn_dppca, name)(5, data_norm=data_norm, epsilon=1.0,
                                       random_state=0, path="dense",
                                       accountant=BudgetAccountant())
    peak = traced_peak(est, X)
    plan = est._memory_needed(n, d, "dense")
    assert est.path_ == "dense"
    assert peak > 10 * 8 * d * d  # most of the eight threads' matrices at once
    assert peak <= plan, (peak / 8 / d**2, plan / 8 / d**2)


@pytest.mark.parametrize("name, data_norm", [
    ("PrivatePCA", 0.9), ("PrivatePCA", "auto"), ("ComplexGaussPCA", 0.9),
    ("CoherentPowerPCA", 0.9)])
def test_a_pass_runs_in_the_threads_its_plan_counted(monkeypatch, name, data_norm):
    """BLAS's count, which the plan reads for the first pass's threads (two
    d × d matrices each), may grow before the pass starts: another fit's
    pass held it at one (``_SingleThreadedBlas``) while this one was planned,
    and ended. The pass runs in at most the threads the plan counted (the
    rows carry them, ``InMemoryRows.threads``), within the plan's memory:
    it ran in eight, the plan counting one (mend 110)."""
    import sklearn_dppca
    from sklearn_dppca import BudgetAccountant, _paths, _stats, _threads

    blas = [1]  # one while the fit is planned, eight once it is
    monkeypatch.setattr(_threads, "blas_threads", lambda: blas[0])
    monkeypatch.setattr(_paths, "blas_threads", lambda: blas[0])
    monkeypatch.setattr(_threads, "_MIN_PARALLEL_BYTES", 1)
    ran = []
    map_ranges = _stats._map_ranges

    def recorded(function, n_rows, n_threads):
        ran.append(n_threads)
        return map_ranges(function, n_rows, n_threads)

    monkeypatch.setattr(_stats, "_map_ranges", recorded)
    n, d = 1600, 800
    X = np.random.default_rng(0).normal(size=(n, d)) / np.sqrt(d)  # norms near 1
    est = getattr(sklearn_dppca, name)(5, data_norm=data_norm, epsilon=1.0,
                                       random_state=0, path="dense",
                                       accountant=BudgetAccountant())
    _blas_after_plan(monkeypatch, est, blas)
    peak = traced_peak(est, X)
    blas[0] = 1  # the plan as it was made
    plan = est._memory_needed(n, d, "dense")
    assert est.path_ == "dense" and blas[0] == 1
    assert ran and max(ran) == 1, ran
    assert peak <= plan, (peak / 8 / d**2, plan / 8 / d**2)


def test_rows_made_from_planned_rows_keep_their_threads(monkeypatch):
    """The rows a fit makes from its planned rows after the plan (the first
    rows, rows moved to a far mean, rows mapped into a box) keep the threads
    the plan counted, and their passes run in at most that many (mend 110)."""
    from sklearn_dppca import _stats, _threads
    from sklearn_dppca._bounds import _box_rows
    from sklearn_dppca._moved import moved_in_memory

    monkeypatch.setattr(_threads, "blas_threads", lambda: 8)
    monkeypatch.setattr(_threads, "_MIN_PARALLEL_BYTES", 1)
    X = np.random.default_rng(0).normal(size=(400, 20))
    rows = InMemoryRows(X, threads=2)
    d = X.shape[1]
    made = [rows.head(300), moved_in_memory(rows, np.ones(d), threads=8),
            _box_rows(rows, -np.ones(d), np.ones(d), np.zeros(d))]
    assert [r.threads for r in made] == [2, 2, 2]
    assert _threads._n_threads(X) == 8
    assert [_threads._n_threads(r.X, r.threads) for r in made] == [2, 2, 2]
    ran = []
    map_ranges = _stats._map_ranges
    monkeypatch.setattr(_stats, "_map_ranges", lambda f, n, t: (
        ran.append(t), map_ranges(f, n, t))[1])
    for r in [rows, *made]:
        r.largest_norm()
        r.first_pass(1.0, with_sum=True)
        r.gram(1.0, np.zeros(d))
    assert ran and max(ran) == 2, ran
    InMemoryRows(X).first_pass(1.0, with_sum=True)  # no plan: BLAS's count
    assert ran[-1] == 8


@pytest.mark.parametrize("path, sparse_rows", [
    ("matrix_free", False), ("matrix_free", True), ("noisy_power", True)])
def test_threaded_product_passes_run_in_the_threads_their_plan_counted(
        monkeypatch, path, sparse_rows):
    """The plan reads BLAS's count once (``_planned_cores``) and every pass
    that runs threads uses it: the implicit kernel's draws
    (``kernel_threads``, a block of the kernel each) and the product passes
    over sparse rows (``sparse_row_jobs``, a block's products each) read
    BLAS's count again when they ran, eight where the plan counted one
    (another fit's pass held it at one while this one was planned, and
    ended; mend 113)."""
    from scipy import sparse

    from sklearn_dppca import (
        BudgetAccountant,
        _matrix_free,
        _paths,
        _private_pca,
        _rows,
        _threads,
    )
    from sklearn_dppca.noise import IMPLICIT_BLOCK

    blas = [1]  # one while the fit is planned, eight once it is
    for module in (_threads, _paths, _rows):
        monkeypatch.setattr(module, "blas_threads", lambda: blas[0])
    for module in (_rows, _paths):  # sparse rows' passes in threads
        monkeypatch.setattr(module, "SPARSE_THREADS_MIN_ENTRIES", 1)
    kernels, jobs = [], []
    goe = _matrix_free.ImplicitGOE

    def kernel(*args, n_threads, **kwargs):
        kernels.append(n_threads)
        return goe(*args, n_threads=n_threads, **kwargs)

    monkeypatch.setattr(_matrix_free, "ImplicitGOE", kernel)
    for module in (_rows, _private_pca):
        products = module.scatter_products
        monkeypatch.setattr(module, "scatter_products",
                            lambda rows, W, n_jobs=None, products=products: (
                                jobs.append(n_jobs), products(rows, W, n_jobs))[1])
    n, d = 300, 2 * IMPLICIT_BLOCK + 50  # two blocks' rows: threads draw them
    rng = np.random.default_rng(0)
    X = sparse.random(n, d, density=0.02, format="csr", random_state=0) \
        if sparse_rows else rng.normal(size=(n, d)) / np.sqrt(d)
    est = PrivatePCA(3, data_norm=1.0, epsilon=1.0, random_state=0, path=path,
                     accountant=BudgetAccountant())
    _blas_after_plan(monkeypatch, est, blas)
    est.fit(X)
    assert est.path_ == path and blas[0] == 8
    assert kernels == ([1] if path == "matrix_free" else []), kernels
    assert jobs and set(jobs) == ({1} if sparse_rows else {None}), jobs
    # the count the plan read, which its terms counted (BLAS's is 8 now)
    assert est._planned_cores() == 1
    assert est._jobs(n, d) == 1


@pytest.mark.parametrize("path", ["noisy_power", "matrix_free"])
def test_joblibs_context_adds_no_threads_the_plan_did_not_count(monkeypatch, path):
    """A pass of clipped products over dense rows took n_jobs=None as
    joblib's context count: inside ``parallel_config(n_jobs=8)`` PrivatePCA's
    passes ran in eight threads, each with its block's products, where its
    plan counted one (review 104 F2: 1.42 times the plan). None is one
    thread; CoherentPowerPCA passes ``effective_n_jobs(n_jobs)``, as its
    plan counts it."""
    from sklearn_dppca import BudgetAccountant, _blocks

    n, d, rows = 4000, 60, 250  # 16 blocks: threads would take them
    monkeypatch.setattr(_blocks, "_BLOCK_BYTES", 8 * d * rows)
    monkeypatch.setattr(_blocks, "_MIN_BLOCK_ROWS", rows)
    ran = []
    threaded = CentredRows._threaded

    def recorded(self, one_block, ranges, n_threads, *args):
        ran.append(n_threads)
        return threaded(self, one_block, ranges, n_threads, *args)

    monkeypatch.setattr(CentredRows, "_threaded", recorded)
    X = np.random.default_rng(0).normal(size=(n, d)) / np.sqrt(d)
    est = PrivatePCA(20, data_norm=2.0, epsilon=2.0, random_state=0, path=path,
                     svd_solver="randomized", accountant=BudgetAccountant())
    with joblib.parallel_config(n_jobs=8):
        peak = traced_peak(est, X)
        planned = est._jobs(n, d)
    assert est.path_ == path and planned == 1
    assert ran == [], ran  # one thread, as planned
    if path == "noisy_power":  # matrix_free's kernel: ~13 MB whatever d (small d)
        assert peak <= est._memory_needed(n, d, path) + est._copy_bytes
    coherent = CoherentPowerPCA(3, data_norm=2.0, epsilon=2.0, random_state=0,
                                start="random", accountant=BudgetAccountant())
    with joblib.parallel_config(n_jobs=8):
        coherent.fit(X)
        planned = coherent._jobs(n, d)
    assert planned == 8 and ran and set(ran) == {planned}, ran
