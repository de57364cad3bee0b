"""Benchmark ``PrivatePCA.fit`` on PyTorch CUDA tensors (Array API dispatch).

Compared, for each shape ``n x d`` (default 10 000 000 x 100 and
1 000 000 x 1000, ``k = 10``) and each dtype (float32, float64):

- ``PrivatePCA(n_components=k, epsilon=1.0, delta=1e-6, data_norm=C)`` fitted
  on a torch tensor on the device, under
  ``sklearn.config_context(array_api_dispatch=True)``;
- ``sklearn.decomposition.PCA(n_components=k, svd_solver="covariance_eigh")``
  on the same tensor, same context (scikit-learn's own Array API path);
- ``PrivatePCA`` fitted on the same data as a NumPy array on the host (the
  NumPy engine, every CPU core).

Data: Gaussian rows with a decaying spectrum (column ``j`` has variance
``1/j``) and a non-zero mean, generated on the device and scaled so the median
row norm is 1; ``C`` is the 99th-percentile row norm (about 1% of rows
clipped), computed from the data once, which is fine for a benchmark (not for
privacy).

Timing: ``time.perf_counter`` around ``fit`` with ``torch.cuda.synchronize()``
on both sides; one warm-up fit of each estimator, then ``--repeats`` rounds
that alternate PrivatePCA and PCA on the device in one process, so that drift
hits both; then a warm-up and ``--cpu-repeats`` fits on the host. Reported:
median times, the median per-round ratio PrivatePCA / PCA on the device, the
ratio host / device of PrivatePCA, and the device's peak extra memory of a
PrivatePCA fit as a multiple of the input's size.

``--accuracy`` measures instead what float32 costs in the Gram matrix: the
centred, clipped ``Σ y yᵀ`` of the float32 data against that of the same rows
in float64, as a relative Frobenius error and as the largest entry error over
the noise scale ``σ`` of ``PrivatePCA`` at ``ε = 1``, ``δ = 1e-6``.

Without CUDA (or without PyTorch) it prints why and exits 0. ``--device cpu``
runs the same comparison on CPU tensors, for a smoke test on small shapes::

    python benchmarks/bench_gpu.py                      # on a CUDA machine
    python benchmarks/bench_gpu.py --dtypes float32 --repeats 3
    python benchmarks/bench_gpu.py --device cpu --n 20000 --d 50 --repeats 1
    python benchmarks/bench_gpu.py --accuracy --device cpu --n 200000 --d 100
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings

# scikit-learn refuses Array API dispatch unless SciPy's support is on, and
# SciPy reads this once, at import: before anything imports SciPy.
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import numpy as np  # noqa: E402

DEFAULT_SHAPES = ["10000000x100", "1000000x1000"]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="torch device (cuda, cpu)")
    parser.add_argument("--shapes", nargs="+", default=None, metavar="NxD",
                        help=f"shapes (default {' '.join(DEFAULT_SHAPES)})")
    parser.add_argument("--n", type=int, help="rows (one shape, with --d)")
    parser.add_argument("--d", type=int, help="features (one shape, with --n)")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    parser.add_argument("-k", "--n-components", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5,
                        help="alternating rounds on the device")
    parser.add_argument("--cpu-repeats", type=int, default=3,
                        help="host fits (0: skip the host comparison)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data")
    parser.add_argument("--json", metavar="PATH", help="also write results as JSON")
    parser.add_argument("--accuracy", action="store_true",
                        help="float32 against float64 Gram matrices, no timing")
    args = parser.parse_args(argv)
    if (args.n is None) != (args.d is None):
        parser.error("--n and --d go together")
    if args.n is not None:
        args.shapes = [f"{args.n}x{args.d}"]
    args.shapes = [tuple(int(v) for v in s.lower().split("x"))
                   for s in (args.shapes or DEFAULT_SHAPES)]
    return args


def make_data(torch, n, d, dtype, device, seed):
    """Gaussian rows (column j of variance 1/j, mean 0.1), median norm 1; and C."""
    gen = torch.Generator(device=device).manual_seed(seed)
    X = torch.randn(n, d, generator=gen, device=device, dtype=dtype)
    X *= torch.rsqrt(torch.arange(1, d + 1, device=device, dtype=dtype))
    X += 0.1
    norms = torch.linalg.vector_norm(X, dim=1)
    X /= torch.median(norms)
    norms /= torch.median(norms)
    data_norm = float(torch.kthvalue(norms.cpu(), max(1, int(0.99 * n))).values)
    return X, data_norm


def timed(torch, device, fit):
    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    sync()
    start = time.perf_counter()
    fit()
    sync()
    return time.perf_counter() - start


def bench(torch, n, d, dtype_name, args):
    from sklearn import config_context
    from sklearn.decomposition import PCA

    from sklearn_dppca import PrivatePCA

    device = torch.device(args.device)
    dtype = getattr(torch, dtype_name)
    X, C = make_data(torch, n, d, dtype, device, args.seed)
    k = args.n_components

    def private():
        PrivatePCA(n_components=k, epsilon=1.0, delta=1e-6, data_norm=C).fit(X)

    def reference():
        PCA(n_components=k, svd_solver="covariance_eigh").fit(X)

    with config_context(array_api_dispatch=True):
        timed(torch, device, private)  # warm-up: kernels, cuBLAS handles
        timed(torch, device, reference)
        rounds = [(timed(torch, device, private), timed(torch, device, reference))
                  for _ in range(args.repeats)]
        peak = None
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            before = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
            private()
            torch.cuda.synchronize(device)
            peak = (torch.cuda.max_memory_allocated(device) - before) / (
                X.element_size() * X.nelement())
    result = {
        "n": n, "d": d, "k": k, "dtype": dtype_name, "device": str(device),
        "private_s": statistics.median(r[0] for r in rounds),
        "sklearn_s": statistics.median(r[1] for r in rounds),
        "ratio": statistics.median(r[0] / r[1] for r in rounds),
        "peak_extra_memory": peak,
    }
    if args.cpu_repeats > 0:
        host = X.cpu().numpy()
        del X
        if device.type == "cuda":
            torch.cuda.empty_cache()
        times = []
        for _ in range(args.cpu_repeats + 1):  # the first is a warm-up
            start = time.perf_counter()
            PrivatePCA(n_components=k, epsilon=1.0, delta=1e-6, data_norm=C).fit(host)
            times.append(time.perf_counter() - start)
        times = times[1:]
        result["host_s"] = statistics.median(times)
        result["host_over_device"] = result["host_s"] / result["private_s"]
    return result


def gram_accuracy(torch, n, d, args):
    """float32 against float64 centred clipped Gram matrix of the same rows."""
    from sklearn import config_context
    from sklearn.externals.array_api_compat import array_namespace

    from sklearn_dppca._array_api import ArrayAPIRows
    from sklearn_dppca.privacy import gdp_mu

    device = torch.device(args.device)
    X, C = make_data(torch, n, d, torch.float64, device, args.seed)
    mean = X.mean(dim=0).cpu().numpy()
    grams = []
    with config_context(array_api_dispatch=True):
        for data in (X, X.to(torch.float32)):
            engine = ArrayAPIRows(data, array_namespace(data), device)
            grams.append(engine.gram(C, mean).to(torch.float64).cpu().numpy())
    exact, rounded = grams
    sigma = 2.0**0.5 * C**2 / (gdp_mu(1.0, 1e-6) * 0.9**0.5)
    return {
        "n": n, "d": d, "device": str(device),
        "relative_frobenius": float(np.linalg.norm(rounded - exact)
                                    / np.linalg.norm(exact)),
        "max_entry_over_sigma": float(np.abs(rounded - exact).max() / sigma),
    }


def environment(torch, device):
    import sklearn

    env = {"python": platform.python_version(), "machine": platform.machine(),
           "cpus": os.cpu_count(), "numpy": np.__version__,
           "sklearn": sklearn.__version__, "torch": torch.__version__}
    if device == "cuda":
        env["gpu"] = torch.cuda.get_device_name(0)
        env["cuda"] = torch.version.cuda
    return env


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("bench_gpu: PyTorch is not installed; nothing to time.")
        return 0
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("bench_gpu: no CUDA device is available (torch.cuda.is_available() "
              "is False); nothing to time. Use --device cpu for a smoke run.")
        return 0
    env = environment(torch, args.device)
    print("environment: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    results = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PrivacyLeakWarning: none expected
        for n, d in args.shapes:
            if args.accuracy:
                r = gram_accuracy(torch, n, d, args)
                results.append(r)
                print(f"{n}x{d} on {r['device']}: float32 Gram relative error "
                      f"{r['relative_frobenius']:.2e} (Frobenius), largest entry "
                      f"error {r['max_entry_over_sigma']:.2e} sigma", flush=True)
                continue
            for dtype_name in args.dtypes:
                r = bench(torch, n, d, dtype_name, args)
                results.append(r)
                line = (f"{n}x{d} {dtype_name} on {r['device']}: PrivatePCA "
                        f"{r['private_s']:.4f} s, PCA(covariance_eigh) "
                        f"{r['sklearn_s']:.4f} s, ratio {r['ratio']:.2f}")
                if "host_s" in r:
                    line += (f"; host PrivatePCA {r['host_s']:.3f} s "
                             f"({r['host_over_device']:.1f}x the device fit)")
                if r["peak_extra_memory"] is not None:
                    peak = r["peak_extra_memory"]
                    line += f"; device peak extra memory {peak:.2f}x X"
                print(line, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
