"""Peers of this package's estimators, for ``benchmarks/evaluate.py``.

1. :class:`TextbookGaussPCA` — the classical Gaussian mechanism on the
   covariance, the baseline that shows what this package's calibration gains.
2. IBM's diffprivlib ``PCA`` (pure ε-DP, Amin et al. 2019), run in a separate
   virtual environment in a subprocess: :func:`diffprivlib_runner` creates the
   environment on demand and :func:`run_diffprivlib` sends it the data.

The textbook baseline
---------------------
``PrivatePCA`` adds GOE noise of scale ``σ = √2 C² / μ_cov`` (the tight
Frobenius sensitivity ``√2 C²``) with ``μ*`` calibrated exactly (analytic
Gaussian mechanism, docs/privacy.rst §2) and split ``μ_mean² = 0.1 μ*²``,
``μ_cov² = 0.9 μ*²``. The textbook version changes only the two numbers that
set ``σ``:

- the papers' Frobenius sensitivity ``2 C²`` instead of ``√2 C²``;
- the classical calibration ``σ = s · sqrt(2 ln(1.25/δ)) / ε`` (Dwork & Roth
  2014, Thm A.1) instead of the exact one. Written as a GDP parameter it is
  ``μ_tb = s/σ = ε / sqrt(2 ln(1.25/δ))``; this ``μ_tb`` is split in the same
  shares as PrivatePCA's ``μ*``, so that

  ``σ_mean = 2C / (√0.1 μ_tb)`` and ``σ_cov = 2C² / (√0.9 μ_tb)``.

A classical split of ``(ε, δ)`` by basic composition would need even more
noise; the GDP split keeps the baseline as kind to the textbook as possible,
so the gap measured is the calibration and the sensitivity alone. The noise
draws are the same as PrivatePCA's for the same ``random_state`` (same
generator, same calls), only scaled: the comparison is paired.

**Validity.** The classical formula is proven only for ``ε < 1``; it is used
here at every ε, for comparison only. (It really fails there: at ε = 10,
δ = 1e-6 it gives ``μ_tb = 1.887`` where (10, 1e-6)-DP allows at most
``μ* = 1.848``, i.e. 2% too little noise for a single release.) What the
released fit actually spends is known exactly anyway: the releases are
Gaussian with true sensitivities ``2C`` and ``√2 C²``, so the fit is
``μ``-GDP with
``μ² = μ_mean² + (μ_cov_tb / √2)²``; that ``μ`` is what the accountant is
charged and ``privacy_spent_`` converts it back to ``(ε, δ)``. It is smaller
than the nominal ``epsilon``: the difference is the budget the textbook
calibration wastes.

The diffprivlib peer
--------------------
diffprivlib 0.6.6 (the newest release) does not import beside scikit-learn
1.9 (``from sklearn.tree._tree import DOUBLE`` fails in its random forest
module, imported by ``diffprivlib.models``). It imports and works beside
scikit-learn 1.8.0, so :func:`diffprivlib_runner` creates, once, a virtual
environment (default ``benchmarks/.peer-env/``) with ``diffprivlib==0.6.6``,
``scikit-learn==1.8.0`` and the NumPy and SciPy versions of the running
interpreter (so both sides use the same BLAS), and :func:`run_diffprivlib`
runs its fits there in one subprocess per batch: the data goes in a temporary
``.npy`` file, the components and fit times come back as JSON. If the
environment cannot be made (no access to the package index, incompatible
versions), :func:`diffprivlib_runner` returns the reason instead, and the
benchmark marks diffprivlib as unavailable.

Matching parameters. diffprivlib's ``PCA(n_components=k, epsilon=ε,
data_norm=C, bounds=(lo, hi), centered=False, random_state=seed)`` is pure
ε-DP (δ = 0): it spends ε/2 on a private mean (Laplace noise on each
feature, values clipped to ``bounds``, ε/(2d) per feature), then clips the
re-centred rows to norm ``C`` and spends ε/2 on the eigenvalues and the k
eigenvectors of the covariance (Amin et al. 2019: Laplace eigenvalues,
Bingham-sampled eigenvectors, ε/(2(k+1)) each). Our estimators clip rows to
``C``, centre on a private mean (10% of the budget) and clip again to ``C``.
The same ``data_norm`` ``C`` is passed to both, and ``centered=False`` so that
both pay for centring. diffprivlib also needs per-feature ``bounds`` for its
mean: the benchmark passes the public range where there is one (``[0, 1]``
for the digits' pixels) and otherwise ``[−C, C]``, the range implied by the
norm bound alone.

The benchmark also runs a second variant, ``centered=True`` on data centred
by its true mean: not private, it separates the covariance mechanism from
diffprivlib's per-feature Laplace mean.

diffprivlib's Bingham sampler is a rejection sampler whose acceptance rate
collapses as ``ε · n`` grows (a single fit on the 1 797 digits at ε = 1,
k = 2 had not finished after 5 minutes). Every fit therefore runs under a
time limit; a fit over it is reported as timed out, and the remaining fits of
the same group (dataset and variant) at that ε and above (or that data size
and above, for the timing scan), which would only take longer, are skipped
and reported as such; a group whose fits have used a time budget is cut
short the same way. The subprocess can be given a number of BLAS threads
(the benchmark uses one, as for its own fits).
"""

import inspect
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy

from sklearn_dppca import PrivatePCA
from sklearn_dppca._base import PrivacyPlan
from sklearn_dppca.privacy import gdp_epsilon

__all__ = [
    "DIFFPRIVLIB_REQUIREMENT",
    "PEER_SKLEARN_REQUIREMENT",
    "TextbookGaussPCA",
    "diffprivlib_runner",
    "run_diffprivlib",
    "textbook_mu",
]

#: diffprivlib release benchmarked, and the newest scikit-learn it imports beside.
DIFFPRIVLIB_REQUIREMENT = "diffprivlib==0.6.6"
PEER_SKLEARN_REQUIREMENT = "scikit-learn==1.8.0"
DEFAULT_PEER_ENV = Path(__file__).resolve().parent / ".peer-env"


# --------------------------------------------------------------------------
# 1. The textbook Gaussian mechanism
# --------------------------------------------------------------------------
def textbook_mu(epsilon, delta):
    """GDP parameter ``s/σ`` of the classical calibration ``σ = s√(2 ln(1.25/δ))/ε``."""
    return epsilon / math.sqrt(2.0 * math.log(1.25 / delta))


class TextbookGaussPCA(PrivatePCA):
    """PrivatePCA with the textbook Gaussian mechanism (a benchmark baseline).

    Same estimator as :class:`~sklearn_dppca.PrivatePCA` — clipping, private
    centring with 10% of the budget, GOE noise on the scatter matrix, top-k
    eigenvectors — except how ``σ`` is set: Frobenius sensitivity ``2 C²``
    (the papers' bound, not the tight ``√2 C²``) and the classical
    ``σ = 2 C² √(2 ln(1.25/δ)) / ε`` on the covariance's share of the budget
    (see the module docstring for the exact split). The classical formula is
    proven for ``ε < 1`` only; this class applies it at every ε for comparison.

    ``privacy_spent_`` is the *exact* ``(ε, δ)`` of what was released (it is
    below the nominal ``epsilon``), and that is what the accountant is charged.
    Parameters and attributes are PrivatePCA's.
    """

    def _privacy_plan(self, n_samples, n_features):
        mu_tb = textbook_mu(self.epsilon, self.delta)
        shares = self._budget_shares()
        mus = {name: mu_tb * math.sqrt(w) for name, w in shares.items()}
        # PrivatePCA._release draws σ = √2 C² / mus["covariance"]; the textbook
        # σ is 2 C² / μ_cov_tb, i.e. mus["covariance"] = μ_cov_tb / √2. With the
        # true sensitivity √2 C² that is also the release's exact GDP μ.
        mus["covariance"] = mus["covariance"] / math.sqrt(2.0)
        mu_true = math.sqrt(sum(m * m for m in mus.values()))
        spent = (gdp_epsilon(mu_true, self.delta), self.delta)
        return PrivacyPlan(mus=mus, charge={"mu": mu_true}, spent=spent,
                           extra={"nominal": (self.epsilon, self.delta)})


# --------------------------------------------------------------------------
# 2. diffprivlib in its own environment
# --------------------------------------------------------------------------
def _diffprivlib_worker(job_path):
    """Run in the peer environment: fit diffprivlib's PCA on the batch of a job file.

    Imports only the standard library, NumPy and diffprivlib. The job (JSON)
    names the data file (``.npy``), a per-fit time limit and the fits, each
    with ``key``, ``group``, ``level``, ``data`` (index into the data files),
    ``k``, ``epsilon``, ``data_norm``, ``bounds``, ``centered`` (default
    False) and ``seed``. Fits run by
    group, in increasing level; a fit over the limit marks the rest of its
    group at that level and above as skipped, and once a group has used
    ``group_budget_s`` seconds its remaining fits are skipped. Writes the
    results (JSON) to ``job["out"]``.
    """
    import json as _json
    import signal
    import time as _time
    import warnings

    import numpy as _np

    with open(job_path) as f:
        job = _json.load(f)
    out = {"versions": {}, "results": []}
    try:
        import diffprivlib
        import sklearn
        from diffprivlib.models import PCA as DPPCA
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        out["error"] = f"import failed: {type(exc).__name__}: {exc}"
        with open(job["out"], "w") as f:
            _json.dump(out, f)
        return
    out["versions"] = {"diffprivlib": diffprivlib.__version__,
                       "sklearn": sklearn.__version__, "numpy": _np.__version__}
    warnings.simplefilter("ignore")  # PrivacyLeakWarning of fixed seeds etc.

    class _Timeout(Exception):
        pass

    def _alarm(signum, frame):
        raise _Timeout()

    signal.signal(signal.SIGALRM, _alarm)
    arrays = [_np.load(p) for p in job["data"]]
    # Warm-up on a tiny problem (lazy imports, first BLAS call).
    DPPCA(1, epsilon=0.1, data_norm=1.0, bounds=(-1.0, 1.0), random_state=0).fit(
        _np.random.default_rng(0).uniform(-0.1, 0.1, size=(50, 3)))
    limit = float(job["timeout_s"])
    budget = job.get("group_budget_s")
    blocked = {}  # group -> lowest level that timed out
    used = {}  # group -> seconds spent
    for fit in sorted(job["fits"], key=lambda r: (r["group"], r["level"])):
        rec = {"key": fit["key"]}
        group = fit["group"]
        if group in blocked and fit["level"] >= blocked[group]:
            rec.update(status="skipped",
                       reason=f"a fit at an equal or smaller "
                              f"{job.get('level_name', 'level')} timed out "
                              f"(> {limit:g} s)")
            out["results"].append(rec)
            continue
        if budget is not None and used.get(group, 0.0) >= budget:
            rec.update(status="skipped",
                       reason=f"the group's time budget ({budget:g} s) was used up")
            out["results"].append(rec)
            continue
        X = arrays[fit["data"]]
        est = DPPCA(fit["k"], epsilon=fit["epsilon"], data_norm=fit["data_norm"],
                    bounds=tuple(fit["bounds"]), centered=fit.get("centered", False),
                    random_state=fit["seed"])
        signal.setitimer(signal.ITIMER_REAL, limit)
        start = _time.perf_counter()
        try:  # (the finally below adds the time used to the group's)
            est.fit(X)
            seconds = _time.perf_counter() - start
            signal.setitimer(signal.ITIMER_REAL, 0)
            rec.update(status="ok", time_s=seconds,
                       components=est.components_.tolist())
        except _Timeout:
            blocked[fit["group"]] = fit["level"]
            rec.update(status="timeout", reason=f"fit took over {limit:g} s")
        except Exception as exc:  # noqa: BLE001 - reported to the parent
            signal.setitimer(signal.ITIMER_REAL, 0)
            rec.update(status="error", reason=f"{type(exc).__name__}: {exc}")
        finally:
            used[group] = used.get(group, 0.0) + _time.perf_counter() - start
        out["results"].append(rec)
    with open(job["out"], "w") as f:
        _json.dump(out, f)


def _peer_spec():
    return [DIFFPRIVLIB_REQUIREMENT, PEER_SKLEARN_REQUIREMENT,
            f"numpy=={np.__version__}", f"scipy=={scipy.__version__}"]


def _env_python(env):
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def diffprivlib_runner(env=DEFAULT_PEER_ENV, *, create=True, log=print):
    """The Python interpreter of the diffprivlib environment, creating it if needed.

    Parameters
    ----------
    env : path-like
        Folder of the virtual environment (git-ignored; reused while its
        recorded requirements match :func:`_peer_spec`).
    create : bool
        Create the environment (``venv`` + ``pip install``, needs the package
        index) when it is missing.
    log : callable
        Progress messages.

    Returns
    -------
    python : Path or None
        The interpreter, or ``None`` when diffprivlib is unavailable.
    info : dict
        ``versions`` inside the environment, or ``reason`` why it is unavailable.
    """
    env = Path(env)
    python = _env_python(env)
    marker = env / "READY.json"
    spec = _peer_spec()
    if marker.exists():
        recorded = json.loads(marker.read_text())
        if recorded.get("spec") == spec and python.exists():
            return python, {"versions": recorded["versions"], "env": str(env)}
    if not create:
        return None, {"reason": f"no peer environment at {env} (creation disabled)"}
    log(f"Creating the diffprivlib environment in {env} ({', '.join(spec)}); "
        "this needs the package index and takes a minute ...")
    start = time.perf_counter()
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(env)],
                       check=True, capture_output=True, text=True, timeout=300)
        pip = [str(python), "-m", "pip", "install", "--quiet",
               "--disable-pip-version-check"]
        done = subprocess.run(pip + spec, capture_output=True, text=True,
                              timeout=900)
        if done.returncode != 0:  # exact NumPy/SciPy pins unavailable: let pip choose
            done = subprocess.run(pip + spec[:2], capture_output=True, text=True,
                                  timeout=900)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return None, {"reason": "pip could not install "
                          f"{' '.join(spec[:2])}: " + " | ".join(tail)}
        probe = subprocess.run(
            [str(python), "-I", "-c",
             "import json, numpy, sklearn, diffprivlib; "
             "from diffprivlib.models import PCA; "
             "print(json.dumps({'diffprivlib': diffprivlib.__version__, "
             "'sklearn': sklearn.__version__, 'numpy': numpy.__version__}))"],
            capture_output=True, text=True, timeout=300)
        if probe.returncode != 0:
            tail = probe.stderr.strip().splitlines()[-1:]
            return None, {"reason": "diffprivlib does not import in the peer "
                          "environment: " + " | ".join(tail)}
    except (OSError, subprocess.SubprocessError) as exc:
        return None, {"reason": f"could not create the peer environment: {exc}"}
    versions = json.loads(probe.stdout.strip().splitlines()[-1])
    marker.write_text(json.dumps({"spec": spec, "versions": versions}, indent=2))
    log(f"  ... done in {time.perf_counter() - start:.0f} s: {versions}")
    return python, {"versions": versions, "env": str(env)}


def run_diffprivlib(python, arrays, fits, *, timeout_s, group_budget_s=None,
                    level_name="level", blas_threads=None):
    """Fit diffprivlib's PCA in the peer environment.

    Parameters
    ----------
    python : path-like
        Interpreter from :func:`diffprivlib_runner`.
    arrays : list of ndarray
        The data sets; each fit names one by index (``fit["data"]``).
    fits : list of dict
        ``key``, ``group``, ``level``, ``data``, ``k``, ``epsilon``,
        ``data_norm``, ``bounds`` (lo, hi), ``centered`` (optional, default
        False) and ``seed`` of each fit.
    timeout_s : float
        Time limit of one fit (see the module docstring for what follows).
    group_budget_s : float or None
        Time after which the remaining fits of a group are skipped.
    level_name : str
        What ``level`` is, for the skip messages ("epsilon", "size").
    blas_threads : int or None
        Threads of the subprocess's BLAS (``OPENBLAS_NUM_THREADS`` and
        ``OMP_NUM_THREADS``); ``None`` leaves the library default.

    Returns
    -------
    results : dict
        ``key`` -> ``{"status": "ok", "time_s", "components"}`` or
        ``{"status": "timeout" | "skipped" | "error", "reason"}``.
    versions : dict
        Versions inside the peer environment.
    error : str or None
        Why the whole batch failed, if it did.
    """
    source = inspect.getsource(_diffprivlib_worker)
    code = (source + "\nimport sys\n_diffprivlib_worker(sys.argv[1])\n")
    with tempfile.TemporaryDirectory(prefix="dppca-peer-") as tmp:
        paths = []
        for i, a in enumerate(arrays):
            p = os.path.join(tmp, f"data{i}.npy")
            np.save(p, np.ascontiguousarray(a, dtype=np.float64))
            paths.append(p)
        job = {"data": paths, "fits": fits, "timeout_s": timeout_s,
               "group_budget_s": group_budget_s,
               "level_name": level_name, "out": os.path.join(tmp, "out.json")}
        job_path = os.path.join(tmp, "job.json")
        with open(job_path, "w") as f:
            json.dump(job, f)
        # -I: isolated mode, so the peer never imports this checkout's modules.
        budget = 120.0 + len(fits) * (timeout_s + 5.0)
        if group_budget_s is not None:
            groups = len({f["group"] for f in fits})
            budget = min(budget, 120.0 + groups * (group_budget_s + timeout_s + 5.0))
        env = dict(os.environ, PYTHONHASHSEED="0")
        if blas_threads:
            for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                env[var] = str(blas_threads)
        try:
            done = subprocess.run([str(python), "-I", "-c", code, job_path],
                                  capture_output=True, text=True, timeout=budget,
                                  env=env)
        except subprocess.TimeoutExpired:
            return {}, {}, f"the diffprivlib subprocess ran over {budget:.0f} s"
        if done.returncode != 0 or not os.path.exists(job["out"]):
            tail = done.stderr.strip().splitlines()[-2:]
            return {}, {}, "the diffprivlib subprocess failed: " + " | ".join(tail)
        with open(job["out"]) as f:
            out = json.load(f)
    if "error" in out:
        return {}, out.get("versions", {}), out["error"]
    results = {r.pop("key"): r for r in out["results"]}
    for r in results.values():
        if "components" in r:
            r["components"] = np.asarray(r["components"])
    return results, out["versions"], None

