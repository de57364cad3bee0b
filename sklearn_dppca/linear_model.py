r"""Private supervised heads: linear models from one noisy Gram release.

A supervised pipeline scales, reduces with a private PCA and fits a
classifier or a regressor. The head's fit reads the rows *and the labels*,
so it must be private too. Both heads here release one statistic, the
scatter matrix of *augmented* rows, with the symmetric Gaussian (GOE) noise
PrivatePCA's covariance gets, and compute everything else from it:

- :class:`PrivateLDA`, a linear discriminant classifier (binary and
  multiclass): the augmented row is :math:`(x, g_1, g_t \cdot e_y)` with
  :math:`e_y` the one-hot label, so the release holds :math:`\sum x x^\top`,
  the class sums :math:`\sum_{y=c} x` and the class counts;
- :class:`PrivateRidge`, ridge regression: the augmented row is
  :math:`(x, g_1, g_t \cdot t)` with :math:`t \in [-1, 1]` the label clipped
  into its public bounds and put in their units, so the release holds
  :math:`\sum x x^\top`, :math:`\sum x`, :math:`\sum x t` and :math:`\sum t`.

Rows are clipped to norm ``data_norm`` = :math:`C`, and :math:`g_1 = w_1 C`,
:math:`g_t = w_t C` are fixed weights, so an augmented row has norm at most
:math:`R = C \sqrt{1 + w_1^2 + w_t^2}` and the release has Frobenius
sensitivity :math:`\sqrt{2} R^2` under the replacement of one row and its
label (docs/privacy.rst, "Supervised heads"). This is
*sufficient-statistics perturbation* (Vu & Slavković 2009; Foulds et al.
2016; Wang 2018 for linear regression), with the covariance's exact analytic
calibration: the fit spends ``(epsilon, delta)``, charged once before the
release.
"""

import math
import warnings
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from sklearn.base import (
    BaseEstimator,
    ClassifierMixin,
    RegressorMixin,
    _fit_context,
    clone,
)
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from . import _array_api
from ._base import reported_spend
from ._box import box_radius, check_box
from ._dask import (
    check_numeric_columns,
    gather_rows,
    is_dask_collection,
    saturate_big_numbers,
)
from ._defaults import _carry_default, _keep_carried_default, _resolve_accountant
from ._fit_guards import _all_or_nothing, _FloatParamsMixin, _refuse_fit_params
from ._param_docs import fill_parameter_docs
from ._paths import MEMORY_SHARE, physical_memory
from ._pca_model import map_non_finite
from ._refusals import refusal
from ._released import NoisyReleaseWarning
from ._row_maps import clip_rows
from ._stats import _clip_scales, _sq_norms, iter_blocks
from ._warning_rules import warn_if_scored_exactly
from .noise import add_goe_noise, make_generator, noise_scale
from .privacy import (
    BudgetAccountant,
    _outside_stacklevel,
    _warn_if_not_private,
    gdp_epsilon,
    gdp_mu,
    private_computation,
)

__all__ = ["PrivateLDA", "PrivateRidge"]


#: The edge of the GOE noise's spectrum, ``2σ√D``, times this is the ridge
#: of ``alpha="auto"``: the released Gram matrix plus it is positive definite
#: but for a chance of about ``e^{-D}`` (Tracy–Widom).
AUTO_RIDGE_EDGES = 1.0


def _augmented_gram(X, targets, data_norm, weights):
    r""":math:`\sum a a^\top` of the augmented rows
    :math:`a = (\operatorname{clip}_C(x), w_1 C, w_t C \cdot t)`, exact.

    ``targets`` is ``(n, m)`` with every row of norm at most 1 (one-hot
    labels, or a label in :math:`[-1, 1]`), ``weights`` is
    :math:`(w_1, w_t)`. The rows are clipped with the package's round-off
    margin (``_clip_scales``), so every computed clipped row has a true norm
    at most :math:`C` and :math:`\|a\|^2 \le C^2 (1 + w_1^2 + w_t^2)`.
    Blocks of rows: memory :math:`O((d + m)^2)` beside ``X``.
    """
    n, d = X.shape
    g_one, g_label = (w * data_norm for w in weights)
    width = d + 1 + targets.shape[1]
    gram = np.zeros((width, width))
    for start, stop, block in iter_blocks(X):
        scales = _clip_scales(block, _sq_norms(block), data_norm)
        rows = np.empty((stop - start, width))
        rows[:, :d] = block * scales[:, None]
        rows[:, d] = g_one
        rows[:, d + 1:] = g_label * targets[start:stop]
        gram += rows.T @ rows
    return gram


def _on_host(values, name=None):
    """An Array API array (``array_api_dispatch``) as a NumPy one: the heads
    fit and predict on the host, their models being small (a ``d × d``
    release at most, after a ``PrivatePCA`` ``k × k``); anything else as it
    is."""
    if values is None or (namespace := _array_api.namespace(values)) is None:
        return values
    # complex, sparse or meta tensors refused by name (review 60)
    return _array_api.to_host(_array_api.plain(values, namespace[0], name))


def _like(values, X):
    """A head's output for the rows ``X``: in ``X``'s namespace and on its
    device where ``X`` is an Array API array, as scikit-learn's estimators
    return it (floats in ``X``'s precision; labels that are not numbers stay
    a NumPy array); otherwise as it is."""
    namespace = _array_api.namespace(X)
    if namespace is None:
        return values
    if values.dtype.kind == "f":
        # X's precision, or the device's widest float for integer rows
        # (their dtype cast the outputs to integers: probabilities of 0)
        floating = _array_api.numpy_dtype(X).kind == "f"
        return _array_api.like(
            values, X, dtype=None if floating else _array_api.widest_float(*namespace))
    if values.dtype.kind in "biu":
        return _array_api.like(values, X, dtype=values.dtype)
    return values


def refuse_complex_labels(y):
    """Refuse complex labels in constant words: scikit-learn's message
    prints ``y`` whole (every person's label)."""
    if np.asarray(y).dtype.kind == "c":
        raise ValueError("Complex data not supported (y holds complex numbers).")


class _PrivateHead(_FloatParamsMixin, BaseEstimator):
    r"""What both heads share: the parameters, the checks, the one release.

    ``_weights`` is :math:`(w_1, w_t)`: the augmented row is
    :math:`(x, w_1 C, w_t C \cdot t)`. They set how the noise is shared
    among the blocks of the release (the signal of a block grows with its
    weight, the noise of every block with :math:`1 + w_1^2 + w_t^2`);
    measured on breast_cancer, wine, digits and
    diabetes at ε = 1 and 3 (docs/supervised.rst, "How the heads were
    chosen").
    """

    _parameter_constraints: dict = {
        "data_norm": [Interval(Real, 0, None, closed="neither"), None],
        "bounds": ["array-like", dict, None],
        "non_finite": [StrOptions({"raise", "clip"})],
        "alpha": [Interval(Real, 0, None, closed="left"), StrOptions({"auto"})],
        "epsilon": [Interval(Real, 0, math.inf, closed="right")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "random_state": ["random_state", np.random.Generator],
        "accountant": [BudgetAccountant, None],
    }

    def __getstate__(self):
        # With accountant=None, a limited default travels to worker processes.
        return _carry_default(self, super().__getstate__())

    def __sklearn_clone__(self):
        return _keep_carried_default(self, super().__sklearn_clone__())

    def _targets(self, y):
        """``(targets, extra)``: labels as rows of norm ≤ 1, checked (raise
        before the charge); ``extra`` is what the attributes need."""
        raise NotImplementedError

    def _label_width(self):
        """Columns of the labels in the augmented rows (public)."""
        return 1

    def _check_norm_given(self):
        if self.data_norm is None and self.bounds is None:
            raise ValueError(
                f"{type(self).__name__} needs data_norm or bounds: a public bound "
                "on the norm of its input rows, or their public per-feature "
                "ranges (lower, upper), known without looking at the data (rows "
                "beyond are clipped). After a PrivatePCA(whiten='partial'), "
                "1; after a PublicScaler to [0, 1], bounds=(0, 1)."
            )

    def _rows(self, X, y):
        if is_dask_collection(X) and len(getattr(X, "shape", ())) == 2 \
                and all(isinstance(s, Integral) for s in X.shape):
            # the rows are gathered into memory: counted before they are
            # (review 68: a Dask array larger than the machine was gathered)
            self._check_gathered(*X.shape)
        X, y = saturate_big_numbers(_on_host(gather_rows(X))), _on_host(y, "y")
        check_numeric_columns(X)
        refuse_complex_labels(y)
        if sparse.issparse(X):
            raise self._sparse_refusal()
        return validate_data(self, X, y, dtype=np.float64, ensure_min_samples=2,
                             y_numeric=False,
                             ensure_all_finite=self.non_finite == "raise")

    def _check_gathered(self, n_samples, n_features, clip=False):
        """Refuse, before the charge, a fit on a Dask array of ``n_samples``
        × ``n_features`` (public) whose rows, gathered into memory, and
        their copy (where ``bounds`` or ``non_finite="clip"`` map them;
        ``clip``: a search sets ``non_finite="clip"`` on the fit) do not fit
        beside the release (:func:`_check_memory`). A search's plan asks it
        of a head that reads a Dask array (review 105 F2: the plan counted
        one copy, the fit refused after the search's charge)."""
        copies = 1 + (self.bounds is not None or self.non_finite == "clip"
                      or clip)
        _check_memory(n_features + 1 + self._label_width(),
                      copies * n_samples * n_features, gathered=True)

    def _sparse_refusal(self):
        return TypeError(
            f"{type(self).__name__} takes dense rows: densify X, or put a "
            "PrivatePCA (which takes sparse rows) before it.")

    def _bound(self, n_features, n_samples=None):
        r"""``(lower, upper, centre, C), reach``: :meth:`_box` and
        :math:`1 + w_1^2 + w_t^2`, refused where :math:`C^2 \cdot`
        ``reach`` (the release's sensitivity over :math:`\sqrt 2`) is not a
        normal float, where ``n_samples`` times it (the released matrix's
        scale) overflows, or where the release cannot fit in memory
        (:func:`_check_memory`). Public values only: a search's plan asks it
        of each candidate's head before the charge."""
        box = self._box(n_features)
        data_norm = box[3]
        # ‖a‖² ≤ R² = C² + g₁² + g_t²: Frobenius sensitivity √2 R² of Σ a aᵀ
        # (docs/privacy.rst, "Supervised heads")
        reach = 1.0 + sum(w * w for w in self._weights)
        scale = data_norm * data_norm * reach
        if not np.finfo(np.float64).tiny <= scale < math.inf:
            raise ValueError(
                f"the rows' norm bound ({data_norm:.4g}, from data_norm or "
                "bounds) is too large or too small: its square, the release's "
                "sensitivity, is outside float64's normal range. Rescale the "
                "features.")
        if n_samples is not None and not math.isfinite(n_samples * scale):
            raise ValueError(
                f"the rows' norm bound ({data_norm:.4g}) is too large for "
                f"{n_samples} rows: the sum of their squares, the released "
                "matrix's scale, overflows float64. Rescale the features.")
        copied = box[0] is not None or self.non_finite == "clip"
        _check_memory(n_features + 1 + self._label_width(),
                      n_features * (n_samples or 0) if copied else 0)
        return box, reach

    def _box(self, n_features):
        """``(lower, upper, centre, C)``: with ``bounds``, the box, its
        midpoint (the rows are clipped into the box and translated by it:
        public maps, absorbed by the intercept) and the radius around it or
        ``data_norm`` if smaller; else no box and ``data_norm``."""
        if self.bounds is None:
            return None, None, np.zeros(n_features), float(self.data_norm)
        lower, upper = check_box(self.bounds, n_features,
                                 getattr(self, "feature_names_in_", None))
        centre, radius = box_radius(lower, upper, True)
        norm = radius if self.data_norm is None else min(radius, self.data_norm)
        return lower, upper, centre, float(norm)

    @_all_or_nothing
    def _fit(self, X, y):
        self._check_norm_given()
        mu = gdp_mu(self.epsilon, self.delta)
        accountant = _resolve_accountant(self)
        accountant.check(mu=mu)  # refused before the data is read
        X, y = self._rows(X, y)
        n, d = X.shape
        (lower, upper, centre, data_norm), reach = self._bound(d, n)
        rng = make_generator(self.random_state)
        sigma = noise_scale(math.sqrt(2.0) * reach * data_norm * data_norm, mu)
        with private_computation():
            if self.non_finite == "clip":  # a public map of each value
                X = map_non_finite(X)  # a copy: the caller's array is kept
            targets, extra = self._targets(y)  # labels checked before the charge
            accountant.spend(mu=mu, estimator=self)
            if lower is not None:  # into the public box, around its midpoint
                X = np.clip(X, lower, upper, out=X if self.non_finite == "clip"
                            else None)
                X -= centre
            gram = _augmented_gram(X, targets, data_norm, self._weights)
            released = add_goe_noise(rng, gram, sigma)
            self.data_norm_ = data_norm
            self._set_model(released, sigma, n, d, extra)
            if getattr(self, "_keep_release", False):  # a search's shared fit
                self._release = (released, sigma, n, extra)
            # the model of translated rows, as one of the rows themselves
            self.intercept_ = self.intercept_ - self.coef_ @ centre
            if hasattr(self, "means_"):
                self.means_ = self.means_ + centre
            self.n_samples_ = n
            self.noise_scale_ = sigma
            self.privacy_spent_ = reported_spend(
                (gdp_epsilon(mu, self.delta), self.delta), self.epsilon)
        _warn_if_not_private(self.epsilon, self.random_state, "released coefficients",
                             delta=self.delta, n_samples=n)
        from ._search_plan import warn_if_after_learned_steps  # imports this module

        warn_if_after_learned_steps(self)
        self._warn_if_noise()

    def _leading(self, k, alpha):
        """The model of this fit's release restricted to the first ``k``
        input features: its sub-block of those features, the constant and
        the labels, post-processed as a fit on ``k`` features with ridge
        ``alpha`` would be (for a search's candidates with fewer components
        or another ``alpha`` than the fit that ran; docs/privacy.rst,
        "Supervised search"). The rows were clipped on all the features, so
        a row's first ``k`` have norm at most :math:`C` too. Needs a fit
        with ``_keep_release`` set and no ``bounds``."""
        released, sigma, n, extra = self._release
        d = self.n_features_in_
        keep = np.r_[np.arange(k), np.arange(d, released.shape[0])]
        sub = clone(self).set_params(alpha=alpha)
        sub.data_norm_ = self.data_norm_
        sub._set_model(released[np.ix_(keep, keep)], sigma, n, k, extra)
        sub.n_features_in_, sub.n_samples_, sub.noise_scale_ = k, n, sigma
        sub.privacy_spent_ = self.privacy_spent_
        return sub

    def _warn_if_noise(self):
        r"""A :class:`~sklearn_dppca.NoisyReleaseWarning` when the released
        model is mostly noise (post-processing of released values and the
        public :math:`\sigma`); the heads' rules are in
        :ref:`privacy-supervised-heads`."""

    def _ridge(self, sigma, n_dims):
        """The ridge added to the released Gram block, in its units."""
        if self.alpha != "auto":
            return float(self.alpha)
        return AUTO_RIDGE_EDGES * 2.0 * sigma * math.sqrt(n_dims)

    def _decision(self, X):
        check_is_fitted(self)
        warn_if_scored_exactly(self, "rows and labels")
        X = saturate_big_numbers(_on_host(X))
        check_numeric_columns(X)
        X = validate_data(self, X, reset=False,
                          dtype=np.float64,
                          ensure_all_finite=self.non_finite == "raise")
        if self.non_finite == "clip":
            X = map_non_finite(X)
        return self._as_fitted(X) @ self.coef_.T + self.intercept_

    def _as_fitted(self, X):
        """``X`` through the public map the fit applied to its rows: into the
        box (with ``bounds``), then clipped to norm ``data_norm_`` around the
        box's midpoint (or the origin). Rows the fit would not have clipped
        are unchanged; the others are scored as the model saw such rows,
        not extrapolated from clipped ones."""
        lower, upper, centre, _ = self._box(X.shape[1])
        if lower is not None:
            X = np.clip(X, lower, upper)
        return centre + clip_rows(X, self.data_norm_, centre)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = True
        tags.input_tags.sparse = False
        return tags


#: ``(d + m + 1)²`` matrices a head's fit holds at its peak: the exact
#: Gram matrix, its noise and the release, the eigenvectors of the within
#: block, and a product's temporary (5, NumPy's), and inside LAPACK's eigh
#: a copy of its input and its workspace (syevd's ``2w²`` doubles): 7.1
#: measured by the peak RSS at ``w`` = 1 503 and 4 003 (review 88: 5 counted).
_HEAD_MATRICES = 8


def _check_memory(width, copied=0, gathered=False):
    """Refuse, before the charge, a head whose release (``width`` × ``width``:
    the features, the constant and the labels' columns; public) and
    ``copied`` entries of rows copied after the charge (one copy of the rows
    where ``bounds`` or ``non_finite="clip"`` map them) cannot fit in
    :data:`~sklearn_dppca._paths.MEMORY_SHARE` of this machine's memory: the
    fit would otherwise fail after it."""
    total = physical_memory()
    need = 8.0 * (_HEAD_MATRICES * width * width + copied)
    beside = (" beside the rows it gathers from the Dask array into memory"
              if gathered else " beside a copy of its rows" if copied else "")
    if total is not None and need > MEMORY_SHARE * total:
        raise refusal(MemoryError(
            f"this head's release is a {width} × {width} matrix{beside}: "
            "its fit needs "
            f"about {need / 2**30:.1f} GiB, more than {MEMORY_SHARE:.0%} of this "
            f"machine's {total / 2**30:.1f} GiB. Put a PrivatePCA before it (its "
            "k components are the head's features). Refused before any charge."))


def _regularised(matrix, ridge):
    r"""``(values, vectors)`` of
    :math:`\operatorname{sym}(M)_+ + \mathtt{ridge} \cdot I`: the released
    matrix's negative eigenvalues (noise) clamped at 0, then the ridge
    (post-processing); every value positive."""
    values, vectors = np.linalg.eigh((matrix + matrix.T) / 2.0)
    values = np.maximum(values, 0.0) + ridge
    # values within rounding of 0 (a clamped one where ridge = 0) are 0: the
    # solve's pseudo-inverse leaves their directions out. A floor at
    # tiny · max gave inverses near 1e307, coefficients of inf and NaN
    # predictions (review 120 F1)
    cut = values.max() * values.shape[0] * np.finfo(float).eps
    return np.where(values > cut, values, 0.0), vectors


def _solve(values, vectors, rhs):
    r""":math:`(V \operatorname{diag}(\mathtt{values}) V^\top)^{+}
    \mathtt{rhs}` for a vector or the columns of a matrix (the
    pseudo-inverse: a value of 0 leaves its direction out)."""
    positive = values > 0.0
    inverse = np.divide(1.0, values, out=np.zeros_like(values), where=positive)
    return vectors @ ((inverse if rhs.ndim == 1 else inverse[:, None])
                      * (vectors.T @ rhs))


@fill_parameter_docs
class PrivateLDA(ClassifierMixin, _PrivateHead):
    r"""Linear discriminant analysis with a private fit.

    :class:`~sklearn.discriminant_analysis.LinearDiscriminantAnalysis` for
    private rows and labels: a linear classifier, binary or multiclass, that
    puts the head on a private pipeline (``PublicScaler → PrivatePCA →
    PrivateLDA``). The fit releases one matrix — the scatter matrix of the
    rows clipped to norm ``data_norm``, augmented with a constant and the
    one-hot label — with Gaussian noise, and computes the class counts, the
    class means, the pooled within-class covariance and the discriminant from
    it. The fit is :math:`(\varepsilon, \delta)`-differentially private
    under the replacement of one row and its label, and is charged once; the
    proof is in :ref:`privacy-supervised-heads`.

    Read more in the :ref:`User Guide <supervised>`.

    Parameters
    ----------
    classes : array-like of shape (n_classes,)
        The labels, public and known in advance (at least two, of one kind
        that can be sorted and hashed: numbers, or text). They are not
        learned from ``y``: the set of labels present would tell
        whether anyone has a rare one. A label of ``y`` outside them is
        refused before the charge.
    %(head_rows)s
    %(head_budget)s
    alpha : float or "auto", default="auto"
        Ridge added to the released within-class scatter matrix (its
        negative eigenvalues, noise, are first clamped at 0). ``"auto"``:
        the edge of the noise's spectrum, :math:`2\sigma\sqrt{d + K + 1}`
        (:math:`\sigma` = ``noise_scale_``, :math:`d` features, :math:`K`
        classes), so the matrix is well conditioned whatever the noise
        drew. With ``0``, the directions whose clamped value is within
        rounding of 0 are left out (the pseudo-inverse).
    %(head_non_finite)s
    %(head_randomness)s

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        ``classes``, sorted.
    class_count_ : ndarray of shape (n_classes,)
        Released (noisy) rows per class, summing to :math:`n`: floored at 1,
        then rescaled to that sum (so a floored count may be below 1).
    priors_ : ndarray of shape (n_classes,)
        ``class_count_`` divided by :math:`n`.
    means_ : ndarray of shape (n_classes, n_features)
        Released class means of the clipped rows.
    covariance_ : ndarray of shape (n_features, n_features)
        Released pooled within-class covariance, with the ridge.
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    noise_scale_ : float
        The standard deviation :math:`\sigma` of the release's noise.
    data_norm_ : float
        The norm bound the rows were clipped to (public).
    privacy_spent_ : tuple of float
    n_samples_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)

    See Also
    --------
    PrivateRidge : The regressor from the same release.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca import BudgetAccountant
    >>> from sklearn_dppca.linear_model import PrivateLDA
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 20_000)
    >>> X = rng.normal(size=(20_000, 3)) * 0.3 + y[:, None] * [0.5, 0.0, 0.0]
    >>> clf = PrivateLDA(classes=[0, 1], data_norm=2.0, epsilon=1.0,
    ...                  accountant=BudgetAccountant()).fit(X, y)
    >>> bool(clf.score(X, y) > 0.75)
    True
    """

    _parameter_constraints: dict = {
        **_PrivateHead._parameter_constraints,
        "classes": ["array-like", None],
    }
    # the class sums and counts matter most: a light constant, a heavy label
    _weights = (0.2, 1.2)

    def __init__(self, classes=None, *, data_norm=None, bounds=None, epsilon=1.0,
                 delta=1e-6, alpha="auto", non_finite="raise", random_state=None,
                 accountant=None):
        self.classes = classes
        self.data_norm = data_norm
        self.bounds = bounds
        self.non_finite = non_finite
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.random_state = random_state
        self.accountant = accountant

    def _declared(self):
        if self.classes is None:
            raise ValueError(
                "PrivateLDA needs classes=[...]: the labels, known in advance. "
                "They are not learned from y, where the labels present would "
                "tell whether anyone has a rare one."
            )
        if np.ndim(self.classes) == 1 and len(
                {isinstance(c, (str, bytes)) for c in self.classes}) > 1:
            raise ValueError(  # NumPy would make every class text
                "classes mixes text and numbers: give labels of one kind, as "
                "in y.")
        try:  # labels are sorted (np.unique, searchsorted) and hashed (sets)
            classes = np.unique(np.asarray(self.classes))
            set(classes.tolist())
        except TypeError as exc:
            raise ValueError(
                "classes must be labels that can be sorted and hashed, of one "
                f"kind as in y (numbers, or text): {exc}.") from None
        if classes.shape[0] < 2 or np.asarray(self.classes).ndim != 1:
            raise ValueError("classes must list at least two distinct labels.")
        if classes.dtype.kind in "fc" and not np.isfinite(classes).all():
            raise ValueError("classes must not hold NaN or infinity: no label "
                             "in y can be one.")
        return classes

    def _label_width(self):
        return self._declared().shape[0]

    def _targets(self, y):
        classes = self._declared()
        y = column_or_1d(y, warn=True)
        try:
            index = np.searchsorted(classes, y)
            known = (index < classes.shape[0]) & (
                classes[np.minimum(index, classes.shape[0] - 1)] == y)
        except TypeError:  # labels of another type than the classes
            known = np.zeros(y.shape[0], dtype=bool)
        if not known.all():
            if y.dtype.kind in "fc" and np.isnan(y).any():  # as fit says it
                raise refusal(ValueError(
                    "Input y contains NaN. This head spent nothing."))
            try:
                kind = type_of_target(y)
            except (TypeError, ValueError):  # labels of mixed types
                kind = "unknown"
            if kind.startswith("continuous"):
                raise refusal(ValueError(
                    f"Unknown label type: {kind}. PrivateLDA is a classifier: "
                    "for a numeric target use PrivateRidge. This head spent nothing."
                ))
            raise refusal(ValueError(
                "y holds labels outside classes="
                f"{classes.tolist()!r}: declare every label in classes. "
                "This head spent nothing."
            ))
        targets = np.zeros((y.shape[0], classes.shape[0]))
        targets[np.arange(y.shape[0]), index] = 1.0
        return targets, classes

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, **params):
        """Release the class statistics of ``(X, y)`` and the discriminant.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            One row per person, finite.
        y : array-like of shape (n_samples,)
            Labels, each in ``classes``.
        **params
            ``sample_weight`` and other fit parameters are refused with a
            ``TypeError`` that says why.

        Returns
        -------
        self : object
        """
        _refuse_fit_params(self, params)
        self._declared()  # public: refused before anything is read
        self._fit(X, y)
        return self

    def _set_model(self, released, sigma, n, d, extra):
        """Post-processing of the release (docs/privacy.rst)."""
        self.classes_ = extra
        K = extra.shape[0]
        g_one, g_label = (w * self.data_norm_ for w in self._weights)
        labels = slice(d + 1, d + 1 + K)
        # two noisy copies of n_c: the diagonal, g_t² n_c + N(0, σ²), and the
        # constant's row, g₁ g_t n_c + N(0, σ²/2), weighed by their inverse
        # variances (their C⁴ cancels: left out, it over- or underflows
        # far from C = 1); then floored at 1 and rescaled to Σ n_c = n
        # (public): a floored count may end below 1
        w_one, w_label = self._weights
        w_diag, w_row = w_label**4, 2.0 * (w_one * w_label) ** 2
        counts = (w_diag * np.diag(released)[labels] / g_label**2
                  + w_row * released[d, labels] / (g_one * g_label)) / (w_diag + w_row)
        counts = np.maximum(counts + (n - counts.sum()) / K, 1.0)
        counts *= n / counts.sum()
        sums = released[:d, labels] / g_label  # (d, K): Σ_{y=c} x
        means = (sums / counts).T
        within = released[:d, :d] - (sums / counts) @ sums.T
        values, vectors = _regularised(within, self._ridge(sigma, d + 1 + K))
        # the ridge shrinks the shape, not the scale: rescaled to the released
        # trace, so the likelihood keeps its units beside log π_c; the trace
        # floored at its own noise (d diagonal entries, sd σ√d): a trace lost
        # in the noise would otherwise shrink Σ̂ toward 0 and blow the noisy
        # means up into the discriminant
        total = max(float(np.trace(within)), sigma * math.sqrt(d),
                    float(values.sum()) * 1e-3)
        mass = float(values.sum())  # 0 only where every value is (ridge 0)
        values = values * (total / mass if mass > 0 else 0.0) / max(n - K, 1)  # Σ̂
        self.covariance_ = (vectors * values) @ vectors.T
        coef = _solve(values, vectors, means.T).T  # (K, d): Σ̂⁻¹ μ_c
        intercept = -0.5 * np.einsum("kd,kd->k", means, coef) + np.log(counts / n)
        if K == 2:
            coef, intercept = coef[1:] - coef[:1], intercept[1:] - intercept[:1]
        self.class_count_, self.priors_, self.means_ = counts, counts / n, means
        self.coef_, self.intercept_ = coef, intercept

    def _warn_if_noise(self):
        # the noise on a released class mean: d coordinates of sd
        # σ / (√2 g_t n_c) (an off-diagonal entry of the kernel over g_t n_c)
        sigma = self.noise_scale_
        if sigma == 0.0:
            return
        g_label = self._weights[1] * self.data_norm_
        d = self.means_.shape[1]
        spread = math.sqrt(d) * sigma / (math.sqrt(2.0) * g_label * self.class_count_)
        gaps = np.linalg.norm(self.means_[:, None] - self.means_[None], axis=2)
        noise = np.hypot(spread[:, None], spread[None])
        np.fill_diagonal(gaps, 0.0)
        if (gaps > 2.0 * noise).any():
            return
        warnings.warn(
            "The released class means of this PrivateLDA lie within twice their "
            "noise of one another, as they would if the classes did not differ: "
            "its predictions are little better than guesses. The noise grows "
            "as the square of the norm "
            f"bound and shrinks as n times epsilon: give a tighter data_norm "
            f"(the bound used: {self.data_norm_:.4g}), fewer features (a "
            "PrivatePCA before the head), or more epsilon (now "
            f"{self.epsilon:g}). (Computed from released values and the public "
            "noise scale only.)", NoisyReleaseWarning,
            stacklevel=_outside_stacklevel())

    def decision_function(self, X):
        """Discriminant scores: ``(n_samples,)`` for two classes (positive for
        ``classes_[1]``), else ``(n_samples, n_classes)``."""
        scores = self._decision(X)
        return _like(scores.ravel() if self.classes_.shape[0] == 2 else scores, X)

    def predict_proba(self, X):
        """Class probabilities of the discriminant model (its softmax)."""
        return _like(self._proba(self._decision(X)), X)

    def _log_proba(self, scores):
        """The softmax's logarithm, ``scores − logsumexp(scores)``; the
        far classes' terms underflow to 0 in the sum, silently (no flag
        under ``np.seterr``, as the package's other maps: review 120 F3)."""
        if self.classes_.shape[0] == 2:
            scores = np.hstack([np.zeros_like(scores), scores])
        scores = scores - scores.max(axis=1, keepdims=True)
        with np.errstate(under="ignore"):
            return scores - np.log(np.exp(scores).sum(axis=1, keepdims=True))

    def _proba(self, scores):
        with np.errstate(under="ignore"):
            return np.exp(self._log_proba(scores))

    def predict_log_proba(self, X):
        """Logarithm of :meth:`predict_proba`."""
        return _like(self._log_proba(self._decision(X)), X)

    def predict(self, X):
        """The class of highest discriminant."""
        scores = self._decision(X)
        if self.classes_.shape[0] == 2:
            labels = self.classes_[(scores.ravel() > 0).astype(int)]
        else:
            labels = self.classes_[np.argmax(scores, axis=1)]
        return _like(labels, X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True
        return tags


@fill_parameter_docs
class PrivateRidge(RegressorMixin, _PrivateHead):
    r"""Ridge regression with a private fit.

    :class:`~sklearn.linear_model.Ridge` for private rows and labels. The
    fit releases one matrix — the scatter matrix of the rows clipped to norm
    ``data_norm``, augmented with a constant and the label clipped into
    ``y_bounds`` (in their units) — with Gaussian noise, and solves the
    normal equations from it; predictions are clipped into ``y_bounds``. The
    fit is :math:`(\varepsilon, \delta)`-differentially private under the
    replacement of one row and its label, and is charged once; the proof is
    in :ref:`privacy-supervised-heads`.

    Read more in the :ref:`User Guide <supervised>`.

    Parameters
    ----------
    y_bounds : (float, float)
        Public bounds ``(low, high)`` of the label; labels beyond them are
        clipped. Required.
    %(head_rows)s
    %(head_budget)s
    alpha : float or "auto", default="auto"
        Ridge added to the released (centred) Gram matrix of the rows, after
        its negative eigenvalues (noise) are clamped at 0. ``"auto"``: the
        edge of the noise's spectrum, :math:`2\sigma\sqrt{d + 2}`
        (:math:`\sigma` = ``noise_scale_``, :math:`d` features). With
        ``0``, the directions whose clamped value is within rounding of 0
        are left out (the pseudo-inverse).
    %(head_non_finite)s
    %(head_randomness)s

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,)
    intercept_ : float
    noise_scale_ : float
    data_norm_ : float
    privacy_spent_ : tuple of float
    n_samples_ : int
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)

    See Also
    --------
    PrivateLDA : The classifier from the same release.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca import BudgetAccountant
    >>> from sklearn_dppca.linear_model import PrivateRidge
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(20_000, 2))
    >>> y = 2 * X[:, 0] - X[:, 1] + rng.normal(0, 0.1, 20_000)
    >>> reg = PrivateRidge(y_bounds=(-4, 4), data_norm=1.5, epsilon=1.0,
    ...                    accountant=BudgetAccountant()).fit(X, y)
    >>> bool(reg.score(X, y) > 0.9)
    True
    """

    _parameter_constraints: dict = {
        **_PrivateHead._parameter_constraints,
        "y_bounds": [tuple, list, None],
    }
    _weights = (0.3, 0.7)

    def __init__(self, y_bounds=None, *, data_norm=None, bounds=None, epsilon=1.0,
                 delta=1e-6, alpha="auto", non_finite="raise", random_state=None,
                 accountant=None):
        self.y_bounds = y_bounds
        self.data_norm = data_norm
        self.bounds = bounds
        self.non_finite = non_finite
        self.epsilon = epsilon
        self.delta = delta
        self.alpha = alpha
        self.random_state = random_state
        self.accountant = accountant

    def _label_box(self):
        try:
            low, high = (float(v) for v in self.y_bounds)
        except (TypeError, ValueError):
            low = high = math.nan
        if not (math.isfinite(low) and math.isfinite(high) and low < high
                and math.isfinite(high - low)):
            raise ValueError(
                "PrivateRidge needs y_bounds=(low, high): public finite bounds "
                "of the label, low < high, known without looking at the data "
                f"(labels beyond them are clipped); got {self.y_bounds!r}."
            )
        return low / 2.0 + high / 2.0, (high - low) / 2.0

    def _targets(self, y):
        # an integer beyond a float is the infinite label it rounds to
        y = saturate_big_numbers(column_or_1d(y, warn=True))
        try:  # numbers, not text that reads as numbers ("1.5")
            if y.dtype.kind in "USO" and any(isinstance(v, (str, bytes)) for v in y):
                raise TypeError
            y = y.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError("PrivateRidge needs numeric labels y.") from None
        if not np.isfinite(y).all():
            raise refusal(ValueError("y contains NaN or infinity: PrivateRidge "
                                     "needs finite labels. This head spent nothing."))
        mid, half = self._label_box()
        t = np.clip((np.clip(y, mid - half, mid + half) - mid) / half, -1.0, 1.0)
        return t[:, None], (mid, half)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, **params):
        """Release the statistics of ``(X, y)`` and solve for the coefficients.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Numeric labels; clipped into ``y_bounds``.
        **params
            Refused, as by :class:`PrivateLDA`'s ``fit``.

        Returns
        -------
        self : object
        """
        _refuse_fit_params(self, params)
        self._label_box()  # public: refused before anything is read
        self._fit(X, y)
        return self

    def _set_model(self, released, sigma, n, d, extra):
        """Post-processing of the release (docs/privacy.rst)."""
        mid, half = extra
        g_one, g_label = (w * self.data_norm_ for w in self._weights)
        gram, sum_x = released[:d, :d], released[:d, d] / g_one
        xt = released[:d, d + 1] / g_label
        sum_t = released[d, d + 1] / (g_one * g_label)
        # centred normal equations: (G − s sᵀ/n + λ) w = Σ x t − s Σt / n
        centred = gram - np.outer(sum_x, sum_x) / n
        values, vectors = _regularised(centred, self._ridge(sigma, d + 2))
        w = _solve(values, vectors, xt - sum_x * sum_t / n)
        self.coef_ = half * w
        self.intercept_ = float(mid + half * (sum_t - sum_x @ w) / n)

    def predict(self, X):
        """Predictions, clipped into ``y_bounds``."""
        mid, half = self._label_box()
        return _like(np.clip(self._decision(X), mid - half, mid + half), X)
