r"""Utility measures of private PCA (:ref:`privacy-utility`).

How far a released subspace or covariance approximation is from the truth,
and how hard a dataset is for a coherence-adaptive method:

- :func:`principal_angle_sin` — sine of the largest principal angle,
  :math:`\sin\theta = \lVert (I - \hat X \hat X^\top) V_k \rVert_2`;
- :func:`projection_distance` —
  :math:`\lVert \hat X \hat X^\top - V_k V_k^\top \rVert_F`;
- :func:`rank_k_covariance_error` — :math:`\lVert \Psi - M_k \rVert_F`,
  :math:`M_k` the best rank-k approximation of the covariance;
- :func:`captured_variance` —
  :math:`\operatorname{tr}(\hat X^\top \operatorname{Cov} \hat X)
  / \operatorname{tr}(V_k^\top \operatorname{Cov} V_k)`;
- :func:`coherence` — :math:`\lVert U \rVert_\infty = \max \lvert U_{ij} \rvert`
  of a data matrix's left singular vectors.

Conventions. A subspace is given by an orthonormal basis stored **as rows**,
shaped ``(k, d)`` exactly like scikit-learn's ``PCA.components_``: the
paper's :math:`\hat X` (:math:`d \times k`, orthonormal columns) is
``components.T`` and :math:`V_k` is ``reference.T``. Bases are not
orthonormalised silently: rows that are not orthonormal within a tolerance
raise ``ValueError`` (a ``(d, k)`` column basis passed by mistake is caught
this way). Every measure depends only on the subspaces spanned, not on the
signs or the rotation of the basis inside them — except :func:`coherence`,
which is defined on a basis.

These are evaluation tools: they read the true data or the true covariance,
so their values are *not* private and must not be released as such.

This module imports nothing from the estimators.
"""

from numbers import Integral, Real

import numpy as np
from scipy import sparse
from scipy.linalg import eigh

__all__ = [
    "captured_variance",
    "coherence",
    "principal_angle_sin",
    "projection_distance",
    "rank_k_covariance_error",
]


# --------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------
def _as_finite_2d(a, name):
    """``a`` as a finite, non-empty, real 2-D float64 array."""
    if sparse.issparse(a):
        raise ValueError(f"{name} must be a dense array; got a sparse "
                         f"{type(a).__name__} (convert it with .toarray()).")
    try:
        arr = np.asarray(a)
    except OverflowError:  # an integer beyond a float in nested lists
        arr = np.asarray(a, dtype=object)
    if arr.dtype == object:  # numbers in an object array or DataFrame
        try:
            arr = arr.astype(np.float64)
        except (TypeError, ValueError):
            pass  # refused below, as non-numeric
        except OverflowError:
            raise ValueError(
                f"{name} holds an integer beyond float64's range.") from None
    if np.iscomplexobj(arr):
        raise ValueError(f"{name} must be real; got a complex array.")
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be a numeric array; got dtype {arr.dtype}.")
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array; got shape {arr.shape}.")
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty; got shape {arr.shape}.")
    out = arr.astype(np.float64, copy=False)
    if not np.all(np.isfinite(out)):
        raise ValueError(f"{name} must contain only finite values (no NaN or inf).")
    return out, arr.dtype


def _default_atol(dtype, n_features):
    """Orthonormality tolerance: 1e-6, looser for low-precision inputs, and
    never above 1e-2 (float16's 10 sqrt(d) eps is 0.1 at d = 100: a row of
    norm 1.04 would pass, and its angles would read 0.08 too high)."""
    eps = np.finfo(dtype).eps if dtype.kind == "f" else np.finfo(np.float64).eps
    return min(1e-2, max(1e-6, 10.0 * np.sqrt(n_features) * eps))


def _check_basis(basis, name, atol=None):
    """Validate a ``(k, d)`` basis with orthonormal rows; return it as float64."""
    if atol is not None and (isinstance(atol, bool) or not isinstance(atol, Real)
                             or not 0.0 <= atol < np.inf):
        raise ValueError(f"atol must be a finite number >= 0 or None; got {atol!r}.")
    arr, dtype = _as_finite_2d(basis, name)
    k, d = arr.shape
    tol = _default_atol(dtype, d) if atol is None else float(atol)
    err = float(np.max(np.abs(arr @ arr.T - np.eye(k))))
    if not err <= tol:
        hint = ""
        if k > d:
            hint = (
                f" It has more rows ({k}) than columns ({d}): if it is a (d, k) "
                "basis with orthonormal columns, pass its transpose."
            )
        raise ValueError(
            f"{name} must have orthonormal rows (a (k, d) basis shaped like "
            f"PCA.components_); max |{name} {name}ᵀ − I| = {err:.3g} exceeds "
            f"the tolerance {tol:.3g}.{hint}"
        )
    return arr


def _check_same_features(a, b, name_a, name_b):
    if a.shape[1] != b.shape[1]:
        raise ValueError(
            f"{name_a} and {name_b} must have the same number of features "
            f"(columns); got {a.shape[1]} and {b.shape[1]}."
        )


def _check_symmetric(matrix, name, n_features=None):
    """Validate a symmetric ``(d, d)`` matrix; return its symmetric part."""
    arr, _ = _as_finite_2d(matrix, name)
    if arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name} must be a square (d, d) matrix; got {arr.shape}.")
    if n_features is not None and arr.shape[0] != n_features:
        raise ValueError(
            f"{name} must be ({n_features}, {n_features}) to match the "
            f"{n_features} features of the basis; got {arr.shape}."
        )
    scale = float(np.max(np.abs(arr)))
    asym = float(np.max(np.abs(arr - arr.T)))
    if asym > 1e-8 * scale:
        raise ValueError(
            f"{name} must be symmetric; max |{name} − {name}ᵀ| = {asym:.3g} "
            f"(relative {asym / scale:.3g})."
        )
    return arr / 2.0 + arr.T / 2.0  # no overflow near the largest float


def _check_n_components(k, upper, name="k"):
    if not isinstance(k, Integral) or isinstance(k, bool) or not 1 <= k <= upper:
        raise ValueError(f"{name} must be an integer in [1, {upper}]; got {k!r}.")
    return int(k)


def _top_eigh(matrix, k):
    """Top-k eigenpairs of a symmetric matrix, largest first."""
    d = matrix.shape[0]
    w, v = eigh(matrix, subset_by_index=[d - k, d - 1])
    return w[::-1], v[:, ::-1]


# --------------------------------------------------------------------------
# Subspace distances
# --------------------------------------------------------------------------
def principal_angle_sin(components, reference, *, atol=None):
    r"""Sine of the largest principal angle,
    :math:`\lVert (I - \hat X \hat X^\top) V_k \rVert_2`.

    With :math:`\hat X` = ``components.T`` and :math:`V_k` = ``reference.T``.
    It measures how well the span of ``components`` contains the span of
    ``reference``: 0 when it does, 1 when some reference direction is
    orthogonal to all the components. It depends only on the two subspaces,
    not on the bases.

    When both have :math:`k` rows this is the usual :math:`\sin\theta_{\max}`
    and it is symmetric. The two may have different numbers of rows: then the
    measure is one-sided, and it is 1 whenever ``reference`` has more rows
    than ``components``.

    Parameters
    ----------
    components : array-like of shape (k, n_features)
        Estimated basis, orthonormal rows (e.g. ``PCA.components_``).
    reference : array-like of shape (k_ref, n_features)
        True basis :math:`V_k^\top`, orthonormal rows.
    atol : float, default=None
        Largest allowed :math:`\max \lvert B B^\top - I \rvert` of each basis.
        ``None`` means :math:`10 \sqrt{d} \cdot \mathtt{eps}`, with ``eps``
        the machine precision of the input's dtype (so float32 bases pass),
        kept within :math:`[10^{-6}, 10^{-2}]`.

    Returns
    -------
    sin_theta : float
        In :math:`[0, 1]`.

    Raises
    ------
    ValueError
        If an input is not a finite 2-D array, the feature counts differ, or
        the rows of a basis are not orthonormal.

    See Also
    --------
    projection_distance : The Frobenius counterpart.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.metrics import principal_angle_sin
    >>> t = np.pi / 6  # rotate e1 by 30° towards e3
    >>> reference = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    >>> components = np.array([[np.cos(t), 0.0, np.sin(t)], [0.0, 1.0, 0.0]])
    >>> round(principal_angle_sin(components, reference), 12)
    0.5
    """
    comp = _check_basis(components, "components", atol)
    ref = _check_basis(reference, "reference", atol)
    _check_same_features(comp, ref, "components", "reference")
    # Rows of V_kᵀ minus their projection on span(X̂): accurate at tiny angles,
    # where 1 − cos² would lose half the digits.
    residual = ref - (ref @ comp.T) @ comp
    return float(min(np.linalg.norm(residual, 2), 1.0))


def projection_distance(components, reference, *, atol=None):
    r"""Frobenius distance of the projections,
    :math:`\lVert \hat X \hat X^\top - V_k V_k^\top \rVert_F`.

    With :math:`\hat X` = ``components.T`` and :math:`V_k` = ``reference.T``.
    It depends only on the two subspaces. For two :math:`k`-dimensional
    subspaces it equals :math:`\sqrt{2} \lVert \sin\Theta \rVert_F` (all
    principal angles), so
    :math:`\sqrt{2} \sin\theta_{\max} \le \mathtt{distance} \le \sqrt{2k}
    \sin\theta_{\max}`; it is 0 for identical and :math:`\sqrt{2k}` for
    orthogonal subspaces. With :math:`k` and :math:`k_{\mathrm{ref}}` rows it
    lies in
    :math:`[\sqrt{\lvert k - k_{\mathrm{ref}} \rvert}, \sqrt{k + k_{\mathrm{ref}}}]`.

    Computed as
    :math:`\sqrt{\lVert (I - P) V_k \rVert_F^2 + \lVert (I - Q) \hat X \rVert_F^2}`
    (:math:`P`, :math:`Q` the two projections), which never forms a
    :math:`d \times d` matrix and stays accurate for nearly equal subspaces.

    Parameters
    ----------
    components : array-like of shape (k, n_features)
        Estimated basis, orthonormal rows (e.g. ``PCA.components_``).
    reference : array-like of shape (k_ref, n_features)
        True basis :math:`V_k^\top`, orthonormal rows.
    atol : float, default=None
        Orthonormality tolerance, as in :func:`principal_angle_sin`.

    Returns
    -------
    distance : float

    Raises
    ------
    ValueError
        If an input is not a finite 2-D array, the feature counts differ, or
        the rows of a basis are not orthonormal.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.metrics import projection_distance
    >>> e = np.eye(4)
    >>> float(projection_distance(e[:2], e[2:]))  # orthogonal planes: √(2k)
    2.0
    >>> float(projection_distance(e[:2], e[[1, 0]]))  # same plane, other basis
    0.0
    """
    comp = _check_basis(components, "components", atol)
    ref = _check_basis(reference, "reference", atol)
    _check_same_features(comp, ref, "components", "reference")
    # P − Q = P(I − Q) − (I − P)Q and the two terms are Frobenius-orthogonal.
    ref_out = ref - (ref @ comp.T) @ comp
    comp_out = comp - (comp @ ref.T) @ ref
    return float(np.hypot(np.linalg.norm(ref_out), np.linalg.norm(comp_out)))


# --------------------------------------------------------------------------
# Covariance measures
# --------------------------------------------------------------------------
def rank_k_covariance_error(approximation, covariance, k, *, relative=False):
    r"""Frobenius error of a rank-k covariance approximation,
    :math:`\lVert \Psi - M_k \rVert_F`.

    :math:`M_k = \sum_{j \le k} \lambda_j v_j v_j^\top` is built from the
    ``k`` largest eigenvalues of the symmetric ``covariance`` and their
    eigenvectors. For a positive semidefinite covariance it is the best
    rank-k approximation (Eckart–Young); this is the measure of Mangoubi &
    Vishnoi for :class:`~sklearn_dppca.ComplexGaussPCA`. When
    :math:`\lambda_k = \lambda_{k+1}`, :math:`M_k` is not unique and the value
    depends on which eigenvectors the solver returns.

    Parameters
    ----------
    approximation : array-like of shape (n_features, n_features)
        The approximation :math:`\Psi` (e.g. a released rank-k covariance).
        Need not be symmetric.
    covariance : array-like of shape (n_features, n_features)
        The true covariance (symmetric up to round-off: a relative asymmetry
        above 1e-8 raises).
    k : int
        Rank of :math:`M_k`, in ``[1, n_features]``.
    relative : bool, default=False
        Divide by :math:`\lVert M_k \rVert_F`.

    Returns
    -------
    error : float

    Raises
    ------
    ValueError
        On non-finite or non-square inputs, a shape mismatch, an asymmetric
        ``covariance``, a ``k`` out of range, or ``relative=True`` with
        :math:`M_k = 0`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.metrics import rank_k_covariance_error
    >>> cov = np.diag([3.0, 2.0, 1.0])
    >>> float(rank_k_covariance_error(np.diag([3.0, 2.0, 0.0]), cov, 2))
    0.0
    >>> float(rank_k_covariance_error(np.diag([3.0, 0.0, 0.0]), cov, 2))
    2.0
    >>> round(rank_k_covariance_error(np.zeros((3, 3)), cov, 2, relative=True), 12)
    1.0
    """
    cov = _check_symmetric(covariance, "covariance")
    d = cov.shape[0]
    psi, _ = _as_finite_2d(approximation, "approximation")
    if psi.shape != cov.shape:
        raise ValueError(
            "approximation and covariance must have the same shape; got "
            f"{psi.shape} and {cov.shape}."
        )
    k = _check_n_components(k, d)
    # homogeneous of degree 1: computed on the matrices over their largest
    # entry, so that squares of entries near the largest float do not overflow
    scale = max(float(np.max(np.abs(cov))), float(np.max(np.abs(psi)))) or 1.0
    w, v = _top_eigh(cov / scale, k)
    best = (v * w) @ v.T
    error = float(np.linalg.norm(psi / scale - best))
    if relative:
        norm = float(np.linalg.norm(w))  # ‖M_k‖_F
        if norm == 0.0:
            raise ValueError(
                "relative=True needs a non-zero rank-k approximation of "
                "covariance; its top-k eigenvalues are all 0."
            )
        return error / norm
    return error * scale


def captured_variance(components, covariance, reference=None, *, atol=None):
    r"""Share of the optimal variance captured,
    :math:`\operatorname{tr}(\hat X^\top \operatorname{Cov} \hat X)
    / \operatorname{tr}(V_k^\top \operatorname{Cov} V_k)`.

    With :math:`\hat X` = ``components.T``. When ``reference`` is ``None``,
    :math:`V_k` are the top-:math:`k` eigenvectors of ``covariance``
    (:math:`k` = number of rows of ``components``) and the denominator is the
    sum of its :math:`k` largest eigenvalues; for a positive semidefinite
    covariance the ratio then lies in :math:`[0, 1]` (Ky Fan) and is 1 exactly
    for a top-k eigenspace. It depends only on the span of each basis.

    Parameters
    ----------
    components : array-like of shape (k, n_features)
        Estimated basis, orthonormal rows (e.g. ``PCA.components_``).
    covariance : array-like of shape (n_features, n_features)
        The true covariance (symmetric up to round-off).
    reference : array-like of shape (k_ref, n_features), default=None
        Basis with orthonormal rows for the denominator; ``None`` uses the
        top-:math:`k` eigenvectors of ``covariance``.
    atol : float, default=None
        Orthonormality tolerance, as in :func:`principal_angle_sin`.

    Returns
    -------
    ratio : float

    Raises
    ------
    ValueError
        On invalid inputs (see :func:`principal_angle_sin`), or if the
        denominator is not positive.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.metrics import captured_variance
    >>> cov = np.diag([4.0, 3.0, 1.0])
    >>> float(captured_variance(np.eye(3)[[0, 2]], cov))  # (4 + 1) / (4 + 3)
    0.7142857142857143
    >>> float(captured_variance(np.eye(3)[[1, 0]], cov))
    1.0
    """
    comp = _check_basis(components, "components", atol)
    cov = _check_symmetric(covariance, "covariance", comp.shape[1])
    cov = cov / (float(np.max(np.abs(cov))) or 1.0)  # a ratio: scale-free
    numerator = float(np.einsum("ij,ij->", comp @ cov, comp))
    if reference is None:
        w, _ = _top_eigh(cov, comp.shape[0])
        denominator = float(np.sum(w))
    else:
        ref = _check_basis(reference, "reference", atol)
        _check_same_features(comp, ref, "components", "reference")
        denominator = float(np.einsum("ij,ij->", ref @ cov, ref))
    if not denominator > 0.0:
        raise ValueError(
            "captured_variance is undefined: the reference subspace captures "
            f"no positive variance (tr(V_kᵀ Cov V_k) = {denominator:.3g})."
        )
    return numerator / denominator


# --------------------------------------------------------------------------
# Coherence
# --------------------------------------------------------------------------
def coherence(X, n_components=None):
    r"""Coherence :math:`\lVert U \rVert_\infty = \max \lvert U_{ij} \rvert` of a
    matrix's left singular vectors.

    :math:`X = U \Sigma W^\top` is the thin SVD of the :math:`n \times d` data
    matrix and the maximum runs over its top ``n_components`` left singular
    vectors (all of them by default, as in the coherence-adaptive
    power-method paper behind CoherentPowerPCA). Each column of :math:`U` is
    a unit vector in :math:`\mathbb{R}^n`, so the value lies in
    :math:`[1/\sqrt{n}, 1]`: about :math:`\sqrt{2 \ln(nk) / n}` for i.i.d.
    Gaussian rows, and 1 when one row alone carries a singular direction. It
    is the quantity that ``CoherentPowerPCA``'s error bound depends on.

    **The data is not centred here.** Pass the rows exactly as the estimator
    sees them: if you fit with ``center=True``, pass centred data
    (``X - X.mean(axis=0)``); for a fit with ``data_norm``, the clipped rows.

    Left singular vectors are unique only up to sign (which
    :math:`\max \lvert \cdot \rvert` ignores) and, for repeated singular
    values, up to a rotation (which it does not). Two consequences:

    - Vectors whose singular value is zero (beyond the numerical rank, with
      the tolerance of :func:`numpy.linalg.matrix_rank`) are not determined
      by ``X`` and are left out.
    - If ``X`` already has orthonormal columns (:math:`X^\top X = I` within
      1e-10), all its singular values are 1, ``X`` is its own left singular
      basis and the coherence of ``X`` *as given* is returned. So a basis
      :math:`U` (e.g. ``info.left_singular_vectors`` of
      :func:`~sklearn_dppca.datasets.make_coherent_low_rank`) can be passed
      directly.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Data matrix (rows are people), or an :math:`n \times k` matrix with
        orthonormal columns.
    n_components : int, default=None
        Number :math:`k` of leading left singular vectors; ``None`` means all
        ``min(n_samples, n_features)``.

    Returns
    -------
    coherence : float
        In :math:`[1/\sqrt{\mathtt{n\_samples}}, 1]`.

    Raises
    ------
    ValueError
        If ``X`` is not a finite 2-D array, is zero, or ``n_components`` is
        out of range.

    Notes
    -----
    Costs one thin SVD, :math:`O(n d \min(n, d))`; it never forms an
    :math:`n \times n` matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.metrics import coherence
    >>> spike = np.zeros((100, 3)); spike[0, 0] = 5.0; spike[1:, 1:] = 0.1
    >>> float(coherence(spike, n_components=1))  # one row carries the top direction
    1.0
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((10_000, 5))
    >>> bool(1 / 100 < coherence(X) < 0.1)  # ≈ √(2 ln(nk) / n) ≈ 0.047
    True
    """
    arr, _ = _as_finite_2d(X, "X")
    n, d = arr.shape
    r = min(n, d)
    if n_components is not None:
        n_components = _check_n_components(n_components, r, "n_components")
    k = r if n_components is None else n_components
    largest = float(np.max(np.abs(arr)))
    if (n >= d and largest <= 1.0
            and np.allclose(arr.T @ arr, np.eye(d), rtol=0.0, atol=1e-10)):
        return float(np.max(np.abs(arr[:, :k])))
    # U does not depend on the scale: over the largest entry, nothing overflows
    U, s, _ = np.linalg.svd(arr / (largest or 1.0), full_matrices=False)
    if s[0] == 0.0:
        raise ValueError("X is zero: it has no singular vectors.")
    rank = int(np.sum(s > s[0] * max(n, d) * np.finfo(np.float64).eps))
    return float(np.max(np.abs(U[:, : min(k, rank)])))
