"""The execution of a private search's plan, after its one charge: the
bounded scores, the fold fits and the released results. Nothing here
decides what is released or what it costs (``_search_plan``).
"""

import contextlib
import math
import re
from numbers import Integral, Real

import numpy as np
from scipy import sparse
from scipy.stats import rankdata
from sklearn.base import clone
from sklearn.pipeline import Pipeline
from sklearn.utils import _safe_indexing
from sklearn.utils.validation import check_is_fitted, validate_data

from . import _array_api
from ._box import check_box
from ._dask import as_dask_array, is_dask_collection, saturate_big_numbers
from ._norm_plan import check_data_norm_range
from ._paths import check_gathered
from ._pca_model import map_non_finite
from ._private_pca import pooled_release
from ._public_text import TEXT_OUTSIDE
from ._refusals import is_refusal
from ._row_maps import clipped_projections, summed_over_rows
from ._search_plan import (
    SHARED_FULL_FEATURES,
    _is_passthrough,
    _locate_private_step,
    _value_key,
    caching_params,
    group_of,
    keeps_columns,
    passed_names,
)
from ._search_rows import (
    _named,
    empty_rows,
    fit_through_heads,
    head_output,
    mapped_rows,
    maps_chunks,
    rows_after,
    same_rows,
)
from ._warning_rules import private_computation
from .privacy import BudgetAccountant, gdp_epsilon, gdp_mu

#: Margin, in standard deviations, that each extra component must clear in
#: the floor-penalised score (see :func:`floor_penalised_scores`).
SELECTION_Z = 2.0


# --------------------------------------------------------------------------
# Scores
# --------------------------------------------------------------------------
def captured_variance_rows(rows, mean, components, data_norm):
    r"""Per-row captured variance
    :math:`\lVert P \operatorname{clip}_C(x_i - \hat m) \rVert^2`, each in
    :math:`[0, C^2]`.

    :math:`P` is the orthogonal projection on the span of ``components``
    (rows), which are orthonormalised first (post-processing of a release),
    so the bound :math:`\lVert P y \rVert^2 \le \lVert y \rVert^2 \le C^2`
    holds for any released components; the final clip to :math:`[0, C^2]`
    makes it exact in floating point too.

    Parameters
    ----------
    rows : {ndarray, sparse matrix} of shape (n_rows, n_features)
        Sparse rows are centred implicitly, never densified.
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
    if isinstance(data_norm, bool) or not isinstance(data_norm, Real) \
            or not 0.0 < data_norm < math.inf:
        raise ValueError(
            f"data_norm must be a positive, finite number; got {data_norm!r}.")
    basis, _ = np.linalg.qr(np.asarray(components, dtype=np.float64).T)
    projected = clipped_projections(rows, data_norm, mean, basis)
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
    check_is_fitted(step)
    if not prefix and _array_api.namespace(X) is None and not is_dask_collection(X):
        # a Pipeline's steps before it check X; a bare step's X as transform does
        X = validate_data(step, saturate_big_numbers(X), reset=False,
                          accept_sparse=("csr", "csc"),
                          dtype=[np.float64, np.float32],
                          ensure_all_finite=step.non_finite == "raise")
    rows = _host(_before_step(estimator, prefix, X), step.non_finite)
    # np.mean's sum over the count; a Dask array's summed chunk by chunk
    return float(captured_variance_sum(rows, _host(step.mean_), _host(step.components_),
                                       step.data_norm_) / rows.shape[0])


def captured_variance_sum(rows, mean, components, data_norm):
    """``np.sum(captured_variance_rows(rows, ...))``; a Dask array's chunks
    each summed in their own task (:func:`~sklearn_dppca._row_maps.summed_over_rows`):
    the per-row values are never gathered."""
    if not is_dask_collection(rows):
        return np.sum(captured_variance_rows(rows, mean, components, data_norm))

    def per_row(block):
        return captured_variance_rows(block, mean, components, data_norm)[:, None]

    return summed_over_rows(rows, per_row, 1)[0]


def floor_penalised_scores(released, n_components, n_validation, floor,
                           selection_sigma, z=SELECTION_Z):
    r"""Per-fold scores that compare candidates with different :math:`k`
    fairly.

    Captured variance grows with :math:`k` even past the planted rank: a
    direction of the isotropic noise floor captures the floor's variance
    :math:`\tau_f` per validation row, whichever direction the noisy release
    picked. The rule subtracts from each released (noisy) fold score the
    expected capture of its floor components, :math:`k_{c,f} n_f \tau_f`,
    and a margin of ``z`` standard deviations of what extra floor components
    add by chance — their sampling spread
    :math:`\sqrt{2 \sum_f n_f \tau_f^2}` (the variance of :math:`y^2` for
    :math:`y \sim N(0, \tau)`) and the noise of a difference of two
    candidates' summed released scores, :math:`\sqrt{2K} \sigma` — shared
    among the folds in proportion to their rows, and divides by the fold's
    rows::

        S_{c,f} = (R_{c,f} − k_{c,f} n_f τ_f − (n_f/n) k̄_c z spread_c) / n_f
        spread_c = √(2 Σ_f n_f τ_f² + 2 K σ²)

    The mean of :math:`S_{c,f}` over the folds is the floor-penalised
    captured variance per validation row; it is the search's
    ``mean_test_score``. A signal direction of variance
    :math:`\lambda > \tau` adds :math:`(\lambda - \tau) n` to the summed
    score, far above the margin; a floor direction adds on average nothing
    but pays the margin, so the best candidate is wrong only when chance
    beats ``z`` standard deviations. Everything here is post-processing of
    released values and of public ones.

    Parameters
    ----------
    released : ndarray of shape (n_candidates, n_folds)
        Noisy summed captured variance :math:`R_{c,f}` of each fold.
    n_components : ndarray of shape (n_candidates, n_folds)
        Released ``n_components_`` of each candidate in each fold.
    n_validation : ndarray of shape (n_folds,)
        Validation rows per fold (public).
    floor : array-like broadcastable to (n_candidates, n_folds)
        Released floor variance :math:`\tau` per row.
    selection_sigma : float
        Standard deviation of the noise added to each fold score.
    z : float, default=SELECTION_Z

    Returns
    -------
    scores : ndarray of shape (n_candidates, n_folds)
        :math:`S_{c,f}`.
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
    if not np.all(n_val >= 1):
        raise ValueError("n_validation must count at least one row per split; "
                         f"got {n_validation!r}.")
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


def _raw_reader(step):
    """Whether ``step``, reading ``X`` itself, refuses NaN or infinity in it
    (:func:`_check_raw_rows`)."""
    return getattr(step, "non_finite", "raise") != "clip"


def _check_raw_rows(steps, X, finite=None, nan=False):
    """Refuse, before the charge, NaN or infinity in ``X`` that one of
    ``steps`` (the private steps that read ``X`` themselves: bare, or first
    in their Pipeline) with ``non_finite="raise"`` would read: outside its
    domain (a dataset with NaN is no neighbour of the datasets the guarantee
    is about), and its fit would fail on it after the charge. A step with
    ``non_finite="clip"`` maps such values, as it does alone; a candidate
    with steps before the private one maps them too (:func:`_headed`). The
    unsupervised and the supervised searches both check here. ``finite``:
    the answer for ``X`` where :func:`refuse_infinity`'s pass already gave it
    (a Dask array read once; over the columns ``nan`` where no step of
    ``steps`` refuses NaN), else ``None``. ``nan``: the positions of the
    columns where NaN makes the public steps before some candidate's
    private step raise (:func:`~sklearn_dppca._nan_probe.search_nan_columns`;
    ``True``: every column): their fit would fail on it after the charge too
    (review 106 F1); NaN in other columns passes (review 108 F1)."""
    columns = nan_columns([(step, ()) for step in steps], nan)
    if columns == ():
        return
    if finite is None:
        finite = _all_finite(X if columns is None else _columns(X, columns))
    if not finite:
        raise ValueError(
            "Input X contains NaN or infinity"
            + ("" if columns is None else
               f" in the columns {_column_names(X, columns)} where a step "
               "before the private one refuses NaN")
            + ": the private estimator, or a "
            "step before it that refuses NaN, needs finite rows. Fill missing "
            "values with a public constant in the Pipeline, before that step: "
            "SimpleImputer("
            "strategy='constant', fill_value=..., keep_empty_features=True). "
            "The search was refused before it spent any budget."
        )


def nan_columns(readers, nan):
    """The columns :func:`_check_raw_rows` checks for NaN: None for all
    (a private step of ``readers``, ``(step, heads)``, reads ``X`` itself
    and refuses NaN, or ``nan`` is ``True``), else the positions ``nan``
    (empty: none)."""
    if nan is True or any(not heads and _raw_reader(step)
                          for step, heads in readers):
        return None
    return tuple(nan or ())


def _columns(X, columns):
    """The columns ``columns`` (positions) of ``X``, of its kind: a
    DataFrame's, a Dask or Array API array's (on its device); of a sparse
    matrix, the values it stores there (what :func:`_all_finite` reads)."""
    if hasattr(X, "iloc"):
        return X.iloc[:, list(columns)]
    namespace = None if is_dask_collection(X) else _array_api.namespace(X)
    if namespace is not None:
        xp, device = namespace
        return xp.take(X, xp.asarray(list(columns), device=device), axis=1)
    if sparse.issparse(X):  # the values stored in those columns, no copy
        # of X (a CSC copy of X whole doubled a search's peak; review 109)
        X = X if X.format in ("csr", "csc") else X.tocsr()
        if X.format == "csc":
            return np.concatenate([X.data[X.indptr[j]:X.indptr[j + 1]]
                                   for j in columns] or [X.data[:0]])
        return X.data[np.isin(X.indices, list(columns))]
    return X[:, list(columns)]


def _column_names(X, columns):
    """The names (a DataFrame's) or positions of ``columns``, at most ten
    (public: X's columns and the steps)."""
    names = getattr(X, "columns", None)
    shown = [names[i] if names is not None else i for i in columns[:10]]
    return f"{shown}" + (f" and {len(columns) - 10} more"
                         if len(columns) > 10 else "")


def check_readers(readers, X, checked, names, finite=None, nan=False):
    """Refuse, before the charge, what the first private step of each
    candidate would refuse at its fit on ``X``'s public columns, dtype and
    values: ``readers`` holds ``(step, heads)``, the steps ``heads`` before
    it. Read ``X`` directly (no heads), it gets :func:`_check_raw_rows` and
    :func:`_check_raw_bounds`; after heads that keep ``X``'s columns
    (:func:`~sklearn_dppca._search_plan.keeps_columns`), the bounds' check on
    the names they pass on. Both searches, unsupervised and supervised,
    check here (the supervised one checked direct readers only: a head with
    ``bounds`` on other names after a PublicScaler was charged, then
    failed). ``finite``, ``nan``: as :func:`_check_raw_rows` takes them."""
    direct = [step for step, heads in readers if not heads]
    headed = [(step, passed_names(heads, names)) for step, heads in readers
              if heads and keeps_columns(heads)]
    _check_raw_rows(direct, X, finite, nan)
    _check_raw_bounds(direct, checked, names, headed)
    _check_mapped_bounds(readers, X, checked.shape[1], names)


def _check_raw_bounds(steps, X, names, headed=()):
    """Refuse, before the charge, what ``steps`` (the private steps that
    read ``X`` themselves) check at their fit against ``X``'s public
    columns and dtype: ``bounds`` of another length, or by names ``X`` does
    not have; a numeric ``data_norm`` whose square is not a normal float32
    for float32 rows. ``headed``: ``(step, names)`` of private steps after
    steps that keep ``X``'s columns and dtype
    (:func:`~sklearn_dppca._search_plan.keeps_columns`), checked alike on
    the names those steps pass on. The search's plan knew neither
    (reviews 66, 67: a search was charged and then failed on them, where a
    fit refuses them first)."""
    dtype = getattr(X, "dtype", None)
    try:
        for step, known in [*((step, names) for step in steps), *headed]:
            if getattr(step, "bounds", None) is not None:
                check_box(step.bounds, X.shape[1], known)
            norm = step.data_norm
            if (isinstance(dtype, np.dtype) and dtype == np.float32
                    and isinstance(norm, Real) and not isinstance(norm, bool)):
                check_data_norm_range(float(norm), dtype)
    except ValueError as error:
        raise ValueError(f"{error} The search was refused before it spent "
                         "any budget.") from None


def _check_mapped_bounds(readers, X, n_features, names):
    """Refuse, before the charge, the ``bounds`` a private step of
    ``readers`` (``(step, heads)``, as :func:`check_readers` takes them)
    refuses at its fit after steps that do not keep ``X``'s columns: by
    names those steps do not output, by name where they output none, or of
    another length. Their output's width and names are public
    (:func:`~sklearn_dppca._search_rows.head_output`: their output on
    ``X``'s columns without a row); unknown there, the fit checks. A Dask
    array's chunks reach the private step as NumPy rows, without names
    (:func:`~sklearn_dppca._search_rows.mapped_rows`). Review 106 F2: a
    ``FunctionTransformer`` or ``ColumnTransformer`` of pandas output
    (``t__a`` for ``a``) was charged, then failed on the names."""
    empty = None
    for step, heads in readers:
        bounds = getattr(step, "bounds", None)
        if bounds is None or not heads or keeps_columns(heads):
            continue
        dask = maps_chunks(heads, X)
        if empty is None:
            empty = (_named(np.zeros((0, n_features), dtype=X.dtype), names)
                     if dask else empty_rows(X))
        out = head_output(heads, n_features, empty)
        if out is None:
            continue
        width, known = out[0], None if dask else out[1]
        if isinstance(bounds, dict) and known is None:
            raise ValueError(
                "bounds by feature name need named features, and the steps "
                f"before {type(step).__name__} pass on none (give them "
                "set_output(transform='pandas'), or bounds as a list"
                + (", as the chunks of a Dask array reach it without names"
                   if dask else "")
                + "). The search was refused before it spent any budget.")
        try:
            check_box(bounds, width, known)
        except ValueError as error:
            raise ValueError(f"{error} The search was refused before it spent "
                             "any budget.") from None


def _check_public_scalers(plan, n_features, names):
    """Check, before the charge, what a ``PublicScaler`` that reads ``X``
    first in a candidate checks at its fit: its ranges against ``X``'s
    columns, their number and names (public), on a row of zeros. Its
    failure (a dict of ranges by name on an array without names) is then a
    refusal that spends nothing, where in :func:`_check_heads`, after the
    charge, it failed a charged search."""
    from .preprocessing import PublicScaler

    zeros = np.zeros((1, n_features))
    if names is not None:
        import pandas as pd

        zeros = pd.DataFrame(zeros, columns=list(names))
    for cand in plan.candidates:
        if cand.error is None and isinstance(cand.estimator, Pipeline):
            first = cand.estimator.steps[0][1]
            if isinstance(first, PublicScaler):
                clone(first).fit(zeros)


def check_gathering_heads(X, heads):
    """Refuse, before the charge and before any chunk is read, a supervised
    search on a Dask array whose candidates put public steps before a
    private head (``heads``: those steps, per candidate): the head gathers
    their output into memory (:meth:`~sklearn_dppca.linear_model.
    PrivateRidge.fit`), counted as a scaler's transform counts them
    (:func:`~sklearn_dppca._paths.check_gathered`; review 100 F6: the
    scaler refused them only after the search's charge). Steps before a
    private PCA map the chunks where they are
    (:func:`~sklearn_dppca._search_rows.mapped_rows`): never gathered."""
    if any(not all(_is_passthrough(step) for step in steps) for steps in heads):
        check_gathered(
            X, "A step before the search's private estimator", copies=1,
            advice="Give the private estimator the bounds itself (PrivatePCA("
                   "bounds=...) reads the chunks where they are), or map the "
                   "chunks before the search: X.map_blocks(scaler.transform, "
                   "dtype=float). ")


#: What an error raised after a search's charge adds to its message.
SPENT = ("The budget of this search was spent: the error came after its "
         "charge.")


#: A sentence of a fit's own refusal before its charge (a memory plan's, a
#: head's), which a fit inside a search raises after the search's charge.
_NOTHING_SPENT = re.compile(
    r"(?:^|(?<=[.:)] ))[A-Z][^.]*?(?:spending any budget|spent any budget"
    r"|spent nothing|nothing was (?:spent|charged)|before any charge"
    r"|before any chunk is read or budget charged)[^.]*\.(?: |$)")
#: What replaces it: the search's budget was spent (review 103 F3: "refused
#: before ... spending any budget. ... The budget of this search was spent");
#: "step", not "fit": a transform of a validation fold may raise it.
INSIDE = "This step inside the search failed after the search's charge. "


@contextlib.contextmanager
def charged_search():
    """Run what follows a search's charge: an error raised there (a user's
    step failing on a validation fold, a candidate's fit, the refit) says
    that the budget was spent, as the estimators' errors after their charge
    do, in an error of its type where one can be made from a message (the
    original chained as its cause), else in a ``RuntimeError``; an inner
    fit's sentence saying it spent nothing (its own refusal before its own
    charge) is replaced by one saying it failed after the search's charge:
    only the package's own refusals (marked, :func:`~sklearn_dppca.
    _refusals.refusal`), never a sentence of a user's own error text
    (review 104 F3). A refusal before the search's charge says that nothing
    was spent."""
    try:
        yield
    except Exception as error:
        if SPENT in str(error):
            raise
        text = str(error)
        if is_refusal(error):
            text = _NOTHING_SPENT.sub(INSIDE, text)
        message = f"{text.rstrip()} {SPENT}"
        try:
            charged = type(error)(message)
        except Exception:  # a type that takes other arguments
            charged = None
        if charged is None or SPENT not in str(charged):
            charged = RuntimeError(f"{type(error).__name__}: {message}")
        raise charged from error


def _check_heads(plan, X, smallest_fold, names=None):
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
        heads = [step for _, step in head.steps]
        if key not in checked and maps_chunks(heads, X):
            # a Dask array's chunks, mapped as planned: never gathered here
            checked[key] = mapped_rows(heads, X, names).shape[1]
        if key not in checked:
            # copy=True: a step's copy=False would scale the caller's X in
            # place, and every fit would then read it scaled twice
            head.set_params(**{name: True for name in head.get_params()
                               if name.rsplit("__", 1)[-1] == "copy"})
            checked[key] = same_rows(head.fit_transform(X), X).shape[1]
        step = _locate_private_step(cand.estimator)[2]
        # after the charge: scikit-learn's refusals only (a candidate whose
        # iterations would buy nothing is fitted, as it was before they were
        # refused where the width is known before the charge)
        step._check_n_components(smallest_fold, checked[key], width_known=False)


def _fit_candidate(candidate, epsilon, delta, generator, X, y, full=False,
                   keep=False, pool=None, names=None):
    r"""The candidate fitted at ``epsilon`` on a throwaway accountant (the
    search has paid for it); ``full``: to be truncated, with every component
    (below :data:`SHARED_FULL_FEATURES` features) or ``full`` of them (an
    integer). Its own ``privacy_spent_`` must be what was paid for. A private
    step with steps before it is fitted with ``non_finite="clip"``
    (:func:`_headed`).

    ``keep``: a ``PrivatePCA`` keeps its release (``_kept``) for the refit
    if it takes at most that many bytes
    (:func:`~sklearn_dppca._search_plan.pooled_groups`).
    ``pool``: ``(release, mu2)``, the fold fits' pooled release and the
    :math:`\mu^2` it cost a row; a ``PrivatePCA`` refit on the dense path
    combines it with its own (``PrivatePCA._release``) and reports, as its
    ``privacy_spent_``, the composition of both."""
    p = candidate.prefix
    settings = {p + "epsilon": epsilon, p + "delta": delta,
                p + "accountant": BudgetAccountant(), p + "random_state": generator,
                **dict.fromkeys(caching_params(candidate.estimator))}
    if _headed(candidate):
        settings[p + "non_finite"] = "clip"
    if full:
        settings.update({p + "n_components": None if full is True else full,
                         p + "whiten": False})
    model = clone(candidate.estimator).set_params(**settings)
    step = _locate_private_step(model)[2]
    if _headed(candidate):  # its width was known only after the charge
        step._width_after_charge = True
    if keep:
        step._keep_release = keep
    if pool is not None:
        step._pool_with = pool[0]
    # a Dask array's chunks mapped by the steps before it, as planned
    fitted = fit_through_heads(model, candidate.index, X, y, names)
    step = _locate_private_step(fitted)[2]
    spent = step.privacy_spent_
    if not math.isclose(spent[0], epsilon, rel_tol=1e-6):
        raise RuntimeError(
            f"A candidate spent epsilon={spent[0]:.6g} where the search paid for "
            f"{epsilon:.6g}; its accounting does not fit the search."
        )
    if vars(step).pop("_pooled", False):  # its release and the fold fits'
        step.privacy_spent_ = (gdp_epsilon(
            math.sqrt(gdp_mu(epsilon, delta) ** 2 + pool[1]), delta), delta)
    return fitted


def _score_fold(X, y, train, test, plan, delta, seeds, names=None):
    """Exact summed scores, released ``n_components_`` and floors of one fold
    for every candidate (NaN for the failed ones). The scores stay inside
    ``fit``. ``names``: the columns of the Dask DataFrame a Dask ``X`` was
    made of, for the steps mapped over its chunks."""
    X_train, X_val = _take(X, train), _take(X, test)
    y_train = None if y is None else _safe_indexing(y, train)
    m = len(plan.candidates)
    scores, k, floor = np.full(m, np.nan), np.full(m, np.nan), np.full(m, np.nan)
    kept = [None] * len(plan.groups)
    for g, members in enumerate(plan.groups):
        cand = plan.candidates[members[0]]
        shared = plan.shared[g]
        wanted = [_locate_private_step(plan.candidates[c].estimator)[2].n_components
                  for c in members]
        if shared and (shared == "largest" or _shape(X)[1] >= SHARED_FULL_FEATURES) \
                and None not in wanted:
            # wide rows, or a width not public: the largest k, not every one
            shared = max(wanted)
        fitted = _fit_candidate(cand, plan.fit_epsilons[g], delta, seeds[g],
                                X_train, y_train, full=shared, keep=plan.pooled[g],
                                names=names)
        step = _locate_private_step(fitted)[2]
        kept[g] = getattr(step, "_kept", None)  # a noisy release: it may leave
        # the validation rows through the fit's own map of non-finite values
        rows = _host(rows_after(fitted, cand.index, X_val, names), step.non_finite)
        # the bound the scores' noise is calibrated to (the plan's, public),
        # whatever the fit clipped to: a row then moves a score by C² at most
        # even where the fit read other features than the plan named (review
        # 116 F1); the group's candidates share it
        C = min(step.data_norm_, cand.data_norm)
        if not shared:
            (c,) = members
            k[c] = step.n_components_
            scores[c] = captured_variance_sum(
                rows, _host(step.mean_), _host(step.components_), C)
            floor[c] = float(step.noise_variance_)
            continue
        # PrivatePCA(n_components=k) on the same noise keeps the first k of the
        # full fit's sorted eigenpairs: each candidate is a truncation.
        gains = _cumulative_gains(rows, step, C)
        # the floor: the median of every released variance, or beyond the
        # largest k (wide rows) the fit's own residual variance
        tau = (float(np.median(_host(step.explained_variance_))) if shared is True
               else float(step.noise_variance_))
        for c, want in zip(members, wanted):
            k[c] = step.n_components_ if want is None else int(want)
            scores[c] = gains[int(k[c]) - 1]
            floor[c] = tau
    return scores, k, floor, kept


def refit_pool(plan, best, folds):
    r"""``(release, mu2)`` for :func:`_fit_candidate`'s ``pool``: the
    release of all rows made of the fold fits' releases of ``best``'s group
    (:func:`~sklearn_dppca._private_pca.pooled_release`) and the
    :math:`\mu^2` they cost a row (:math:`r \mu_g^2`); ``None`` where the
    group's fits did not all keep one (public)."""
    g = group_of(plan.groups, best)
    r = plan.folds_per_row
    pool = pooled_release([fold[3][g] for fold in folds], r)
    return None if pool is None else (pool, r * plan.fit_mus[g] ** 2)


def _cumulative_gains(rows, step, C=None):
    r"""Summed captured variance of the rows (clipped at ``C``, by default
    the fit's ``data_norm_``) under the first :math:`k` released components
    of a full fit, for every :math:`k`: entry :math:`k - 1` is the score
    of the truncation to :math:`k` components.
    The components are orthonormal eigenvectors, so each row's partial sums
    are at most :math:`\|y\|^2 \le C^2`; the clip makes the bound exact in
    floating point. A Dask array's chunks are each reduced to their
    length-:math:`k` sums in their own task: the :math:`n \times k`
    projections are never gathered."""
    C = step.data_norm_ if C is None else C
    mean, basis = _host(step.mean_), _host(step.components_).T

    def per_row(block):
        gains = clipped_projections(block, C, mean, basis)  # squared and
        np.square(gains, out=gains)  # summed in place: one n × k array
        np.cumsum(gains, axis=1, out=gains)
        return np.clip(gains, 0.0, C**2, out=gains)

    return summed_over_rows(rows, per_row, basis.shape[1])


def _before_step(pipeline, prefix, X):
    """Rows as the private step of the fitted ``pipeline`` sees them: through
    the (stateless) steps before it (a search's fits map a Dask array's
    chunks: :func:`~sklearn_dppca._search_rows.rows_after`)."""
    if not prefix:
        return X
    for name, step in pipeline.steps:
        if name == prefix[:-2]:
            return X
        if not _is_passthrough(step):
            X = step.transform(X)
    return X


def _shape(X):
    """``(n_samples, n_features)``, public, without reading the values."""
    shape = getattr(X, "shape", None)
    shape = tuple(np.asarray(X).shape if shape is None else shape)
    if len(shape) != 2:
        raise ValueError(
            f"Expected a 2D array of shape (n_samples, n_features), got shape "
            f"{shape}." + (f" A private search takes numeric rows: raw text (a "
                           f"list of documents) is not accepted. {TEXT_OUTSIDE}"
                           if len(shape) == 1 else "")
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


def refuse_infinity(X, readers=(), nan=False):
    """Refuse, before the charge, infinity in the Dask collection ``X``, as
    the validation of rows in memory does (NaN passes, for a public fill or
    ``non_finite="clip"``): a step reading it (a ``PublicScaler``, an
    imputer) failed after the charge on one infinite entry, which told the
    dataset from its neighbour (review 100 F1). One pass over the chunks,
    in the private computation. Where a step of ``readers`` (``(step,
    heads)``, as :func:`check_readers` takes them) reads ``X`` itself and
    refuses NaN too, the same pass answers whether ``X`` is finite, returned
    for :func:`check_readers` (which raises in its turn: the refusals' order
    is kept), else ``None``: two passes over the rows read them twice.
    ``nan``: the columns where the steps before some private step refuse
    NaN (:func:`_check_raw_rows`): the same pass answers it too, over
    those columns (:func:`nan_columns`)."""
    import dask
    import dask.array as da

    rows = as_dask_array(X)[0]
    columns = nan_columns(readers, nan)  # None: all; () none
    asks = columns is None or bool(columns)
    read = rows if columns is None else rows[:, list(columns)]
    with private_computation():
        infinite, finite = dask.compute(
            da.isinf(rows).any(), da.isfinite(read).all() if asks else None)
    if bool(infinite):
        raise ValueError(
            "Input X contains infinity or a value too large for "
            "dtype('float64'). The search was refused before it spent any "
            "budget.")
    return None if finite is None else bool(finite)


def _all_finite(Z):
    """Whether every entry of ``Z`` (sparse, Dask, Array API or NumPy) is
    finite; an Array API array on its device; a Dask collection chunk by
    chunk, never gathered, inside the
    private computation (its lazy steps run: their warnings are dropped)."""
    if is_dask_collection(Z):
        import dask.array as da

        with private_computation():
            return bool(da.isfinite(as_dask_array(Z)[0]).all().compute())
    namespace = _array_api.namespace(Z)
    if namespace is not None:  # on its device, never copied to the host
        xp = namespace[0]
        return bool(xp.all(xp.isfinite(Z)))
    values = Z.data if hasattr(Z, "tocsr") else _host(Z)
    return bool(np.all(np.isfinite(values)))


def _host(values, non_finite="raise"):
    """A NumPy float64 array of ``values`` (Array API or NumPy; sparse
    stays sparse, as float64 CSR, and Dask lazy: rows are never densified
    or gathered); with
    ``non_finite="clip"``, mapped first as a private step with that setting
    maps its input (:func:`~sklearn_dppca._pca_model.map_non_finite`, in the
    dtype the step computes in: float32 stays float32, others float64)."""
    if is_dask_collection(values):  # rows of a Dask collection stay lazy
        values = as_dask_array(values)[0]
        return map_non_finite(values) if non_finite == "clip" else values
    # as a fit reads them: numbers beyond a float infinite, pd.NA NaN
    values = saturate_big_numbers(values)
    if hasattr(values, "dtypes") and hasattr(values, "to_numpy"):  # pandas
        single = all(t == np.float32 for t in values.dtypes)
        values = values.to_numpy(dtype=np.float32 if single else np.float64,
                                  na_value=np.nan)
    if non_finite == "clip":
        values = _as_fit_input(values)
        values = map_non_finite(values)
    if hasattr(values, "tocsr"):
        return values.tocsr().astype(np.float64, copy=False)
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


def _score_failures(scores, candidates, error_score):
    """``scores`` with the rows of the candidates that failed before the
    charge set to ``error_score`` (in place; none failed under ``"raise"``,
    which raised then, and a string never reaches a float array)."""
    failed = np.array([c.error is not None for c in candidates])
    if failed.any():
        scores[failed] = error_score
    return scores


def check_failures(candidates, error_score, refit):
    """Before the charge: the first candidate that the plan found cannot be
    fitted, raised under ``error_score="raise"``; and, where ``refit`` is a
    callable, any such candidate (the callable may pick it from the scores,
    after the whole search was charged, and its refit would then fail).
    Returns the candidates that failed."""
    failed = [c for c in candidates if c.error is not None]
    if failed and error_score == "raise":
        raise failed[0].error
    if failed and callable(refit):
        raise ValueError(
            f"The candidate {failed[0].params} cannot be fitted "
            f"({failed[0].error}), and a callable refit could choose it after "
            "the search is charged. Remove it from param_grid, or use "
            "refit=True (which skips it)."
        )
    return failed


def check_accountants(candidates, accountant):
    """Refuse, before the charge, a step's own accountant (from the
    estimator or the grid) that is not the search's (``accountant``,
    resolved: the default where the search has none; or a ledger at the
    same path): the search charges its accountant for every fit it makes
    and sets it on ``best_estimator_``, so that one would never be charged,
    silently (scikit-learn's searches charge it for every fit)."""
    for cand in candidates:
        for name, value in cand.estimator.get_params(deep=True).items():
            if (name.rsplit("__", 1)[-1] == "accountant" and value is not None
                    and value is not accountant
                    and (getattr(value, "path", None) is None
                         or value.path != accountant.path)):
                raise ValueError(
                    f"The estimator's {name}= is not the search's accountant, "
                    "which is charged for every fit of the search (and set on "
                    "best_estimator_): that one would not be. Pass it to the "
                    "search (accountant=...) and leave the step's None."
                )


def _best_index(refit, results, candidates):
    """The chosen candidate: the best rank among those that can be fitted (a
    numeric ``error_score`` may rank one that cannot above them: its refit
    would fail after the charge), or a callable ``refit``'s pick from
    ``cv_results_`` (post-processing of released values), checked."""
    n_candidates = len(candidates)
    if not callable(refit):
        ranks = np.asarray(results["rank_test_score"], dtype=np.float64)
        ranks[[c.error is not None for c in candidates]] = np.inf
        return int(np.argmin(ranks))
    best = refit(results)
    if not isinstance(best, Integral):
        raise TypeError(f"best_index_ returned is not an integer: {best!r}.")
    if not 0 <= best < n_candidates:
        raise IndexError(f"best_index_ index out of bounds: {best} for "
                         f"{n_candidates} candidates.")
    return int(best)


def _ranked_results(candidates, scores, per_split=True):
    """``GridSearchCV``'s ``cv_results_`` keys from released fold scores:
    ``params``, ``param_<name>``, ``split<i>_test_score``, their mean,
    standard deviation and rank. ``per_split=False``: ``scores`` is one
    column of pooled scores, the mean; no split keys, and the standard
    deviation over the splits is NaN (not released)."""
    results = {"params": [c.params for c in candidates]}
    for name in sorted({p for c in candidates for p in c.params}):
        results[f"param_{name}"] = _param_column(candidates, name)
    for f in range(scores.shape[1] if per_split else 0):
        results[f"split{f}_test_score"] = scores[:, f]
    means = scores.mean(axis=1)
    results["mean_test_score"] = means
    results["std_test_score"] = (scores.std(axis=1) if per_split
                                 else np.full(len(means), np.nan))
    if np.all(np.isnan(means)):
        rank = np.ones(len(means))
    else:  # NaN ranks last, as in GridSearchCV
        rank = rankdata(-np.nan_to_num(means, nan=np.nanmin(means) - 1), "min")
    results["rank_test_score"] = rank.astype(np.int32)
    return results
