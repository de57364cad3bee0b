r"""Differentially private PCA that drops straight into scikit-learn.

The estimators release principal components under
:math:`(\varepsilon, \delta)`-differential privacy with respect to the
replacement of one row (one person):

- :class:`PrivatePCA` — Gaussian noise on the covariance (the default drop-in).
- :class:`ComplexGaussPCA` — the complex (Hermitian) Gaussian mechanism of
  Mangoubi & Vishnoi, for rank-k covariance approximation.
- :class:`CoherentPowerPCA` — the preconditioned, clipped private power method,
  with private choice of its clipping radius and iteration count.

Every fit is charged to a :class:`BudgetAccountant` (the process-wide default
unless one is given) that composes fits exactly.

These modules are imported explicitly, not from here:

- :mod:`sklearn_dppca.metrics` — utility measures (principal angles,
  projection distance, rank-k covariance error, captured variance, coherence).
- :mod:`sklearn_dppca.datasets` — synthetic data of controlled coherence,
  eigengap and spread, and bundled real datasets scaled for private PCA.
- :mod:`sklearn_dppca.preprocessing` — features put on a common scale, by
  their public ranges (no budget) or privately.
- :mod:`sklearn_dppca.linear_model` — private supervised heads (a linear
  discriminant classifier, ridge regression) for the end of a pipeline.
"""

from . import linear_model, model_selection, preprocessing  # noqa: F401  (explicit imports)
from ._coherent_power_pca import CoherentPowerPCA
from ._complex_gauss_pca import ComplexGaussPCA
from ._private_pca import PrivatePCA
from ._released import NoisyReleaseWarning, SolverParameterWarning
from .privacy import BudgetAccountant, BudgetExceededError, PrivacyLeakWarning

# documented and imported from here
NoisyReleaseWarning.__module__ = SolverParameterWarning.__module__ = __name__

__version__ = "0.1.0"

__all__ = [
    "BudgetAccountant",
    "BudgetExceededError",
    "CoherentPowerPCA",
    "ComplexGaussPCA",
    "NoisyReleaseWarning",
    "PrivacyLeakWarning",
    "PrivatePCA",
    "SolverParameterWarning",
    "__version__",
]
