r"""The plan of a private search: every candidate cloned and checked as it
will run, grouped by the releases it shares, and every :math:`\mu` and the
charge fixed, from the grid and public values only (:math:`n`, :math:`d`,
the folds), before the data is read (:func:`plan_search`). The execution is in
``_search_run``; the estimator in
``model_selection``.
"""

import math
import pickle
import sys
from numbers import Integral, Real
from typing import NamedTuple

import numpy as np
from sklearn.base import clone
from sklearn.impute import SimpleImputer
from sklearn.model_selection import KFold, ParameterGrid
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils._param_validation import InvalidParameterError

from ._base import _BasePrivatePCA
from ._bounds import check_data_norm_range
from ._box import check_box, dtype_box, public_box_norm
from ._coherent_power_pca import CoherentPowerPCA
from ._private_pca import PrivatePCA
from ._public_encoders import (
    is_public_column_transformer,
    is_public_onehot,
)
from ._public_text import (
    TEXT_OUTSIDE,
    is_public_text,
    learned_text,
    text_leak_advice,
)
from ._search_rows import (  # noqa: F401 - the searches' names, kept here
    _STATELESS_TYPES,
    _is_constant_fill,
    _is_passthrough,
    candidate_heads,
    empty_rows,
    head_output,
    head_width,
    input_kind,
    keeps_columns,
    no_columns,
    passed_names,
    refuse_polars_output,
    rows_kind,
    unmapped,
)
from ._warning_rules import _warn_leak
from .noise import noise_scale
from .preprocessing import PrivateStandardScaler
from .privacy import gdp_epsilon, gdp_mu

#: Fractions of ``μ*²`` of the search: the candidate fits on the training
#: folds, the released score matrix, and the refit on all rows. Without a
#: refit its share is dropped and the others rescaled to sum to 1.
SEARCH_BUDGET_SHARES = {"fits": 0.45, "selection": 0.1, "refit": 0.45}


#: Features from which a shared fold fit (``_search_run._fit_candidate``'s
#: ``full``) keeps only the group's largest ``n_components`` instead of every
#: component: a ``d × d`` matrix of 32 MiB or more, whose full
#: eigendecomposition (``d³``) and dense path a wide fit avoids (at ``d =
#: 2·10⁴`` a fold fit with every component took 12 GB and half an hour).
#: A public rule (``d``); the floor is then the fit's ``noise_variance_``.
SHARED_FULL_FEATURES = 2048

# Parameters of the private step that are post-processing of one release of
# PrivatePCA: candidates differing only in these share the fit of a fold.
_POST_PROCESSING = ("n_components", "whiten")
# Parameters the search sets itself on the private step of every fit.
_OWNED = ("epsilon", "delta", "accountant", "random_state")


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
    shared: list  # per group: True (truncations of a fit with every component),
    # "largest" (of a fit at its largest k: the width is not public), or False
    fit_mus: list  # per group: μ of each of its fits on a training fold
    fit_epsilons: list  # per group: that fit's ε at the search's δ
    selection_sigma: float  # σ of the noise on each released fold score
    refit_epsilon: object  # ε of the refit on all rows, or None
    mu: float  # μ* = gdp_mu(epsilon, delta), charged once
    spent: tuple  # (ε, δ) of the composed plan
    pooled: list = None  # per group: bytes each fold fit may keep (pooled_groups)
    folds_per_row: int = 1  # r: every row's training folds, for the pooled refit


def plan_search(estimator, param_grid, *, epsilon, delta, splits, n_samples,
                n_features, refit=True, fit_weights=None, rows=None, empty=None):
    r"""The privacy analysis of a search, from the grid and public values.

    Every candidate is ``clone(estimator).set_params(**clone(params))`` —
    estimator objects in the grid are cloned, never fitted in place — and is
    checked *as it will run*: it must hold exactly one private estimator of
    this package beside stateless steps only, with a public numeric
    ``data_norm`` and a mechanism accounted in Gaussian DP; the grid may not
    set ``epsilon``, ``delta``, ``accountant`` or ``random_state``. A
    candidate that cannot be fitted for a public reason (an invalid
    parameter value, ``n_components`` above the features or the smallest
    training fold, a path over its ``memory_limit``) is kept with its
    ``error`` and gets no budget.

    The budget :math:`\mu^*` is split in :data:`SEARCH_BUDGET_SHARES`
    (without a refit, its share is dropped and the others rescaled):

    - **fits**: group :math:`g` of weight :math:`\omega_g` fits on each
      training fold at
      :math:`\mu_g^2 = s_{\mathrm{fits}} \mu^{*2} \omega_g / (r \sum_h \omega_h)`,
      with :math:`r` the most training folds any row is in (:math:`K - 1` for
      K-fold);
    - **scores**: each fold's scores get Gaussian noise of
      :math:`\sigma = \sqrt{\sum_c C_c^4} / \mu_{\mathrm{sel}}` with
      :math:`\mu_{\mathrm{sel}}^2 = s_{\mathrm{sel}} \mu^{*2}` (a row is in
      one validation fold and moves candidate :math:`c`'s score by
      :math:`\le C_c^2`);
    - **refit**: :math:`\mu_{\mathrm{refit}}^2 = s_{\mathrm{refit}} \mu^{*2}`.

    They compose to
    :math:`r \sum_g \mu_g^2 + \mu_{\mathrm{sel}}^2 + \mu_{\mathrm{refit}}^2 =
    \mu^{*2}`: one charge.

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
        The weight :math:`\omega \in (0, 1]` of each candidate's group: one
        per grid point in ParameterGrid's order, or ``params -> weight``;
        ``None`` weighs every group 1. Candidates sharing a release must
        agree.
    rows : engine, default=None
        ``rows_kind(X, n_features)``, a stand-in of ``X``'s kind that holds no
        row: each candidate's path and memory are then planned on every size
        of fit the search runs, before the charge.
    empty : array-like, default=None
        ``empty_rows(X)``: each candidate's ``n_components`` is checked
        against the width its steps make of it (``head_width``).

    Returns
    -------
    plan : SearchPlan
    """
    folds_per_row = _check_splits(splits, n_samples)
    sizes = fit_sizes(splits, n_samples, refit)
    grid = list(ParameterGrid(param_grid))
    if not grid:
        raise ValueError("param_grid has no candidate.")
    candidates = [_candidate(estimator, params, n_features, sizes, rows, empty)
                  for params in grid]
    weights = _weights(fit_weights, grid)

    groups, folds = {}, fit_sizes(splits, n_samples, refit=False)
    for c, cand in enumerate(candidates):
        if cand.error is None:
            groups.setdefault(_release_key(cand, c, n_features, folds, rows),
                              []).append(c)
    if not groups:
        raise ValueError(
            f"All the {len(grid)} candidates fail for the reasons below, before "
            "any budget was spent:\n"
            + "\n".join(sorted({repr(c.error) for c in candidates}))
        )
    shares, mu_total, fit_mus = fit_budget(list(groups.values()), weights, refit,
                                           epsilon, delta, folds_per_row)
    fit_eps = [calibrated_epsilon(mu_g, delta, epsilon) for mu_g in fit_mus]
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
        shared=[{"shared": True, "largest": "largest"}.get(key[0], False)
                for key in groups],
        fit_mus=fit_mus,
        fit_epsilons=fit_eps,
        selection_sigma=selection_sigma,
        refit_epsilon=gdp_epsilon(mu_refit, delta, tidy=False) if refit else None,
        mu=mu_total,
        spent=(gdp_epsilon(composed, delta), delta),
        pooled=pooled_groups(
            [bool(refit) and type(_locate_private_step(
                candidates[members[0]].estimator)[2]) is PrivatePCA
             for members in groups.values()], splits),
        folds_per_row=folds_per_row,
    )


def fit_budget(groups, weights, refit, epsilon, delta, folds_per_row):
    r""":math:`(\mathtt{shares}, \mu^*, \mu_g)`: the search's shares of
    :math:`\mu^{*2}` (without a refit, its share dropped and the others
    rescaled to sum to 1), :math:`\mu^*` itself, and each group's
    :math:`\mu_g` on a training fold,
    :math:`\mu_g^2 = s_{\mathrm{fits}} \mu^{*2} \omega_g / (r \sum_h \omega_h)`
    with :math:`\omega_g` the weight its members must agree on."""
    group_weights = []
    for members in groups:
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
    mus = [math.sqrt(mu_fit_sq * w / sum(group_weights)) for w in group_weights]
    return shares, mu_total, mus


#: The most memory the fold fits' kept ``PrivatePCA`` releases may take
#: together (one d × d float64 matrix per fold and pooled group, d the width
#: the PCA sees, which a stateless step before it may change): each fit may
#: keep an equal share; a wider fit keeps none, and its group's refit makes
#: its release alone.
KEPT_MAX_BYTES = 2**29


def group_of(groups, candidate):
    """The index of the group (a list of candidate indices) holding
    ``candidate``."""
    return next(g for g, members in enumerate(groups) if candidate in members)


def pooled_groups(poolable, splits):
    """Per group, the bytes each of its fold fits may keep of its
    ``PrivatePCA`` release for the refit
    (:func:`~sklearn_dppca._private_pca.pooled_release`), 0 for none: an
    equal share of :data:`KEPT_MAX_BYTES` where ``poolable`` says so for
    the group and every row is in the same number of training folds. A fit
    whose release is larger keeps none (``PrivatePCA._release``; its width,
    after the steps before it, is known only then). Public values only."""
    n_samples = sum(len(test) for _, test in splits)  # they partition the rows
    counts = np.bincount(np.concatenate([train for train, _ in splits]),
                         minlength=n_samples)
    if not np.all(counts == counts[0]) or not any(poolable):
        return [0] * len(poolable)
    share = KEPT_MAX_BYTES // (sum(map(bool, poolable)) * len(splits))
    return [share if p else 0 for p in poolable]


def calibrated_epsilon(mu, delta, epsilon):
    r"""The :math:`\varepsilon` at which one fit at ``delta`` spends exactly
    ``mu``, or a ``ValueError`` (before any charge) where the search's
    ``epsilon`` is too small to calibrate it."""
    eps = gdp_epsilon(mu, delta, tidy=False)
    if not (eps > 0 and math.isclose(gdp_mu(eps, delta), mu, rel_tol=1e-9)):
        raise ValueError(
            f"The candidates' share of epsilon={epsilon} is too small to "
            "calibrate one fit; raise epsilon or shrink the grid."
        )
    return eps


def fit_sizes(splits, n_samples, refit):
    """The numbers of rows the search's fits read, smallest first: each
    training fold's, and all of them for a refit."""
    sizes = {len(train) for train, _ in splits}
    return sorted(sizes | {n_samples} if refit else sizes)


def refused_path(step, sizes, read, **overrides):
    """The error of a private PCA step's plan on each of the search's fit
    ``sizes``, or None: :meth:`~sklearn_dppca._base._BasePrivatePCA.
    _plan_path` on a clone (with the parameters ``overrides``), on ``read``
    = :func:`input_kind`. A path over
    ``memory_limit``, or a solver its path cannot use, is then a public
    failure of the candidate, found before the charge rather than by its
    first fold fit after it (None: what the step reads is not public, and
    its fits check it)."""
    if read is None:
        return None
    # the largest first: the need a refusal names is then the most any of
    # the fits needs (the refit's, which keeps more of the first rows), a
    # limit that admits them all (a fold's need admitted the folds only)
    for n_samples in sorted(sizes, reverse=True):
        try:
            clone(step).set_params(**overrides)._plan_path(n_samples, *read)
        except (ValueError, TypeError, MemoryError) as error:
            return error
    step = clone(step).set_params(**overrides)
    if (getattr(step, "bounds", None) is not None
            and getattr(read[1].X, "dtype", None) == np.float32):
        try:  # a box empty in float32 (review 89 F1); names: the fits check
            box = check_box(step.bounds, read[0], None)
        except ValueError:
            return None
        try:
            dtype_box(box, np.float32, getattr(step, "center", True))
        except ValueError as error:
            return error
    return None


def _candidate(estimator, params, n_features, sizes, rows=None, empty=None):
    """``Candidate`` for one grid point: refused (raise) if it cannot be made
    private, kept with ``error`` if it fails for a public reason (on
    :func:`input_kind`, its plan's too; on :func:`head_width`, its
    ``n_components``)."""
    _refuse_owned(params)
    est = clone(estimator).set_params(**clone(params, safe=False))
    prefix, index, step = _locate_private_step(est)
    if index is not None:
        for name, other in est.steps:
            if other is not step and not _is_stateless(other):
                raise ValueError(_refused_step(name, other))
    heads = [] if index is None else [other for _, other in est.steps[:index]]
    refuse_polars_output(heads)
    # what the steps before it make of X without rows, once: its width and
    # names (None where not public)
    width, names = (head_output(heads, n_features, empty) or (None, None)
                    if heads else (n_features, getattr(empty, "columns", None)))
    data_norm = _public_norm(step, n_features, heads,
                             None if names is None else list(names))
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
    empty_table = no_columns(width, step, params)
    if empty_table is not None:  # a public failure of every fit
        return Candidate(params, est, prefix, index, empty_table, data_norm)
    try:
        # the fits refuse a bound whose square under- or overflows, on any
        # data (float64's limits: the widest): a public failure
        check_data_norm_range(float(data_norm), np.dtype(np.float64))
        for other in (est.steps if index is not None else [("", est)]):
            if hasattr(other[1], "_validate_params"):
                other[1]._validate_params()
        # the features are public where the private step reads X's columns
        step._check_n_components(sizes[0], width or sizes[0],
                                 width_known=not index)
    except (InvalidParameterError, ValueError, TypeError) as error:
        return Candidate(params, est, prefix, index, error, data_norm)
    error = unmapped(heads, rows, step, empty) or refused_path(
        step, sizes, input_kind(heads, n_features, rows))
    return Candidate(params, est, prefix, index, error, data_norm)


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


def caching_params(estimator):
    """``estimator``'s ``memory`` parameters that are set, at any depth
    (a caching ``Pipeline``'s joblib cache). The searches fit with every one
    of them ``None``: a cache holds the rows' transforms and each fit's
    generator (its seed's entropy) on disk, and could never be hit, every
    fit drawing new noise; the fitted steps are then the ones the search
    set (a caching Pipeline would fit clones of them). The refitted
    ``best_estimator_`` gets them back for the user's own fits."""
    return {key: value for key, value in estimator.get_params(deep=True).items()
            if (key == "memory" or key.endswith("__memory")) and value is not None}


def _is_stateless(step, text=False):
    """A step whose fit learns nothing from the data that reaches its output:
    ``None``, ``"passthrough"``, a ``FunctionTransformer`` (exactly that
    class: a subclass may learn in ``fit``; its ``func`` must be a fixed
    per-row function, which the search cannot check), one of the package's
    own ``_STATELESS_TYPES`` (exact type), a public constant fill
    (:func:`_is_constant_fill`), a ``OneHotEncoder`` of public categories
    (:func:`~sklearn_dppca._public_encoders.is_public_onehot`), or a
    ``ColumnTransformer`` of such steps (:func:`~sklearn_dppca.
    _public_encoders.is_public_column_transformer`), or a ``Pipeline``
    (exactly, without ``memory``) of such steps, as a ColumnTransformer's
    branch or a step before the private one (review 114 F1: each step alone
    passed, their Pipeline did not). An encoder changes the
    number of columns: it does not keep them (:func:`keeps_columns`).
    With ``text``, a public text vectorizer too (:func:`~sklearn_dppca.
    _public_text.is_public_text`: hashing, or a public vocabulary without
    idf): the Pipeline warning's; the searches take numeric rows and do not
    check documents before their charge, so they refuse text steps."""
    if _is_passthrough(step):
        return True
    return (type(step) is FunctionTransformer or type(step) in _STATELESS_TYPES
            or _is_constant_fill(step) or is_public_onehot(step)
            or (text and is_public_text(step))
            or is_public_column_transformer(
                step, lambda inner: _is_stateless(inner, text))
            or (type(step) is Pipeline and step.memory is None and all(
                _is_stateless(inner, text) for _, inner in step.steps)))


def warn_if_after_learned_steps(model):
    """A :class:`~sklearn_dppca.PrivacyLeakWarning` when ``model`` is fitted
    as a step of a scikit-learn Pipeline (found on the call stack) after
    steps that learn from the rows without privacy (a ``StandardScaler``, a
    mean ``SimpleImputer``): their fitted state (means, scales) is exact,
    and it shapes every row ``model`` reads. Neither the fit nor its charge
    covers them, and nothing said so (review 70). The enclosing Pipelines
    are all read, through nested ones, FeatureUnions and ColumnTransformers
    and cached (``memory=``) ones (review 76). The package's own steps
    (private, or public maps) and :func:`_is_stateless` ones pass. Public:
    the Pipelines' configuration only."""
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import FeatureUnion

    learned, inner, seen = [], model, set()
    frame = sys._getframe(1)
    while frame is not None:  # outwards, through nested Pipelines and unions
        owner = frame.f_locals.get("self")
        if (isinstance(owner, (Pipeline, FeatureUnion, ColumnTransformer))
                and owner is not inner and id(owner) not in seen):
            if isinstance(owner, Pipeline):
                steps = [step for _, step in owner.steps]
                where = next((i for i, step in enumerate(steps) if step is inner),
                             frame.f_locals.get("step_idx"))  # memory=: a clone
                if isinstance(where, Integral):
                    learned += [step for step in steps[:where]
                                if not _is_stateless(step, text=True) and not type(
                                    step).__module__.startswith("sklearn_dppca.")]
            seen.add(id(owner))
            inner = owner  # the step the enclosing container holds
        frame = frame.f_back
    if not learned:
        return
    names = [type(step).__name__ for step in learned]
    advice = (
        "Use PrivateStandardScaler, PublicScaler (public ranges) or "
        "SimpleImputer(strategy='constant', keep_empty_features=True) "
        "instead; to encode categories, OneHotEncoder(categories=["
        "PUBLIC_LIST], handle_unknown='ignore', sparse_output=False), "
        "alone or in a ColumnTransformer(..., sparse_threshold=0) of such "
        "steps.")
    text = set().union(*(learned_text(step) for step in learned))
    if not text:
        _warn_leak(
            f"The Pipeline's step(s) {names} before {type(model).__name__} "
            "were fitted on the rows without privacy: their fitted values "
            "(means, scales, fills) are exact functions of the rows, and this "
            f"fit's privacy_spent_ does not cover them. {advice}")
        return
    # text vectorizers: what they learn, and the public ones (review 99 F1)
    others = [step for step in learned if not learned_text(step)
              or isinstance(step, ColumnTransformer)]
    _warn_leak(
        f"The Pipeline's step(s) {names} before {type(model).__name__} were "
        "fitted on the rows without privacy: their fitted values are exact "
        "functions of the rows, and this fit's privacy_spent_ does not cover "
        f"them. {text_leak_advice(text)}"
        + (f" For the other steps, u{advice[1:]}" if others else ""))


#: The steps a search accepts beside the private estimator, for messages.
_STATELESS_STEPS = (
    "FunctionTransformer itself (not a subclass) with a fixed per-row func, "
    "sklearn_dppca.preprocessing.PublicScaler (not a subclass), SimpleImputer("
    "strategy='constant', keep_empty_features=True), OneHotEncoder(categories="
    "[PUBLIC_LIST], handle_unknown='ignore') without drop, min_frequency nor "
    "max_categories, a ColumnTransformer of these with sparse_threshold=0, "
    "'passthrough', None"
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
    if _is_stateless(step, text=True) or learned_text(step):
        return (  # a text step (review 99 F1): the search reads numbers
            f"{where} is a text step: a private search takes numeric rows, "
            "checked before its charge, and runs no text step (raw text is "
            f"not accepted). {TEXT_OUTSIDE}"
        )
    if is_public_column_transformer(step, _is_stateless, dense=False):
        return (
            f"{where} holds public maps only, but whether its output is sparse "
            "depends on the rows: its fitted sparse_output_ is their density "
            f"against sparse_threshold={step.sparse_threshold!r}, where an "
            "output is sparse. Set sparse_threshold=0: the search then accepts it."
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


def _public_norm(step, n_features, heads=(), names=None):
    """The public norm bound of a private step: its numeric ``data_norm``, or
    with ``data_norm=None`` and ``bounds`` the box's radius
    (:func:`~sklearn_dppca._box.public_box_norm`), or the ``ValueError``
    of invalid bounds; ``None`` otherwise.
    ``bounds`` by feature name: the box of the features ``names`` (those the
    step reads, public: :func:`head_output`) where the dict names them all,
    as the step's fit takes it (entries naming no feature it reads are not
    used, so they do not enlarge the bound); else the box of every entry
    (the fit refuses the missing names; unknown names: the largest box).
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
        # by feature name: the box of the features the step reads, where
        # public; else of every feature it names, which bounds the box of
        # those the step will see (a radius over more features is larger)
        if not names or any(name not in bounds for name in names):
            names = list(bounds)
        try:
            return public_box_norm(bounds, len(names), step.center,
                                   feature_names=names)
        except ValueError as error:
            return error
    sides = [np.asarray(side, dtype=np.float64) for side in bounds]
    sized = [side.size for side in sides if side.ndim > 0]
    if sized:
        n_features = sized[0]
    elif not keeps_columns(heads):
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


def _release_key(candidate, c, n_features, folds, rows=None):
    """Candidates with equal keys are post-processing of one release: a
    PrivatePCA with an integer or no ``n_components``, equal in every
    parameter but ``n_components`` and ``whiten`` (and those the search sets
    itself), whose fits on the training ``folds`` (their sizes) with every
    component (below :data:`SHARED_FULL_FEATURES`) can run
    (:func:`refused_path`: not on ``path="matrix_free"``, nor over
    ``memory_limit``). Any other candidate is a release of its own."""
    prefix, step = candidate.prefix, _locate_private_step(candidate.estimator)[2]
    if type(step) is not PrivatePCA or not isinstance(
        step.n_components, (Integral, type(None))
    ):
        return ("own", c)
    read = input_kind(candidate_heads(candidate), n_features, rows)
    # X's own width: what the fold fits' rule of SHARED_FULL_FEATURES reads
    full = read is not None and read[0] == n_features
    if (full and n_features < SHARED_FULL_FEATURES and refused_path(
            step, folds, read, n_components=None) is not None) or (
            not full and step.n_components is None):
        # every component where the width is not public: a fit of its own
        # (review 67: a "largest" group holding None failed after the charge)
        return ("own", c)
    ignored = {prefix + p for p in _POST_PROCESSING + _OWNED}
    # where the step's width is not public (after a FunctionTransformer, or
    # rows a head reads) or not X's, its fit with every component was not
    # checked: the group fits at its largest k, as its largest candidate
    # would (review 66: a widening map's full fit went over memory_limit
    # after the charge)
    kind = "shared" if full else "largest"
    return (kind, _params_key(candidate.estimator, ignored))


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
    estimators their type and the key of their parameters; other array-likes
    (a pandas Series, whose ``repr`` abbreviates past 60 rows: two
    ``PublicScaler`` ranges shared one fit, review 68) the key of their
    values and of their index, columns and name; numbers and strings their
    type and ``repr``; anything else its pickle, or where it has none its
    ``repr``. Unequal keys only split a release in two, never join two."""
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
    if isinstance(value, (Real, str, bytes, np.generic)) or value is None:
        return (_type_name(value), repr(value))
    if isinstance(value, type):  # a class (OneHotEncoder's dtype=np.float64
        # has __array__, and np.asarray of it holds it: an endless recursion)
        return ("class", f"{value.__module__}.{value.__qualname__}")
    if hasattr(value, "__array__"):
        labels = (getattr(value, name, None) for name in ("index", "columns", "name"))
        return ("array-like", _type_name(value), _value_key(np.asarray(value)),
                tuple(_value_key(np.asarray(label) if hasattr(label, "__array__")
                                 else label) for label in labels))
    try:
        return (_type_name(value), pickle.dumps(value))
    except Exception:  # noqa: BLE001 - a function, a lock: its repr names the object
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
    splits = [(np.asarray(train), np.asarray(test)) for train, test in splits]
    for train, test in splits:
        # each row's count in the split, O(n): np.unique and np.intersect1d
        # sort (21 s for 5 folds of 1.5·10⁶ rows, before the charge)
        counts = []
        for indices in (train, test):
            if indices.size and (indices.min() < 0 or indices.max() >= n_samples):
                counts = None
                break
            counts.append(np.bincount(indices.astype(np.intp, copy=False),
                                      minlength=n_samples))
        if counts is None or counts[0].max(initial=0) > 1 \
                or counts[1].max(initial=0) > 1:
            raise ValueError(
                "cv gives a split whose indices repeat a row or fall outside "
                f"0..{n_samples - 1}: each split must name distinct rows (a "
                "row repeated in a training fold weighs twice in its fit)."
            )
        if np.any(counts[0] & counts[1]):  # 0 or 1 each: a row in both
            raise ValueError(
                "cv gives a split whose training and validation rows overlap."
            )
        if train.size < 2 or not test.size:
            raise ValueError(
                "cv gives a split with fewer than 2 training rows or no "
                "validation row: every fit reads at least 2 rows.")
        in_test += counts[1]
        in_train += counts[0]
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
    iterable of (train, test) pairs of indices or boolean masks; ``None``
    is 5 folds, as in scikit-learn."""
    if cv is None:
        cv = 5
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
    if isinstance(cv, (str, bytes, dict)) or not hasattr(cv, "__iter__"):
        raise ValueError(f"cv must be None, an int, a KFold or an iterable of "
                         f"(train, test) pairs; got {cv!r}.")
    for pair in cv:
        parts = [np.asarray(part) for part in pair]
        if len(parts) != 2:
            raise ValueError(f"cv gives an entry of {len(parts)} parts where a "
                             "(train, test) pair belongs.")
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
