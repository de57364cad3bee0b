r"""Private model selection: a grid search whose choice is private too.

:class:`PrivateGridSearchCV` has the surface of scikit-learn's
:class:`~sklearn.model_selection.GridSearchCV`, but everything it releases —
the fitted candidates it never shows, the per-fold scores, the choice of the
best candidate and the refitted estimator — is one
:math:`(\varepsilon, \delta)`-DP release, composed exactly in Gaussian
differential privacy and charged once to a
:class:`~sklearn_dppca.BudgetAccountant` (:doc:`/model_selection`,
:ref:`privacy-accounting`).

:func:`plan_search` is the whole privacy analysis of a search: a pure
function of the grid and public values (:math:`n`, :math:`d`, the folds) that
clones and checks every candidate, groups those that share a release, and
fixes every :math:`\mu` and the charge before the data is read. ``fit`` only
executes the plan:

1. **Candidate fits.** Every group of candidates is fitted on every training
   fold at :math:`\mu_g`. A row sits in :math:`K - 1` training folds, so the
   fits of a group compose as :math:`K - 1` releases (under replacement the
   fold that does not hold the row does not depend on it). PrivatePCA
   candidates that differ only in ``n_components`` or ``whiten`` are
   post-processing of one release: one fit per fold
   (``n_components=None``, truncated).
2. **Scores.** The score of a candidate on a fold is the captured variance of
   the fold's validation rows,
   :math:`\sum_i \lVert P \operatorname{clip}_C(x_i - \hat m) \rVert^2`, each
   term in :math:`[0, C^2]`. Each row is in exactly one validation fold, so
   the matrix of candidate × fold scores has L2 sensitivity
   :math:`\sqrt{\sum_c C_c^4}` given the candidate fits (paid for in step 1):
   the same as the vector of their sums. It is released with Gaussian noise
   at :math:`\mu_{\mathrm{sel}}`.
3. **Choice.** Post-processing of the noisy scores and of the released
   spectra: the floor-penalised score of :func:`floor_penalised_scores`.
4. **Refit** of the chosen candidate on all rows at
   :math:`\mu_{\mathrm{refit}}`; a ``PrivatePCA`` weighs its release with
   its fold fits' releases pooled (post-processing; docs/privacy.rst, "The
   fold fits' releases, pooled for the refit").

Candidates that end in a private supervised head
(:mod:`sklearn_dppca.linear_model`) are searched with the same shares and
bounded, noisy accuracy, balanced accuracy, squared-error or R² scores.
:func:`private_cross_validate` and :func:`private_cross_val_score` are
scikit-learn's ``cross_validate`` and ``cross_val_score`` with noisy scores:
a search of one candidate without a refit.

The plan lives in the private module ``_search_plan`` (pure functions of
public values), its execution in ``_search_run`` (the bounded scores, the
fold fits, the released results), the supervised search's in
``_supervised_search``; this module holds the estimator and the
cross-validation functions (:doc:`/architecture`).
"""

import math
import warnings
from numbers import Real

import numpy as np
from joblib import Parallel, delayed
from sklearn.base import BaseEstimator, MetaEstimatorMixin, _fit_context
from sklearn.exceptions import FitFailedWarning
from sklearn.utils import get_tags
from sklearn.utils._param_validation import (
    HasMethods,
    Interval,
    StrOptions,
)
from sklearn.utils._repr_html.estimator import _VisualBlock
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import (
    check_consistent_length,
    check_is_fitted,
    validate_data,
)

from . import _array_api, _search_plan, _search_run
from . import _supervised_search as _supervised
from ._base import reported_spend
from ._dask import (
    as_dask_array,
    check_numeric_columns,
    gather_rows,
    has_sparse_chunks,
    is_dask_collection,
    saturate_big_numbers,
)
from ._defaults import _carry_default, _keep_carried_default, _resolve_accountant
from ._fit_guards import _all_or_nothing, _FloatParamsMixin
from ._nan_probe import search_nan_columns
from ._param_docs import N_JOBS_CONSTRAINT
from ._public_encoders import (
    check_encoded_rows,
    is_public_encoding,
    refuse_inferred_categories,
)
from ._search_plan import (
    SearchPlan,
    _locate_private_step,
    _resolve_cv,
    caching_params,
    candidate_heads,
    empty_rows,
    plan_search,
    rows_kind,
)
from ._search_run import (
    _best_index,
    _check_heads,
    _check_public_scalers,
    _fit_candidate,
    _results,
    _score_failures,
    _score_fold,
    _shape,
    captured_variance_rows,
    captured_variance_score,
    charged_search,
    check_accountants,
    check_failures,
    check_gathering_heads,
    check_readers,
    floor_penalised_scores,
    refit_pool,
    refuse_infinity,
)
from .noise import dense_noise, make_generator
from .privacy import (
    BudgetAccountant,
    _warn_if_delta_large,
    _warn_leak,
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

#: Fractions of :math:`\mu^{*2}` of the search: the candidate fits on the
#: training folds, the released score matrix, and the refit on all rows.
#: Without a refit its share is dropped and the others rescaled to sum to 1.
#: (Defined with the plan, in ``_search_plan``.)
SEARCH_BUDGET_SHARES = _search_plan.SEARCH_BUDGET_SHARES

#: Margin, in standard deviations, that each extra component must clear in
#: the floor-penalised score (see :func:`floor_penalised_scores`; defined in
#: ``_search_run``).
SELECTION_Z = _search_run.SELECTION_Z

#: The one bounded score, by its name for ``scoring`` and ``refit``.
SCORER_NAME = "captured_variance"


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


class PrivateGridSearchCV(MetaEstimatorMixin, _FloatParamsMixin, BaseEstimator):
    r"""Grid search over a private estimator whose choice is private too.

    The :class:`~sklearn.model_selection.GridSearchCV` surface for a private
    estimator of this package, or a Pipeline holding one beside stateless
    steps. ``GridSearchCV`` scores the candidates on the validation rows
    without noise, so its ``best_params_`` is a noiseless function of the
    data; here the candidate fits, the per-fold scores, the choice of the
    best candidate and its refit are all private. The whole search is
    :math:`(\varepsilon, \delta)`-differentially private under the
    replacement of one row, composed exactly and charged **once**, before
    the data is read.

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
    cv : None, int, KFold or iterable of (train, test), default=5
        Folds chosen without the data whose validation parts partition the
        rows; the pairs may be indices or boolean masks. An int means
        ``KFold(cv)``, ``None`` 5 folds (as in scikit-learn).
    epsilon : float, default=1.0
        Privacy parameter :math:`\varepsilon > 0` of the whole search.
    delta : float, default=1e-6
        Privacy parameter :math:`\delta` in (0, 1) of the whole search.
    refit : bool, "captured_variance" or callable, default=True
        Refit the chosen candidate on all rows (with its share). A callable
        takes ``cv_results_`` and returns the index of the candidate to
        refit (post-processing of released values); ``best_score_`` is then
        not set, and a grid with a candidate that cannot be fitted (see
        ``error_score``) is refused before the charge, since the callable
        could choose it. The ranked refit skips such candidates.
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
        Shared, not copied, by :func:`~sklearn.base.clone`. A step of the
        estimator (or of the grid) with an accountant of its own other than
        this one is refused before the charge: it would not be charged.
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
        the data). A failed candidate's scores are ``error_score``. For
        candidates that end in a private head, each candidate's statistics
        are summed over the folds and released once (:math:`\sqrt{K}` less
        noise in ``mean_test_score`` than :math:`K` fold releases at the
        same budget): ``mean_test_score`` is the score of all validation
        rows pooled, there are no ``split<i>_test_score`` keys and
        ``std_test_score`` is NaN (not released);
        :func:`private_cross_validate` releases each fold's score.
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
        Standard deviation of the noise on each released fold score (for a
        private head, on each released statistic pooled over the folds).
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
    >>> ranges = np.array([1.2, 0.9, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3])  # public
    >>> X = rng.uniform(-1, 1, size=(20_000, 8)) * ranges  # feature j in ±ranges[j]
    >>> C = float(np.linalg.norm(ranges))  # from the ranges, not the rows
    >>> budget = BudgetAccountant(epsilon=3.0)
    >>> search = PrivateGridSearchCV(PrivatePCA(data_norm=C),
    ...                              {"n_components": [1, 2, 3, 4]},
    ...                              epsilon=3.0, accountant=budget).fit(X)
    >>> search.best_params_["n_components"]  # doctest: +SKIP
    2
    >>> search.best_params_["n_components"] in (2, 3)  # 2 planted; 3 ~1 in 50
    True
    >>> budget.n_charges, round(budget.spent[0], 6)
    (1, 3.0)
    """

    # a supervised search releases its statistics pooled over the folds;
    # private_cross_validate, whose output is the fold scores, turns it off
    _pool_folds = True

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
        "n_jobs": N_JOBS_CONSTRAINT,
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
        names = None
        if is_dask_collection(X) and not has_sparse_chunks(X):
            # read chunk by chunk, never gathered; its rows counted privately
            X, names = as_dask_array(X)
        n_samples, n_features = _shape(X)
        splits = _resolve_cv(self.cv, n_samples)
        if supervised:
            return self._fit_supervised(X, y, splits, n_samples, n_features, names)
        plan = plan_search(self.estimator, self.param_grid, epsilon=self.epsilon,
                           delta=self.delta, splits=splits, n_samples=n_samples,
                           n_features=n_features,
                           refit=bool(self.refit), fit_weights=self.fit_weights,
                           rows=rows_kind(X, n_features, names),
                           empty=empty_rows(X))
        failed = check_failures(plan.candidates, self.error_score, self.refit)
        accountant = _resolve_accountant(self)
        check_accountants(plan.candidates, accountant)
        accountant.check(mu=plan.mu)  # refused before the data is read
        # the steps before a private one map a Dask array's chunks, planned
        heads = [candidate_heads(c) for c in plan.candidates if c.error is None]
        readers = [(_locate_private_step(c.estimator)[2], candidate_heads(c))
                   for c in plan.candidates if c.error is None]
        nan = search_nan_columns(heads, X, n_features, names)  # public
        checked, finite = self._validate_rows(X, names, heads, readers, nan)
        _check_public_scalers(plan, self.n_features_in_,
                              getattr(self, "feature_names_in_", None))
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
        check_readers(readers, X, checked,
                      getattr(self, "feature_names_in_", None), finite, nan)
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
        accountant.spend(mu=plan.mu, estimator=self)  # the whole search, once
        with charged_search():  # what is raised from here says it was spent
            rng = self._charged(n_samples)
            seeds = [rng.spawn(len(plan.groups)) for _ in splits]
            with private_computation():  # a warning here would depend on the rows
                # After the charge: whatever the heads do on the rows (a user's
                # function that fails on some value) is counted, not a refusal.
                _check_heads(plan, X, min(len(train) for train, _ in splits),
                             names)
                folds = Parallel(n_jobs=self.n_jobs, backend="threading")(
                    delayed(_score_fold)(X, y, train, test, plan, self.delta,
                                         seeds[f], names)
                    for f, (train, test) in enumerate(splits)
                )
                exact = np.stack([fold[0] for fold in folds], axis=1)
                released = exact + dense_noise(rng, exact.shape, plan.selection_sigma)
                del exact  # never stored: only the noisy scores leave
                state = self._select(plan, released, folds, splits)
                if self.refit:
                    cand = plan.candidates[state["best_index_"]]
                    best = _fit_candidate(
                        cand, plan.refit_epsilon, self.delta, rng.spawn(1)[0], X, y,
                        pool=refit_pool(plan, state["best_index_"], folds),
                        names=names)
                    # Later refits by the user charge the search's accountant, with
                    # the candidate's own randomness.
                    own = _locate_private_step(cand.estimator)[2].random_state
                    best.set_params(**caching_params(cand.estimator),
                                    **{cand.prefix + "accountant": self.accountant,
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

    def _charged(self, n_samples):
        """The warnings of a charged search (on public values) and its
        generator of noise."""
        _warn_if_delta_large(self.delta, n_samples)
        if self.random_state is not None:
            _warn_leak(
                f"random_state={self.random_state!r} fixes the noise of the whole "
                "search: it is not private. Leave random_state=None."
            )
        return make_generator(self.random_state)

    def _fit_supervised(self, X, y, splits, n_samples, n_features, names):
        """The search over supervised candidates (every fitted step private;
        :mod:`sklearn_dppca._supervised_search`)."""
        plan = _supervised.plan_supervised_search(
            self.estimator, self.param_grid, epsilon=self.epsilon, delta=self.delta,
            splits=splits, n_samples=n_samples, n_features=n_features,
            scoring=self.scoring, refit=bool(self.refit), fit_weights=self.fit_weights,
            rows=rows_kind(X, n_features, names), empty=empty_rows(X))
        failed = check_failures(plan.candidates, self.error_score, self.refit)
        accountant = _resolve_accountant(self)
        check_accountants(plan.candidates, accountant)
        accountant.check(mu=plan.mu)  # refused before the data is read
        heads = [_supervised.heads_of(c) for c in plan.candidates
                 if c.error is None]
        # public: the shape, before any read; a private head first in its
        # Pipeline gathers what the public steps before it map
        check_gathering_heads(X, [
            _supervised.heads_of(c) for c in plan.candidates if c.error is None
            and not isinstance(c.private[0][1], _search_plan._BasePrivatePCA)])
        readers = [(c.private[0][1], _supervised.heads_of(c))
                   for c in plan.candidates if c.error is None]
        nan = search_nan_columns(heads, X, n_features, names)  # public
        checked, finite = self._validate_rows(X, names, heads, readers, nan)
        _check_public_scalers(plan, self.n_features_in_,
                              getattr(self, "feature_names_in_", None))
        X = X if hasattr(X, "iloc") else checked
        y = _supervised.check_labels(plan, y, n_samples)
        check_readers(readers, X, checked,
                      getattr(self, "feature_names_in_", None), finite, nan)
        if failed:
            warnings.warn(
                f"{len(failed)} of the {len(plan.candidates)} candidates cannot "
                f"be fitted; their scores are set to {self.error_score!r} and "
                "they get no budget (a public reason, found before any budget "
                "was spent):\n"
                + "\n".join(f"{c.params}: {c.error!r}" for c in failed),
                FitFailedWarning)
        if self.verbose > 0:
            print(f"Fitting {len(splits)} folds for each of {len(plan.candidates)} "
                  f"candidates: scoring={plan.scoring!r} released with noise "
                  f"sigma={plan.selection_sigma:.6g}.")
        accountant.spend(mu=plan.mu, estimator=self)  # the whole search, once
        with charged_search():  # what is raised from here says it was spent
            vars(self).update(_supervised.run(self, plan, X, y, splits,
                                              self._charged(n_samples),
                                              pooled=self._pool_folds,
                                              names=names))
        self.multimetric_ = False
        self.n_splits_ = len(splits)
        self.selection_sigma_ = plan.selection_sigma
        self.privacy_spent_ = reported_spend(plan.spent, self.epsilon)
        return self

    def _validate_rows(self, X, names=None, heads=None, readers=(),
                       nan=False):
        """``X`` checked (numeric, at least 2 rows, no infinity), and whether
        it is finite where a Dask array's pass answered it for ``readers``
        (:func:`refuse_infinity`; else ``None``); an Array API
        array stays in its namespace and on its device, a Dask array (of
        NumPy chunks, ``names`` its DataFrame's columns) lazy: its shape and
        names only. Missing values (NaN) pass here for a Pipeline's public
        fill or a step's ``non_finite="clip"`` (:func:`check_readers` then
        refuses, before the charge, any a bare step with
        ``non_finite="raise"`` would read, or any in the columns ``nan``,
        where the steps before some private step refuse NaN,
        :func:`search_nan_columns`).

        A DataFrame with text columns passes where every candidate's
        Pipeline (``heads``: the steps before each private step) opens with a
        public encoder (:mod:`~sklearn_dppca._public_encoders`), which makes
        its numbers: the rows its encoders cannot read are refused here,
        before the charge (review 90 F1)."""
        if (heads and hasattr(X, "iloc")  # by the steps alone (review 95 F1)
                and all(h and is_public_encoding(h[0]) for h in heads)):
            refuse_inferred_categories(X)
            check_encoded_rows(heads, X)
            validate_data(self, X, skip_check_array=True)  # names, width
            return X, None
        if is_dask_collection(X) and not has_sparse_chunks(X):
            # chunk by chunk, as in memory (review 100 F1); one pass (mend 102)
            finite = refuse_infinity(X, readers, nan)
            self.n_features_in_ = X.shape[1]
            vars(self).pop("feature_names_in_", None)
            if names is not None:
                self.feature_names_in_ = names
            return X, finite
        X = saturate_big_numbers(gather_rows(X))
        check_numeric_columns(X)
        namespace = _array_api.namespace(X)
        if namespace is not None:
            X = _array_api.plain(X, namespace[0])  # complex refused, as a fit does
            return validate_data(self, X, ensure_min_samples=2,
                                 dtype=_array_api.float_dtypes(*namespace),
                                 ensure_all_finite="allow-nan"), None
        return validate_data(self, X, accept_sparse=("csr", "csc"),
                             dtype=[np.float64, np.float32], ensure_min_samples=2,
                             ensure_all_finite="allow-nan"), None

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
        _score_failures(scores, plan.candidates, self.error_score)
        results = _results(plan.candidates, scores, released.sum(axis=1), penalty,
                           k.mean(axis=1), (n_val * floor).sum())
        best = _best_index(self.refit, results, plan.candidates)
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
        if hasattr(X, "iloc"):  # as fit: the names checked, the frame to the
            # steps (a ColumnTransformer selects by them: review 95 F3)
            validate_data(self, X, reset=False, skip_check_array=True)
            return self.scorer_(self.best_estimator_, X, y)
        X = validate_data(self, gather_rows(X), reset=False,
                          accept_sparse=("csr", "csc"), dtype=None,
                          ensure_all_finite=False)
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
    cv : None, int, KFold or iterable of (train, test), default=5
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
        Charged once; ``None``: the default accountant. A step's own
        accountant other than this one is refused, as by
        :class:`PrivateGridSearchCV`.
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
    if is_dask_collection(X) and not has_sparse_chunks(X):
        X = as_dask_array(X)[0]  # its rows counted once, privately, for both
    if return_indices:  # resolved once: the splits the search uses are returned
        cv = _resolve_cv(cv, _shape(X)[0])
    search = PrivateGridSearchCV(
        estimator, {}, scoring=scoring, cv=cv, epsilon=epsilon, delta=delta,
        refit=False, error_score=error_score,
        return_train_score=return_train_score, verbose=verbose,
        accountant=accountant, random_state=random_state, n_jobs=n_jobs,
    )
    search._pool_folds = False  # the output is each fold's score
    search.fit(X, y)
    scores = np.array([search.cv_results_[f"split{f}_test_score"][0]
                       for f in range(search.n_splits_)])
    result = {"test_score": scores, "privacy_spent": search.privacy_spent_}
    if return_indices:
        result["indices"] = {"train": [np.asarray(t) for t, _ in cv],
                             "test": [np.asarray(t) for _, t in cv]}
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
