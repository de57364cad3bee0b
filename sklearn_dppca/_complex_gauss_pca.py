"""ComplexGaussPCA: the complex (Hermitian) Gaussian mechanism of Mangoubi & Vishnoi."""

import numpy as np
from scipy import linalg
from sklearn.utils._param_validation import StrOptions

from . import _array_api
from ._base import _BasePrivatePCA
from ._matrix_free import _MatrixFreeMixin
from ._param_docs import fill_parameter_docs
from ._spectrum import _eigh, scatter_trace
from .noise import add_gue_noise, gue_noise


def hermitian_release(gram, sigma, rng):
    r""":math:`\hat{M} = \sum y y^\top + H` with :math:`H` the GUE kernel
    (docs/privacy.rst §4, §6).

    :math:`\operatorname{Re} H` is exactly the GOE kernel PrivatePCA adds
    with the same :math:`\sigma` and generator state, so
    :math:`\operatorname{Re} \hat{M}` is PrivatePCA's release;
    :math:`\operatorname{Im} H` is drawn independently of the data.
    :math:`H` is drawn on the host and moved to the device of an Array API
    ``gram``.
    """
    if isinstance(gram, np.ndarray):  # in place: no second d × d matrix
        return add_gue_noise(rng, gram.astype(np.complex128), sigma)
    return _array_api.add_noise(gram, gue_noise(rng, gram.shape[0], sigma))


def real_rank_k(basis, values):
    r"""Top-k eigenpairs of the real symmetric
    :math:`\operatorname{Re}(V \operatorname{diag}(\mathrm{values}) V^*)`.

    :math:`V` (:math:`d \times k`, complex, orthonormal columns) has
    :math:`\operatorname{Re}(V \Lambda V^*) = A D A^\top` with
    :math:`A = [\operatorname{Re} V, \operatorname{Im} V]`
    (:math:`d \times 2k`) and :math:`D = \operatorname{diag}(\Lambda,
    \Lambda)`, a matrix of rank at most :math:`2k`. With the thin QR
    :math:`A = Q R` it is :math:`Q (R D R^\top) Q^\top`, so its eigenpairs
    come from the :math:`2k \times 2k` core in :math:`O(d k^2)`, never
    forming a :math:`d \times d` matrix.

    Parameters
    ----------
    basis : ndarray of shape (n_features, k), complex
    values : ndarray of shape (k,)

    Returns
    -------
    eigvals : ndarray of shape (k,)
        The k largest eigenvalues, in decreasing order.
    eigvecs : ndarray of shape (n_features, k)
        Matching orthonormal real eigenvectors in columns.
    """
    k = basis.shape[1]
    q, r = np.linalg.qr(np.hstack([basis.real, basis.imag]))
    core = (r * np.r_[values, values]) @ r.T
    eigvals, eigvecs = np.linalg.eigh((core + core.T) / 2.0)
    top = np.argsort(eigvals)[::-1][:k]
    return eigvals[top], q @ eigvecs[:, top]


@fill_parameter_docs
class ComplexGaussPCA(_MatrixFreeMixin, _BasePrivatePCA):
    r"""Differentially private PCA by the complex Gaussian mechanism.

    The mechanism of Mangoubi & Vishnoi for a private rank-k approximation
    of the covariance matrix. Rows are clipped to ``data_norm`` and centred
    on a private mean as in :class:`PrivatePCA`; the covariance matrix is
    then released once with *Hermitian* (complex) Gaussian noise, whose real
    part is exactly :class:`PrivatePCA`'s noise. With
    ``target="covariance"`` the estimator returns the best real rank-k
    approximation of the real part of the release's top-k eigenpairs,
    ``covariance_approximation_``, and its components; with
    ``target="subspace"`` it returns a private top-k subspace.

    The imaginary part of the noise does not depend on the data, so the
    release costs exactly what PrivatePCA's does: the fit is
    ``(epsilon, delta)``-differentially private under the replacement of one
    row, and is charged once to the ``accountant``. The mechanism, its proof
    and the bound on the rank-k error are in :ref:`privacy-estimators`; the
    noise kernel is in :ref:`privacy-noise`.

    Parameters
    ----------
    %(choice_parameters)s
    delta : float, default=1e-6
        Privacy parameter :math:`\delta` in (0, 1).
    %(norm_bound_parameters)s
    center : bool, default=True
        Centre the data on a private mean (10% of the budget).
    %(whiten_parameter)s
    %(non_finite_parameter)s
    %(solver_parameters)s
    target : {"covariance", "subspace"}, default="covariance"
        ``"covariance"``: the components and variances of :math:`\Psi`, the
        real rank-k covariance approximation. ``"subspace"``: the span of the
        top-k eigenvectors of :math:`\operatorname{Re}(\hat V_k \hat V_k^*)`,
        :math:`\hat V_k` the top-k eigenvectors of the Hermitian release,
        with the principal axes and variances of the real part of the release
        within that span.
    path : {"auto", "dense", "matrix_free"}, default="auto"
        How the release is computed, as in :class:`PrivatePCA`.
        ``"dense"``: the Hermitian release is formed (:math:`d \times d`
        complex128). ``"matrix_free"``: the same release, its noise and its
        cost in budget, never formed (:ref:`the matrix-free path
        <privacy-matrix-free>`): the randomized solver multiplies it by
        complex blocks of :math:`p` columns (``n_components +
        n_oversamples``), each product one pass over the rows with
        :math:`2p` columns and the GUE kernel redrawn by blocks from two
        secret keys (four times the real kernel's flops; memory
        :math:`O(dp)` beyond a block of rows and the kernel's cache of
        :math:`4 d^2` bytes). It needs ``svd_solver="randomized"`` (or
        ``"auto"`` choosing it) and a NumPy, SciPy sparse or Dask input.
        ``"auto"``: dense unless its matrices exceed ``memory_limit`` or a
        model of both costs on the public shape prefers the matrix-free
        path, and that one unless it does not fit in ``memory_limit`` where
        the dense path does.
    %(memory_parameter)s
    random_state : None, int, RandomState or Generator, default=None
        Source of the noise. ``None`` draws from operating-system entropy; a
        fixed seed makes the fit not private (a warning says so).
    accountant : BudgetAccountant or None, default=None
        Budget charged before every fit; ``None`` charges the process-wide
        default. Shared, not copied, by :func:`sklearn.base.clone`.

    Attributes
    ----------
    covariance_approximation_ : ndarray of shape (n_features, n_features)
        The released rank-k matrix :math:`\Psi` in covariance units (divided
        by ``n_samples - 1``):
        ``components_.T @ np.diag(np.maximum(noisy_variance_, 0)) @ components_``,
        the mechanism's output as the paper defines it (``target="subspace"``:
        the same formula, the real release compressed to the released span,
        not :math:`\Psi`). Computed from those two attributes when read (a
        :math:`d \times d` array each time), not kept by the fit.
    path_ : {"dense", "matrix_free"}
        The path the fit took (``path``).
    components_ : ndarray of shape (n_components_, n_features)
        Eigenvectors of :math:`\Psi` (orthonormal, real), by decreasing
        variance.
    noisy_variance_ : ndarray of shape (n_components_,)
        Eigenvalues of :math:`\Psi` over ``n_samples - 1``, not clamped
        (``target="subspace"``: the variance of the real release along each
        component).
    explained_variance_, captured_variance_ : ndarray of shape (n_components_,)
        As in PrivatePCA, by rank, from the Hermitian release's eigenvalues
        (its noise has :math:`\tau^2 = \sigma^2` off the diagonal, twice the
        real kernel's): estimates of the data's eigenvalues, and of its
        variance along the released components (what ``get_covariance`` and
        ``score`` use).
    explained_variance_ratio_ : ndarray of shape (n_components_,)
        ``explained_variance_ / total_variance_``.
    total_variance_ : float
        As in PrivatePCA: from the released trace (with the same
        :math:`\sigma`, free) and the Hermitian release's own.
    singular_values_ : ndarray of shape (n_components_,)
        ``np.sqrt(explained_variance_ * (n_samples - 1))``.
    mean_ : ndarray of shape (n_features,)
        Private mean (zero when ``center=False``).
    n_components_ : int
    n_samples_ : int
    noise_variance_ : float
        Mean captured variance of ranks ``n_components_ + 1`` to
        ``min(n_samples, n_features)`` (0 when ``n_components_`` is that
        number), as in PrivatePCA.
    data_norm_ : float
        Norm bound used.
    mean_norm_, clipped_fraction_, n_resolved_ : as in PrivatePCA
    privacy_spent_ : tuple of float
        ``(epsilon, delta)`` spent by the fit.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)

    See Also
    --------
    PrivatePCA : The real Gaussian mechanism on the same budget.

    Notes
    -----
    ``get_covariance()`` is :math:`\Psi` with de-noised eigenvalues,
    ``components_.T @ np.diag(captured_variance_) @ components_``, plus
    ``noise_variance_`` on the orthogonal complement of the components.
    Clamping negative eigenvalues of :math:`\Psi` at 0 (which only happens
    when the noise swamps the data) moves it toward the positive
    semi-definite :math:`M_k`, the data's best rank-k approximation, and so
    keeps the mechanism's bound
    :math:`\lVert \Psi - M_k \rVert_F \le 2 \lVert \hat\Psi - M_k \rVert_F`
    (:ref:`privacy-estimators`).

    References
    ----------
    O. Mangoubi, N. K. Vishnoi. "Private low-rank approximation for covariance
    matrices, Dyson Brownian motion, and eigenvalue-gap bounds for Gaussian
    perturbations." Journal of the ACM, 2025.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca import ComplexGaussPCA
    >>> rng = np.random.default_rng(0)
    >>> ranges = np.array([3.0, 1.0, 0.5, 0.2, 0.1])  # public: feature j in ±ranges[j]
    >>> X = rng.uniform(-1, 1, size=(10_000, 5)) * ranges
    >>> C = float(np.linalg.norm(ranges))  # from the ranges, not the rows
    >>> pca = ComplexGaussPCA(n_components=2, epsilon=1.0, data_norm=C)
    >>> pca.fit(X).covariance_approximation_.shape
    (5, 5)
    >>> int(np.linalg.matrix_rank(pca.covariance_approximation_))
    2
    """

    _parameter_constraints: dict = {
        **_BasePrivatePCA._parameter_constraints,
        "target": [StrOptions({"covariance", "subspace"})],
        "path": [StrOptions({"auto", "dense", "matrix_free"})],
    }

    def __init__(
        self,
        n_components=None,
        *,
        epsilon=1.0,
        delta=1e-6,
        data_norm=None,
        bounds=None,
        norm_range=(1e-8, 1e12),
        norm_quantile="auto",
        center=True,
        whiten=False,
        non_finite="raise",
        copy=True,
        svd_solver="auto",
        tol=0.0,
        iterated_power="auto",
        n_oversamples=10,
        power_iteration_normalizer="auto",
        target="covariance",
        path="auto",
        memory_limit="auto",
        random_state=None,
        accountant=None,
    ):
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.bounds = bounds
        self.norm_range = norm_range
        self.norm_quantile = norm_quantile
        self.center = center
        self.whiten = whiten
        self.non_finite = non_finite
        self.copy = copy
        self.svd_solver = svd_solver
        self.tol = tol
        self.iterated_power = iterated_power
        self.n_oversamples = n_oversamples
        self.power_iteration_normalizer = power_iteration_normalizer
        self.target = target
        self.path = path
        self.memory_limit = memory_limit
        self.random_state = random_state
        self.accountant = accountant

    _gram_in_namespace = True  # an Array API input's eigh runs on its device
    _honours_svd_solver = True  # the top k by a truncated solver, if chosen
    _hermitian_noise = True  # the GUE kernel: τ² = σ² (denoised_spectrum)

    def _release(self, gram, rows, plan, rng, dtype):
        if gram is None:  # the matrix-free path: the same release, an operator
            noisy, sigma, trace = self._implicit_release(rows, plan, rng)
        else:
            # PrivatePCA's σ: the real part of the Hermitian noise is its
            # GOE kernel (docs/privacy.rst §3, §6)
            sigma = self._covariance_sigma(rows, plan)
            trace = scatter_trace(gram)
            noisy = hermitian_release(gram, sigma, rng)
            # free, as PrivatePCA's: its release is Re M̂ and data-independent
            # Im H (§6, "The trace")
            trace = self._released_trace(trace, sigma, rng)
        n, d = self.n_samples_, noisy.shape[0]
        noisy = self._for_solver(noisy)
        truncated = self._truncated_eigenpairs(noisy, sigma, trace, rng)
        if truncated is not None:  # the top k by a truncated solver
            spectrum, values, basis = truncated
            k = spectrum.n_components
            values, basis = values[::-1], basis[:, ::-1]  # increasing, as eigh's
        elif not isinstance(noisy, np.ndarray):
            # Array API input: one full Hermitian eigh on its device (NumPy on
            # the host where the namespace has none), then the host's d × k
            eigvals, vectors = map(_array_api.to_host, _array_api.eigh(noisy))
            spectrum = self._spectrum(eigvals, sigma, trace,
                                      precision=_array_api.numpy_dtype(noisy))
            k = spectrum.n_components
            # the top k, increasing: the standard leaves eigh's order
            # unspecified (as PrivatePCA, sorted; review 96)
            top = np.argsort(eigvals, kind="stable")[d - k :]
            values, basis = eigvals[top], vectors[:, top]
            del vectors
            if self.target == "subspace":
                noisy = _array_api.to_host(noisy)
        else:
            # Every eigenvalue is needed for the ratios, but eigenvectors only
            # for the top k: all eigenvalues, then the top k pairs, is cheaper
            # than one full Hermitian decomposition unless k is a large part of d.
            eigvals = np.linalg.eigvalsh(noisy)
            spectrum = self._spectrum(eigvals, sigma, trace)
            k = spectrum.n_components
            if k == 0:  # n_components=0 (or 'mle' on a flat spectrum)
                values, basis = np.empty(0), np.empty((d, 0), dtype=noisy.dtype)
            elif 2 * k < d:
                values, basis = linalg.eigh(
                    noisy, subset_by_index=[d - k, d - 1], check_finite=False
                )
            else:  # the top k columns kept, not a view of all d
                values, vectors = _eigh(noisy)
                values, basis = values[d - k :], vectors[:, d - k :].copy()
                del vectors
        if k == 0:
            variance, vectors = values, basis.real
        elif self.target == "covariance":
            del noisy  # not read again: its d × d complex entries freed first
            variance, vectors = real_rank_k(basis, values)
        else:
            # subspace: the span of the top-k eigenvectors of P = Re(V̂_k V̂_k*)
            # (their eigenvalues are all near 1, so the basis itself is
            # arbitrary); rotated within it to the principal axes of the real
            # release, whose variances they then carry.
            _, span = real_rank_k(basis, np.ones(k))
            # Re M̂ span: the real part of M̂ times the real span (an operator's
            # product, or the formed matrix's)
            inner = span.T @ (noisy @ span.astype(noisy.dtype)).real
            variance, rotation = np.linalg.eigh((inner + inner.T) / 2.0)
            vectors = span @ rotation
        self._set_components(vectors.T, variance / (n - 1), spectrum, dtype)

    @property
    def covariance_approximation_(self):
        r""":math:`\Psi` as the mechanism releases it, with its own (noisy)
        eigenvalues, from ``components_`` and ``noisy_variance_``."""
        if "components_" not in vars(self):
            raise AttributeError(  # hasattr and check_is_fitted see no fit
                "'ComplexGaussPCA' object has no attribute "
                "'covariance_approximation_' (it is not fitted)")
        self._check_square_result("covariance_approximation_")
        components, values = self.components_, self.noisy_variance_
        xp = _array_api.module_of(components)  # NumPy, or the input's namespace
        return (components.T * xp.where(values > 0, values, 0.0)) @ components
