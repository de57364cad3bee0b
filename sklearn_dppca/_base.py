"""Shared base of the private PCA estimators.

The base owns everything but the mechanism (template method): parameter and
data validation, the privacy charge, the norm bound, private centring
(ALGORITHMS.md §5), the clipped Gram matrix, and the post-processing that
turns released eigenpairs into scikit-learn's PCA attributes, plus
``transform``, ``inverse_transform``, ``get_covariance``, ``get_precision``
and the probabilistic-PCA ``score``. A subclass writes only ``_release``.
"""

import math
from abc import ABCMeta, abstractmethod
from numbers import Integral, Real
from typing import Any, NamedTuple

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils import check_array
from sklearn.utils._param_validation import Interval, RealNotInt
from sklearn.utils.validation import check_is_fitted, validate_data

from ._bounds import PARAMETER_CONSTRAINTS as _BOUND_CONSTRAINTS
from ._bounds import NormBounds
from ._dask import ChunkedRows, as_dask_array, is_dask_collection
from ._stats import InMemoryRows
from .noise import make_generator
from .privacy import (
    BudgetAccountant,
    _warn_leak,
    gdp_epsilon,
    gdp_mu,
    get_default_accountant,
)

_INPUT_ATTRIBUTES = ("n_features_in_", "feature_names_in_")
# The noise scales with data_norm² and sums of rows reach n·data_norm²: keep
# both far from overflow (1.8e308 in float64; 3.4e38 for float32 attributes).
_MAX_DATA_NORM = {np.float64: 1e120, np.float32: 1e15}


class PrivacyPlan(NamedTuple):
    """How a fit spends its budget, fixed before the data is read."""

    mus: dict  # GDP μ of each Gaussian release, by name ("mean", ...)
    charge: dict  # keyword arguments of BudgetAccountant.spend
    spent: tuple  # (ε, δ) the fit spends: privacy_spent_
    extra: Any = None  # mechanism-specific calibration

#: Fraction of ``μ*²`` given to the private mean when ``center=True``. Its
#: error enters the covariance as a rank-one term of size ``~σ_m² d / n``,
#: small next to the covariance noise for any ``n`` worth fitting on.
MEAN_BUDGET_SHARE = 0.1


def budget_shares(shares, center):
    """The shares of a fit's releases: without centring, the mean's share is
    dropped and the others rescaled to sum to 1."""
    kept = {k: w for k, w in shares.items() if center or k != "mean"}
    total = sum(kept.values())
    return {k: w / total for k, w in kept.items()}


class _BasePrivatePCA(
    ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator, metaclass=ABCMeta
):
    """Base of the private PCA estimators; subclasses implement ``_release``."""

    _parameter_constraints: dict = {
        "n_components": [
            Interval(Integral, 1, None, closed="left"),
            Interval(RealNotInt, 0, 1, closed="neither"),
            None,
        ],
        "epsilon": [Interval(Real, 0, math.inf, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "center": ["boolean"],
        "whiten": ["boolean"],
        "random_state": ["random_state", np.random.Generator],
        "accountant": [BudgetAccountant, None],
        **_BOUND_CONSTRAINTS,  # data_norm ("auto" too), bounds, norm_range, ...
    }

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the model on ``X`` privately.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; one row per person. Never modified.
        y : Ignored
            Not used, present for API consistency by convention.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._fit(X)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X, y=None):
        """Fit the model on ``X`` and return ``X`` projected on it.

        The projection of the training rows is the rows themselves seen
        through the released components: it is *not* private output.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : Ignored

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_components_)
        """
        return self._transform(self._fit(X))

    def _fit(self, X):
        # Until the budget is charged, a failure (bad data, a refused charge)
        # must leave a fitted estimator as it was: validate_data resets
        # n_features_in_ and feature_names_in_, so keep them to restore.
        kept = {k: v for k, v in vars(self).items() if k in _INPUT_ATTRIBUTES}
        try:
            X, data = self._validate_for_fit(X)
            n_samples, n_features = X.shape
            self._check_n_components(n_samples, n_features)
            # norm bounds ("auto", a box): their share is taken from the plan
            bounds = NormBounds(self, n_samples, n_features, X.dtype, _MAX_DATA_NORM)
            plan = bounds.plan(self._privacy_plan(n_samples, n_features))
            rng = make_generator(self.random_state)
            accountant = self.accountant or get_default_accountant()
            # Refuse an over-budget fit before the data is read ...
            accountant.check(**plan.charge)
            # The first pass reads every row (and checks them all finite).
            bounds.read(data)
            # ... and charge, atomically, before anything is released: a fit
            # that fails on its data (NaN, inf) is not charged.
            accountant.spend(**plan.charge)
        except BaseException:
            for name in _INPUT_ATTRIBUTES:
                vars(self).pop(name, None)
            vars(self).update(kept)
            raise
        if self.random_state is not None:
            _warn_leak(
                f"random_state={self.random_state!r} fixes the noise: anyone who "
                "knows it can subtract the noise, and the fit is not private. Leave "
                "random_state=None (operating-system entropy) for a private release."
            )
        # The bounds' trees (if "auto") and the private mean (docs/privacy.rst §5).
        mean, data_norm, self.mean_norm_ = bounds.release(plan, rng)
        data = bounds.data  # the rows clipped into the box, if any
        gram = data.gram(data_norm, mean)
        vars(self).pop("clipped_fraction_", None)  # only "auto" releases it
        if bounds.clipped_fraction is not None:
            self.clipped_fraction_ = bounds.clipped_fraction
        self.data_norm_ = data_norm
        self.n_samples_ = n_samples
        self.mean_ = (
            bounds.offset if mean is None else bounds.offset + mean
        ).astype(X.dtype, copy=False)
        rows = data.rows(data_norm, mean)
        self._release(gram, rows, plan, rng, X.dtype)
        self.privacy_spent_ = plan.spent
        return X

    def _validate_for_fit(self, X):
        """Validated ``X`` and the object that computes its statistics.

        Finiteness is checked by the first pass over the rows, which needs
        their norms anyway: one pass fewer than scikit-learn's check. A Dask
        collection is validated lazily (shape, dtype, names) and never loaded.
        """
        if is_dask_collection(X):
            X, names = as_dask_array(X)
            if X.shape[0] < 2 or X.shape[1] < 1:
                raise ValueError(
                    f"Found array with shape {X.shape} while a minimum of 2 "
                    "samples and 1 feature is required."
                )
            self.n_features_in_ = X.shape[1]
            vars(self).pop("feature_names_in_", None)
            if names is not None:
                self.feature_names_in_ = names
            return X, ChunkedRows(X)
        X = validate_data(
            self,
            X,
            accept_sparse=("csr", "csc"),
            dtype=[np.float64, np.float32],
            ensure_min_samples=2,
            ensure_all_finite=False,
        )
        return X, InMemoryRows(X)

    def _privacy_plan(self, n_samples, n_features):
        """GDP parameters of the fit's releases and what to charge for them.

        ``μ* = gdp_mu(epsilon, delta)`` is split in the documented shares of
        :meth:`_budget_shares` (ALGORITHMS.md §2); their composition is exactly
        ``μ*``, which is what the accountant is charged and what
        ``privacy_spent_`` converts back.
        """
        mu_total = gdp_mu(self.epsilon, self.delta)
        shares = self._budget_shares()
        mus = {name: mu_total * math.sqrt(w) for name, w in shares.items()}
        composed = math.sqrt(sum(m * m for m in mus.values()))
        spent = (gdp_epsilon(composed, self.delta), self.delta)
        return PrivacyPlan(mus=mus, charge={"mu": mu_total}, spent=spent)

    def _budget_shares(self):
        """Fractions of ``μ*²`` per release; they sum to 1 (ALGORITHMS.md §2)."""
        shares = {"mean": MEAN_BUDGET_SHARE, "covariance": 1.0 - MEAN_BUDGET_SHARE}
        return budget_shares(shares, self.center)

    @abstractmethod
    def _release(self, gram, rows, plan, rng, dtype):
        """Release the mechanism's output from the exact clipped Gram matrix.

        Sets ``components_`` and the spectrum attributes. ``gram`` is
        ``Σ y_i y_iᵀ`` in data units (rows of norm ≤ ``rows.data_norm``);
        ``rows`` gives further passes over the centred, clipped rows;
        ``plan.mus`` maps each release to its GDP ``μ``.
        """

    def _check_n_components(self, n_samples, n_features):
        k = self.n_components
        if isinstance(k, Integral) and not 1 <= k <= min(n_samples, n_features):
            raise ValueError(
                f"n_components={k} must be between 1 and "
                f"min(n_samples, n_features)={min(n_samples, n_features)}."
            )

    @staticmethod
    def _estimate_data_norm(largest):
        _warn_leak(
            "data_norm is None, so it was set to the largest row norm of the data "
            f"({largest:.6g}). This is NOT differentially private: the bound itself "
            "depends on the data. Give data_norm from domain knowledge, without "
            'looking at the data, or data_norm="auto" (a private choice from a '
            "small share of the budget), or public bounds=(lower, upper)."
        )
        return largest if largest > 0.0 else 1.0

    def _spectrum(self, eigvals):
        """Number of components and variance summary from a released spectrum.

        Parameters
        ----------
        eigvals : ndarray of shape (n_features,)
            All released eigenvalues of the noisy scatter matrix, any order.

        Returns
        -------
        k : int
            ``n_components_``: ``n_components`` itself, ``min(n, d)`` for
            ``None``, or the fewest components whose ratios exceed the fraction.
        total : float
            Total variance: the sum of all eigenvalues clamped at 0, over
            ``n − 1`` (the trace of the release's positive part), so that the
            ratios sum to 1 when every component is kept, as in scikit-learn.
        noise_variance : float
            Mean clamped variance beyond the first ``k`` (0 when ``k = min(n, d)``).
        """
        n, d = self.n_samples_, eigvals.shape[0]
        variance = np.sort(np.maximum(eigvals, 0.0))[::-1] / (n - 1)
        total = float(variance.sum())
        k = self.n_components
        if k is None:
            k = min(n, d)
        elif not isinstance(k, Integral):  # variance fraction
            ratio = variance / total if total > 0 else np.zeros_like(variance)
            k = int(np.searchsorted(np.cumsum(ratio), k, side="right")) + 1
            k = min(k, n, d)
        noise_variance = float(variance[k:].mean()) if k < min(n, d) else 0.0
        return k, total, noise_variance

    def _set_components(self, components, variance, total, noise_variance, dtype):
        """Store released components (rows) and their variances as attributes.

        Components are sorted by decreasing variance, variances clamped at 0,
        and each component's sign fixed so its largest entry is positive.
        """
        order = np.argsort(variance)[::-1]
        variance = np.maximum(variance[order], 0.0)
        n = self.n_samples_
        self.n_components_ = components.shape[0]
        self.components_ = _flip_signs(components[order]).astype(dtype)
        self.explained_variance_ = variance.astype(dtype)
        ratio = variance / total if total > 0 else np.zeros_like(variance)
        self.explained_variance_ratio_ = ratio.astype(dtype)
        self.singular_values_ = np.sqrt(variance * (n - 1)).astype(dtype)
        self.noise_variance_ = noise_variance

    # ------------------------------------------------------------ transform
    def transform(self, X):
        """Project ``X`` on the released components.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_components_)
        """
        check_is_fitted(self)
        if is_dask_collection(X):  # lazily, chunk by chunk: a Dask array
            return self._transform(self._check_dask_input(X))
        X = validate_data(
            self,
            X,
            accept_sparse=("csr", "csc"),
            dtype=[np.float64, np.float32],
            reset=False,
        )
        return self._transform(X)

    def _check_dask_input(self, X):
        X, names = as_dask_array(X)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but {type(self).__name__} is "
                f"expecting {self.n_features_in_} features as input."
            )
        fitted = getattr(self, "feature_names_in_", None)
        if fitted is not None and names is not None and list(names) != list(fitted):
            raise ValueError(
                "The feature names should match those that were passed during fit."
            )
        return X

    def _transform(self, X):
        X_new = X @ self.components_.T - self.mean_ @ self.components_.T
        if self.whiten:
            X_new = X_new / self._whiten_scale()
        return X_new

    def _whiten_scale(self):
        scale = np.sqrt(self.explained_variance_)
        return np.maximum(scale, np.finfo(scale.dtype).eps)

    def inverse_transform(self, X):
        """Map projected data back to feature space.

        Exact on the span of ``components_``: ``inverse_transform(transform(X))``
        is the projection of ``X − mean_`` on that span, plus ``mean_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_components_)

        Returns
        -------
        X_original : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        if is_dask_collection(X):
            X, _ = as_dask_array(X)
        else:
            X = check_array(X, dtype=[np.float64, np.float32])
        if X.shape[1] != self.n_components_:
            raise ValueError(
                f"X has {X.shape[1]} features, but inverse_transform expects "
                f"n_components_={self.n_components_} features."
            )
        components = self.components_
        if self.whiten:
            components = components * self._whiten_scale()[:, None]
        return X @ components + self.mean_

    @property
    def _n_features_out(self):
        return self.components_.shape[0]

    # --------------------------------------------- probabilistic PCA model
    def _model_variances(self):
        """Component and residual variances of the PPCA model, floored.

        Floors at machine precision relative to the largest variance keep the
        precision finite when released variances are 0. Component variances
        are at least the residual one, as in the model.
        """
        variance = self.explained_variance_.astype(np.float64)
        residual = float(self.noise_variance_)
        scale = max(float(variance.max(initial=0.0)), residual)
        floor = np.finfo(np.float64).eps * scale if scale > 0 else 1.0
        residual = max(residual, floor)
        return np.maximum(variance, residual), residual

    def get_covariance(self):
        """Covariance of the data under the probabilistic PCA model.

        ``cov = components_ᵀ diag(explained_variance_ − σ²) components_ + σ² I``
        with ``σ² = noise_variance_``. Unlike scikit-learn's ``PCA``, the result
        does not depend on ``whiten`` (whitening changes the outputs of
        ``transform``, not the model of the data).

        Returns
        -------
        cov : ndarray of shape (n_features, n_features)
        """
        check_is_fitted(self)
        components = self.components_.astype(np.float64)
        variance = self.explained_variance_.astype(np.float64)
        residual = float(self.noise_variance_)
        cov = (components.T * np.maximum(variance - residual, 0.0)) @ components
        cov.flat[:: cov.shape[0] + 1] += residual
        return cov

    def get_precision(self):
        """Inverse of :meth:`get_covariance`, by its eigenstructure.

        Variances are floored at machine precision relative to the largest,
        so the precision is finite even when the released residual variance
        is 0.

        Returns
        -------
        precision : ndarray of shape (n_features, n_features)
        """
        check_is_fitted(self)
        components = self.components_.astype(np.float64)
        variance, residual = self._model_variances()
        if components.shape[0] == components.shape[1]:  # no residual subspace
            return (components.T / variance) @ components
        precision = (components.T * (1.0 / variance - 1.0 / residual)) @ components
        precision.flat[:: precision.shape[0] + 1] += 1.0 / residual
        return precision

    def score_samples(self, X):
        """Log-likelihood of each sample under the probabilistic PCA model.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ll : ndarray of shape (n_samples,)
        """
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        variance, residual = self._model_variances()
        n_features, k = X.shape[1], variance.shape[0]
        centred = X.astype(np.float64) - self.mean_
        quad = np.einsum("ij,ij->i", centred, centred @ self.get_precision())
        logdet = np.log(variance).sum() + (n_features - k) * math.log(residual)
        return -0.5 * (quad + n_features * math.log(2.0 * math.pi) + logdet)

    def score(self, X, y=None):
        """Average log-likelihood of the samples (higher is better).

        Lets ``GridSearchCV`` and ``cross_val_score`` select hyperparameters
        without a scorer.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : Ignored

        Returns
        -------
        ll : float
        """
        return float(np.mean(self.score_samples(X)))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags


def _flip_signs(components):
    """Make the largest-magnitude entry of each row positive (deterministic signs)."""
    idx = np.argmax(np.abs(components), axis=1)
    signs = np.sign(components[np.arange(components.shape[0]), idx])
    signs[signs == 0] = 1.0
    return components * signs[:, None]


def _eigh(matrix):
    """All eigenpairs of a real symmetric or complex Hermitian matrix.

    NumPy's LAPACK, not SciPy's: the statistics pass runs on NumPy's BLAS, and
    switching libraries costs a spinning thread pool (see ``_stats``).
    """
    return np.linalg.eigh(matrix)
