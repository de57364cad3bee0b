"""Post-processing of a fit's released values: free, and public afterwards.

Functions the shared fit (``_base._fit``) calls once its release is made:

- :func:`mean_in_box` projects the released mean into the public box of
  ``bounds=``: a mean outside a feature's public range is never reported.
- :func:`warn_if_one_feature_dominates` warns, from released values only,
  when one feature's released variance dwarfs the others' or when the top
  component is one feature (features on different scales), and points to
  the scalers of :mod:`sklearn_dppca.preprocessing`.
- :func:`warn_if_noise_dominated` warns when released components do not
  stand out of the noise's known spectrum, and :func:`warn_if_mean_projected`
  when the private mean fell outside the public ranges: the release is then
  mostly noise, and the message names the knob to turn.

Nothing here reads the data.
"""

import math
import warnings

import numpy as np


class SolverParameterWarning(UserWarning):
    """A scikit-learn ``PCA`` parameter given a value that has no effect here.

    Issued before the data is read, from the parameters alone: ``copy=False``
    (a fit never modifies ``X``), and for ``CoherentPowerPCA`` the solver
    parameters (it runs its own noisy iterations). A class of its own, so
    that code ported from ``PCA`` can filter it:
    ``warnings.simplefilter("ignore", SolverParameterWarning)``.
    """


class NoisyReleaseWarning(UserWarning):
    """Part of a fit's release is mostly noise.

    Issued after a fit, from its released values and public noise scales
    only (post-processing; the rules are in :ref:`noisy-release-warning`):
    released components whose eigenvalues do not stand out of the noise's
    spectrum, or a private mean that fell outside the public ranges. The
    message names what to change: a tighter ``data_norm`` or scaled
    features, more ``epsilon``, fewer components.
    """


def mean_in_box(mean, bounds):
    """``mean`` clipped into the public box of a centred fit.

    Every row of the fit was clipped into ``[lower, upper]``, so the mean of
    the rows lies in it too; the private mean, which carries noise, may not.
    Its projection into the box is closer to the rows' mean in every
    coordinate (the box is convex and holds that mean), costs no budget
    (post-processing) and never reports a value no row can have, such as a
    mean of 13.6 children on a public range of 0 to 8. Without centring
    (``center=False``) ``mean_`` is zero by definition, not an estimate, and
    is kept.

    Parameters
    ----------
    mean : ndarray of shape (n_features,)
        The released mean, in the data's dtype.
    bounds : BoundsPlan
        The fit's norm bounds: ``bounds.box`` is the box in the data's dtype
        (rounded inward), or ``None``; ``bounds.center`` the fit's ``center``.

    Returns
    -------
    mean : ndarray of shape (n_features,)
    """
    if bounds.box is None or not bounds.center:
        return mean
    lower, upper = bounds.box
    return np.clip(mean, lower, upper).astype(mean.dtype, copy=False)


#: How to put features on a common scale (the CLI rewords it in its flags).
SCALE_ADVICE = (
    "by their public ranges with sklearn_dppca.preprocessing.PublicScaler (no "
    "budget), or privately with sklearn_dppca.preprocessing."
    "PrivateStandardScaler (a charge of its own)"
)
#: The same for sparse rows, which a scaler must keep sparse: the private
#: scaler centres them (refused), a public one keeps zeros at zero only from 0
#: (review 90 F5).
SPARSE_SCALE_ADVICE = (
    "by their public ranges with sklearn_dppca.preprocessing.PublicScaler, "
    "ranges from 0 (zeros stay zeros, the rows sparse; no budget)"
)


#: How to keep fewer features, publicly (the noise warning's advice).
FEWER_FEATURES = ("a public selection, or a smaller HashingVectorizer("
                  "n_features=...)")


def _scale_advice(estimator):
    """:data:`SCALE_ADVICE`, or for a fit on sparse rows (public: the
    input's kind) :data:`SPARSE_SCALE_ADVICE`."""
    return SPARSE_SCALE_ADVICE if getattr(estimator, "_sparse_rows", False) \
        else SCALE_ADVICE


def _feature_names(estimator, indices):
    names = getattr(estimator, "feature_names_in_", None)
    return ", ".join(repr(str(names[j])) if names is not None else f"feature {j}"
                     for j in indices)


def warn_if_mean_projected(estimator, released, projected):
    """Warn (:class:`NoisyReleaseWarning`) when :func:`mean_in_box` moved
    the released mean of some features onto their public ranges: every row
    lies in the box, so the noise alone put the mean outside, and those
    features' means are mostly noise at this budget. ``released`` and
    ``projected`` are the mean before and after the projection (released
    values)."""
    from ._warning_rules import _outside_stacklevel

    moved = np.flatnonzero(np.asarray(released) != np.asarray(projected))
    if moved.size == 0:
        return
    shown = _feature_names(estimator, moved[:5]) + (
        f" and {moved.size - 5} more" if moved.size > 5 else "")
    warnings.warn(
        f"The private mean of {moved.size} of {released.shape[0]} features "
        f"({shown}) fell outside their public ranges and was projected onto "
        "them: the noise of the mean is larger than those ranges, so their "
        "means, and the centring of the components along them, are mostly "
        f"noise. Put the features on a common scale {_scale_advice(estimator)}, "
        "tighten the bounds, or spend more epsilon. (Computed from released "
        "values only.)",
        NoisyReleaseWarning,
        stacklevel=_outside_stacklevel(),
    )


def warn_if_noise_dominated(estimator):
    r"""Warn (:class:`NoisyReleaseWarning`) when some of the kept components'
    released eigenvalues do not stand above the edge of the noise's bulk.

    ``n_resolved_`` (from the released spectrum and the public noise scale:
    the eigenvalues above :math:`b + 2\sqrt{d}\,\tau`, the bulk's centre
    :math:`b` plus the semicircle's radius of the GOE kernel with
    off-diagonal standard deviation :math:`\tau = \sigma/\sqrt{2}`;
    docs/privacy.rst, "The spectrum") counts those that do. A component
    below the edge is, to first order, a random direction in the bulk: on
    pure noise the top eigenvalue crosses the edge 9–19% of the time, so the
    rule misses a noise-only release at most that often and never fires on
    a component three Tracy–Widom standard deviations beyond the edge.
    """
    from ._warning_rules import _outside_stacklevel

    k, resolved = estimator.n_components_, getattr(estimator, "n_resolved_", None)
    if resolved is None or k == 0 or resolved >= k:
        return
    which = ("none of them does" if resolved == 0 else "only the first does"
             if resolved == 1 else f"only the first {resolved} do")
    verb = "does" if k - resolved == 1 else "do"
    # the last knob: keep the components that are resolved, when there are any
    fewer = (f", fit on more rows, or keep n_components={resolved} (the "
             "resolved ones)." if resolved else
             " or fit on more rows: no component is resolved at this budget, "
             "so keeping fewer components would not help.")
    # the covariance's noise spectrum widens as sqrt(d), d public: said on
    # wide rows (review 99 F3); the random start's noise does not grow with d
    d = getattr(estimator, "n_features_in_", None) or 0
    wide = (getattr(estimator, "branch_", None) != "random"
            and d >= HINT_MIN_FEATURES)
    # below the reach of the private mean's error, a component may be real
    # but cannot be told from that error (review 127 F1)
    told = ("lie within the noise's spectrum or below the reach of the private "
            "mean's error, so they cannot be told from noise"
            if getattr(estimator, "_mean_error_out", False) else
            "lie within the noise's spectrum, so they are close to random "
            "directions")
    warnings.warn(
        f"{k - resolved} of the {k} released components {verb} not stand out of "
        f"the noise ({which}): their released eigenvalues {told}. The "
        "noise grows as the square of the norm bound"
        + (" and as the square root of the number of features" if wide else "")
        + " and shrinks as n times "
        f"epsilon: give a tighter data_norm (the bound used: "
        f"{estimator.data_norm_:.4g}) or put the features on a common scale "
        f"{_scale_advice(estimator)}, "
        + (f"keep fewer features ({FEWER_FEATURES}; d={d} now), "
           if wide else "")
        + f"spend more epsilon (now {estimator.epsilon:g})"
        f"{fewer}{_random_start_hint(estimator)}{_mean_error_hint(estimator)} "
        "(Computed from released values and the public noise scale only.)",
        NoisyReleaseWarning,
        stacklevel=_outside_stacklevel(),
    )


def _mean_error_hint(estimator):
    """The noise warning's word on the private mean's error where it stands
    out of the noise's bulk (public: its size and the noise scale,
    ``_base._spectrum``): a direction of noise as large as a component, which
    is not counted as resolved (docs/privacy.rst §5)."""
    if not getattr(estimator, "_mean_error_out", False):
        return ""
    return (" The private mean's error is itself a direction of noise as large "
            "as a component here (its centring adds it to the rows): with "
            "center=False (the data's mean then joins the components, as in "
            "TruncatedSVD; suits counts and TF-IDF) or more epsilon it is not.")


#: Where a fit that releases the covariance is told of the random start:
#: at least this many features, and rows at least this many times as many.
#: Its releases' noise does not grow with d, the covariance's does (as √d,
#: docs/benchmarks.rst, "Where n is close to d"); below 5 d nothing resolves.
HINT_MIN_FEATURES, HINT_MIN_ROWS_PER_FEATURE = 100, 5


def _random_start_hint(estimator):
    """The noise warning's pointer to ``CoherentPowerPCA(start="random")``,
    from public shapes and the released branch: for wide rows with ``n`` of
    at least five times ``d`` whose fit released the covariance."""
    n = getattr(estimator, "n_samples_", 0)
    d = getattr(estimator, "n_features_in_", 0)
    if (getattr(estimator, "branch_", None) == "random" or d < HINT_MIN_FEATURES
            or n < HINT_MIN_ROWS_PER_FEATURE * d):
        return ""
    return (f" With {n} rows of {d} features, CoherentPowerPCA(start='random') "
            "may resolve more: its releases' noise does not grow with the "
            "number of features, the covariance's does.")


class FeatureScaleWarning(UserWarning):
    """One feature's released variance dwarfs most others'.

    Issued after a fit, from its released values only (post-processing; the
    rule is in :ref:`feature-scale-warning`): the components then follow that
    feature whatever the others do, as when income in currency units sits
    beside an age and a 1–5 score. Scale the features to a common scale
    first (:mod:`sklearn_dppca.preprocessing`).
    """


#: The component rule: the top component, above the noise's edge, explains at
#: least this share of the released total ...
TOP_COMPONENT_SHARE = 0.95
#: ... and puts at least this share of its squared loadings on one feature
#: (a loading of 0.95): the covariance is then mostly one feature's variance.
#: The noise flattens the released diagonal that DOMINANCE_RATIO reads (at
#: ε ≤ 10 on a census table whose population column is 1e6 times the others'
#: variance, that rule stayed silent); a resolved component is not flattened.
ONE_FEATURE_LOADING = 0.9


#: The warning's ratio: the largest released per-feature variance must exceed
#: this multiple of the lower median of them all (a standard deviation about
#: 30 times the median feature's) ... The released model gives the features
#: outside the top components only the residual variance, which understates
#: them: at 100 the docstring data of PrivatePCA (true ratio 36) fired.
DOMINANCE_RATIO = 1000.0
#: ... and this multiple of the fit's public noise scale τ = C²√d / (n μ*)
#: (:func:`noise_scale_of_variances`), so that noise alone never fires it:
#: on data of no variance at all the largest released variance stays below
#: about 17 τ (200 seeds each of n from 10 to 1000, d = 2 and 3, ε from 0.3
#: to 100: the covariance noise, about 2–3 τ, plus the rank-one error of the
#: private centre at small n μ*, which clipping caps at C²).
NOISE_MARGIN = 50.0


def released_variances(estimator):
    r"""Per-feature variances of a fitted estimator's released model.

    The diagonal of the released model without whitening,
    :math:`\sigma^2 + \sum_k (\max(\lambda_k, \sigma^2) - \sigma^2) c_{kj}^2`
    (:math:`\lambda` = ``explained_variance_``, :math:`c` = ``components_``),
    with :math:`\sigma^2` the larger of ``noise_variance_`` and the released
    total's share per remaining direction,
    :math:`(\mathrm{total\_variance\_} - \sum_k \lambda_k)/(d - k)`, computed
    in :math:`O(k d)` on the host from released attributes only.
    """
    from . import _array_api

    components = _array_api.to_host(estimator.components_)
    variance = _array_api.to_host(estimator.explained_variance_)
    residual = float(estimator.noise_variance_)
    # The model's residual can be shrunk far below what the features outside
    # the top components hold; the released total says what they hold on
    # average, so the residual is at least that.
    total = getattr(estimator, "total_variance_", None)
    k, d = components.shape
    if total is not None and d > k:
        residual = max(residual, (float(total) - float(variance.sum())) / (d - k))
    excess = np.maximum(variance, residual) - residual
    return residual + (excess[:, None] * np.abs(components) ** 2).sum(axis=0)


def noise_scale_of_variances(estimator):
    r""":math:`\tau = C^2\sqrt{d} / (n \mu^*)`: the scale of the noise a fit at
    the whole budget adds to a released variance (public: ``data_norm_``,
    :math:`n`, :math:`d`, ``epsilon``, ``delta``); 0 for the non-private
    ``epsilon=inf``.

    PrivatePCA's noisy covariance has spectral noise of about :math:`2\tau`;
    no mechanism can do much better (the Gaussian noise of a release of
    sensitivity :math:`C^2` at :math:`\mu^*`, spread over :math:`d`
    directions, over :math:`n`).
    """
    from .privacy import gdp_mu

    mu = gdp_mu(estimator.epsilon, estimator.delta)
    if not math.isfinite(mu):
        return 0.0
    n, d = estimator.n_samples_, estimator.n_features_in_
    return float(estimator.data_norm_) ** 2 * math.sqrt(d) / (n * mu)


def _one_feature_component(estimator):
    r"""The feature that the first released component is, or None: that
    component stands above the noise (``n_resolved_`` :math:`\ge 1`, and its
    variance above :data:`NOISE_MARGIN` times the noise scale, as for the
    first rule), explains at least :data:`TOP_COMPONENT_SHARE` of the
    released total and puts at least :data:`ONE_FEATURE_LOADING` of its
    squared loadings on one feature."""
    from . import _array_api

    if getattr(estimator, "n_resolved_", 0) < 1 or estimator.n_components_ < 1:
        return None
    ratio = float(_array_api.to_host(estimator.explained_variance_ratio_)[0])
    variance = float(_array_api.to_host(estimator.explained_variance_)[0])
    first = np.abs(_array_api.to_host(estimator.components_)[0]) ** 2
    j = int(np.argmax(first))
    if (ratio >= TOP_COMPONENT_SHARE and first[j] >= ONE_FEATURE_LOADING
            and variance > NOISE_MARGIN * noise_scale_of_variances(estimator)):
        return j
    return None


def warn_if_one_feature_dominates(estimator):
    r"""Warn (:class:`FeatureScaleWarning`) when one feature dominates.

    From released values only, after the fit's release, by either of two
    rules. First, with :math:`v` the
    released per-feature variances (:func:`released_variances`), it fires
    when :math:`\max v` exceeds :data:`DOMINANCE_RATIO` (1000) times the
    lower median of :math:`v` (the :math:`\lceil d/2 \rceil`-th smallest: at
    least half the features are 1000 times smaller) and
    :data:`NOISE_MARGIN` (50) times the noise scale :math:`\tau`
    (:func:`noise_scale_of_variances`), so that a release of noise alone
    never fires it. Second, when the first component is one
    feature (:func:`_one_feature_component`): the noise flattens the
    released diagonal, not a component standing above it. Not for one
    feature. The message names the feature(s) and points to
    :mod:`sklearn_dppca.preprocessing`.
    """
    from ._warning_rules import _outside_stacklevel

    v = released_variances(estimator)
    d = v.shape[0]
    if d < 2 or not np.isfinite(v).all():
        return
    top = float(v.max())
    median = float(np.sort(v)[(d - 1) // 2])
    tau = noise_scale_of_variances(estimator)
    if top > DOMINANCE_RATIO * median and top > NOISE_MARGIN * tau:
        big = np.argsort(v)[::-1]
        big = [j for j in big[:3] if v[j] > DOMINANCE_RATIO * median]
        named = ", ".join(f"{_feature_names(estimator, [j])} ({v[j]:.3g})"
                          for j in big)
        why = (f"the released variance of {named} is more than "
               f"{DOMINANCE_RATIO:g} times that of most features (median "
               f"{median:.3g})")
    else:
        first = _one_feature_component(estimator)
        if first is None:
            return
        why = (f"the first component is {_feature_names(estimator, [first])} "
               "alone and explains nearly all the released variance")
    warnings.warn(
        f"One feature dominates the fit: {why}, so the components follow it "
        "whatever the others do. If the features are on different scales, put "
        f"them on a common one before the fit: {_scale_advice(estimator)}. "
        "(Computed from released values only.)",
        FeatureScaleWarning,
        stacklevel=_outside_stacklevel(),
    )
