"""Private model selection: a grid search whose choice is private too.

:class:`PrivateGridSearchCV` has the surface of scikit-learn's
:class:`~sklearn.model_selection.GridSearchCV`, but everything it releases —
the fitted candidates it never shows, the scores, the choice of the best
candidate and the refitted estimator — is one ``(epsilon, delta)``-DP
release, composed exactly in Gaussian differential privacy and charged once
to a :class:`~sklearn_dppca.BudgetAccountant` (``docs/privacy.rst`` §2).

The search, for ``m`` candidates and ``K`` validation folds that partition
the rows:

1. **Candidate fits.** Every candidate is fitted on every training fold with
   its share of the budget. A row sits in ``K − 1`` training folds, so its
   fits compose as ``K − 1`` releases per mechanism (under replacement the
   folds that do not hold the row do not depend on it). Candidates of
   :class:`~sklearn_dppca.PrivatePCA` that differ only in ``n_components``
   or ``whiten`` are post-processing of one release: they share one fit per
   fold (``n_components=None``, truncated).
2. **Scores.** The score of a candidate is the captured variance of the
   validation rows, ``Σ_i ‖P clip_C(x_i − m̂)‖²``, each term in ``[0, C²]``,
   summed over all validation folds. Each row is in exactly one validation
   fold, so the score vector has L2 sensitivity ``√(Σ_c C_c⁴)`` (``C²√m``
   for one ``C``) given the candidate fits, which are paid for in step 1.
   It is released with Gaussian noise.
3. **Choice.** Post-processing of the noisy scores and of the released
   spectra: the floor-penalised score of :func:`floor_penalised_scores`.
4. **Refit** of the chosen candidate on all rows with the refit share.
"""

import copy
import math
import warnings
from numbers import Integral, Real

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator, MetaEstimatorMixin, _fit_context, clone
from sklearn.model_selection import KFold, ParameterGrid
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import HasMethods, Interval
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted, validate_data

from ._base import _BasePrivatePCA, reported_spend
from ._coherent_power_pca import CoherentPowerPCA
from ._private_pca import PrivatePCA
from .noise import make_generator
from .privacy import (
    BudgetAccountant,
    PrivacyLeakWarning,
    _warn_leak,
    gdp_epsilon,
    gdp_mu,
    get_default_accountant,
)

__all__ = [
    "PrivateGridSearchCV",
    "SEARCH_BUDGET_SHARES",
    "SELECTION_Z",
    "captured_variance_rows",
    "floor_penalised_scores",
]

#: Fractions of ``μ*²`` of the search: the candidate fits on the training
#: folds, the released score vector, and the refit on all rows. Without a
#: refit its share is dropped and the others rescaled to sum to 1.
SEARCH_BUDGET_SHARES = {"fits": 0.45, "selection": 0.1, "refit": 0.45}

#: Margin, in standard deviations, that each extra component must clear in
#: the floor-penalised score (see :func:`floor_penalised_scores`).
SELECTION_Z = 2.0

# Parameters of the private step that are post-processing of one release of
# PrivatePCA: candidates differing only in these share the fit of a fold.
_POST_PROCESSING = ("n_components", "whiten")
# Parameters the search sets itself on the private step.
_OWNED = ("accountant", "random_state", "delta")


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------
def _clip_rows(rows, bound):
    """``clip_C`` of each row: ``x · min(1, C/‖x‖)`` (``docs/privacy.rst`` §1)."""
    norms = np.linalg.norm(rows, axis=1)
    scale = np.minimum(1.0, bound / np.maximum(norms, np.finfo(float).tiny))
    return rows * scale[:, None]


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
    centred = _clip_rows(np.asarray(rows, dtype=np.float64) - mean, data_norm)
    projected = centred @ basis
    return np.clip(np.einsum("ij,ij->i", projected, projected), 0.0, data_norm**2)


def floor_penalised_scores(released, n_components, n_validation, floor,
                           selection_sigma, z=SELECTION_Z):
    """Scores that compare candidates with different ``n_components`` fairly.

    Captured variance grows with ``k`` even past the planted rank: a
    direction of the isotropic noise floor captures the floor's variance
    ``τ`` per validation row, whichever direction the noisy release picked.
    The rule subtracts from the released (noisy) score of each candidate,
    per component and fold, the expected capture of a floor direction,
    ``n_val,f · τ_f``, plus a margin of ``z`` standard deviations of what an
    extra floor component adds by chance: its sampling spread
    ``√(2 Σ_f n_val,f τ_f²)`` (the variance of ``y²`` for ``y ~ N(0, τ)``)
    and the selection noise of a difference of two released scores,
    ``√2 σ_sel``::

        A_c = R_c − Σ_f k_{c,f} n_val,f τ_{c,f}
                  − k̄_c · z · √(2 Σ_f n_val,f τ_{c,f}² + 2 σ_sel²)

    A signal direction of variance ``λ > τ`` adds ``(λ − τ) n`` to the
    score, far above the margin; a floor direction adds on average nothing
    but pays the margin, so that the best ``A_c`` is wrong only when chance
    beats ``z`` standard deviations. ``τ_{c,f}`` is the median of the fold's
    released variances when a full spectrum was released (PrivatePCA
    candidates share one), else the candidate's released
    ``noise_variance_``. Everything here is post-processing of released
    values and of public ones.

    Parameters
    ----------
    released : ndarray of shape (n_candidates,)
        Noisy summed captured variances ``R_c``.
    n_components : ndarray of shape (n_candidates, n_folds)
        Released ``n_components_`` of each candidate in each fold.
    n_validation : ndarray of shape (n_folds,)
        Validation rows per fold (public).
    floor : ndarray of shape (n_candidates, n_folds)
        Released floor variance ``τ`` per row.
    selection_sigma : float
        Standard deviation of the noise added to each score.
    z : float, default=SELECTION_Z

    Returns
    -------
    adjusted : ndarray of shape (n_candidates,)
    penalty : ndarray of shape (n_candidates,)
        ``R_c − A_c``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.model_selection import floor_penalised_scores
    >>> released = np.array([300.0, 400.0, 405.0])  # k = 1, 2, 3 over 1000 rows
    >>> k = np.array([[1], [2], [3]])
    >>> adjusted, _ = floor_penalised_scores(released, k, np.array([1000]),
    ...                                      np.full((3, 1), 0.01), 1.0)
    >>> int(np.argmax(adjusted)) + 1  # the third component is only floor
    2
    """
    released = np.asarray(released, dtype=np.float64)
    k = np.asarray(n_components, dtype=np.float64)
    n_val = np.asarray(n_validation, dtype=np.float64)
    floor = np.asarray(floor, dtype=np.float64)
    expected = (k * n_val * floor).sum(axis=1)
    spread = np.sqrt(2.0 * (n_val * floor**2).sum(axis=1) + 2.0 * selection_sigma**2)
    penalty = expected + k.mean(axis=1) * z * spread
    return released - penalty, penalty


def _is_stateless(step):
    """A step whose fit learns nothing from the data."""
    return step is None or step == "passthrough" or isinstance(
        step, FunctionTransformer
    )


def _private_step(estimator):
    """``(prefix, index)`` of the private estimator inside ``estimator``.

    Refuses pipelines with a data-dependent step that is not private: its
    fit on the training folds would be released (through the scores and the
    refit) without noise.
    """
    if isinstance(estimator, _BasePrivatePCA):
        return "", None
    if not isinstance(estimator, Pipeline):
        raise TypeError(
            "PrivateGridSearchCV needs a private estimator of sklearn_dppca "
            "(PrivatePCA, ComplexGaussPCA, CoherentPowerPCA) or a Pipeline "
            f"holding one; got {type(estimator).__name__}."
        )
    private = [
        i for i, (_, step) in enumerate(estimator.steps)
        if isinstance(step, _BasePrivatePCA)
    ]
    if len(private) != 1:
        raise ValueError(
            "The Pipeline must hold exactly one private estimator of "
            f"sklearn_dppca; it holds {len(private)}."
        )
    for i, (name, step) in enumerate(estimator.steps):
        if i != private[0] and not _is_stateless(step):
            raise ValueError(
                f"Pipeline step {name!r} ({type(step).__name__}) is fitted on "
                "the data without privacy: its fit on each training fold would "
                "reach the scores and the refit without noise, and a supervised "
                "final step makes a row's effect on the scores unbounded. Only "
                "stateless steps (FunctionTransformer acting row by row, "
                "'passthrough') may stand beside the private estimator."
            )
    return estimator.steps[private[0]][0] + "__", private[0]


def _check_finite_output(estimator, index, X):
    """Refuse, before the charge, rows that the stateless steps before the
    private estimator turn into NaN or infinity (``np.log`` of 0, say): the
    candidate fits would otherwise fail on them after it, a failure that
    depends on the data."""
    head = clone(Pipeline(estimator.steps[:index]))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        Z = head.fit_transform(X)
    values = Z.data if hasattr(Z, "tocsr") else np.asarray(Z)
    if not np.all(np.isfinite(values)):
        raise ValueError(
            "The Pipeline's steps before the private estimator turn some rows "
            "into NaN or infinity; the search was refused before it spent any "
            "budget. Make those steps finite on every row the data can hold."
        )


def _check_splits(splits, n_samples):
    """Check that the validation folds partition the rows and that no split
    repeats a row (a row twice in one training fold would count twice in its
    fit's sensitivity); return the most training folds any row sits in."""
    in_test = np.zeros(n_samples, dtype=np.int64)
    in_train = np.zeros(n_samples, dtype=np.int64)
    for train, test in splits:
        train, test = np.asarray(train), np.asarray(test)
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
        overlap = np.intersect1d(train, test)
        if overlap.size:
            raise ValueError(
                "cv gives a split whose training and validation rows overlap."
            )
        np.add.at(in_test, test, 1)
        np.add.at(in_train, train, 1)
    if not np.all(in_test == 1):
        raise ValueError(
            "cv must put every row in exactly one validation fold (K-fold): the "
            "score vector's sensitivity rests on it. Some rows are in "
            f"{int(in_test.min())} and some in {int(in_test.max())} validation "
            "folds (ShuffleSplit and repeated splitters do this)."
        )
    return int(in_train.max())


def _resolve_cv(cv, n_samples):
    """The public splits: an int or a KFold, or an explicit list of splits."""
    if isinstance(cv, Integral):
        cv = KFold(n_splits=int(cv))
    if isinstance(cv, KFold):
        return list(cv.split(np.zeros((n_samples, 1))))
    if hasattr(cv, "split"):
        raise ValueError(
            f"cv={type(cv).__name__} is not supported: use an int, a KFold or a "
            "list of (train, test) index pairs. The folds must be chosen without "
            "the data (StratifiedKFold and GroupKFold read y or groups) and put "
            "every row in exactly one validation fold (ShuffleSplit does not)."
        )
    return [(np.asarray(tr), np.asarray(te)) for tr, te in cv]


def _truncated(full, n_components, whiten):
    """The candidate ``PrivatePCA(n_components, whiten)`` from a fit with all
    components, on the same release.

    PrivatePCA releases one noisy scatter matrix; ``n_components`` and
    ``whiten`` only select and scale its eigenpairs. With the same noise, a
    fit with ``n_components=k`` keeps the first ``k`` rows of the full fit's
    (sorted, sign-fixed) eigenvectors and variances, and its
    ``noise_variance_`` is the mean of the released variances beyond ``k``
    (valid when ``n_samples ≥ n_features``, so that the full fit keeps all
    eigenvalues).
    """
    est = copy.copy(full)  # the fitted state, without cloning's checks
    est.n_components, est.whiten = n_components, whiten
    state = {}
    variances = full.explained_variance_
    k = full.n_components_ if n_components is None else int(n_components)
    if not 1 <= k <= full.n_components_:
        raise ValueError(
            f"n_components={n_components} must be between 1 and "
            f"{full.n_components_} (the number of features)."
        )
    state.update(
        n_components_=k,
        components_=full.components_[:k],
        explained_variance_=variances[:k],
        explained_variance_ratio_=full.explained_variance_ratio_[:k],
        singular_values_=full.singular_values_[:k],
        noise_variance_=float(np.mean(variances[k:].astype(np.float64)))
        if k < variances.shape[0] else 0.0,
    )
    vars(est).update(state)
    return est


def _param_key(params, prefix):
    """Candidates with equal keys differ only in post-processing parameters."""
    shared = {prefix + p for p in _POST_PROCESSING}
    return tuple(sorted((k, repr(v)) for k, v in params.items() if k not in shared))


# --------------------------------------------------------------------------
# The search
# --------------------------------------------------------------------------
class PrivateGridSearchCV(MetaEstimatorMixin, BaseEstimator):
    """Grid search over a private estimator whose choice is private too.

    The familiar :class:`~sklearn.model_selection.GridSearchCV` surface for a
    private estimator of this package, or a Pipeline holding one beside
    stateless steps. Unlike ``GridSearchCV`` — whose exact validation scores
    make ``best_params_`` a noiseless function of the data — the whole
    search is ``(epsilon, delta)``-DP under the replacement of one row:
    the candidate fits, the released scores, the choice and the refit are
    composed exactly in Gaussian DP and charged **once**, before the data is
    read, as ``μ* = gdp_mu(epsilon, delta)``.

    Budget (fractions of ``μ*²``, :data:`SEARCH_BUDGET_SHARES`): 0.45 for the
    candidate fits, 0.1 for the score vector, 0.45 for the refit (without a
    refit, 9/11 and 2/11). A row sits in ``K − 1`` training folds, so the
    fits of one mechanism compose as ``K − 1`` releases: with ``G``
    mechanisms (groups of candidates that share a release) of weights
    ``ω_g``, each fits with ``μ_g² = 0.45 μ*² ω_g / ((K − 1) Σ ω)``, at
    ``epsilon = gdp_epsilon(μ_g, delta)`` and an unlimited private
    accountant of its own. PrivatePCA candidates that differ only in
    ``n_components`` or ``whiten`` are one group: one fit per fold. Other
    candidates are a group each. An ``epsilon`` value in the grid is not an
    ε: it is the group's weight ``ω_g ∈ (0, 1]`` (default 1), the fraction
    of the fits' share it gets relative to the others.

    Score: the captured variance of each validation row under the
    candidate's projection, ``‖P clip_C(x_i − m̂)‖² ∈ [0, C²]``, summed over
    all folds; released with Gaussian noise of standard deviation
    ``√(Σ_c C_c⁴) / μ_sel`` (a row is in one validation fold, so it moves
    each candidate's sum by at most ``C_c²``). The best candidate maximises
    the floor-penalised score (:func:`floor_penalised_scores`), which does
    not reward components that only capture the noise floor.

    Parameters
    ----------
    estimator : estimator
        A :class:`~sklearn_dppca.PrivatePCA`,
        :class:`~sklearn_dppca.ComplexGaussPCA`,
        :class:`~sklearn_dppca.CoherentPowerPCA`, or a Pipeline with one of
        them and otherwise only stateless steps (``FunctionTransformer``
        acting row by row, ``"passthrough"``). Its ``data_norm`` must be a
        public number: it bounds the score.
    param_grid : dict or list of dicts
        As for ``GridSearchCV``. ``accountant``, ``random_state`` and
        ``delta`` are set by the search and may not appear.
    scoring : {"captured_variance"} or None, default=None
        The bounded score; ``None`` means ``"captured_variance"``. Scores
        that are not bounded per row (``"r2"``, log-likelihoods, callables)
        are refused: their sensitivity is unknown.
    cv : int, KFold or iterable of (train, test), default=5
        Folds chosen without the data whose validation parts partition the
        rows. An int means ``KFold(cv)``.
    epsilon : float, default=1.0
        ``ε`` of the whole search.
    delta : float, default=1e-6
        ``δ`` of the whole search.
    refit : bool, default=True
        Refit the chosen candidate on all rows (with its share).
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
        ``params``, ``param_<name>``, ``released_test_score`` (noisy summed
        captured variance), ``floor_penalty``, ``adjusted_test_score`` and
        ``rank_test_score``, ``mean_n_components`` and
        ``floor_per_component`` (``Σ_f n_val,f τ_f``, what one floor
        component is expected to capture), all released values. No exact
        score and no timing (they depend on the data).
    best_index_ : int
        Candidate with the best ``adjusted_test_score``.
    best_params_ : dict
    best_score_ : float
        Its ``adjusted_test_score``.
    best_estimator_ : estimator
        The chosen candidate refitted on all rows (``refit=True``), with the
        refit's ``epsilon`` and the search's ``accountant``.
    n_splits_ : int
    selection_sigma_ : float
        Standard deviation of the noise on each released score.
    fit_epsilons_ : list of float
        ``epsilon`` each mechanism group was fitted with, per fold.
    privacy_spent_ : tuple of float
        ``(epsilon, delta)`` of the whole search, from its composed ``μ``.
    n_features_in_ : int

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
    >>> search.best_params_
    {'n_components': 2}
    >>> budget.n_charges, round(budget.spent[0], 6)
    (1, 3.0)
    """

    _parameter_constraints: dict = {
        "estimator": [HasMethods(["fit"])],
        "param_grid": [dict, list],
        "scoring": [str, callable, None],
        "cv": ["cv_object"],
        "epsilon": [Interval(Real, 0, math.inf, closed="neither")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "refit": ["boolean"],
        "accountant": [BudgetAccountant, None],
        "random_state": ["random_state", np.random.Generator],
        "n_jobs": [Integral, None],
    }

    def __init__(self, estimator, param_grid, *, scoring=None, cv=5, epsilon=1.0,
                 delta=1e-6, refit=True, accountant=None, random_state=None,
                 n_jobs=None):
        self.estimator = estimator
        self.param_grid = param_grid
        self.scoring = scoring
        self.cv = cv
        self.epsilon = epsilon
        self.delta = delta
        self.refit = refit
        self.accountant = accountant
        self.random_state = random_state
        self.n_jobs = n_jobs

    # ------------------------------------------------------------- planning
    def _check_scoring(self):
        if self.scoring in (None, "captured_variance"):
            return
        raise ValueError(
            f"scoring={self.scoring!r} is not supported: a private selection "
            "needs a score whose per-row contribution is bounded, so that the "
            "released score vector has a known sensitivity. Use "
            "scoring='captured_variance' (each validation row adds "
            "‖P clip_C(x − m̂)‖² ∈ [0, C²]). Unbounded scores (r2, squared "
            "errors, log-likelihoods) and arbitrary callables are refused."
        )

    def _candidates(self, prefix):
        """The grid's candidates, each with its private step's settings."""
        candidates = list(ParameterGrid(self.param_grid))
        if not candidates:
            raise ValueError("param_grid has no candidate.")
        for params in candidates:
            owned = [p for p in params if p.removeprefix(prefix) in _OWNED]
            if owned:
                raise ValueError(
                    f"param_grid may not set {owned}: the search sets the "
                    "accountant, the random state and delta of every fit."
                )
            weight = params.get(prefix + "epsilon", 1.0)
            if not (isinstance(weight, Real) and 0.0 < weight <= 1.0):
                raise ValueError(
                    f"An epsilon in param_grid is the candidate's fraction of "
                    f"the search's fit budget and must be in (0, 1]; got "
                    f"{weight!r}."
                )
        return candidates

    def _plan(self, candidates, prefix, folds_per_row):
        """Groups, their fit ε, the selection noise and the refit ε."""
        mu_total = gdp_mu(self.epsilon, self.delta)
        shares = dict(SEARCH_BUDGET_SHARES)
        if not self.refit:
            shares.pop("refit")
        total = sum(shares.values())
        shares = {k: w / total for k, w in shares.items()}

        groups, bounds = {}, []
        for c, params in enumerate(candidates):
            est = clone(self.estimator).set_params(**params)
            private = est.get_params()
            data_norm = private[prefix + "data_norm"]
            if not (isinstance(data_norm, Real) and 0 < data_norm < math.inf):
                raise ValueError(
                    f"The private estimator's data_norm={data_norm!r} must be a "
                    "public positive number for a private search: it bounds "
                    "each row's score by data_norm²."
                )
            step = _get_step(est, prefix)
            if isinstance(step, CoherentPowerPCA) and step._mode() == "repetition":
                raise ValueError(
                    "CoherentPowerPCA with selection='repetition' (and clip_radius "
                    "or n_iter 'auto') is accounted in Rényi DP, not Gaussian DP: "
                    "its fits cannot be composed exactly in the search's budget. "
                    "Use the default selection='gdp', or a fixed clip_radius and "
                    "n_iter."
                )
            bounds.append(float(data_norm) ** 2)
            shareable = type(step) is PrivatePCA and isinstance(
                private[prefix + "n_components"], (Integral, type(None))
            )
            key = (shareable, _param_key(params, prefix) if shareable else c)
            groups.setdefault(key, []).append(c)
        weights = [
            float(candidates[idx[0]].get(prefix + "epsilon", 1.0))
            for idx in groups.values()
        ]
        mu_fit_sq = shares["fits"] * mu_total**2 / max(folds_per_row, 1)
        fit_eps = []
        for w in weights:
            mu_g = math.sqrt(mu_fit_sq * w / sum(weights))
            eps_g = gdp_epsilon(mu_g, self.delta, tidy=False)  # calibrates a fit
            if not (eps_g > 0 and math.isclose(gdp_mu(eps_g, self.delta), mu_g,
                                               rel_tol=1e-9)):
                raise ValueError(
                    f"The candidates' share of epsilon={self.epsilon} is too "
                    "small to calibrate one fit; raise epsilon or shrink the grid."
                )
            fit_eps.append(eps_g)
        mu_sel = mu_total * math.sqrt(shares["selection"])
        # L2 sensitivity of the score vector: one row moves candidate c's sum
        # by at most C_c² (it is in one validation fold), so √(Σ_c C_c⁴).
        sensitivity = math.sqrt(sum(b * b for b in bounds))
        mu_refit = mu_total * math.sqrt(shares.get("refit", 0.0))
        composed = math.sqrt(
            folds_per_row * sum(
                gdp_mu(e, self.delta) ** 2 for e in fit_eps
            ) + mu_sel**2 + mu_refit**2
        )
        return {
            "mu": mu_total,
            "groups": list(groups.values()),
            "shared": [key[0] for key in groups],
            "fit_eps": fit_eps,
            "sigma_sel": sensitivity / mu_sel,
            "refit_eps": (gdp_epsilon(mu_refit, self.delta, tidy=False)
                          if self.refit else None),
            "spent": (gdp_epsilon(composed, self.delta), self.delta),
            "bounds": bounds,
        }

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=False)
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
        self._check_scoring()
        prefix, index = _private_step(self.estimator)
        candidates = self._candidates(prefix)
        n_samples = _num_rows(X)
        splits = _resolve_cv(self.cv, n_samples)
        folds_per_row = _check_splits(splits, n_samples)
        plan = self._plan(candidates, prefix, folds_per_row)
        accountant = self.accountant or get_default_accountant()
        accountant.check(plan["mu"])  # refused before the data is read
        X = validate_data(self, X, accept_sparse=("csr", "csc"),
                          dtype=[np.float64, np.float32], ensure_min_samples=2)
        if _is_first(self.estimator, prefix):  # ranks must fit every fold
            limit = min(X.shape[1], min(len(train) for train, _ in splits))
            for params in candidates:
                k = params.get(prefix + "n_components")
                if isinstance(k, Integral) and not 1 <= k <= limit:
                    raise ValueError(
                        f"n_components={k} must be between 1 and {limit}, the "
                        "features and the smallest training fold's rows."
                    )
        if index:  # the stateless steps before the private one, on every row
            _check_finite_output(self.estimator, index, X)
        accountant.spend(plan["mu"])  # the whole search, once
        if self.random_state is not None:
            _warn_leak(
                f"random_state={self.random_state!r} fixes the noise of the whole "
                "search: it is not private. Leave random_state=None."
            )
        rng = make_generator(self.random_state)
        seeds = [rng.spawn(len(plan["groups"])) for _ in splits]
        with warnings.catch_warnings():
            # The candidates' generators come from this search's generator.
            warnings.simplefilter("ignore", PrivacyLeakWarning)
            folds = Parallel(n_jobs=self.n_jobs, backend="threading")(
                delayed(self._score_fold)(X, y, train, test, candidates, plan,
                                          prefix, seeds[f])
                for f, (train, test) in enumerate(splits)
            )
        exact = np.sum([fold[0] for fold in folds], axis=0)
        k = np.stack([fold[1] for fold in folds], axis=1)
        floor = np.stack([fold[2] for fold in folds], axis=1)
        n_val = np.array([len(test) for _, test in splits])
        released = exact + rng.normal(0.0, plan["sigma_sel"], size=exact.shape)
        del exact  # never stored: only the noisy scores leave
        adjusted, penalty = floor_penalised_scores(
            released, k, n_val, floor, plan["sigma_sel"]
        )
        self.best_index_ = int(np.argmax(adjusted))
        self.best_params_ = candidates[self.best_index_]
        self.best_score_ = float(adjusted[self.best_index_])
        self.cv_results_ = _results(candidates, released, penalty, adjusted, k,
                                    (n_val * floor).sum(axis=1))
        self.n_splits_ = len(splits)
        self.selection_sigma_ = plan["sigma_sel"]
        self.fit_epsilons_ = plan["fit_eps"]
        if self.refit:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", PrivacyLeakWarning)
                best = self._fit_candidate(self.best_params_, prefix,
                                           plan["refit_eps"], rng.spawn(1)[0], X, y)
            # Later refits by the user charge the user's budget, with the
            # estimator's own randomness.
            original = self.estimator.get_params()[prefix + "random_state"]
            best.set_params(**{prefix + "accountant": self.accountant,
                               prefix + "random_state": original})
            self.best_estimator_ = best
        self.privacy_spent_ = reported_spend(plan["spent"], self.epsilon)
        return self

    def _fit_candidate(self, params, prefix, epsilon, generator, X, y):
        """A candidate fitted at ``epsilon`` on a throwaway accountant: the
        search has paid for it already. Its own ``privacy_spent_`` must be
        what was paid for."""
        fitted = clone(self.estimator).set_params(**{
            **params,
            prefix + "epsilon": epsilon,
            prefix + "delta": self.delta,
            prefix + "accountant": BudgetAccountant(),
            prefix + "random_state": generator,
        }).fit(X, y)
        spent = _get_step(fitted, prefix).privacy_spent_
        if not math.isclose(spent[0], epsilon, rel_tol=1e-6):
            raise RuntimeError(
                f"A candidate spent epsilon={spent[0]:.6g} where the search paid "
                f"for {epsilon:.6g}; its accounting does not fit the search."
            )
        return fitted

    def _score_fold(self, X, y, train, test, candidates, plan, prefix, seeds):
        """Exact summed scores, released ``n_components_`` and floors of one
        fold for every candidate. The scores stay inside ``fit``."""
        X_train = _safe_indexing(X, train)
        y_train = None if y is None else _safe_indexing(y, train)
        X_val = _safe_indexing(X, test)
        if hasattr(X_val, "toarray"):
            X_val = X_val.toarray()
        m = len(candidates)
        scores, k, floor = np.zeros(m), np.zeros(m), np.zeros(m)
        for g, members in enumerate(plan["groups"]):
            params = candidates[members[0]]
            shared = plan["shared"][g]
            if shared:  # one release with every component serves the group
                params = {**params, prefix + "n_components": None,
                          prefix + "whiten": False}
            fitted = self._fit_candidate(params, prefix, plan["fit_eps"][g],
                                         seeds[g], X_train, y_train)
            step = _get_step(fitted, prefix)
            rows = _before_step(fitted, prefix, X_val)
            if not shared:
                (c,) = members
                k[c] = step.n_components_
                scores[c] = float(np.sum(captured_variance_rows(
                    rows, step.mean_, step.components_, step.data_norm_)))
                floor[c] = float(step.noise_variance_)
                continue
            gains = _cumulative_gains(rows, step)
            tau = float(np.median(step.explained_variance_))
            default = self.estimator.get_params()[prefix + "n_components"]
            for c in members:
                cand = _truncated(
                    step,
                    candidates[c].get(prefix + "n_components", default),
                    candidates[c].get(prefix + "whiten", False),
                )
                k[c] = cand.n_components_
                scores[c] = float(gains[cand.n_components_ - 1])
                floor[c] = tau
        return scores, k, floor

    # ----------------------------------------------------------- delegation
    def _best_has(attr):
        def check(self):
            if hasattr(self, "best_estimator_"):
                return hasattr(self.best_estimator_, attr)
            return hasattr(self.estimator, attr)
        return check

    @available_if(_best_has("transform"))
    def transform(self, X):
        """``best_estimator_.transform(X)``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.transform(X)

    @available_if(_best_has("inverse_transform"))
    def inverse_transform(self, X):
        """``best_estimator_.inverse_transform(X)``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.inverse_transform(X)

    @available_if(_best_has("score"))
    def score(self, X, y=None):
        """``best_estimator_.score(X)`` (for PCA: the PPCA log-likelihood)."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.score(X, y)

    @available_if(_best_has("score_samples"))
    def score_samples(self, X):
        """``best_estimator_.score_samples(X)``."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.score_samples(X)


def _get_step(estimator, prefix):
    return estimator.named_steps[prefix[:-2]] if prefix else estimator


def _is_first(estimator, prefix):
    """Whether the private step sees the input's features as they are."""
    return not prefix or estimator.steps[0][0] == prefix[:-2]


def _before_step(fitted, prefix, X):
    """Rows as the private step sees them: through the (stateless) steps
    before it."""
    if not prefix:
        return X
    name = prefix[:-2]
    for step_name, step in fitted.steps:
        if step_name == name:
            return X
        if step is not None and step != "passthrough":
            X = step.transform(X)
    return X


def _cumulative_gains(rows, step):
    """Summed captured variance of the rows under the first ``k`` released
    components of a full fit, for every ``k``: entry ``k − 1`` is the score
    of the truncation to ``k`` components. The components are orthonormal
    eigenvectors, so each row's partial sums are at most ``‖y‖² ≤ C²``; the
    clip makes the bound exact in floating point."""
    centred = _clip_rows(np.asarray(rows, dtype=np.float64) - step.mean_,
                         step.data_norm_)
    projected = centred @ step.components_.astype(np.float64).T
    per_row = np.clip(np.cumsum(projected**2, axis=1), 0.0, step.data_norm_**2)
    return per_row.sum(axis=0)


def _num_rows(X):
    shape = getattr(X, "shape", None)
    return int(shape[0]) if shape is not None else len(X)


def _results(candidates, released, penalty, adjusted, k, floor):
    order = np.argsort(-adjusted, kind="stable")
    rank = np.empty(len(candidates), dtype=np.int32)
    rank[order] = np.arange(1, len(candidates) + 1)
    results = {"params": candidates}
    for name in sorted({p for c in candidates for p in c}):
        column = np.ma.MaskedArray(np.empty(len(candidates), dtype=object),
                                   mask=True)
        for i, c in enumerate(candidates):
            if name in c:
                column[i] = c[name]
        results[f"param_{name}"] = column
    results.update(
        released_test_score=released,
        floor_penalty=penalty,
        adjusted_test_score=adjusted,
        rank_test_score=rank,
        mean_n_components=k.mean(axis=1),
        floor_per_component=floor,
    )
    return results
