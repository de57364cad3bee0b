r"""Norm bounds chosen without a guess: ``data_norm="auto"`` and a public box.

A step of the base's template, like centring (docs/privacy.rst §5): it runs
after the budget plan is fixed and before the covariance is released, and no
estimator imports it.

``data_norm="auto"``
    The bound :math:`C` is a private quantile of the row norms. A public
    geometric grid of candidate bounds :math:`u_0 < \ldots < u_{B-1}` over
    ``norm_range`` (four per octave) sorts each row into one bin: the first
    :math:`u_j \ge \|x\|` (norm 0 in bin 0, norms beyond the grid in the
    last bin). A noisy binary search over the grid (:func:`search_bound`)
    finds the first :math:`u_j` whose count of rows in bins :math:`\le j`
    reaches ``norm_quantile`` :math:`\cdot n`: each of its
    :math:`Q = \lceil \log_2 B \rceil` comparisons releases one such count
    (sensitivity 1) with Gaussian noise, so every decision errs by
    :math:`\sqrt{Q}/\mu` rows, a noise that grows like :math:`\sqrt{\log B}`
    with the grid. A check of the bound found (one more count, a factor 4
    below it) catches a comparison that erred far from the data, and the
    search then runs again below it. The covariance's bound is then placed
    within the bin found, where the two noisy counts around the target reach
    it (:func:`interpolate_bound`): a grid step is :math:`\sqrt{2}` in the
    noise. A search whose comparisons would have noise beyond :math:`n/4`
    rows is drowned: the fit is refused before any charge (:data:`DROWNED`).

    ``norm_quantile="auto"`` (the default) chooses the covariance's quantile
    from public values only (:func:`auto_quantile`): the median when the fit
    asks for a subspace (``n_components`` an integer below
    :math:`\min(n, d)`), and otherwise, for the whole covariance, the
    quantile that leaves a share :math:`\sqrt{d(d+1)} / (3 (\mu^* n)^{3/4})`
    of the rows beyond the bound, where the clipping's bias and the noise
    balance (at least the median).

    Centring clips rows twice (docs/privacy.rst §5): the mean's release clips
    the raw rows and the covariance clips rows centred on the private mean, so
    there is one search per clipping: the mean is released in
    :func:`mean_step_count` steps (3 to ``len(MEAN_STEPS)``, from public n, d
    and μ*), each clipping the rows centred on the previous step's estimate at
    a bound searched among those norms, and a last search gives the
    covariance's bound around the final mean. Each step reads the rows once:
    one pass counts the norms on the grid and sums the rows and their unit
    vectors per bin (:func:`_around`), from which the clipped sum at any grid
    value is exact (:meth:`Around.clipped_sum`); the first step's pass is the
    read before the charge, and the covariance's search reuses the last
    step's counts when that step moved the centre little (:data:`STALE_MOVE`).
    A fit on many rows thus reads them at most :data:`AUTO_PASSES` times.
    Data far from the origin (:math:`X + 2000`) loses its offset in the first
    steps and is fitted with a bound of its own spread. The steps stop once
    two in a row moved the centre by no more than their noise
    (:data:`STOP_RATIO`): the
    centre is then at the data to the steps' precision, and the budget the
    later steps would have spent goes to the estimator's own releases. Each
    movement is shrunk toward the current centre by the James–Stein factor,
    which removes most of a step's noise when the centre is already at the
    data (:meth:`_AutoRelease._mean_steps`).

The first rows (:func:`pilot_rows`)
    On many rows (at least :data:`PILOT_FACTOR` times
    :math:`\max(2^{15}, 2000 \sqrt{d} / \mu^*)`, public) an estimator whose
    releases are of the Gram matrix
    (``PrivatePCA``, ``ComplexGaussPCA``, ``CoherentPowerPCA``'s dense
    path) takes its centre from the first
    rows, read once and kept, so that the fit reads every row once with a
    numeric bound and twice with ``"auto"``. With a numeric bound the first
    rows' private mean is the centre :math:`c` the rows are clipped around, and
    the estimator's pass releases the sum of the clipped rows that corrects
    the mean and the covariance (:meth:`_BasePrivatePCA._centred_in_one_pass`;
    a second pass when the correction shows the first rows' centre was off,
    :data:`PILOT_MISS`). With ``"auto"`` the early mean steps run on the first
    rows and the last ones (at most :data:`PILOT_FULL_STEPS`) on every row:
    the first of those clips at twice the last early step's radius, is the
    first pass over every row, and its counts serve
    the covariance's search when it moved the centre by at most
    :data:`PILOT_STALE` of its radius; otherwise a second searches for the
    :data:`PILOT_QUANTILE` of the norms. Which rows are the first and how many
    is public; what the steps decide is from released values. The fit is
    charged once the first rows have been read, before their first release
    and so before any value that depends on the rows leaves it
    (:func:`read_bounds`).

``bounds=(lower, upper)``
    Public per-feature ranges. Rows are clipped into the box (a per-feature
    clip is a fixed function of each row: post-processing of nothing private)
    and translated by the box's centre :math:`c` (its midpoint; 0 without
    centring), so every row has norm at most
    :math:`R = \|\max(|\mathrm{lower} - c|, |\mathrm{upper} - c|)\|` (the box
    rounded inward and :math:`R` computed in the data's dtype:
    :func:`inward_box`). The mean is the box centre plus the private mean of
    the residuals (sensitivity :math:`2 \min(R, C)`), and ``data_norm``
    defaults to :math:`R`. With ``data_norm="auto"`` as well, the
    covariance's bound comes from one search of the norms around the private
    mean.

Budget: the searches take :data:`BOUND_BUDGET_SHARE` of :math:`\mu^{*2}` (a
single search on few rows more, up to :data:`MAX_BOUND_SHARE`, to keep its
noise within :data:`DROWNED` :math:`\cdot n` rows: :func:`search_share`)
and their checks :data:`CHECK_BUDGET_SHARE` (split evenly between them);
with ``"auto"`` and centring but no box the mean's steps may take
:data:`AUTO_MEAN_SHARE` of it, and the estimator's own releases share the
rest. The step tallies what it released (:func:`_give_back`):
the estimator's releases get :math:`\mu^{*2}` less that tally, whatever the
searches, the checks and the steps left unspent or ran again. Every
:math:`\mu` is fixed before its release, from public values and earlier
releases only, and along every path the :math:`\mu^2` sum to exactly
:math:`\mu^{*2}`: by the fully adaptive composition of Gaussian DP (Smith &
Thakurta 2022) the fit is :math:`\mu^*`-GDP (docs/privacy.rst §2, §5), and
the accountant sees one charge of :math:`\mu^*`.
"""

import math
from typing import NamedTuple

import numpy as np

from ._blocks import sparse_rows
from ._box import boxed_rows, check_box, dtype_box, stays_sparse
from ._dask import ChunkedRows
from ._moved import translate_if_far as _translate_if_far
from ._norm_plan import (
    AUTO_MEAN_SHARE,
    BINS_PER_OCTAVE,
    BOUND_BUDGET_SHARE,
    CHECK_BINS,
    CHECK_BUDGET_SHARE,
    DEFAULT_NORM_RANGE,
    DEFAULT_QUANTILE,
    MAX_BOUND_SHARE,
    MAX_DATA_NORM,
    MAX_RECOVERIES,
    MEAN_STEPS,
    MIN_DATA_NORM,
    PILOT_FULL_STEPS,
    PILOT_PART,
    PILOT_QUANTILE,
    PILOT_STALE,
    STALE_MOVE,
    STOP_RATIO,
    auto_quantile,
    check_data_norm_range,
    interpolate_bound,
    mean_step_count,
    norm_grid,
    pilot_rows,
    search_queries,
    search_share,
    shrink_step,
    shrunk_error,
    target_count,
)
from ._norm_stats import _around, _pass_around
from ._releases import BIN_SUMS, CENTRED, MEAN_SUM, PILOT_SUM, Release
from ._reported import _announce, _engine, _rebound
from ._rows import InMemoryRows
from ._spectrum import gaussian_error
from .noise import dense_noise, noise_scale
from .privacy import gdp_epsilon


# ------------------------------------------------- the search's releases
class Search(NamedTuple):
    """What :func:`search_bound` found, and what it spent."""

    index: int  # the bin chosen
    count: float  # the noisy count released there (n, exact, at an unread end)
    spent: float  # Σ μ² of the counts it released (each 1/σ²)
    recoveries: int  # searches run again after a check found an overshoot
    # the noisy count released at bin index − 1, below the target (None when
    # the last search did not compare it), and the target
    below: float = None
    target: float = None


def _bisect(cumulative, target, sigma, rng, top, count):
    r"""Noisy binary search of bins ``0..top`` for the first whose count
    reaches ``target``: ``(bin, its noisy count, the noisy count of the bin
    below it, comparisons made)``.

    ``count`` is returned for ``top`` when it is never compared (its count is
    known: :math:`n` for the grid's last bin, a check's noisy count
    otherwise). Each comparison releases ``cumulative[mid]``
    :math:`+ \mathcal{N}(0, \sigma^2)`. The bin found, ``low``, was last
    raised by a comparison of bin :math:`\mathrm{low} - 1` that fell below
    the target, whose noisy count is returned too (``None`` for
    :math:`\mathrm{low} = 0`).
    """
    low, high, used, below = 0, top, 0, None
    while low < high:
        mid = (low + high) // 2
        noisy = float(cumulative[mid] + dense_noise(rng, 1, sigma)[0])
        used += 1
        if noisy >= target:
            high, count = mid, noisy
        else:
            low, below = mid + 1, noisy
    return low, count, below, used


def search_bound(cumulative, mu, rng, quantile, check_mu=0.0,
                 recoveries=MAX_RECOVERIES):
    r"""A private quantile by noisy binary search, checked against an
    overshoot.

    Parameters
    ----------
    cumulative : ndarray of shape (n_bins,)
        ``cumulative[j]``: the number of rows in bins :math:`0, \ldots, j`
        (``cumulative[-1]`` :math:`= n`, public).
    mu : float
        The search's budget: :math:`Q = \lceil \log_2 B \rceil` comparisons
        (:func:`search_queries`) of :math:`\sigma = \sqrt{Q}/\mu` each.
    rng : numpy.random.Generator
    quantile : float
    check_mu : float
        The check's :math:`\mu` (0: no check).
    recoveries : int
        Searches run again, at most, after checks that found an overshoot.

    Returns
    -------
    Search
        ``index``: the bin :math:`j` found, the first whose noisy count
        reaches :func:`target_count` (the last bin if none does); ``count``:
        the noisy count released at :math:`j` (:math:`n`, exact, for the last
        bin when it was never compared), the estimate of the rows within
        :math:`u_j`; ``spent``: the :math:`\sum \mu^2` of every count
        released; ``recoveries``; ``below``: the noisy count released at
        :math:`j - 1` (``None`` if the last search did not compare it), and
        ``target``: for :func:`interpolate_bound`.

    **The check.** One comparison that errs far from the data, where every
    count is 0 or :math:`n`, sends a binary search decades away: a "below the
    target" at a grid value above every row leads to the next value up, and
    the covariance's noise, which grows with :math:`C^2`, is then decades too
    large (wine at ε = 2: a bound of 118.9 for rows of norm at most 0.652).
    So the count
    ``CHECK_BINS`` bins (a factor 4) below the bound found is released once
    more, at ``check_mu``. If it reaches the target too, the quantile lies at
    or below that lower value, and the search runs again over the bins up to
    it, at the same :math:`\sigma` per comparison; at most ``recoveries``
    times, after which the checked value itself is the bound (its noisy
    count reached the target). A check that errs on a correct bound (its
    count is below the target, so only its noise can make it reach it)
    lowers the bound by at most a factor 4 to one whose noisy count reached
    the target: a lower quantile, not a bound far from the data.

    **Privacy.** Under replacement of one row a count of rows in bins
    :math:`\le j` changes by at most 1, so a count released with noise
    :math:`\sigma` is :math:`(1/\sigma)`-GDP. Which counts are released (each
    comparison's bin, whether a check fails, whether a search runs again) is
    decided from the counts released before and from public values only,
    and every :math:`\sigma` is fixed before its release, so by the fully
    adaptive composition of GDP (Smith & Thakurta 2022; docs/privacy.rst §2)
    what the search releases is :math:`\sqrt{\mathrm{spent}}`-GDP, with
    :math:`\mathrm{spent} = \sum 1/\sigma_i^2` over the counts actually
    released: the fit's tally (:class:`_AutoRelease`). A search without a
    failed check spends at most :math:`\mu^2 + \mathrm{check\_mu}^2`; one
    that uses fewer than :math:`Q` comparisons spends less, and the fit
    gives the rest to the estimator's own releases.
    """
    n_bins = cumulative.shape[0]
    n_samples = float(cumulative[-1])
    queries = search_queries(n_bins)
    sigma = math.sqrt(queries) / mu
    # μ² of one comparison (σ = 0 for the non-private fit: μ = inf)
    each = mu**2 / queries
    target = target_count(quantile, n_samples, sigma)
    top, count, spent = n_bins - 1, n_samples, 0.0
    for attempt in range(recoveries + 1):
        index, count, below_count, used = _bisect(cumulative, target, sigma, rng,
                                                  top, count)
        spent += used * each if used else 0.0
        below = index - CHECK_BINS
        if not check_mu or below < 0:
            break
        noisy = float(cumulative[below] + dense_noise(rng, 1, 1.0 / check_mu)[0])
        spent += check_mu**2
        if noisy < target:  # confirmed: the quantile is above u_below
            break
        # an overshoot: the quantile is at or below u_below, whose noisy count
        # is known
        top, count = below, noisy
        if attempt == recoveries:
            index, below_count = below, None
    return Search(index, count, spent, attempt, below_count, target)


_around.any_layout = True  # a column-major Dask partition is read as it is


def _box_rows(data, lower, upper, centre):
    r"""The rows clipped into the box and translated by
    :math:`-\mathrm{centre}` (:func:`~sklearn_dppca._box.boxed_rows`).

    One copy of the data in memory (a Dask array stays lazy, chunk by
    chunk), but for CSR rows whose zeros the box keeps: their values are
    clipped a block at a time as the passes read them
    (:class:`~sklearn_dppca._blocks.BoxedCSR`).
    """
    engine = _engine(data)
    X = engine.X
    if isinstance(engine, ChunkedRows):
        meta = (X._meta if not engine.sparse_chunks
                or stays_sparse(lower, upper, centre)
                else np.empty((0, 0), dtype=X.dtype))
        boxed = ChunkedRows(X.map_blocks(boxed_rows, lower, upper, centre,
                                         dtype=X.dtype, meta=meta))
        boxed.with_gram = engine.with_gram
        return boxed
    lazy = sparse_rows(X) and stays_sparse(lower, upper, centre)
    _announce(data, "the rows clipped into the box (" + (
        "a block at a time, as the passes read them" if lazy else "one copy") + ")")
    # the passes' threads as the plan counted them (those of the rows given:
    # a box that densifies sparse rows runs in the one thread counted); CSR
    # rows whose zeros stay zeros are clipped a block at a time as the
    # passes read them (_blocks.BoxedCSR), never copied whole (issue 31)
    boxed = InMemoryRows(boxed_rows(X, lower, upper, centre, lazy=True),
                         engine.threads)
    # whether the first pass forms a raw Gram matrix stays the fit's choice:
    # the new rows' default (True) formed a d x d matrix on the matrix-free
    # and noisy power paths, which plan none (8 000 x 6 000 CSR: 624 MB
    # against a plan of 154; mend 118)
    boxed.with_gram = engine.with_gram
    return boxed


# ------------------------------------------------------------ the fit's step
class BoundsPlan(NamedTuple):
    """The norm bounds of one fit, from public values alone
    (:func:`plan_bounds`), before the data is read: what the read and the
    releases do, and the μ of each. Nothing in it changes afterwards."""

    n_samples: int
    n_features: int
    dtype: np.dtype
    #: epsilon=inf: no noise, and without a bound no clipping at all
    exact: bool
    center: bool
    #: data_norm="auto"
    auto: bool
    #: the bound given (a number), else None
    data_norm: object
    #: (lower, upper) in the data's dtype, rounded inward, or None
    box: object
    #: the box's centre, the origin of the rows after the box (zeros without)
    offset: np.ndarray
    box_norm: object
    #: "auto": the grid of candidate bounds
    edges: object
    #: the covariance's quantile and the mean's steps' ("auto")
    quantile: float
    mean_quantile: float
    mean_shares: tuple
    n_searches: int
    #: "auto" with centring and no box: the mean's adaptive steps
    adaptive: bool
    #: the first rows' count (pilot_rows), or None
    pilot: object
    #: with a pilot and "auto": the steps on the first rows
    prefix_steps: int
    #: the charge μ*, the searches' and checks' μ (each search's), and what
    #: the estimator's own releases were planned to compose to (μ² units)
    mu_total: object
    search_mu: object
    check_mu: object
    own_planned: float
    #: bytes left by the fit's planned memory within ``memory_limit`` (None:
    #: no limit): in-memory sparse rows are moved to a far private mean
    #: (read as dense blocks) only where ``moved_bytes`` of them fit in it
    dense_room: object = None
    moved_bytes: int = 0
    #: threads of the passes over rows moved to a far private mean
    #: (``MovedRows.threads``: a block each, as the plan counts them)
    moved_threads: object = None


class BoundsRead(NamedTuple):
    """What :func:`read_bounds` read before the charge."""

    #: every row, clipped into the box if there is one
    rows: object
    #: the rows the first step reads: the first rows with a pilot, else rows
    data: object
    #: "auto": the first step's counts (and sums) on the grid
    around: object
    #: a numeric bound: the first pass (with a pilot the first rows' clipped
    #: sum); None with "auto"
    total: object
    #: a numeric bound in use (given, the box's radius, inf for the
    #: non-private fit, or the largest row norm); None with "auto"
    data_norm: object
    #: data_norm=None: the bound was read from the data (not private)
    from_data: bool


class BoundsRelease(NamedTuple):
    """What :func:`release_bounds` released, and the rows the fit goes on
    with."""

    #: the private mean in the coordinates of ``data`` (the fit adds
    #: ``offset``), or None without centring
    mean: object
    #: the covariance's bound
    data_norm: float
    #: the bound of the (last) mean release, or None
    mean_norm: object
    #: the plan of the estimator's own releases, given what the steps did
    #: not spend (:func:`_give_back`)
    plan: object
    data: object
    offset: np.ndarray
    #: "auto": the search's estimate of the share of rows beyond the bound
    clipped_fraction: object
    #: searches run again after a failed check
    recoveries: int
    #: (expected, upper) of the squared norm of the mean's error (with "auto"
    #: the shrunk last step's), or None: public, for the rank-one term it
    #: adds to the rows centred on the mean (docs/privacy.rst §5)
    mean_error: object = None


def plan_bounds(estimator, n_samples, n_features, dtype, engine, plan):
    r"""The norm bounds of one fit, planned before the data is read, and the
    estimator's ``plan`` with their shares: ``(BoundsPlan, plan)``.

    Each of the ``n_searches`` searches gets
    :math:`\mu_b = \mu^* \sqrt{w / \mathrm{n\_searches}}` for its
    comparisons and :math:`\mu^* \sqrt{c / \mathrm{n\_searches}}` for its
    check (:math:`w` = :func:`search_share`, :math:`c` =
    :data:`CHECK_BUDGET_SHARE`). The mean's adaptive steps get
    :math:`\mu^* \sqrt{a}` in all (:math:`a` = :data:`AUTO_MEAN_SHARE`)
    and the other releases keep their proportions within
    :math:`1 - w - c - a`; otherwise every :math:`\mu_j` is scaled by
    :math:`\sqrt{1 - w - c}`. The subclass's releases compose to exactly
    its charge :math:`\mu^*` (its plan's invariant), so these compose to
    :math:`\mu^*` too; :func:`release_bounds` then gives the estimator's own
    releases whatever the searches and steps did not spend
    (:func:`_give_back`), so that the fit spends exactly what it is charged
    (one GDP charge of :math:`\mu^*`).

    Parameters
    ----------
    estimator : _BasePrivatePCA
    n_samples, n_features : int
    dtype : numpy.dtype
        The data's dtype (its limits on a bound: :data:`MAX_DATA_NORM`,
        :data:`MIN_DATA_NORM`).
    engine : InMemoryRows, ChunkedRows or other, or None
        The rows' engine: a pilot (:func:`pilot_rows`) needs one of these two.
    plan : PrivacyPlan
        The estimator's own plan (``_privacy_plan``).

    Raises
    ------
    ValueError
        Before any charge, when a search would be drowned in its noise
        (:func:`_refuse_drowned`), and for a plan charged in Rényi DP.
    """
    limit = MAX_DATA_NORM[dtype.type]
    exact = estimator.epsilon == math.inf
    center = estimator.center
    auto = isinstance(estimator.data_norm, str)
    data_norm = (None if auto or estimator.data_norm is None
                 else float(estimator.data_norm))
    if data_norm is not None:
        check_data_norm_range(data_norm, dtype)
    box = check_box(getattr(estimator, "bounds", None), n_features,
                    getattr(estimator, "feature_names_in_", None))
    offset, box_norm = np.zeros(n_features), None
    if box is not None:
        # the box and its centre in the data's dtype, the box rounded
        # inward: the rows are clipped and translated in that dtype
        box, offset, box_norm = dtype_box(box, dtype, center)
        if data_norm is None:  # the box's radius is a bound in use
            check_data_norm_range(box_norm, dtype, name=(
                f"the radius of the bounds' box ({box_norm:.3g})"))
    # The centre from the first rows and the mean corrected in the
    # covariance's pass (pilot_rows): an estimator whose releases are of the
    # Gram matrix (_pilot_centring), centred, with a bound given or "auto",
    # no box, a private fit.
    pilot = None
    if (center and box is None and not exact and (auto or data_norm is not None)
            and getattr(estimator, "_pilot_centring", False)
            and isinstance(_engine(engine), (InMemoryRows, ChunkedRows))
            and "mu" in plan.charge):
        pilot = pilot_rows(n_samples, n_features, plan.charge["mu"])
    room = getattr(estimator, "_memory_room", None)
    if pilot and hasattr(estimator, "_first_rows_fit"):  # kept where they fit
        fits, left = estimator._first_rows_fit(engine, pilot)
        pilot, room = (pilot, left) if fits else (None, room)
    bounds = BoundsPlan(
        n_samples=n_samples, n_features=n_features, dtype=dtype, exact=exact,
        center=center, auto=auto, data_norm=data_norm, box=box, offset=offset,
        box_norm=box_norm, edges=None, quantile=DEFAULT_QUANTILE,
        mean_quantile=DEFAULT_QUANTILE, mean_shares=(), n_searches=0,
        adaptive=False, pilot=pilot, prefix_steps=0, mu_total=None,
        search_mu=None, check_mu=None, own_planned=0.0,
        dense_room=room, **_moved_plan(estimator, n_samples, n_features))
    if not auto:
        if pilot:
            # the mean's share in three: the pilot mean's, and two releases
            # of the sum of the clipped rows (μ each)
            mus = dict(plan.mus)
            mus["mean"] = plan.mus["mean"] * math.sqrt(PILOT_PART)
            mus["centring"] = plan.mus["mean"] * math.sqrt((1.0 - PILOT_PART) / 2.0)
            plan = plan._replace(mus=mus)
        return bounds, plan
    if "mu" not in plan.charge:
        raise ValueError(
            'data_norm="auto" composes exactly only with a Gaussian-DP '
            "budget plan, and this fit's plan is charged in Rényi DP (a "
            "random-repetition selection). Give data_norm (a number), or "
            "bounds=(lower, upper), or choose the fit's parameters without "
            "the repetition (e.g. fixed clip_radius and n_iter)."
        )
    edges = norm_grid(getattr(estimator, "norm_range", DEFAULT_NORM_RANGE), limit,
                      dtype, MIN_DATA_NORM[dtype.type])
    # a number applies to every search; "auto" is resolved here, once μ* is
    # known (auto_quantile), for the covariance's bound, and the mean's
    # steps search for the median
    quantile = getattr(estimator, "norm_quantile", DEFAULT_QUANTILE)
    mean_quantile = DEFAULT_QUANTILE if isinstance(quantile, str) else float(quantile)
    mu_total = plan.charge["mu"]
    if isinstance(quantile, str):  # public: n, d, μ*, n_components
        quantile = auto_quantile(n_samples, n_features, mu_total,
                                 getattr(estimator, "n_components", None))
    else:
        quantile = float(quantile)
    # a search before every mean step (none where the box bounds it) and one
    # for the covariance's bound
    adaptive, n_searches, prefix_steps = center and box is None, 1, 0
    mean_shares = (1.0,) if center else ()  # the box's
    if adaptive:  # public: n, d, μ*
        count = mean_step_count(pilot or n_samples, n_features, mu_total)
        if pilot:  # the early steps on the first rows, then all rows
            count = min(count + PILOT_FULL_STEPS, len(MEAN_STEPS))
            prefix_steps = count - PILOT_FULL_STEPS
        steps = MEAN_STEPS[-count:]
        mean_shares = tuple(w / sum(steps) for w in steps)
        n_searches = 1 + len(steps)
    # a larger share for one search only (MAX_BOUND_SHARE)
    most_share = BOUND_BUDGET_SHARE if adaptive else MAX_BOUND_SHARE
    searches = search_share(pilot or n_samples, n_searches, mu_total,
                            edges.shape[0], most_share)
    if searches is None:
        _refuse_drowned(estimator, n_samples, n_features, edges, n_searches,
                        adaptive, most_share, mu_total)
    share = searches + CHECK_BUDGET_SHARE
    if adaptive:
        # the others' share (all of it for epsilon=inf, whose μ are inf)
        own = 1.0 - (plan.mus["mean"] / mu_total) ** 2 if math.isfinite(
            mu_total) else 1.0
        scale = math.sqrt((1.0 - share - AUTO_MEAN_SHARE) / own)
        mus = {k: m * scale for k, m in plan.mus.items()}
        mus["mean"] = mu_total * math.sqrt(AUTO_MEAN_SHARE)
    else:
        mus = {k: m * math.sqrt(1.0 - share) for k, m in plan.mus.items()}
    # What the estimator's own releases (all but the mean, which this step
    # releases) compose to: the charge less this step's planned spend.
    bounds = bounds._replace(
        edges=edges, quantile=quantile, mean_quantile=mean_quantile,
        mean_shares=mean_shares, n_searches=n_searches, adaptive=adaptive,
        prefix_steps=prefix_steps, mu_total=mu_total,
        search_mu=mu_total * math.sqrt(searches / n_searches),
        check_mu=mu_total * math.sqrt(CHECK_BUDGET_SHARE / n_searches),
        own_planned=mu_total**2 * (1.0 - share) - mus.get("mean", 0.0) ** 2)
    return bounds, plan._replace(mus=mus)


def bounds_releases(bounds, plan):
    """The releases of the norm bounds' step and the private mean, as
    planned (:class:`~sklearn_dppca._releases.Release`; ``plan`` is the one
    :func:`plan_bounds` returned). With ``"auto"`` a search may run again
    after a failed check and the mean's steps may stop early: the
    estimator's own releases then give or take the difference
    (:func:`_give_back`), so the fit composes to its charge whichever ran."""
    mus = plan.mus
    if not bounds.auto:
        if not bounds.center:
            return []
        if bounds.pilot:
            return [Release("mean", mus["mean"], PILOT_SUM),
                    Release("centring", mus["centring"] * math.sqrt(2.0),
                            CENTRED, draws=2)]
        return [Release("mean", mus["mean"], MEAN_SUM)]
    count = bounds.n_searches
    releases = [
        Release("bound search", bounds.search_mu * math.sqrt(count), "row norms",
                draws=count),
        Release("bound check", bounds.check_mu * math.sqrt(count), "row norms",
                draws=count)]
    if bounds.center:
        steps = len(bounds.mean_shares)
        releases.append(Release(
            "mean", mus["mean"],
            BIN_SUMS if bounds.adaptive else "the sum for the private mean",
            draws=steps, at_most=bounds.adaptive and steps > 1))
    return releases


def _refuse_drowned(estimator, n, d, edges, n_searches, adaptive, most, mu_total):
    r"""Refuse, from public values only and before any charge, a fit whose
    searches would have noise beyond :data:`DROWNED` :math:`\cdot n`
    rows per comparison even with the largest share ``most`` they may take.

    :math:`\sigma = \sqrt{Q}/\mu_b` depends on :math:`n`, ``epsilon``,
    ``delta``, ``norm_range`` (:math:`Q`), ``center``, ``bounds`` and,
    through the mean's steps, :math:`d` only. The message names the
    smallest ``epsilon`` at which the fit would run.
    """
    queries, n_bins = search_queries(edges.shape[0]), edges.shape[0]
    sigma = math.sqrt(queries / (most / n_searches)) / mu_total

    # the smallest epsilon that runs; with the mean's steps their number
    # falls as μ* grows (mean_step_count): bisect
    def drowned(mu):
        searches = 1 + mean_step_count(n, d, mu) if adaptive else n_searches
        return search_share(n, searches, mu, n_bins, most) is None

    low, high = mu_total, mu_total
    while drowned(high):
        low, high = high, 2.0 * high
    for _ in range(60):
        middle = math.sqrt(low * high)
        low, high = (middle, high) if drowned(middle) else (low, middle)
    epsilon = gdp_epsilon(high, estimator.delta)
    digits = 2 - math.floor(math.log10(epsilon))  # 3 significant, rounded up
    epsilon = math.ceil(epsilon * 10.0**digits) / 10.0**digits
    raise ValueError(
        f'data_norm="auto" on {n} rows at epsilon={estimator.epsilon:g}: '
        "each comparison of the private search for the norm bound would "
        f"have noise of {sigma:.0f} rows with the largest share of the "
        f"budget the searches may take ({most:.0%}), more than a quarter "
        "of the rows, "
        "so the bound would be close to a random value of its grid and "
        "the fit's error far beyond that of answering zero. The fit is "
        "refused before any charge: give data_norm (a number, from "
        "domain knowledge) or bounds=(lower, upper) instead, or an "
        f"epsilon of at least {epsilon:g}."
    )


def read_bounds(bounds, data, charge):
    """Read the rows, then ``charge()`` (the fit's one charge), before
    any release: a :class:`BoundsRead`.

    With a fixed bound this is the first pass of the statistics; with
    ``"auto"`` a pass over the norms (whose value is never used). Both
    read every row and check it finite, so a fit that fails on its data
    (NaN, inf) is not charged. With a pilot (:func:`pilot_rows`), only
    the first rows are read here, and the charge follows at once, before
    their first release: a step on the first rows releases, and from it
    on what the fit shows (the steps' progress lines, their number, an
    error, an interrupt, a budget refusal) depends on the rows, so
    nothing of it may come before the charge. In memory every value is
    checked finite first (one cheap reduction), so a NaN there is still
    refused uncharged; a Dask array's later rows are checked as they are
    read, after the charge, and a fit failing there stays charged. Runs
    inside the fit's :func:`~sklearn_dppca.privacy.private_computation`,
    so it warns nothing: for ``data_norm=None`` (not private) the base
    warns after the fit.
    """
    read = _read(bounds, data)
    if bounds.pilot:
        finite = getattr(_engine(data), "check_finite", None)
        if finite is not None:
            finite()
    charge()
    return read


def _read(bounds, data):
    if (bounds.auto or bounds.box is not None) and not isinstance(
        _engine(data), (InMemoryRows, ChunkedRows)
    ):
        raise ValueError(
            'data_norm="auto" and bounds are not supported for Array API '
            "inputs yet: give data_norm (a number), or fit a NumPy array."
        )
    if bounds.box is not None:
        data = _rebound(data, _box_rows(data, *bounds.box, bounds.offset))
    # all the rows; with a pilot the steps before the covariance's pass
    # read only the first ones (the charge follows their read: read_bounds)
    rows = first = data
    if bounds.pilot:
        first = _engine(data).head(bounds.pilot)
    if bounds.auto:
        # the first pass: every row checked finite, and what the first
        # step (the first mean step's search and sum, the box's sum, or
        # without centring the covariance's search) releases from
        box_sum = bounds.center and not bounds.adaptive
        _announce_rows(rows, first, bounds.pilot,
                       "row norms (every value checked finite)" + (
                           " and their sums per bin of the norm grid"
                           if bounds.adaptive else
                           " and the sum for the private mean" if box_sum else ""))
        around = _pass_around(first, None, bounds.edges, sums=bounds.adaptive,
                              radius=bounds.box_norm if box_sum else None)
        return BoundsRead(rows, first, around, None, None, False)
    data_norm, from_data = bounds.data_norm, False
    if data_norm is None:
        if bounds.box is not None:
            data_norm = bounds.box_norm
        elif bounds.exact:  # the non-private fit: nothing to clip for
            total = data.first_pass(math.inf, with_sum=bounds.center)
            return BoundsRead(rows, first, None, total, math.inf, False)
        else:  # not private: the base warns once the fit has released it
            largest = data.largest_norm()
            data_norm = largest if largest > 0.0 else 1.0
            from_data = True
        # the data's largest norm is not quoted
        check_data_norm_range(data_norm, bounds.dtype, name=(
            "data_norm=None: the rows' largest norm" if from_data else None))
    if bounds.pilot:
        _announce_rows(rows, first, bounds.pilot, PILOT_SUM)
        total = first.clipped_sum(data_norm)
    else:
        total = data.first_pass(data_norm, with_sum=bounds.center)
    return BoundsRead(rows, first, None, total, data_norm, from_data)


def _announce_rows(rows, data, pilot, what):
    """:func:`_announce` of a pass over ``data``; over the pilot's rows
    (``data`` is not ``rows``), said as such and not counted as a pass over
    the rows."""
    if data is rows:
        _announce(data, what)
        return
    announce = getattr(rows, "announce_part", None)
    if announce is not None:
        announce(f"the first {pilot} rows: {what}")


def _moved_plan(estimator, n_samples, n_features):
    """The ``moved_bytes`` and ``moved_threads`` of :class:`BoundsPlan`: the
    bytes of moved blocks beyond the plan, where it did not count them
    (sparse input, also once a box has densified it), and their threads."""
    if not hasattr(estimator, "_moved_threads"):
        return {}
    counted = estimator._moves_rows()
    return {"moved_bytes": 0 if counted else estimator._moved_bytes(
                n_samples, n_features),
            "moved_threads": estimator._moved_threads(n_samples, n_features)}


def release_bounds(bounds, read, plan, rng):
    """Release the bounds and the private mean, after the charge: a
    :class:`BoundsRelease`.

    ``plan`` is the plan :func:`plan_bounds` returned; the release's
    ``plan`` gives the estimator's own releases the budget the mean's
    adaptive steps left unspent (:func:`_give_back`).
    """
    if bounds.auto:
        return _AutoRelease(bounds, read).run(plan, rng)
    n, data, offset = bounds.n_samples, read.rows, bounds.offset
    mean, mean_norm, data_norm, mean_error = None, None, read.data_norm, None
    if bounds.center:
        mean_norm = data_norm
        if bounds.box_norm is not None:  # box rows have norm ≤ R already
            mean_norm = min(data_norm, bounds.box_norm)
        # Σ clip(x_i) has L2 sensitivity 2·mean_norm (docs/privacy.rst §3)
        sigma = noise_scale(2.0 * mean_norm, plan.mus["mean"])
        noise = dense_noise(rng, read.total.shape[0], sigma)
        mean = (read.total + noise) / (bounds.pilot or n)
        mean_error = gaussian_error(sigma / (bounds.pilot or n), mean.shape[0])
        mean, data, offset = _translate_if_far(
            mean, data_norm, data, offset, bounds.dtype,
            first_pass=not bounds.pilot, room=bounds.dense_room,
            need=bounds.moved_bytes, threads=bounds.moved_threads)
    return BoundsRelease(mean, data_norm, mean_norm, plan, data, offset, None, 0,
                         mean_error)


def _give_back(bounds, plan, spent):
    r"""``plan`` with the estimator's own releases given what the bounds'
    step did not spend, computed from the composed spend.

    The own releases (every key but ``"mean"``) were planned to compose
    to :math:`\mu^{*2} - (\text{this step's planned spend})`
    (:func:`plan_bounds`); this step spent the tally :math:`s` (every
    count, check and mean step it released, each :math:`\mu^2` as drawn).
    Scaling every own :math:`\mu` by
    :math:`\sqrt{(\mu^{*2} - s)/\mathrm{planned}}` makes them compose to
    :math:`\mu^{*2} - s`, whatever the number of their releases or
    branches (the composed spend of a plan is a sum of :math:`\mu^2`,
    each proportional to one key's :math:`\mu^2`), so along every path
    the :math:`\mu^2` of the fit sum to exactly :math:`\mu^{*2}`.
    :math:`s` is below the planned spend when a search makes fewer
    comparisons than it planned or the steps stop early, and above it
    when a search runs again after a failed check (:func:`search_bound`):
    the own releases then give the difference (at most
    ``MAX_RECOVERIES`` times the searches' and checks' share, 16% of
    :math:`\mu^{*2}`). Both :math:`s` and the scale are functions of
    public values and released values, fixed before any own release.
    """
    total, planned = bounds.mu_total, bounds.own_planned
    if not (total and math.isfinite(total)) or not planned > 0.0:
        return plan  # no search (not "auto"), or the non-private fit
    scale = math.sqrt((total**2 - spent) / planned)
    return plan._replace(mus={k: m * scale if k != "mean" else m
                              for k, m in plan.mus.items()})


class _AutoRelease:
    """The releases of ``data_norm="auto"`` after the charge: one call of
    :meth:`run`. Its state (the tally of what was released, the rows the
    next step reads, the origin) lives for that call only."""

    def __init__(self, bounds, read):
        self.bounds = bounds
        self.rows, self.data, self.around = read.rows, read.data, read.around
        self.offset = bounds.offset
        self.spent, self.recoveries, self.mean_error = 0.0, 0, None

    def run(self, plan, rng):
        bounds = self.bounds
        mean, mean_norm, around, found = None, None, self.around, None
        if bounds.center:
            mean, mean_norm, around, found = self._mean_steps(plan, rng)
        if found is None:
            found = self._search(around, rng, bounds.quantile)
        data_norm, count = interpolate_bound(bounds.edges, found)
        self.around = None  # the statistics are not kept past the release
        # the search's estimate of the rows beyond C: post-processing
        clipped = float(np.clip(1.0 - count / bounds.n_samples, 0.0, 1.0))
        if mean is not None:
            mean, self.data, self.offset = _translate_if_far(
                mean, data_norm, self.data, self.offset, bounds.dtype,
                first_pass=False, room=bounds.dense_room,
                need=bounds.moved_bytes, threads=bounds.moved_threads)
        if isinstance(_engine(self.data), InMemoryRows):  # the Gram's first pass
            _announce(self.data, "row norms around the private mean")
            _engine(self.data).first_pass(data_norm, with_sum=bounds.center)
        return BoundsRelease(mean, data_norm, mean_norm,
                             _give_back(bounds, plan, self.spent), self.data,
                             self.offset, clipped, self.recoveries, self.mean_error)

    def _mean_steps(self, plan, rng):
        r"""The private mean with ``"auto"``: ``(mean, last radius, counts for
        the covariance's search, that search if already made)``.

        Step :math:`s` clips the rows centred on the current estimate at a
        searched radius (with a box: one step at the box's radius) and
        releases their sum, sensitivity twice the radius, at
        :math:`\mu_{\mathrm{mean}} \sqrt{w_s}`. One pass over the rows serves
        a step: the counts of its search and the sums per bin of the norm
        grid, from which the clipped sum at any grid value is exact
        post-processing
        (:meth:`Around.clipped_sum`); the first step's pass is the read
        before the charge. Everything that steers the steps is
        post-processing of earlier releases and public values: the radius
        (capped at twice the largest so far: the distance to the data shrinks
        from step to step, and a search lost in its noise must not blow a
        step up), the James–Stein shrinkage of each movement
        (:func:`shrink_step`), and the stop: after two steps in a row whose
        movements were within their noise (:data:`STOP_RATIO`; one alone
        could be a search that overshot, whose noise makes any movement look
        small) the centre is at the data to the steps' precision, and what
        the later steps and their searches would have spent goes to the
        estimator's own releases (:func:`_give_back`: the tally holds only
        what ran).

        The covariance's search uses the last step's pass too, whose counts
        are of the norms around the centre before that step, when the step
        moved the centre by at most :data:`STALE_MOVE` of its radius (each
        norm then moved by at most that much); when both searches ask for
        the same quantile the last step's search is the covariance's too.
        Otherwise (with a box always) the norms around the final centre are
        counted in a pass of their own. Both are decided by released values.

        With a pilot (:func:`pilot_rows`) the first ``prefix_steps`` steps
        read the first rows only (and their stop moves on to the steps on
        every row); the last ones (at most :data:`PILOT_FULL_STEPS`) read
        every row. The first of those clips at twice the last early step's
        radius (its pass counts the norms and sums the clipped rows, nothing
        per bin); a second searches
        for :data:`PILOT_QUANTILE` of the norms; one that moved the centre by
        at most :data:`PILOT_STALE` of its radius is the last.
        """
        b = self.bounds
        n, steps, around = b.pilot or b.n_samples, b.mean_shares, self.around
        mean = np.zeros(self.offset.shape[0])
        d, widest, calm, found, index = mean.shape[0], None, False, None, 0
        step, quantile, stale = 0, b.mean_quantile, STALE_MOVE
        while step < len(steps):
            weight, fixed = steps[step], None
            around = None if step else around  # freed before the next pass's
            if b.pilot and step >= b.prefix_steps and self.data is not self.rows:
                # on to every row: the first pass over them, its sum
                # clipped at twice the last step's radius
                self.data, n = self.rows, b.n_samples
                quantile, stale = PILOT_QUANTILE, PILOT_STALE
                fixed = min(index + BINS_PER_OCTAVE, b.edges.shape[0] - 1)
                widest = None  # the next step's search, on every row, uncapped
                _announce(self.data, "row norms around the first rows' centre and "
                          "their clipped sum (every value checked finite)")
                around = _pass_around(self.data, mean, b.edges,
                                      radius=float(b.edges[fixed]))
            elif step:
                _announce_rows(self.rows, self.data, b.pilot,
                               "row norms around the private mean and their sums "
                               f"per bin (mean step {step + 1} of at most "
                               f"{len(steps)})")
                around = _pass_around(self.data, mean, b.edges, sums=True)
            if fixed is not None:
                radius, total, found = float(b.edges[fixed]), around.fixed, None
            elif b.adaptive:
                found = self._search(around, rng, quantile)
                index = found.index
                if widest is not None:  # at most twice (one octave) the widest
                    index = min(index, widest + BINS_PER_OCTAVE)
                widest = index if widest is None else max(widest, index)
                radius = float(b.edges[index])
                total = around.clipped_sum(index, b.edges)
            else:  # the box bounds the rows: the read's sum at its radius
                radius, total = b.box_norm, around.fixed
            # sensitivity 2·radius (Around.clipped_sum, _clip_scales); σ: of
            # the movement
            before = mean
            mu = plan.mus["mean"] * math.sqrt(weight)
            sigma = noise_scale(2.0 * radius, mu) / n
            move = total / n + dense_noise(rng, d, sigma)
            # the error the step leaves: shrunk, far below σ where the
            # centre was at the data already (review 124 F1: σ itself made
            # the mean's error 100-1000 times its size, and hid components)
            self.mean_error = (shrunk_error(move, sigma) if b.adaptive
                               else gaussian_error(sigma, d))
            self.spent += mu**2
            mean = mean + (shrink_step(move, sigma) if b.adaptive else move)
            step += 1
            if self.data is not self.rows or not b.pilot:  # not the pilot's
                still = move @ move <= STOP_RATIO * d * sigma**2
                if still and calm:  # at the data: stop, or on to every row
                    if not b.pilot:
                        break
                    step, still = b.prefix_steps, False
                calm = still
            elif np.linalg.norm(mean - before) <= stale * radius:
                break  # a step on every row that moved little: the last
        if not b.adaptive or np.linalg.norm(mean - before) > stale * radius:
            _announce(self.data, "row norms around the private mean")
            return mean, radius, _pass_around(self.data, mean, b.edges), None
        # the last step's counts serve the covariance's search; so does its
        # search when it was for the same quantile
        return mean, radius, around, found if quantile == b.quantile else None

    def _search(self, around, rng, quantile):
        """A private ``quantile`` of the norms that ``around`` counted
        (:func:`search_bound`, with its check). Adds what it released to the
        tally."""
        found = search_bound(around.cumulative(), self.bounds.search_mu, rng,
                             quantile, check_mu=self.bounds.check_mu)
        self.spent += found.spent
        self.recoveries += found.recoveries
        return found
