"""Norm bounds chosen without a guess: ``data_norm="auto"`` and a public box.

A step of the base's template, like centring (docs/privacy.rst §5): it runs
after the budget plan is fixed and before the covariance is released, and no
estimator imports it.

``data_norm="auto"``
    The bound ``C`` is a private quantile of the row norms. A public geometric
    grid of candidate bounds ``u_0 < … < u_{B−1}`` over ``norm_range`` (four
    per octave) sorts each row into one bin: the first ``u_j ≥ ‖x‖`` (norm 0
    in bin 0, norms beyond the grid in the last bin). The counts are released
    as a binary tree (a hierarchical histogram): every node of the ``L`` levels
    below the root carries Gaussian noise, the root is ``n`` (public). A
    cumulative count is then a sum of at most ``L`` nodes, so its error grows
    like ``√log B``, not like ``√B`` as a flat histogram's running sum would.
    ``C`` is the smallest ``u_j`` whose estimated cumulative count reaches
    ``norm_quantile · n``.

    Centring clips rows twice (docs/privacy.rst §5): the mean's release clips
    the raw rows and the covariance clips rows centred on the private mean, so
    there is one tree per clipping: the mean is released in
    :data:`MEAN_STEPS` steps, each clipping the rows centred on the previous
    step's estimate at a bound read from a tree of those norms, and a last
    tree gives the covariance's bound around the final mean. Where the
    strongest mean step is precise (:data:`DESCENT_MAX_NOISE`), the mean
    steps read their trees by a confident descent (:func:`descend_bound`),
    so noise below the data cannot stall the mean. Data far from
    the origin (``X + 2000``) thus loses its offset in the first step and is
    fitted with a bound of its own spread.

``bounds=(lower, upper)``
    Public per-feature ranges. Rows are clipped into the box (a per-feature
    clip is a fixed function of each row: post-processing of nothing private)
    and translated by the box's centre ``c`` (its midpoint; 0 without
    centring), so every row has norm at most ``R = ‖max(|lower − c|,
    |upper − c|)‖``. The mean is the box centre plus the private mean of the
    residuals (sensitivity ``2 min(R, C)``), and ``data_norm`` defaults to
    ``R``. With ``data_norm="auto"`` as well, the covariance's bound comes from
    one tree of the norms around the private mean.

Budget: the trees take :data:`BOUND_BUDGET_SHARE` of ``μ*²`` (split evenly
between them) and the estimator's own releases share the rest: their ``μ``
are scaled by ``√(1 − w)``, so the fit still composes to exactly ``μ*``
(docs/privacy.rst §2) and the accountant sees one charge.
"""

import math
from numbers import Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ._dask import ChunkedRows, map_reduce
from ._stats import InMemoryRows, _clip_scales, _dense, _sq_norms, iter_blocks
from .noise import dense_noise, noise_scale

#: Candidate bounds per octave of the grid: a chosen bound is at most a factor
#: ``2**(1/4) ≈ 1.19`` above the quantile it aims at.
BINS_PER_OCTAVE = 4
#: Default ``norm_range``: twenty decades, 267 bins, a tree of 9 levels.
DEFAULT_NORM_RANGE = (1e-8, 1e12)
#: Default ``norm_quantile``, chosen by measurement (benchmarks/bench_norm.py
#: --sweep): clipping at the median norm gave the smallest sin θ on every
#: dataset where the quantile mattered.
DEFAULT_QUANTILE = 0.5
#: Fraction of ``μ*²`` that the trees of ``data_norm="auto"`` take, in all.
BOUND_BUDGET_SHARE = 0.06
#: Steps of the private mean with ``data_norm="auto"`` (no box): the fraction
#: of the mean's ``μ²`` each takes. Each step shrinks the distance from the
#: centre to the data by about ``2√d / (μ_step n)``, so the early steps, which
#: only have to bring the centre near the data, take little; the last takes
#: most. Measured on digits + 100 (benchmarks/bench_norm.py): two steps left
#: the fit at sin θ ≈ 1 for ε = 3, five reach 0.08 (0.41 for the oracle
#: bound on the unshifted digits) and cost 0.27 instead of 0.24 at ε = 1.
MEAN_STEPS = (0.02, 0.08, 0.2, 0.3, 0.4)
#: The mean steps read their radius by a confident descent of the tree
#: (:func:`descend_bound`): a split is decided only where the estimate is this
#: many standard deviations from the target, and the descent's node is used
#: only if it spans at most :data:`DESCENT_SPAN` leaves (four octaves);
#: otherwise the first crossing (:func:`choose_bound`). Measured on wine
#: (178 rows) and diabetes (442) shifted by 100 (benchmarks/bench_norm.py):
#: the first crossing, drowned in noise below the data, picks bounds near the
#: grid's bottom and the mean never moves (sin θ 0.96 on diabetes + 100 at
#: ε = 3); the descent reaches 0.47.
DESCENT_Z = 1.5
#: Widest node (in leaves) whose geometric middle a mean step takes.
DESCENT_SPAN = 16
#: The descent is used only where the strongest mean step is precise: its
#: noise, ``2√d/(μ_step n)`` times its radius (public), at most this. Where it
#: is larger a moving centre adds noise of the order of the data's spread
#: (breast_cancer at ε = 1: sin θ 0.79 instead of 0.37), and the first
#: crossing is kept for every tree.
DESCENT_MAX_NOISE = 0.2
#: A private mean farther than this many covariance bounds from the origin is
#: subtracted from the rows explicitly (one copy) before the covariance pass:
#: centring by ``‖x‖² − 2 x·m + ‖m‖²`` errs by about ``4·1e-16 ‖m‖²``, 1e-12 of
#: ``C²`` here, far below what would move a sensitivity.
FAR_MEAN = 32.0

# The noise scales with data_norm² and sums of rows reach n·data_norm²: keep
# both far from overflow (1.8e308 in float64; 3.4e38 for float32 attributes)
# and from underflow: C², the noise σ = √2 C²/μ (μ < 1e6 for any ε < 1e11)
# and the variances stay normal numbers (above 2.2e-308 in float64, where
# the statistics are computed; above 1.2e-38 for float32 attributes) with
# orders of magnitude to spare. Below the lower limit σ and the statistic
# would round to exactly 0.
MAX_DATA_NORM = {np.float64: 1e120, np.float32: 1e15}
MIN_DATA_NORM = {np.float64: 1e-100, np.float32: 1e-15}


def check_data_norm_range(data_norm, dtype):
    """Refuse a bound whose square would overflow or underflow (see the limits)."""
    low, high = MIN_DATA_NORM[dtype.type], MAX_DATA_NORM[dtype.type]
    if data_norm > high:
        raise ValueError(
            f"data_norm={data_norm:.3g} is too large for {dtype} data: "
            "variances and noise scale with data_norm², which would "
            f"overflow beyond {high:.0e}. Rescale the data (and the "
            "bound), or pass float64 data."
        )
    if data_norm < low:
        raise ValueError(
            f"data_norm={data_norm:.3g} is too small for {dtype} data: "
            "variances and noise scale with data_norm², which would "
            f"underflow to 0 below {low:.0e}. Rescale the data (and the "
            "bound)" + ("." if dtype == np.float64 else ", or pass float64 data.")
        )


#: Parameter constraints the base adds to its own.
PARAMETER_CONSTRAINTS = {
    "data_norm": [
        Interval(Real, 0, math.inf, closed="neither"),
        StrOptions({"auto"}),
        None,
    ],
    "bounds": ["array-like", None],
    "norm_range": ["array-like"],
    "norm_quantile": [Interval(Real, 0, 1, closed="right")],
}


# ------------------------------------------------------------------ the grid
def norm_grid(norm_range, limit=math.inf, dtype="this", floor=0.0):
    """Public candidate bounds: a geometric grid over ``norm_range``.

    Parameters
    ----------
    norm_range : (float, float)
        ``(low, high)`` with ``0 < low < high``: the smallest and largest
        candidate bound.
    limit : float
        Largest bound the data's dtype allows.
    floor : float
        Smallest bound the data's dtype allows.
    dtype : numpy.dtype or str
        That dtype, for the error message.

    Returns
    -------
    edges : ndarray of shape (n_bins,)
        ``low`` to ``high``, consecutive ratios at most ``2**(1/BINS_PER_OCTAVE)``.
    """
    values = np.asarray(norm_range, dtype=object).ravel()
    ok = values.size == 2 and all(
        isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(v)
        for v in values
    )
    if not ok or not 0 < values[0] < values[1]:
        raise ValueError(
            "norm_range must be two finite numbers (low, high) with "
            f"0 < low < high, got {norm_range!r}."
        )
    low, high = float(values[0]), float(values[1])
    if high > limit:
        raise ValueError(
            f"norm_range's high={high:.3g} is too large for {dtype} data: "
            f"bounds beyond {limit:.0e} overflow. Lower it, or pass float64 data."
        )
    if low < floor:
        raise ValueError(
            f"norm_range's low={low:.3g} is too small for {dtype} data: bounds "
            f"below {floor:.0e} underflow. Raise it."
        )
    n_bins = math.ceil(BINS_PER_OCTAVE * math.log2(high / low) - 1e-9) + 1
    return np.geomspace(low, high, max(n_bins, 2))


def tree_levels(n_bins):
    """Levels ``L`` released by a tree over ``n_bins`` leaves (padded to ``2^L``)."""
    return max(1, math.ceil(math.log2(n_bins)))


def tree_sensitivity(levels):
    """L2 sensitivity ``√(2L)`` of a tree of ``L`` released levels.

    Under replacement of one row ``x`` by ``x'``, the leaf counts change by
    ``−1`` in the bin of ``x`` and ``+1`` in the bin of ``x'``. A level's nodes
    partition the leaves and each row lies in exactly one node per level, so
    the level's count vector changes in at most two entries, by ``−1`` and
    ``+1`` (in none if both bins share that node): an L2 change of at most
    ``√2`` per level, and ``√(2L)`` over the ``L`` levels together. The root
    (``n``) never changes and is not released.
    """
    return math.sqrt(2.0 * levels)


def release_tree(counts, mu, rng):
    """Noisy nodes of the tree over leaf ``counts`` (length ``2^L``), ``μ``-GDP.

    Returns a list of ``L`` arrays, ``levels[l][i]`` the noisy count of the
    ``i``-th node of size ``2^l``; every node has noise ``N(0, σ²)`` with
    ``σ = √(2L)/μ`` (:func:`tree_sensitivity`).
    """
    n_leaves = counts.shape[0]
    levels = int(round(math.log2(n_leaves)))
    sigma = tree_sensitivity(levels) / mu
    nodes, out = counts.astype(np.float64), []
    for _ in range(levels):
        out.append(nodes + dense_noise(rng, nodes.shape[0], sigma))
        nodes = nodes.reshape(-1, 2).sum(axis=1)
    return out


def _dyadic_sums(levels, lengths):
    """Sums of the noisy nodes that tile each prefix ``[0, p)``, and how many."""
    total = np.zeros(lengths.shape[0])
    used = np.zeros(lengths.shape[0], dtype=int)
    for size_log, nodes in enumerate(levels):
        take = (lengths >> size_log) & 1 == 1
        index = (lengths[take] >> size_log) - 1
        total[take] += nodes[index]
        used += take
    return total, used


def cumulative_counts(levels, n_samples):
    """Estimated number of rows in leaves ``0..j``, for every leaf ``j``.

    Two independent estimates from disjoint nodes: the sum of the nodes tiling
    ``[0, j]`` and ``n`` minus the sum of those tiling the rest (the root is
    ``n``, public). With ``h`` and ``t ≤ L`` nodes they have variances
    ``hσ²`` and ``tσ²``; averaged with inverse-variance weights, the error has
    variance ``σ² ht/(h + t) ≤ σ² L/2``. Post-processing only.
    """
    n_leaves = levels[0].shape[0]
    prefix = np.arange(1, n_leaves + 1)
    head, head_var = _dyadic_sums(levels, prefix)
    tail, tail_var = _dyadic_sums([nodes[::-1] for nodes in levels],
                                  n_leaves - prefix)
    rest = n_samples - tail
    head[-1] = n_samples  # the whole range is the root: n, exact
    # an estimate from the root alone (or no node) is exact: take it alone
    exact_head, exact_rest = prefix == n_leaves, tail_var == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        mixed = (head / head_var + rest / tail_var) / (1 / head_var + 1 / tail_var)
    return np.where(exact_head, head, np.where(exact_rest, rest, mixed))


def cumulative_variances(levels):
    """Variance of each estimate of :func:`cumulative_counts`, in units of ``σ²``.

    ``ht/(h + t)`` for the ``h`` and ``t`` nodes of its two estimates, 0 for
    the whole range (the root, ``n``). Public: a function of the tree's shape.
    """
    n_leaves = levels[0].shape[0]
    prefix = np.arange(1, n_leaves + 1)
    _, head = _dyadic_sums(levels, prefix)
    _, tail = _dyadic_sums([nodes[::-1] for nodes in levels], n_leaves - prefix)
    return head * tail / np.maximum(head + tail, 1)


def descend_bound(edges, estimates, sds, target, z=None, span=None):
    """Index of a bound read top-down from the tree, or None if unsure.

    From the root, each node ``[a, b)`` of leaves is split at its middle ``m``
    and the descent goes left if the estimated count of leaves below ``m``
    reaches ``target + z·sd``, right if it is below ``target − z·sd``, and
    stops otherwise (or at a leaf). If the node it stops in spans at most
    ``span`` leaves, its geometric middle is returned (capped at the last real
    bin); a wider node (a tree drowned in noise) gives None. Post-processing
    only.

    For the mean steps a bound too small stops the mean (every row is clipped
    to a tiny norm, so the step moves by at most that), and the first crossing
    errs that way where the cumulative noise below the data reaches the target
    by chance (a few hundred rows); the descent's decisions use few nodes each
    and only confident ones.
    """
    z = DESCENT_Z if z is None else z
    span = DESCENT_SPAN if span is None else span
    a, b = 0, estimates.shape[0]
    while b - a > 1:
        mid = (a + b) // 2
        count, sd = estimates[mid - 1], sds[mid - 1]
        if count >= target + z * sd:
            b = mid
        elif count < target - z * sd:
            a = mid
        else:
            break
    if b - a > span:
        return None
    return min((a + b - 1) // 2, edges.shape[0] - 1)


def target_count(quantile, n_samples, levels, mu):
    """The count a bound must reach: ``q·n``, at most ``n − 2·sd``, at least ``q·n/2``.

    ``sd = σ √(L/2)`` bounds the error's standard deviation of every estimate
    of :func:`cumulative_counts` (a public number). Beyond the largest norm the
    estimates are ``n`` plus noise, so a target of ``n`` itself (``q = 1``)
    would be reached by chance, one bin in two, far above the data; the cap
    keeps the crossing within a grid step or two of the data's top. When the
    noise is large next to ``(1 − q) n`` it chooses a lower quantile: a
    bound too low clips rows, one too high multiplies the covariance noise by
    ``C²``. The floor ``q·n/2`` keeps a tree drowned in noise (few rows, a
    small ε) from a bound at the grid's bottom.
    """
    sd = tree_sensitivity(levels) / mu * math.sqrt(levels / 2.0)
    target = quantile * n_samples
    return max(min(target, n_samples - 2.0 * sd), target / 2.0)


def choose_bound(edges, estimates, target):
    """Index of the smallest grid value whose estimated count reaches ``target``.

    The last real bin holds every row beyond the grid, so its true cumulative
    count is ``n``; if noise keeps every estimate below ``target``, that bin
    is chosen.
    """
    reached = np.flatnonzero(estimates[: edges.shape[0]] >= target)
    return int(reached[0]) if reached.size else edges.shape[0] - 1


# ------------------------------------------------------- statistics of rows
def _blocks(X, sq):
    """``(block, ‖x‖² of its rows)`` over ``X``; norms from ``sq`` if given."""
    for start, stop, block in iter_blocks(X):
        yield block, _sq_norms(block) if sq is None else sq[start:stop]


def _centred_sq(block, block_sq, centre):
    """``(rows, ‖rows‖²)`` of a block centred on ``centre``, explicitly.

    ``x − c`` is formed row by row: the expansion ``‖x‖² − 2 x·c + ‖c‖²``
    cancels catastrophically (an error of about ``1e-16 ‖c‖²``) once the
    centre is far from the origin compared with the bound, which the mean
    steps of ``"auto"`` make the usual case. ``centre`` None: the block and
    its stored squared norms.
    """
    if centre is None:
        return block, block_sq
    rows = _dense(block) - centre
    return rows, _sq_norms(rows)


def _norm_counts(X, centre, sq_edges, n_leaves, sq=None):
    """Rows per bin of ``‖x − centre‖`` (``centre`` None: of ``‖x‖``).

    ``sq_edges`` are the squared grid values; a row goes to the first bin
    whose edge is at least its norm, rows beyond the last edge (``inf`` where
    the norm overflows) to the last bin. Every row is counted once per level
    whatever its computed norm, so the tree's sensitivity holds exactly.
    """
    counts = np.zeros(n_leaves, dtype=np.int64)
    for block, block_sq in _blocks(X, sq):
        _, block_sq = _centred_sq(block, block_sq, centre)
        # inf sorts last: the last bin
        index = np.minimum(np.searchsorted(sq_edges, block_sq), sq_edges.shape[0] - 1)
        counts += np.bincount(index, minlength=n_leaves)
    return counts


def _residual_sum(X, centre, radius, sq=None):
    """``Σ clip_radius(x_i − centre)``: L2 sensitivity ``2·radius``.

    Each term has norm at most ``radius`` (the rows are centred explicitly,
    so their computed norms are accurate), so replacing one row moves the
    sum by at most ``2·radius`` (docs/privacy.rst §3). ``sq``: the rows'
    squared norms, computed if not given.
    """
    total = np.zeros(X.shape[1])
    for block, block_sq in _blocks(X, sq):
        rows, rows_sq = _centred_sq(block, block_sq, centre)
        scale = _clip_scales(rows, rows_sq, radius)
        total += np.asarray(rows.T @ scale).ravel()
    return total


def _reduce(data, function, *args):
    """``function(X, *args)`` on the rows of ``data``, summed over Dask chunks.

    In memory, the squared norms of the rows (read once, before the charge)
    are passed on.
    """
    data = _engine(data)
    if isinstance(data, ChunkedRows):
        return map_reduce(data.X, function, *args)
    return function(data.X, *args, sq=data.sq_norms)


def _engine(data):
    """The rows' engine itself, under the CLI's progress wrapper if any."""
    return getattr(data, "engine", data)


def _announce(data, what):
    """Tell the CLI's progress wrapper, if any, that a pass ``what`` starts
    (public words only: what the pass computes)."""
    announce = getattr(data, "announce", None)
    if announce is not None:
        announce(what)


# -------------------------------------------------------------- the box
def check_box(bounds, n_features):
    """``(lower, upper)`` as float arrays of length ``n_features``, checked."""
    if bounds is None:
        return None
    try:
        pair = [np.asarray(side, dtype=np.float64) for side in bounds]
    except (TypeError, ValueError):
        pair = None
    if pair is None or len(pair) != 2:
        raise ValueError(
            "bounds must be a pair (lower, upper) of numbers or of arrays of "
            f"length n_features, got {bounds!r}."
        )
    lower, upper = (np.broadcast_to(side.ravel() if side.ndim else side,
                                    (n_features,)).copy()
                    if side.ndim == 0 or side.size == n_features else None
                    for side in pair)
    if lower is None or upper is None:
        raise ValueError(
            f"bounds: lower and upper must be scalars or have length "
            f"n_features={n_features}; got shapes {pair[0].shape} and "
            f"{pair[1].shape}."
        )
    if not (np.isfinite(lower).all() and np.isfinite(upper).all()):
        raise ValueError("bounds must be finite.")
    if (lower > upper).any() or not (lower < upper).any():
        raise ValueError(
            "bounds: every lower must be <= its upper, and at least one feature "
            "must have lower < upper."
        )
    return lower, upper


def _box_rows(data, lower, upper, centre):
    """The rows clipped into the box and translated by ``-centre``.

    One copy of the data in memory (a Dask array stays lazy). A CSR matrix
    stays sparse when the translation is 0 and 0 lies in the box (only its
    stored entries change); otherwise it is densified.
    """
    data = _engine(data)
    X = data.X
    if isinstance(data, ChunkedRows):
        return ChunkedRows(X.clip(lower, upper) - centre.astype(X.dtype))
    if hasattr(X, "tocsr"):
        if not centre.any() and (lower <= 0).all() and (upper >= 0).all():
            X = X.tocsr(copy=True)
            columns = X.indices
            X.data = np.clip(X.data, lower[columns], upper[columns]).astype(
                X.dtype, copy=False
            )
            return InMemoryRows(X)
        X = X.toarray()
    rows = np.clip(X, lower, upper).astype(X.dtype, copy=False)
    rows -= centre.astype(X.dtype)
    return InMemoryRows(rows)


# ------------------------------------------------------------ the fit's step
class NormBounds:
    """The norm bounds of one fit: planned before the data is read.

    Parameters
    ----------
    estimator : _BasePrivatePCA
    n_samples, n_features : int
    dtype : numpy.dtype
        The data's dtype (its limits on a bound: :data:`MAX_DATA_NORM`,
        :data:`MIN_DATA_NORM`).
    """

    def __init__(self, estimator, n_samples, n_features, dtype):
        self.limit, self.dtype = MAX_DATA_NORM[dtype.type], dtype
        # epsilon=inf (the non-private fit): no noise, and without a bound no
        # clipping at all
        self.exact = estimator.epsilon == math.inf
        self.estimator = estimator
        self.n_samples = n_samples
        self.center = estimator.center
        data_norm = estimator.data_norm
        self.auto = isinstance(data_norm, str)
        self.data_norm = None if self.auto or data_norm is None else float(data_norm)
        if self.data_norm is not None:
            check_data_norm_range(self.data_norm, self.dtype)
        self.box = check_box(getattr(estimator, "bounds", None), n_features)
        self.offset = np.zeros(n_features)
        self.box_norm = None
        if self.box is not None:
            lower, upper = self.box
            if self.center:
                self.offset = (lower + upper) / 2.0
            reach = np.maximum(np.abs(lower - self.offset), np.abs(upper - self.offset))
            top = float(reach.max())  # ‖reach‖ without overflow
            self.box_norm = top * float(np.linalg.norm(reach / top))
            if self.data_norm is None:  # the box's radius is a bound in use
                check_data_norm_range(self.box_norm, self.dtype)
        self.edges = None
        self.mean_shares = ()
        self.n_trees = 0
        if self.auto:
            self.edges = norm_grid(
                getattr(estimator, "norm_range", DEFAULT_NORM_RANGE), self.limit, dtype,
                MIN_DATA_NORM[dtype.type],
            )
            self.quantile = float(getattr(estimator, "norm_quantile", DEFAULT_QUANTILE))
            if self.center:
                self.mean_shares = (1.0,) if self.box is not None else MEAN_STEPS
            # a tree before every mean step (none where the box bounds it) and
            # one for the covariance's bound
            self.n_trees = len(self.mean_shares) + 1 - (self.box is not None
                                                        and self.center)
        self.clipped_fraction = None

    def plan(self, plan):
        """The subclass's plan with the trees' share taken out of every release.

        Every ``μ_j`` is scaled by ``√(1 − w)`` and each of the ``n_trees``
        trees gets ``μ* √(w / n_trees)``: ``Σ μ² = μ*²`` still, so the fit
        spends exactly what it is charged (one GDP charge of ``μ*``).
        """
        if not self.n_trees:
            return plan
        if "mu" not in plan.charge:
            raise ValueError(
                'data_norm="auto" composes exactly only with a Gaussian-DP '
                "budget plan, and this fit's plan is charged in Rényi DP (a "
                "random-repetition selection). Give data_norm (a number), or "
                "bounds=(lower, upper), or choose the fit's parameters without "
                "the repetition (e.g. fixed clip_radius and n_iter)."
            )
        mu_total, share = plan.charge["mu"], BOUND_BUDGET_SHARE
        mus = {k: m * math.sqrt(1.0 - share) for k, m in plan.mus.items()}
        for i in range(self.n_trees):
            mus[f"norm{i}"] = mu_total * math.sqrt(share / self.n_trees)
        return plan._replace(mus=mus)

    def read(self, data):
        """Read every row before the charge (the finiteness check included).

        With a fixed bound this is the first pass of the statistics; with
        ``"auto"`` a pass over the norms (whose value is never used).
        """
        if (self.auto or self.box is not None) and not isinstance(
            _engine(data), (InMemoryRows, ChunkedRows)
        ):
            raise ValueError(
                'data_norm="auto" and bounds are not supported for Array API '
                "inputs yet: give data_norm (a number), or fit a NumPy array."
            )
        if self.box is not None:
            data = _box_rows(data, *self.box, self.offset)
        self.data = data
        if self.auto:
            _announce(data, "row norms (every value checked finite)")
            _engine(data).largest_norm()
            return
        if self.data_norm is None:
            if self.box is not None:
                self.data_norm = self.box_norm
            elif self.exact:  # the non-private fit: nothing to clip for
                self.data_norm = math.inf
                self._total = data.first_pass(self.data_norm, with_sum=self.center)
                return
            else:
                self.data_norm = self.estimator._estimate_data_norm(
                    data.largest_norm()
                )
            check_data_norm_range(self.data_norm, self.dtype)
        self._total = data.first_pass(self.data_norm, with_sum=self.center)

    def release(self, plan, rng):
        """Release the bounds and the private mean, after the charge.

        Returns
        -------
        mean : ndarray of shape (n_features,) or None
            The private mean in the coordinates of ``self.data`` (the offset
            is added back by :attr:`mean_offset`); ``None`` without centring.
        data_norm : float
            The covariance's bound.
        mean_norm : float or None
            The bound of the (last) mean release.
        """
        n = self.n_samples
        if not self.auto:
            mean, mean_norm = None, None
            if self.center:
                mean_norm = self.data_norm
                if self.box_norm is not None:  # box rows have norm ≤ R already
                    mean_norm = min(self.data_norm, self.box_norm)
                # Σ clip(x_i) has L2 sensitivity 2·mean_norm (docs/privacy.rst §3)
                sigma = noise_scale(2.0 * mean_norm, plan.mus["mean"])
                noise = dense_noise(rng, self._total.shape[0], sigma)
                mean = (self._total + noise) / n
                mean = self._translate_if_far(mean, self.data_norm)
            return mean, self.data_norm, mean_norm

        trees = iter(range(self.n_trees))
        mean, mean_norm = None, None
        if self.center:
            mean = np.zeros(self.offset.shape[0])
            strongest = plan.mus["mean"] * math.sqrt(max(self.mean_shares))
            descend = (2.0 * math.sqrt(mean.shape[0]) / (strongest * n)
                       <= DESCENT_MAX_NOISE)
            for step, weight in enumerate(self.mean_shares):
                if step == 0 and self.box is not None:
                    radius = self.box_norm
                else:
                    radius = self._tree_bound(mean, plan.mus[f"norm{next(trees)}"],
                                              rng, descend=descend)
                mu = plan.mus["mean"] * math.sqrt(weight)
                _announce(self.data, f"clipped sum for the private mean (step "
                                     f"{step + 1} of {len(self.mean_shares)})")
                total = _reduce(self.data, _residual_sum, mean, radius)
                # sensitivity 2·radius (see _residual_sum)
                noise = dense_noise(rng, mean.shape[0], noise_scale(2.0 * radius, mu))
                mean = mean + (total + noise) / n
                mean_norm = radius
        data_norm = self._tree_bound(mean, plan.mus[f"norm{next(trees)}"], rng,
                                     last=True)
        if mean is not None:
            mean = self._translate_if_far(mean, data_norm, first_pass=False)
        if isinstance(_engine(self.data), InMemoryRows):  # the Gram's first pass
            _announce(self.data, "row norms around the private mean")
            _engine(self.data).first_pass(data_norm, with_sum=self.center)
        return mean, data_norm, mean_norm

    def _translate_if_far(self, mean, data_norm, first_pass=True):
        """The private mean in the rows' coordinates, after moving the origin to
        it when it is far (:data:`FAR_MEAN`).

        The new origin is the mean rounded to the data's dtype: a public point
        (post-processing of the release), added to :attr:`offset`, so the
        covariance is centred on exactly the ``mean_`` reported. In memory
        this makes one copy of the rows (a CSR matrix is densified); a Dask
        array stays lazy. With ``first_pass``, the in-memory rows' first pass
        (their norms) is redone for the Gram matrix.
        """
        if not np.linalg.norm(mean) > FAR_MEAN * data_norm:
            return mean
        engine = _engine(self.data)
        centre = np.asarray(mean, dtype=self.dtype)
        if isinstance(engine, ChunkedRows):
            self.data = ChunkedRows(engine.X - centre)
        else:
            self.data = InMemoryRows(_dense(engine.X) - centre)
            if first_pass:
                self.data.first_pass(data_norm, with_sum=False)
        self.offset = self.offset + centre.astype(np.float64)
        return np.zeros_like(mean)

    def _tree_bound(self, centre, mu, rng, last=False, descend=False):
        """A private quantile of ``‖x − centre‖`` from a noisy tree (``μ``-GDP).

        ``descend``: read it first by :func:`descend_bound` (a mean step).
        """
        edges, n = self.edges, self.n_samples
        n_leaves = 2 ** tree_levels(edges.shape[0])
        _announce(self.data, "counts of the row norms for a private bound")
        counts = _reduce(self.data, _norm_counts, centre, edges**2, n_leaves)
        levels = tree_levels(edges.shape[0])
        nodes = release_tree(counts, mu, rng)
        estimates = cumulative_counts(nodes, n)
        j = None
        if descend:  # a mean step: not stalled by noise (descend_bound)
            sds = tree_sensitivity(levels) / mu * np.sqrt(cumulative_variances(nodes))
            j = descend_bound(edges, estimates, sds, self.quantile * n)
        if j is None:
            j = choose_bound(edges, estimates,
                             target_count(self.quantile, n, levels, mu))
        if last:  # the tree's estimate of the rows beyond C: post-processing
            self.clipped_fraction = float(np.clip(1.0 - estimates[j] / n, 0.0, 1.0))
        return float(edges[j])
