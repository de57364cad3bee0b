"""Fit on Parquet files that no process ever holds whole, against Dask's own Gram.

The benchmark writes a Parquet dataset to disk (default 2·10⁷ rows × 100
float64 columns, 16 GB in memory), then, on one
``dask.distributed.LocalCluster`` of worker processes (default 2 workers of one
thread), and in one run, measures on the same files:

- **read**: one bare pass, ``read_parquet(dir).to_dask_array().sum()``;
- **lengths**: ``read_parquet(dir).to_dask_array(lengths=True)``, which the
  package does first for a Dask DataFrame (``_dask.as_dask_array``);
- **Gram**: the non-private baseline, ``(X.T @ X).compute()`` on
  ``X = read_parquet(dir).to_dask_array()`` (one pass, unknown chunk sizes);
- ``PrivatePCA(n_components=k, epsilon=1, delta=1e-6, data_norm=C)``
  (**numeric**), fitted on ``read_parquet(dir)``;
- the same on ``read_parquet(dir).to_dask_array(lengths=...)`` with the lengths
  taken from the Parquet footers (**numeric, array**): the package's cost
  without its lengths pass;
- ``PrivatePCA(..., data_norm="auto")`` (**auto**) on ``read_parquet(dir)``;
- ``CoherentPowerPCA(n_components=k, epsilon=1, delta=1e-6, data_norm=C)``
  (its default ``selection="gdp"``) on ``read_parquet(dir)``;
- the non-private PCAs, on the array with footer lengths:
  ``dask_ml.decomposition.PCA(k, svd_solver="tsqr")`` where dask-ml imports
  and three times the dataset fits in one worker's memory limit (it
  concatenates the whole array in one task: see
  :func:`choose_pca_baselines`), and ``da.linalg.svd_compressed(X - mean, k,
  compute=True)`` with the mean computed first (``--pca-baseline`` chooses).

Nothing is ``persist``-ed: every pass reads the files again. Each fit gets a
fresh ``read_parquet``; its time runs from that call to the fit's return.

**Data.** Gaussian rows generated chunk by chunk on the workers
(``dask.array.random``), with a spiked covariance (variances 26, 17, 10, 5, 2
on the first five coordinates, 1 on the others) and a mean of 0.3 in every
coordinate, divided by a public constant (the square root of the model's
mean squared row norm plus five standard deviations of it), so that
``‖x‖ ≤ C = 1`` for all but about 0.2% of the rows (clipped by the fits):
``C = 1`` is the public ``data_norm``. One file (one row
group) per partition, ``--rows-per-file`` rows (default: 128 MiB of float64),
snappy-compressed (``--compression``) without dictionary encoding: the files
take about as many bytes as the floats.

**What is measured, independently of the package**, for each step:

- *passes (tasks)*: tasks executed on the workers whose key names a
  ``read_parquet`` layer (a worker plugin counts them), divided by the number
  of partitions;
- *passes (bytes)*: bytes the worker processes read (``rchar`` of
  ``/proc/<pid>/io``, every ``read()`` call, page cache included) divided by
  the dataset's size on disk;
- *time*: wall time; *ratio*: time / the Gram's time in the same round;
- *peak worker memory*: per worker process, the peak resident set size during
  the step (``VmHWM`` of ``/proc/<pid>/status``, reset before each step by
  ``/proc/<pid>/clear_refs``; elsewhere, ``psutil`` polled every 50 ms) minus
  its size when the step began; reported for the worse worker, in MB and in
  partitions (one partition in memory: rows per file × features × 8 bytes);
- *client memory*: the same for this process.

**Cost model.** A step of ``P`` passes over ``S`` bytes of files, ``G`` of
them Gram passes (``n d²`` multiply-adds), takes about
``P · (o + S / B_read) + G · n d² / F``: ``o + S / B_read = t_read`` is the
measured bare read pass (``o``, the per-pass overhead, is the time of a pass of
as many empty tasks as partitions), and ``F`` is measured on the workers: the
multiply-adds per second of ``A.T @ A`` on one partition in memory (best of
three, per worker thread, summed over the cluster's threads). ``G`` counts the
package's ``_chunk_gram`` and ``_chunk_centred`` tasks, and is 1 for the
Gram. The same model in CPU seconds uses the read pass's worker CPU and one
thread's ``F``. The model is not applied to the non-private PCAs (QR and
random projections, not Gram passes).

Targets (reported, not enforced): numeric ``PrivatePCA`` ≤ 1.2 × the Gram,
``"auto"`` ≤ 2.5 × the Gram; worker memory within a few partitions.

Fixed seeds make the fits non-private; the ``PrivacyLeakWarning`` is
silenced. Linux gives the exact peaks and byte counts; elsewhere the byte
counts are missing and the peaks polled.

Run from the repository root with the ``dask`` and ``parquet`` extras (and
optionally ``dask-ml``) installed::

    nice python benchmarks/bench_out_of_core.py --data-dir /big/disk   # 16 GB
    python benchmarks/bench_out_of_core.py --quick --out results/ooc    # 2·10⁶ × 100
    python benchmarks/bench_out_of_core.py --rows 100_000_000 --features 20
"""

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

NUMERIC_TARGET = 1.2  # numeric PrivatePCA / Gram
AUTO_TARGET = 2.5  # PrivatePCA(data_norm="auto") / Gram
PARTITION_BYTES = 128 * 2**20  # default in-memory size of one partition
SPIKES = (25.0, 16.0, 9.0, 4.0, 1.0)  # extra variance of the first coordinates
MEAN = 0.3  # of every coordinate, before the public scaling
COMBINE = ("add", "max")  # the package's tree reductions, not per chunk
SIDECAR = "dppca_bench.json"  # written last: the dataset is complete
SIZES = {  # (rows, features, rows per file)
    "quick": (2_000_000, 100, None),
    "tiny": (12_000, 8, 3_000),
}


# --- the data --------------------------------------------------------------
def model(d):
    """Per-coordinate standard deviations, mean and the public divisor.

    ``‖z‖²`` for ``z ~ N(m, diag(λ))`` has mean ``Σλ + ‖m‖²`` and variance
    ``2Σλ² + 4Σλm²``; the divisor is the square root of the mean plus five
    standard deviations: about 0.2% of the rows have a norm above 1 (the
    distribution's right tail is longer than a Gaussian's).
    """
    variances = np.ones(d)
    spikes = np.asarray(SPIKES[:d])
    variances[: spikes.size] += spikes
    mean = np.full(d, MEAN)
    expected = variances.sum() + mean @ mean
    spread = math.sqrt(2.0 * (variances**2).sum() + 4.0 * (variances * mean**2).sum())
    return np.sqrt(variances), mean, math.sqrt(expected + 5.0 * spread)


def column_names(d):
    width = len(str(d - 1))
    return [f"x{j:0{width}d}" for j in range(d)]


def dataset_meta(rows, features, rows_per_file, seed, compression):
    return dict(rows=rows, features=features, rows_per_file=rows_per_file,
                seed=seed, compression=compression, use_dictionary=False)


def parquet_files(path):
    return sorted(Path(path).glob("*.parquet"))


def write_dataset(path, rows, features, rows_per_file, seed, compression):
    """Write the rows, one file per chunk, generated on the workers."""
    import dask.array as da
    import dask.dataframe as dd

    std, mean, divisor = model(features)
    rng = da.random.default_rng(seed)
    Z = rng.standard_normal((rows, features), chunks=(rows_per_file, features))
    X = (Z * std + mean) / divisor
    frame = dd.from_dask_array(X, columns=column_names(features))
    # no dictionary encoding: random floats never repeat, and pyarrow's
    # default dictionary pages made the files 20% larger than the floats and
    # six times slower to write
    frame.to_parquet(path, write_index=False, compression=compression,
                     use_dictionary=False,
                     name_function=lambda i: f"part-{i:06d}.parquet")


def footer_lengths(path):
    """Rows per file, from the Parquet footers only (no data read)."""
    import pyarrow.parquet as pq

    return tuple(pq.read_metadata(f).num_rows for f in parquet_files(path))


def prepare_dataset(data_dir, meta, keep, log):
    """The dataset's folder: reused if ``keep`` and its sidecar matches."""
    path = Path(data_dir) / (f"rows{meta['rows']}-d{meta['features']}-"
                             f"per{meta['rows_per_file']}-{meta['compression']}")
    sidecar = path / SIDECAR
    if keep and sidecar.exists():
        if json.loads(sidecar.read_text()) == meta and sum(footer_lengths(path)) \
                == meta["rows"]:
            log(f"reusing {path}")
            return path, 0.0
        log(f"{path} holds another dataset: rewriting it")
    if path.exists():
        # only a folder this script made (it names its files part-*.parquet)
        others = [p for p in path.iterdir()
                  if p.name != SIDECAR and not p.name.startswith("part-")]
        if others:
            raise SystemExit(f"{path} holds files this script did not write: "
                             f"{others[:3]}; choose another --data-dir")
        shutil.rmtree(path)
    start = time.perf_counter()
    write_dataset(path, meta["rows"], meta["features"], meta["rows_per_file"],
                  meta["seed"], meta["compression"])
    elapsed = time.perf_counter() - start
    sidecar.write_text(json.dumps(meta))
    log(f"wrote {path} in {elapsed:.1f}s")
    return path, elapsed


# --- what the workers do ---------------------------------------------------
class ReadCounter:
    """Worker plugin: counts executed tasks by key name.

    Registered by value (see :func:`register_counter`), so the workers do not
    need to import this script.
    """

    name = "dppca-bench-read-counter"

    def setup(self, worker):
        from collections import Counter

        self.counts = Counter()
        worker.dppca_bench_counts = self.counts

    def transition(self, key, start, finish, **kwargs):
        if start == "executing" and finish == "memory":
            name = key[0] if isinstance(key, tuple) else key
            self.counts[str(name)] += 1


def take_counts(dask_worker):
    """The counts since the last call, by full key name, then reset."""
    counts = dict(dask_worker.dppca_bench_counts)
    dask_worker.dppca_bench_counts.clear()
    return counts


def register_counter(client):
    import cloudpickle
    from distributed.diagnostics.plugin import WorkerPlugin

    module = sys.modules[__name__]
    if __name__ != "__main__":
        cloudpickle.register_pickle_by_value(module)
    try:
        plugin = type("ReadCounterPlugin", (ReadCounter, WorkerPlugin), {})()
        client.register_plugin(plugin)
    finally:
        if __name__ != "__main__":
            cloudpickle.unregister_pickle_by_value(module)


def import_package():
    """Import, on a worker, what the fits will unpickle (a one-off cost)."""
    import sklearn_dppca  # noqa: F401

    try:
        import dask_ml.decomposition  # noqa: F401
    except ImportError:
        pass
    return os.getpid()


# --- measuring processes from the outside ------------------------------------
class Probe:
    """Peak RSS and bytes read of some processes of this machine, per step."""

    def __init__(self, pids):
        self.pids = list(pids)
        self.exact = all(self._reset_peak(pid) for pid in self.pids)
        self._stop = None

    @staticmethod
    def _reset_peak(pid):
        try:
            Path(f"/proc/{pid}/clear_refs").write_text("5")
            return _status_kb(pid, "VmHWM") is not None
        except OSError:
            return False

    @staticmethod
    def _rchar(pid):
        try:
            for line in Path(f"/proc/{pid}/io").read_text().splitlines():
                if line.startswith("rchar:"):
                    return int(line.split()[1])
        except OSError:
            pass
        return None

    @staticmethod
    def _rss(pid):
        import psutil

        return psutil.Process(pid).memory_info().rss

    @staticmethod
    def _cpu(pid):
        import psutil

        times = psutil.Process(pid).cpu_times()
        return times.user + times.system

    def start(self):
        self.rss0 = [self._rss(pid) for pid in self.pids]
        self.rchar0 = [self._rchar(pid) for pid in self.pids]
        self.cpu0 = [self._cpu(pid) for pid in self.pids]
        self.peaks = list(self.rss0)
        if self.exact:
            for pid in self.pids:
                self._reset_peak(pid)
        else:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()

    def _poll(self):
        while not self._stop.wait(0.05):
            for i, pid in enumerate(self.pids):
                self.peaks[i] = max(self.peaks[i], self._rss(pid))

    def stop(self):
        """Per process: peak RSS growth (bytes), bytes read (or None), and
        CPU seconds."""
        if self.exact:
            self.peaks = [_status_kb(pid, "VmHWM") * 1024 for pid in self.pids]
        else:
            self._stop.set()
            self._thread.join()
        rchar = [self._rchar(pid) for pid in self.pids]
        read = [None if a is None or b is None else b - a
                for a, b in zip(self.rchar0, rchar)]
        growth = [max(0, peak - base) for peak, base in zip(self.peaks, self.rss0)]
        cpu = [self._cpu(pid) - before for pid, before in zip(self.pids, self.cpu0)]
        return growth, read, cpu


def _status_kb(pid, field):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return None


# --- the steps -------------------------------------------------------------
def make_steps(path, k, lengths, pca_baselines):
    """``name -> callable``, in the order run: each reads the files afresh."""
    import dask.array as da
    import dask.dataframe as dd

    from sklearn_dppca import CoherentPowerPCA, PrivatePCA

    def frame():
        return dd.read_parquet(path)

    def array():
        return frame().to_dask_array(lengths=lengths)

    def private(**params):
        return dict(n_components=k, epsilon=1.0, delta=1e-6, random_state=0,
                    **params)

    steps = {
        "overhead": lambda: da.zeros(len(lengths), chunks=1).sum().compute(),
        "read": lambda: frame().to_dask_array().sum().compute(),
        "lengths": lambda: frame().to_dask_array(lengths=True),
        "Gram": lambda: (lambda X: (X.T @ X).compute())(frame().to_dask_array()),
        "PrivatePCA numeric": lambda: PrivatePCA(**private(data_norm=1.0)).fit(frame()),
        "PrivatePCA numeric, array": lambda: PrivatePCA(
            **private(data_norm=1.0)).fit(array()),
        'PrivatePCA "auto"': lambda: PrivatePCA(
            **private(data_norm="auto")).fit(frame()),
        "CoherentPowerPCA": lambda: CoherentPowerPCA(
            **private(data_norm=1.0)).fit(frame()),
    }
    if "dask-ml" in pca_baselines:
        from dask_ml.decomposition import PCA

        steps["dask-ml PCA tsqr"] = lambda: PCA(
            n_components=k, svd_solver="tsqr").fit(array())
    if "svd_compressed" in pca_baselines:
        def svd():
            # the mean first, then compute=True: dask re-reads X at each use
            # instead of holding it in memory between uses
            X = array()
            mean = X.mean(axis=0).compute()
            return da.compute(*da.linalg.svd_compressed(
                X - mean, k=k, seed=0, compute=True)[1:])

        steps["svd_compressed"] = svd
    return steps


def choose_pca_baselines(choice, memory_bytes, worker_limit, log):
    """The non-private PCAs to run: ``choice``, or for "auto" both dask-ml's
    (where it imports and fits) and ``svd_compressed``.

    dask-ml 2025.1's ``PCA._fit`` computes ``delayed(lambda x: x.shape)(X)``,
    which concatenates the whole array in one task on one worker (measured:
    a peak of about 2.4 times the dataset there), so "auto" runs it only
    where three times the dataset fits in a worker's memory limit.
    """
    if choice != "auto":
        return () if choice == "none" else (choice,)
    try:
        import dask_ml.decomposition  # noqa: F401
    except ImportError:
        return ("svd_compressed",)
    if worker_limit and 3 * memory_bytes > worker_limit:
        log(f"dask-ml's PCA would hold the whole {memory_bytes / 1e9:.1f} GB in "
            f"one worker (limit {worker_limit / 1e9:.1f} GB): not run")
        return ("svd_compressed",)
    return ("dask-ml", "svd_compressed")


def passes_by_step(counts, npartitions):
    """Per-chunk functions seen (key names without their token), in passes."""
    from dask.utils import key_split

    merged = {}
    for name, count in counts.items():
        if "read_parquet" in name:
            continue
        short = key_split(name)
        merged[short] = merged.get(short, 0) + count
    return {name: round(count / npartitions, 2) for name, count in merged.items()
            if count >= npartitions and name not in COMBINE}


def run_step(client, probe, client_probe, function, npartitions, file_bytes):
    client.run(take_counts)  # discard what came before
    probe.start()
    client_probe.start()
    start = time.perf_counter()
    try:
        function()
        error = None
    except Exception as exc:  # a baseline that fails is reported, not fatal
        error = f"{type(exc).__name__}: {exc}"[:300]
    elapsed = time.perf_counter() - start
    growth, read, cpu = probe.stop()
    client_growth, _, client_cpu = client_probe.stop()
    counts = {}
    for per_worker in client.run(take_counts).values():
        for name, count in per_worker.items():
            counts[name] = counts.get(name, 0) + count
    reads = sum(c for name, c in counts.items() if "read_parquet" in name)
    total_read = None if any(r is None for r in read) else sum(read)
    return dict(
        time=elapsed,
        error=error,
        passes_tasks=reads / npartitions,
        passes_bytes=None if total_read is None else total_read / file_bytes,
        worker_cpu=sum(cpu),
        client_cpu=client_cpu[0],
        worker_growth=growth,
        client_growth=client_growth[0],
        steps=passes_by_step(counts, npartitions),
        # the package's map fused with the read has its own (alias) task too
        gram_passes=sum(c for name, c in counts.items() if "read_parquet" not in name
                        and ("_chunk_gram" in name or "_chunk_centred" in name))
        / npartitions,
    )


# --- summary ---------------------------------------------------------------
def gram_rate(rows, features):
    """On a worker: nominal multiply-adds per second (``rows · features²``
    per ``A.T @ A``) of one partition in memory, best of three."""
    A = np.random.default_rng(0).standard_normal((rows, features))
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        A.T @ A
        best = min(best, time.perf_counter() - start)
    return rows * features**2 / best


def passes(row):
    """Bytes read / dataset size where measured, else the task count."""
    return row["passes_tasks"] if row["passes_bytes"] is None else row["passes_bytes"]


def summarise(rounds, n, d, file_bytes, partition_bytes, rates, threads):
    """Per step over the rounds: median and fastest times, ratios to the Gram,
    worker CPU, passes, peaks, and the cost model's prediction.

    The model uses the fastest read pass and predicts the fastest time: on a
    shared machine other jobs only ever add time. ``rates``: ``gram_rate``
    of each worker; ``threads``: threads per worker.
    """
    def fastest(name, key="time"):
        return min(r[name][key] for r in rounds)

    def median(name, key="time"):
        return statistics.median(r[name][key] for r in rounds)

    t_read, c_read = fastest("read"), median("read", "worker_cpu")
    t_gram, c_gram = fastest("Gram"), median("Gram", "worker_cpu")
    cluster_rate = sum(rates) * threads
    t_flop, c_flop = n * d * d / cluster_rate, n * d * d / statistics.mean(rates)
    summary = {}
    for name in rounds[0]:
        rows = [r[name] for r in rounds]
        peak = max(max(row["worker_growth"]) for row in rows)
        first = rows[0]
        p, g = passes(first), first["gram_passes"] + (name == "Gram")
        modelled = name in PACKAGE_STEPS or name == "Gram"
        summary[name] = dict(
            time=median(name), fastest=fastest(name),
            ratio=statistics.median(r[name]["time"] / r["Gram"]["time"]
                                    for r in rounds),
            ratio_fastest=fastest(name) / t_gram,
            worker_cpu=median(name, "worker_cpu"),
            cpu_ratio=median(name, "worker_cpu") / c_gram,
            passes_tasks=first["passes_tasks"], passes_bytes=first["passes_bytes"],
            gram_passes=g, steps=first["steps"],
            worker_peak_mb=peak / 1e6, worker_peak_partitions=peak / partition_bytes,
            client_peak_mb=max(row["client_growth"] for row in rows) / 1e6,
            model=p * t_read + g * t_flop if modelled else None,
            model_cpu=p * c_read + g * c_flop if modelled else None,
            errors=sorted({row["error"] for row in rows if row["error"]}),
        )
    overhead = summary["overhead"]["fastest"]
    constants = dict(
        t_read=t_read, cpu_read=c_read, t_gram=t_gram, cpu_gram=c_gram,
        overhead=overhead, t_flop=t_flop, cpu_flop=c_flop,
        read_bandwidth_mb_s=file_bytes / (t_read - overhead) / 1e6
        if t_read > overhead else None,
        gram_rate_per_thread=statistics.mean(rates),
        gram_rate_cluster=cluster_rate,
    )
    return summary, constants


TARGETS = {"PrivatePCA numeric": NUMERIC_TARGET, 'PrivatePCA "auto"': AUTO_TARGET}
PACKAGE_STEPS = ("lengths", "PrivatePCA numeric", "PrivatePCA numeric, array",
                 'PrivatePCA "auto"', "CoherentPowerPCA")


def _fmt(value, spec):
    return "n/a" if value is None else format(value, spec)


def markdown(summary, constants, config):
    lines = [
        f"{config['rows']} rows x {config['features']} float64 columns "
        f"({config['memory_bytes'] / 1e9:.2f} GB in memory, "
        f"{config['file_bytes'] / 1e9:.2f} GB on disk, {config['compression']}), "
        f"{config['npartitions']} partitions of {config['rows_per_file']} rows "
        f"({config['partition_bytes'] / 1e6:.0f} MB); {config['workers']} worker "
        f"processes x {config['threads_per_worker']} thread; "
        f"{config['repeats']} round(s)",
        "",
        "| step | passes (bytes) | passes (tasks) | time, median (s) | fastest (s) "
        "| / Gram | / Gram, fastest | target | worker CPU (s) | CPU / Gram "
        "| model (s) | model CPU (s) | worker peak (MB) | in partitions "
        "| client peak (MB) |",
        "| --- |" + " ---: |" * 6 + " --- |" + " ---: |" * 7,
    ]
    for name, row in summary.items():
        target = TARGETS.get(name)
        verdict = "" if target is None else (
            f"≤ {target}: {'met' if row['ratio'] <= target else 'MISSED'}")
        if row["errors"]:
            verdict = "failed: " + "; ".join(row["errors"])
        lines.append(
            f"| {name} | {_fmt(row['passes_bytes'], '.2f')} | "
            f"{row['passes_tasks']:.2f} | {row['time']:.2f} | {row['fastest']:.2f} | "
            f"{row['ratio']:.2f} | {row['ratio_fastest']:.2f} | {verdict} | "
            f"{row['worker_cpu']:.1f} | {row['cpu_ratio']:.2f} | "
            f"{_fmt(row['model'], '.2f')} | {_fmt(row['model_cpu'], '.1f')} | "
            f"{row['worker_peak_mb']:.0f} | {row['worker_peak_partitions']:.1f} | "
            f"{row['client_peak_mb']:.0f} |")
    c = constants
    lines += [
        "",
        f"Cost model: a bare read pass t_read = {c['t_read']:.2f} s, "
        f"{c['cpu_read']:.1f} s of worker CPU (per-pass overhead "
        f"o = {c['overhead']:.2f} s; B_read = "
        f"{_fmt(c['read_bandwidth_mb_s'], '.0f')} MB/s of files); n d^2 at "
        f"F = {c['gram_rate_cluster'] / 1e9:.1f} G multiply-adds/s on the "
        f"cluster ({c['gram_rate_per_thread'] / 1e9:.1f} per thread): "
        f"{c['t_flop']:.2f} s ({c['cpu_flop']:.1f} s CPU). model = passes x "
        "t_read + Gram passes x n d^2 / F (fastest round), the same in CPU "
        "seconds.",
        "",
        "Per-chunk functions (passes): " + "; ".join(
            f"{name}: " + ", ".join(f"{f} {p:g}" for f, p in row["steps"].items())
            for name, row in summary.items() if name in PACKAGE_STEPS),
    ]
    return "\n".join(lines)


def environment(client):
    import dask
    import distributed

    import sklearn_dppca

    env = dict(python=platform.python_version(), machine=platform.machine(),
               cpus=os.cpu_count(), numpy=np.__version__, dask=dask.__version__,
               distributed=distributed.__version__,
               sklearn_dppca=sklearn_dppca.__version__)
    try:
        import pyarrow

        env["pyarrow"] = pyarrow.__version__
    except ImportError:
        pass
    try:
        import dask_ml

        env["dask_ml"] = dask_ml.__version__
    except ImportError:
        pass
    env["worker_blas_env"] = next(iter(client.run(lambda: {
        name: os.environ.get(name) for name in ("OMP_NUM_THREADS",
                                                 "OPENBLAS_NUM_THREADS")}).values()))
    return env


# --- main ------------------------------------------------------------------
def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--rows-per-file", type=int, default=None,
                        help="rows per file and partition (default: 128 MiB)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads-per-worker", type=int, default=1)
    parser.add_argument("--memory-limit", default="auto",
                        help="per worker, as LocalCluster takes it")
    parser.add_argument("--data-dir", default=None,
                        help="where the dataset's folder goes (default: a "
                        "temporary folder)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the files, and reuse matching ones")
    parser.add_argument("--compression", default="snappy",
                        choices=("snappy", "zstd", "gzip", "lz4", "none"))
    parser.add_argument("-k", "--n-components", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pca-baseline", default="auto",
                        choices=("auto", "dask-ml", "svd_compressed", "none"),
                        help="non-private PCA(s) to run (auto: both where "
                        "dask-ml fits, else svd_compressed)")
    parser.add_argument("--quick", action="store_true",
                        help="2·10⁶ rows x 100 (1.6 GB)")
    parser.add_argument("--tiny", action="store_true", help="smoke test size")
    parser.add_argument("--out", default=None,
                        help="folder for results.json and results.md")
    args = parser.parse_args(argv)
    for size in ("quick", "tiny"):
        if getattr(args, size):
            args.rows, args.features, rows_per_file = SIZES[size]
            args.rows_per_file = args.rows_per_file or rows_per_file
    if args.rows_per_file is None:
        # 128 MiB of float64, to two significant digits
        args.rows_per_file = max(1, int(float(
            f"{PARTITION_BYTES / (8 * args.features):.2g}")))
    args.rows_per_file = min(args.rows_per_file, args.rows)
    if args.n_components >= args.features:
        args.n_components = max(1, args.features // 2)
    return args


def main(argv=None):
    args = parse_args(argv)
    import distributed

    from sklearn_dppca import PrivacyLeakWarning

    def log(message):
        print(message, file=sys.stderr, flush=True)

    warnings.simplefilter("ignore", PrivacyLeakWarning)
    meta = dataset_meta(args.rows, args.features, args.rows_per_file, args.seed,
                        args.compression)
    temporary = args.data_dir is None
    data_dir = tempfile.mkdtemp(prefix="dppca-ooc-") if temporary else args.data_dir
    Path(data_dir).mkdir(parents=True, exist_ok=True)
    path = None
    try:
        with distributed.LocalCluster(
            n_workers=args.workers, threads_per_worker=args.threads_per_worker,
            processes=True, memory_limit=args.memory_limit, dashboard_address=":0",
        ) as cluster, distributed.Client(cluster) as client:
            path, write_time = prepare_dataset(data_dir, meta, args.keep, log)
            result = measure(client, path, args, log)
            result["config"]["write_time"] = write_time
    finally:
        if path is not None and not args.keep:
            shutil.rmtree(path, ignore_errors=True)
        if temporary:
            shutil.rmtree(data_dir, ignore_errors=True)
    table = markdown(result["summary"], result["constants"], result["config"])
    print(table)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(result, indent=1))
        (out / "results.md").write_text(table + "\n")
    return result


def measure(client, path, args, log):
    lengths = footer_lengths(path)
    files = parquet_files(path)
    file_bytes = sum(f.stat().st_size for f in files)
    pids = list(client.run(import_package).values())
    register_counter(client)
    probe = Probe(pids)
    client_probe = Probe([os.getpid()])
    memory_bytes = 8 * args.rows * args.features
    worker_limit = min(w["memory_limit"] for w in
                       client.scheduler_info()["workers"].values())
    pca_baselines = choose_pca_baselines(args.pca_baseline, memory_bytes,
                                         worker_limit, log)
    steps = make_steps(path, args.n_components, lengths, pca_baselines)
    npartitions = len(lengths)
    import dask.dataframe as dd

    assert dd.read_parquet(path).npartitions == npartitions == len(files)
    env = environment(client)
    config = dict(vars(args), npartitions=npartitions, file_bytes=file_bytes,
                  memory_bytes=memory_bytes, worker_memory_limit=worker_limit,
                  partition_bytes=8 * args.rows_per_file * args.features,
                  pca_baselines=pca_baselines, exact_probe=probe.exact)
    log(f"{env}\n{npartitions} files, {file_bytes / 1e9:.2f} GB; warm-up read pass")
    steps["read"]()  # warm-up: page cache, worker imports
    rates = list(client.run(gram_rate, args.rows_per_file, args.features).values())
    rounds = []
    for r in range(args.repeats):
        measured = {}
        for name, function in steps.items():
            measured[name] = run_step(client, probe, client_probe, function,
                                      npartitions, file_bytes)
            log(f"round {r + 1}: {name}: {measured[name]['time']:.2f}s, "
                f"{measured[name]['passes_tasks']:.2f} passes")
        rounds.append(measured)
    summary, constants = summarise(rounds, args.rows, args.features, file_bytes,
                                   config["partition_bytes"], rates,
                                   args.threads_per_worker)
    return dict(environment=env, config=config, summary=summary,
                constants=constants, rounds=rounds)


if __name__ == "__main__":
    main()
