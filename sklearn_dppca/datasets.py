"""Data for testing and benchmarking private PCA.

- :func:`make_coherent_low_rank` — synthetic rows with a planted rank-k
  principal subspace whose coherence, eigengap and top-k eigenvalue spread
  are controlled (the quantities the error bounds of
  :ref:`privacy-estimators` and :ref:`privacy-utility` depend on), scaled
  into the ball of radius ``data_norm``.
- :func:`load_real_dataset` and :func:`load_digits_for_pca` — scikit-learn's
  bundled real datasets, scaled for private PCA, with a recommended
  ``data_norm``.

Import it explicitly: ``from sklearn_dppca.datasets import ...``.

This module imports nothing from the estimators.
"""

import math
from numbers import Integral, Real

import numpy as np
from sklearn import datasets as _sk_datasets
from sklearn.utils import Bunch

from .noise import make_generator

__all__ = [
    "REAL_DATASETS",
    "STANDARDISED_NORM_FACTOR",
    "load_digits_for_pca",
    "load_real_dataset",
    "make_coherent_low_rank",
]

# Rows per block when generating: about 32 MiB of float64.
_BLOCK_BYTES = 32 * 2**20


def _sq_norms(block):
    return np.einsum("ij,ij->i", block, block)


# --------------------------------------------------------------------------
# Synthetic data
# --------------------------------------------------------------------------
def _check_int(value, name, low, high=None):
    ok = isinstance(value, Integral) and not isinstance(value, bool)
    if ok:
        ok = value >= low and (high is None or value <= high)
    if not ok:
        bounds = f"≥ {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be an integer {bounds}; got {value!r}.")
    return int(value)


def _check_real(value, name, low, high, low_open=False, high_open=False):
    ok = isinstance(value, Real) and not isinstance(value, bool)
    if ok:
        v = float(value)
        ok = (v > low if low_open else v >= low) and (
            v < high if high_open else v <= high
        )
    if not ok:
        interval = (
            ("(" if low_open else "[") + f"{low}, {high}" + (")" if high_open else "]")
        )
        raise ValueError(f"{name} must be a real number in {interval}; got {value!r}.")
    return float(value)


def _left_basis(rng, n_samples, n_components, coherence):
    """Planted ``U`` (n × k): orthonormal, mean-zero columns.

    ``coherence=None``: i.i.d. Gaussian rows on all ``n`` rows. Otherwise the
    signal lives on ``m = k / c²`` random rows (at least ``k``), each of the
    same norm ``≈ √(k/m)`` in a uniformly random direction of ``R^k``, so
    that every unit vector of the span, whatever basis an SVD picks, has its
    largest entry close to ``√(k/m) ≈ c``. The columns are then centred over
    all ``n`` rows (the other rows receive a tiny constant, ``O(√k / n)``) and
    made orthonormal by their polar factor, which keeps the rows' directions.
    """
    k = n_components
    if coherence is None:
        rows = np.arange(n_samples)
        block = rng.standard_normal((n_samples, k))
    else:
        m = int(min(n_samples, max(k, round(k / coherence**2))))
        rows = np.sort(rng.choice(n_samples, size=m, replace=False))
        block = rng.standard_normal((m, k))
        block /= np.linalg.norm(block, axis=1, keepdims=True)
    U = np.zeros((n_samples, k))
    U[rows] = block
    U -= U.mean(axis=0)
    left, _, right = np.linalg.svd(U, full_matrices=False)
    return left @ right, len(rows)


def make_coherent_low_rank(
    n_samples,
    n_features,
    n_components=5,
    *,
    coherence=None,
    eigengap=0.5,
    spread=1.0,
    data_norm=1.0,
    return_info=False,
    random_state=None,
):
    """Rows with a planted principal subspace of controlled coherence.

    The rows are ``X = U diag(σ) V + E``, scaled so that the longest has
    norm ``data_norm``:

    - ``V`` (``components``, ``k × d``) are uniformly random orthonormal
      principal directions;
    - ``U`` (``n × k``, orthonormal, mean-zero columns) sets how the signal
      is spread over the rows, i.e. the coherence ``‖U‖_∞ = max |U_ij|``;
    - ``σ`` (``k``) sets the top-k eigenvalues;
    - ``E`` is Gaussian noise, isotropic in the orthogonal complement of the
      span of ``V``: each row ``~ N(0, τ² (I − VᵀV))``.

    Because the noise is orthogonal to ``V``, every row's coordinates on the
    principal directions are exactly the signal, ``⟨x_i, v_j⟩ = σ_j U_ij``
    (the identity ``U_ij = ⟨a_i, v_j⟩ / σ_j`` of the coherence-adaptive
    power-method paper behind CoherentPowerPCA), and the
    coherence of the data's own top-k left singular vectors tracks ``U``'s
    at every eigengap the sample can resolve.

    **The population.** ``E[XᵀX] / n = Vᵀ diag(λ_1..λ_k) V + λ_{k+1}(I − VᵀV)``
    with ``λ_j = σ_j² / n`` and ``λ_{k+1} = τ²``, the expectation taken over
    the noise. The signal's rows have mean zero exactly (``U``'s columns are
    centred) and the noise has mean zero, so this is also the covariance. Its
    eigenvalues are returned as ``info.eigenvalues``; ``components`` are its
    top-k eigenvectors (any orthonormal basis of the top-k eigenspace when
    ``spread=1``, where the top-k eigenvalues are equal), and

    - ``λ_1 / λ_k = spread``, with ``λ_j`` decaying geometrically in between;
    - ``(λ_k − λ_{k+1}) / λ_k = eigengap``; all ``d − k`` bottom eigenvalues
      equal ``λ_{k+1}``, so the eigengap also fixes the noise level.

    **Scale.** After the draw, everything is multiplied by one factor so
    that the longest row has norm exactly ``data_norm``; the clipping
    ``x ↦ x · min(1, C/‖x‖)`` that follows only absorbs round-off. The
    rows thus fill the ball as a real deployment's ``data_norm`` would, and
    the absolute eigenvalues follow from the other parameters: coherent data
    must fit its spiky rows into the ball, so its eigenvalues are small, as
    in real data. The factor is the one quantity read from the noise draw;
    the population is stated for the model scaled by it.

    **Coherence.** ``coherence=None`` draws i.i.d. Gaussian rows of ``U``
    (incoherent, like natural data): ``‖U‖_∞ ≈ √(2 ln(nk) / n)``. A value
    ``c`` puts the signal on ``m ≈ k / c²`` random rows (at least ``k``), each
    carrying an equal share ``√(k/m)`` of ``U``'s norm in a random direction
    of ``R^k``, so that the largest entry is about ``c`` whatever basis of the
    subspace an SVD returns (a rotation of the basis rotates every row, and
    no row is longer than the others). ``c = √(k/n)`` spreads the signal
    evenly over all rows, the least coherence a generic subspace keeps in
    every basis. Measured with :func:`sklearn_dppca.metrics.coherence` on
    ``X`` (top ``k``), the realised coherence lies within about
    ``[0.7c, 1.4c]`` for eigengaps ≥ 0.5, both spreads and all ``c``. At
    small eigengaps the noise takes over: once ``λ_k / λ_{k+1}`` approaches
    the sampling resolution ``1 + √(d/n)``, the data's top-k singular vectors
    are mostly noise and its coherence is the noise's, ``≈ √(2 ln(nk) / n)``.

    Parameters
    ----------
    n_samples : int
        Number of rows ``n`` (people), ``> n_components``.
    n_features : int
        Number of features ``d``, ``> n_components``.
    n_components : int, default=5
        Rank ``k`` of the planted signal.
    coherence : float, default=None
        Target ``‖U‖_∞`` in ``[√(k/n), 1]``; ``None`` for Gaussian
        (incoherent) ``U``.
    eigengap : float, default=0.5
        Relative gap ``(λ_k − λ_{k+1}) / λ_k`` in ``(0, 1]``. ``1`` gives
        noise-free rank-k data.
    spread : float, default=1.0
        Ratio ``λ_1 / λ_k ≥ 1`` of the top-k eigenvalues. ``1`` gives ``k``
        equal eigenvalues (the top-k variance spread evenly); larger values
        make them decay geometrically from ``λ_1`` to ``λ_1 / spread``.
    data_norm : float, default=1.0
        Norm bound ``C`` of the rows (the estimators' ``data_norm``).
    return_info : bool, default=False
        Also return a :class:`~sklearn.utils.Bunch` describing the data.
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        Randomness of the construction; an int makes it deterministic.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        The rows, each of norm at most ``data_norm``.
    components : ndarray of shape (n_components, n_features)
        The true principal directions ``V``, orthonormal rows, ordered by
        decreasing eigenvalue (compare them with an estimator's
        ``components_`` using :mod:`sklearn_dppca.metrics`).
    info : Bunch
        Only when ``return_info=True``, with

        - ``coherence`` : float, ``‖U‖_∞`` of the planted ``U``;
        - ``eigenvalues`` : ndarray of shape (n_features,), population
          eigenvalues ``λ_1 ≥ … ≥ λ_d`` (per row, in the units of ``X``);
        - ``singular_values`` : ndarray of shape (n_components,), ``σ`` of
          the noise-free signal ``U diag(σ) V``;
        - ``left_singular_vectors`` : ndarray of shape (n_samples,
          n_components), the planted ``U``;
        - ``noise_std`` : float, ``τ``, the noise's standard deviation along
          each direction orthogonal to ``V``;
        - ``n_signal_rows`` : int, rows that carry the signal (``m``; the
          others get only the ``O(√k / n)`` constant that centres ``U``).

    Raises
    ------
    ValueError
        If a parameter is out of range.

    Notes
    -----
    Time and memory are ``O(n d)``: the noise is drawn and projected in row
    blocks straight into ``X``, and no ``n × n`` matrix is formed
    (``n = 100 000``, ``d = 1000`` takes a few seconds, dominated by the
    Gaussian draws and the 800 MB of ``X`` itself). The realised coherence
    of ``X`` (:func:`sklearn_dppca.metrics.coherence` with
    ``n_components=k``) differs from ``info.coherence`` only by how the SVD
    rotates a basis of the subspace and by the noise's small perturbation
    of it.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.datasets import make_coherent_low_rank
    >>> from sklearn_dppca.metrics import coherence
    >>> X, V, info = make_coherent_low_rank(
    ...     2000, 20, 3, coherence=0.2, eigengap=0.5, return_info=True,
    ...     random_state=0)
    >>> X.shape, V.shape
    ((2000, 20), (3, 20))
    >>> bool((np.linalg.norm(X, axis=1) <= 1.0 + 1e-12).all())
    True
    >>> bool(0.1 < coherence(X, n_components=3) <= 0.2)
    True
    >>> lam = info.eigenvalues
    >>> round(float((lam[2] - lam[3]) / lam[2]), 12)  # the eigengap
    0.5
    """
    n = _check_int(n_samples, "n_samples", 2)
    d = _check_int(n_features, "n_features", 2)
    k = _check_int(n_components, "n_components", 1, min(n, d) - 1)
    if coherence is not None:
        c_min = math.sqrt(k / n)
        coherence = _check_real(coherence, "coherence", 0.0, 1.0, low_open=True)
        if coherence < c_min * (1.0 - 1e-9):
            raise ValueError(
                f"coherence must be None or in [√(k/n), 1] = [{c_min:.4g}, 1] for "
                f"n_samples={n}, n_components={k}; got {coherence!r}. (No "
                "rank-k subspace keeps a smaller coherence in every basis.)"
            )
    eigengap = _check_real(eigengap, "eigengap", 0.0, 1.0, low_open=True)
    spread = _check_real(spread, "spread", 1.0, math.inf, high_open=True)
    data_norm = _check_real(
        data_norm, "data_norm", 0.0, math.inf, low_open=True, high_open=True
    )
    rng = make_generator(random_state)

    # Population eigenvalues before scaling: λ_1 = 1, geometric to 1/spread.
    top = spread ** (-np.arange(k) / (k - 1)) if k > 1 else np.ones(1)
    tail = (1.0 - eigengap) * top[-1]  # λ_{k+1}: the noise variance τ²

    basis, _ = np.linalg.qr(rng.standard_normal((d, k)))  # V as d × k columns
    components = np.ascontiguousarray(basis.T)
    U, n_signal_rows = _left_basis(rng, n, k, coherence)
    singular_values = np.sqrt(n * top)
    tau = math.sqrt(tail)

    weighted = U * singular_values
    X = np.empty((n, d))
    blocks = [
        (start, min(start + step, n))
        for step in [max(1, _BLOCK_BYTES // (8 * d))]
        for start in range(0, n, step)
    ]
    max_sq_norm = 0.0
    for start, stop in blocks:
        block = X[start:stop]
        if tau > 0.0:
            rng.standard_normal(out=block)
            # τ (G − G V Vᵀ) + W Vᵀ: noise ⟂ span(V) plus signal, one product.
            coef = weighted[start:stop] - tau * (block @ basis)
            block *= tau
            block += coef @ components
        else:
            np.matmul(weighted[start:stop], components, out=block)
        max_sq_norm = max(max_sq_norm, float(np.max(_sq_norms(block))))

    # One scale puts the longest row on the sphere of radius C; the clipping
    # x ↦ x · min(1, C/‖x‖) then only absorbs round-off.
    scale = data_norm / math.sqrt(max_sq_norm)
    for start, stop in blocks:
        block = X[start:stop]
        block *= scale
        norms = np.sqrt(_sq_norms(block))
        over = norms > data_norm
        if over.any():
            block[over] *= (data_norm / norms[over])[:, None]

    if not return_info:
        return X, components
    eigenvalues = np.concatenate([top, np.full(d - k, tail)]) * scale**2
    info = Bunch(
        coherence=float(np.max(np.abs(U))),
        eigenvalues=eigenvalues,
        singular_values=singular_values * scale,
        left_singular_vectors=U,
        noise_std=tau * scale,
        n_signal_rows=n_signal_rows,
    )
    return X, components, info


# --------------------------------------------------------------------------
# Real data
# --------------------------------------------------------------------------
#: Recommended ``data_norm`` of standardised data is this times ``√d``: a
#: standardised row has mean squared norm ``d``, and on the bundled datasets
#: a radius ``2√d`` clips 2.8 % of the breast-cancer rows, 0.2 % of the
#: diabetes rows and none of the wine rows.
STANDARDISED_NORM_FACTOR = 2.0

#: Names accepted by :func:`load_real_dataset`.
REAL_DATASETS = ("digits", "breast_cancer", "wine", "diabetes")

_LOADERS = {
    "breast_cancer": (
        _sk_datasets.load_breast_cancer,
        "Wisconsin breast cancer: 30 features of cell nuclei",
    ),
    "wine": (_sk_datasets.load_wine, "Wine recognition: 13 chemical measurements"),
    "diabetes": (
        lambda: _sk_datasets.load_diabetes(scaled=False),
        "Diabetes: age, sex, body-mass index, blood pressure and 6 serum "
        "measurements, unscaled",
    ),
}


def load_real_dataset(name):
    """A bundled scikit-learn dataset, scaled for private PCA.

    ``"digits"`` has a public scale: pixels take values in ``[0, 16]``, so
    the data is divided by 16 and every row, in ``[0, 1]^64``, has norm at
    most ``√64 = 8``, the recommended ``data_norm`` (no row is ever clipped;
    a smaller public radius clips the densest images but adds less noise).

    ``"breast_cancer"``, ``"wine"`` and ``"diabetes"`` have no public range,
    so each feature is standardised (mean 0, variance 1) **with the data's
    own mean and standard deviation. That scaling is not private**: it reads
    every row, and the released components then leak through it. It serves
    benchmarks and examples only; a real deployment must scale with public
    ranges (domain knowledge, published reference values) instead. The
    recommended ``data_norm`` is ``STANDARDISED_NORM_FACTOR · √d = 2√d``
    (see :data:`STANDARDISED_NORM_FACTOR` for how many rows it clips).

    The data comes with scikit-learn: nothing is downloaded.

    Parameters
    ----------
    name : {"digits", "breast_cancer", "wine", "diabetes"}

    Returns
    -------
    data : Bunch
        With ``data`` (ndarray of shape (n_samples, n_features), float64),
        ``data_norm`` (float, the recommended norm bound), ``feature_names``
        (ndarray of str), ``description`` (str: source, scaling, norm bound),
        ``target`` (ndarray of shape (n_samples,), the dataset's labels or
        regression target, unscaled) and ``public_scaling`` (bool, whether
        the scaling used public knowledge only).

    Raises
    ------
    ValueError
        If ``name`` is not one of :data:`REAL_DATASETS`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.datasets import load_real_dataset
    >>> wine = load_real_dataset("wine")
    >>> wine.data.shape, round(wine.data_norm, 3), wine.public_scaling
    ((178, 13), 7.211, False)
    >>> bool(np.allclose(wine.data.mean(axis=0), 0.0))
    True
    """
    if name == "digits":
        raw = _sk_datasets.load_digits()
        d = raw.data.shape[1]
        return Bunch(
            data=raw.data / 16.0,
            data_norm=float(math.sqrt(d)),
            feature_names=np.asarray(raw.feature_names, dtype=object),
            description=(
                "Digits: 1797 handwritten digits as 8×8 images (64 pixels). "
                "Pixel values in the public range [0, 16] are divided by 16, "
                "so rows lie in [0, 1]^64 and have norm at most 8 = data_norm. "
                "This scaling uses public knowledge only."
            ),
            target=raw.target,
            public_scaling=True,
        )
    if not isinstance(name, str) or name not in _LOADERS:
        raise ValueError(f"name must be one of {REAL_DATASETS}; got {name!r}.")
    loader, title = _LOADERS[name]
    raw = loader()
    X = np.asarray(raw.data, dtype=np.float64)
    n, d = X.shape
    std = X.std(axis=0)
    X = (X - X.mean(axis=0)) / np.where(std > 0.0, std, 1.0)
    data_norm = STANDARDISED_NORM_FACTOR * math.sqrt(d)
    return Bunch(
        data=X,
        data_norm=float(data_norm),
        feature_names=np.asarray(raw.feature_names, dtype=object),
        description=(
            f"{title} ({n} rows, {d} features). Each feature is standardised "
            "with the data's own mean and standard deviation: this scaling is "
            "NOT private, and a real deployment must scale with public ranges "
            f"instead. data_norm = {STANDARDISED_NORM_FACTOR:g}·√{d} = "
            f"{data_norm:.3f}; rows beyond it are clipped by the estimators."
        ),
        target=np.asarray(raw.target),
        public_scaling=False,
    )


def load_digits_for_pca():
    """scikit-learn's digits, scaled by the public pixel range, for private PCA.

    Same as ``load_real_dataset("digits")``: the pixels (public range
    ``[0, 16]``) are divided by 16, so rows lie in ``[0, 1]^64``, and the
    recommended ``data_norm`` is the public bound ``√64 = 8``.

    Returns
    -------
    data : Bunch
        See :func:`load_real_dataset`.

    Examples
    --------
    >>> from sklearn_dppca.datasets import load_digits_for_pca
    >>> digits = load_digits_for_pca()
    >>> digits.data.shape, digits.data_norm, float(digits.data.max())
    ((1797, 64), 8.0, 1.0)
    """
    return load_real_dataset("digits")
