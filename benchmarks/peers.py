"""Peers of this package's estimators, for ``benchmarks/evaluate.py``.

1. :class:`TextbookGaussPCA` — the classical Gaussian mechanism on the
   covariance, the baseline that shows what this package's calibration gains.
2. IBM's diffprivlib ``PCA`` (pure ε-DP, Amin et al. 2019), run in a separate
   virtual environment in a subprocess: :func:`diffprivlib_runner` creates the
   environment on demand and :func:`run_diffprivlib` sends it the data.
3. :class:`AdaptiveOjaPCA`, an earlier free reconstruction of the next two.
4. :class:`DPPCA` (Liu, Kong, Jain & Oh 2022) and :class:`KDPPCA` (Düngler
   & Sanyal 2025), written from the papers for ``bench_frontier.py``.

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
import scipy.sparse.linalg

from sklearn_dppca import PrivatePCA
from sklearn_dppca._base import PrivacyPlan
from sklearn_dppca.privacy import gdp_epsilon, gdp_mu

__all__ = [
    "DIFFPRIVLIB_REQUIREMENT",
    "PEER_SKLEARN_REQUIREMENT",
    "AdaptiveOjaPCA",
    "DPPCA",
    "KDPPCA",
    "TextbookGaussPCA",
    "diffprivlib_runner",
    "run_diffprivlib",
    "run_diffprivlib_pipeline",
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



# --------------------------------------------------------------------------
# 3. diffprivlib's private pipeline (StandardScaler -> PCA -> LogisticRegression)
# --------------------------------------------------------------------------
def _diffprivlib_pipeline_worker(job_path):
    """Run in the peer environment: fit diffprivlib's private pipeline per job.

    Imports only the standard library, NumPy, scikit-learn's ``Pipeline`` and
    diffprivlib. The job (JSON) lists, per pipeline fit, the ``.npy`` files of
    ``X_train``, ``y_train``, ``X_test``, ``y_test``, ``lower``, ``upper`` and
    the scalars ``epsilon``, ``seed``, ``n_components``, ``data_norm``; and a
    per-fit time limit ``timeout_s``. Writes one result per job (JSON) to
    ``job["out"]``.
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
        from diffprivlib import BudgetAccountant
        from diffprivlib.models import PCA as DPPCA
        from diffprivlib.models import LogisticRegression as DPLogisticRegression
        from diffprivlib.models import StandardScaler as DPStandardScaler
        from sklearn.pipeline import Pipeline
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        out["error"] = f"import failed: {type(exc).__name__}: {exc}"
        with open(job["out"], "w") as f:
            _json.dump(out, f)
        return
    out["versions"] = {"diffprivlib": diffprivlib.__version__,
                       "sklearn": sklearn.__version__, "numpy": _np.__version__}
    # diffprivlib 0.6.6's LogisticRegression.__init__ passes multi_class='ovr'
    # to scikit-learn's, which no longer takes it (removed in 1.8). Its fit is
    # its own (one-vs-rest objective perturbation); scikit-learn only supplies
    # decision_function/predict/score, which ignore multi_class. So, only
    # where the keyword is gone, scikit-learn's __init__ is wrapped to drop it.
    import functools
    import inspect as _inspect

    from sklearn.linear_model import LogisticRegression as _SkLR
    if "multi_class" not in _inspect.signature(_SkLR.__init__).parameters:
        _sk_init = _SkLR.__init__

        @functools.wraps(_sk_init)
        def _init(self, *args, multi_class=None, **kwargs):
            _sk_init(self, *args, **kwargs)

        _SkLR.__init__ = _init
        out["versions"]["lr_multi_class_shim"] = True

    class _Timeout(Exception):
        pass

    def _alarm(signum, frame):
        raise _Timeout()

    signal.signal(signal.SIGALRM, _alarm)

    def _pipeline(epsilon, seed, k, data_norm, bounds, accountant):
        # diffprivlib's "Pipelines" notebook: scaler -> PCA(centered=True) ->
        # LR, the same data_norm for PCA and LR, epsilon split in three.
        # PCA gets no bounds: with centered=True it computes no mean, so
        # diffprivlib ignores them.
        e = epsilon / 3.0
        return Pipeline([
            ("scaler", DPStandardScaler(epsilon=e, bounds=bounds,
                                        random_state=seed, accountant=accountant)),
            ("pca", DPPCA(k, epsilon=e, data_norm=data_norm, centered=True,
                          random_state=seed, accountant=accountant)),
            ("lr", DPLogisticRegression(epsilon=e, data_norm=data_norm,
                                        random_state=seed, accountant=accountant)),
        ])

    # Warm-up on a tiny problem (lazy imports, first BLAS call).
    rng = _np.random.default_rng(0)
    Xw = rng.uniform(-1.0, 1.0, size=(60, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _pipeline(1.0, 0, 2, 2.0, (-_np.ones(4), _np.ones(4)),
                  BudgetAccountant()).fit(Xw, (Xw[:, 0] > 0).astype(int))

    limit = float(job["timeout_s"])
    cache = {}

    def _load(p):
        if p not in cache:
            cache[p] = _np.load(p, allow_pickle=False)
        return cache[p]

    for spec in job["jobs"]:
        rec = {"accuracy": None, "fit_seconds": None, "error": None,
               "warnings": [], "epsilon_spent": None}
        start = None
        try:
            X_train, y_train, X_test, y_test, lower, upper = (
                _load(spec[name]) for name in
                ("X_train", "y_train", "X_test", "y_test", "lower", "upper"))
            accountant = BudgetAccountant()
            pipe = _pipeline(float(spec["epsilon"]), int(spec["seed"]),
                             int(spec["n_components"]), float(spec["data_norm"]),
                             (lower, upper), accountant)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for cat in (DeprecationWarning, PendingDeprecationWarning,
                            FutureWarning):  # library housekeeping, not the fit's
                    warnings.simplefilter("ignore", cat)
                signal.setitimer(signal.ITIMER_REAL, limit)
                start = _time.perf_counter()
                pipe.fit(X_train, y_train)
                rec["fit_seconds"] = _time.perf_counter() - start
                signal.setitimer(signal.ITIMER_REAL, 0)
            seen = []
            for w in caught:
                text = f"{w.category.__name__}: {w.message}"
                if text not in seen:
                    seen.append(text)
            rec["warnings"] = seen
            rec["epsilon_spent"] = float(accountant.total()[0])
            rec["accuracy"] = float(pipe.score(X_test, y_test))
        except _Timeout:
            rec["error"] = f"timeout: fit took over {limit:g} s"
        except Exception as exc:  # noqa: BLE001 - reported to the parent
            signal.setitimer(signal.ITIMER_REAL, 0)
            rec["error"] = f"{type(exc).__name__}: {exc}"
        out["results"].append(rec)
    with open(job["out"], "w") as f:
        _json.dump(out, f)


def run_diffprivlib_pipeline(python, jobs, *, timeout_s=600, log=print):
    """Fit diffprivlib's canonical private pipeline in its environment.

    The pipeline is the one of diffprivlib's "Pipelines" notebook:
    ``Pipeline([StandardScaler(bounds=bounds, epsilon=ε/3),
    PCA(n_components, centered=True, data_norm=C, epsilon=ε/3),
    LogisticRegression(data_norm=C, epsilon=ε/3)])`` from
    ``diffprivlib.models``, with a fresh ``diffprivlib.BudgetAccountant`` per
    job and ``random_state=seed`` for all three. Pure ε-DP composes
    additively, so the pipeline is ε-DP in total. The scaler clips each
    feature to ``bounds`` when fitting; the PCA (given data already centred by
    the scaler, so it spends nothing on a mean and ignores bounds) clips the
    scaled rows to norm ``C``; the projected rows then have norm at most
    ``C``, and the logistic regression clips them to ``C`` again (and, for
    its intercept, treats the augmented rows as of norm ``√(C² + 1)``).

    All jobs run in one subprocess of the peer environment, with one BLAS
    thread; the data go there as ``.npy`` files.

    Parameters
    ----------
    python : path-like
        Interpreter from :func:`diffprivlib_runner`.
    jobs : list of dict
        Keys ``X_train``, ``y_train``, ``X_test``, ``y_test`` (NumPy arrays),
        ``epsilon`` (float, the WHOLE pipeline's budget), ``seed`` (int),
        ``n_components`` (int), ``bounds`` (tuple ``(lower, upper)`` of
        per-feature arrays or scalars: public ranges of X) and ``data_norm``
        (float: public norm bound of the PCA's and the regression's inputs,
        in the scaler's standard units).
    timeout_s : float
        Time limit of one pipeline fit (reported as that job's error).
    log : callable
        Progress and failure messages.

    Returns
    -------
    results : list of dict
        One per job, in order: ``{"accuracy": float, "fit_seconds": float,
        "error": str or None}`` (``accuracy`` and ``fit_seconds`` are NaN
        when ``error`` is set), plus ``"warnings"`` (list of str: the
        distinct warnings diffprivlib raised during the fit) and
        ``"epsilon_spent"`` (the job's accountant's total ε, or NaN).
        Deprecation and future warnings are left out of ``"warnings"``.
    """
    def _failed(reason):
        return [{"accuracy": math.nan, "fit_seconds": math.nan, "error": reason,
                 "warnings": [], "epsilon_spent": math.nan} for _ in jobs]

    jobs = list(jobs)
    if not jobs:
        return []
    if python is None:
        return _failed("diffprivlib is unavailable (no peer environment)")
    source = inspect.getsource(_diffprivlib_pipeline_worker)
    code = source + "\nimport sys\n_diffprivlib_pipeline_worker(sys.argv[1])\n"
    with tempfile.TemporaryDirectory(prefix="dppca-peer-pipe-") as tmp:
        saved = {}  # (id(array), dtype) -> path: jobs sharing an array share its file
        keep = []  # keep the originals alive while their ids are keys

        def _save(a, dtype=None):
            key = (id(a), dtype)
            if key not in saved:
                arr = np.asarray(a) if dtype is None else np.asarray(a, dtype=dtype)
                if arr.dtype == object:
                    raise TypeError("object arrays cannot be sent to diffprivlib; "
                                    "use numeric or string labels")
                path = os.path.join(tmp, f"a{len(saved)}.npy")
                np.save(path, np.ascontiguousarray(arr), allow_pickle=False)
                saved[key] = path
                keep.append(a)
            return saved[key]

        specs = []
        try:
            for job in jobs:
                lower, upper = job["bounds"]
                specs.append({
                    "X_train": _save(job["X_train"], np.float64),
                    "y_train": _save(job["y_train"]),
                    "X_test": _save(job["X_test"], np.float64),
                    "y_test": _save(job["y_test"]),
                    "lower": _save(lower, np.float64),
                    "upper": _save(upper, np.float64),
                    "epsilon": float(job["epsilon"]), "seed": int(job["seed"]),
                    "n_components": int(job["n_components"]),
                    "data_norm": float(job["data_norm"]),
                })
        except (KeyError, TypeError, ValueError) as exc:
            reason = f"bad job: {type(exc).__name__}: {exc}"
            log(f"diffprivlib pipeline: {reason}")
            return _failed(reason)
        out_path = os.path.join(tmp, "out.json")
        job_path = os.path.join(tmp, "job.json")
        with open(job_path, "w") as f:
            json.dump({"jobs": specs, "timeout_s": float(timeout_s),
                       "out": out_path}, f)
        budget = 120.0 + len(jobs) * (float(timeout_s) + 5.0)
        env = dict(os.environ, PYTHONHASHSEED="0")
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = "1"
        log(f"diffprivlib pipeline: {len(jobs)} fit(s) in {python} ...")
        try:
            # -I: isolated mode, so the peer never imports this checkout's modules.
            done = subprocess.run([str(python), "-I", "-c", code, job_path],
                                  capture_output=True, text=True, timeout=budget,
                                  env=env)
        except subprocess.TimeoutExpired:
            reason = f"the diffprivlib subprocess ran over {budget:.0f} s"
            log(f"diffprivlib pipeline: {reason}")
            return _failed(reason)
        if done.returncode != 0 or not os.path.exists(out_path):
            tail = done.stderr.strip().splitlines()[-2:]
            reason = "the diffprivlib subprocess failed: " + " | ".join(tail)
            log(f"diffprivlib pipeline: {reason}")
            return _failed(reason)
        with open(out_path) as f:
            out = json.load(f)
    if "error" in out:
        log(f"diffprivlib pipeline: {out['error']}")
        return _failed(out["error"])
    results = []
    for rec in out["results"]:
        for key in ("accuracy", "fit_seconds", "epsilon_spent"):
            rec[key] = math.nan if rec.get(key) is None else float(rec[key])
        results.append(rec)
    if len(results) != len(jobs):  # cannot happen; guard the one-per-job contract
        return _failed("the diffprivlib subprocess returned "
                       f"{len(results)} results for {len(jobs)} jobs")
    errors = sum(r["error"] is not None for r in results)
    log(f"diffprivlib pipeline: done ({out['versions']}); "
        f"{len(results) - errors} ok, {errors} failed")
    return results


# --------------------------------------------------------------------------
# 3. Adaptive-noise private Oja (DP-PCA, k-DP-PCA), reconstructed
# --------------------------------------------------------------------------
class AdaptiveOjaPCA:
    """Single-pass private minibatch Oja with an adaptive clipping scale.

    The earlier reconstruction of the idea of Liu, Kong, Jain & Oh's DP-PCA
    (NeurIPS 2022; ``n_components=1``) and Düngler & Sanyal's k-DP-PCA
    (NeurIPS 2025), kept as a labelled variant ("adaptive Oja (rec.)" in
    ``bench_frontier.py``) beside :class:`DPPCA` and :class:`KDPPCA`
    (section 4), which follow the papers' structure. It is freer than both:
    no private eigenvalue estimate, no deflation, and the constants, the
    schedule and the private range estimator are this benchmark's choices,
    tuned for the peer (``bench_frontier.py`` picks ``n_batches``,
    ``learning_rate`` and ``clip_quantile`` per cell without privacy, on
    seeds of its own). What is kept from the papers: one pass over the rows
    in ``n_batches`` disjoint minibatches; per row the Oja gradient
    ``x xᵀ W``; a noisy mean of the
    gradients whose noise scales with the *typical* gradient, found privately
    in each batch, not with a worst-case bound; the update ``W ← QR(W + η ĝ)``
    (``η = inf``: ``W ← QR(ĝ)``, a minibatch power step).

    Each batch, of ``B`` rows, with ``μ`` the GDP parameter of ``(epsilon,
    delta)``:

    1. A histogram of the gradients' norms ``‖x‖ ‖xᵀW‖`` on the bins
       ``[2^j, 2^{j+1})``, ``j = −30 … 40``, released with Gaussian noise of
       deviation ``√2 / μ_h``: replacing one row moves one count from one bin
       to another, an L2 change of ``√2``. The clipping radius ``τ`` is the
       lower edge of the first bin from which the noisy counts above hold at
       most ``(1 − clip_quantile) B`` rows.
    2. ``ĝ = (Σ clip_τ(x xᵀ W) + G) / B``, ``G`` with entries of deviation
       ``2τ / μ_m``: replacing one row changes the sum by at most ``2τ`` in
       Frobenius norm.

    ``μ_h² + μ_m² = μ²`` (``hist_share`` of it to the histogram), so each batch
    is ``μ``-GDP in its rows; the batches are disjoint and ``W`` depends on the
    earlier batches only through their releases, so the whole fit is ``μ``-GDP
    (parallel composition) and ``(epsilon, delta)``-DP. The rows are taken as
    centred (the papers' setting, ``E x = 0``): nothing is spent on a mean,
    which favours the peer against ours, which centre privately.
    """

    def __init__(self, n_components=2, *, epsilon=1.0, delta=1e-5,
                 n_batches=3, learning_rate=math.inf, clip_quantile=0.35,
                 hist_share=0.1, random_state=None):
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.n_batches = n_batches
        self.learning_rate = learning_rate
        self.clip_quantile = clip_quantile
        self.hist_share = hist_share
        self.random_state = random_state

    _EDGES = 2.0 ** np.arange(-30, 41)

    def _radius(self, norms, mu_h, rng):
        counts = np.histogram(norms, bins=np.concatenate(
            [[0.0], self._EDGES, [np.inf]]))[0].astype(float)
        counts += rng.standard_normal(counts.size) * (math.sqrt(2.0) / mu_h)
        above = np.cumsum(counts[::-1])[::-1]  # rows in bin j and above
        light = np.flatnonzero(above <= (1.0 - self.clip_quantile) * norms.size)
        j = light[0] if light.size else counts.size - 1
        lower = np.concatenate([[0.0], self._EDGES])
        return max(lower[min(j, lower.size - 1)], self._EDGES[0])

    def _noisy_gradient(self, rows, W, mu_h, mu_m, rng):
        """One batch's release: ``(ĝ, τ)``."""
        P = rows @ W
        norms = np.linalg.norm(rows, axis=1) * np.linalg.norm(P, axis=1)
        tau = self._radius(norms, mu_h, rng)
        scale = np.minimum(1.0, tau / np.maximum(norms, 1e-300))
        g = rows.T @ (P * scale[:, None])
        g += rng.standard_normal(g.shape) * (2.0 * tau / mu_m)
        return g / len(rows), tau

    def fit(self, X, y=None):
        X = np.asarray(X, dtype=float)
        n, d = X.shape
        rng = np.random.default_rng(self.random_state)
        mu = gdp_mu(self.epsilon, self.delta)
        mu_h = math.sqrt(self.hist_share) * mu
        mu_m = math.sqrt(1.0 - self.hist_share) * mu
        W = np.linalg.qr(rng.standard_normal((d, self.n_components)))[0]
        for batch in np.array_split(rng.permutation(n), self.n_batches):
            g, _ = self._noisy_gradient(X[batch], W, mu_h, mu_m, rng)
            step = g if math.isinf(self.learning_rate) else W + self.learning_rate * g
            W = np.linalg.qr(step)[0]
        self.components_ = W.T
        return self


# --------------------------------------------------------------------------
# 4. DP-PCA (Liu, Kong, Jain & Oh 2022) and k-DP-PCA (Düngler & Sanyal 2025)
# --------------------------------------------------------------------------
# Written from the papers' descriptions, not from code (none is published).
# The pseudo-code of neither paper could be read verbatim here: the stored
# copies of arXiv 2205.13709 (ar5iv) and 2508.10879 (arxiv.org/html) answer
# with their first page only (abstract, introduction). What is followed is
# the papers' structure as published: DP-PCA = a private top-eigenvalue
# estimate on half of the rows, then ONE pass of minibatch Oja steps
# w ← (w + η_t ĝ_t)/‖·‖ with η_t = α/(λ̂(ξ + t)), each ĝ_t a private mean of
# the batch's gradients x xᵀw whose clipping range is estimated privately
# in that batch from a histogram on dyadic bins (the "adaptive noise");
# k-DP-PCA = that one-vector routine applied k times on disjoint parts of
# the rows, each time on the rows projected off the vectors found so far
# (deflation; Düngler & Sanyal's Algorithm 1 with their "Modified DP-PCA",
# Algorithm 2, as the one-vector routine, Algorithms 6 and 7 its eigenvalue
# and mean estimators). Every constant the papers leave to theory (batch
# size, α, ξ, the clipping radius over the estimated range, the share of
# each release) is a parameter here; bench_frontier.py tunes the open ones
# per cell without privacy, which is kind to the peers.
_DYADIC = 2.0 ** np.arange(-30, 61)  # bin edges [2^j, 2^{j+1})


def _mode_range(values, mu, rng):
    """Upper edge of the noisy histogram's fullest dyadic bin.

    Replacing one row moves at most one value from one bin to another: an L2
    change of √2 in the counts, released with Gaussian noise of deviation
    √2/μ (μ-GDP). The estimate is the upper edge of the bin with the largest
    noisy count (the range estimator of Karwa & Vadhan that both papers use
    for their private range)."""
    counts = np.histogram(values, bins=np.concatenate([[0.0], _DYADIC]))[0]
    counts = counts + rng.standard_normal(counts.size) * (math.sqrt(2.0) / mu)
    return float(_DYADIC[int(np.argmax(counts))])


def _symmetric_noise(d, sigma, rng):
    """Symmetric noise, diagonal deviation σ, off-diagonal σ/√2: the Gaussian
    mechanism of Frobenius sensitivity σμ at μ (the vector of the diagonal
    and √2 × the upper triangle has the Frobenius norm)."""
    G = rng.standard_normal((d, d)) * (sigma / math.sqrt(2.0))
    G = np.triu(G, 1)
    return G + G.T + np.diag(rng.standard_normal(d) * sigma)


def private_top_eigenvalue(rows, mu, rng, *, hist_share=0.1, radius_factor=2.0):
    """λ̂₁ of ``rows``' second moment, μ-GDP in the rows.

    The rows' squared norms give a private range ``τ`` (:func:`_mode_range`,
    ``hist_share`` of μ²); the rows are clipped to squared norm
    ``radius_factor · τ`` (our choice: the papers' constant is a log factor),
    their scatter matrix is released with the Gaussian mechanism (Frobenius
    sensitivity √2 r² for replacement) and λ̂₁ is its top eigenvalue over the
    number of rows."""
    m, d = rows.shape
    mu_h = math.sqrt(hist_share) * mu
    mu_c = math.sqrt(1.0 - hist_share) * mu
    sq = np.einsum("ij,ij->i", rows, rows)
    r2 = radius_factor * _mode_range(sq, mu_h, rng)
    scale = np.sqrt(np.minimum(1.0, r2 / np.maximum(sq, 1e-300)))
    Y = rows * scale[:, None]
    N = _symmetric_noise(d, math.sqrt(2.0) * r2 / mu_c, rng)
    # The top eigenvalue of YᵀY + N by Lanczos, without forming YᵀY.
    op = scipy.sparse.linalg.LinearOperator(
        (d, d), matvec=lambda v: Y.T @ (Y @ v) + N @ v, dtype=float)
    v0 = np.ones(d) / math.sqrt(d)  # a fixed start: the result is noise-free given M
    top = scipy.sparse.linalg.eigsh(op, k=1, which="LA", v0=v0, tol=1e-4,
                                    return_eigenvectors=False)
    return max(float(top[0]) / m, 1e-12)


def private_gradient_mean(rows, w, mu, rng, *, hist_share=0.1, radius_factor=1.0):
    """Private mean of the Oja gradients ``g_i = x_i x_iᵀ w`` of a batch.

    Range: the norms of the differences of disjoint pairs ``g_i − g_{i+B/2}``
    (so the range is that of the gradients' spread, not of their size),
    through :func:`_mode_range` with ``hist_share`` of μ²: one row is in one
    pair, so one value changes. Mean: each ``g_i`` clipped to norm ``r =
    radius_factor · τ``; their sum, whose sensitivity under replacement is
    ``2r``, released with Gaussian noise of deviation ``2r/μ_m`` per entry,
    over ``B``. Centre: 0 (the papers first find a coarse private centre; here
    the gradients' mean ``Σw`` is small against their spread, ‖Σw‖ ≤ λ₁ = 11
    against ‖g − Σw‖ ≈ √(λ d) ≥ 14, so clipping about 0 is what a private
    centre would give, without its budget: kind to the peer)."""
    B = len(rows)
    mu_h = math.sqrt(hist_share) * mu
    mu_m = math.sqrt(1.0 - hist_share) * mu
    G = rows * (rows @ w)[:, None]
    h = B // 2
    tau = _mode_range(np.linalg.norm(G[:h] - G[h:2 * h], axis=1), mu_h, rng)
    r = radius_factor * tau
    norms = np.linalg.norm(G, axis=1)
    G *= np.minimum(1.0, r / np.maximum(norms, 1e-300))[:, None]
    g = G.sum(axis=0) + rng.standard_normal(w.size) * (2.0 * r / mu_m)
    return g / B


def dp_pca_vector(X, mu, rng, *, n_steps=4, alpha=4.0, xi=1.0,
                  eig_fraction=0.5, radius_factor=1.0, hist_share=0.1,
                  project=None):
    """One private top eigenvector: DP-PCA's single pass (see the section note).

    The first ``eig_fraction`` of the rows give λ̂₁
    (:func:`private_top_eigenvalue`); the rest are cut into ``n_steps``
    disjoint minibatches, each giving one step ``w ← (w + η_t ĝ_t)/‖·‖``,
    ``η_t = α/(λ̂₁ (ξ + t))``, ``t = 1 … n_steps``, from ``w₀`` uniform on
    the sphere. Every row is used in one release, so the whole is μ-GDP
    (parallel composition; each later release depends on the earlier ones
    only through their outputs). ``project``: an orthonormal ``(d, j)`` basis
    the rows are projected off first (deflation)."""
    n, d = X.shape
    if project is not None and project.shape[1]:
        X = X - (X @ project) @ project.T
    # at least one row for λ̂₁ and one per step (only tiny inputs need it)
    m = int(np.clip(round(eig_fraction * n), 1, max(1, n - n_steps)))
    lam = private_top_eigenvalue(X[:m], mu, rng, hist_share=hist_share)
    w = rng.standard_normal(d)
    if project is not None and project.shape[1]:
        w -= project @ (project.T @ w)
    w /= np.linalg.norm(w)
    for t, batch in enumerate(np.array_split(np.arange(m, n), n_steps), 1):
        g = private_gradient_mean(X[batch], w, mu, rng, hist_share=hist_share,
                                  radius_factor=radius_factor)
        w = w + alpha / (lam * (xi + t)) * g
        w /= np.linalg.norm(w)
    return w


class DPPCA:
    """Liu, Kong, Jain & Oh's DP-PCA (NeurIPS 2022): the top eigenvector.

    ``(epsilon, delta)``-DP through ``μ = gdp_mu(epsilon, delta)`` for every
    release (exact GDP conversion, where the paper composes classical
    Gaussian mechanisms: kind to the peer). The rows are taken as centred
    (the paper's setting), and shuffled once with ``random_state``.
    Parameters after ``delta`` are :func:`dp_pca_vector`'s. ``components_``
    is ``(1, d)``."""

    n_components = 1

    def __init__(self, *, epsilon=1.0, delta=1e-5, n_steps=4, alpha=4.0,
                 xi=1.0, eig_fraction=0.5, radius_factor=1.0, hist_share=0.1,
                 random_state=None):
        self.epsilon = epsilon
        self.delta = delta
        self.n_steps = n_steps
        self.alpha = alpha
        self.xi = xi
        self.eig_fraction = eig_fraction
        self.radius_factor = radius_factor
        self.hist_share = hist_share
        self.random_state = random_state

    def _params(self):
        return dict(n_steps=self.n_steps, alpha=self.alpha, xi=self.xi,
                    eig_fraction=self.eig_fraction,
                    radius_factor=self.radius_factor, hist_share=self.hist_share)

    def fit(self, X, y=None):
        X = np.asarray(X, dtype=float)
        rng = np.random.default_rng(self.random_state)
        mu = gdp_mu(self.epsilon, self.delta)
        X = X[rng.permutation(len(X))]
        self.components_ = dp_pca_vector(X, mu, rng, **self._params())[None, :]
        return self


class KDPPCA(DPPCA):
    """Düngler & Sanyal's k-DP-PCA (NeurIPS 2025): top ``n_components``.

    The rows are cut into ``n_components`` disjoint parts; part ``j`` runs
    the one-vector routine (:func:`dp_pca_vector`) on its rows projected off
    the ``j − 1`` vectors already found, and the vector found is
    re-orthogonalised against them. Disjoint parts: the whole is μ-GDP.
    ``n_components = 1`` is :class:`DPPCA`."""

    def __init__(self, n_components=2, *, epsilon=1.0, delta=1e-5, n_steps=4,
                 alpha=4.0, xi=1.0, eig_fraction=0.5, radius_factor=1.0,
                 hist_share=0.1, random_state=None):
        super().__init__(epsilon=epsilon, delta=delta, n_steps=n_steps,
                         alpha=alpha, xi=xi, eig_fraction=eig_fraction,
                         radius_factor=radius_factor, hist_share=hist_share,
                         random_state=random_state)
        self.n_components = n_components

    def fit(self, X, y=None):
        X = np.asarray(X, dtype=float)
        rng = np.random.default_rng(self.random_state)
        mu = gdp_mu(self.epsilon, self.delta)
        X = X[rng.permutation(len(X))]
        U = np.zeros((X.shape[1], 0))
        for part in np.array_split(np.arange(len(X)), self.n_components):
            w = dp_pca_vector(X[part], mu, rng, project=U, **self._params())
            w -= U @ (U.T @ w)
            U = np.column_stack([U, w / np.linalg.norm(w)])
        self.components_ = U.T
        return self
