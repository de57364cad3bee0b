"""Private model selection: a grid search whose choice is private too.

:class:`PrivateGridSearchCV` has the surface of scikit-learn's
:class:`~sklearn.model_selection.GridSearchCV`, but everything it releases —
the fitted candidates it never shows, the per-fold scores, the choice of the
best candidate and the refitted estimator — is one ``(epsilon, delta)``-DP
release, composed exactly in Gaussian differential privacy and charged once
to a :class:`~sklearn_dppca.BudgetAccountant` (:doc:`/model_selection`,
:ref:`privacy-accounting`).

:func:`plan_search` is the whole privacy analysis of a search: a pure
function of the grid and public values (``n``, ``d``, the folds) that clones
and checks every candidate, groups those that share a release, and fixes
every ``μ`` and the charge before the data is read. ``fit`` only executes
the plan:

1. **Candidate fits.** Every group of candidates is fitted on every training
   fold at ``μ_g``. A row sits in ``K − 1`` training folds, so the fits of a
   group compose as ``K − 1`` releases (under replacement the fold that does
   not hold the row does not depend on it). PrivatePCA candidates that
   differ only in ``n_components`` or ``whiten`` are post-processing of one
   release: one fit per fold (``n_components=None``, truncated).
2. **Scores.** The score of a candidate on a fold is the captured variance of
   the fold's validation rows, ``Σ_i ‖P clip_C(x_i − m̂)‖²``, each term in
   ``[0, C²]``. Each row is in exactly one validation fold, so the matrix of
   candidate × fold scores has L2 sensitivity ``√(Σ_c C_c⁴)`` given the
   candidate fits (paid for in step 1): the same as the vector of their
   sums. It is released with Gaussian noise at ``μ_sel``.
3. **Choice.** Post-processing of the noisy scores and of the released
   spectra: the floor-penalised score of :func:`floor_penalised_scores`.
4. **Refit** of the chosen candidate on all rows at ``μ_refit``.

Candidates that end in a private supervised head
(:mod:`sklearn_dppca.linear_model`) are searched with the same shares and
bounded, noisy accuracy, balanced accuracy, squared-error or R² scores.
:func:`private_cross_validate` and :func:`private_cross_val_score` are
scikit-learn's ``cross_validate`` and ``cross_val_score`` with noisy scores:
a search of one candidate without a refit.
"""

import math
import warnings
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from joblib import Parallel, delayed
from scipy.stats import rankdata
from sklearn.base import BaseEstimator, MetaEstimatorMixin, _fit_context, clone
from sklearn.exceptions import FitFailedWarning
from sklearn.impute import SimpleImputer
from sklearn.model_selection import KFold, ParameterGrid
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils import _safe_indexing, get_tags
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    InvalidParameterError,
    StrOptions,
)
from sklearn.utils._repr_html.estimator import _VisualBlock
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import (
    check_consistent_length,
    check_is_fitted,
    validate_data,
)

from . import _array_api
from . import _supervised_search as _supervised
from ._base import (
    _all_or_nothing,
    _BasePrivatePCA,
    map_non_finite,
    reported_spend,
)
from ._bounds import check_data_norm_range, public_box_norm
from ._coherent_power_pca import CoherentPowerPCA
from ._private_pca import PrivatePCA
from ._stats import clip_rows
from .noise import dense_noise, make_generator, noise_scale
from .preprocessing import PrivateStandardScaler, PublicScaler
from .privacy import (
    BudgetAccountant,
    _carry_default,
    _keep_carried_default,
    _resolve_accountant,
    _warn_leak,
    gdp_epsilon,
    gdp_mu,
    private_computation,
)

__all__ = [
    "PrivateGridSearchCV",
    "SEARCH_BUDGET_SHARES",
    "SELECTION_Z",
    "SearchPlan",
    "captured_variance_rows",
    "captured_variance_score",
    "floor_penalised_scores",
    "plan_search",
    "private_cross_val_score",
    "private_cross_validate",
]

#: Fractions of ``μ*²`` of the search: the candidate fits on the training
#: folds, the released score matrix, and the refit on all rows. Without a
#: refit its share is dropped and the others rescaled to sum to 1.
SEARCH_BUDGET_SHARES = {"fits": 0.45, "selection": 0.1, "refit": 0.45}

#: Margin, in standard deviations, that each extra component must clear in
#: the floor-penalised score (see :func:`floor_penalised_scores`).
SELECTION_Z = 2.0

#: The one bounded score, by its name for ``scoring`` and ``refit``.
SCORER_NAME = "captured_variance"

# Parameters of the private step that are post-processing of one release of
# PrivatePCA: candidates differing only in these share the fit of a fold.
_POST_PROCESSING = ("n_components", "whiten")
# Parameters the search sets itself on the private step of every fit.
_OWNED = ("epsilon", "delta", "accountant", "random_state")


# --------------------------------------------------------------------------
# Scores
# --------------------------------------------------------------------------
def captured_variance_rows(rows, mean, components, data_norm):
    """Per-row captured variance ``‖P clip_C(x_i − m̂)‖²``, each in ``[0, C²]``.

    ``P`` is the orthogonal projection on the span of ``components`` (rows),
    which are orthonormalised first (post-processing of a release), so the
    bound ``‖P y‖² ≤ ‖y‖² ≤ C²`` holds for any released components; the
    final clip to ``[0, C²]`` makes it exact in floating point too.

    Parameters
    ----------
    rows : ndarray of shape (n_rows, n_features)
    mean : ndarray of shape (n_features,)
    components : ndarray of shape (k, n_features)
    data_norm : float

    Returns
    -------
    scores : ndarray of shape (n_rows,)

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.model_selection import captured_variance_rows
    >>> rows = np.array([[3.0, 4.0], [0.0, 0.5]])
    >>> captured_variance_rows(rows, np.zeros(2), np.array([[0.0, 1.0]]), 1.0)
    array([0.64, 0.25])
    """
    basis, _ = np.linalg.qr(np.asarray(components, dtype=np.float64).T)
    projected = clip_rows(rows, data_norm, mean) @ basis
    return np.clip(np.einsum("ij,ij->i", projected, projected), 0.0, data_norm**2)


def captured_variance_score(estimator, X, y=None):
    """Mean captured variance of the rows of ``X`` under a fitted estimator.

    The scorer the search's ``scoring="captured_variance"`` names (its
    ``scorer_``), with the signature of a scikit-learn scorer: the mean over
    rows of :func:`captured_variance_rows` under the private step's released
    ``mean_``, ``components_`` and ``data_norm_``, after the pipeline's
    steps before it. It reads ``X`` exactly: use it on rows of your own, not
    as a release.

    Parameters
    ----------
    estimator : fitted private estimator or Pipeline holding one
    X : array-like of shape (n_samples, n_features)
    y : ignored

    Returns
    -------
    score : float
    """
    prefix, _, step = _locate_private_step(estimator)
    rows = _host(_before_step(estimator, prefix, X), step.non_finite)
    return float(np.mean(captured_variance_rows(
        rows, _host(step.mean_), _host(step.components_), step.data_norm_)))


def floor_penalised_scores(released, n_components, n_validation, floor,
                           selection_sigma, z=SELECTION_Z):
    """Per-fold scores that compare candidates with different ``k`` fairly.

    Captured variance grows with ``k`` even past the planted rank: a
    direction of the isotropic noise floor captures the floor's variance
    ``τ_f`` per validation row, whichever direction the noisy release
    picked. The rule subtracts from each released (noisy) fold score the
    expected capture of its floor components, ``k_{c,f} n_f τ_f``, and a
    margin of ``z`` standard deviations of what extra floor components add
    by chance — their sampling spread ``√(2 Σ_f n_f τ_f²)`` (the variance
    of ``y²`` for ``y ~ N(0, τ)``) and the noise of a difference of two
    candidates' summed released scores, ``√(2K) σ`` — shared among the
    folds in proportion to their rows, and divides by the fold's rows::

        S_{c,f} = (R_{c,f} − k_{c,f} n_f τ_f − (n_f/n) k̄_c z spread_c) / n_f
        spread_c = √(2 Σ_f n_f τ_f² + 2 K σ²)

    The mean of ``S_{c,f}`` over the folds is the floor-penalised captured
    variance per validation row; it is the search's ``mean_test_score``. A
    signal direction of variance ``λ > τ`` adds ``(λ − τ) n`` to the summed
    score, far above the margin; a floor direction adds on average nothing
    but pays the margin, so the best candidate is wrong only when chance
    beats ``z`` standard deviations. Everything here is post-processing of
    released values and of public ones.

    Parameters
    ----------
    released : ndarray of shape (n_candidates, n_folds)
        Noisy summed captured variance ``R_{c,f}`` of each fold.
    n_components : ndarray of shape (n_candidates, n_folds)
        Released ``n_components_`` of each candidate in each fold.
    n_validation : ndarray of shape (n_folds,)
        Validation rows per fold (public).
    floor : array-like broadcastable to (n_candidates, n_folds)
        Released floor variance ``τ`` per row.
    selection_sigma : float
        Standard deviation of the noise added to each fold score.
    z : float, default=SELECTION_Z

    Returns
    -------
    scores : ndarray of shape (n_candidates, n_folds)
        ``S_{c,f}``.
    penalty : ndarray of shape (n_candidates,)
        What was subtracted from each candidate's summed score.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.model_selection import floor_penalised_scores
    >>> released = np.array([[300.0], [400.0], [405.0]])  # k = 1, 2, 3, 1000 rows
    >>> k = np.array([[1], [2], [3]])
    >>> scores, _ = floor_penalised_scores(released, k, np.array([1000]), 0.01, 1.0)
    >>> int(np.argmax(scores.mean(axis=1))) + 1  # the third is only floor
    2
    """
    released = np.asarray(released, dtype=np.float64)
    k = np.asarray(n_components, dtype=np.float64)
    n_val = np.asarray(n_validation, dtype=np.float64)
    floor = np.broadcast_to(np.asarray(floor, dtype=np.float64), released.shape)
    expected = k * n_val * floor
    # τ and σ are of order C²: their squares under- or overflow for C far
    # from 1 (C = 1e-90: C⁴ = 0), so the spread is computed in units of the
    # largest of them.
    finite = np.abs(floor[np.isfinite(floor)])
    unit = max(float(np.max(finite, initial=0.0)), float(selection_sigma))
    unit = unit if 0.0 < unit < math.inf else 1.0
    spread = unit * np.sqrt(2.0 * (n_val * (floor / unit) ** 2).sum(axis=1)
                            + 2.0 * released.shape[1] * (selection_sigma / unit) ** 2)
    margin = (n_val / n_val.sum()) * (k.mean(axis=1) * z * spread)[:, None]
    return (released - expected - margin) / n_val, (expected + margin).sum(axis=1)


# --------------------------------------------------------------------------
# The plan: every candidate checked, every μ fixed, before the data is read
# --------------------------------------------------------------------------
class Candidate(NamedTuple):
    """One point of the grid, cloned and checked."""

    params: dict  # the grid's values
    estimator: object  # clone(estimator) with the (cloned) values set, unfitted
    prefix: str  # "" or "<step name>__" of the private step
    index: object  # the private step's position in a Pipeline, or None
    error: object = None  # the public reason it cannot be fitted, or None
    data_norm: float = None  # the public bound of its rows (_public_norm)


class SearchPlan(NamedTuple):
    """What a search releases and what it costs (:func:`plan_search`)."""

    candidates: list  # Candidate per grid point, in ParameterGrid's order
    groups: list  # indices of the candidates that share one release per fold
    shared: list  # per group: a truncated PrivatePCA release (else one candidate)
    fit_mus: list  # per group: μ of each of its fits on a training fold
    fit_epsilons: list  # per group: that fit's ε at the search's δ
    selection_sigma: float  # σ of the noise on each released fold score
    refit_epsilon: object  # ε of the refit on all rows, or None
    mu: float  # μ* = gdp_mu(epsilon, delta), charged once
    spent: tuple  # (ε, δ) of the composed plan


def plan_search(estimator, param_grid, *, epsilon, delta, splits, n_samples,
                n_features, refit=True, fit_weights=None):
    """The privacy analysis of a search, from the grid and public values.

    Every candidate is ``clone(estimator).set_params(**clone(params))`` —
    estimator objects in the grid are cloned, never fitted in place — and is
    checked *as it will run*: it must hold exactly one private estimator of
    this package beside stateless steps only, with a public numeric
    ``data_norm`` and a mechanism accounted in Gaussian DP; the grid may not
    set ``epsilon``, ``delta``, ``accountant`` or ``random_state``. A
    candidate that cannot be fitted for a public reason (an invalid
    parameter value, ``n_components`` above the features or the smallest
    training fold) is kept with its ``error`` and gets no budget.

    The budget ``μ*`` is split in :data:`SEARCH_BUDGET_SHARES` (without a
    refit, its share is dropped and the others rescaled):

    - **fits**: group ``g`` of weight ``ω_g`` fits on each training fold at
      ``μ_g² = s_fits μ*² ω_g / (r Σ_h ω_h)``, with ``r`` the most training
      folds any row is in (``K − 1`` for K-fold);
    - **scores**: each fold's scores get Gaussian noise of
      ``σ = √(Σ_c C_c⁴) / μ_sel`` with ``μ_sel² = s_sel μ*²`` (a row is in
      one validation fold and moves candidate ``c``'s score by ``≤ C_c²``);
    - **refit**: ``μ_refit² = s_refit μ*²``.

    They compose to ``r Σ_g μ_g² + μ_sel² + μ_refit² = μ*²``: one charge.

    Parameters
    ----------
    estimator : estimator
        The search's estimator (it need not hold a private step itself when
        the grid supplies one).
    param_grid : dict or list of dicts
    epsilon, delta : float
        The budget of the whole search.
    splits : list of (train, test) index arrays
        The public folds.
    n_samples, n_features : int
        The shape of ``X``.
    refit : bool, str or callable, default=True
    fit_weights : None, sequence of float or callable, default=None
        The weight ``ω ∈ (0, 1]`` of each candidate's group: one per grid
        point in ParameterGrid's order, or ``params -> weight``; ``None``
        weighs every group 1. Candidates sharing a release must agree.

    Returns
    -------
    plan : SearchPlan
    """
    folds_per_row = _check_splits(splits, n_samples)
    smallest = min(len(train) for train, _ in splits)
    grid = list(ParameterGrid(param_grid))
    if not grid:
        raise ValueError("param_grid has no candidate.")
    candidates = [_candidate(estimator, params, n_features, smallest)
                  for params in grid]
    weights = _weights(fit_weights, grid)

    groups = {}
    for c, cand in enumerate(candidates):
        if cand.error is None:
            groups.setdefault(_release_key(cand, c), []).append(c)
    if not groups:
        raise ValueError(
            f"All the {len(grid)} candidates fail for the reasons below, before "
            "any budget was spent:\n"
            + "\n".join(sorted({repr(c.error) for c in candidates}))
        )
    group_weights = []
    for members in groups.values():
        mine = {weights[c] for c in members}
        if len(mine) != 1:
            raise ValueError(
                f"fit_weights gives the candidates {members}, which share one "
                f"release per fold, different weights {sorted(mine)}."
            )
        group_weights.append(mine.pop())

    shares = dict(SEARCH_BUDGET_SHARES)
    if not refit:
        shares.pop("refit")
    total = sum(shares.values())
    shares = {name: w / total for name, w in shares.items()}
    mu_total = gdp_mu(epsilon, delta)
    mu_fit_sq = shares["fits"] * mu_total**2 / folds_per_row
    fit_mus, fit_eps = [], []
    for w in group_weights:
        mu_g = math.sqrt(mu_fit_sq * w / sum(group_weights))
        eps_g = gdp_epsilon(mu_g, delta, tidy=False)  # calibrates a fit
        if not (eps_g > 0 and math.isclose(gdp_mu(eps_g, delta), mu_g,
                                           rel_tol=1e-9)):
            raise ValueError(
                f"The candidates' share of epsilon={epsilon} is too small to "
                "calibrate one fit; raise epsilon or shrink the grid."
            )
        fit_mus.append(mu_g)
        fit_eps.append(eps_g)
    mu_sel = mu_total * math.sqrt(shares["selection"])
    # L2 sensitivity of the (candidate × fold) score matrix: a row is in one
    # validation fold and moves candidate c's score there by at most C_c²,
    # so √(Σ_c C_c⁴) — computed as C_max² √(Σ_c (C_c/C_max)⁴), whose factors
    # neither underflow nor overflow for any bound _candidate accepts (C⁴
    # is 0 below C ≈ 1e-81: the scores would be released exactly).
    norms = [_data_norm(candidates[c]) for members in groups.values()
             for c in members]
    largest = max(norms)
    sensitivity = largest**2 * math.sqrt(sum((c / largest) ** 4 for c in norms))
    try:  # a positive, finite, normal σ, or refused before any charge
        selection_sigma = noise_scale(sensitivity, mu_sel)
    except ValueError as error:
        raise ValueError(
            f"The search cannot calibrate the noise of its scores (data_norm "
            f"up to {largest:.3g}, epsilon={epsilon}): {error} The search was "
            "refused before it spent any budget."
        ) from None
    mu_refit = mu_total * math.sqrt(shares.get("refit", 0.0))
    composed = math.sqrt(folds_per_row * sum(m * m for m in fit_mus)
                         + mu_sel**2 + mu_refit**2)
    return SearchPlan(
        candidates=candidates,
        groups=list(groups.values()),
        shared=[key[0] == "shared" for key in groups],
        fit_mus=fit_mus,
        fit_epsilons=fit_eps,
        selection_sigma=selection_sigma,
        refit_epsilon=gdp_epsilon(mu_refit, delta, tidy=False) if refit else None,
        mu=mu_total,
        spent=(gdp_epsilon(composed, delta), delta),
    )


def _candidate(estimator, params, n_features, smallest_fold):
    """``Candidate`` for one grid point: refused (raise) if it cannot be made
    private, kept with ``error`` if it fails for a public reason."""
    _refuse_owned(params)
    est = clone(estimator).set_params(**clone(params, safe=False))
    prefix, index, step = _locate_private_step(est)
    if index is not None:
        for name, other in est.steps:
            if other is not step and not _is_stateless(other):
                raise ValueError(_refused_step(name, other))
    heads = [] if index is None else [other for _, other in est.steps[:index]]
    data_norm = _public_norm(step, n_features, heads)
    if isinstance(data_norm, ValueError):  # bounds invalid: a public failure
        return Candidate(params, est, prefix, index, data_norm)
    if data_norm is None:
        raise ValueError(
            f"The private estimator's data_norm={step.data_norm!r} must be a "
            "public positive number, or None with public bounds=(lower, "
            "upper) (the box's radius is then the bound), for a private "
            "search: it bounds each row's score by data_norm²."
        )
    if isinstance(step, CoherentPowerPCA) and step._mode() == "repetition":
        raise ValueError(
            "CoherentPowerPCA with selection='repetition' (and clip_radius or "
            "n_iter 'auto') is accounted in Rényi DP, not Gaussian DP: its fits "
            "cannot be composed exactly in the search's budget. Use the default "
            "selection='gdp', or a fixed clip_radius and n_iter."
        )
    try:
        # the fits refuse a bound whose square under- or overflows, on any
        # data (float64's limits: the widest): a public failure
        check_data_norm_range(float(data_norm), np.dtype(np.float64))
        for other in (est.steps if index is not None else [("", est)]):
            if hasattr(other[1], "_validate_params"):
                other[1]._validate_params()
        # the features are public where the private step reads X's columns
        step._check_n_components(smallest_fold,
                                 n_features if not index else smallest_fold)
    except (InvalidParameterError, ValueError, TypeError) as error:
        return Candidate(params, est, prefix, index, error, data_norm)
    return Candidate(params, est, prefix, index, None, data_norm)


def _refuse_owned(params):
    """Refuse a grid point that sets what the search sets on every fit."""
    owned = [p for p in params if p.rpartition("__")[2] in _OWNED]
    if owned:
        raise ValueError(
            f"param_grid may not set {owned}: the search sets epsilon, delta, "
            "the accountant and the random state of every fit. Its own epsilon "
            "is the budget of the whole search; to give some candidates more of "
            "the fits' share than others, use fit_weights."
        )


def _locate_private_step(estimator):
    """``(prefix, index, step)`` of the one private estimator in
    ``estimator`` (``index`` is None for a bare estimator)."""
    if isinstance(estimator, _BasePrivatePCA):
        return "", None, estimator
    if not isinstance(estimator, Pipeline):
        raise TypeError(
            "PrivateGridSearchCV needs a private estimator of sklearn_dppca "
            "(PrivatePCA, ComplexGaussPCA, CoherentPowerPCA) or a Pipeline "
            f"holding one; got {type(estimator).__name__}."
        )
    private = [i for i, (_, step) in enumerate(estimator.steps)
               if isinstance(step, _BasePrivatePCA)]
    if len(private) != 1:
        raise ValueError(
            "The Pipeline must hold exactly one private estimator of "
            f"sklearn_dppca (in the estimator or from the grid); it holds "
            f"{len(private)}."
        )
    name, step = estimator.steps[private[0]]
    return name + "__", private[0], step


#: The package's own transformers whose ``fit`` learns nothing from the rows
#: (their output is a fixed function of each row and of their parameters).
#: Matched by exact type: a subclass may learn in ``fit``.
_STATELESS_TYPES = frozenset({PublicScaler})


def _is_stateless(step):
    """A step whose fit learns nothing from the data that reaches its output:
    ``None``, ``"passthrough"``, a ``FunctionTransformer`` (exactly that
    class: a subclass may learn in ``fit``; its ``func`` must be a fixed
    per-row function, which the search cannot check), one of the package's
    own ``_STATELESS_TYPES`` (exact type), or a public constant fill
    (:func:`_is_constant_fill`)."""
    if step is None or (isinstance(step, str) and step == "passthrough"):
        return True
    return (type(step) is FunctionTransformer or type(step) in _STATELESS_TYPES
            or _is_constant_fill(step))


def _is_constant_fill(step):
    """``SimpleImputer(strategy="constant", keep_empty_features=True)``
    without ``add_indicator``. Its fit learns from the data which columns are
    all missing (dropped from the output unless ``keep_empty_features``) and,
    with ``add_indicator``, which columns have missing values (the
    indicator's columns); with neither, its output is a fixed function of
    each row: missing entries become ``fill_value``, the others stay."""
    return (type(step) is SimpleImputer and step.strategy == "constant"
            and step.keep_empty_features is True and not step.add_indicator)


#: The steps a search accepts beside the private estimator, for messages.
_STATELESS_STEPS = (
    "FunctionTransformer itself (not a subclass) with a fixed per-row func, "
    "sklearn_dppca.preprocessing.PublicScaler (not a subclass), SimpleImputer("
    "strategy='constant', keep_empty_features=True), 'passthrough', None"
)


def _refused_step(name, step):
    """Why the search refuses Pipeline step ``name`` (not stateless)."""
    where = f"Pipeline step {name!r} ({type(step).__name__})"
    if isinstance(step, PrivateStandardScaler):
        return (
            f"{where} is a private release of its own: its fit on each "
            "training fold would spend budget outside the search's plan, which "
            "accounts for the private estimator's fits only. The search was "
            "refused before any charge. Fit the scaler once on all rows (its "
            "own charge) and search on its output, or put its released mean_ "
            "and scale_ in a PublicScaler(center=mean_, scale=scale_), which "
            "the search accepts."
        )
    if isinstance(step, SimpleImputer) and step.strategy == "constant":
        return (
            f"{where} learns from the data which columns are all missing, and "
            "drops them unless keep_empty_features=True (with "
            "add_indicator=True, also which columns have missing values): that "
            "choice would reach the scores and the refit without noise. Use "
            "SimpleImputer(strategy='constant', fill_value=..., "
            "keep_empty_features=True) without add_indicator: a public constant "
            "fill, which the search accepts."
        )
    if isinstance(step, SimpleImputer):
        return (
            f"{where} fills missing values with the {step.strategy!r} of the "
            "data, computed without noise: not private. Fill a public constant "
            "instead: SimpleImputer(strategy='constant', fill_value=..., "
            "keep_empty_features=True)."
        )
    return (
        f"{where} is fitted on the data without privacy: its fit on each "
        "training fold would reach the scores and the refit without noise, and "
        "a supervised final step makes a row's effect on the scores unbounded. "
        f"Only stateless steps ({_STATELESS_STEPS}) may stand beside the "
        "private estimator, in the estimator and in every grid value. For a "
        "classifier or a regressor, end the Pipeline in a private head "
        "(sklearn_dppca.linear_model.PrivateLDA or PrivateRidge): the search "
        "then scores it with noisy accuracy or R²."
    )


def _public_norm(step, n_features, heads=()):
    """The public norm bound of a private step: its numeric ``data_norm``, or
    with ``data_norm=None`` and ``bounds`` the box's radius
    (:func:`~sklearn_dppca._bounds.public_box_norm`), or the ``ValueError``
    of invalid bounds; ``None`` otherwise.
    Scalar bounds need the step's number of features: ``n_features`` when
    every step before it keeps the columns (a ``PublicScaler``,
    ``"passthrough"``, a constant fill), else refused (a
    ``FunctionTransformer`` may change them: give arrays)."""
    data_norm = step.data_norm
    if isinstance(data_norm, Real) and not isinstance(data_norm, bool):
        return float(data_norm) if 0 < data_norm < math.inf else None
    bounds = getattr(step, "bounds", None)
    if data_norm is not None or bounds is None:
        return None
    if isinstance(bounds, dict):
        # by feature name: the box of every feature it names bounds the box
        # of those the step will see (a radius over more features is larger)
        try:
            return public_box_norm(bounds, len(bounds), step.center,
                                   feature_names=list(bounds))
        except ValueError as error:
            return error
    sides = [np.asarray(side, dtype=np.float64) for side in bounds]
    sized = [side.size for side in sides if side.ndim > 0]
    keeps = all(h is None or (isinstance(h, str) and h == "passthrough")
                or type(h) in _STATELESS_TYPES or _is_constant_fill(h)
                for h in heads)
    if sized:
        n_features = sized[0]
    elif not keeps:
        raise ValueError(
            "The private estimator's bounds are scalars after a step that may "
            "change the number of columns (a FunctionTransformer): give "
            "bounds=(lower, upper) as arrays of its number of features, so "
            "that the box's radius, the scores' bound, is public."
        )
    try:
        return public_box_norm(bounds, n_features, step.center)
    except ValueError as error:  # returned: the candidate keeps it
        return error


def _data_norm(candidate):
    return candidate.data_norm


def _release_key(candidate, c):
    """Candidates with equal keys are post-processing of one release: a
    PrivatePCA with an integer or no ``n_components``, equal in every
    parameter but ``n_components`` and ``whiten`` (and those the search sets
    itself). Any other candidate is a release of its own."""
    prefix, step = candidate.prefix, _locate_private_step(candidate.estimator)[2]
    if type(step) is not PrivatePCA or not isinstance(
        step.n_components, (Integral, type(None))
    ):
        return ("own", c)
    ignored = {prefix + p for p in _POST_PROCESSING + _OWNED}
    return ("shared", _params_key(candidate.estimator, ignored))


def _params_key(estimator, ignored):
    """A hashable key of ``estimator``'s deep parameters but the
    ``ignored`` ones, by value (:func:`_value_key`)."""
    params = estimator.get_params(deep=True)
    return _value_key({
        # estimators: their type (their parameters are listed on their own)
        name: ("estimator", _type_name(value)) if _is_estimator(value) else value
        for name, value in params.items()
        if name not in ignored and name != "steps"  # the steps: by name, above
    })


def _type_name(value):
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def _is_estimator(value):
    return hasattr(value, "get_params") and not isinstance(value, type)


def _value_key(value):
    """A hashable key equal for equal values, by value: ``repr`` abbreviates
    arrays over 1000 values (two different ``bounds`` had one repr). Arrays
    become their type, dtype, shape and bytes (object arrays: the keys of
    their entries); tuples, lists and dicts the keys of their items;
    estimators their type and the key of their parameters; anything else its
    type and ``repr``. Unequal keys only split a release in two, never join
    two."""
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            return ("ndarray", _type_name(value), "object", value.shape,
                    tuple(_value_key(v) for v in value.ravel().tolist()))
        return ("ndarray", _type_name(value), value.dtype.str, value.shape,
                np.ascontiguousarray(value).tobytes())
    if isinstance(value, (tuple, list)):
        return (_type_name(value), tuple(_value_key(v) for v in value))
    if isinstance(value, dict):
        items = sorted(((_value_key(k), _value_key(v)) for k, v in value.items()),
                       key=repr)
        return (_type_name(value), tuple(items))
    if _is_estimator(value):
        return ("estimator", _type_name(value),
                _value_key(value.get_params(deep=False)))
    return (_type_name(value), repr(value))


def _weights(fit_weights, grid):
    if fit_weights is None:
        weights = [1.0] * len(grid)
    elif callable(fit_weights):
        weights = [fit_weights(params) for params in grid]
    else:
        weights = list(fit_weights)
        if len(weights) != len(grid):
            raise ValueError(
                f"fit_weights has {len(weights)} values for {len(grid)} "
                "candidates (one per grid point, in ParameterGrid's order)."
            )
    for w in weights:
        if not (isinstance(w, Real) and 0.0 < w <= 1.0):
            raise ValueError(
                f"A fit weight is the candidate's share of the fits' budget "
                f"relative to the others and must be in (0, 1]; got {w!r}."
            )
    return [float(w) for w in weights]


def _check_splits(splits, n_samples):
    """Check that the validation folds partition the rows and that no split
    repeats a row (a row twice in one training fold would count twice in its
    fit's sensitivity); return the most training folds any row sits in."""
    if not splits:
        raise ValueError(
            "cv gave no split: an iterator already consumed (a generator can be "
            "used once), or an empty list. Pass a fresh iterable, an int or a "
            "KFold."
        )
    in_test = np.zeros(n_samples, dtype=np.int64)
    in_train = np.zeros(n_samples, dtype=np.int64)
    for train, test in splits:
        for indices in (train, test):
            if indices.size and (
                indices.min() < 0 or indices.max() >= n_samples
                or np.unique(indices).size != indices.size
            ):
                raise ValueError(
                    "cv gives a split whose indices repeat a row or fall outside "
                    f"0..{n_samples - 1}: each split must name distinct rows (a "
                    "row repeated in a training fold weighs twice in its fit)."
                )
        if np.intersect1d(train, test).size:
            raise ValueError(
                "cv gives a split whose training and validation rows overlap."
            )
        if not train.size or not test.size:
            raise ValueError("cv gives a split with no training or validation row.")
        np.add.at(in_test, test, 1)
        np.add.at(in_train, train, 1)
    if not np.all(in_test == 1):
        raise ValueError(
            "cv must put every row in exactly one validation fold (K-fold): the "
            "score matrix's sensitivity rests on it. Some rows are in "
            f"{int(in_test.min())} and some in {int(in_test.max())} validation "
            "folds (ShuffleSplit and repeated splitters do this)."
        )
    return max(int(in_train.max()), 1)


def _resolve_cv(cv, n_samples):
    """The public splits as index arrays: from an int, a KFold, or an
    iterable of (train, test) pairs of indices or boolean masks."""
    if isinstance(cv, Integral):
        cv = KFold(n_splits=int(cv))
    if isinstance(cv, KFold):
        return list(cv.split(np.zeros((n_samples, 1))))
    if hasattr(cv, "split"):
        raise ValueError(
            f"cv={type(cv).__name__} is not supported: use an int, a KFold or an "
            "iterable of (train, test) pairs. The folds must be chosen without "
            "the data (StratifiedKFold and GroupKFold read y or groups) and put "
            "every row in exactly one validation fold (ShuffleSplit does not)."
        )
    splits = []
    for pair in cv:
        parts = [np.asarray(part) for part in pair]
        for part in parts:
            if part.dtype == bool and part.shape != (n_samples,):
                raise ValueError(
                    f"cv gives a boolean mask of shape {part.shape} for "
                    f"{n_samples} rows."
                )
        splits.append(tuple(
            np.flatnonzero(part) if part.dtype == bool else part.astype(np.intp)
            for part in parts
        ))
    return splits


# --------------------------------------------------------------------------
# The search
# --------------------------------------------------------------------------
def _refitted_has(*attrs):
    """``available_if`` check: the refitted estimator (or, before ``fit``,
    the estimator) has one of ``attrs``, and the search refits."""

    def check(self):
        if not self.refit:
            raise AttributeError(
                f"This {type(self).__name__} was initialised with refit=False: "
                f"{attrs[0]} is available only after refitting on the best "
                "parameters. Set refit=True (or a callable) to use it."
            )
        inner = getattr(self, "best_estimator_", self.estimator)
        if not any(hasattr(inner, attr) for attr in attrs):
            getattr(inner, attrs[0])  # its AttributeError
        return True

    return check


class PrivateGridSearchCV(MetaEstimatorMixin, BaseEstimator):
    r"""Grid search over a private estimator whose choice is private too.

    The :class:`~sklearn.model_selection.GridSearchCV` surface for a private
    estimator of this package, or a Pipeline holding one beside stateless
    steps. ``GridSearchCV`` scores the candidates on the validation rows
    without noise, so its ``best_params_`` is a noiseless function of the
    data; here the candidate fits, the per-fold scores, the choice of the
    best candidate and its refit are all private. The whole search is
    ``(epsilon, delta)``-differentially private under the replacement of one
    row, composed exactly and charged **once**, before the data is read.

    Candidate PCA estimators are scored by the captured variance of the
    validation rows, with a penalty for components that only capture the
    noise floor; candidates that end in a private head of
    :mod:`sklearn_dppca.linear_model` by a noisy accuracy, balanced
    accuracy, squared error or :math:`R^2`. :func:`plan_search` is the
    privacy analysis of a search: it clones and checks every candidate and
    fixes every budget from public values only.

    Read more in the :ref:`User Guide <model-selection>`; the proof for
    supervised candidates is in :ref:`privacy-supervised-search`.

    Parameters
    ----------
    estimator : estimator
        A :class:`~sklearn_dppca.PrivatePCA`,
        :class:`~sklearn_dppca.ComplexGaussPCA`,
        :class:`~sklearn_dppca.CoherentPowerPCA`, or a Pipeline with one of
        them (or with a step the grid fills with one) and otherwise only
        stateless steps (``FunctionTransformer``,
        :class:`~sklearn_dppca.preprocessing.PublicScaler`,
        ``SimpleImputer(strategy="constant", keep_empty_features=True)``,
        ``"passthrough"``, ``None``), recognised by their exact class: a
        subclass is refused (its ``fit`` may learn from the rows). A
        ``FunctionTransformer``'s ``func`` must be a fixed per-row function:
        it sees each row alone, with fixed ``kw_args``, and reads nothing
        else from the data (the search cannot check this; ``func`` and
        ``inverse_func`` are yours). Its ``data_norm`` must be a public
        number: it bounds the score. A
        :class:`~sklearn_dppca.preprocessing.PrivateStandardScaler` is
        refused before the charge (a release of its own, outside the plan).
        A private step with steps before it is fitted (on every fold
        and in the refit) with ``non_finite="clip"``, whatever it was given,
        and ``best_estimator_`` keeps it: a value those steps make NaN or
        infinite (``np.log`` of 0, a missing value no step fills) is mapped
        by :func:`numpy.nan_to_num` and clipped to ``data_norm`` like any
        row, in the fits and in the validation scores, never refused (a
        refusal would tell neighbouring datasets apart). A private estimator
        without such steps reads ``X`` itself: NaN in ``X`` is refused
        before the charge unless it has ``non_finite="clip"``. A private
        head of :mod:`sklearn_dppca.linear_model`, alone or last in such a
        Pipeline (with at most one of the estimators above before it), is
        searched on the labels ``y`` (:ref:`privacy-supervised-search`).
    param_grid : dict or list of dicts
        As for ``GridSearchCV``; values may be estimators (cloned). The
        grid may not set ``epsilon``, ``delta``, ``accountant`` or
        ``random_state``: the search sets them on every fit.
    scoring : {"captured_variance"} or None, default=None
        The bounded score; ``None`` means ``"captured_variance"``. Scores
        that are not bounded per row (``"r2"``, log-likelihoods, callables)
        and multi-metric scoring are refused: their sensitivity is unknown.
        With a private head last, the labels' scores, each bounded per row:
        ``"accuracy"`` (the default for a classifier) or
        ``"balanced_accuracy"``; ``"r2"`` (the default for a regressor) or
        ``"neg_mean_squared_error"``.
    cv : int, KFold or iterable of (train, test), default=5
        Folds chosen without the data whose validation parts partition the
        rows; the pairs may be indices or boolean masks. An int means
        ``KFold(cv)``.
    epsilon : float, default=1.0
        Privacy parameter :math:`\varepsilon > 0` of the whole search.
    delta : float, default=1e-6
        Privacy parameter :math:`\delta` in (0, 1) of the whole search.
    refit : bool, "captured_variance" or callable, default=True
        Refit the chosen candidate on all rows (with its share). A callable
        takes ``cv_results_`` and returns the index of the candidate to
        refit (post-processing of released values); ``best_score_`` is then
        not set.
    fit_weights : None, sequence of float or callable, default=None
        Relative weight :math:`\omega \in (0, 1]` of each candidate's
        release in the fits' share: one value per grid point
        (ParameterGrid's order) or a function of a candidate's params.
        ``None`` weighs all releases equally.
    error_score : "raise" or float, default=np.nan
        Score of a candidate that cannot be fitted for a public reason (an
        invalid parameter, ``n_components`` above the features or the
        smallest training fold); a :class:`~sklearn.exceptions.FitFailedWarning`
        names it, before any budget is spent, and it gets no budget.
        ``"raise"`` raises instead. A failure that depends on the data
        always raises.
    return_train_score : False, default=False
        Train scores are not released (refused): they would need a share of
        their own, with :math:`K - 1` times the sensitivity (:math:`K`
        folds).
    verbose : int, default=0
        Print the plan (public values only; no score, no timing).
    accountant : BudgetAccountant or None, default=None
        Charged once with the whole search; ``None`` charges the default.
        Shared, not copied, by :func:`~sklearn.base.clone`.
    random_state : None, int, RandomState or Generator, default=None
        Source of all noise. Fixing it makes the search not private (a
        :class:`~sklearn_dppca.PrivacyLeakWarning` says so).
    n_jobs : int or None, default=None
        Folds fitted in parallel threads.

    Attributes
    ----------
    cv_results_ : dict of ndarrays
        ``params``, ``param_<name>`` (masked arrays), ``split<i>_test_score``,
        ``mean_test_score``, ``std_test_score`` and ``rank_test_score`` as in
        ``GridSearchCV`` (floor-penalised captured variance per validation
        row, from the released fold scores); ``released_test_score`` (the
        noisy summed captured variance), ``floor_penalty``,
        ``mean_n_components`` and ``floor_per_component``
        (:math:`\sum_f n_f \tau_f`).
        All released values; no exact score and no timing (they depend on
        the data). A failed candidate's scores are ``error_score``.
    best_index_ : int
    best_params_ : dict
    best_score_ : float
        ``mean_test_score`` of the best candidate (not with a callable
        ``refit``).
    best_estimator_ : estimator
        The chosen candidate refitted on all rows, with the refit's
        ``epsilon`` and the search's ``accountant`` (a later refit by you is
        charged).
    scorer_ : callable
        :func:`captured_variance_score`.
    multimetric_ : bool
        Always False.
    n_splits_ : int
    selection_sigma_ : float
        Standard deviation of the noise on each released fold score.
    fit_epsilons_ : list of float, or of dict
        ``epsilon`` each release group was fitted with, per fold; for a
        supervised search, per group a dict of each private step's
        ``epsilon`` by its parameter prefix.
    privacy_spent_ : tuple of float
        ``(epsilon, delta)`` of the whole search, from its composed
        :math:`\mu`.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has string column names.

    Notes
    -----
    The budget is split in fractions of :math:`\mu^{*2}`, :math:`\mu^*` =
    ``gdp_mu(epsilon, delta)`` (:data:`SEARCH_BUDGET_SHARES`): 0.45 for the
    candidate fits, 0.1 for the score matrix and 0.45 for the refit
    (without a refit, 9/11 and 2/11). PrivatePCA candidates that differ
    only in ``n_components`` or ``whiten`` share one release per fold; every
    other candidate is a release of its own, weighted by ``fit_weights``.

    The score of a candidate on a fold is the captured variance of the
    fold's validation rows under the candidate's projection :math:`P`,
    :math:`\sum_i \lVert P \operatorname{clip}_C(x_i - \hat m) \rVert^2`,
    each term in :math:`[0, C^2]` (:math:`\hat m` the candidate's private
    mean, :math:`C` its ``data_norm``), summed per fold and released with
    Gaussian noise of standard deviation
    :math:`\sqrt{\sum_c C_c^4} / \mu_{\mathrm{sel}}`. ``mean_test_score``
    is the floor-penalised score per validation row
    (:func:`floor_penalised_scores`), which does not reward components that
    only capture the noise floor; the best candidate maximises it. The
    derivation is in :doc:`/model_selection`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca import BudgetAccountant, PrivatePCA
    >>> from sklearn_dppca.model_selection import PrivateGridSearchCV
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(20_000, 8)) * [0.4, 0.3, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]
    >>> X /= np.linalg.norm(X, axis=1).max()
    >>> budget = BudgetAccountant(epsilon=3.0)
    >>> search = PrivateGridSearchCV(PrivatePCA(data_norm=1.0),
    ...                              {"n_components": [1, 2, 3, 4]},
    ...                              epsilon=3.0, accountant=budget).fit(X)
    >>> search.best_params_["n_components"]  # doctest: +SKIP
    2
    >>> search.best_params_["n_components"] in (2, 3)  # 2 planted; 3 ~1 in 20
    True
    >>> budget.n_charges, round(budget.spent[0], 6)
    (1, 3.0)
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit"])],
        "param_grid": [dict, list],
        "scoring": [str, callable, list, tuple, dict, None],
        "cv": ["cv_object"],
        "epsilon": [Interval(Real, 0, math.inf, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "refit": ["boolean", str, callable],
        "fit_weights": ["array-like", callable, None],
        "error_score": [StrOptions({"raise"}), Real],
        "return_train_score": ["boolean"],
        "verbose": ["verbose"],
        "accountant": [BudgetAccountant, None],
        "random_state": ["random_state", np.random.Generator],
        "n_jobs": [Integral, None],
    }

    def __init__(self, estimator, param_grid, *, scoring=None, cv=5, epsilon=1.0,
                 delta=1e-6, refit=True, fit_weights=None, error_score=np.nan,
                 return_train_score=False, verbose=0, accountant=None,
                 random_state=None, n_jobs=None):
        self.estimator = estimator
        self.param_grid = param_grid
        self.scoring = scoring
        self.cv = cv
        self.epsilon = epsilon
        self.delta = delta
        self.refit = refit
        self.fit_weights = fit_weights
        self.error_score = error_score
        self.return_train_score = return_train_score
        self.verbose = verbose
        self.accountant = accountant
        self.random_state = random_state
        self.n_jobs = n_jobs

    def __getstate__(self):
        # With accountant=None, a limited default travels to worker processes
        # (cross_val_score or joblib.Parallel with n_jobs > 1), as the
        # estimators' does.
        return _carry_default(self, super().__getstate__())

    def __sklearn_clone__(self):
        return _keep_carried_default(self, super().__sklearn_clone__())

    def _check_settings(self, supervised=False):
        """Refuse, before anything is read, what privacy forbids."""
        if self.return_train_score:
            raise ValueError(
                "return_train_score=True is not supported: train scores are not "
                "released. A row is in K − 1 training folds, so they would need "
                "a share of the budget of their own at K − 1 times the "
                "validation scores' sensitivity, for a number that only "
                "measures overfitting."
            )
        if supervised:
            if isinstance(self.refit, str) and self.refit not in _supervised.SCORERS:
                raise ValueError(f"refit={self.refit!r} names no scorer of this "
                                 "search: use True, False, its scoring or a callable.")
            return
        if self.scoring not in (None, SCORER_NAME):
            raise ValueError(
                f"scoring={self.scoring!r} is not supported: a private selection "
                "needs a score whose per-row contribution is bounded, so that "
                "the released scores have a known sensitivity. Use "
                f"scoring={SCORER_NAME!r} (each validation row adds "
                "‖P clip_C(x − m̂)‖² ∈ [0, C²]). Unbounded scores (r2, squared "
                "errors, log-likelihoods), callables and multi-metric scoring "
                "are refused."
            )
        if isinstance(self.refit, str) and self.refit != SCORER_NAME:
            raise ValueError(
                f"refit={self.refit!r} names no scorer of this search: use "
                f"True, False, {SCORER_NAME!r} or a callable on cv_results_."
            )

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=False)
    @_all_or_nothing  # a failing search leaves the object as it was
    def fit(self, X, y=None):
        """Run the private search on ``X`` (and ``y`` for the pipeline).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            One row per person. Never modified.
        y : array-like of shape (n_samples,), default=None
            Passed to the estimator's fit.

        Returns
        -------
        self : object
        """
        supervised = _supervised.is_supervised(self.estimator, self.param_grid)
        self._check_settings(supervised)
        n_samples, n_features = _shape(X)
        splits = _resolve_cv(self.cv, n_samples)
        if supervised:
            return self._fit_supervised(X, y, splits, n_samples, n_features)
        plan = plan_search(self.estimator, self.param_grid, epsilon=self.epsilon,
                           delta=self.delta, splits=splits, n_samples=n_samples,
                           n_features=n_features,
                           refit=bool(self.refit), fit_weights=self.fit_weights)
        failed = [c for c in plan.candidates if c.error is not None]
        if failed and self.error_score == "raise":
            raise failed[0].error
        accountant = _resolve_accountant(self)
        accountant.check(plan.mu)  # refused before the data is read
        checked = self._validate_rows(X)
        # a DataFrame goes to the fits as it is, so that the refitted
        # estimator knows its feature names, as in GridSearchCV
        X = X if hasattr(X, "iloc") else checked
        if y is not None:
            check_consistent_length(X, y)
            # as it is where it can be indexed (a Series, an Array API array
            # on its device): the private estimators ignore y
            if not (hasattr(y, "iloc") or hasattr(y, "__array_namespace__")
                    or isinstance(y, np.ndarray)):
                y = np.asarray(y)
        _check_raw_rows(plan, X)
        if failed:
            warnings.warn(
                f"{len(failed)} of the {len(plan.candidates)} candidates cannot "
                f"be fitted; their scores are set to {self.error_score!r} and "
                "they get no budget (a public reason, found before any budget "
                "was spent):\n"
                + "\n".join(f"{c.params}: {c.error!r}" for c in failed),
                FitFailedWarning,
            )
        if self.verbose > 0:
            print(f"Fitting {len(splits)} folds for each of {len(plan.candidates)} "
                  f"candidates, totalling {len(splits) * len(plan.candidates)} "
                  f"fits: {len(plan.groups)} private release(s) per fold at "
                  f"epsilon={[round(e, 6) for e in plan.fit_epsilons]}, fold "
                  f"scores with noise sigma={plan.selection_sigma:.6g}, refit at "
                  f"epsilon={plan.refit_epsilon}.")
        accountant.spend(plan.mu)  # the whole search, once
        if self.random_state is not None:
            _warn_leak(
                f"random_state={self.random_state!r} fixes the noise of the whole "
                "search: it is not private. Leave random_state=None."
            )
        rng = make_generator(self.random_state)
        seeds = [rng.spawn(len(plan.groups)) for _ in splits]
        with private_computation():  # a warning here would depend on the rows
            # After the charge: whatever the heads do on the rows (a user's
            # function that fails on some value) is counted, not a refusal.
            _check_heads(plan, X, min(len(train) for train, _ in splits))
            folds = Parallel(n_jobs=self.n_jobs, backend="threading")(
                delayed(_score_fold)(X, y, train, test, plan, self.delta, seeds[f])
                for f, (train, test) in enumerate(splits)
            )
            exact = np.stack([fold[0] for fold in folds], axis=1)
            released = exact + dense_noise(rng, exact.shape, plan.selection_sigma)
            del exact  # never stored: only the noisy scores leave
            state = self._select(plan, released, folds, splits)
            if self.refit:
                cand = plan.candidates[state["best_index_"]]
                best = _fit_candidate(cand, plan.refit_epsilon, self.delta,
                                      rng.spawn(1)[0], X, y)
                # Later refits by the user charge the search's accountant, with
                # the candidate's own randomness.
                own = _locate_private_step(cand.estimator)[2].random_state
                best.set_params(**{cand.prefix + "accountant": self.accountant,
                                   cand.prefix + "random_state": own})
                state["best_estimator_"] = best
        if self.verbose > 0 and self.refit:
            print(f"Refitted candidate {state['best_index_']}: "
                  f"{state['best_params_']}.")
        vars(self).update(state)
        self.scorer_ = captured_variance_score
        self.multimetric_ = False
        self.n_splits_ = len(splits)
        self.selection_sigma_ = plan.selection_sigma
        self.fit_epsilons_ = plan.fit_epsilons
        self.privacy_spent_ = reported_spend(plan.spent, self.epsilon)
        return self

    def _fit_supervised(self, X, y, splits, n_samples, n_features):
        """The search over supervised candidates (every fitted step private;
        :mod:`sklearn_dppca._supervised_search`)."""
        plan = _supervised.plan_supervised_search(
            self.estimator, self.param_grid, epsilon=self.epsilon, delta=self.delta,
            splits=splits, n_samples=n_samples, n_features=n_features,
            scoring=self.scoring, refit=bool(self.refit), fit_weights=self.fit_weights)
        failed = [c for c in plan.candidates if c.error is not None]
        if failed and self.error_score == "raise":
            raise failed[0].error
        accountant = _resolve_accountant(self)
        accountant.check(plan.mu)  # refused before the data is read
        checked = self._validate_rows(X)
        X = X if hasattr(X, "iloc") else checked
        y = _supervised.check_labels(plan, y, n_samples)
        reads_x = [c for c in plan.candidates
                   if c.error is None and not isinstance(c.estimator, Pipeline)
                   or c.error is None and c.estimator.steps[0][1] is c.private[0][1]]
        if reads_x and not _all_finite(X):
            raise ValueError(
                "Input X contains NaN: the private steps need finite rows. Fill "
                "missing values with a public constant in the Pipeline. The "
                "search was refused before it spent any budget.")
        if failed:
            warnings.warn(
                f"{len(failed)} of the {len(plan.candidates)} candidates cannot "
                f"be fitted; their scores are set to {self.error_score!r} and "
                "they get no budget:\n"
                + "\n".join(f"{c.params}: {c.error!r}" for c in failed),
                FitFailedWarning)
        if self.verbose > 0:
            print(f"Fitting {len(splits)} folds for each of {len(plan.candidates)} "
                  f"candidates: scoring={plan.scoring!r} released with noise "
                  f"sigma={plan.selection_sigma:.6g}.")
        accountant.spend(plan.mu)  # the whole search, once
        if self.random_state is not None:
            _warn_leak(
                f"random_state={self.random_state!r} fixes the noise of the whole "
                "search: it is not private. Leave random_state=None."
            )
        rng = make_generator(self.random_state)
        vars(self).update(_supervised.run(self, plan, X, y, splits, rng))
        self.multimetric_ = False
        self.n_splits_ = len(splits)
        self.selection_sigma_ = plan.selection_sigma
        self.privacy_spent_ = reported_spend(plan.spent, self.epsilon)
        return self

    def _validate_rows(self, X):
        """``X`` checked (numeric, at least 2 rows, no infinity); an Array API
        array stays in its namespace and on its device. Missing values (NaN)
        pass here for a Pipeline's public fill or a step's ``non_finite=
        "clip"`` (:func:`_check_raw_rows` then refuses, before the charge, any
        a bare step with ``non_finite="raise"`` would read)."""
        namespace = _array_api.namespace(X)
        if namespace is not None:
            return validate_data(self, X, ensure_min_samples=2,
                                 dtype=_array_api.float_dtypes(*namespace),
                                 ensure_all_finite="allow-nan")
        return validate_data(self, X, accept_sparse=("csr", "csc"),
                             dtype=[np.float64, np.float32], ensure_min_samples=2,
                             ensure_all_finite="allow-nan")

    def _select(self, plan, released, folds, splits):
        """The fitted attributes of the choice: post-processing of the noisy
        fold scores and of the released spectra only."""
        k = np.stack([fold[1] for fold in folds], axis=1)
        floors = np.stack([fold[2] for fold in folds], axis=1)
        # One floor per fold, the median over the candidates' released
        # floors: candidates of equal k then pay equal penalties.
        floor = np.nanmedian(floors, axis=0)
        n_val = np.array([len(test) for _, test in splits])
        scores, penalty = floor_penalised_scores(released, k, n_val, floor,
                                                 plan.selection_sigma)
        failed = [c.error is not None for c in plan.candidates]
        scores[failed] = self.error_score
        results = _results(plan.candidates, scores, released.sum(axis=1), penalty,
                           k.mean(axis=1), (n_val * floor).sum())
        best = _best_index(self.refit, results, len(plan.candidates))
        state = {"cv_results_": results, "best_index_": int(best),
                 "best_params_": plan.candidates[best].params}
        if not callable(self.refit):
            state["best_score_"] = float(results["mean_test_score"][best])
        if self.refit and plan.candidates[best].error is not None:
            raise ValueError(
                f"The candidate to refit, {plan.candidates[best].params}, cannot "
                f"be fitted: {plan.candidates[best].error!r}."
            )
        return state

    # ----------------------------------------------------------- delegation
    @available_if(_refitted_has("transform"))
    def transform(self, X):
        """``best_estimator_.transform(X)``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.transform(X)

    @available_if(_refitted_has("inverse_transform"))
    def inverse_transform(self, X):
        """``best_estimator_.inverse_transform(X)``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.inverse_transform(X)

    @available_if(_refitted_has("transform"))
    def fit_transform(self, X, y=None):
        """``fit(X, y)``, then ``transform(X)`` with the refitted estimator."""
        return self.fit(X, y).transform(X)

    @available_if(_refitted_has("transform", "predict"))
    def score(self, X, y=None):
        """``scorer_(best_estimator_, X, y)``: the mean captured variance of
        the rows of ``X``, or the supervised search's score (your own rows,
        read exactly)."""
        check_is_fitted(self, "best_estimator_")
        if not hasattr(self.best_estimator_, "transform"):
            return self.scorer_(self.best_estimator_, X, y)
        X = validate_data(self, X, reset=False, accept_sparse=("csr", "csc"),
                          dtype=None, ensure_all_finite=False)
        return self.scorer_(self.best_estimator_, X, y)

    @available_if(_refitted_has("predict"))
    def predict(self, X):
        """``best_estimator_.predict(X)``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict(X)

    @available_if(_refitted_has("predict_proba"))
    def predict_proba(self, X):
        """``best_estimator_.predict_proba(X)``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict_proba(X)

    @available_if(_refitted_has("decision_function"))
    def decision_function(self, X):
        """``best_estimator_.decision_function(X)``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.decision_function(X)

    @property
    def classes_(self):
        """``best_estimator_.classes_``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.classes_

    @available_if(_refitted_has("score_samples"))
    def score_samples(self, X):
        """``best_estimator_.score_samples(X)``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.score_samples(X)

    @available_if(_refitted_has("get_feature_names_out"))
    def get_feature_names_out(self, input_features=None):
        """``best_estimator_.get_feature_names_out(input_features)``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.get_feature_names_out(input_features)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = get_tags(self.estimator)
        tags.transformer_tags = inner.transformer_tags
        tags.input_tags.sparse = inner.input_tags.sparse
        tags.array_api_support = inner.array_api_support
        return tags

    def _sk_visual_block_(self):
        name = "best_estimator_" if hasattr(self, "best_estimator_") else "estimator"
        shown = getattr(self, name)
        return _VisualBlock("parallel", [shown],
                            names=[f"{name}: {type(shown).__name__}"],
                            name_details=[str(shown)])


# --------------------------------------------------------------------------
# Executing the plan
# --------------------------------------------------------------------------
def _headed(candidate):
    """Whether the candidate's private step has Pipeline steps before it.

    Such a step is fitted with ``non_finite="clip"``, whatever it was given:
    its input is the head's output, which a public per-row step (``np.log``
    of 0, a missing value no step fills) can make non-finite for one row of
    a neighbour and not the other. Refusing there would tell the two apart;
    the fixed map of each value (``numpy.nan_to_num``) followed by the usual
    clipping keeps every sensitivity (docs/privacy.rst, "Over which domain
    the guarantee holds")."""
    return bool(candidate.index)


def _check_raw_rows(plan, X):
    """Refuse, before the charge, NaN in ``X`` that a bare private step with
    ``non_finite="raise"`` would read: outside its domain (a dataset with
    NaN is no neighbour of the datasets the guarantee is about), and its fit
    would fail on it after the charge. A candidate with steps before the
    private one maps non-finite values instead (:func:`_headed`)."""
    for cand in plan.candidates:
        if cand.error is None and not cand.index:  # the step reads X itself
            if _locate_private_step(cand.estimator)[2].non_finite == "clip":
                continue
            if not _all_finite(X):
                raise ValueError(
                    "Input X contains NaN: the private estimator needs finite "
                    "rows. Fill missing values with a public constant in the "
                    "Pipeline, before the private estimator: SimpleImputer("
                    "strategy='constant', fill_value=..., keep_empty_features="
                    "True). The search was refused before it spent any budget."
                )
            return


def _check_heads(plan, X, smallest_fold):
    """Refuse ranks above the features a candidate's head (its stateless
    steps before the private one) makes, before any fit. Run after the
    charge, inside the search's private computation: the heads read the
    rows, so whatever they raise is a failure of a charged search, never a
    refusal that spends nothing. Non-finite values they make are not
    refused: the step maps them (:func:`_headed`)."""
    checked = {}
    for cand in plan.candidates:
        if cand.error is not None or not cand.index:
            continue
        head = clone(Pipeline(cand.estimator.steps[:cand.index]))
        key = _value_key(head)  # by value: repr abbreviates large arrays
        if key not in checked:
            checked[key] = head.fit_transform(X).shape[1]
        step = _locate_private_step(cand.estimator)[2]
        step._check_n_components(smallest_fold, checked[key])


def _fit_candidate(candidate, epsilon, delta, generator, X, y, full=False):
    """The candidate fitted at ``epsilon`` on a throwaway accountant (the
    search has paid for it); ``full``: with every component, to be truncated.
    Its own ``privacy_spent_`` must be what was paid for. A private step with
    steps before it is fitted with ``non_finite="clip"`` (:func:`_headed`)."""
    p = candidate.prefix
    settings = {p + "epsilon": epsilon, p + "delta": delta,
                p + "accountant": BudgetAccountant(), p + "random_state": generator}
    if _headed(candidate):
        settings[p + "non_finite"] = "clip"
    if full:
        settings.update({p + "n_components": None, p + "whiten": False})
    fitted = clone(candidate.estimator).set_params(**settings).fit(X, y)
    spent = _locate_private_step(fitted)[2].privacy_spent_
    if not math.isclose(spent[0], epsilon, rel_tol=1e-6):
        raise RuntimeError(
            f"A candidate spent epsilon={spent[0]:.6g} where the search paid for "
            f"{epsilon:.6g}; its accounting does not fit the search."
        )
    return fitted


def _score_fold(X, y, train, test, plan, delta, seeds):
    """Exact summed scores, released ``n_components_`` and floors of one fold
    for every candidate (NaN for the failed ones). The scores stay inside
    ``fit``."""
    X_train, X_val = _take(X, train), _take(X, test)
    y_train = None if y is None else _safe_indexing(y, train)
    m = len(plan.candidates)
    scores, k, floor = np.full(m, np.nan), np.full(m, np.nan), np.full(m, np.nan)
    for g, members in enumerate(plan.groups):
        cand = plan.candidates[members[0]]
        shared = plan.shared[g]
        fitted = _fit_candidate(cand, plan.fit_epsilons[g], delta, seeds[g],
                                X_train, y_train, full=shared)
        step = _locate_private_step(fitted)[2]
        # the validation rows through the fit's own map of non-finite values
        rows = _host(_before_step(fitted, cand.prefix, X_val), step.non_finite)
        if not shared:
            (c,) = members
            k[c] = step.n_components_
            scores[c] = np.sum(captured_variance_rows(
                rows, _host(step.mean_), _host(step.components_), step.data_norm_))
            floor[c] = float(step.noise_variance_)
            continue
        # PrivatePCA(n_components=k) on the same noise keeps the first k of the
        # full fit's sorted eigenpairs: each candidate is a truncation.
        gains = _cumulative_gains(rows, step)
        for c in members:
            wanted = _locate_private_step(plan.candidates[c].estimator)[2].n_components
            k[c] = step.n_components_ if wanted is None else int(wanted)
            scores[c] = gains[int(k[c]) - 1]
            floor[c] = float(np.median(_host(step.explained_variance_)))
    return scores, k, floor


def _cumulative_gains(rows, step):
    """Summed captured variance of the rows under the first ``k`` released
    components of a full fit, for every ``k``: entry ``k − 1`` is the score
    of the truncation to ``k`` components. The components are orthonormal
    eigenvectors, so each row's partial sums are at most ``‖y‖² ≤ C²``; the
    clip makes the bound exact in floating point."""
    C = step.data_norm_
    projected = clip_rows(rows, C, _host(step.mean_)) @ _host(step.components_).T
    return np.clip(np.cumsum(projected**2, axis=1), 0.0, C**2).sum(axis=0)


def _before_step(fitted, prefix, X):
    """Rows as the private step sees them: through the (stateless) steps
    before it."""
    if not prefix:
        return X
    for name, step in fitted.steps:
        if name == prefix[:-2]:
            return X
        if step is not None and step != "passthrough":
            X = step.transform(X)
    return X


def _shape(X):
    """``(n_samples, n_features)``, public, without reading the values."""
    shape = getattr(X, "shape", None)
    shape = tuple(np.asarray(X).shape if shape is None else shape)
    if len(shape) != 2:
        raise ValueError(
            f"Expected a 2D array of shape (n_samples, n_features), got shape "
            f"{shape}."
        )
    for size, what, least in ((shape[0], "sample", 2), (shape[1], "feature", 1)):
        if size < least:
            raise ValueError(f"Found array with {size} {what}(s) (shape={shape}) "
                             f"while a minimum of {least} is required.")
    return int(shape[0]), int(shape[1])


def _take(X, indices):
    namespace = _array_api.namespace(X)
    if namespace is None:
        return _safe_indexing(X, indices)
    xp, device = namespace
    return xp.take(X, xp.asarray(indices, device=device), axis=0)


def _all_finite(Z):
    """Whether every entry of ``Z`` (sparse, Array API or NumPy) is finite."""
    values = Z.data if hasattr(Z, "tocsr") else _host(Z)
    return bool(np.all(np.isfinite(values)))


def _host(values, non_finite="raise"):
    """A NumPy float64 array of ``values`` (sparse, Array API or NumPy); with
    ``non_finite="clip"``, mapped first as a private step with that setting
    maps its input (:func:`~sklearn_dppca._base.map_non_finite`, in the
    dtype the step computes in: float32 stays float32, others float64)."""
    if non_finite == "clip":
        values = _as_fit_input(values)
        values = map_non_finite(values)
    if hasattr(values, "toarray"):
        values = values.toarray()
    if _array_api.namespace(values) is not None:
        values = _array_api.to_host(values)
    return np.asarray(values, dtype=np.float64)


def _as_fit_input(values):
    """``values`` as a private step validates them before its map: float32
    or float64 (others become float64), NumPy unless sparse or Array API."""
    namespace = _array_api.namespace(values)
    if namespace is not None:
        if _array_api.numpy_dtype(values) not in (np.float32, np.float64):
            widest = _array_api.widest_float(*namespace).name
            values = _array_api.astype(values, getattr(namespace[0], widest))
        return values
    if not hasattr(values, "tocsr"):
        values = np.asarray(values)
    if values.dtype not in (np.float32, np.float64):
        values = values.astype(np.float64)
    return values


def _param_column(candidates, name):
    """``param_<name>``: a masked array of the values' natural dtype when
    they are all numbers or all booleans (else object), masked where a
    candidate lacks ``name``."""
    present = [c.params[name] for c in candidates if name in c.params]
    natural = all(isinstance(v, bool) for v in present) or all(
        isinstance(v, Real) and not isinstance(v, bool) for v in present
    )  # strings stay objects, as in GridSearchCV
    values = [c.params.get(name, present[0]) for c in candidates]
    if natural:
        data = np.asarray(values)
    else:
        data = np.empty(len(values), dtype=object)
        data[:] = values
    return np.ma.MaskedArray(data, mask=[name not in c.params for c in candidates])


def _results(candidates, scores, released, penalty, mean_k, floor_sum):
    """``cv_results_`` from released values only."""
    results = _ranked_results(candidates, scores)
    results["released_test_score"] = released
    results["floor_penalty"] = penalty
    results["mean_n_components"] = mean_k
    results["floor_per_component"] = np.full(len(candidates), floor_sum)
    return results


def _best_index(refit, results, n_candidates):
    """The chosen candidate: the best rank, or a callable ``refit``'s pick
    from ``cv_results_`` (post-processing of released values), checked."""
    if not callable(refit):
        return int(np.argmin(results["rank_test_score"]))
    best = refit(results)
    if not isinstance(best, Integral):
        raise TypeError(f"best_index_ returned is not an integer: {best!r}.")
    if not 0 <= best < n_candidates:
        raise IndexError(f"best_index_ index out of bounds: {best} for "
                         f"{n_candidates} candidates.")
    return int(best)


def _ranked_results(candidates, scores):
    """``GridSearchCV``'s ``cv_results_`` keys from released fold scores:
    ``params``, ``param_<name>``, ``split<i>_test_score``, their mean,
    standard deviation and rank."""
    results = {"params": [c.params for c in candidates]}
    for name in sorted({p for c in candidates for p in c.params}):
        results[f"param_{name}"] = _param_column(candidates, name)
    for f in range(scores.shape[1]):
        results[f"split{f}_test_score"] = scores[:, f]
    means = scores.mean(axis=1)
    results["mean_test_score"] = means
    results["std_test_score"] = scores.std(axis=1)
    if np.all(np.isnan(means)):
        rank = np.ones(len(means))
    else:  # NaN ranks last, as in GridSearchCV
        rank = rankdata(-np.nan_to_num(means, nan=np.nanmin(means) - 1), "min")
    results["rank_test_score"] = rank.astype(np.int32)
    return results


# --------------------------------------------------------------------------
# Cross-validation without a search
# --------------------------------------------------------------------------
def private_cross_validate(estimator, X, y=None, *, groups=None, scoring=None,
                           cv=5, n_jobs=None, verbose=0, params=None,
                           pre_dispatch="2*n_jobs", return_train_score=False,
                           return_estimator=False, return_indices=False,
                           error_score=np.nan, epsilon=1.0, delta=1e-6,
                           accountant=None, random_state=None):
    """:func:`~sklearn.model_selection.cross_validate` with private scores.

    scikit-learn's ``cross_validate`` returns each fold's exact validation
    score: a release of the validation rows without noise. This is the same
    call, plus the budget, and every fold fit and every score is private:
    it runs a :class:`PrivateGridSearchCV` of the one candidate
    ``estimator`` without a refit, so the fold fits and the noisy fold
    scores compose exactly to ``(epsilon, delta)``, charged once. The
    scores are the search's bounded ones: the captured variance of a
    private transformer, or the accuracy, balanced accuracy, negative mean
    squared error or R² of a pipeline ending in a private head
    (``scoring``).

    Parameters
    ----------
    estimator : estimator
        As :class:`PrivateGridSearchCV` accepts it.
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
    y : array-like of shape (n_samples,), default=None
        Labels, for a supervised pipeline.
    groups : None
        Refused unless None: folds are chosen without the data (give ``cv``
        as public index pairs instead).
    scoring : str or None, default=None
        A bounded score of the search; ``None``: its default.
    cv : int, KFold or iterable of (train, test), default=5
    n_jobs : int or None, default=None
        Folds fitted in parallel threads.
    verbose : int, default=0
    params : None
        Refused unless None (fit parameters: ``sample_weight`` would change
        the sensitivity).
    pre_dispatch : ignored
    return_train_score : False
        Refused: train scores are not released.
    return_estimator : False
        Refused: the fold models are fitted inside the search and not kept
        (fit the estimator on all rows for a model).
    return_indices : bool, default=False
        Return the folds' indices (public).
    error_score : "raise" or float, default=np.nan
    epsilon, delta : float
        The budget of the whole cross-validation.
    accountant : BudgetAccountant or None, default=None
        Charged once; ``None``: the default accountant.
    random_state : None, int, RandomState or Generator, default=None
        Source of the noise; a fixed seed is not private.

    Returns
    -------
    scores : dict
        ``test_score`` (the released score of each fold), ``privacy_spent``
        and, with ``return_indices``, ``indices`` (``{"train": [...],
        "test": [...]}``). There is no ``fit_time`` or ``score_time``: how
        long a fit takes depends on the data and is not released.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn_dppca import BudgetAccountant, PrivatePCA
    >>> from sklearn_dppca.linear_model import PrivateLDA
    >>> from sklearn_dppca.model_selection import private_cross_validate
    >>> rng = np.random.default_rng(0)
    >>> y = rng.integers(0, 2, 20_000)
    >>> X = rng.normal(size=(20_000, 4)) * 0.3 + y[:, None] * [0.6, 0, 0, 0]
    >>> pipe = make_pipeline(PrivatePCA(2, data_norm=2.0),
    ...                      PrivateLDA([0, 1], data_norm=2.0))
    >>> result = private_cross_validate(pipe, X, y, cv=3, epsilon=3.0,
    ...                                 accountant=BudgetAccountant())
    >>> bool(np.all(result["test_score"] > 0.7))
    True
    """
    if groups is not None:
        raise ValueError(
            "groups is not supported: the folds must be chosen without the "
            "data. Give cv as public (train, test) index pairs instead.")
    if params:
        raise TypeError(
            f"params={params!r} is not supported: fit parameters such as "
            "sample_weight change a row's contribution and so the sensitivity.")
    if return_estimator:
        raise ValueError(
            "return_estimator=True is not supported: the fold models are fitted "
            "inside the private cross-validation and not kept. Fit the "
            "estimator on all rows (its own charge) for a model.")
    search = PrivateGridSearchCV(
        estimator, {}, scoring=scoring, cv=cv, epsilon=epsilon, delta=delta,
        refit=False, error_score=error_score,
        return_train_score=return_train_score, verbose=verbose,
        accountant=accountant, random_state=random_state, n_jobs=n_jobs,
    ).fit(X, y)
    scores = np.array([search.cv_results_[f"split{f}_test_score"][0]
                       for f in range(search.n_splits_)])
    result = {"test_score": scores, "privacy_spent": search.privacy_spent_}
    if return_indices:
        splits = _resolve_cv(cv, _shape(X)[0])
        result["indices"] = {"train": [np.asarray(t) for t, _ in splits],
                             "test": [np.asarray(t) for _, t in splits]}
    return result


def private_cross_val_score(estimator, X, y=None, *, groups=None, scoring=None,
                            cv=5, n_jobs=None, verbose=0, params=None,
                            pre_dispatch="2*n_jobs", error_score=np.nan,
                            epsilon=1.0, delta=1e-6, accountant=None,
                            random_state=None):
    """:func:`~sklearn.model_selection.cross_val_score` with private scores:
    the ``test_score`` of :func:`private_cross_validate` (same parameters).

    Returns
    -------
    scores : ndarray of shape (n_splits,)
        The released score of each fold.
    """
    return private_cross_validate(
        estimator, X, y, groups=groups, scoring=scoring, cv=cv, n_jobs=n_jobs,
        verbose=verbose, params=params, pre_dispatch=pre_dispatch,
        error_score=error_score, epsilon=epsilon, delta=delta,
        accountant=accountant, random_state=random_state)["test_score"]
