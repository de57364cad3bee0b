"""Post-processing of a fit's released values: free, and public afterwards.

Functions the shared fit (``_base._fit``) calls once its release is made:

- :func:`mean_in_box` projects the released mean into the public box of
  ``bounds=``: a mean outside a feature's public range is never reported.
- :func:`warn_if_one_feature_dominates` warns, from released values only,
  when one feature's released variance dwarfs the others' (features on
  different scales), and points to the scalers of
  :mod:`sklearn_dppca.preprocessing`.

Nothing here reads the data.
"""

import math
import warnings

import numpy as np


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
    bounds : NormBounds
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


class FeatureScaleWarning(UserWarning):
    """One feature's released variance dwarfs most others'.

    Issued after a fit, from its released values only (post-processing; the
    rule is in :ref:`feature-scale-warning`): the components then follow that
    feature whatever the others do, as when income in currency units sits
    beside an age and a 1–5 score. Scale the features to a common scale
    first (:mod:`sklearn_dppca.preprocessing`).
    """


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
    """Per-feature variances of a fitted estimator's released model.

    The diagonal of ``get_covariance()`` without whitening, ``σ² + Σ_k
    (max(λ_k, σ²) − σ²) c_kj²`` (``λ = explained_variance_``, ``σ² =
    noise_variance_``, ``c = components_``), computed in ``O(k d)`` on the
    host from released attributes only.
    """
    from . import _array_api

    components = _array_api.to_host(estimator.components_)
    variance = _array_api.to_host(estimator.explained_variance_)
    residual = float(estimator.noise_variance_)
    excess = np.maximum(variance, residual) - residual
    return residual + (excess[:, None] * np.abs(components) ** 2).sum(axis=0)


def noise_scale_of_variances(estimator):
    """``τ = C²√d / (n μ*)``: the scale of the noise a fit at the whole budget
    adds to a released variance (public: ``data_norm_``, ``n``, ``d``,
    ``epsilon``, ``delta``); 0 for the non-private ``epsilon=inf``.

    PrivatePCA's noisy covariance has spectral noise of about ``2τ``; no
    mechanism can do much better (the Gaussian noise of a release of
    sensitivity ``C²`` at ``μ*``, spread over ``d`` directions, over ``n``).
    """
    from .privacy import gdp_mu

    mu = gdp_mu(estimator.epsilon, estimator.delta)
    if not math.isfinite(mu):
        return 0.0
    n, d = estimator.n_samples_, estimator.n_features_in_
    return float(estimator.data_norm_) ** 2 * math.sqrt(d) / (n * mu)


def warn_if_one_feature_dominates(estimator):
    """Warn (:class:`FeatureScaleWarning`) when one feature dominates.

    From released values only, after the fit's release: with ``v`` the
    released per-feature variances (:func:`released_variances`), it fires
    when ``max v`` exceeds :data:`DOMINANCE_RATIO` (1000) times the lower
    median of ``v`` (the ``⌈d/2⌉``-th smallest: at least half the features
    are 1000 times smaller) and :data:`NOISE_MARGIN` (50) times the noise
    scale ``τ`` (:func:`noise_scale_of_variances`), so that a release of
    noise alone never fires it. Not for one feature. The message names the
    feature(s) and points to :mod:`sklearn_dppca.preprocessing`.
    """
    from .privacy import _outside_stacklevel

    v = released_variances(estimator)
    d = v.shape[0]
    if d < 2 or not np.isfinite(v).all():
        return
    top = float(v.max())
    median = float(np.sort(v)[(d - 1) // 2])
    tau = noise_scale_of_variances(estimator)
    if not (top > DOMINANCE_RATIO * median and top > NOISE_MARGIN * tau):
        return
    names = getattr(estimator, "feature_names_in_", None)
    big = np.argsort(v)[::-1]
    big = [j for j in big[:3] if v[j] > DOMINANCE_RATIO * median]
    named = ", ".join(
        (repr(str(names[j])) if names is not None else f"feature {j}")
        + f" ({v[j]:.3g})" for j in big
    )
    warnings.warn(
        f"One feature dominates the fit: the released variance of {named} "
        f"is more than {DOMINANCE_RATIO:g} times that of most features "
        f"(median {median:.3g}), so the components follow it whatever the "
        "others do. If the features are on different scales, put them on a "
        "common one before the fit: by their public ranges with "
        "sklearn_dppca.preprocessing.PublicScaler (no budget), or privately "
        "with sklearn_dppca.preprocessing.PrivateStandardScaler (a charge of "
        "its own). (Computed from released values only.)",
        FeatureScaleWarning,
        stacklevel=_outside_stacklevel(),
    )
