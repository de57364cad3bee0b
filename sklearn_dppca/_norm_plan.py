"""The norm bound's plan: its public constants, the grid of candidate
bounds, the quantile and the budget shares of its searches, the first rows'
count, and the arithmetic on released counts (a bound placed between two
counts, the shrinkage of a mean step). Pure functions of public and
released values: nothing here reads rows or draws noise. The fit's
step is in ``_bounds``: ``plan_bounds`` (from these), ``read_bounds`` and
``release_bounds`` (the method is described there).
"""

import math
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ._spectrum import gaussian_error

#: Candidate bounds per octave of the grid: a chosen bound is at most a factor
#: ``2**(1/4) ≈ 1.19`` above the quantile it aims at.
BINS_PER_OCTAVE = 4
#: Default ``norm_range``: twenty decades, 267 bins, 9 comparisons per search.
DEFAULT_NORM_RANGE = (1e-8, 1e12)
#: Default ``norm_quantile``, chosen by measurement (benchmarks/bench_norm.py
#: --sweep --seeds 6): clipping at the median norm gave the smallest or a tied
#: sin θ in every cell where the quantile mattered (wine at ε = 3: 0.23, 0.37
#: for the 0.75 quantile).
DEFAULT_QUANTILE = 0.5
#: ``norm_quantile="auto"`` for a fit whose product is the whole covariance
#: (:func:`auto_quantile`): the covariance's bound leaves a share
#: ``COVARIANCE_SCALE · √(d(d+1)) / (μ* n)^COVARIANCE_POWER`` of the rows
#: beyond it. Measured (benchmarks/bench_norm.py --covariance, both
#: scalings, 4 seeds) on the two large-n cells of issue 23 at ρ = 0.01, 0.1
#: and 1, with the de-noised spectrum, the worst ratio of ``"auto"``'s
#: second-moment error to the best fixed bound's was, for the power 1 (the
#: raw release's balance, ``c √(d(d+1))/μ*`` rows) 1.18 with c = 6 and 1.12
#: with 3.5, and for the power 3/4 1.06 with 0.28, 1.04 with 0.31 and 1.04
#: with 0.34.
COVARIANCE_SCALE = 1.0 / 3.0
#: The power of ``μ* n`` in that share: 1 if the noise's cost grew like its
#: ``σ/n ∝ C²/(μ n)``, as it does for the raw release; the de-noised spectrum
#: (docs/privacy.rst §6) pays about ``σ`` for the eigenvalues above the noise
#: but only about ``√σ`` for a bulk of small ones that it shrinks toward 0,
#: and 3/4 measured best (above).
COVARIANCE_POWER = 0.75
#: Fraction of ``μ*²`` that the searches of ``data_norm="auto"`` take, in all.
BOUND_BUDGET_SHARE = 0.06
#: The most of ``μ*²`` the searches may take: on few rows, where the default
#: share would leave a comparison's noise beyond :data:`DROWNED` ``· n`` rows,
#: they take the share that keeps it there, up to this one
#: (:func:`search_share`), and beyond it the fit is refused. Measured
#: (benchmarks/bench_peers_covariance.py, 20 repetitions): wine (178 rows,
#: not centred) at ρ = 0.01 zCDP needs 0.23 and then has 0.80 times the
#: second-moment error of the fixed bound, below every peer's and the zero
#: matrix's, where the default share refused it. Only for one search (no
#: centring, or a box): with the mean's steps, which take up to 30% and have a
#: search each, a larger share left the covariance too little (wine centred at
#: ε = 2: 99th-percentile second-moment error 1.65× the zero matrix's,
#: benchmarks/bench_norm.py --robust), and those fits keep the default share.
MAX_BOUND_SHARE = 0.25
#: Fraction of ``μ*²`` that their checks take, in all (one per search): each
#: check is a count released at three times a comparison's ``μ²`` at the
#: default shares (less where one search on few rows takes more, up to
#: :data:`MAX_BOUND_SHARE`).
CHECK_BUDGET_SHARE = 0.02
#: A search's check releases the count this many bins below the bound it
#: found: two octaves, a factor 4 (:func:`search_bound`).
CHECK_BINS = 2 * BINS_PER_OCTAVE
#: Searches run again, at most, after checks that found an overshoot. Their
#: budget comes from the estimator's own releases, rarely: in the worst cell of
#: ``benchmarks/bench_norm.py --robust`` (diabetes at ε = 0.5, not centred)
#: 10 fits in 400 ran one search again, none twice.
MAX_RECOVERIES = 2
#: With ``data_norm="auto"``, centring and no box: the most of ``μ*²`` the
#: private mean's steps may take (the mean's share is otherwise 0.1). Moving
#: a centre from far away to the data takes several steps, each shrinking the
#: distance to about ``2√d/(μ_step n)`` of the step's radius: on wine + 100
#: (178 rows, benchmarks/bench_norm.py) at ε = 3 a tenth of ``μ*²`` left the
#: centre 7–30 from the data (sin θ 0.97); 0.3 brings it within about 1.5
#: (median of 20 seeds; sin θ 0.55). On data near its own centre two steps in a
#: row move by no more than their noise and the steps stop
#: (:data:`STOP_RATIO`), returning what they did not spend.
AUTO_MEAN_SHARE = 0.3
#: The steps of the private mean with ``"auto"`` (no box): the fraction of
#: :data:`AUTO_MEAN_SHARE` each takes when all eight run. The early steps only
#: have to bring the centre near the data and take little; the last ones,
#: which set its precision, take most. A fit runs the last
#: :func:`mean_step_count` of them, their shares scaled to sum to 1.
MEAN_STEPS = (0.05, 0.05, 0.1, 0.1, 0.1, 0.15, 0.2, 0.25)
#: The fewest steps of the private mean: with the read before the charge, which
#: serves the first step, the covariance's search and the Gram matrix, a fit
#: on many rows reads them :data:`AUTO_PASSES` times.
MIN_MEAN_STEPS = 3
AUTO_PASSES = 4
#: The steps bring a centre this many decades of its distance closer to the
#: data (:func:`mean_step_count`).
MEAN_REACH = 6.0
#: The covariance's search counts the norms in the last mean step's pass,
#: around the centre ``c`` before that step, when the step moved the centre by
#: at most this fraction of its radius ``r`` (the median of ``‖x − c‖``), and
#: otherwise in a pass of its own (:meth:`_bounds._AutoRelease._mean_steps`). For rows
#: spread around the data's centre independently of the centre's error ``e``,
#: ``‖x − c‖² ≈ ‖x − m‖² + e²``; a step's movement is about ``e``, so a
#: movement of at most ``r/2`` means ``e² ≤ (s² + e²)/4`` (``s`` the spread)
#: and the stale norms are at most ``√(4/3) ≈ 1.15`` times the final ones:
#: less than a grid step, ``2^{1/4} ≈ 1.19``.
STALE_MOVE = 0.5
#: A mean step whose released movement ``v`` has ``‖v‖² ≤ STOP_RATIO · d σ²``
#: (``σ`` its noise per coordinate, public) moved the centre by no more than
#: its noise; after two such steps in a row the steps stop. Pure noise has
#: ``E‖v‖² = dσ²``.
STOP_RATIO = 1.5
#: A search whose comparisons would have noise beyond this fraction of ``n``
#: rows is drowned, and the fit is refused before any charge: its bound would
#: be close to a random value of the grid. Measured (benchmarks/bench_norm.py
#: --robust, 200 seeds per cell), every cell beyond it had second-moment errors
#: of 424 to 1.9e23 times those of answering the zero matrix at the 99th
#: percentile when it was fitted with a warning (wine at ε = 3 centred, 57
#: rows of noise for 178 rows: 3.7e8), and every cell within it at most 1.1×.
DROWNED = 0.25
#: A private mean farther than this many covariance bounds from the origin is
#: subtracted from the rows explicitly (each block as the passes read it:
#: ``_moved.MovedRows``) before the covariance pass:
#: centring by ``‖x‖² − 2 x·m + ‖m‖²`` errs by about ``4·1e-16 ‖m‖²`` a row,
#: 1e-12 of ``C²`` here; summed over the rows, about ``1e-16 n ‖m‖²``
#: (measured: 1e-8 of the sensitivity at 4·10⁵ rows), the floating-point
#: round-off docs/security.rst states is not accounted for.
FAR_MEAN = 32.0
#: The largest round-off margin, relative to :math:`C^2`, of the clipping of
#: sparse rows centred by expansion far from the origin
#: (:func:`expansion_margin`; it shrinks each clipped row by about half of
#: it): beyond it a fit refuses them where their dense blocks do not fit,
#: and scores densify them by blocks.
SPARSE_MARGIN = 1e-3


def expansion_margin(n_features, centre_norm, bound):
    r"""The round-off margin of :math:`\lVert x - m \rVert^2` computed as
    :math:`\lVert x \rVert^2 - 2 x \cdot m + \lVert m \rVert^2` in float64,
    relative to :math:`C^2`: :math:`\gamma (2 \lVert m \rVert / C + 1)^2`
    (:func:`~sklearn_dppca._stats._norm_margin`; float32 rows are read in
    float64). Public: the width, the released centre and the bound."""
    reach = 2.0 * centre_norm / bound + 1.0  # inf beyond float64: no error
    return (n_features + 8) * float(np.finfo(np.float64).eps) * reach * reach
#: :func:`_around` takes the norms around a centre by expansion when the
#: centre is within this many radii of the origin: the expansion's round-off,
#: about ``1e-16 d (‖x‖ + ‖c‖)²``, then stays below ``1e-9 d`` of the radius²
#: for the rows near it.
EXPAND_REACH = 1e3

#: Fewer passes on many rows (docs/privacy.rst §5, "The first rows"): on at
#: least :data:`PILOT_FACTOR` times :func:`pilot_rows` rows, a centre comes
#: from the first ``pilot_rows`` rows (their private mean, or with ``"auto"``
#: the mean's early steps), read once. Their number: at least
#: ``PILOT_MIN_ROWS``, and ``PILOT_SCALE √d / μ*``, so that the noise of the
#: numeric fit's pilot mean, ``2C√d / (μ_pilot n_pilot)`` in norm with
#: ``μ_pilot = μ* √(0.1 · PILOT_PART)``, stays below ``C/150`` whatever
#: ``d`` and ε.
PILOT_MIN_ROWS = 2**15
PILOT_SCALE = 2000.0
PILOT_FACTOR = 4
#: The numeric fit's pilot mean takes this part of the mean's share; the sum
#: of the clipped rows released from the covariance's pass takes the rest.
PILOT_PART = 0.25
#: The numeric fit keeps the covariance's pass (one pass in all) when the
#: first release of the correction ``ȳ`` moves the centre by at most this
#: fraction of the bound; otherwise the rows are read again around the
#: corrected centre (the first rows were not like the others: rows ordered by
#: a feature, say).
PILOT_MISS = 0.05
#: With ``"auto"`` and a pilot, the last mean steps, at most this many, run on
#: every row. The first clips at twice the radius of the last step on the
#: first rows (a public grid value chosen from their releases: its pass
#: counts the norms and sums the clipped rows, nothing per bin); when the
#: first rows are like the others it moves the centre by little, and its
#: counts serve the covariance's search.
PILOT_FULL_STEPS = 2
#: The second step on every row, if the first moved the centre by more,
#: searches for this quantile of the norms around the centre, not the median:
#: when the first rows are not like the others (rows ordered by a feature, or
#: by group), a median radius clips the rows far from the first rows' centre
#: and the step moves only part of the way; on this many rows the larger
#: radius's noise stays small (at most about a thousandth of it,
#: :func:`pilot_rows`).
PILOT_QUANTILE = 0.99
#: A step on every row is the last when it moved the centre by at most this
#: fraction of its radius ``r``: ``e ≤ r/16`` keeps the counts around the
#: centre before it within the error :data:`STALE_MOVE` allows for a median
#: radius whenever ``r ≤ 8 r_{0.5}`` (``r`` twice the first rows' median, or
#: the 0.9 quantile).
PILOT_STALE = 1.0 / 16.0


def pilot_rows(n_samples, n_features, mu):
    r"""How many first rows give the clipping centre, or ``None`` (all rows:
    the mean is released from every row before the covariance's pass). A
    function of public values only (:math:`n`, :math:`d`, :math:`\mu^*`)."""
    if not mu < math.inf:
        return None
    rows = max(PILOT_MIN_ROWS, math.ceil(PILOT_SCALE * math.sqrt(n_features) / mu))
    return rows if PILOT_FACTOR * rows <= n_samples else None


# The noise scales with data_norm² and sums of rows reach n·data_norm²: keep
# both far from overflow (1.8e308 in float64; 3.4e38 for float32 attributes)
# and from underflow: C², the noise σ = √2 C²/μ (μ < 1e6 for any ε < 1e11)
# and the variances stay normal numbers (above 2.2e-308 in float64, where
# the statistics are computed; above 1.2e-38 for float32 attributes) with
# orders of magnitude to spare. Below the lower limit σ and the statistic
# would round to exactly 0.
MAX_DATA_NORM = {np.float64: 1e120, np.float32: 1e15}
MIN_DATA_NORM = {np.float64: 1e-100, np.float32: 1e-15}


def check_data_norm_range(data_norm, dtype, name=None):
    """Refuse a bound whose square would overflow or underflow (see the
    limits), named ``name`` (by default ``data_norm=`` its value; a bound
    read from the data is named without it)."""
    low, high = MIN_DATA_NORM[dtype.type], MAX_DATA_NORM[dtype.type]
    name = f"data_norm={data_norm:.3g}" if name is None else name
    if data_norm > high:
        raise ValueError(
            f"{name} is too large for {dtype} data: "
            "variances and noise scale with data_norm², which would "
            f"overflow beyond {high:.0e}. Rescale the data (and the "
            "bound)" + ("." if dtype == np.float64 else ", or pass float64 data.")
        )
    if data_norm < low:
        raise ValueError(
            f"{name} is too small for {dtype} data: "
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
    "norm_quantile": [Interval(Real, 0, 1, closed="right"), StrOptions({"auto"})],
}


# ------------------------------------------------------------------ the grid
def norm_grid(norm_range, limit=math.inf, dtype="this", floor=0.0):
    r"""Public candidate bounds: a geometric grid over ``norm_range``.

    Parameters
    ----------
    norm_range : (float, float)
        ``(low, high)`` with :math:`0 < \mathrm{low} < \mathrm{high}`: the
        smallest and largest candidate bound.
    limit : float
        Largest bound the data's dtype allows.
    floor : float
        Smallest bound the data's dtype allows.
    dtype : numpy.dtype or str
        That dtype, for the error message.

    Returns
    -------
    edges : ndarray of shape (n_bins,)
        ``low`` to ``high``, consecutive ratios at most
        :math:`2^{1/\mathrm{BINS\_PER\_OCTAVE}}`.
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
    return np.geomspace(low, high, bin_count(low, high))


def bin_count(low, high):
    """Edges of :func:`norm_grid` from ``low`` to ``high`` (four an octave,
    at least two)."""
    return max(math.ceil(BINS_PER_OCTAVE * math.log2(high / low) - 1e-9) + 1, 2)


def search_queries(n_bins):
    r"""Comparisons :math:`Q = \lceil \log_2 B \rceil` that a binary search
    over :math:`B` bins makes at most (each halves the candidates, rounding
    up)."""
    return max(1, math.ceil(math.log2(n_bins)))


def wants_covariance(n_components, n_samples, n_features):
    r"""Whether a fit's product is the whole covariance (or its spectrum),
    rather than a subspace: a public function of the parameters.

    ``n_components`` an integer below :math:`\min(n, d)` asks for a subspace
    (its components and the projection onto it). ``None`` (every component),
    an integer :math:`\min(n, d)`, a fraction of the variance or ``"mle"``
    (both chosen from the released spectrum) ask for the whole covariance.
    """
    subspace = (isinstance(n_components, Integral)
                and not isinstance(n_components, bool)
                and n_components < min(n_samples, n_features))
    return not subspace


def auto_quantile(n_samples, n_features, mu, n_components):
    r"""The quantile of ``norm_quantile="auto"`` for the covariance's bound:
    a function of public values only (no data, no release).

    - A subspace (:func:`wants_covariance` false): the median,
      :data:`DEFAULT_QUANTILE`. Clipping keeps each row's direction, so a low
      bound costs the directions little while the noise falls with
      :math:`C^2`.
    - The whole covariance: :math:`q = 1 - \sqrt{d(d+1)} / (3 (\mu n)^{3/4})`
      (:data:`COVARIANCE_SCALE`, :data:`COVARIANCE_POWER`), at least the
      median. Clipping biases the second moment by about
      :math:`\mathbb{E}[(\|x\|^2 - C^2)_+]`, which falls as :math:`C` rises
      by the share of rows beyond :math:`C`. The raw noise's Frobenius norm,
      :math:`\sqrt{d(d+1)/2}\, \sigma/n` with
      :math:`\sigma = \sqrt{2} C^2/\mu_{\mathrm{cov}}`, rises by
      :math:`\sqrt{d(d+1)}/(\mu_{\mathrm{cov}} n)` per unit of :math:`C^2`:
      the two balance when a share of order :math:`\sqrt{d(d+1)}/(\mu n)` of
      the rows lies beyond :math:`C`. The noise enters only through
      :math:`\sigma/n \propto C^2/(\mu n)`; a released error growing like
      :math:`(\sigma/n)^p` moves the balance to a share of order
      :math:`(\mu n)^{-p}`, and the de-noised spectrum, which shrinks a bulk
      of small eigenvalues toward 0, pays less than :math:`\sigma`:
      :math:`p = 3/4` measured best.

    Parameters
    ----------
    n_samples, n_features : int
    mu : float
        The fit's :math:`\mu^*` = ``gdp_mu(epsilon, delta)`` (``inf``: the
        non-private fit, which clips nothing: :math:`q = 1`).
    n_components : int, float, str or None
        The estimator's parameter.

    Returns
    -------
    float in [0.5, 1]
    """
    if not wants_covariance(n_components, n_samples, n_features):
        return DEFAULT_QUANTILE
    share = (COVARIANCE_SCALE * math.sqrt(n_features * (n_features + 1.0))
             / (mu * n_samples) ** COVARIANCE_POWER)
    return max(DEFAULT_QUANTILE, 1.0 - share)


def mean_step_count(n_samples, n_features, mu):
    r"""How many steps the private mean takes with ``"auto"``: a function of
    public values only.

    A step at radius :math:`r` releases the rows' clipped sum with noise of
    norm about :math:`\kappa r`, :math:`\kappa = 2\sqrt{d} / (\mu_s n)`
    (:math:`\mu_s` a step's share of :math:`\mu^*`, here
    :math:`\mu^* \sqrt{a/3}`, :math:`a` = :data:`AUTO_MEAN_SHARE`), and the
    next step's radius is about the distance left: each step brings a far
    centre a factor :math:`\kappa` closer. The fit takes enough steps to
    cover :data:`MEAN_REACH` decades,
    :math:`\lceil \mathrm{MEAN\_REACH} / \log_{10}(1/\kappa) \rceil`, at
    least :data:`MIN_MEAN_STEPS` and at most ``len(MEAN_STEPS)``: three on
    many rows, where each pass over them counts (2·10⁵ × 50 at ε = 1:
    :math:`\kappa \approx 8 \cdot 10^{-4}`), all eight on a few hundred rows
    (wine at ε = 3: :math:`\kappa \approx 0.16`).
    """
    mu_step = mu * math.sqrt(AUTO_MEAN_SHARE / MIN_MEAN_STEPS)
    contraction = 2.0 * math.sqrt(n_features) / (mu_step * n_samples)
    if not contraction < 1.0:
        return len(MEAN_STEPS)
    if contraction == 0.0:  # the non-private fit
        return MIN_MEAN_STEPS
    steps = math.ceil(MEAN_REACH / -math.log10(contraction))
    return min(max(steps, MIN_MEAN_STEPS), len(MEAN_STEPS))


def search_share(n_samples, n_searches, mu, n_bins, most=MAX_BOUND_SHARE):
    r"""The share of :math:`\mu^{*2}` the searches take (all of them): a
    function of public values only.

    :data:`BOUND_BUDGET_SHARE`, or more when that would leave a comparison's
    noise :math:`\sigma = \sqrt{Q}/\mu_b`
    (:math:`\mu_b = \mu^* \sqrt{\mathrm{share}/\mathrm{searches}}`, :math:`Q`
    comparisons over ``n_bins`` bins) beyond :data:`DROWNED` :math:`\cdot n`
    rows: the share at which :math:`\sigma` is exactly that. ``None`` when
    that share exceeds ``most`` (the search is drowned and the fit refused).
    """
    if not mu < math.inf:
        return BOUND_BUDGET_SHARE
    needed = n_searches * search_queries(n_bins) / (DROWNED * n_samples * mu) ** 2
    share = max(BOUND_BUDGET_SHARE, needed)
    return share if share <= most else None


def target_count(quantile, n_samples, sigma):
    r"""The count a bound must reach: :math:`q \cdot n`, at most
    :math:`n - 2\sigma`, at least :math:`q \cdot n/2`.

    :math:`\sigma` is a comparison's noise (public). Beyond the largest norm
    the counts are :math:`n`, so a target of :math:`n` itself (:math:`q = 1`)
    would be missed one comparison in two, pushing the bound far above the
    data; the cap keeps it within a grid step or two of the data's top. When
    the noise is large next to :math:`(1 - q) n` it chooses a lower
    quantile: a bound too low clips rows, one too high multiplies the
    covariance noise by :math:`C^2`. The floor :math:`q \cdot n/2` keeps a
    search drowned in noise (few rows, a small ε) from aiming at 0.
    """
    target = quantile * n_samples
    return max(min(target, n_samples - 2.0 * sigma), target / 2.0)


def interpolate_bound(edges, found):
    r"""The bound within the bin :func:`search_bound` found, and its count.

    The grid's step is :math:`2^{1/4}` in :math:`C`, :math:`\sqrt{2}` in the
    covariance noise :math:`\propto C^2`; the first grid value whose noisy
    count reaches the target lies anywhere up to a step above the quantile.
    Between :math:`u_{j-1}`, whose noisy count :math:`N_{j-1}` fell below the
    target :math:`t`, and :math:`u_j`, whose noisy count :math:`N_j` reached
    it, the bound is placed where the counts, interpolated linearly in
    :math:`\log C`, reach :math:`t`: :math:`C = u_{j-1}^{1-s} u_j^s` with
    :math:`s = (t - N_{j-1})/(N_j - N_{j-1})` in :math:`[0, 1]`.
    Post-processing of released counts and public values. Without a released
    :math:`N_{j-1}` (:math:`j = 0`, or the bound is a failed check's value)
    and in the grid's last bin, which also holds the norms beyond it, the
    bound is :math:`u_j`.

    Returns
    -------
    bound : float
    count : float
        The interpolated noisy count at ``bound`` (:math:`N_j` without
        interpolation).
    """
    j = found.index
    inside = found.below is not None and 0 < j < edges.shape[0] - 1
    gap = found.count - found.below if inside else None
    if not gap or gap < 0:  # nothing to interpolate between
        return float(edges[j]), found.count
    share = min(max((found.target - found.below) / gap, 0.0), 1.0)
    low, high = float(edges[j - 1]), float(edges[j])
    return low * (high / low) ** share, found.below + share * gap


def shrink_step(move, sigma):
    r"""A mean step's released movement, shrunk toward 0 (James–Stein).

    ``move`` estimates the step's true movement with noise
    :math:`\mathcal{N}(0, \sigma^2 I_d)`; the positive-part James–Stein
    factor :math:`\max(0, 1 - (d - 2)\sigma^2/\|\mathrm{move}\|^2)` has a
    smaller expected squared error for :math:`d \ge 3` whatever the true
    movement, and on a centre already at the data (a pure-noise movement) it
    removes most of the noise. Post-processing of the release and the public
    :math:`\sigma`; no shrinkage for :math:`d \le 2` or without noise.
    """
    size = float(move @ move)
    if sigma == 0.0 or move.shape[0] <= 2 or size == 0.0:
        return move
    return move * max(0.0, 1.0 - (move.shape[0] - 2) * sigma**2 / size)


def shrunk_error(move, sigma):
    r"""``(expected, upper)`` of the squared error
    :math:`\lVert \hat\theta - \theta \rVert^2` that :func:`shrink_step`
    leaves in the step's estimate of the true movement :math:`\theta`, the
    error of the mean the step leaves where it moved it to the data: Stein's
    unbiased estimate for the positive-part James–Stein estimate
    (:math:`d\sigma^2 - (d-2)^2\sigma^4/\|y\|^2` where it shrinks,
    :math:`\|y\|^2 - d\sigma^2` where it returns 0; :math:`y` = ``move``),
    floored at 0, and that estimate plus two of its standard deviations,
    :math:`2\sigma^2 (2d + 4(\|y\|^2 - d\sigma^2)_+/\sigma^2)^{1/2}` (that
    of :math:`\|y\|^2`: the estimate alone, 0 where the step shrinks to 0,
    let the mean's error count as a component, review 126 F2), at most the
    unshrunk noise's upper size; one margin, not two (review 127 F3).
    Public: the released movement and :math:`\sigma`. Unshrunk
    (:math:`d \le 2`), the noise's (``_spectrum.gaussian_error``)."""
    d, size = move.shape[0], float(move @ move)
    noise = gaussian_error(sigma, d)
    if sigma == 0.0 or d <= 2 or size == 0.0:
        return noise
    if size > (d - 2) * sigma**2:
        risk = d * sigma**2 - (d - 2) ** 2 * sigma**4 / size
    else:
        risk = size - d * sigma**2
    excess = max(size - d * sigma**2, 0.0) / sigma**2
    spread = sigma**2 * math.sqrt(2.0 * d + 4.0 * excess)
    return (min(max(risk, 0.0), noise[0]),
            min(max(risk + 2.0 * spread, 0.0), noise[1]))
