"""Shared base of the private PCA estimators.

The base owns everything but the mechanism (template method): parameter and
data validation, the privacy charge, the norm bound, private centring
(docs/privacy.rst §5), the clipped Gram matrix, and the post-processing that
turns released eigenpairs into scikit-learn's PCA attributes, plus
``transform``, ``inverse_transform``, ``get_covariance``, ``get_precision``
and the probabilistic-PCA ``score``. A subclass writes only ``_release``.
"""

import functools
import math
import warnings
from abc import ABCMeta, abstractmethod
from numbers import Integral, Real
from typing import Any, NamedTuple

import numpy as np
from scipy import sparse
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils._param_validation import (
    Interval,
    RealNotInt,
    StrOptions,
)
from sklearn.utils.validation import validate_data

from . import _array_api, _bounds
from ._array_api import ArrayAPIRows
from ._blocks import (
    CLIP_ENTRIES,
    SPARSE_BLOCK_ENTRIES,
    sparse_rows,
    summed_block_bytes,
)
from ._box import box_radius, check_box, stays_sparse
from ._dask import (
    ChunkedRows,
    as_dask_array,
    check_numeric_columns,
    is_dask_collection,
    local_threads,
    reporting_partitions,
    saturate_big_numbers,
)
from ._dask_memory import chunk_bytes, chunked_partials, read_base, worker_room
from ._defaults import _carry_default, _keep_carried_default, _resolve_accountant
from ._fit_guards import (
    _all_or_nothing,
    _FloatParamsMixin,
    _non_finite_hint,
    _refuse_fit_params,
)
from ._norm_plan import MIN_DATA_NORM, PILOT_MISS
from ._norm_plan import PARAMETER_CONSTRAINTS as _BOUND_CONSTRAINTS
from ._paths import TRUNCATED_SOLVERS, _PathMixin
from ._pca_model import _PCAModelMixin, map_non_finite
from ._released import (
    SolverParameterWarning,
    mean_in_box,
    warn_if_mean_projected,
    warn_if_noise_dominated,
    warn_if_one_feature_dominates,
)
from ._releases import CENTRED, GRAM, Release
from ._reported import _engine, _ReportedPasses
from ._rows import ImplicitScatter, InMemoryRows, summed_entries
from ._spectrum import (
    Spectrum,
    _flip_signs,
    denoised_spectrum,
    kernel_floor,
    mean_spike,
    minka_dimension,
    top_eigenpairs,
    unit_squares,
)
from ._stats import add_outer
from ._threads import wide
from .noise import (
    dense_noise,
    make_generator,
    noise_scale,
)
from .privacy import (
    BudgetAccountant,
    _outside_stacklevel,
    _warn_if_not_private,
    _warn_leak,
    gdp_epsilon,
    gdp_mu,
    private_computation,
)

#: scikit-learn PCA's solver parameters, accepted for drop-in use, with their
#: defaults. A fit never modifies ``X``, so ``copy`` has no effect; the others
#: choose how the release is eigendecomposed where the estimator honours them
#: (``_honours_svd_solver``). A non-default value without effect is warned at
#: fit.
SKLEARN_SOLVER_DEFAULTS = {
    "copy": True,
    "svd_solver": "auto",
    "tol": 0.0,
    "iterated_power": "auto",
    "n_oversamples": 10,
    "power_iteration_normalizer": "auto",
}


#: Relative tolerance within which privacy_spent_ reports the request: the
#: accountant's own tolerance (a plan that composes exactly differs from the
#: request by the round-off of the ε ↔ μ conversions only).
_SPENT_RTOL = 1e-9


class PrivacyPlan(NamedTuple):
    """How a fit spends its budget, fixed before the data is read."""

    mus: dict  # GDP μ of each Gaussian release, by name ("mean", ...)
    charge: dict  # keyword arguments of BudgetAccountant.spend
    spent: tuple  # (ε, δ) the fit spends: privacy_spent_
    extra: Any = None  # mechanism-specific calibration

#: Fraction of ``μ*²`` given to the private mean when ``center=True``. Its
#: error enters the covariance as a rank-one term of size ``~σ_m² d / n``,
#: small next to the covariance noise for any ``n`` worth fitting on.
MEAN_BUDGET_SHARE = 0.1


def top_with_rest(noisy, k, solver, rng, unit=None, **params):
    r"""The top ``k`` eigenpairs of a released matrix by a truncated solver
    (:func:`top_eigenpairs`, shifted by the noise bulk's centre
    :math:`-\operatorname{tr}\hat{M}/d`), and ``rest``: the count, sum and
    sum of squares of the eigenvalues not computed, from
    :math:`\operatorname{tr}\hat{M}` and :math:`\|\hat{M}\|_F^2`
    (:func:`denoised_spectrum`'s ``rest``), the sum in units of ``unit`` and
    the squares in units of its square, and ``unit``: squares of a release
    near float64's range (its scale is the rows' bound squared) neither
    overflow nor underflow. ``unit``: the noise's scale, or None for the
    matrix's mean diagonal entry (a matrix without noise; 1 if it is 0).
    ``noisy``: a NumPy array, or the matrix-free path's
    :class:`ImplicitScatter`, whose Frobenius part is Hutchinson's estimate
    from the solver's first product. Post-processing of the release.

    Returns
    -------
    (values, vectors, rest)
        ``values`` (k,) decreasing, real; ``vectors`` (d, k); ``rest``
        ``(count, sum / unit, squares / unit², unit)``.
    """
    d = noisy.shape[0]
    implicit = isinstance(noisy, ImplicitScatter)
    trace = noisy.trace() if implicit else float(np.trace(noisy).real)
    if unit is None:
        unit = abs(trace) / d or 1.0
    unit = float(unit)
    values, vectors = top_eigenpairs(noisy, k, solver, rng, shift=-trace / d,
                                     unit=unit, **params)
    values = values.real
    if implicit:
        squares = noisy.rest_squares(vectors, unit)
    else:  # ‖M̂/unit‖², by blocks of rows (no d × d copy)
        band = max(1, 2**20 // max(d, 1))
        squares = sum(unit_squares(noisy[a:a + band], unit) for a in range(0, d, band))
        squares -= unit_squares(values, unit)
    return values, vectors, (d - k, (trace - float(values.sum())) / unit, squares, unit)


def budget_shares(shares, center):
    """The shares of a fit's releases: without centring, the mean's share is
    dropped and the others rescaled to sum to 1."""
    kept = {k: w for k, w in shares.items() if center or k != "mean"}
    total = sum(kept.values())
    return {k: w / total for k, w in kept.items()}


def _sparse_copy(n, d, itemsize, index_bytes=4):
    """Bytes of a CSR or CSC copy of ``n × d`` rows at its most stored
    entries, ``n d`` (the entries it stores are a function of the values),
    with indices of ``index_bytes`` or the 8 that ``n d ≥ 2**31`` needs."""
    index = max(index_bytes, 4 if n * d < 2**31 else 8)
    return n * d * (itemsize + index) + (n + 1) * index


def _input_copy(given, X):
    """Bytes of ``X``, validated, that are not the caller's ``given``: a
    conversion of another dtype (integers, float16), layout, format or
    container, held for the whole fit beside the plan's arrays (review 71:
    int8 rows peaked at 4 times memory_limit). Public: the input's kind,
    shape, dtype and layout, never its values (review 79): a DataFrame is
    counted as copied whole (its dtypes and blocks may be pandas' reading of
    the values: one cell 2 or 2.5 makes a column int64 or float64), and a
    sparse matrix converted to float CSR or CSC at its most stored entries
    (:func:`_sparse_copy`). CSC rows' copy as CSR is the rows' own
    (``InMemoryRows.csc_copy``), counted by :meth:`_copied_rows` at the
    fit's size, so that a search's plan counts it too."""
    n, d = X.shape
    if hasattr(given, "iloc"):
        return n * d * X.dtype.itemsize
    if sparse.issparse(given):
        converted = given.format not in ("csr", "csc") or given.dtype != X.dtype
        return converted * _sparse_copy(n, d, X.dtype.itemsize)
    if not isinstance(given, np.ndarray):
        return X.nbytes  # lists and other containers: converted
    return 0 if np.may_share_memory(X, given) else X.nbytes


class _BasePrivatePCA(
    _FloatParamsMixin,
    _PCAModelMixin,
    _PathMixin,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    BaseEstimator,
    metaclass=ABCMeta,
):
    """Base of the private PCA estimators; subclasses implement ``_release``."""

    _parameter_constraints: dict = {
        "n_components": [
            Interval(Integral, 0, None, closed="left"),
            Interval(RealNotInt, 0, 1, closed="neither"),
            StrOptions({"mle"}),
            None,
        ],
        # epsilon=inf: the non-private fit (no noise), charged as infinite
        "epsilon": [Interval(Real, 0, math.inf, closed="right")],
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "center": ["boolean"],
        "whiten": ["boolean", StrOptions({"partial"})],
        "non_finite": [StrOptions({"raise", "clip"})],
        "random_state": ["random_state", np.random.Generator],
        "accountant": [BudgetAccountant, None],
        **_BOUND_CONSTRAINTS,  # data_norm ("auto" too), bounds, norm_range, ...
        # scikit-learn PCA's solver parameters (no effect; warned at fit),
        # validated as scikit-learn validates them
        "copy": ["boolean"],
        "svd_solver": [
            StrOptions({"auto", "full", "covariance_eigh", "arpack", "randomized"})
        ],
        "tol": [Interval(Real, 0, None, closed="left")],
        "iterated_power": [
            StrOptions({"auto"}),
            Interval(Integral, 0, None, closed="left"),
        ],
        "n_oversamples": [Interval(Integral, 1, None, closed="left")],
        "power_iteration_normalizer": [StrOptions({"auto", "QR", "LU", "none"})],
        "memory_limit": [Interval(Real, 0, None, closed="neither"),
                         StrOptions({"auto"})],
    }
    #: Whether ``_release`` takes the Gram matrix of an Array API input in its
    #: namespace and on its device (else as a float64 NumPy array on the host).
    _gram_in_namespace = False
    #: Whether ``svd_solver`` (and ``tol``, ``iterated_power``,
    #: ``n_oversamples``, ``power_iteration_normalizer``) choose how the
    #: released matrix is eigendecomposed (:meth:`_truncated_eigenpairs`);
    #: otherwise they are accepted, ignored and warned.
    _honours_svd_solver = False
    #: Whether the release's noise is the GUE kernel (:func:`denoised_spectrum`).
    _hermitian_noise = False

    def _hidden_passes(self):
        """Why the passes of ``_release`` over the rows must not be reported
        (their number would tell a secret), or None: they are."""
        return None

    # ------------------------------------------------------------------ fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, **params):
        """Fit the model on ``X`` privately.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; one row per person. Never modified.
        y : Ignored
            Not used, present for API consistency by convention.
        **params
            None is accepted: ``sample_weight`` and other fit parameters are
            refused with a ``TypeError`` that says why (before the data is
            read).

        Returns
        -------
        self : object
            The fitted estimator.
        """
        _refuse_fit_params(self, params)
        self._fit(X)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit_transform(self, X, y=None, **params):
        """Fit the model on ``X`` and return ``X`` projected on it.

        The projection of the training rows is the rows themselves seen
        through the released components: it is *not* private output.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : Ignored

        **params
            Refused, as by :meth:`fit`.

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_components_)
        """
        _refuse_fit_params(self, params)
        X = self._fit(X)
        if sparse.issparse(X):  # the fit summed and mapped its blocks lazily,
            # not X (mends 129, 131): as transform reads X
            X = self._mapped(summed_entries(X))
        return self._transform(X)

    # Whether the estimator's releases are of the Gram matrix alone, so that
    # on many rows the rows are centred in one pass (BoundsPlan.pilot).
    _pilot_centring = False

    def __getstate__(self):
        # With accountant=None, a limited default travels to worker processes.
        return _carry_default(self, super().__getstate__())

    def __sklearn_clone__(self):
        return _keep_carried_default(self, super().__sklearn_clone__())

    @_all_or_nothing
    def _fit(self, X, progress=None):
        # ``progress``: an optional callable told, as each pass over the rows
        # starts, what it computes (the CLI's -v; see _ReportedPasses).
        # A failure, before or after the charge, leaves a fitted estimator as
        # it was (_all_or_nothing); a fit refused or failing before its charge
        # is not charged.
        self._warn_solver_parameters()
        X, data = self._validate_for_fit(X)
        engine = data  # before any progress wrapper
        n_samples, n_features = X.shape
        reported = None
        if progress is not None:
            data = reported = _ReportedPasses(
                data, progress, hidden=self._hidden_passes()
            )
        # every release, its μ and its pass, from public values only
        dtype = _array_api.numpy_dtype(X)
        bounds, plan = self._plan_fit(n_samples, n_features, dtype, engine)
        if reported is not None:  # said before any row is read
            reported.plan(self._releases(bounds, plan))
        rng = make_generator(self.random_state)
        # an over-budget fit refused before the data is read
        accountant = _resolve_accountant(self)
        accountant.check(**plan.charge)
        # From the first read of the rows to the end of the release, no
        # warning is shown: one raised there (an overflow on one extreme row,
        # a user's lazy Dask step) could tell neighbouring datasets apart,
        # which the analysis does not cover. The package's own warnings
        # depend on public values only and are issued after the block (the
        # solver parameters', above, before it).
        # Exceptions propagate unchanged (docs/privacy.rst, "Warnings and
        # errors").
        with private_computation(), reporting_partitions(
            None if reported is None else reported.partitions
        ):
            # Charge, atomically, after the read and before the first
            # release, so that nothing that depends on the rows leaves the
            # fit uncharged (a progress line, an error, an interrupt, a
            # budget race: concurrent fits on a budget for one cannot all
            # pass this). The first pass reads every row and checks it
            # finite, so a fit failing on its data (NaN, inf) is not charged;
            # with a pilot (read_bounds) the first rows, and a Dask
            # array's later rows are checked after the charge.
            with _non_finite_hint():
                read = _bounds.read_bounds(bounds, data, functools.partial(
                    accountant.spend, **plan.charge, estimator=self))
            # past the first pass, a NaN met (a Dask array's later rows, read
            # after the charge on many rows) is said to have been charged
            with _non_finite_hint(charged=True):
                # The bounds' searches (if "auto") and the private mean, or with a
                # pilot the centre (docs/privacy.rst §5); with "auto" the plan may
                # return unspent budget to our releases.
                released = _bounds.release_bounds(bounds, read, plan, rng)
                # the read's counts and sums are not kept past the release
                from_data, read = read.from_data, None
                mean, data_norm, plan = released.mean, released.data_norm, released.plan
                self.mean_norm_ = released.mean_norm
                # the mean's error as a rank-one term of the scatter
                # (_mean_spike); the one-pass centring subtracts its released
                # shift, and leaves none
                self._spike = mean_spike(
                    None if "centring" in plan.mus else released.mean_error,
                    n_samples)
                self._mean_error_out = False  # _spectrum says
                data = released.data  # the rows clipped into the box, if any
                if "centring" in plan.mus:  # the numeric fit's pilot
                    gram, mean = self._centred_in_one_pass(
                        data, n_samples, data_norm, mean, plan, rng)
                elif self._fit_path != "dense":  # never formed (_release)
                    gram = None
                else:
                    gram = data.gram(data_norm, mean)
                rows = data.rows(data_norm, mean)  # further passes, for _release
                if not self._gram_in_namespace and gram is not None:
                    gram = _array_api.to_host(gram)  # the same array for NumPy and Dask
                vars(self).pop("clipped_fraction_", None)  # only "auto" releases it
                if released.clipped_fraction is not None:
                    self.clipped_fraction_ = released.clipped_fraction
                self.data_norm_ = data_norm
                self.n_samples_ = n_samples
                if "path" in self._parameter_constraints:  # PrivatePCA's
                    self.path_ = self._fit_path
                self.mean_ = (
                    released.offset if mean is None else released.offset + mean
                ).astype(dtype, copy=False)
                noisy_mean = self.mean_
                self.mean_ = projected_mean = mean_in_box(self.mean_, bounds)
                if getattr(self, "_keep_release", False):  # a search's fold fit
                    self._release_centre = (noisy_mean, bounds)  # PrivatePCA's _kept
                self._release(gram, rows, plan, rng, dtype)
            if isinstance(engine, ArrayAPIRows):  # attributes in X's namespace
                _array_api.move_attributes(self, engine.xp, engine.device)
            self.privacy_spent_ = reported_spend(plan.spent, self.epsilon)
        if reported is not None:
            reported.finish()
        # The fit is charged and released: the leaks it was told of, from
        # public values (and, for data_norm=None, the bound it released).
        if from_data:
            _warn_leak(self._data_norm_leak(self.data_norm_))
        self._warn_released(noisy_mean, projected_mean)
        return X

    def _warn_released(self, noisy_mean, projected_mean):
        """The warnings of a fitted release: a fixed seed or no privacy
        (public parameters), then those computed from released values and
        public noise scales only."""
        _warn_if_not_private(self.epsilon, self.random_state, delta=self.delta,
                             n_samples=self.n_samples_)
        from ._search_plan import warn_if_after_learned_steps  # imports this module

        warn_if_after_learned_steps(self)
        if math.isfinite(self.epsilon):
            warn_if_noise_dominated(self)
            warn_if_mean_projected(self, noisy_mean, projected_mean)
        warn_if_one_feature_dominates(self)

    def _plan_fit(self, n_samples, n_features, dtype, engine):
        """The fit's solver, path, norm bounds and privacy plan, from public
        values only (the shape, the dtype, the parameters, the kind of input,
        the memory limit), before any row is read: ``(bounds, plan)``.

        Refuses here a fit that cannot run: ``n_components`` too large, a
        path that does not fit in ``memory_limit``, a search drowned in its
        noise, a budget whose noise could underflow.
        """
        self._plan_path(n_samples, n_features, engine)
        # norm bounds ("auto", a box): their share is taken from the plan
        bounds, plan = _bounds.plan_bounds(
            self, n_samples, n_features, dtype, engine,
            self._privacy_plan(n_samples, n_features))
        _refuse_uncalibrated(plan)
        # Whether the first pass forms a raw Gram matrix: on the dense path,
        # but not where the Gram matrix is formed once after the bound and
        # the centre (clipped_gram) rather than raw in the first pass and a
        # correction per clipped row: with "auto" the bound clips many rows;
        # on wide dense rows a syrk outweighs a second read of them, and
        # centred on a noisy mean every row may be clipped a little
        # (2 000 × 5 000: all of them; the fit 1.4–2 times faster, the same
        # release).
        engine.with_gram = self._fit_path == "dense" and not (
            isinstance(engine, InMemoryRows) and (bounds.auto or (
                wide(n_features) and isinstance(engine.X, np.ndarray))))
        return bounds, plan

    def _plan_path(self, n_samples, n_features, engine):
        """The fit's solver and path, and its memory checked: what the plan
        refuses whatever the budget (``n_components`` too large, a solver the
        path cannot use, a path over ``memory_limit``). ``engine`` is read for
        its kind only (dense, sparse, Dask, an Array API device): a search's
        plan runs this on a stand-in that holds no row
        (:func:`~sklearn_dppca._search_plan.refused_path`)."""
        self._check_n_components(n_samples, n_features)
        if self._honours_svd_solver:  # as scikit-learn's PCA records it
            self._fit_svd_solver = self._eigen_solver(n_samples, n_features)
        # dense or matrix-free (the solver, the engine, the memory limit);
        # the memory it needs checked
        self._chunked_partials = chunked_partials(engine)
        self._rows_in_memory = isinstance(_engine(engine), InMemoryRows)
        X = _engine(engine).X
        self._sparse_rows = self._rows_in_memory and sparse_rows(X)
        self._plan_threads(n_samples, n_features, engine)
        # dense rows read as copies a block at a time (float32, another
        # layout): a float64 block each thread
        self._block_copies = self._rows_in_memory and isinstance(X, np.ndarray) \
            and not (X.dtype == np.float64 and X.flags.c_contiguous)
        self._worker_room = worker_room(engine)
        self._wide_engine = self._blocks_obstacle(engine) is None  # its advice
        self._chunk_bytes = chunk_bytes(engine)
        copy, copy_text = self._copied_rows(n_samples, n_features, engine)
        self._copy_bytes = copy  # on every path: the automatic path counts them
        self._fit_path = self._path(n_samples, n_features, engine)
        # the bytes left: where in-memory sparse rows may be densified later
        self._memory_room = self._check_memory(n_samples, n_features, copy=copy,
                                               copy_text=copy_text)

    def _copied_rows(self, n_samples, n_features, engine):
        """``(bytes, what)`` of the copies of in-memory rows a fit makes:
        dense rows, one for ``non_finite="clip"``'s map and one for the box
        of ``bounds`` (review 60: a fit peaked at 5.8 times its plan); sparse
        rows, the dense copy that ``bounds`` make when their box moves zeros
        (centred on a midpoint that is not 0, or not holding 0); a Dask
        array's chunks that the threads of this process hold while they read
        them (:func:`~sklearn_dppca._dask_memory.chunk_bytes`). Public: the
        parameters, the box, the kind of input and its chunks."""
        size, text = self._copies_of_rows(n_samples, n_features, _engine(engine))
        rows = _engine(engine)
        if getattr(rows, "csc_copy", False):
            # CSC rows copied to CSR by the fit's rows, beside them (review 103:
            # 2 times the plan); at the fit's size, so that a search's plan on
            # a stand-in of CSC rows counts each fit's copy (review 104 F1)
            size += _sparse_copy(n_samples, n_features, rows.X.dtype.itemsize,
                                 rows.csc_index_bytes)
            text += (" and the CSR copy its rows made of CSC X (give CSR rows, "
                     "X.tocsr())")
        converted = getattr(self, "_input_copy", 0)
        if converted and isinstance(rows, InMemoryRows):
            size += converted
            text += (" and the float copy its validation made of X (" + (
                "convert X to float CSR first, X.tocsr().astype(np.float64), "
                "not to a dense array" if sparse_rows(rows.X)
                else "give float64 or float32 rows as an array") + ")")
        return size, text

    def _copies_of_rows(self, n_samples, n_features, rows):
        """:meth:`_copied_rows` but the copy of validation."""
        if isinstance(rows, ChunkedRows):
            threads = local_threads()  # None: a cluster's workers hold them
            size = 0 if threads is None else (threads * chunk_bytes(rows)
                                              + read_base(rows.X))
            return size, (" and the chunks of rows its threads read (smaller "
                          "chunks of rows, or fewer Dask threads, need less)"
                          if size else "")
        if not isinstance(rows, InMemoryRows):
            return 0, ""
        # at the fit's size: a search's plan asks it of a stand-in of no row
        size = n_samples * n_features * rows.X.dtype.itemsize
        if not sparse_rows(rows.X):
            copies = (self.bounds is not None) + (self.non_finite == "clip")
            return copies * size, (" and copies of the rows (bounds and "
                                   "non_finite='clip' map them)" if copies else "")
        size, text = self._box_copies(n_features, rows, size)
        # the summed rows' index pointers (mend 131), for every sparse fit
        return size + 8 * (n_samples + 1), text

    def _box_copies(self, n_features, rows, size):
        """The part of :meth:`_copies_of_rows` of sparse rows that
        ``non_finite="clip"``'s map and the box of ``bounds`` make
        (``size``: a dense copy's bytes). The passes map and clip the values
        of the block they read (_blocks.BoxedCSR), a block a thread: at most
        SPARSE_BLOCK_ENTRIES stored entries, or one row; and its two runs of
        bounds (or the map's masks). Never a copy of every value (issue 31:
        the box's counted at n d values, 80 GB at 10^5 x 10^5 for a copy of
        0.8 GB; mend 129: the map's, refusing wide fits that ran before)."""
        mapped = self.non_finite == "clip"
        cores, itemsize = self._planned_cores(), rows.X.dtype.itemsize
        block = cores * itemsize * (
            max(SPARSE_BLOCK_ENTRIES, n_features) + 2 * CLIP_ENTRIES)
        # rows that store a cell twice are read a block at a time with their
        # duplicates summed (in the place of the block's slice that the
        # passes' plan counts), mapped and clipped in place there (mend 131:
        # a summed copy of every value was in no plan, 2 times it): its
        # parts counted for every sparse fit, whether they do is not public
        summed = cores * summed_block_bytes(n_features, itemsize)
        block += summed
        lazy, text = (block, " and a mapped copy of the values of the block "
                      "of sparse rows each thread reads (non_finite='clip')"
                      ) if mapped else (
            summed, " and the block of sparse rows each thread reads with "
            "any cell stored twice summed")
        if self.bounds is None:
            return lazy, text
        try:
            box = check_box(self.bounds, n_features,
                            getattr(self, "feature_names_in_", None))
        except ValueError:  # refused, with its reason, by the fit's plan
            return lazy, text
        if stays_sparse(*box, box_radius(*box, self.center)[0]):
            # the map's block and the box's are one copy of its values
            return block, (
                " and a " + "mapped, " * mapped + "clipped copy of the values "
                "of the block of sparse rows each thread reads (the box of "
                "bounds)")
        return lazy + size, text + (
            " and a dense copy of the sparse rows (the box moves their "
            "zeros: give bounds whose midpoint is 0, or center=False "
            "with 0 in the box)")

    def _centred_in_one_pass(self, data, n_samples, data_norm, centre, plan, rng):
        r"""The Gram matrix and the mean from one pass over every row, around
        the centre :math:`c` of the first rows (docs/privacy.rst §5, "The
        first rows").

        The pass sums :math:`y_i = \operatorname{clip}_C(x_i - c)` and
        :math:`y_i y_i^\top`. :math:`\sum y_i` (sensitivity :math:`2C`) is
        released twice, each at :math:`\mu_{\mathrm{centring}}` with its own
        noise: the first release over :math:`n`, :math:`\bar{y}_1`, decides.
        When :math:`\|\bar{y}_1\| \le \mathtt{PILOT\_MISS} \cdot C` the
        second, :math:`\bar{y}_2`, gives
        :math:`\bar{y} = (\bar{y}_1 + \bar{y}_2)/2` (one release at
        :math:`\sqrt{2} \, \mu_{\mathrm{centring}}`), the mean is
        :math:`c + \bar{y}` and the Gram matrix
        :math:`\sum y y^\top - n \bar{y} \bar{y}^\top`
        (:math:`\sum (y - \bar{y})(y - \bar{y})^\top` were :math:`\bar{y}`
        exact): subtracting the released :math:`n \bar{y} \bar{y}^\top`
        before the estimator adds its noise is the same as subtracting it from
        the noisy release, post-processing. Otherwise the first rows were not
        like the others: a second pass computes both sums again around
        :math:`c' = c + \bar{y}_1`, and the second release is of that sum.
        The choice is made from :math:`\bar{y}_1` and public values; the Gram
        matrix not kept is never released.
        """
        gram, total = data.centred(data_norm, centre)
        sigma = noise_scale(2.0 * data_norm, plan.mus["centring"])
        first = (total + dense_noise(rng, total.shape[0], sigma)) / n_samples
        if np.linalg.norm(first) <= PILOT_MISS * data_norm:
            second = (total + dense_noise(rng, total.shape[0], sigma)) / n_samples
            shift = (first + second) / 2.0
        else:
            centre = centre + first
            announce = getattr(data, "announce", None)
            if announce is not None:
                announce("Gram matrix and sum of the rows clipped around the "
                         "corrected centre (the first rows' centre was off)")
            gram, total = _engine(data).centred(data_norm, centre)
            shift = (total + dense_noise(rng, total.shape[0], sigma)) / n_samples
        forget = getattr(_engine(data), "forget_raw_gram", None)
        if forget is not None:  # no further pass: one d × d matrix from here
            forget()
        add_outer(gram, shift, shift, -float(n_samples))  # in place
        return gram, centre + shift

    def _warn_solver_parameters(self):
        """One UserWarning per fit naming scikit-learn solver parameters that
        were given non-default values: they have no effect on a private fit."""
        params = self.get_params(deep=False)
        given = [
            f"{name}={params[name]!r}"
            for name, default in SKLEARN_SOLVER_DEFAULTS.items()
            if name in params and params[name] != default
            and (name == "copy" or not self._honours_svd_solver)
        ]
        if not given:
            return
        # the reason of each kind of parameter given, and only of those given
        why = " and ".join(
            reason for reason, kind in (
                ("a private fit runs its own noisy iterations, so no solver "
                 "choice applies", any(not g.startswith("copy=") for g in given)),
                ("it never modifies X (copy is moot)",
                 any(g.startswith("copy=") for g in given))) if kind)
        warnings.warn(
            f"{', '.join(given)} {'has' if len(given) == 1 else 'have'} no "
            f"effect on {type(self).__name__}: {why}. "
            f"{'It is' if len(given) == 1 else 'They are'} accepted for "
            "drop-in compatibility with sklearn.decomposition.PCA.",
            SolverParameterWarning,
            stacklevel=_outside_stacklevel(),
        )

    def _validate_for_fit(self, X):
        """Validated ``X`` and the object that computes its statistics.

        Finiteness is checked by the first pass over the rows, which needs
        their norms anyway: one pass fewer than scikit-learn's check. A Dask
        collection is validated lazily (shape, dtype, names) and never loaded.
        With ``non_finite="clip"`` the rows returned are :func:`map_non_finite`
        of ``X``: the public map comes before anything else reads them (in
        memory, sparse rows are mapped a block at a time as the passes read
        them: ``InMemoryRows(X, mapped=True)``; ``X`` itself, returned for
        its shape and dtype, stays as validated).
        """
        if is_dask_collection(X):
            X, names = as_dask_array(X)
            if X.shape[0] < 2 or X.shape[1] < 1:
                raise ValueError(
                    f"Found array with shape {X.shape} while a minimum of 2 "
                    "samples and 1 feature is required."
                )
            self.n_features_in_ = X.shape[1]
            vars(self).pop("feature_names_in_", None)
            if names is not None:
                self.feature_names_in_ = names
            if self.non_finite == "clip":
                X = map_non_finite(X)  # lazily, chunk by chunk
            return X, ChunkedRows(X)
        # sparse rows that store a cell twice are summed as the passes read
        # them (InMemoryRows: _rows.lazy_rows), not copied whole (mend 131)
        X = saturate_big_numbers(X, sum_sparse=False)
        check_numeric_columns(X)
        namespace = _array_api.namespace(X)
        if namespace is not None:  # Array API dispatch: the statistics on X's device
            return _array_api.fit_rows(self, X, *namespace,
                                       non_finite=self.non_finite)
        given = X
        X = validate_data(
            self,
            X,
            accept_sparse=("csr", "csc"),
            dtype=[np.float64, np.float32],
            ensure_min_samples=2,
            ensure_all_finite=False,
        )
        self._input_copy = _input_copy(given, X)
        if self.non_finite == "clip":
            if sparse.issparse(X):  # a block at a time, as the passes read it
                return X, InMemoryRows(X, mapped=True)
            X = map_non_finite(X)
        return X, InMemoryRows(X)

    def _privacy_plan(self, n_samples, n_features):
        r"""GDP parameters of the fit's releases and what to charge for them.

        :math:`\mu^*` = ``gdp_mu(epsilon, delta)`` is split in the documented
        shares of :meth:`_budget_shares` (docs/privacy.rst §2); their
        composition is exactly :math:`\mu^*`, which is what the accountant is
        charged and what ``privacy_spent_`` converts back.
        """
        mu_total = gdp_mu(self.epsilon, self.delta)
        shares = self._budget_shares()
        mus = {name: mu_total * math.sqrt(w) for name, w in shares.items()}
        composed = math.sqrt(sum(m * m for m in mus.values()))
        spent = (gdp_epsilon(composed, self.delta), self.delta)
        return PrivacyPlan(mus=mus, charge={"mu": mu_total}, spent=spent)

    def _releases(self, bounds, plan):
        """Every release of the fit in the order they start, as planned
        (public values only): the norm bounds' and the mean's, then the
        estimator's own (:mod:`~sklearn_dppca._releases`)."""
        return _bounds.bounds_releases(bounds, plan) + self._own_releases(
            plan, bounds.n_samples, bounds.n_features)

    def _own_releases(self, plan, n_samples, n_features):
        """The estimator's own releases, as planned: here the covariance's,
        from the Gram matrix's pass (with the pilot's centring, the pass
        that also sums the rows)."""
        return [Release("covariance", plan.mus["covariance"],
                        CENTRED if "centring" in plan.mus else GRAM)]

    def _budget_shares(self):
        r"""Fractions of :math:`(\mu^*)^2` per release; they sum to 1
        (docs/privacy.rst §2)."""
        shares = {"mean": MEAN_BUDGET_SHARE, "covariance": 1.0 - MEAN_BUDGET_SHARE}
        return budget_shares(shares, self.center)

    @abstractmethod
    def _release(self, gram, rows, plan, rng, dtype):
        r"""Release the mechanism's output from the exact clipped Gram matrix.

        Sets ``components_`` and the spectrum attributes. ``gram`` is
        :math:`\sum y_i y_i^\top` in data units (rows of norm
        :math:`\le` ``rows.data_norm``); ``rows`` gives further passes over
        the centred, clipped rows; ``plan.mus`` maps each release to its GDP
        :math:`\mu`.
        """

    def _for_solver(self, noisy):
        """The released ``noisy`` where its eigensolver runs: an Array API
        matrix moves to the host for a truncated solver, which is the NumPy
        fit's there, so that one release gives the same components and
        spectrum on every engine (its ``d × d`` crosses once, as a full
        ``eigh``'s eigenvectors would); else as it is."""
        if isinstance(noisy, (np.ndarray, ImplicitScatter)) or self._eigen_solver(
                self.n_samples_, noisy.shape[0]) not in TRUNCATED_SOLVERS:
            return noisy
        return _array_api.to_host(noisy)

    def _truncated_eigenpairs(self, noisy, sigma, trace, rng):
        r"""The spectrum and top :math:`k` eigenpairs of the released ``noisy``
        matrix by a truncated solver (:meth:`_eigen_solver`), or ``None``
        when every eigenpair is computed (``"full"``, or an Array API matrix
        with such a solver, eigendecomposed whole on its device;
        :meth:`_for_solver` brings it to the host for the others).

        Post-processing of the release: the components are the top :math:`k`
        eigenvectors (to the solver's accuracy), and the spectrum's estimates
        (:meth:`_spectrum`) take the other eigenvalues from
        :math:`\operatorname{tr} \hat{M}` and :math:`\|\hat{M}\|_F^2`
        (:func:`denoised_spectrum`'s ``rest``). The randomized range finder
        is shifted by :math:`-\operatorname{tr}(\hat{M})/d`, the centre of
        the noise's bulk: every eigenvalue the spectrum resolves (above the
        bulk's upper edge) is then larger in modulus than any of the bulk's,
        and the gaps that the power passes widen are the largest they can
        be.

        Returns
        -------
        (spectrum, values, vectors) or None
            ``values`` (k,) decreasing and ``vectors`` (d, k).
        """
        n, d = self.n_samples_, noisy.shape[0]
        solver = self._eigen_solver(n, d)
        implicit = isinstance(noisy, ImplicitScatter)
        if solver not in TRUNCATED_SOLVERS or not (
                implicit or isinstance(noisy, np.ndarray)):
            return None
        values, vectors, rest = top_with_rest(
            noisy, self._truncated_k(n, d), solver, rng, unit=sigma or None,
            tol=self.tol,
            iterated_power=self.iterated_power, n_oversamples=self.n_oversamples,
            power_iteration_normalizer=self.power_iteration_normalizer,
            # at epsilon=inf no noise floor: scikit-learn's range finder
            floor=self._spectrum_floor(sigma, d) if sigma > 0 else None)
        return self._spectrum(values, sigma, trace, rest), values, vectors

    def _spectrum_floor(self, sigma, n_features):
        """A public lower bound of the released matrix's spectrum, for the
        filtered solver (:func:`kernel_floor`)."""
        return kernel_floor(sigma, n_features, hermitian=self._hermitian_noise)

    @staticmethod
    def _data_norm_leak(data_norm):
        """The warning of ``data_norm=None``: issued for every such fit (a
        public parameter), it quotes the bound taken, which the fit releases
        as ``data_norm_`` anyway (the largest row norm; 1 for data of norm 0)."""
        return (
            "data_norm is None, so it was set to the largest row norm of the data "
            f"({data_norm:.6g}). This is NOT differentially private: the bound itself "
            "depends on the data. Give data_norm from domain knowledge, without "
            'looking at the data, or data_norm="auto" (a private choice from a '
            "small share of the budget), or public bounds=(lower, upper)."
        )

    def _mean_spike(self):
        """``(expected, upper)`` size of the rank-one term the private mean's
        error adds to this fit's release (:func:`mean_spike`; a pooled
        release's, :func:`pooled_release`), in the rows' units squared:
        public values only."""
        return getattr(self, "_spike", (0.0, 0.0))

    def _spectrum(self, eigvals, sigma=0.0, trace=None, rest=None,
                  precision=np.float64):
        r"""The number of components and the estimated spectrum of a release.

        Parameters
        ----------
        eigvals : ndarray of shape (n_features,)
            All released eigenvalues of the noisy scatter matrix, any order.
        sigma : float
            The release's noise scale (0 for ``epsilon=inf``).
        trace : (float, float) or None
            A separate release of the scatter matrix's trace and its noise's
            standard deviation, if the estimator makes one.
        rest : (int, float, float, float) or None
            With a truncated solver (:func:`top_with_rest`), ``eigvals`` are
            the top ones and ``rest`` the count, sum and sum of squares of the
            others, and their unit (:func:`denoised_spectrum`);
            ``n_components`` is then an integer.
        precision : dtype, default=float64
            The float the eigenvalues were computed in ('mle' counts those
            below its round-off as zero).

        Returns
        -------
        spectrum : Spectrum
            :func:`denoised_spectrum` over :math:`m = \min(n, d)` ranks, in
            variance units. ``n_components`` is ``n_components`` itself,
            :math:`m` for ``None``, the fewest components whose estimated
            ratios exceed the fraction, or, for ``'mle'``, Minka's choice
            (:func:`minka_dimension`) on the released eigenvalues (clamped at
            0): post-processing of the noisy eigenvalues.
            ``noise_variance`` is the mean of the captured variances ranked
            :math:`k + 1` to :math:`m` (0 when :math:`k = m`), scikit-learn's
            average: with :math:`n < d` the :math:`d - n` smallest ranks are
            left out, as its :math:`\min(n, d)` singular values leave them out
            (:math:`n` is public).
        """
        n, d = self.n_samples_, eigvals.shape[0] + (0 if rest is None else rest[0])
        top = min(n, d)
        scale = n - 1
        spike = self._mean_spike()
        # expected out of the noise's bulk (√d τ), a direction of noise as
        # large as a component: the noise warning says so (public values)
        self._mean_error_out = bool(sigma) and spike[0] > math.sqrt(
            d * (1.0 if self._hermitian_noise else 0.5)) * sigma
        explained, captured, resolved = denoised_spectrum(
            eigvals, sigma, top, trace, rest, hermitian=self._hermitian_noise,
            spike=spike)
        explained, captured = explained / scale, captured / scale
        total = float(explained.sum())
        k = self.n_components
        if k is None:  # every rank, or the truncated solver's (ARPACK's is one less)
            k = top if rest is None else min(top, eigvals.shape[0])
        elif isinstance(k, str):
            # 'mle': Minka's choice on the released eigenvalues (clamped at 0),
            # at most the ranks that stand out of the noise (at least one).
            # The noise's bulk looks like structure to Minka's rule, which
            # kept 47 to 49 of 50 ranks at epsilon=1 where five stood out;
            # at epsilon=inf every rank stands out: scikit-learn's choice.
            # Zero to round-off: float64's, or d unit round-offs of a matrix
            # computed in float32 on a device (a rank that is zero in exact
            # arithmetic must not count, whatever the namespace)
            released = np.sort(np.maximum(eigvals, 0.0))[::-1] / scale
            eps = np.finfo(precision).eps
            k = minka_dimension(released, n, 1e-15 if eps <= 1e-15 else d * eps)
            k = max(1, min(k, int(resolved)))
        elif not isinstance(k, Integral):  # variance fraction
            ratio = explained / total if total > 0 else np.zeros_like(explained)
            k = int(np.searchsorted(np.cumsum(ratio), k, side="right")) + 1
            k = min(k, n, d)
        noise_variance = float(captured[k:top].mean()) if k < top else 0.0
        if k < top and noise_variance <= 0.0:
            # clamped to 0 by the de-noising (few rows, small ε): the
            # estimated total's share per remaining rank instead, as the
            # model of score() takes it (post-processing of the same values)
            noise_variance = max((total - float(captured[:k].sum())) / (top - k), 0.0)
        return Spectrum(k, explained, captured, total, noise_variance, resolved)

    def _set_components(self, components, noisy, spectrum, dtype):
        """Store released components (rows) and the spectrum's attributes.

        Components are sorted by decreasing ``noisy`` variance (the release's
        own, over :math:`n - 1`), and each one's sign fixed so its largest
        entry is positive. The :math:`i`-th gets the spectrum's
        rank-:math:`i` estimates.
        """
        order = np.argsort(noisy)[::-1]
        k = components.shape[0]
        n = self.n_samples_
        explained = spectrum.explained[:k]
        self.n_components_ = k
        self.components_ = _flip_signs(components[order]).astype(dtype)
        self.explained_variance_ = explained.astype(dtype)
        total = spectrum.total
        ratio = explained / total if total > 0 else np.zeros_like(explained)
        self.explained_variance_ratio_ = ratio.astype(dtype)
        self.singular_values_ = np.sqrt(explained * (n - 1)).astype(dtype)
        self.captured_variance_ = spectrum.captured[:k].astype(dtype)
        self.noisy_variance_ = np.asarray(noisy, dtype=np.float64)[order].astype(dtype)
        self.total_variance_ = total
        self.noise_variance_ = spectrum.noise_variance
        self.n_resolved_ = min(int(spectrum.n_resolved), k)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.array_api_support = True
        return tags


#: The smallest sensitivity of any Gaussian release of the estimators, in
#: data units: √2 C² (the covariance's) at the smallest bound float64 data
#: accepts (``MIN_DATA_NORM``; 1e-200 for C²). The others are larger: 2C for
#: sums of rows, 2R ≥ 2C for the bounds' steps (their grid starts at
#: ``MIN_DATA_NORM``), √Q ≥ 1 for counts, √2 and 2R for CoherentPowerPCA's
#: unit-ball releases (``clip_radius`` ≥ ``MIN_CLIP_RADIUS``).
SMALLEST_SENSITIVITY = math.sqrt(2.0) * MIN_DATA_NORM[np.float64] ** 2


def _refuse_uncalibrated(plan):
    r"""Refuse, before the charge and from public values, a plan with a
    :math:`\mu` so large (``epsilon`` beyond about :math:`10^{215}`) that a
    release at :data:`SMALLEST_SENSITIVITY` would draw with a noise scale
    below the normal floats: it would be released exactly.
    :func:`noise_scale` raises ``ValueError``, as it would again at the
    release."""
    for mu in plan.mus.values():
        noise_scale(SMALLEST_SENSITIVITY, mu)


def reported_spend(spent, epsilon):
    r"""``privacy_spent_``: the request ``epsilon`` when the plan spends it to
    relative :math:`10^{-9}` (exact composition up to the round-off of the
    :math:`\varepsilon \leftrightarrow \mu` conversions, the accountant's
    own tolerance), else what is spent."""
    eps, delta = spent
    if math.isfinite(epsilon) and abs(eps - epsilon) <= _SPENT_RTOL * epsilon:
        return (float(epsilon), delta)
    return (eps, delta)
