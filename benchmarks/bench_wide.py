"""Wide and sparse data: every estimator and path beside scikit-learn (issue 31).

For each case (a named dataset), the script fits, one after the other and in
the same worker process:

- the baselines, at ``ε = ∞``: ``sklearn.decomposition.PCA(k)`` with
  ``svd_solver="auto"`` and with ``svd_solver="randomized"``, and, on sparse
  cases only, ``TruncatedSVD(k)`` (which does not centre);
- ``PrivatePCA``, ``ComplexGaussPCA`` and ``CoherentPowerPCA`` with
  ``n_components=k``, ``epsilon=ε``, ``delta=1e-6``, the case's public
  ``data_norm``, ``random_state=seed``, a fresh unlimited
  ``BudgetAccountant``, and every ``svd_solver`` value the estimator's
  parameter validation accepts (read from its ``_parameter_constraints``).
  The value is passed through as is and printed: ``PrivatePCA`` and
  ``ComplexGaussPCA`` eigendecompose their release with it (the solver
  ``"auto"`` chose is printed, from ``_fit_svd_solver``);
  ``CoherentPowerPCA`` ignores it (it warns; the table marks such cells
  ``(ignored)``). ``--param
  NAME=VALUE`` passes a further parameter, only to estimators whose
  ``get_params()`` has it (so the script runs on code that lacks it);

at ``ε ∈ {1, 3}`` and ``k ∈ {10, 50}``. Reported per cell: wall time of
``fit``, peak memory of ``fit``, ``sin θ`` of the top ``k`` (the sine of the
largest principal angle between ``components_`` and the top-k eigenvectors
of the data's centred sample covariance, computed once per case with
ARPACK, or ``eigh`` for ``d ≤ 2000``;
:func:`sklearn_dppca.metrics.principal_angle_sin`), and the ratios of time
and peak memory to ``PCA(svd_solver="auto")`` at the same ``k`` in the same
process. ``TruncatedSVD``'s ``sin θ`` is against the centred reference, so
it includes what not centring costs.

**Cases** (full size; ``--quick`` and ``--tiny`` use smaller shapes, printed
in the header of each table):

``dense-2k``, ``dense-10k``
    2 000 × 5 000 and 10 000 × 20 000, a planted spiked model with
    incoherent components: rows ``Σ_j √λ_j z_j v_j + τ g`` with ``z, g``
    standard normal, ``V`` a uniformly random orthonormal ``d × 50`` basis,
    ``λ`` = 10 spikes from 4 down to 2, then 40 from 1 down to 0.5 (both
    geometric), and ``τ² = 1/d`` (the noise's total variance is 1, so a
    spike is ``λ d ≥ d/2`` times the noise along any direction: gaps at
    ``k = 10`` and ``k = 50``). ``data_norm`` is public: the 99th percentile
    of the model's row norm, by simulation of the norm from ``λ``, ``τ``
    and ``d`` alone (not from the data); about 1% of the rows are clipped.
``csr-1pct``, ``csr-0.1pct``
    CSR 10⁵ × 2·10⁴ at 1% non-zero and 10⁵ × 10⁵ at 0.1%, binary presence
    rows with a planted low-rank part (codes in health records, words in
    documents): 60 latent topics, each a random disjoint set of ``d/60``
    columns; every row belongs to one topic and draws ``m = density · d``
    columns with replacement, each from its topic's set with probability
    1/2 and uniformly otherwise; the drawn columns are 1. The mean of a row
    given its topic has rank ≤ 61. ``data_norm = √m`` is public and exact:
    a row has at most ``m`` ones.
``genotypes``
    :func:`sklearn_dppca.datasets.make_genotypes` with 10 000 samples,
    2·10⁴ variants and three populations (``F_ST = 0.05``, minor-allele
    frequencies in ``[0.05, 0.5]``), dense float64; ``data_norm`` is its
    public ``info.data_norm`` (from the model's parameters).

**How it measures.** The parent process generates a case, computes the
reference components, writes both to a temporary folder and frees them.
A worker process (this script, in a hidden ``--worker`` mode, started with
``subprocess``) loads the data once, fits every estimator on a tiny array
(imports and BLAS start-up are not timed), then runs the cells one by one
as the parent sends them. Per fit, the worker collects garbage, returns
freed heap to the system (glibc's ``malloc_trim``), resets the kernel's
high-water mark of its resident set (``/proc/self/clear_refs``, Linux ≥ 4.0),
reads its resident size ``VmRSS``, fits, and reports ``VmHWM − VmRSS``: the
peak resident memory the fit added to the process that holds the data. This
counts what ``tracemalloc`` misses (BLAS and LAPACK work arrays, SciPy's
sparse products) and, unlike ``ru_maxrss`` in a process that already ran
fits, is reset before each fit. The worker runs with glibc's
``MALLOC_MMAP_THRESHOLD_`` fixed at 32 MiB (the largest its dynamic
threshold reaches in a long-running process) and ``MALLOC_TRIM_THRESHOLD_``
out of reach: within a fit, arrays below 32 MiB are reused from the heap as
in a user's process, and ``malloc_trim`` before the next fit returns every
free page, so that nothing one fit freed is reused, uncounted, by the next.
(With the threshold fixed at 128 KiB, as before, every such array was a
fresh mapping whose pages were faulted in again: the matrix-free CSR
10⁵ × 2·10⁴ fit at ``k = 50`` took 44.6 s against 27.8 s in a plain
process.) Where
``clear_refs`` cannot be written (not Linux), each fit gets a fresh worker
and the peak is ``ru_maxrss`` after the fit minus ``ru_maxrss`` once the data
is loaded: an upper bound of the same quantity when loading peaked lower.
Timing is wall time (``time.perf_counter``) of ``fit`` alone, in the same
process for every cell of a case (unless a worker had to be replaced). The
cells run in rounds: ``--repeats`` rounds of every cell (default 1), and
the baselines in ``--baseline-repeats`` rounds at least (default 3), the
cells of a round in the table's order; a cell's time is the fastest of
its runs and its peak their median (every run is in the JSON output,
``times_s`` and ``peaks_bytes``; a cell that failed is not run again). A
baseline timed once can flatter every ratio of its case: on the project's
virtual machine a large allocation after a few idle seconds faults its
pages in slowly (a copy of the 1.6 GB rows of ``dense-10k`` took 4.4 s
after 8 s idle, 0.26 s right after another, presumably memory returned to
the host), so ``PCA()``, which centres a copy of the rows, took
10.3, 10.6 and 6.1 s there in one run, fast only right after another
``PCA()``. The fastest run is the one that measures the solver. Every fit
runs with **one BLAS thread** by default (``--blas-threads 1``; 0 keeps the
library default), as in
``evaluate.py``: on a 2-core machine shared with other jobs, a descheduled
second BLAS thread stalls every BLAS call (one ``ComplexGaussPCA`` fit on
1 000 × 500 took from 0.16 s to 16 s two-threaded under load, 0.4 s
single-threaded), so multi-threaded times there mostly measure the other
load. The ratios are then per-core costs; on a dedicated machine,
``--blas-threads 0`` measures what a default ``PCA()`` user sees.

**Limits.** Each fit runs under ``--timeout`` seconds (default 300) and
``--memory-limit`` GB (default 20): the worker sets ``RLIMIT_AS`` to its
address-space size before the fit plus the limit, and restores it after.
An allocation beyond it raises ``MemoryError``, and the cell reads ``out of
memory``; a fit past its time is killed with its worker (``timeout``) and
a new worker takes the next cell; a worker killed by the system (SIGKILL)
reads ``out of memory (killed)``, one that exits on a failed allocation
(OpenBLAS does, under ``RLIMIT_AS``) ``out of memory (its message)``, any
other death ``crashed (...)``. The
limit is on address space, which is at least the resident size, so a fit is
stopped no later than its resident memory reaches it. At ``d = 10⁵`` a dense
``10⁵ × 10⁵`` float64 matrix takes 80 GB: ``PrivatePCA`` takes its
noisy power path there, ``CoherentPowerPCA`` its random start, and
``ComplexGaussPCA`` its matrix-free path, whose kernel's cache then holds a
few percent of its blocks (every product draws the rest again: it runs
into the time limit); a path that does not fit is refused with a
``MemoryError`` before any charge, read as ``out of memory``, and the run
goes on.

``--paths`` lists the ``path`` values to run (default ``auto``), each
estimator those it has (``ComplexGaussPCA``: no ``noisy_power``); the table
shows the path ``auto`` chose (``path_``).

Run from the repository root with the package installed::

    nice python benchmarks/bench_wide.py --quick          # ~3 min on 2 cores
    nice python benchmarks/bench_wide.py --out wide.json  # full size: many hours
    python benchmarks/bench_wide.py --cases genotypes,csr-1pct \\
        --estimators PrivatePCA --epsilons 1 --ks 10 --param new_parameter=value
    python benchmarks/bench_wide.py --cases dense-2k --estimators PrivatePCA \
        --paths dense,matrix_free                         # both paths
    python benchmarks/bench_wide.py --tiny                # smoke test size
"""

import argparse
import ctypes
import gc
import json
import math
import os
import resource
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import sparse

ESTIMATORS = ("PrivatePCA", "ComplexGaussPCA", "CoherentPowerPCA")
BASELINES = ("PCA auto", "PCA randomized", "TruncatedSVD")
REFERENCE = "PCA auto"
#: The estimators' paths (their ``path`` parameter; each runs those it has).
PATHS = ("auto", "dense", "matrix_free", "noisy_power")
#: scikit-learn's PCA solvers, in the order the table lists them.
SOLVERS = ("auto", "full", "covariance_eigh", "arpack", "randomized")
DELTA = 1e-6
#: name: (kind, {size: shape}); a CSR shape is (n, d, density).
CASES = {
    "dense-2k": ("spiked", {"full": (2000, 5000), "quick": (1000, 400),
                            "tiny": (200, 60)}),
    "dense-10k": ("spiked", {"full": (10_000, 20_000), "quick": (2000, 500),
                             "tiny": (300, 80)}),
    "csr-1pct": ("csr", {"full": (100_000, 20_000, 0.01),
                         "quick": (5000, 400, 0.04),
                         "tiny": (500, 100, 0.05)}),
    "csr-0.1pct": ("csr", {"full": (100_000, 100_000, 0.001),
                           "quick": (5000, 500, 0.02),
                           "tiny": (500, 120, 0.05)}),
    "genotypes": ("genotypes", {"full": (10_000, 20_000), "quick": (1000, 500),
                                "tiny": (200, 100)}),
}
#: Spiked model: 10 spikes from 4 to 2, then 40 from 1 to 0.5; noise τ² = 1/d.
STRONG, WEAK = (10, 4.0, 2.0), (40, 1.0, 0.5)
N_TOPICS, TOPIC_SHARE = 60, 0.5
NORM_QUANTILE = 0.99
EXACT_REFERENCE_MAX_D = 2000
#: Words of a dead worker's last line of stderr that mean memory ran out.
OOM_WORDS = ("malloc", "memoryerror", "out of memory", "bad_alloc",
             "cannot allocate memory")
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 * 2**20),
              "MALLOC_TRIM_THRESHOLD_": str(2**40)}


def log(message):
    print(message, file=sys.stderr, flush=True)


# --- data -------------------------------------------------------------------
def spike_eigenvalues(d):
    """The planted spikes, fewer when ``d`` is small (at most ``d/2``)."""
    rank = min(STRONG[0] + WEAK[0], d // 2)
    strong = min(STRONG[0], rank // 2)
    lam = np.concatenate([np.geomspace(STRONG[1], STRONG[2], strong),
                          np.geomspace(WEAK[1], WEAK[2], rank - strong)])
    return lam


def spiked_norm_bound(lam, d, quantile=NORM_QUANTILE, draws=200_000, seed=12345):
    """Public ``data_norm`` of the spiked model: the ``quantile`` of its row
    norm, by simulation from ``λ``, ``τ² = 1/d`` and ``d`` only.

    ``‖Σ √λ_j z_j v_j + τ g‖² = Σ λ_j z_j² + 2τ Σ √λ_j z_j h_j + τ² χ²_d``
    with ``h = Vᵀg`` standard normal, independent of ``z``.
    """
    rng = np.random.default_rng(seed)
    tau = 1.0 / math.sqrt(d)
    sq = np.zeros(draws)
    for start in range(0, draws, 20_000):
        stop = min(start + 20_000, draws)
        z = rng.standard_normal((stop - start, lam.size))
        h = rng.standard_normal((stop - start, lam.size))
        sq[start:stop] = (z**2 @ lam + 2.0 * tau * (z * h) @ np.sqrt(lam)
                          + tau**2 * rng.chisquare(d, size=stop - start))
    return float(math.sqrt(np.quantile(sq, quantile)))


def make_spiked(n, d, seed):
    rng = np.random.default_rng(seed)
    lam = spike_eigenvalues(d)
    basis, _ = np.linalg.qr(rng.standard_normal((d, lam.size)))
    loadings = np.ascontiguousarray((basis * np.sqrt(lam)).T)  # r × d
    tau = 1.0 / math.sqrt(d)
    X = np.empty((n, d))
    step = max(1, (32 * 2**20) // (8 * d))
    for start in range(0, n, step):
        block = X[start:start + step]
        rng.standard_normal(out=block)
        block *= tau
        block += rng.standard_normal((block.shape[0], lam.size)) @ loadings
    return X, dict(
        data_norm=spiked_norm_bound(lam, d),
        data_norm_source=f"public: the model's {NORM_QUANTILE:.0%} row-norm "
        "quantile, simulated from its parameters",
        description=f"dense, {lam.size} planted spikes in a random orthonormal "
        f"basis (λ {lam[0]:g}…{lam[-1]:g}, noise τ² = 1/d)",
    )


def make_topics(n, d, density, seed):
    rng = np.random.default_rng(seed)
    m = max(1, round(density * d))
    topics = min(N_TOPICS, max(1, d // 4))
    size = d // topics
    support = rng.permutation(d)[:topics * size].reshape(topics, size)
    membership = rng.integers(topics, size=n)
    blocks = []
    step = max(1, 2_000_000 // m)
    for start in range(0, n, step):
        rows = membership[start:start + step]
        b = rows.size
        from_topic = rng.random((b, m)) < TOPIC_SHARE
        columns = np.where(
            from_topic,
            support[rows[:, None], rng.integers(size, size=(b, m))],
            rng.integers(d, size=(b, m)),
        )
        block = sparse.csr_matrix(
            (np.ones(b * m), columns.ravel().astype(np.int32),
             np.arange(0, b * m + 1, m)), shape=(b, d))
        block.sum_duplicates()
        block.data[:] = 1.0
        blocks.append(block)
    X = sparse.vstack(blocks, format="csr")
    return X, dict(
        data_norm=math.sqrt(m),
        data_norm_source=f"public and exact: binary rows with at most m = {m} "
        "non-zeros",
        description=f"CSR, binary, {X.nnz / (n * d):.3%} non-zero, {topics} "
        f"latent topics of {size} columns, m = {m} draws per row",
    )


def make_genotype_case(n, d, seed):
    from sklearn_dppca.datasets import make_genotypes

    X, _, info = make_genotypes(n, d, 3, fst=0.05, return_info=True,
                                random_state=seed)
    return X, dict(
        data_norm=info.data_norm,
        data_norm_source="public: make_genotypes' info.data_norm (model "
        "parameters only)",
        description="dense 0/1/2 genotypes of 3 populations, F_ST = 0.05 "
        "(make_genotypes)",
    )


def make_case(name, size, seed):
    kind, shapes = CASES[name]
    shape = shapes[size]
    maker = {"spiked": make_spiked, "csr": make_topics,
             "genotypes": make_genotype_case}[kind]
    X, meta = maker(*shape, seed)
    meta.update(name=name, kind=kind, shape=list(X.shape), sparse=sparse.issparse(X),
                nbytes=int(data_bytes(X)),
                nnz=int(X.nnz) if sparse.issparse(X) else int(X.size))
    return X, meta


def data_bytes(X):
    if sparse.issparse(X):
        return X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
    return X.nbytes


def reference_components(X, k):
    """Top-k eigenvectors (rows) of the centred sample covariance."""
    from scipy.sparse.linalg import LinearOperator, eigsh

    n, d = X.shape
    mean = np.asarray(X.mean(axis=0)).ravel()
    if d <= EXACT_REFERENCE_MAX_D:
        gram = X.T @ X
        gram = gram.toarray() if sparse.issparse(gram) else gram
        vecs = np.linalg.eigh(gram - n * np.outer(mean, mean))[1]
        return np.ascontiguousarray(vecs[:, ::-1][:, :k].T)

    def matvec(v):
        v = np.ravel(v)
        return X.T @ (X @ v) - n * mean * (mean @ v)

    op = LinearOperator((d, d), matvec=matvec, dtype=np.float64)
    vals, vecs = eigsh(op, k=k, which="LA", tol=1e-8,
                       v0=np.random.default_rng(0).standard_normal(d))
    return np.ascontiguousarray(vecs[:, np.argsort(vals)[::-1]].T)


def write_case(folder, X, reference, meta):
    folder.mkdir(parents=True, exist_ok=True)
    if sparse.issparse(X):
        sparse.save_npz(folder / "X.npz", X, compressed=False)
    else:
        np.save(folder / "X.npy", X)
    np.save(folder / "reference.npy", reference)
    (folder / "meta.json").write_text(json.dumps(meta))


def read_case(folder):
    if (folder / "X.npz").exists():
        X = sparse.load_npz(folder / "X.npz").tocsr()
    else:
        X = np.load(folder / "X.npy")
    reference = np.load(folder / "reference.npy")
    return X, reference, json.loads((folder / "meta.json").read_text())


# --- cells ------------------------------------------------------------------
def accepted_solvers(cls):
    """Every ``svd_solver`` value ``cls`` validates, in ``SOLVERS`` order;
    ``[None]`` (not passed) when it has no such parameter."""
    if "svd_solver" not in cls().get_params():
        return [None]
    options = set()
    for constraint in getattr(cls, "_parameter_constraints", {}).get("svd_solver", ()):
        options |= set(getattr(constraint, "options", ()) or ())
    if not options:
        return [cls().get_params()["svd_solver"]]
    return [s for s in SOLVERS if s in options] + sorted(options - set(SOLVERS))


def make_cells(meta, args):
    import sklearn_dppca

    n, d = meta["shape"]
    cells = []
    for k in args.ks:
        if k >= min(n, d):
            log(f"{meta['name']}: k = {k} ≥ min(n, d) = {min(n, d)}, skipped")
            continue
        for name in BASELINES:
            if name == "TruncatedSVD" and not meta["sparse"]:
                continue
            cells.append(dict(estimator=name, svd_solver=None, path=None,
                              epsilon=math.inf, k=k))
        for name in args.estimators:
            solvers = accepted_solvers(getattr(sklearn_dppca, name))
            if args.solvers:
                solvers = [s for s in solvers if s in args.solvers] or solvers[:1]
            paths = [None]
            if "path" in getattr(sklearn_dppca, name)().get_params():
                # the paths this estimator has (ComplexGaussPCA: no noisy power)
                has = getattr(sklearn_dppca, name)._parameter_constraints["path"][0]
                paths = [p for p in args.paths if p in has.options]
            for solver in solvers:
                for path in paths:
                    for eps in args.epsilons:
                        cells.append(dict(estimator=name, svd_solver=solver,
                                          path=path, epsilon=eps, k=k))
    for cell in cells:
        cell.update(case=meta["name"], seed=args.seed, params=args.param)
    return cells


# --- the worker -------------------------------------------------------------
def _status_kb(field):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_high_water_mark():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _status_kb("VmHWM") is not None
    except OSError:
        return False


def _maxrss_bytes():
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024


def _trim_heap():
    gc.collect()
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def make_estimator(cell, data_norm):
    from sklearn.decomposition import PCA, TruncatedSVD

    import sklearn_dppca

    k, seed = cell["k"], cell["seed"]
    name = cell["estimator"]
    if name == "PCA auto":
        return PCA(k, svd_solver="auto", random_state=seed), {}
    if name == "PCA randomized":
        return PCA(k, svd_solver="randomized", random_state=seed), {}
    if name == "TruncatedSVD":
        return TruncatedSVD(k, random_state=seed), {}
    est = getattr(sklearn_dppca, name)(
        n_components=k, epsilon=cell["epsilon"], delta=DELTA, data_norm=data_norm,
        random_state=seed, accountant=sklearn_dppca.BudgetAccountant())
    known = est.get_params()
    extra = dict(cell["params"])
    if cell["svd_solver"] is not None:
        extra["svd_solver"] = cell["svd_solver"]
    if cell.get("path") is not None:
        extra["path"] = cell["path"]
    applied = {key: value for key, value in extra.items() if key in known}
    est.set_params(**applied)
    return est, {"params_skipped": sorted(set(extra) - set(applied))}


def _warm_up():
    """One tiny fit of every estimator: imports and BLAS start-up untimed."""
    rng = np.random.default_rng(0)
    small = rng.standard_normal((60, 8)) / 4
    for name in (*BASELINES, *ESTIMATORS):
        cell = dict(estimator=name, svd_solver=None, epsilon=1.0, k=2, seed=0,
                    params={})
        X = sparse.csr_matrix(small) if name == "TruncatedSVD" else small
        make_estimator(cell, 1.0)[0].fit(X)


def run_cell(X, reference, cell, data_norm, memory_limit, fresh_baseline):
    from sklearn_dppca.metrics import principal_angle_sin

    est, info = make_estimator(cell, data_norm)
    result = dict(info)
    _trim_heap()
    resettable = _reset_high_water_mark()
    before = _status_kb("VmRSS") if resettable else fresh_baseline
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    size = _status_kb("VmSize")
    if memory_limit and size is not None:
        cap = size + int(memory_limit)
        resource.setrlimit(resource.RLIMIT_AS,
                           (cap if hard == resource.RLIM_INFINITY else min(cap, hard),
                            hard))
    status = "ok"
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            start = time.perf_counter()
            est.fit(X)
            result["time_s"] = time.perf_counter() - start
    except MemoryError:
        status = "out of memory"
    except Exception as exc:  # reported in the table, the run goes on
        status = f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    after = _status_kb("VmHWM") if resettable else _maxrss_bytes()
    result.update(status=status, peak_bytes=max(0, after - before))
    if status != "ok":
        result.pop("time_s", None)
        return result
    k = cell["k"]
    result["sin_theta"] = float(principal_angle_sin(
        np.asarray(est.components_[:k], dtype=np.float64), reference[:k]))
    result["solver_ignored"] = any(
        "svd_solver" in str(w.message) and "no effect" in str(w.message)
        for w in caught)
    chosen = getattr(est, "_fit_svd_solver", None)
    if isinstance(chosen, str):
        result["fit_svd_solver"] = chosen
    if isinstance(getattr(est, "path_", None), str):
        result["fit_path"] = est.path_
    return result


def worker_main(folder, memory_limit, blas_threads):
    """The hidden ``--worker`` mode: one JSON line per cell on stdin, one
    result per line on the original stdout (stray prints go to stderr)."""
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    warnings.simplefilter("ignore")
    if blas_threads > 0:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=blas_threads)  # for the worker's lifetime
    X, reference, meta = read_case(Path(folder))
    _warm_up()
    _trim_heap()
    hwm = _reset_high_water_mark()
    out.write(json.dumps({"ready": True, "hwm_reset": hwm}) + "\n")
    fresh_baseline = _maxrss_bytes()
    while True:
        line = sys.stdin.readline()
        if not line:
            return 0
        cell = json.loads(line)
        result = run_cell(X, reference, cell, meta["data_norm"], memory_limit,
                          fresh_baseline)
        out.write(json.dumps(result) + "\n")


class Worker:
    """A ``--worker`` child process that holds one case's data."""

    def __init__(self, folder, memory_limit, start_timeout, blas_threads=1):
        self.log_path = Path(folder) / "worker.log"
        self.stderr = open(self.log_path, "ab")
        env = dict(os.environ, **MALLOC_ENV)
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", str(folder),
             "--memory-limit", repr(memory_limit / 1e9),
             "--blas-threads", str(blas_threads)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
            env=env)
        self.buffer = b""
        hello = self._read_line(time.monotonic() + start_timeout)
        if not hello:
            status = self._death_status(hello)
            self.close()
            raise RuntimeError(f"the worker did not start: {status}")
        self.resettable = json.loads(hello)["hwm_reset"]

    def _read_line(self, deadline):
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return b""
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def _death_status(self, line):
        if line is None:
            self.kill()
            return "timeout"
        code = self.proc.wait()
        if code == -signal.SIGKILL:
            return "out of memory (killed)"
        tail = self.log_path.read_text(errors="replace").strip().splitlines()[-1:]
        tail = tail[0][:200] if tail else ""
        if any(word in tail.lower() for word in OOM_WORDS):
            # a library that exits when malloc fails under RLIMIT_AS (OpenBLAS)
            return f"out of memory ({tail})"
        how = (f"signal {signal.Signals(-code).name}" if code < 0
               else f"exit status {code}")
        return f"crashed ({how}{': ' + tail if tail else ''})"

    def fit(self, cell, timeout):
        """The cell's result, or ``{"status": ...}`` when the worker is gone."""
        self.proc.stdin.write((json.dumps(cell) + "\n").encode())
        self.proc.stdin.flush()
        line = self._read_line(time.monotonic() + timeout)
        if line:
            return json.loads(line)
        return {"status": self._death_status(line)}

    @property
    def alive(self):
        return self.proc.poll() is None

    def kill(self):
        if self.alive:
            self.proc.kill()
        self.proc.wait()

    def close(self):
        if self.alive:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        self.stderr.close()


def run_case(folder, cells, timeout, memory_limit, progress=log, blas_threads=1,
             keys=None):
    """Run ``cells`` on the case saved in ``folder``; a new worker replaces
    one that timed out or died, and, where the high-water mark cannot be
    reset, each fit gets its own. ``keys`` (one per cell): a cell whose key
    already failed is not run again, its failure is repeated (a baseline's
    later rounds after a timeout)."""
    start_timeout = max(120.0, timeout)
    worker = None
    results, failed = [], {}
    try:
        for i, cell in enumerate(cells):
            key = None if keys is None else keys[i]
            if key in failed:
                results.append(failed[key])
                continue
            if worker is None or not worker.alive:
                worker = Worker(folder, memory_limit, start_timeout, blas_threads)
            result = dict(cell, **worker.fit(cell, timeout))
            results.append(result)
            if key is not None and result["status"] != "ok":
                failed[key] = result
            progress(f"  [{i + 1}/{len(cells)}] {describe(cell)}: "
                     f"{format_status(result)}")
            if not worker.resettable:
                worker.close()
    finally:
        if worker is not None:
            worker.close()
    return results


def round_robin(cells, repeats, baseline_repeats):
    """The order the cells run in: round ``r`` runs, in order, every cell
    with more than ``r`` runs (``repeats``, or at least ``baseline_repeats``
    for a baseline). Returns the cells' indices, round after round."""
    counts = [max(repeats, baseline_repeats if cell["estimator"] in BASELINES else 0)
              for cell in cells]
    return [i for r in range(max(counts, default=0))
            for i, count in enumerate(counts) if count > r]


def merge_runs(runs):
    """One cell's result from its runs: the fastest time and the median
    peak, each run's in ``times_s`` and ``peaks_bytes``; a run that failed
    makes the cell's status its own."""
    failed = [r for r in runs if r["status"] != "ok"]
    merged = dict(failed[0] if failed else runs[0], runs=len(runs))
    if not failed:
        merged["times_s"] = [r["time_s"] for r in runs]
        merged["peaks_bytes"] = [r["peak_bytes"] for r in runs]
        merged["time_s"] = min(merged["times_s"])
        merged["peak_bytes"] = statistics.median(merged["peaks_bytes"])
    return merged


def run_rounds(folder, cells, args, progress=log):
    """Every cell's runs (:func:`round_robin`) in one worker, merged."""
    order = round_robin(cells, args.repeats, args.baseline_repeats)
    results = run_case(folder, [cells[i] for i in order], args.timeout,
                       args.memory_limit, progress, blas_threads=args.blas_threads,
                       keys=order)
    runs = [[] for _ in cells]
    for i, result in zip(order, results):
        runs[i].append(result)
    return [merge_runs(r) for r in runs]


def describe(cell):
    solver = "" if cell["svd_solver"] is None else f" svd_solver={cell['svd_solver']}"
    if cell.get("path") is not None:
        solver += f" path={cell['path']}"
    eps = "" if math.isinf(cell["epsilon"]) else f" ε={cell['epsilon']:g}"
    return f"{cell['estimator']}{solver}{eps} k={cell['k']}"


def format_status(result):
    if result["status"] != "ok":
        return result["status"]
    return (f"{result['time_s']:.2f}s, {result['peak_bytes'] / 1e6:.0f} MB, "
            f"sin θ {result['sin_theta']:.3f}")


def add_ratios(results):
    """Time and peak memory over ``PCA(svd_solver="auto")``'s at the same k."""
    base = {r["k"]: r for r in results
            if r["estimator"] == REFERENCE and r["status"] == "ok"}
    for r in results:
        ref = base.get(r["k"])
        ok = ref is not None and r["status"] == "ok"
        r["time_ratio"] = r["time_s"] / ref["time_s"] if ok and ref["time_s"] else None
        r["peak_ratio"] = (r["peak_bytes"] / ref["peak_bytes"]
                           if ok and ref["peak_bytes"] else None)


# --- report -----------------------------------------------------------------
def case_header(meta):
    n, d = meta["shape"]
    return (f"### {meta['name']}: {n} × {d}, {meta['description']}; "
            f"{meta['nbytes'] / 1e6:.0f} MB; data_norm = {meta['data_norm']:.4g} "
            f"({meta['data_norm_source']})")


def megabytes(nbytes):
    mb = nbytes / 1e6
    return f"{mb:.0f}" if mb >= 100 else f"{mb:.1f}"


def markdown(meta, results):
    head = ("| estimator | svd_solver | ε | k | time (s) | peak (MB) | sin θ "
            "| time ÷ PCA auto | peak ÷ PCA auto |")
    lines = [case_header(meta), "", head, "|" + "---|" * 9]
    for r in results:
        solver = r["svd_solver"] or ""
        if r["estimator"] == "TruncatedSVD":
            solver = "(algorithm=randomized)"
        elif r["estimator"].startswith("PCA"):
            solver = r["estimator"].split()[1]
            if r.get("fit_svd_solver") and r["fit_svd_solver"] != solver:
                solver += f" → {r['fit_svd_solver']}"
        elif r.get("solver_ignored"):
            solver += " (ignored)"
        if r.get("path") is not None:
            solver += f", path={r['path']}"
            if r.get("fit_path") and r["fit_path"] != r["path"]:
                solver += f" → {r['fit_path']}"
        name = r["estimator"].split()[0]
        eps = "∞" if math.isinf(r["epsilon"]) else f"{r['epsilon']:g}"
        if r["status"] == "ok":
            cells = [f"{r['time_s']:.2f}", megabytes(r["peak_bytes"]),
                     f"{r['sin_theta']:.3f}",
                     "—" if r["time_ratio"] is None else f"{r['time_ratio']:.2f}",
                     "—" if r["peak_ratio"] is None else f"{r['peak_ratio']:.2f}"]
        else:  # the whole message is in the JSON output
            status = r["status"]
            cells = [status if len(status) <= 60 else status[:59] + "…"] + ["—"] * 4
        lines.append(f"| {name} | {solver} | {eps} | {r['k']} | "
                     + " | ".join(cells) + " |")
    skipped = sorted({p for r in results for p in r.get("params_skipped", ())})
    if skipped:
        lines += ["", "Parameters not passed (no estimator of this run has "
                  f"them, or only some do): {', '.join(skipped)}"]
    return "\n".join(lines)


# --- main -------------------------------------------------------------------
def _names(values, allowed, what):
    names = [v for value in values for v in value.split(",") if v]
    unknown = sorted(set(names) - set(allowed))
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)} (known: "
                         f"{', '.join(allowed)})")
    return names


def _numbers(values, kind):
    return [kind(v) for value in values for v in value.split(",") if v]


def _param(text):
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        return name, json.loads(value)
    except json.JSONDecodeError:
        return name, value


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smaller shapes (a few minutes on 2 cores)")
    parser.add_argument("--tiny", action="store_true", help="smoke test size")
    parser.add_argument("--cases", nargs="+", default=[",".join(CASES)],
                        metavar="NAME,...", help="default: all")
    parser.add_argument("--estimators", nargs="+", default=[",".join(ESTIMATORS)],
                        metavar="NAME,...", help="private estimators; default: all")
    parser.add_argument("--solvers", nargs="+", default=None, metavar="NAME,...",
                        help="only these svd_solver values (default: every "
                        "value each estimator accepts)")
    parser.add_argument("--paths", nargs="+", default=["auto"], metavar="NAME,...",
                        help="the estimators' path values (default: auto; the "
                        "table shows what it chose)")
    parser.add_argument("--epsilons", nargs="+", default=["1,3"], metavar="E,...")
    parser.add_argument("--ks", nargs="+", default=None, metavar="K,...",
                        help="default: 10,50 (tiny: 2,4)")
    parser.add_argument("--param", action="append", type=_param, default=[],
                        metavar="NAME=VALUE", help="a further estimator parameter "
                        "(JSON value or string), passed where get_params() has it")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds per fit (default: %(default)s)")
    parser.add_argument("--memory-limit", type=float, default=20.0,
                        help="GB of address space per fit (default: %(default)s)")
    parser.add_argument("--blas-threads", type=int, default=1,
                        help="BLAS threads of every fit (default: 1; 0 keeps the "
                        "library default)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="runs of every cell, in rounds; the table shows "
                        "the fastest time, the median peak (default: %(default)s)")
    parser.add_argument("--baseline-repeats", type=int, default=3,
                        help="runs of each scikit-learn baseline at least "
                        "(default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the data and of the estimators")
    parser.add_argument("--out", metavar="FILE.json", help="also write the results")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.memory_limit = args.memory_limit * 1e9
    if args.repeats < 1 or args.baseline_repeats < 0:
        parser.error("--repeats must be at least 1 and --baseline-repeats at least 0")
    if args.worker:
        return args
    args.size = "tiny" if args.tiny else "quick" if args.quick else "full"
    args.cases = _names(args.cases, CASES, "case")
    args.estimators = _names(args.estimators, ESTIMATORS, "estimator")
    args.solvers = None if args.solvers is None else _names(args.solvers, SOLVERS,
                                                            "svd_solver")
    args.paths = _names(args.paths, PATHS, "path")
    args.epsilons = _numbers(args.epsilons, float)
    args.ks = _numbers(args.ks or ["2,4" if args.tiny else "10,50"], int)
    args.param = dict(args.param)
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker_main(args.worker, args.memory_limit, args.blas_threads)
    from bench_fit import environment, print_environment

    env = environment()
    print_environment(env)
    config = {key: value for key, value in vars(args).items() if key != "worker"}
    threads = args.blas_threads or "the library default"
    print(f"size: {args.size}; ε ∈ {args.epsilons}, k ∈ {args.ks}, δ = {DELTA:g}; "
          f"per fit: {args.timeout:g} s, {args.memory_limit / 1e9:g} GB, "
          f"BLAS threads: {threads}; time: the fastest of "
          f"{args.repeats} run(s), the baselines' of "
          f"{max(args.repeats, args.baseline_repeats)}, peak: their median; "
          "peak = resident high-water mark of the fit above the resident size "
          "before it\n", flush=True)
    metas, results = [], []
    with tempfile.TemporaryDirectory(prefix="dppca-wide-") as tmp:
        for name in args.cases:
            folder = Path(tmp) / name
            started = time.perf_counter()
            X, meta = make_case(name, args.size, args.seed)
            k_max = min(max(args.ks), min(X.shape) - 1)
            reference = reference_components(X, k_max)
            write_case(folder, X, reference, meta)
            del X, reference
            gc.collect()
            log(f"{name}: data and reference in {time.perf_counter() - started:.1f}s")
            cells = make_cells(meta, args)
            case_results = run_rounds(folder, cells, args)
            add_ratios(case_results)
            shutil.rmtree(folder, ignore_errors=True)
            print(markdown(meta, case_results) + "\n", flush=True)
            metas.append(meta)
            results.extend(case_results)
    result = dict(environment=env, config=config, cases=metas, results=results)
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1, default=str))
    return result


if __name__ == "__main__":
    outcome = main()
    sys.exit(outcome if isinstance(outcome, int) else 0)
