"""PrivatePCA: the Gaussian mechanism on the covariance ("Analyze Gauss")."""

import math
from typing import NamedTuple

import numpy as np
import scipy.linalg
from sklearn.utils._param_validation import StrOptions

from . import _array_api
from ._array_api import ArrayAPIRows
from ._base import _BasePrivatePCA
from ._fit_guards import _all_or_nothing
from ._matrix_free import _MatrixFreeMixin
from ._param_docs import fill_parameter_docs
from ._released import mean_in_box
from ._rows import scatter_products, sparse_row_jobs
from ._spectrum import Spectrum, _non_increasing, scatter_trace
from .noise import (
    add_dense_noise,
    add_goe_noise,
    dense_noise,
    goe_noise,
    make_generator,
    noise_scale,
)


@fill_parameter_docs
class PrivatePCA(_MatrixFreeMixin, _BasePrivatePCA):
    r"""Differentially private PCA by Gaussian noise on the covariance.

    The drop-in replacement for :class:`sklearn.decomposition.PCA` on private
    rows: the same parameters, attributes and methods, plus the privacy
    budget and a public bound on the rows. Each row is clipped to the norm
    ``data_norm``, the rows are centred on a private mean, and their
    covariance matrix is released once with symmetric Gaussian noise (the
    "Analyze Gauss" mechanism, with a tighter sensitivity and an exact
    calibration of the noise). The components, the variances and every other
    attribute are computed from that release and from public values only.
    The variances are corrected for the noise's known contribution, so that
    ``explained_variance_ratio_`` estimates scikit-learn's ratios.

    The whole fit is ``(epsilon, delta)``-differentially private under the
    replacement of one row, and is charged once to the ``accountant``. On
    many features, ``path`` makes a release that never forms a
    :math:`d \times d` matrix (:doc:`/scaling`).

    The mechanism, its proof and the budget's shares are in
    :ref:`privacy-estimators`; how to choose ``epsilon``, ``delta`` and
    ``data_norm`` is in :ref:`choosing`.

    Parameters
    ----------
    %(choice_parameters)s
    delta : float, default=1e-6
        Privacy parameter :math:`\delta` in (0, 1); choose it well below
        :math:`1/n`.
    %(norm_bound_parameters)s
    center : bool, default=True
        Centre the data on a private mean (10% of the budget). With
        ``False`` the data is used as it is and ``mean_`` is zero.
    %(whiten_parameter)s
    %(non_finite_parameter)s
    %(solver_parameters)s
    path : {"auto", "dense", "matrix_free", "noisy_power"}, default="auto"
        How the release is computed (:ref:`solvers <privacy-solvers>`).
        ``"dense"``: the scatter matrix and the noise are formed
        (:math:`d \times d` float64: two in the Gram pass, then one with a
        top-k solver, six with every eigenpair — ``n_components`` None, a
        fraction or 'mle', or ``svd_solver="full"`` — the release, LAPACK's
        copy, its eigenvectors and workspace). ``"matrix_free"``:
        the same release, its noise and its cost in budget, but neither is
        formed (:ref:`the matrix-free path <privacy-matrix-free>`); the
        randomized solver multiplies the released matrix by blocks of
        :math:`p` columns, each product one pass over the rows and the noise
        redrawn by blocks from a secret key
        (:math:`p` = ``n_components + n_oversamples``; memory :math:`O(dp)`
        beyond a block of rows; 11 passes over the rows after the bounds'
        (8 where ``n_components`` is at least a tenth of the features;
        ``2 * iterated_power + 2`` with an explicit ``iterated_power``), and
        one for the trace).
        ``"noisy_power"``: another release of the same budget, :ref:`the
        noisy power method <privacy-noisy-power>`: ``iterated_power``
        passes (``"auto"``: 4, and 8 from :math:`n \ge 100 d`), each
        releasing a product of the scatter
        matrix with :math:`p` columns plus Gaussian noise, so that memory is
        :math:`O(dp)` and each pass costs :math:`O(\mathrm{nnz} \cdot p)`,
        with no :math:`d^2` term; the sine of its largest principal angle
        was 1.1–1.6 times the dense release's where that one is accurate
        on spiked models, about six times it at 10⁴ features of sparse
        counts, and it needs the top eigenvalues further out of the noise
        (its first pass is noisier).
        Both need ``svd_solver="randomized"`` (or ``"auto"`` choosing it)
        and a NumPy, SciPy sparse or Dask input. ``"auto"``: dense unless its
        matrices exceed ``memory_limit`` or a model of both costs on the
        public shape prefers the matrix-free path; that one where the noise
        kernel's blocks fit in their cache (an eighth of ``memory_limit``:
        :math:`d` up to about 34 000 on a 24 GB machine), else the noisy power
        method (:doc:`/scaling`); where that path does not fit in
        ``memory_limit``, the first of these paths that does.
    %(memory_parameter)s
    random_state : None, int, RandomState or Generator, default=None
        Source of the noise. ``None`` draws from operating-system entropy; any
        fixed seed makes the noise predictable and the fit not private (a
        :class:`~sklearn_dppca.PrivacyLeakWarning` says so). Fix it only for
        tests and reproducible examples.
    accountant : BudgetAccountant or None, default=None
        Budget charged before every fit. ``None`` charges the process-wide
        default (:func:`~sklearn_dppca.privacy.get_default_accountant`). It is
        shared, not copied, by :func:`sklearn.base.clone`.

    Attributes
    ----------
    components_ : ndarray of shape (n_components_, n_features)
        Released principal axes, orthonormal, by decreasing released variance.
    explained_variance_ : ndarray of shape (n_components_,)
        Estimates of the data's eigenvalues (scikit-learn's
        ``explained_variance_``: the covariance's eigenvalues, over
        ``n_samples - 1``), by rank, from the released eigenvalues
        :math:`\hat\lambda_i` with the noise's known contribution removed:
        :math:`\hat\theta_i = \hat\lambda_i - \tau^2 \sum_{j \ne i}
        1/(\hat\lambda_i - \hat\lambda_j)`, :math:`\tau^2 = \sigma^2/2`, for
        each eigenvalue standing out of the noise; the ranks the noise does
        not resolve get the mean that is left of the released total.
        Non-increasing and non-negative. See :ref:`privacy-spectrum`.
    explained_variance_ratio_ : ndarray of shape (n_components_,)
        ``explained_variance_ / total_variance_``: estimates of scikit-learn's
        ratios (the data's spectrum, not the variance the noisy components
        capture, which is ``captured_variance_ / total_variance_``).
    singular_values_ : ndarray of shape (n_components_,)
        ``np.sqrt(explained_variance_ * (n_samples - 1))``.
    captured_variance_ : ndarray of shape (n_components_,)
        Estimates of the data's variance along each released component,
        :math:`\hat\eta_i = \hat\lambda_i - 2\tau^2 \sum_{j \ne i}
        1/(\hat\lambda_i - \hat\lambda_j)`, less than its eigenvalue by
        what the noise turned the component away from it (the same mean
        for the unresolved ranks). The model of ``get_covariance``,
        ``get_precision`` and ``score`` uses these (the Frobenius-optimal
        eigenvalues for the released components).
    noisy_variance_ : ndarray of shape (n_components_,)
        The released eigenvalues themselves, over ``n_samples - 1``, not
        clamped: with every component kept, ``components_.T @
        np.diag(noisy_variance_) @ components_`` is the released matrix
        (over ``n_samples - 1``).
    total_variance_ : float
        The estimated total variance: the sum of the estimated spectrum over
        ``min(n_samples, n_features)`` ranks, from the released trace and
        the released matrix's own trace (weighted by their precision).
    mean_ : ndarray of shape (n_features,)
        Private mean (zero when ``center=False``).
    n_components_ : int
        Number of components kept.
    n_samples_ : int
        Number of rows (public under replacement adjacency).
    noise_variance_ : float
        The probabilistic-PCA residual variance, used by ``get_covariance``
        and ``score``: the mean captured variance of ranks ``n_components_ +
        1`` to ``min(n_samples, n_features)`` (the ranks scikit-learn
        averages); 0 when ``n_components_`` is ``min(n_samples,
        n_features)``. At
        ``epsilon=inf`` it is scikit-learn's.
    data_norm_ : float
        Norm bound used: ``data_norm``, or the estimate from the data;
        ``inf`` (no clipping) for ``epsilon=inf`` with ``data_norm=None``.
    mean_norm_ : float or None
        Bound on a row's norm in the private mean's release (``data_norm_``
        with a fixed bound, the box's radius if smaller; with
        ``data_norm="auto"`` the privately chosen bound of the raw rows);
        ``None`` when ``center=False``.
    clipped_fraction_ : float
        Only with ``data_norm="auto"``: the private search's estimate of the
        fraction of centred rows beyond ``data_norm_`` (post-processing of
        its released counts, biased low); never the exact fraction.
    n_resolved_ : int
        How many of the ``n_components_`` released eigenvalues stand above
        the edge of the noise's spectrum (computed from released values and
        the public noise scale; :ref:`noisy-release-warning`): the components
        beyond them are close to random directions, and a
        :class:`~sklearn_dppca.NoisyReleaseWarning` says so.
    path_ : {"dense", "matrix_free", "noisy_power"}
        The path the fit took (``path``, resolved).
    privacy_spent_ : tuple of float
        ``(epsilon, delta)`` spent by the fit, recomputed from the composed
        GDP parameter of its releases; the request itself when they agree to
        relative ``1e-9`` (the composition is exact, the difference is
        round-off). ``(inf, delta)`` for ``epsilon=inf``.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during fit, when ``X`` has string column names.

    See Also
    --------
    sklearn.decomposition.PCA : The non-private estimator this replaces.

    Notes
    -----
    Floating-point Gaussian sampling is not a formally hardened sampler, and
    a fixed ``random_state`` makes the noise predictable; see
    :mod:`sklearn_dppca.noise`. ``fit_transform`` and ``transform`` return
    the rows themselves projected: they are not private outputs.

    References
    ----------
    C. Dwork, K. Talwar, A. Thakurta, L. Zhang. "Analyze Gauss: optimal bounds
    for privacy-preserving principal component analysis." STOC 2014.

    B. Balle, Y.-X. Wang. "Improving the Gaussian mechanism for differential
    privacy: analytical calibration and optimal denoising." ICML 2018.

    J\. Dong, A. Roth, W. Su. "Gaussian differential privacy." JRSS-B 2022.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca import PrivatePCA
    >>> rng = np.random.default_rng(0)
    >>> ranges = np.array([3.0, 1.0, 0.5, 0.2, 0.1])  # public: feature j in ±ranges[j]
    >>> X = rng.uniform(-1, 1, size=(10_000, 5)) * ranges
    >>> C = float(np.linalg.norm(ranges))  # from the ranges, not the rows
    >>> pca = PrivatePCA(n_components=2, epsilon=1.0, data_norm=C)
    >>> pca.fit(X).components_.shape
    (2, 5)
    >>> pca.transform(X).shape
    (10000, 2)
    """

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
        self.path = path
        self.memory_limit = memory_limit
        self.random_state = random_state
        self.accountant = accountant

    _parameter_constraints: dict = {
        **_BasePrivatePCA._parameter_constraints,
        "path": [StrOptions({"auto", "dense", "matrix_free", "noisy_power"})],
    }
    _gram_in_namespace = True  # an Array API input's eigh runs on its device
    _honours_svd_solver = True  # the top k by a truncated solver, if chosen

    _noisy_power = True  # path="noisy_power" (_MatrixFreeMixin)

    def _noisy_power_passes(self, n_samples, n_features):
        """The noisy power method's releases: ``iterated_power``, or for
        ``"auto"`` :data:`NOISY_POWER_PASSES`, and
        :data:`NOISY_POWER_PASSES_MANY_ROWS` from
        :data:`NOISY_POWER_MANY_ROWS_PER_FEATURE` rows per feature (public)."""
        if self.iterated_power != "auto":
            return max(int(self.iterated_power), 1)
        if n_samples >= NOISY_POWER_MANY_ROWS_PER_FEATURE * n_features:
            return NOISY_POWER_PASSES_MANY_ROWS
        return NOISY_POWER_PASSES

    def _release(self, gram, rows, plan, rng, dtype):
        centre = vars(self).pop("_release_centre", None)  # _keep_release
        pool = vars(self).pop("_pool_with", None)  # a search's refit
        if self._fit_path == "noisy_power":
            return self._release_noisy_power(rows, plan, rng, dtype)
        if gram is None:
            return self._release_matrix_free(rows, plan, rng, dtype)
        # The noise is drawn on the host and moved to the Gram matrix's device.
        sigma = self._covariance_sigma(rows, plan)
        trace = scatter_trace(gram)
        if isinstance(gram, np.ndarray):  # in place: no second d × d matrix
            gram = add_goe_noise(rng, gram, sigma)
        else:
            gram = _array_api.add_noise(gram, goe_noise(rng, gram.shape[0], sigma))
        trace = self._released_trace(trace, sigma, rng)
        # a search's pooled refit and kept fold releases: on the host (an
        # Array API release's d × d crosses once; it was neither pooled nor
        # kept, so its refit had the noise of its own share only)
        on_host = isinstance(gram, np.ndarray)
        if pool is not None and pool.scatter.shape == tuple(gram.shape):
            host, sigma, trace, self._spike = _combined(
                gram if on_host else _array_api.to_host(gram), sigma, trace, pool,
                self._spike)
            gram = host if on_host else _array_api.like(host, gram)
            self._pooled = True
        if centre is not None and (
                gram.shape[0] <= KEPT_MAX_FEATURES
                and 8 * gram.shape[0] ** 2 <= self._keep_release):
            kept = gram.copy() if on_host else _array_api.to_host(gram).copy()
            self._kept = KeptRelease(kept, sigma, trace, centre[0],
                                     self.n_samples_, centre[1], self.data_norm_,
                                     self.mean_norm_, self._spike)
        self._released_components(gram, sigma, trace, rng, dtype)

    def _released_components(self, gram, sigma, trace, rng, dtype):
        """The components and spectrum of the released scatter matrix
        ``gram`` (noise ``sigma``; the released ``trace``): post-processing."""
        gram = self._for_solver(gram)
        truncated = self._truncated_eigenpairs(gram, sigma, trace, rng)
        if truncated is None:  # every eigenpair
            eigvals, eigvecs = map(_array_api.to_host, _array_api.eigh(gram))
            spectrum = self._spectrum(eigvals, sigma, trace,
                                      precision=_array_api.numpy_dtype(gram))
            top = np.argsort(eigvals)[::-1][: spectrum.n_components]
            values, vectors = eigvals[top], eigvecs[:, top]
        else:
            spectrum, values, vectors = truncated
        noisy = values / (self.n_samples_ - 1)
        self._set_components(vectors.T, noisy, spectrum, dtype)

    @_all_or_nothing
    def _fit_released(self, X, release, spent):
        r"""Fit on the rows ``X`` from ``release``, a :class:`KeptRelease` of
        those rows made before (:func:`pooled_release`): post-processing, no
        new release and no charge. ``X`` is read for its shape and feature
        names only; ``spent`` is the ``privacy_spent_`` of the releases
        ``release`` was made of. A supervised search's refit
        (docs/privacy.rst, "The fold fits' releases, pooled for the
        refit")."""
        X, engine = self._validate_for_fit(X)
        n, d = X.shape
        if (n, d) != (release.n_samples, release.scatter.shape[0]):
            raise ValueError(f"The release is of {release.n_samples} rows and "
                             f"{release.scatter.shape[0]} features, not {X.shape}.")
        self._check_n_components(n, d)
        self._fit_svd_solver = self._eigen_solver(n, d)
        self._fit_path = self.path_ = "dense"
        vars(self).pop("clipped_fraction_", None)
        self._spike = release.spike  # the folds' means' errors (pooled_release)
        self.mean_norm_, self.data_norm_ = release.mean_norm, release.data_norm
        self.n_samples_ = n
        dtype = _array_api.numpy_dtype(X)
        noisy_mean = release.mean.astype(dtype)
        self.mean_ = projected_mean = mean_in_box(noisy_mean, release.bounds)
        self._released_components(release.scatter.copy(), release.sigma,
                                  release.trace, make_generator(self.random_state),
                                  dtype)
        if isinstance(engine, ArrayAPIRows):  # attributes in X's namespace
            _array_api.move_attributes(self, engine.xp, engine.device)
        self.privacy_spent_ = spent
        self._warn_released(noisy_mean, projected_mean)
        return self

    def _release_matrix_free(self, rows, plan, rng, dtype):
        """The dense path's release held as an operator
        (:meth:`_implicit_release`): the solver sees only its products."""
        released, sigma, trace = self._implicit_release(rows, plan, rng)
        spectrum, values, vectors = self._truncated_eigenpairs(
            released, sigma, trace, rng)
        noisy = values / (self.n_samples_ - 1)
        self._set_components(vectors.T, noisy, spectrum, dtype)

    def _release_noisy_power(self, rows, plan, rng, dtype):
        r"""The noisy power method (Hardt & Price 2014): :math:`L` releases
        :math:`Y_l = M V_{l-1} + G_l`, :math:`G_l` of i.i.d.
        :math:`\mathcal{N}(0, \sigma_l^2)` entries, each :math:`V_l` the
        orthonormal basis of :math:`Y_l` (post-processing), from a random
        start :math:`V_0` of :math:`p` (:math:`k` plus ``n_oversamples``)
        columns; the trace :math:`\operatorname{tr} M` is released with the
        last one, at its :math:`\sigma_L`.

        Sensitivity: for orthonormal :math:`V` and neighbouring rows
        :math:`a, b` (norm :math:`\le C`),
        :math:`\|(aa^\top - bb^\top) V\|_F \le \|aa^\top - bb^\top\|_F
        \le \sqrt{2} C^2`, and with the trace
        :math:`\|(aa^\top - bb^\top) V\|_F^2 + (\|a\|^2 - \|b\|^2)^2
        \le 2C^4` as for the dense release; :math:`V_{l-1}` is a function of
        earlier releases only, so the releases compose adaptively:
        :math:`\mu_l = \sqrt{2} C^2 / \sigma_l` with
        :math:`\sum \mu_l^2 = \mu_{\mathrm{cov}}^2` (shares growing by
        :data:`NOISY_POWER_GROWTH`: the last passes set the subspace).
        docs/privacy.rst, "The noisy power method".

        The components are the top :math:`k` left singular vectors of
        :math:`Y_L`, and their eigenvalues
        :math:`\sqrt{s_i^2 - d \sigma_L^2}`
        (:math:`\mathbb{E}\, Y^\top Y = V^\top M^2 V + d \sigma_L^2 I`); the
        rest of the spectrum shares what the released trace leaves
        (:func:`noisy_power_spectrum`). Memory :math:`O(d p)` beyond a block
        of rows; each pass :math:`O(\mathrm{nnz} \cdot p)`.
        """
        n, d = self.n_samples_, self.n_features_in_
        k = self._truncated_k(n, d)
        passes = self._noisy_power_passes(n, d)
        power = noisy_power(rows, d, self._block_columns(n, d), passes,
                            plan.mus["covariance"], rng, rows.data_norm**2,
                            n_jobs=sparse_row_jobs(rows, self._planned_cores()))
        vectors, values = power.basis[:, :k], power.values[:k]
        # the estimates √(s² − dσ²) of components within the noise are the
        # noise's (0.2-0.27 of the variance each on isotropic rows, whose
        # true ratios are 1/d): only the resolved keep their own, as the
        # dense path's spectrum does
        spike = self._mean_spike()
        resolved = power.resolved(k, spike[1])
        self._mean_error_out = spike[0] > power.noise_value()  # the warning's hint
        spectrum = noisy_power_spectrum(values, power.trace, min(n, d), n - 1,
                                        resolved, own=resolved)
        self._set_components(vectors.T, values / (n - 1), spectrum, dtype)


#: The widest release a search's fold fit keeps for the refit (a d × d
#: float64 matrix of 32 MB per fold); wider fits' refits make their own.
KEPT_MAX_FEATURES = 2048


class KeptRelease(NamedTuple):
    r"""A dense fit's release, kept (``_keep_release``) for a search's refit:
    the noisy scatter matrix :math:`\hat G` of the rows clipped around
    ``mean``, its noise's :math:`\sigma`, the released trace
    ``(value, σ)``, the released centre (the rows' coordinates), and the
    public ``n_samples``, norm bounds (``BoundsPlan``), ``data_norm_``,
    ``mean_norm_``, and the ``(expected, upper)`` size of the rank-one term
    its mean's error adds (``_spectrum.mean_spike``)."""

    scatter: np.ndarray
    sigma: float
    trace: tuple
    mean: np.ndarray
    n_samples: int
    bounds: object
    data_norm: float
    mean_norm: object
    spike: tuple = (0.0, 0.0)


def _combined(gram, sigma, trace, pool, spike):
    r"""This fit's release and ``pool`` (a :class:`KeptRelease` of the same
    rows, :func:`pooled_release`) weighed by their noises' inverse
    variances, in place of ``gram``: ``(gram, sigma, trace, spike)``, the
    last the larger of the two releases' mean-error terms (``spike``, this
    fit's), each at its weight.

    With :math:`a = \sigma_p^2 / (\sigma^2 + \sigma_p^2)`,
    :math:`a \hat G + (1 - a) \hat G_p` carries the GOE kernel of
    :math:`\sigma_c^2 = a^2 \sigma^2 + (1 - a)^2 \sigma_p^2 = \sigma^2
    \sigma_p^2 / (\sigma^2 + \sigma_p^2)`, below either; the traces the
    same. Post-processing of two releases (docs/privacy.rst, "The fold
    fits' releases, pooled for the refit")."""
    total = sigma**2 + pool.sigma**2
    a = pool.sigma**2 / total if total > 0 else 1.0
    gram *= a
    gram += (1.0 - a) * pool.scatter
    combined = math.sqrt(a * a * sigma**2 + (1.0 - a) ** 2 * pool.sigma**2)
    spike = tuple(max(a * own, (1.0 - a) * kept)
                  for own, kept in zip(spike, pool.spike))
    return (gram, combined, (a * trace[0] + (1.0 - a) * pool.trace[0], combined),
            spike)


def pooled_release(folds, folds_per_row):
    r"""The release of all the rows made of the training folds' releases
    (``None`` where a fold kept none: its path was not dense, or it was too
    wide).

    Every row is in exactly :math:`r` = ``folds_per_row`` of the training
    folds :math:`T_1, \dots, T_K` (checked by the caller). Fold :math:`i`
    released :math:`\hat G_i = \sum_{T_i} (y - m_i)(y - m_i)^\top + E_i`,
    the scatter of its rows around its released mean :math:`m_i` (clipped
    to :math:`C` around it) plus a GOE kernel :math:`E_i` of
    :math:`\sigma_i`, and its trace with :math:`N(0, \sigma_i^2)`. Then

    .. math::

        \hat G = \frac{1}{r} \sum_i \hat G_i, \qquad
        \hat m = \frac{\sum_i n_i m_i}{\sum_i n_i}

    and the trace likewise: :math:`\sum_i \sum_{T_i} (x - \bar x)(x -
    \bar x)^\top = r S` for the scatter :math:`S` of all
    :math:`n = \sum_i n_i / r` rows, and :math:`\sum_{T_i} (x - m_i)(x -
    m_i)^\top` differs from :math:`\sum_{T_i} (x - \bar x)(x - \bar
    x)^\top` by :math:`n_i (\bar x_i - \bar x)(\bar x_i - \bar x)^\top`
    (the fold's mean against all rows', a sampling difference of the order
    of one row) and the bias of :math:`m_i`'s noise, which a single fit's
    release carries too. (Adding the released :math:`n_i (m_i - \hat m)(m_i
    - \hat m)^\top` instead would add the folds' mean noise a second time:
    measured, it lowered the refits' accuracy; docs/privacy.rst, "The fold
    fits' releases, pooled for the refit".) The
    noise :math:`\sum_i E_i / r` is a GOE kernel of :math:`\sigma^2 =
    \sum_i \sigma_i^2 / r^2`, the trace's the same. A function of released
    values only: post-processing. Against one release of the rows at the
    folds' :math:`\mu` per row, :math:`\sqrt{r} \mu_f`, its noise variance
    is :math:`K / r` times larger for :math:`K` folds (3/2 for 3-fold), and
    it costs nothing.
    """
    if any(f is None for f in folds):
        return None
    r = float(folds_per_row)
    sizes = np.array([f.n_samples for f in folds], dtype=float)
    means = np.stack([np.asarray(f.mean, dtype=np.float64) for f in folds])
    sigma = math.sqrt(sum(f.sigma**2 for f in folds)) / r
    # each fold's mean error adds its own rank-one term, over r: K terms in
    # directions no one knows, none above the largest
    spike = tuple(max(f.spike[i] for f in folds) / r for i in (0, 1))
    return folds[0]._replace(
        scatter=sum(f.scatter for f in folds) / r, sigma=sigma,
        trace=(sum(f.trace[0] for f in folds) / r, sigma),
        mean=sizes @ means / sizes.sum(), n_samples=int(round(sizes.sum() / r)),
        spike=spike)


class NoisyPower(NamedTuple):
    r"""What :func:`noisy_power` released, post-processed: :math:`Y_L`'s
    left singular vectors (:math:`d \times p`, by decreasing singular value),
    the eigenvalue estimates :math:`\sqrt{s_i^2 - d \sigma_L^2}`, the
    singular values, the last release's :math:`\sigma_L` and the released
    trace."""

    basis: np.ndarray
    values: np.ndarray
    singular: np.ndarray
    sigma: float
    trace: float

    def edge(self):
        r"""The largest singular value of the noise alone,
        :math:`\sigma_L (\sqrt{d} + \sqrt{p})`."""
        d, p = self.basis.shape
        return self.sigma * (math.sqrt(d) + math.sqrt(p))

    def noise_value(self):
        r"""The eigenvalue estimate of a singular value at :meth:`edge`,
        :math:`\sigma_L (2\sqrt{d p} + p)^{1/2}`: what noise alone reaches."""
        d, p = self.basis.shape
        return self.sigma * math.sqrt(2.0 * math.sqrt(d * p) + p)

    def resolved(self, k, spike=0.0):
        """How many of the top ``k`` singular values stand above :meth:`edge`,
        their eigenvalues above ``spike`` (the private mean's error,
        :func:`~sklearn_dppca._spectrum.mean_spike`'s upper size, in this
        release's units) plus a random direction's variance (the released
        trace over :math:`d`): that error is not a component of the data."""
        floor = spike + max(self.trace, 0.0) / self.basis.shape[0] if spike else -np.inf
        return int(np.count_nonzero((self.singular[:k] > self.edge())
                                    & (self.values[:k] > floor)))


def noisy_power(rows, n_features, p, passes, mu, rng, scale=1.0, start=None,
                n_jobs=None):
    r"""The noisy power method's ``passes`` releases of :math:`M V`
    (:math:`M = \mathrm{scale} \cdot \sum a a^\top`, the rows :math:`a` of
    ``rows`` in the unit ball), composing to ``mu``
    (:meth:`PrivatePCA._release_noisy_power`), and the trace with the last:
    each :math:`Y_l = M V_{l-1} + G_l` at :math:`\mu \sqrt{\mathrm{share}_l}`,
    :math:`V_l` the orthonormal basis of :math:`Y_l`, from ``start``
    (:math:`d \times p` orthonormal, a function of earlier releases) or a
    random :math:`V_0`; each pass's blocks of rows in ``n_jobs`` threads.
    Returns :class:`NoisyPower`."""
    d = n_features
    sensitivity = math.sqrt(2.0) * scale
    basis = (_orthonormal(rng.standard_normal((d, p)))[0] if start is None
             else start)  # V_0: no data
    for i, share in enumerate(noisy_power_shares(passes)):
        sigma = noise_scale(sensitivity, mu * math.sqrt(share))
        # in place: two d × p blocks alive at once, at most
        released = scatter_products(rows, basis, n_jobs=n_jobs)
        del basis
        released *= scale
        add_dense_noise(rng, released, sigma)
        if i < passes - 1:
            basis = _orthonormal(released)[0]  # in released's memory
            del released
    trace = scale * rows.sq_norm_sum() + float(dense_noise(rng, (), sigma))
    # Y_L's SVD from its QR and the SVD of the p × p factor
    basis, factor = _orthonormal(released)
    del released
    rotation, singular, _ = np.linalg.svd(factor)
    values = np.sqrt(np.maximum(singular**2 - d * sigma**2, 0.0))
    return NoisyPower(basis @ rotation, values, singular, sigma, trace)


def _orthonormal(matrix):
    r""":math:`(Q, F)` with :math:`\mathrm{matrix} = Q F`, :math:`Q` of
    orthonormal columns and :math:`F` square, for a :math:`d \times p`
    float64 ``matrix`` (:math:`d \ge p`), which is overwritten. :math:`Q` is
    C-contiguous and takes the matrix's memory: the RQ factorisation of
    :math:`\mathrm{matrix}^\top` (Fortran-ordered where the matrix is
    C-ordered, so LAPACK works in place: a QR of the C-ordered matrix would
    copy it), :math:`\mathrm{matrix}^\top = R Q'`, so
    :math:`Q = {Q'}^\top` and :math:`F = R^\top`. The rows' products then
    read :math:`Q` as it is (a sparse product copies an array that is not
    C-ordered, once per block of rows).
    """
    matrix = np.ascontiguousarray(matrix, dtype=np.float64)
    p = matrix.shape[1]
    lwork = 64 * max(p, 1)
    factored, tau, _, info = scipy.linalg.lapack.dgerqf(
        matrix.T, lwork=lwork, overwrite_a=True)
    factor = np.triu(factored[:, -p:]).T.copy()
    basis, _, info2 = scipy.linalg.lapack.dorgrq(
        factored, tau, lwork=lwork, overwrite_a=True)
    if info or info2:  # pragma: no cover - LAPACK argument errors only
        raise RuntimeError(f"LAPACK RQ failed (info {info}, {info2})")
    return basis.T, factor


#: The noisy power method's passes ``L`` where ``iterated_power="auto"``,
#: and the ratio of consecutive passes' shares of ``μ_cov²``: on spiked
#: models (d = 300 and 1 000, k = 5, ε = 1 and 3) ``L = 4`` at ratio 3
#: gave the best ``sin θ`` of ``L`` in 3–7 and ratios 1–3 (equal shares:
#: 1.5× the error), within 1.1–1.4× the dense release's where the latter
#: is below 0.2. With many rows the passes are limited by convergence rather
#: than by their noise, and from ``100 d`` rows 8 passes do better: on
#: bench_wide's spiked rows (d = 400 and 1 000, n = 100–150 d, k = 5 and
#: 10, ε = 1 and 3, 3 seeds) in every one of 12 cells (0.141 against 0.435
#: at d = 1 000, n = 100 d, k = 5, ε = 1), and on bench_coherent's grid at
#: n = 2 000 d (0.034 against 0.186, ε = 3) and 500 d (0.36 against 0.50 at
#: ε = 3, equal at ε = 1); at 50 d the better count depends on ε.
NOISY_POWER_PASSES = 4
NOISY_POWER_PASSES_MANY_ROWS = 8
NOISY_POWER_MANY_ROWS_PER_FEATURE = 100
NOISY_POWER_GROWTH = 3.0


def noisy_power_shares(passes):
    r"""Each pass's share of :math:`\mu^2`, growing by
    :data:`NOISY_POWER_GROWTH` (sum 1)."""
    shares = NOISY_POWER_GROWTH ** np.arange(passes, dtype=np.float64)
    return shares / shares.sum()


def noisy_power_spectrum(values, trace, n_ranks, scale, resolved, own=None):
    """The spectrum of a noisy power release: the top ``own`` (all
    :math:`k` by default) of the eigenvalue estimates ``values``
    (decreasing, non-negative), then the others, up to ``n_ranks`` in all,
    sharing what the released ``trace`` leaves (clamped at 0), made
    non-increasing (pool adjacent violators); in variance units (over
    ``scale``, which is :math:`n - 1`). Post-processing only."""
    k = values.shape[0]
    own = k if own is None else own
    values = values[:own]
    rest = max(trace - float(values.sum()), 0.0)
    level = rest / (n_ranks - own) if n_ranks > own else 0.0
    explained = np.maximum(_non_increasing(
        np.r_[values, np.full(n_ranks - own, level)]), 0.0) / scale
    noise_variance = float(explained[k:].mean()) if n_ranks > k else 0.0
    return Spectrum(k, explained, explained.copy(), float(explained.sum()),
                    noise_variance, resolved)
