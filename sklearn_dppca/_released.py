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
