r"""The private search over supervised pipelines: its plan and its execution.

:class:`~sklearn_dppca.model_selection.PrivateGridSearchCV` runs this when
its candidates end in a private head of :mod:`sklearn_dppca.linear_model`
(a bare head, or a Pipeline of stateless steps, at most one private
transformer and the head). Every fitted step is then private, and the
validation scores are bounded statistics released with noise:

=========================  ==================================  ==============
scoring                    per fold, per candidate (shared)    sensitivity
=========================  ==================================  ==============
``accuracy``               correct predictions                 1
``balanced_accuracy``      correct per class (rows per class)  √2 (√2)
``neg_mean_squared_error`` Σ (p − t)², labels in bound units   4
``r2``                     Σ (p − t)² (Σ t, Σ t²)              4 (2)
=========================  ==================================  ==============

:math:`t` and :math:`p` are the label and the prediction clipped into the
public label bounds and put in their units (:math:`[-1, 1]`). A row is in
one validation fold, where replacing it (row and label) moves each
candidate's block by at most the sensitivity above and the shared block by
its own, so the whole released score matrix has L2 sensitivity
:math:`\sqrt{m s_c^2 + s_0^2}` over :math:`m` candidates (docs/privacy.rst,
"Supervised search"). The search releases the statistics summed over the
folds, which have the same sensitivity (the row moves only its own fold's
share of each sum); private cross-validation releases each fold's.
"""

import math
from numbers import Integral
from typing import NamedTuple

import numpy as np
from joblib import Parallel, delayed
from scipy import sparse
from sklearn.base import clone
from sklearn.metrics import get_scorer
from sklearn.model_selection import ParameterGrid
from sklearn.pipeline import Pipeline
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.validation import check_consistent_length, column_or_1d

from ._base import _BasePrivatePCA, reported_spend
from ._bounds import check_data_norm_range
from ._box import check_box
from ._coherent_power_pca import CoherentPowerPCA
from ._dask import ChunkedRows
from ._pca_model import map_non_finite
from ._private_pca import PrivatePCA, pooled_release
from ._search_plan import (
    _OWNED,
    _check_splits,
    _is_stateless,
    _params_key,
    _public_norm,
    _refuse_owned,
    _refused_step,
    _weights,
    caching_params,
    calibrated_epsilon,
    fit_budget,
    fit_sizes,
    group_of,
    head_output,
    head_width,
    input_kind,
    pooled_groups,
    refused_path,
)
from ._search_rows import (
    fit_heads,
    fit_through_heads,
    no_columns,
    refuse_polars_output,
    rows_after,
    unmapped,
)
from ._search_run import (
    _best_index,
    _ranked_results,
    _score_failures,
    _take,
)
from .linear_model import PrivateLDA, _on_host, _PrivateHead, refuse_complex_labels
from .noise import dense_noise, noise_scale
from .privacy import BudgetAccountant, gdp_epsilon, gdp_mu, private_computation

#: The bounded scores of a supervised search, with the sensitivity of a
#: candidate's block and of the fold's shared block (see the module).
SCORERS = {
    "accuracy": (1.0, 0.0),
    "balanced_accuracy": (math.sqrt(2.0), math.sqrt(2.0)),
    "neg_mean_squared_error": (4.0, 0.0),
    "r2": (4.0, 2.0),  # (Σt, Σt²): (t − t')²(1 + (t + t')²) ≤ 4 on [−1, 1]
}


def final_head(estimator):
    """The private head ending ``estimator`` (bare or a Pipeline's last
    step), or ``None``."""
    if isinstance(estimator, _PrivateHead):
        return estimator
    if isinstance(estimator, Pipeline) and estimator.steps:
        last = estimator.steps[-1][1]
        return last if isinstance(last, _PrivateHead) else None
    return None


def heads_of(cand):
    """The steps before a candidate's first private step (none for a bare
    head)."""
    if not isinstance(cand.estimator, Pipeline):
        return []
    steps = [step for _, step in cand.estimator.steps]
    first = cand.private[0][1]
    return steps[:next(i for i, step in enumerate(steps) if step is first)]


def is_supervised(estimator, param_grid):
    """Whether the search's first candidate ends in a private head."""
    grid = list(ParameterGrid(param_grid))
    if not grid:
        return final_head(estimator) is not None
    first = clone(estimator).set_params(**clone(grid[0], safe=False))
    return final_head(first) is not None


class Candidate(NamedTuple):
    """One grid point of a supervised search, cloned and checked."""

    params: dict
    estimator: object  # unfitted
    private: list  # (prefix, step) of every private step, the head last
    error: object = None  # a public reason it cannot be fitted


class SupervisedPlan(NamedTuple):
    """What a supervised search releases and what it costs."""

    candidates: list
    scoring: str
    labels: object  # the public label domain: classes, or (mid, half)
    groups: list  # candidate indices sharing one fit per fold, the fitted one first
    fit_epsilons: list  # per group: {prefix: ε of that step's fold fits}
    refit_mu: float  # μ of the refit (0 without one)
    pooled: list  # per group: bytes each fold fit's PCA may keep (pooled_groups)
    folds_per_row: int
    selection_sigma: float
    mu: float
    spent: tuple


def _private_steps(est, n_features, sizes, rows=None, empty=None, params=None):
    """``(prefix, step)`` of the private steps of a candidate, checked: one
    head last, at most one private transformer, stateless steps otherwise
    (raise); a public failure of a step is returned: of its parameters, its
    bound, and where what it reads is public (``rows``:
    :func:`~sklearn_dppca._search_plan.rows_kind`) its path and memory, or
    its head's dense rows and box, on each of the search's fit ``sizes``."""
    if isinstance(est, _PrivateHead):
        steps, named = [("", est)], [("", est)]
    else:
        steps = [(name + "__", step) for name, step in est.steps]
        named = []
        for (prefix, step), (name, _) in zip(steps, est.steps):
            if isinstance(step, (_PrivateHead, _BasePrivatePCA)):
                named.append((prefix, step))
            elif not _is_stateless(step):
                raise ValueError(_refused_step(name, step))
        transformers = [s for _, s in named if isinstance(s, _BasePrivatePCA)]
        if len(named) - len(transformers) != 1 or len(transformers) > 1:
            raise ValueError(
                "A supervised Pipeline in a private search holds one private "
                "head, as its last step, and at most one private transformer "
                "(PrivatePCA, ComplexGaussPCA, CoherentPowerPCA) before it; "
                f"this one holds {len(named) - len(transformers)} head(s) and "
                f"{len(transformers)} transformer(s)."
            )
    refuse_polars_output([step for _, step in steps][:-1])  # they feed the head
    for prefix, step in named:
        if isinstance(step, CoherentPowerPCA) and step._mode() == "repetition":
            raise ValueError(
                "CoherentPowerPCA with selection='repetition' is accounted in "
                "Rényi DP: it cannot be composed exactly in the search's budget."
            )
        if isinstance(step, _BasePrivatePCA):
            norm = _public_norm(step, n_features)
            if isinstance(norm, ValueError):  # bounds invalid: a public failure
                return named, norm
            if norm is None:
                raise ValueError(
                    f"The private step's data_norm={step.data_norm!r} must be a "
                    "public positive number (or None with public bounds) in a "
                    "private search."
                )
        elif step.data_norm is None and step.bounds is None:
            raise ValueError(
                f"{type(step).__name__} needs data_norm (a public positive "
                "number) or bounds in a private search: they bound its input "
                "rows."
            )
    every = [step for _, step in steps]
    try:
        for _, step in named:
            step._validate_params()
            before = every[:every.index(step)]
            width = head_width(before, n_features, empty)
            # public steps that cannot map a Dask array's chunks (they fail
            # on its row of zeros, or make sparse rows): refused before the
            # charge, as the unsupervised search refuses them
            error = (unmapped(before, rows, step, empty)
                     or no_columns(width, step, params)
                     if step is named[0][1] else None)
            if error is not None:
                return named, error
            read = input_kind(before, n_features, rows)
            if isinstance(step, _BasePrivatePCA):
                # the fits refuse a bound whose square under- or overflows
                check_data_norm_range(_public_norm(step, n_features),
                                      np.dtype(np.float64))
                # the features are public where the step reads X's columns
                step._check_n_components(
                    sizes[0], width or sizes[0] if before else n_features,
                    width_known=not before)
                error = refused_path(step, sizes, read)
                if error is not None:
                    return named, error
                continue
            if isinstance(step, PrivateLDA):
                step._declared()
            else:
                step._label_box()
            if read is not None and sparse.issparse(getattr(read[1], "X", None)):
                raise step._sparse_refusal()
            width = None if read is None else read[0]
            pcas = [b for b in before if isinstance(b, _BasePrivatePCA)]
            out = None if pcas else head_output(before, n_features, empty)
            if before and out is not None:  # public steps: their output on no row
                width, names = out
                if isinstance(step.bounds, dict):
                    if names is None:
                        raise ValueError(
                            "bounds by feature name need named features, and "
                            "the steps before the head pass on none (give them "
                            "set_output(transform='pandas'), or bounds as a list).")
                    check_box(step.bounds, width, names)
            elif pcas:  # the PCA's components
                k, at = pcas[0].n_components, before.index(pcas[0])
                into = head_width(before[:at], n_features, empty) if at else n_features
                width = (int(k) if isinstance(k, Integral) else into
                         if k is None and into is not None and into <= sizes[0]
                         else None)
                if width is None and step.bounds is not None:
                    raise ValueError(
                        "The head's bounds need one public width for what it "
                        f"reads; n_components={k!r} of the private step before "
                        "it does not give one (a fraction or 'mle' is chosen "
                        "from the noisy spectrum). Give an integer n_components, "
                        "or the head a data_norm.")
                if isinstance(step.bounds, dict) and before[-1] is pcas[0]:
                    _check_pca_names(step.bounds, pcas[0], width)
            # bounds by feature name are checked by the fit, against the
            # names it is given
            if width is not None and not isinstance(step.bounds, dict):
                step._bound(width, max(sizes))
            if width is not None and isinstance(rows, ChunkedRows):
                # on a Dask array the head gathers what it reads into
                # memory, as its fit counts it (review 105 F2)
                step._check_gathered(max(sizes), width, clip=bool(before))
    except (InvalidParameterError, ValueError, TypeError) as error:
        return named, error
    return named, None


def _check_pca_names(bounds, pca, width):
    """Refuse, before the charge, a head's ``bounds`` by feature name that
    the private PCA right before it does not output: its ``width``
    components are named ``privatepca0``... (public: its class and
    ``n_components``) where its output is pandas (``set_output``), else
    unnamed. A PCA of other names: its fit checks. Review 106 F2's kin: the
    search was charged, then the head's fit failed on the names."""
    from sklearn.base import ClassNamePrefixFeaturesOutMixin
    from sklearn.utils._set_output import _get_output_config

    if not isinstance(pca, ClassNamePrefixFeaturesOutMixin):
        return
    if _get_output_config("transform", pca)["dense"] != "pandas":
        raise ValueError(
            "bounds by feature name need named features, and the private "
            f"{type(pca).__name__} before the head passes on none (give it "
            "set_output(transform='pandas'), or bounds as a list).")
    prefix = type(pca).__name__.lower()
    check_box(bounds, width, [f"{prefix}{i}" for i in range(width)])


def _shared_key(cand, c):
    """Candidates with equal keys share their fold fits: a Pipeline ending
    in a PrivatePCA with an integer ``n_components`` right before a head
    without ``bounds``, equal in every parameter but that ``n_components``
    and the head's ``alpha`` (and those the search sets itself). One fold
    fit at the group's largest :math:`k` serves them all: a smaller
    :math:`k`'s components are the first :math:`k` (of the same released
    matrix) and its head the sub-block of the head's release on them, with
    its own ridge ``alpha``, added to the released matrix
    (:meth:`~sklearn_dppca.linear_model.PrivateLDA._leading`: both
    post-processing). So do bare heads without ``bounds`` that differ only
    in ``alpha`` (review 65). Any other candidate is fitted on its own."""
    if len(cand.private) == 1 and not isinstance(cand.estimator, Pipeline):
        (_, head), = cand.private
        if head.bounds is not None:
            return ("own", c)
        return ("shared", _params_key(cand.estimator, {"alpha", *_OWNED}))
    if len(cand.private) != 2 or not isinstance(cand.estimator, Pipeline):
        return ("own", c)
    (prefix, pca), (_, head) = cand.private
    if (type(pca) is not PrivatePCA or not isinstance(pca.n_components, Integral)
            or head.bounds is not None or cand.estimator.steps[-2][1] is not pca):
        return ("own", c)
    ignored = {p + name for p, _ in cand.private for name in _OWNED}
    ignored |= {prefix + "n_components", cand.private[1][0] + "alpha"}
    return ("shared", _params_key(cand.estimator, ignored))


def _leading_k(cand):
    """The PCA's ``k`` of a shared group's candidate; 0 for a bare head (it
    reads every feature)."""
    step = cand.private[0][1]
    return int(step.n_components) if len(cand.private) == 2 else 0


def _label_domain(candidates):
    """The candidates' one public label domain (their heads must agree)."""
    domains = set()
    for cand in candidates:
        head = cand.private[-1][1]
        if isinstance(head, PrivateLDA):
            domains.add(("classes", tuple(head._declared().tolist())))
        else:
            domains.add(("bounds", head._label_box()))
    if len(domains) != 1:
        raise ValueError(
            "Every candidate's head must declare the same labels (classes, or "
            "y_bounds) and be of one kind: the released scores are computed "
            f"on that public label domain; found {sorted(domains, key=repr)}."
        )
    kind, value = domains.pop()
    return np.asarray(value) if kind == "classes" else value


def plan_supervised_search(estimator, param_grid, *, epsilon, delta, splits,
                           n_samples, n_features, scoring=None, refit=True,
                           fit_weights=None, rows=None, empty=None):
    r"""The privacy analysis of a supervised search, from public values only.

    Budget shares are the search's (:data:`~sklearn_dppca.model_selection.
    SEARCH_BUDGET_SHARES`): group :math:`g` (one candidate, or those sharing
    their fold fits, :func:`_shared_key`) fits on each training fold at
    :math:`\mu_g^2 = s_{\mathrm{fits}} \mu^{*2} \omega_g / (r \sum \omega)`
    (:math:`r` the most training folds a row is in), shared equally among
    its :math:`p_g` private steps (each at :math:`\mu_g / \sqrt{p_g}`); the
    score matrix gets
    :math:`\mu_{\mathrm{sel}}^2 = s_{\mathrm{sel}} \mu^{*2}`; the refit
    :math:`s_{\mathrm{refit}} \mu^{*2}`, shared among the chosen
    candidate's private steps, or all of it the head's where the PCA before
    it is pooled from the fold fits (:func:`refit`). They compose to
    :math:`\mu^{*2}`: one charge. ``rows``:
    :func:`~sklearn_dppca._search_plan.rows_kind` of ``X``, for each
    candidate's plan (:func:`_private_steps`); ``empty``:
    :func:`~sklearn_dppca._search_plan.empty_rows` of ``X``, for the width
    of the steps before a private one.

    Returns
    -------
    plan : SupervisedPlan
    """
    folds_per_row = _check_splits(splits, n_samples)
    sizes = fit_sizes(splits, n_samples, refit)
    grid = list(ParameterGrid(param_grid))
    candidates = []
    for params in grid:
        _refuse_owned(params)
        est = clone(estimator).set_params(**clone(params, safe=False))
        if final_head(est) is None:
            raise ValueError(
                "Every candidate of a supervised search must end in a private "
                f"head; {params} does not."
            )
        private, error = _private_steps(est, n_features, sizes, rows, empty,
                                        params)
        candidates.append(Candidate(params, est, private, error))
    ok = [c for c in candidates if c.error is None]
    if not ok:
        raise ValueError(
            f"All the {len(grid)} candidates fail for the reasons below, before "
            "any budget was spent:\n"
            + "\n".join(sorted({repr(c.error) for c in candidates})))
    labels = _label_domain(ok)
    classifier = isinstance(ok[0].private[-1][1], PrivateLDA)
    scoring = scoring or ("accuracy" if classifier else "r2")
    if not isinstance(scoring, str) or scoring not in SCORERS or classifier != (
            scoring in ("accuracy", "balanced_accuracy")):
        allowed = (("accuracy", "balanced_accuracy") if classifier
                   else ("neg_mean_squared_error", "r2"))
        raise ValueError(
            f"scoring={scoring!r} is not a bounded score of this search's "
            f"{'classifier' if classifier else 'regressor'}: use one of "
            f"{allowed}, each released with noise of a known sensitivity."
        )
    weights = _weights(fit_weights, grid)
    groups = {}
    for c, cand in enumerate(candidates):
        if cand.error is None:
            groups.setdefault(_shared_key(cand, c), []).append(c)
    groups = [sorted(members, key=lambda c: -_leading_k(candidates[c]))
              if key[0] == "shared" else members for key, members in groups.items()]
    shares, mu_total, fit_mus = fit_budget(groups, weights, refit, epsilon, delta,
                                           folds_per_row)
    fit_epsilons = []
    for members, mu_g in zip(groups, fit_mus):
        steps = candidates[members[0]].private  # they share μ_g equally
        eps = calibrated_epsilon(mu_g / math.sqrt(len(steps)), delta, epsilon)
        fit_epsilons.append({prefix: eps for prefix, _ in steps})
    mu_refit = mu_total * math.sqrt(shares.get("refit", 0.0))
    pooled = pooled_groups([bool(refit) and _pca_before_head(candidates[g[0]])
                            for g in groups], splits)
    s_cand, s_shared = SCORERS[scoring]
    sensitivity = math.sqrt(len(ok) * s_cand**2 + s_shared**2)
    mu_sel = mu_total * math.sqrt(shares["selection"])
    selection_sigma = noise_scale(sensitivity, mu_sel)
    composed = math.sqrt(
        folds_per_row * sum(sum(gdp_mu(e, delta) ** 2 for e in eps.values())
                            for eps in fit_epsilons)
        + mu_sel**2 + mu_refit**2)
    return SupervisedPlan(candidates, scoring, labels, groups, fit_epsilons,
                          mu_refit, pooled, folds_per_row, selection_sigma,
                          mu_total, (gdp_epsilon(composed, delta), delta))


def _pca_before_head(cand):
    """Whether ``cand`` is a ``PrivatePCA`` right before its head, whose
    refit can take the PCA from the fold fits' releases
    (:func:`~sklearn_dppca._search_plan.pooled_groups`; whether each fold
    fit kept its release, a dense one of at most ``KEPT_MAX_FEATURES``
    features, is known from public values too, after the folds)."""
    if len(cand.private) != 2 or not isinstance(cand.estimator, Pipeline):
        return False
    pca = cand.private[0][1]
    return type(pca) is PrivatePCA and cand.estimator.steps[-2][1] is pca


def check_labels(plan, y, n_samples):
    """``y`` as a 1-d array, refused before the charge when it is missing, of
    the wrong length, or outside the public label domain: by the heads' own
    check (every candidate's head declares the same domain), which each fit
    would otherwise make after the charge."""
    if y is None:
        raise ValueError("A supervised search needs y: the labels of the rows.")
    y = _on_host(y)  # the search scores on the host
    refuse_complex_labels(y)
    y = column_or_1d(y, warn=True)
    check_consistent_length(np.empty((n_samples, 0)), y)
    head = next(c for c in plan.candidates if c.error is None).private[-1][1]
    head._targets(y)  # the labels as every fit would check them
    return y


def fit_candidate(cand, epsilons, delta, generator, X, y, keep=False,
                  keep_pca=False, names=None):
    r"""``cand`` fitted with each private step at its :math:`\varepsilon` on
    a throwaway accountant (the search has paid); ``keep``: its head keeps
    its release for the group's other candidates; ``keep_pca``: its PCA
    keeps its release for the refit (``_kept``) if it takes at most that
    many bytes."""
    model = _with_settings(cand, epsilons, delta, generator)
    if keep:
        final_head(model)._keep_release = True
    if keep_pca:
        model.steps[-2][1]._keep_release = keep_pca
    # a Dask array's chunks mapped by the steps before the first private
    # one, as planned (input_kind): never gathered for them
    return fit_through_heads(model, len(heads_of(cand)), X, y, names)


def _with_settings(cand, epsilons, delta, generator):
    """A clone of ``cand``'s estimator with the search's settings on each
    private step: its ε, δ, a throwaway accountant, and a generator of its
    own spawned from ``generator``; no joblib cache
    (:func:`~sklearn_dppca._search_plan.caching_params`). Never one
    generator for two steps: a copy of a step (a caching Pipeline fits
    clones of the steps before the last) would start from the head's
    state, so the two releases would carry the same noise and not compose
    as independent mechanisms."""
    settings = dict.fromkeys(caching_params(cand.estimator))
    first = (cand.estimator.steps[0][1] if isinstance(cand.estimator, Pipeline)
             else cand.estimator)
    generators = generator.spawn(len(cand.private))
    for (prefix, step), own in zip(cand.private, generators):
        settings.update({prefix + "epsilon": epsilons[prefix],
                         prefix + "delta": delta,
                         prefix + "accountant": BudgetAccountant(),
                         prefix + "random_state": own})
        if step is not first:
            # as in the unsupervised search: a value the steps before it
            # make non-finite is mapped, never a failure that tells
            # neighbours apart (docs/model_selection.rst)
            settings[prefix + "non_finite"] = "clip"
    return clone(cand.estimator).set_params(**settings)


def fold_statistics(plan, y_true, predictions):
    """Exact statistics of one validation fold: ``(m, b)`` per candidate
    (NaN rows for failed ones) and the shared ``(s,)``."""
    if plan.scoring in ("accuracy", "balanced_accuracy"):
        classes = plan.labels
        true = np.searchsorted(classes, y_true)
        blocks = []
        for pred in predictions:
            if pred is None:
                blocks.append(None)
                continue
            right = np.asarray(pred) == np.asarray(y_true)
            if plan.scoring == "accuracy":
                blocks.append(np.array([right.sum()], dtype=float))
            else:
                blocks.append(np.bincount(true[right], minlength=classes.shape[0])
                              .astype(float))
        shared = (np.bincount(true, minlength=classes.shape[0]).astype(float)
                  if plan.scoring == "balanced_accuracy" else np.empty(0))
    else:
        mid, half = plan.labels
        t = np.clip((np.asarray(y_true, dtype=float) - mid) / half, -1.0, 1.0)
        # a row's term is within [0, 4] whatever the model predicts: a NaN
        # prediction (clip keeps NaN) counts as the box's centre, so one row
        # cannot make the pooled sum NaN (review 120 F1)
        blocks = [None if pred is None else np.array([np.sum(
            (np.clip(np.nan_to_num((np.asarray(pred, dtype=float) - mid) / half,
                                   nan=0.0), -1.0, 1.0) - t) ** 2)])
            for pred in predictions]
        shared = (np.array([t.sum(), (t * t).sum()]) if plan.scoring == "r2"
                  else np.empty(0))
    width = next(b.shape[0] for b in blocks if b is not None)
    per_candidate = np.stack([np.full(width, np.nan) if b is None else b
                              for b in blocks])
    return per_candidate, shared


def fold_scores(plan, per_candidate, shared, n_val):
    """Each candidate's score on one fold, from the *released* statistics."""
    if plan.scoring == "accuracy":
        return np.clip(per_candidate[:, 0] / n_val, 0.0, 1.0)
    if plan.scoring == "balanced_accuracy":
        counts = np.maximum(shared, 1.0)
        return np.clip(per_candidate / counts, 0.0, 1.0).mean(axis=1)
    mid, half = plan.labels
    sse = np.maximum(per_candidate[:, 0], 0.0)
    if plan.scoring == "neg_mean_squared_error":
        return -(half**2) * sse / n_val
    spread = shared[1] - shared[0] ** 2 / n_val  # Σ (t − t̄)², released
    return 1.0 - sse / max(spread, plan.selection_sigma)


def _score_fold(plan, X, y, train, test, delta, seeds, names=None):
    X_train, X_val = _take(X, train), _take(X, test)
    y_train, y_val = _safe_indexing(y, train), _safe_indexing(y, test)
    predictions = [None] * len(plan.candidates)
    kept = [None] * len(plan.groups)
    for g, members in enumerate(plan.groups):
        lead = plan.candidates[members[0]]
        fitted = fit_candidate(lead, plan.fit_epsilons[g], delta, seeds[g],
                               X_train, y_train, keep=len(members) > 1,
                               keep_pca=plan.pooled[g], names=names)
        if plan.pooled[g]:  # a dense release (a noisy one: it may leave)
            kept[g] = getattr(fitted.steps[-2][1], "_kept", None)
        first = len(heads_of(lead))  # the public steps' rows, as in the fit
        if len(members) == 1:
            rows = rows_after(fitted, first, X_val, names) if first else X_val
            rest = Pipeline(fitted.steps[first:]) if first else fitted
            predictions[members[0]] = _on_host(rest.predict(rows))
            continue
        if isinstance(fitted, Pipeline):
            rows = rows_after(fitted, first, X_val, names)
            if first < len(fitted.steps) - 1:
                rows = Pipeline(fitted.steps[first:-1]).transform(rows)
            head = fitted.steps[-1][1]
        else:  # a bare head: every feature, each candidate its own alpha
            head, rows = fitted, X_val
        # as the shared fit saw its rows: clipped on every one of its
        # features, then each candidate's first k (clipped on its own k
        # only, they were scored by a model learned on rows clipped on
        # all: a k = 2 scored r2 0.11 in a grid with k = 30, 0.94 alone;
        # review 68)
        rows = np.asarray(_on_host(rows))
        if head.non_finite == "clip":
            rows = map_non_finite(rows)
        rows = head._as_fitted(rows)
        for c in members:
            cand = plan.candidates[c]
            k = _leading_k(cand) or head.n_features_in_
            sub = head._leading(k, cand.private[-1][1].alpha)
            predictions[c] = sub.predict(rows[:, :k])
    return fold_statistics(plan, y_val, predictions), kept


def run(search, plan, X, y, splits, rng, pooled=True, names=None):
    r"""Execute ``plan`` (after its charge) and return the search's state.

    ``pooled``: each candidate's statistics are summed over the folds and
    released once (a row is in one validation fold, so the sums have the
    per-fold sensitivity and get the same noise: :math:`\sqrt F` less noise
    on the mean score than :math:`F` fold releases); ``cv_results_`` then
    holds no per-split scores. ``pooled=False`` releases every fold's
    statistics (:func:`~sklearn_dppca.model_selection.private_cross_validate`,
    whose output is the fold scores).
    """
    seeds = [rng.spawn(len(plan.groups)) for _ in splits]
    with private_computation():
        folds = Parallel(n_jobs=search.n_jobs, backend="threading")(
            delayed(_score_fold)(plan, X, y, train, test, search.delta, seeds[f],
                                 names)
            for f, (train, test) in enumerate(splits))
        kept = [[fold[1][g] for fold in folds] for g in range(len(plan.groups))]
        folds = [fold[0] for fold in folds]
        n_val = np.array([len(test) for _, test in splits], dtype=float)
        if pooled:
            folds = [(sum(per for per, _ in folds), sum(shared for _, shared in folds))]
            n_val = np.array([n_val.sum()])
        scores = np.empty((len(plan.candidates), len(folds)))
        for f, (per_candidate, shared) in enumerate(folds):
            noisy = per_candidate + dense_noise(rng, per_candidate.shape,
                                                plan.selection_sigma)
            noisy_shared = shared + dense_noise(rng, shared.shape, plan.selection_sigma)
            scores[:, f] = fold_scores(plan, noisy, noisy_shared, n_val[f])
        del folds  # the exact statistics never leave
        _score_failures(scores, plan.candidates, search.error_score)
        results = _ranked_results(plan.candidates, scores, per_split=not pooled)
        best = _best_index(search.refit, results, plan.candidates)
        state = {"cv_results_": results, "best_index_": best,
                 "best_params_": plan.candidates[best].params}
        if not callable(search.refit):
            state["best_score_"] = float(results["mean_test_score"][best])
        if search.refit:
            cand = plan.candidates[best]
            if cand.error is not None:
                raise ValueError(f"The candidate to refit, {cand.params}, cannot "
                                 f"be fitted: {cand.error!r}.")
            group = group_of(plan.groups, best)
            fitted = refit(plan, cand, group, kept[group], search.delta,
                           rng.spawn(1)[0], X, y, names)
            fitted.set_params(**caching_params(cand.estimator))
            for prefix, step in cand.private:  # later refits charge the search's
                fitted.set_params(**{prefix + "accountant": search.accountant,
                                     prefix + "random_state": step.random_state})
            state["best_estimator_"] = fitted
    state["scorer_"] = get_scorer(plan.scoring)
    state["fit_epsilons_"] = plan.fit_epsilons
    return state


def refit(plan, cand, group, kept, delta, generator, X, y, names=None):
    r"""The chosen candidate refitted on all the rows at the refit's
    :math:`\mu`.

    Where its group's fold fits all kept their PCA's release
    (``plan.pooled``), the refit's PCA is made of them
    (:func:`~sklearn_dppca._private_pca.pooled_release`: post-processing,
    no new release) and the head alone is fitted, at the whole
    :math:`\mu_\mathrm{refit}`; its ``privacy_spent_`` is what the fold
    releases it is made of cost a row, :math:`\sqrt r` times the PCA's
    :math:`\mu` on a fold. Otherwise every private step is fitted at
    :math:`\mu_\mathrm{refit} / \sqrt p`. The choice rests on public
    values (the plan, and the path each fold fit took by its shape).
    """
    r = plan.folds_per_row
    pool = pooled_release(kept, r)
    if pool is None:
        eps = gdp_epsilon(plan.refit_mu / math.sqrt(len(cand.private)), delta,
                          tidy=False)
        return fit_candidate(cand, {p: eps for p, _ in cand.private}, delta,
                             generator, X, y, names=names)
    (pca_prefix, _), (head_prefix, _) = cand.private
    fold_mu = gdp_mu(plan.fit_epsilons[group][pca_prefix], delta)
    pca_eps = gdp_epsilon(math.sqrt(r) * fold_mu, delta, tidy=False)
    head_eps = gdp_epsilon(plan.refit_mu, delta, tidy=False)
    model = _with_settings(cand, {pca_prefix: pca_eps, head_prefix: head_eps},
                           delta, generator)
    (_, pca), (_, head) = model.steps[-2:]
    # the steps before the PCA are stateless (the plan checked): nothing learnt
    rows = fit_heads(model, len(heads_of(cand)), X, y, names)
    pca._fit_released(rows, pool, reported_spend((pca_eps, delta), pca_eps))
    head.fit(pca.transform(rows), y)
    return model
