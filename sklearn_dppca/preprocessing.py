"""Putting features on a common scale before a private fit.

A private PCA of features on different scales follows the feature with the
largest variance: income in currency units beside an age and a 1–5 score
gives a first component that is income and others that are noise. Scale
first, in one of two ways:

- :class:`PublicScaler` maps each feature from its **public** range (or a
  public centre and scale) to a common scale. It learns nothing from the
  data, costs no budget, and may stand before the private estimator in a
  :class:`~sklearn_dppca.model_selection.PrivateGridSearchCV`.
- :class:`PrivateStandardScaler` estimates each feature's mean and standard
  deviation privately, from public per-feature bounds, as
  :class:`~sklearn.preprocessing.StandardScaler` does without privacy. It is
  a release of its own, charged to the accountant (docs/privacy.rst,
  "The private standard scaler").

Missing values: fill them with a public constant before the fit, with
:class:`~sklearn.impute.SimpleImputer` ``(strategy="constant",
keep_empty_features=True)`` — a mean imputer learns the data's mean without
noise, which is not private (:ref:`choosing`).

A fit whose released variances show one feature dominating issues a
:class:`FeatureScaleWarning` that points here.
"""

import math
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from scipy import sparse
from sklearn.base import (
    BaseEstimator,
    OneToOneFeatureMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils._set_output import _get_output_config
from sklearn.utils.validation import FLOAT_DTYPES, check_is_fitted, validate_data

from . import _array_api
from ._array_api import check_same_namespace
from ._base import reported_spend
from ._box import box_sums, by_feature_name, check_box, parse_box
from ._dask import check_numeric_columns, gather_rows, saturate_big_numbers
from ._defaults import _carry_default, _keep_carried_default, _resolve_accountant
from ._fit_guards import _all_or_nothing, _FloatParamsMixin, _refuse_fit_params
from ._paths import check_gathered
from ._pca_model import map_non_finite
from ._released import FeatureScaleWarning
from .noise import dense_noise, make_generator, noise_scale
from .privacy import (
    BudgetAccountant,
    _warn_if_not_private,
    gdp_epsilon,
    gdp_mu,
    private_computation,
)

__all__ = ["FeatureScaleWarning", "PrivateStandardScaler", "PublicScaler"]

# Defined beside the check that issues it (sklearn_dppca._released, which
# the estimators import); shown and documented under this module.
FeatureScaleWarning.__module__ = __name__


def _into(X, values, copy):
    """``values`` (an array shaped like ``X``), written into ``X`` itself
    when ``copy`` is false (a transform in place, as scikit-learn's scalers
    do with ``copy=False``; an Array API array gets the new array)."""
    if copy or not isinstance(X, np.ndarray):
        return values
    X[...] = values
    return X


def _writable(X):
    """``X`` where a map may write its result into it: a validated NumPy
    array (a copy, or the caller's with ``copy=False``); else None."""
    return X if isinstance(X, np.ndarray) and X.ndim == 2 else None


#: What a scaler's call that gathers a Dask array suggests instead.
_MAP_CHUNKS = "Map the chunks instead: X.map_blocks(scaler.transform, dtype=float). "
_FIT_ADVICE = ("Fit it on a sample of the rows, or give the bounds to the "
               "private estimator (PrivatePCA(bounds=...) reads the chunks "
               "where they are). ")


def _validate(estimator, X, *, reset, gathered=(0, 0, _MAP_CHUNKS), **params):
    """``validate_data`` in float64 or float32: NumPy's, or under
    ``array_api_dispatch`` the namespace's own dtypes (on ``X``'s device);
    a Dask array gathered in memory (its sparse chunks as CSR), refused
    first where it would not fit (``gathered``: the call's ``copies``,
    ``wide`` and ``advice`` for :func:`~sklearn_dppca._paths.check_gathered`)."""
    copies, wide, advice = gathered
    check_gathered(X, type(estimator).__name__, copies, wide, advice)
    X = saturate_big_numbers(gather_rows(X))
    check_numeric_columns(X)
    where = _array_api.namespace(X)
    if where is not None:
        X = _array_api.plain(X, where[0])  # complex refused, as a fit does
    dtype = FLOAT_DTYPES if where is None else _array_api.float_dtypes(*where)
    # scikit-learn's finiteness check sums the rows: a finite row of ±1e308
    # overflows to inf − inf, "invalid" under np.seterr(all="raise") (review
    # 123 F5); NaN and inf themselves are found by the check, not the flag
    with np.errstate(over="ignore", invalid="ignore"):
        return validate_data(estimator, X, accept_sparse=("csr", "csc"),
                             dtype=dtype, reset=reset, **params)


def _to_namespace(estimator, X):
    """The fitted float arrays of ``estimator`` (NumPy, public or released)
    moved to ``X``'s namespace and device, as scikit-learn's scalers keep
    them under ``array_api_dispatch``: float64, or float32 on a device
    without float64. Nothing for NumPy input."""
    where = _array_api.namespace(X)
    if where is None:
        return
    wide = _array_api.widest_float(*where)
    for name, value in list(vars(estimator).items()):
        if (name.endswith("_") and isinstance(value, np.ndarray)
                and value.dtype.kind == "f"):
            setattr(estimator, name, _array_api.like(value, X, dtype=wide))


def _saturate(xp, out, dtype):
    """``out`` (computed wider) clipped to ``dtype``'s largest finite values
    and cast to ``dtype``: a finite value never becomes ±inf (NaN stays)."""
    big = float(xp.finfo(dtype).max)
    return _array_api.astype(xp.clip(out, -big, big), dtype)


#: Entries of a NumPy array mapped at once by :func:`_saturated` (their
#: float64 copies stay in the L2 cache: 16 384 rows of 50 features were
#: 1.5x slower than the whole array at once, 1 024 rows 1.4x faster).
_MAP_ENTRIES = 1 << 16


def _saturated(compute, X, out=None):
    """``compute(X)`` in float64 (an Array API device's widest float),
    saturated at ``X.dtype``'s largest finite values: a finite value is
    never mapped to ±inf (NaN stays NaN). A 2-D NumPy array by blocks of
    rows, written into ``out`` (``X`` itself may be given): the float64
    copies are one block's."""
    if out is not None:
        step = max(1, _MAP_ENTRIES // max(1, X.shape[1]))
        for start in range(0, X.shape[0], step):
            rows = slice(start, start + step)
            out[rows] = _saturated(compute, X[rows])
        return out
    xp = _array_api.module_of(X)
    wide = (np.float64 if xp is np else
            getattr(xp, _array_api.widest_float(*_array_api.namespace(X)).name))
    # the map runs on the caller's rows, in a Pipeline before the private
    # step's charge and outside its silence: a flag raised by one value
    # (an overflow saturated below, an underflow to a subnormal or 0, the
    # map's right result) would be a warning, or under np.seterr(all="raise")
    # a failure, that one row decides
    with np.errstate(over="ignore", under="ignore"):
        out = compute(_array_api.astype(X, wide))
        return _saturate(xp, out, X.dtype)


def _per_feature(value, name, n_features, feature_names):
    """``value`` (a number, a sequence of them, or a dict by feature name) as
    a float array of shape ``(n_features,)``."""
    if isinstance(value, dict):
        value = by_feature_name(value, name, feature_names, "value",
                                f"{name} as a sequence")
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        array = None
    if array is not None and array.shape == ():  # one for every feature
        array = np.broadcast_to(array, (n_features,))
    if array is None or array.shape != (n_features,):
        raise ValueError(
            f"{name} must be a number, {n_features} numbers (one per feature), "
            f"or a dict of them by feature name; got {value!r}."
        )
    if not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite; got {value!r}.")
    return np.array(array)


def _finite_map(factor, offset, given):
    """``(factor, offset)`` of a public map, refused unless every factor is a
    finite positive float64 number and every offset finite (a width or scale
    near 0, or a range wider than float64 holds, overflows): public values,
    checked at fit."""
    if not (np.isfinite(factor).all() and (factor > 0).all()
            and np.isfinite(offset).all()):
        raise ValueError(
            f"The map from {given} overflows float64: each feature's factor "
            "(scale_) must be a finite positive number and its offset (min_) "
            "finite."
        )
    return factor, offset


class PublicScaler(
    OneToOneFeatureMixin,
    TransformerMixin,
    _FloatParamsMixin,
    BaseEstimator,
):
    r"""Scale each feature by public knowledge: its range, or a centre and scale.

    The stateless, budget-free way to put features on a common scale before
    a private fit. Each feature is mapped from its *public* range
    ``[low, high]`` (known without looking at the data: a 1–5 scale, ages
    18–90, a sensor's specification) onto ``feature_range``, as
    :class:`~sklearn.preprocessing.MinMaxScaler` does with the data's own
    range; or, with ``center`` and ``scale``, to
    :math:`(x - \mathtt{center}) / \mathtt{scale}`, as
    :class:`~sklearn.preprocessing.StandardScaler` does with the data's own
    mean and deviation.

    ``fit`` learns nothing from the rows, so the scaler releases nothing and
    costs no budget: it composes with any private step, and is accepted
    beside the private estimator of a
    :class:`~sklearn_dppca.model_selection.PrivateGridSearchCV`. Follow it
    with a private estimator whose ``bounds`` is the image of the ranges:
    with the default ``feature_range=(0, 1)``, ``PrivatePCA(...,
    bounds=(0, 1))`` clips every row into the unit cube and bounds its norm
    by :math:`\sqrt{d}/2`. Sparse input (CSR or CSC) stays sparse where the
    map sends 0 to 0 (ranges from 0 onto a ``feature_range`` from 0, or
    ``center=0``); a map that would fill the implicit zeros refuses it with
    a ``TypeError``. Read more in the :ref:`User Guide <mixed-scales>`; why
    a public map is free: :ref:`privacy-preprocessing`.

    Parameters
    ----------
    ranges : (lower, upper), dict or None, default=None
        The public range of each feature, spelled as every ``bounds`` of the
        package: ``(lower, upper)``, two numbers (the same range for every
        feature) or two arrays of length ``n_features`` (the lows, then the
        highs: a pair always means lower and upper), or a dict ``{feature
        name: (low, high)}`` for a DataFrame (it may name more features than
        ``X`` has). Every :math:`\mathrm{low} < \mathrm{high}`. One
        ``(low, high)`` pair per feature, the former spelling, is read with
        a ``FutureWarning`` that says how to write it. Values outside their
        range map outside ``feature_range`` unless ``clip=True``. Either way
        the map saturates: an image beyond the dtype's range is its largest
        finite value, never infinity.
    center, scale : float, sequence of float, dict or None, default=None
        Instead of ``ranges``: the output is
        :math:`(x - \mathtt{center}) / \mathtt{scale}` (a missing one of the
        two is 0, respectively 1). Each :math:`\mathtt{scale} > 0`.
    feature_range : (float, float), default=(0.0, 1.0)
        Where ``ranges`` are mapped to (:math:`\mathrm{min} < \mathrm{max}`).
        Only with ``ranges``.
    clip : bool, default=False
        With ``ranges``: clip the output into ``feature_range``.
    copy : bool, default=True
        ``False``: ``transform`` and ``inverse_transform`` write into ``X``
        where they can (a float array of the fitted dtype, or a sparse
        matrix's values), as scikit-learn's scalers do; ``transform(X,
        copy=...)`` overrides it for one call.

    Attributes
    ----------
    scale_ : ndarray of shape (n_features_in_,)
        Factor of each feature: ``transform(X) = X * scale_ + min_``.
    min_ : ndarray of shape (n_features_in_,)
        Offset of each feature.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of features seen during fit, when ``X`` has string column names.

    See Also
    --------
    PrivateStandardScaler : Private mean and deviation when no public scale
        is known (spends budget).
    sklearn.preprocessing.MinMaxScaler : The same map from the data's own
        range, which is not private.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn_dppca import PrivatePCA
    >>> from sklearn_dppca.preprocessing import PublicScaler
    >>> X = np.array([[52_000.0, 31.0, 4.0], [18_000.0, 77.0, 2.0]])
    >>> scaler = PublicScaler(([0, 18, 1], [500_000, 90, 5]))
    >>> scaler.fit_transform(X).round(3)
    array([[0.104, 0.181, 0.75 ],
           [0.036, 0.819, 0.25 ]])
    >>> pipe = make_pipeline(scaler, PrivatePCA(2, bounds=(0, 1)))
    """

    _parameter_constraints: dict = {
        "ranges": ["array-like", dict, None],
        "center": ["array-like", dict, Real, None],
        "scale": ["array-like", dict, Real, None],
        "feature_range": [tuple, list],
        "clip": ["boolean"],
        "copy": ["boolean"],
    }

    def __init__(self, ranges=None, *, center=None, scale=None,
                 feature_range=(0.0, 1.0), clip=False, copy=True):
        self.ranges = ranges
        self.center = center
        self.scale = scale
        self.feature_range = feature_range
        self.clip = clip
        self.copy = copy

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Check ``X``'s features and resolve the public map; nothing else.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Only its number of columns and their names are used.
        y : Ignored

        Returns
        -------
        self : object
        """
        X = _validate(self, X, reset=True, ensure_all_finite="allow-nan", gathered=(
            0, 0, "Fit it on X[:1000]: its fit reads only the columns. "))
        self._refuse_filling_sparse(X)
        d = X.shape[1]
        names = getattr(self, "feature_names_in_", None)
        by_range = self.ranges is not None
        if by_range == (self.center is not None or self.scale is not None):
            raise ValueError(
                "PublicScaler needs the features' public ranges (ranges=...) "
                "or a public centre and scale (center=..., scale=...), not "
                "both." if by_range else
                "PublicScaler needs the features' public ranges (ranges=...) "
                "or a public centre and scale (center=..., scale=...): values "
                "known without looking at the data."
            )
        if by_range:
            low, high = parse_box(self.ranges, d, names, name="ranges",
                                  pairs_deprecated=True)
            if not (np.isfinite(low).all() and np.isfinite(high).all()):
                raise ValueError("ranges must be finite.")
            if not (low < high).all():
                raise ValueError("ranges: every low must be below its high.")
            try:
                a, b = (float(v) for v in self.feature_range)
            except (TypeError, ValueError):
                a = b = math.nan
            if not (math.isfinite(a) and math.isfinite(b) and a < b):
                raise ValueError(
                    f"feature_range must be a pair (min, max) with min < max; got "
                    f"{self.feature_range!r}."
                )
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                factor = (b - a) / (high - low)
                offset = a - low * factor
            self.scale_, self.min_ = _finite_map(factor, offset,
                                                 "ranges and feature_range")
            _to_namespace(self, X)
            return self
        if self.clip:
            raise ValueError("clip=True clips into feature_range: it needs ranges.")
        center = 0.0 if self.center is None else self.center
        center = _per_feature(center, "center", d, names)
        scale = _per_feature(1.0 if self.scale is None else self.scale, "scale", d,
                             names)
        if not (scale > 0).all():
            raise ValueError("scale: every scale must be positive.")
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            factor = 1.0 / scale
            offset = -center / scale
        self.scale_, self.min_ = _finite_map(factor, offset, "center and scale")
        _to_namespace(self, X)
        return self

    def _keeps_zero(self):
        """Whether the public map sends 0 to 0 for every feature, from the
        parameters alone (a sparse matrix then stays sparse); False where
        they cannot tell (a dict by feature name, invalid values)."""
        try:
            if self.ranges is not None:
                if isinstance(self.ranges, dict):
                    low, high = np.asarray(list(self.ranges.values()),
                                           dtype=np.float64).reshape(-1, 2).T
                else:  # (lower, upper), or the deprecated pairs
                    sides = [np.asarray(v, dtype=np.float64) for v in self.ranges]
                    if len(sides) == 2:
                        low, high = sides
                    else:
                        low, high = np.stack(sides).reshape(-1, 2).T
                a, b = (float(v) for v in self.feature_range)
                with np.errstate(all="ignore"):  # a map refused at fit
                    offset = a - low * (b - a) / (high - low)
                inside = a <= 0.0 <= b or not self.clip
                return bool(np.all(offset == 0.0)) and inside
            return self.center is None or bool(
                np.all(np.asarray(self.center, dtype=np.float64) == 0.0))
        except (TypeError, ValueError, ZeroDivisionError):
            return False

    def _sparse_map(self, X, compute):
        """``compute`` (a map of values with 0 ↦ 0) on the stored values of
        a CSR or CSC ``X`` (already copied if asked), column by column; the
        format is kept."""
        if X.format == "csr":
            columns = X.indices
        else:
            columns = np.repeat(np.arange(X.shape[1]), np.diff(X.indptr))
        X.data = compute(X.data, columns)
        return X

    def transform(self, X, copy=None):
        """Scale ``X`` by the public map (missing values stay missing).

        The map saturates: a finite value whose image lies beyond the dtype's
        range becomes that dtype's largest finite value (of its sign), never
        infinity, so the output is a finite function of each finite row.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        copy : bool or None, default=None
            ``None``: the ``copy`` parameter.

        Returns
        -------
        X_new : {ndarray, sparse matrix} of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        copy = self.copy if copy is None else copy
        X = self._checked(X, copy, "transform")
        if sparse.issparse(X):  # the map keeps 0 (_checked): the values only
            def values(data, columns):
                out = _saturated(lambda Z: Z * self.scale_[columns], data)
                return np.clip(out, *self.feature_range) if self.clip else out
            return self._sparse_map(X, values)
        X_new = _saturated(lambda Z: Z * self.scale_ + self.min_, X,
                           out=_writable(X))
        if self.clip:  # into the array just written, where there is one
            X_new = _into(X_new, _array_api.module_of(X_new).clip(
                X_new, *self.feature_range), copy=False)
        return X_new

    def _checked(self, X, copy, method):
        """``X`` validated for ``method``, in the namespace of the fit; a
        sparse ``X`` only where the map keeps 0 at 0 (a scaler fitted on
        dense rows may be given sparse ones)."""
        X = _validate(self, X, reset=False, ensure_all_finite="allow-nan", copy=copy,
                      force_writeable=True, gathered=(1, 0, _MAP_CHUNKS))
        self._refuse_filling_sparse(X)
        check_same_namespace(X, self, attribute="scale_", method=method)
        return X

    def _refuse_filling_sparse(self, X):
        if sparse.issparse(X) and not self._keeps_zero():
            raise TypeError(
                "PublicScaler takes sparse input only where its public map "
                "keeps 0 at 0 (ranges from 0 with feature_range from 0, or "
                "center=0): this one would fill every implicit zero. Densify "
                "X (X.toarray()) or choose such a map."
            )

    def inverse_transform(self, X, copy=None):
        """Undo :meth:`transform` (not the clipping of ``clip=True``),
        saturating as :meth:`transform` does.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        copy : bool or None, default=None
            ``None``: the ``copy`` parameter.

        Returns
        -------
        X_original : {ndarray, sparse matrix} of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        copy = self.copy if copy is None else copy
        X = self._checked(X, copy, "inverse_transform")
        if sparse.issparse(X):
            return self._sparse_map(X, lambda data, columns: _saturated(
                lambda Z: Z / self.scale_[columns], data))
        return _saturated(lambda Z: (Z - self.min_) / self.scale_, X,
                          out=_writable(X))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = self._keeps_zero()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.array_api_support = True
        return tags


def _same_settings(one, other):
    """Whether two ``(lower, upper, with_mean, with_std, random_state)`` are
    the same (a seed: the same integer, or the same object)."""
    seeds = one[4], other[4]
    return (all(np.array_equal(a, b) for a, b in zip(one[:2], other[:2]))
            and one[2:4] == other[2:4]
            and (seeds[0] is seeds[1] or (all(isinstance(x, Integral) for x in seeds)
                                          and seeds[0] == seeds[1])))


#: :math:`K = \max_{a, b \in [-1/2, 1/2]} (a - b)^2 (1 + 16 (a + b)^2) =
#: (71 + 8\sqrt 2)/64`, the squared sensitivity of one feature's pair
#: :math:`(z, 4 z^2)` (docs/privacy.rst), plus 8 float32 ulps for the
#: rounding of squares computed in float32 on a device without float64
#: (:math:`16 (a^2 - b^2)^2` moves by at most :math:`4 \cdot 2^{-23}`).
PAIR_SENSITIVITY_SQ = (71.0 + 8.0 * math.sqrt(2.0)) / 64.0 + 8.0 * 2.0**-23


class PrivateStandardScaler(
    OneToOneFeatureMixin,
    TransformerMixin,
    _FloatParamsMixin,
    BaseEstimator,
):
    r"""Standardise features with a private mean and standard deviation.

    :class:`~sklearn.preprocessing.StandardScaler` for private data, when no
    public scale is known. Each feature is clipped into its public range
    (``bounds``), and the sums of the clipped values and of their squares are
    released with Gaussian noise proportional to each feature's range;
    ``mean_``, ``var_`` and ``scale_`` are computed from those releases only.
    The fit is :math:`(\varepsilon, \delta)`-differentially private under
    the replacement of one row, and is charged once, before anything is
    released; the proof is in :ref:`private-standard-scaler`, and when to
    use it in the :ref:`User Guide <mixed-scales>`.

    **In a Pipeline before a private estimator** the fit makes two releases
    and two charges, the scaler's then the estimator's, each checked before
    its own step reads the data: ``make_pipeline(PrivateStandardScaler(bounds,
    epsilon=0.3), PrivatePCA(2, epsilon=0.7, bounds=(-3, 3)))`` spends what a
    ``0.3`` and a ``0.7`` fit compose to, less than 1. The estimator sees
    standardised rows: give it ``bounds`` or a ``data_norm`` in standard
    units (``bounds=(-3, 3)`` clips values beyond three deviations).

    **A PrivateGridSearchCV** refuses it before any charge (its fit on every
    training fold would be a release outside the search's plan): fit it once
    and search on its output, or pass its ``mean_`` and ``scale_`` to a
    :class:`PublicScaler` ``(center=mean_, scale=scale_)``.

    Parameters
    ----------
    bounds : (lower, upper) or dict
        Public per-feature ranges, as the estimators' ``bounds``: two scalars
        or two arrays of length ``n_features``, or a dict ``{feature name:
        (low, high)}`` for a DataFrame; every lower bound at most its upper
        one. Required. A feature whose two bounds are equal is that constant
        (no noise, no budget). Rows are clipped into the box; choose it from domain
        knowledge, never from the data.
    epsilon : float, default=1.0
        Privacy parameter :math:`\varepsilon > 0` of the fit;
        ``float("inf")`` is the non-private fit (no noise, a
        :class:`~sklearn_dppca.PrivacyLeakWarning`), charged as infinite.
    delta : float, default=1e-6
        Privacy parameter :math:`\delta` in (0, 1).
    with_mean : bool, default=True
        Centre the output on ``mean_``. ``False`` takes sparse input (CSR or
        CSC) and keeps it sparse, as scikit-learn's ``StandardScaler``: the
        statistics count each column's implicit zeros without densifying
        ``X``, and ``transform`` scales the stored values only. Centring a
        sparse ``X`` is refused before the charge.
    with_std : bool, default=True
        Scale the output by ``scale_``. With ``with_std=False`` only the
        sum is released, with the whole budget; with neither, nothing is
        released and nothing is charged.
    random_state : None, int, RandomState or Generator, default=None
        Source of the noise; a fixed seed makes the fit not private (a
        :class:`~sklearn_dppca.PrivacyLeakWarning` says so).
    accountant : BudgetAccountant or None, default=None
        Budget charged before the fit; ``None``: the default accountant.
    non_finite : {"raise", "clip"}, default="raise"
        What a NaN or infinite value in ``X`` does. ``"raise"``: the fit is
        refused with a ``ValueError`` naming it, before any charge, and
        ``transform`` refuses it too. ``"clip"``: each value goes first
        through the public map :func:`numpy.nan_to_num` (NaN → 0, ±inf → ±
        the dtype's largest finite value), then into the box as every
        value; ``transform`` maps its rows the same way. Give it where a
        step before the scaler can make a value non-finite
        (``FunctionTransformer(np.log1p)`` on a −1): with ``"raise"``, that
        dataset would be refused and its neighbour released
        (:ref:`privacy-domain`). Better still, make such a step total
        (``np.log1p(np.maximum(X, 0))``): NumPy warns of the −inf it makes,
        and that warning shows before the scaler's charge.
    copy : bool, default=True
        ``False``: ``transform`` and ``inverse_transform`` write into ``X``
        where they can, as scikit-learn's ``StandardScaler``;
        ``transform(X, copy=...)`` overrides it for one call. The fit never
        modifies ``X``.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features_in_,) or None
        Private mean, in the box; ``None`` with neither ``with_mean`` nor
        ``with_std``.
    var_ : ndarray of shape (n_features_in_,) or None
        Private variance (:math:`n` in the denominator, as scikit-learn's);
        ``None`` with ``with_std=False``.
    scale_ : ndarray of shape (n_features_in_,) or None
        The square root of ``var_`` floored at the standard deviation of
        the variance's noise, :math:`w_j^2 \sigma_Q / n` (:math:`w_j` the
        feature's width, :math:`\sigma_Q` the noise of the released sum of
        squares in box units), so that a feature whose variance is lost in
        the noise is not blown up by ``transform``; 1 for a zero variance
        of the non-private fit, as scikit-learn.
    n_samples_seen_ : int
        Number of rows (public under replacement adjacency).
    privacy_spent_ : tuple of float
        ``(epsilon, delta)`` spent; ``(0.0, 0.0)`` when nothing is released.
    n_features_in_ : int
    feature_names_in_ : ndarray of shape (n_features_in_,)

    See Also
    --------
    PublicScaler : Scaling by public ranges: no budget.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca import BudgetAccountant
    >>> from sklearn_dppca.preprocessing import PrivateStandardScaler
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([rng.uniform(18, 90, 10_000), rng.integers(1, 6, 10_000)])
    >>> scaler = PrivateStandardScaler(bounds=([18, 1], [90, 5]), epsilon=1.0,
    ...                                accountant=BudgetAccountant()).fit(X)
    >>> bool(np.abs(scaler.mean_ - [54, 3]).max() < 0.5)
    True
    """

    _parameter_constraints: dict = {
        "bounds": ["array-like", None],
        "epsilon": [Interval(Real, 0, math.inf, closed="right")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "with_mean": ["boolean"],
        "with_std": ["boolean"],
        "random_state": ["random_state", np.random.Generator],
        "accountant": [BudgetAccountant, None],
        "non_finite": [StrOptions({"raise", "clip"})],
        "copy": ["boolean"],
    }

    def __init__(self, bounds=None, *, epsilon=1.0, delta=1e-6, with_mean=True,
                 with_std=True, random_state=None, accountant=None,
                 non_finite="raise", copy=True):
        self.bounds = bounds
        self.epsilon = epsilon
        self.delta = delta
        self.with_mean = with_mean
        self.with_std = with_std
        self.random_state = random_state
        self.accountant = accountant
        self.non_finite = non_finite
        self.copy = copy

    def __getstate__(self):
        # With accountant=None, a limited default travels to worker processes.
        return _carry_default(self, super().__getstate__())

    def __sklearn_clone__(self):
        return _keep_carried_default(self, super().__sklearn_clone__())

    def _shares(self):
        r"""Fractions of :math:`\mu^{*2}`: the sum's and the sum of
        squares'."""
        if self.with_std:
            return {"sum": 0.5, "squares": 0.5}
        return {"sum": 1.0} if self.with_mean else {}

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, **params):
        """Release the private mean and standard deviation of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            One row per person, at least two; finite (a NaN or infinite
            entry is refused before the charge).
        y : Ignored
        **params
            ``sample_weight`` and other fit parameters are refused with a
            ``TypeError`` that says why.

        Returns
        -------
        self : object
        """
        _refuse_fit_params(self, params)
        self._fit(X, first=True)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None, **params):
        """Add the batch ``X`` to the released statistics (one charge).

        Each call releases the batch's noisy sums as :meth:`fit` does, at
        ``(epsilon, delta)``, charged before the release: calls compose as
        that many fits (the accountant cannot know that the batches hold
        different people, so it does not assume it). The attributes are
        post-processing of the sums released so far: ``mean_`` and
        ``var_`` are those of all the batches' rows, and ``scale_``'s floor
        is the standard deviation of the summed noise. The first call fixes
        ``n_features_in_``, and with a seed the noise continues one stream
        across the calls; ``bounds``, ``with_mean``, ``with_std`` and
        ``random_state`` changed after it are refused (before the charge);
        :meth:`fit` starts afresh.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            One batch of rows (one row is a batch too: its release is as
            private as a larger one's).
        y : Ignored
        **params
            Refused, as by :meth:`fit`.

        Returns
        -------
        self : object
        """
        _refuse_fit_params(self, params)
        first = not hasattr(self, "n_samples_seen_")
        self._fit(X, first=first, min_samples=1)
        return self

    @_all_or_nothing
    def _fit(self, X, first, min_samples=2):
        if self.bounds is None:
            raise ValueError(
                "PrivateStandardScaler needs bounds=(lower, upper): public "
                "per-feature ranges, known without looking at the data. Without "
                "any, scale by public knowledge (PublicScaler) instead."
            )
        X = _validate(self, X, reset=first, ensure_min_samples=min_samples,
                      ensure_all_finite=False, gathered=(
                          1 + (self.non_finite == "clip"), 2, _FIT_ADVICE))
        if sparse.issparse(X) and self.with_mean:  # public: refused uncharged
            raise ValueError(
                "Cannot center sparse matrices: pass with_mean=False (centring "
                "would fill every implicit zero), as with scikit-learn's "
                "StandardScaler, or densify X."
            )
        output = _get_output_config("transform", self)["dense"]
        if sparse.issparse(X) and output != "default":  # public, as above
            # scikit-learn's wrapper refuses the sparse output after the fit,
            # its charge spent (review 80 F4)
            raise ValueError(
                f"set_output(transform={output!r}) cannot hold the sparse rows "
                "this scaler keeps sparse: set_output(transform='default') on "
                "it (a Pipeline's last step may still give pandas output), or "
                "densify X. Refused before any charge."
            )
        n, d = X.shape
        lower, upper = check_box(self.bounds, d,
                                 getattr(self, "feature_names_in_", None))
        # halves first: l + u may overflow (the midpoint to rounding; the box
        # units are clipped into [−½, ½] below, whatever it rounds to)
        with np.errstate(over="ignore"):  # public values, refused below
            centre, width = lower / 2.0 + upper / 2.0, upper - lower
        if not np.isfinite(width).all():  # public: refused before the charge
            raise ValueError(
                "bounds: every width upper - lower must be a finite float64 "
                "number; rescale the features."
            )
        free = width > 0  # the features that carry information
        settings = (lower, upper, self.with_mean, self.with_std, self.random_state)
        if not first and not _same_settings(self._settings_, settings):
            # public values, refused before the charge
            raise ValueError(
                "bounds, with_mean, with_std or random_state changed since the "
                "first partial_fit: the sums released so far are in that call's "
                "units, and a seed's noise continues one stream across the "
                "calls. Call fit to start afresh."
            )
        shares = self._shares()
        mu_total = gdp_mu(self.epsilon, self.delta)
        mus = {k: mu_total * math.sqrt(w) for k, w in shares.items()}
        if first:
            self._released_ = _ReleasedSums.empty(int(free.sum()))
            self._settings_ = settings
            # a seed's stream continues across partial_fit calls (not private:
            # warned); random_state=None draws a new generator for each call
            # and none is kept: a model pickled, copied or sent to a worker
            # would carry its state, so its copies would draw the same noise
            # and its file would tell the noise drawn
            self._seeded_rng_ = (None if self.random_state is None
                                else make_generator(self.random_state))
        accountant = _resolve_accountant(self)
        if shares:  # refuse an over-budget fit before the data is read
            accountant.check(mu=mu_total)
        with private_computation():
            if self.non_finite == "clip":  # a public map of each value
                X = map_non_finite(X)
            xp = _array_api.module_of(X.data if sparse.issparse(X) else X)
            if not bool(xp.all(xp.isfinite(X.data if sparse.issparse(X) else X))):
                raise ValueError("Input X contains NaN or infinity: "
                                 "PrivateStandardScaler needs finite rows "
                                 "(or non_finite='clip').")
            if shares:
                accountant.spend(mu=mu_total, estimator=self)
            sums, squares = box_sums(X, lower, upper, centre, width, free)
            released = self._released_.add(
                self._release(sums, squares, mus), n, mu_total ** 2 if shares else 0.0)
            self._released_ = released
            self._set_attributes(centre, width, free)
            _to_namespace(self, X)
            # exact GDP composition of every call's releases: √(Σ μ*²)
            composed = math.sqrt(released.mu_sq)
            self.privacy_spent_ = (
                (0.0, 0.0) if composed == 0.0
                else reported_spend((gdp_epsilon(composed, self.delta), self.delta),
                                    self.epsilon if released.calls == 1 else math.nan)
            )
        if shares:
            _warn_if_not_private(self.epsilon, self.random_state, "released "
                                 "mean and scale", delta=self.delta, n_samples=n)

    def _release(self, sums, squares, mus):
        """The batch's noisy sums in box units (``None`` where not released)
        and the variance of the noise on the sum of squares."""
        d_free = sums.shape[0]
        rng = (self._seeded_rng_ if self._seeded_rng_ is not None
               else make_generator(None))
        if "sum" not in mus:
            return None, None, 0.0
        if "squares" not in mus:
            # Σ z_i: every entry of z in [−½, ½], so one row moves each
            # coordinate by at most 1 — L2 sensitivity √d.
            sigma_sum = noise_scale(math.sqrt(d_free), mus["sum"])
            return sums + dense_noise(rng, d_free, sigma_sum), None, 0.0
        # (Σ z_i, 4 Σ z_i²) at one σ: a row moves a feature's pair by
        # (a − b, 4(a² − b²)), of squared norm ≤ PAIR_SENSITIVITY_SQ: L2
        # sensitivity √(K d) at both shares' μ (two releases at √d and √d/4
        # spent 0.80 of the μ charged: review 64)
        mu = math.hypot(mus["sum"], mus["squares"])
        sigma_sum = noise_scale(math.sqrt(PAIR_SENSITIVITY_SQ * d_free), mu)
        sigma_sq = sigma_sum / 4.0
        sums = sums + dense_noise(rng, d_free, sigma_sum)
        return sums, squares + dense_noise(rng, d_free, sigma_sq), sigma_sq ** 2

    def _set_attributes(self, centre, width, free):
        """``mean_``, ``var_``, ``scale_`` and ``n_samples_seen_`` from the
        sums released so far (post-processing)."""
        released = self._released_
        n = self.n_samples_seen_ = released.n
        self.mean_ = self.var_ = self.scale_ = None
        if released.sums is None:
            return
        m = np.clip(released.sums / n, -0.5, 0.5)  # the box holds the mean
        mean = centre.copy()
        mean[free] += width[free] * m
        self.mean_ = mean
        if released.squares is None:
            return
        # largest variance of values in [−½, ½] with mean m: ¼ − m²
        var_z = np.clip(released.squares / n - m * m, 0.0, 0.25 - m * m)
        var, scale = np.zeros_like(centre), np.zeros_like(centre)
        # floored at the standard deviation of the noise on var; the scale
        # in the box's units first: width² over- or underflows beyond 1e154
        # or below 1e-154, where the width times a root does not (var_ is
        # then inf or 0: not a float64)
        floor = math.sqrt(released.noise_var) / n
        with np.errstate(over="ignore", under="ignore"):
            var[free] = (width[free] * np.sqrt(var_z)) ** 2
            scale[free] = width[free] * np.sqrt(np.maximum(var_z, floor))
        self.var_ = var
        self.scale_ = np.where(scale > 0, scale, 1.0)

    def transform(self, X, copy=None):
        """Standardise ``X`` with the released mean and scale.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        copy : bool or None, default=None
            ``None``: the ``copy`` parameter.

        Returns
        -------
        X_new : {ndarray, sparse matrix} of shape (n_samples, n_features)
        """
        X = self._checked(X, copy, "transform")
        if sparse.issparse(X):
            return self._scale_stored(X, np.divide)

        def standardise(Z):
            Z = Z - self.mean_ if self.with_mean else Z
            return Z / self.scale_ if self.with_std else Z
        return _saturated(standardise, X, out=_writable(X))

    def _checked(self, X, copy, method):
        """``X`` validated for ``method``, in the namespace of the fit;
        float16 rows in float32, which holds what the released mean and
        scale make of them (in float16 a row near a mean of 1e5 overflows)."""
        check_is_fitted(self)
        if getattr(X, "dtype", None) == np.float16:
            X, copy = X.astype(np.float32), False  # a copy already
        clip = self.non_finite == "clip" and method == "transform"
        X = _validate(self, X, reset=False, copy=self.copy if copy is None else copy,
                      ensure_all_finite=not clip, force_writeable=True,
                      gathered=(1 + clip, 0, _MAP_CHUNKS))
        if clip:  # the fit's public map; the caller's X is not modified
            X = map_non_finite(X)
        if self.mean_ is not None:
            check_same_namespace(X, self, attribute="mean_", method=method)
        return X

    def _scale_stored(self, X, operation):
        """A sparse ``X`` (a copy) with its stored values divided or
        multiplied by ``scale_``: only ``with_mean=False`` keeps it sparse."""
        if self.with_mean:
            raise ValueError("Cannot center sparse matrices: this scaler was "
                             "fitted with with_mean=True.")
        if self.with_std:
            columns = (X.indices if X.format == "csr" else
                       np.repeat(np.arange(X.shape[1]), np.diff(X.indptr)))
            X.data = _saturated(lambda Z: operation(Z, self.scale_[columns]), X.data)
        return X

    def inverse_transform(self, X, copy=None):
        """Undo :meth:`transform`.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        copy : bool or None, default=None
            ``None``: the ``copy`` parameter.

        Returns
        -------
        X_original : {ndarray, sparse matrix} of shape (n_samples, n_features)
        """
        X = self._checked(X, copy, "inverse_transform")
        if sparse.issparse(X):
            return self._scale_stored(X, np.multiply)

        def restore(Z):
            Z = Z * self.scale_ if self.with_std else Z
            return Z + self.mean_ if self.with_mean else Z
        return _saturated(restore, X, out=_writable(X))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.input_tags.sparse = not self.with_mean  # as StandardScaler's
        tags.array_api_support = True
        return tags


class _ReleasedSums(NamedTuple):
    """The noisy box-unit sums released by a scaler's calls, summed."""
    sums: np.ndarray  # None when not released
    squares: np.ndarray  # None when not released
    noise_var: float  # variance of the noise summed into ``squares``
    n: int  # rows seen (public)
    calls: int  # fits and partial fits
    mu_sq: float  # Σ μ² of the releases

    @classmethod
    def empty(cls, d_free):
        return cls(np.zeros(d_free), np.zeros(d_free), 0.0, 0, 0, 0.0)

    def add(self, release, n, mu_sq):
        sums, squares, noise_var = release
        return _ReleasedSums(
            None if sums is None else self.sums + sums,
            None if squares is None else self.squares + squares,
            self.noise_var + noise_var, self.n + n, self.calls + 1,
            self.mu_sq + mu_sq)
