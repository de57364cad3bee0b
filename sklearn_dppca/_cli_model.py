"""The command line's released-model files: their JSON and their reading.

A model file holds only what a fit *released*: the fitted attributes of the
estimator (every one of which is computed by the estimator from noisy releases
and public values), its JSON-serialisable parameters and the feature names.
Nothing is computed from the data here. Floats are written with ``repr``
precision, so they read back bit for bit.
"""

import json
import math
import sys
from numbers import Integral, Real

import numpy as np

from ._cli_io import _atomic_write, one_line, quote_names
from ._pca_model import whiten_scale

#: Written as ``"format"``; a file without it is not a model.
MODEL_FORMAT = "sklearn_dppca.model"
#: Written as ``"format_version"``; bumped on any incompatible change.
MODEL_FORMAT_VERSION = 1
#: The version of a model with a ``"preprocessing"`` entry (``--scale``,
#: ``--fill-missing``): a reader of version 1 only would ignore the entry and
#: project unscaled rows, so it must refuse such a model instead.
MODEL_FORMAT_VERSION_PREPROCESSING = 2
#: The versions this package reads.
READ_VERSIONS = (MODEL_FORMAT_VERSION, MODEL_FORMAT_VERSION_PREPROCESSING)

#: Released attributes every estimator's model holds.
COMMON_ATTRIBUTES = (
    "components_",
    "explained_variance_",
    "explained_variance_ratio_",
    "singular_values_",
    "mean_",
    "noise_variance_",
    "n_components_",
    "n_samples_",
    "data_norm_",
    "privacy_spent_",
)
#: Released attributes a model holds when the fit set them (the norm bounds'
#: own releases, the de-noised spectrum's; absent from models written before
#: them).
OPTIONAL_ATTRIBUTES = ("mean_norm_", "clipped_fraction_", "captured_variance_",
                       "total_variance_", "noisy_variance_", "n_resolved_",
                       "path_")
#: Further released attributes, by estimator class name.
EXTRA_ATTRIBUTES = {
    "PrivatePCA": (),
    # not covariance_approximation_: Ψ is components_.T @ diag(max(
    # noisy_variance_, 0)) @ components_, both written; a d × d matrix of
    # JSON would be gigabytes on the wide rows the matrix-free path fits
    "ComplexGaussPCA": (),
    # Only what CoherentPowerPCA releases: never a number of trials or a
    # score of its selection; n_clipped_ is None (not released) unless both
    # clip_radius and n_iter are fixed.
    "CoherentPowerPCA": (
        "branch_",
        "clip_radius_",
        "n_iter_",
        "n_clipped_",
    ),
}


def _json_value(value):
    """A JSON-ready copy of a released value (arrays as nested lists)."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind == "f":
            value = value.astype(np.float64)
        return value.tolist()
    if isinstance(value, (tuple, list)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, Integral):
        return int(value)
    if isinstance(value, Real):
        return float(value)
    return value  # None or str


def _json_parameters(estimator):
    """The estimator's parameters that JSON can hold (no accountant, no RNG)."""
    kept = {}
    for name, value in sorted(estimator.get_params(deep=False).items()):
        if value is None or isinstance(value, (bool, str)):
            kept[name] = value
        elif isinstance(value, (Integral, Real)) and math.isfinite(value):
            kept[name] = _json_value(value)
    return kept


def model_to_dict(estimator, feature_names, privacy_warnings=(),
                  preprocessing=None, reading=None, release_warnings=()):
    """The released model of a fitted estimator, as a JSON-ready dict.

    Parameters
    ----------
    estimator : fitted PrivatePCA, ComplexGaussPCA or CoherentPowerPCA
    feature_names : list of str
        Names of the columns the estimator was fitted on, in order.
    privacy_warnings : sequence of str
        The estimator's :class:`~sklearn_dppca.PrivacyLeakWarning` messages
        (a fixed seed, an estimated ``data_norm``): kept with the model so
        that whoever reads it knows the release is not private.
    preprocessing : dict or None
        The public map applied to each row before the fit (``dppca fit
        --fill-missing``, ``--scale``): ``{"fill_missing": a value, one per
        column, or None,
        "scale": {"lower": [...], "upper": [...]} or None}``. Written as
        ``"preprocessing"`` (format version 2), so that ``dppca transform``
        applies the same map; the estimator's attributes are in the units
        after it.
    reading : dict or None
        How the fit read the rows, public values only (``dppca fit``):
        ``{"passes": the passes over the rows counted, "all_passes_counted":
        whether that is all of them, "partitions": the Dask partitions, or
        None in memory and for uncompressed CSV, which Dask cuts by
        bytes}``. Written as ``"reading"``; readers ignore it.
    release_warnings : sequence of str
        The fit's warnings about its release's usefulness
        (:class:`~sklearn_dppca.NoisyReleaseWarning`,
        :class:`~sklearn_dppca.preprocessing.FeatureScaleWarning`), from
        released values only; written as ``"release_warnings"``.

    Returns
    -------
    model : dict
    """
    from . import __version__

    name = type(estimator).__name__
    if name not in EXTRA_ATTRIBUTES:
        raise TypeError(f"cannot save a {name} as a dppca model")
    names = COMMON_ATTRIBUTES + EXTRA_ATTRIBUTES[name] + tuple(
        a for a in OPTIONAL_ATTRIBUTES if hasattr(estimator, a)
    )
    model = {
        "format": MODEL_FORMAT,
        "format_version": MODEL_FORMAT_VERSION,
        "sklearn_dppca_version": __version__,
        "estimator": name,
        "parameters": _json_parameters(estimator),
        "feature_names": [str(f) for f in feature_names],
        "attributes": {a: _json_value(getattr(estimator, a)) for a in names},
        "privacy_warnings": [one_line(w) for w in privacy_warnings],
        "release_warnings": [one_line(w) for w in release_warnings],
    }
    if reading is not None:
        model["reading"] = _json_value(reading)
    if preprocessing is not None:
        model["format_version"] = MODEL_FORMAT_VERSION_PREPROCESSING
        model["preprocessing"] = _json_value(preprocessing)
    return model


def save_model(model, path, out=None):
    """Write a model dict as JSON (``-``: to ``out``, standard output by default)."""
    text = json.dumps(model, indent=1, allow_nan=False) + "\n"
    if path == "-":
        (out or sys.stdout).write(text)
        return

    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    _atomic_write(path, write)


class ReleasedModel:
    """A model read back from JSON; applies ``transform`` like the estimator.

    Attributes are float64 arrays (``components_``, ``mean_``,
    ``explained_variance_``, ...) and the scalars as written; ``whiten`` is
    the estimator parameter.
    """

    def __init__(self, model, path):
        self.path = path
        self.estimator = model["estimator"]
        self.parameters = model["parameters"]
        self.feature_names = list(model["feature_names"])
        self.attributes = model["attributes"]
        self.privacy_warnings = list(model.get("privacy_warnings", []))
        self.release_warnings = list(model.get("release_warnings", []))
        whiten = self.parameters.get("whiten", False)
        self.whiten = whiten if whiten == "partial" else bool(whiten)
        if self.whiten == "partial" and self.attributes.get("total_variance_") is None:
            raise ValueError('whiten="partial" without total_variance_')
        self.components_ = np.asarray(self.attributes["components_"], dtype=np.float64)
        self.mean_ = np.asarray(self.attributes["mean_"], dtype=np.float64)
        self.explained_variance_ = np.asarray(
            self.attributes["explained_variance_"], dtype=np.float64
        )
        pre = model.get("preprocessing") or {}
        #: The public constant that replaces missing values, or None.
        self.fill_missing = pre.get("fill_missing")
        if self.fill_missing is not None:  # one value, or one per column
            self.fill_missing = np.asarray(self.fill_missing, dtype=np.float64)
        scale = pre.get("scale")
        #: ``(lower, upper)`` mapped to [0, 1] before the projection, or None.
        self.scale_ranges = None if scale is None else (
            np.asarray(scale["lower"], dtype=np.float64),
            np.asarray(scale["upper"], dtype=np.float64),
        )

    @property
    def n_components_(self):
        return self.components_.shape[0]

    def get_feature_names_out(self):
        """Output column names, as scikit-learn's ``get_feature_names_out``."""
        prefix = self.estimator.lower()
        return [f"{prefix}{i}" for i in range(self.n_components_)]

    def transform(self, X):
        """``(X - mean_) @ components_.T``, whitened if the model says so.

        The same operations, in the same order, as the estimator's
        ``transform``, so the results agree to rounding; with ``--scale``,
        after the same map of each column from its public range to [0, 1]
        as :class:`~sklearn_dppca.preprocessing.PublicScaler`'s.
        """
        if self.scale_ranges is not None:
            lower, upper = self.scale_ranges
            factor = 1.0 / (upper - lower)
            X = X * factor + (0.0 - lower * factor)
        X_new = X @ self.components_.T
        X_new -= self.mean_ @ self.components_.T
        if self.whiten:  # the estimator's scale
            X_new /= whiten_scale(self.explained_variance_, self.whiten,
                                  self.attributes.get("total_variance_"))
        return X_new


def load_model(path):
    """Read and check a model file written by :func:`save_model`.

    Returns
    -------
    model : ReleasedModel
    """
    try:
        with open(path, encoding="utf-8") as f:
            model = json.load(f)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not a dppca model (invalid JSON: {exc})") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a dppca model (not a text file)") from None
    except RecursionError:
        raise ValueError(f"{path}: not a dppca model (JSON nested too deep)") from None
    if not isinstance(model, dict) or model.get("format") != MODEL_FORMAT:
        raise ValueError(f'{path}: not a dppca model (no "format": "{MODEL_FORMAT}")')
    version = model.get("format_version")
    if version not in READ_VERSIONS:
        raise ValueError(
            f"{path}: model format version {version!r}; this dppca reads versions "
            f"{', '.join(map(str, READ_VERSIONS))}"
        )
    kinds = {"estimator": str, "parameters": dict, "feature_names": list,
             "attributes": dict}
    missing = [k for k in kinds if k not in model]
    if missing:
        raise ValueError(f"{path}: damaged model, missing {quote_names(missing)}")
    wrong = [k for k, kind in kinds.items() if not isinstance(model[k], kind)]
    if not isinstance(model.get("preprocessing") or {}, dict):
        wrong.append("preprocessing")
    if "feature_names" not in wrong and not all(
            isinstance(name, str) for name in model["feature_names"]):
        wrong.append("feature_names")
    tv = model["attributes"].get("total_variance_") if "attributes" not in wrong else 0
    if tv is not None and not (isinstance(tv, Real) and not isinstance(tv, bool)
                               and 0 <= tv < math.inf):
        wrong.append("total_variance_")
    if wrong:
        raise ValueError(f"{path}: damaged model ({quote_names(wrong)} not of "
                         "the type dppca writes)")
    if len(set(model["feature_names"])) < len(model["feature_names"]):
        raise ValueError(f"{path}: damaged model (a feature name repeats)")
    if model["estimator"] not in EXTRA_ATTRIBUTES:
        raise ValueError(f"{path}: unknown estimator {model['estimator']!r}")
    absent = [a for a in COMMON_ATTRIBUTES if a not in model["attributes"]]
    if absent:
        raise ValueError(
            f"{path}: damaged model, missing attribute(s) {quote_names(absent)}"
        )
    try:
        released = ReleasedModel(model, path)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        why = f"missing {exc.args[0]!r}" if isinstance(exc, KeyError) else one_line(exc)
        raise ValueError(f"{path}: damaged model ({why})") from None
    d = len(released.feature_names)
    fill = released.fill_missing
    if fill is not None and fill.shape not in ((), (d,)):
        raise ValueError(f"{path}: damaged model (its fill_missing does not fit "
                         f"{d} feature names)")
    ranges = released.scale_ranges
    if ranges is not None and not (
        ranges[0].shape == ranges[1].shape == (d,) and (ranges[0] < ranges[1]).all()
        and np.isfinite(1.0 / (ranges[1] - ranges[0])).all()
    ):
        raise ValueError(f"{path}: damaged model (its scale does not fit {d} "
                         "feature names, or a range is empty)")
    k = released.explained_variance_.shape
    if (
        released.components_.ndim != 2
        or released.components_.shape[1] != d
        or released.mean_.shape != (d,)
        or k != (released.components_.shape[0],)
    ):
        raise ValueError(
            f"{path}: damaged model (components_ {released.components_.shape}, "
            f"mean_ {released.mean_.shape}, explained_variance_ {k} do not fit "
            f"{d} feature names)"
        )
    values = {"components_": released.components_, "mean_": released.mean_,
              "explained_variance_": released.explained_variance_,
              "fill_missing": fill, "scale": ranges}
    bad = [name for name, value in values.items()
           if value is not None and not np.isfinite(value).all()]
    if (released.explained_variance_ < 0).any():
        bad.append("explained_variance_")
    if bad:
        raise ValueError(f"{path}: damaged model (non-finite or negative values "
                         f"in {quote_names(bad)})")
    components = released.components_
    if not np.allclose(components @ components.T, np.eye(len(components)),
                       rtol=0.0, atol=1e-6):  # every estimator's: to 1e-15
        raise ValueError(f"{path}: damaged model (its components_ are not "
                         "orthonormal)")
    return released
