"""The refusals and the all or nothing that every private fit shares (the
PCA estimators, the scalers, the heads and the search).

A fit is all or nothing (:func:`_all_or_nothing`: a failure, even after
the charge, puts every attribute back); a numeric parameter holding an
integer beyond float64's range is refused as the parameters are validated
(:class:`_FloatParamsMixin`); scikit-learn's refusal of a NaN or infinite
value says what to do (:func:`_non_finite_hint`); fit parameters such as
``sample_weight`` are refused with the reason (:func:`_refuse_fit_params`).
"""

import contextlib
import functools
import re

import numpy as np
from sklearn.utils._param_validation import InvalidParameterError

from ._accounting import beyond_float
from ._threads import _SINGLE_THREADED_BLAS


def _all_or_nothing(fit):
    """A fit that raises, even after its charge, leaves the estimator as it
    was: every attribute (the trailing-underscore ones, ``n_features_in_``
    and ``feature_names_in_`` included, and the plan's private ones such as
    ``_fit_path``) is put back, and none is left half-set. The charge stays
    (conservative)."""

    @functools.wraps(fit)
    def guarded(self, *args, **kwargs):
        kept, errors = dict(vars(self)), np.geterr()
        try:
            return fit(self, *args, **kwargs)
        except BaseException:
            self.__dict__ = kept  # one store: never seen half-restored
            # what an interrupt (Ctrl-C) inside a block's own exit can
            # leave: NumPy's error state, BLAS's threads
            np.seterr(**errors)
            _SINGLE_THREADED_BLAS.heal()
            raise

    return guarded


#: scikit-learn's refusal of a NaN or infinite value, and what to do about it
#: (the same constant text whatever the data: it adds nothing to the error).
_NON_FINITE_ERROR = re.compile(r"contains (NaN|infinity)")
NON_FINITE_HINT = (
    "A missing or infinite value is outside the privacy model's domain: "
    "impute it first with a public constant (sklearn.impute.SimpleImputer("
    "strategy='constant', keep_empty_features=True), which "
    "PrivateGridSearchCV accepts in a Pipeline; dppca fit --fill-missing), or "
    "pass non_finite='clip' (NaN becomes 0, ±inf the largest finite value, "
    "before the rows are clipped)."
)


def _holds_beyond_float(value):
    """Whether a parameter's value holds a Python integer beyond float64's
    range (in a tuple, list, dict or object array too)."""
    if isinstance(value, (tuple, list)):
        return any(map(_holds_beyond_float, value))
    if isinstance(value, dict):
        return any(map(_holds_beyond_float, value.values()))
    if isinstance(value, np.ndarray) and value.dtype == object:
        return any(map(_holds_beyond_float, value.ravel()))
    return beyond_float(value)


class _FloatParamsMixin:
    """Refuses, as the parameters are validated, a numeric parameter that
    holds an integer beyond float64's range (``epsilon=10**400`` or
    ``bounds=(-10**400, 10**400)`` pass scikit-learn's constraints, then
    made ``float()`` raise ``OverflowError`` deep in a fit)."""

    def _validate_params(self):
        super()._validate_params()
        for name, value in self.get_params(deep=False).items():
            if _holds_beyond_float(value):
                raise InvalidParameterError(
                    f"The {name!r} parameter of {type(self).__name__} holds an "
                    "integer beyond float64's range (about 1.8e308); give a "
                    "float (math.inf where an unbounded value is meant).")


@contextlib.contextmanager
def _non_finite_hint(charged=False):
    """scikit-learn's error on a NaN or infinite value, with what to do; and,
    ``charged``, that the fit was charged: only a Dask array's rows past the
    first rows, read after the charge on many rows (docs/privacy.rst §5),
    can hold one then."""
    try:
        yield
    except ValueError as error:
        if not _NON_FINITE_ERROR.search(str(error)) or NON_FINITE_HINT in str(error):
            raise
        raise ValueError(f"{error} {NON_FINITE_HINT}" + (
            " This fit was charged: on many rows, a Dask array's rows after "
            "its first rows are read after the charge (docs/privacy.rst, \"The "
            "first rows\"; in memory every value is checked first)."
            if charged else "")) from error


def _refuse_fit_params(estimator, params):
    """Refuse fit parameters (``sample_weight``, ...) with the reason."""
    if not params:
        return
    raise TypeError(
        f"{type(estimator).__name__}.fit takes no {', '.join(sorted(params))}: "
        "every row is one person and counts once. A weight would scale a "
        "row's contribution, and with it the sensitivity the noise is "
        "calibrated to (a weight of w multiplies it by w), so a weighted fit "
        "is not private under this analysis (nor is a row repeated: one "
        "person counted twice). Select rows by a public rule before the fit "
        "instead."
    )
