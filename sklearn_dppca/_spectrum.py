"""The mathematics of a released symmetric matrix's spectrum: the
de-noised eigenvalues of a Gaussian release (a free-probability fit of the
noise's bulk), Minka's evidence for the rank, and the eigen-solvers the
estimators take the top eigenpairs with. Post-processing only: every
function here takes released values and public ones (docs/privacy.rst,
"The de-noised spectrum" and "Solvers").
"""

import math
from typing import NamedTuple

import numpy as np
from scipy.special import gammaln

from . import _array_api


def minka_log_evidence(spectrum, n_samples, relative_zero=1e-15):
    r"""Minka's Laplace approximation of :math:`\log p(X \mid k)` for every
    rank :math:`k`.

    T. P. Minka, "Automatic choice of dimensionality for PCA", NIPS 2000,
    eq. (30): with :math:`\lambda_1 \ge \dots \ge \lambda_d` the sample
    variances, :math:`N` samples, :math:`v = \sum_{j>k} \lambda_j / (d - k)`,
    :math:`m = dk - k(k+1)/2`, :math:`\hat{\lambda}_j = \lambda_j` for
    :math:`j \le k` and :math:`v` beyond,

    .. math::

        \log p(U) - \frac{N}{2} \sum_{j \le k} \log \lambda_j
        - \frac{N(d-k)}{2} \log v + \frac{m+k}{2} \log 2\pi
        - \frac{1}{2} \log |A_Z| - \frac{k}{2} \log N,

    :math:`\log p(U) = -k \log 2 + \sum_{i \le k} [\ln \Gamma((d-i+1)/2) -
    (d-i+1)/2 \, \log \pi]` and :math:`\log |A_Z| = \sum_{i \le k}
    \sum_{j > i} \log[N (\lambda_i - \lambda_j)(1/\hat{\lambda}_j -
    1/\hat{\lambda}_i)]`.

    In :math:`O(d^2)`: the pair sums are cumulated over :math:`k`. A rank
    whose :math:`\lambda_k` is (relatively) zero scores :math:`-\infty`, as
    does :math:`k = 0`; :math:`v` is floored at the same relative level, so
    the criterion is scale-invariant.

    Parameters
    ----------
    spectrum : ndarray of shape (d,)
        Variances in decreasing order, non-negative.
    n_samples : int
    relative_zero : float, default=1e-15
        Variances below :math:`\mathtt{relative\_zero} \cdot \lambda_1` count
        as zero: round-off of the precision the spectrum was computed in.

    Returns
    -------
    log_evidence : ndarray of shape (d,)
        Entry :math:`k` for rank :math:`k`; entry 0 is :math:`-\infty` (and
        ranks :math:`k = d` are not scored, as in scikit-learn).
    """
    lam = np.asarray(spectrum, dtype=np.float64)
    d, N = lam.shape[0], float(n_samples)
    out = np.full(d, -np.inf)
    if d < 2 or not lam[0] > 0.0:
        return out
    tiny = relative_zero * lam[0]
    ranks = np.arange(1, d)  # k = 1 .. d − 1
    i = np.arange(1, d)
    log_pu = np.cumsum(gammaln((d - i + 1) / 2.0) - (d - i + 1) / 2.0 * math.log(np.pi))
    log_pu -= ranks * math.log(2.0)
    log_top = np.cumsum(np.log(np.maximum(lam[: d - 1], tiny)))
    tail = np.cumsum(lam[::-1])[::-1]  # tail[k] = Σ_{j ≥ k} λ_j (0-based)
    v = np.maximum(tail[1:] / (d - ranks), tiny)
    m = d * ranks - ranks * (ranks + 1) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        # Σ_{i≤k} Σ_{j>i} log(λ_i − λ_j): row sums R_i over j > i, cumulated
        gaps = np.array([np.log(lam[a] - lam[a + 1 :]).sum() for a in range(d - 1)])
        # Σ_{i<j≤k} log(1/λ_j − 1/λ_i): column sums over i < j, cumulated
        inv = 1.0 / np.maximum(lam, tiny)
        within = np.array([np.log(inv[j] - inv[:j]).sum() for j in range(1, d)])
        within = np.cumsum(np.r_[0.0, within])[: d - 1]  # pairs inside the top k
        # Σ_{i≤k} (d − k) log(1/v − 1/λ_i): the pairs reaching beyond k
        across = np.array(
            [(d - k) * np.log(1.0 / v[k - 1] - inv[:k]).sum() for k in ranks]
        )
        n_pairs = ranks * d - ranks * (ranks + 1) / 2.0
        log_az = np.cumsum(gaps) + within + across + n_pairs * math.log(N)
        scores = (
            log_pu
            - N / 2.0 * log_top
            - N * (d - ranks) / 2.0 * np.log(v)
            + (m + ranks) / 2.0 * math.log(2.0 * math.pi)
            - log_az / 2.0
            - ranks / 2.0 * math.log(N)
        )
    scores[lam[: d - 1] < tiny] = -np.inf
    out[1:] = scores
    return out


def minka_dimension(spectrum, n_samples, relative_zero=1e-15):
    """The rank of highest Minka evidence (:func:`minka_log_evidence`).

    ``n_components='mle'``. On a private fit the spectrum is the released
    (noisy, clamped) one, so the choice is post-processing and costs no
    budget; the noise, spread over every eigenvalue, can move it.

    Parameters
    ----------
    spectrum : ndarray of shape (d,)
        Variances in decreasing order.
    n_samples : int

    Returns
    -------
    k : int
        In :math:`[1, d - 1]`, or 0 when no rank can be scored
        (:math:`d = 1` or a zero spectrum), as scikit-learn chooses.
    """
    return int(np.argmax(minka_log_evidence(spectrum, n_samples, relative_zero)))


def scatter_trace(gram):
    r""":math:`\operatorname{tr}(\mathtt{gram})` as a host float, for a NumPy
    or an Array API matrix."""
    if not isinstance(gram, np.ndarray):
        gram = _array_api.to_host(gram)
    return float(np.trace(gram))


class Spectrum(NamedTuple):
    """A release's estimated spectrum, in variance units (over
    :math:`n - 1`).

    See :func:`denoised_spectrum` and docs/privacy.rst, "The spectrum".
    """

    n_components: int  # k = n_components_
    explained: np.ndarray  # (m,) the data's eigenvalues, estimated, by rank
    captured: np.ndarray  # (m,) the data's variance along each released eigenvector
    total: float  # Σ explained: the estimated total variance
    noise_variance: float  # mean of captured beyond rank k (0 when k = m)
    n_resolved: int  # eigenvalues above the noise bulk's edge


def _non_increasing(values):
    """The least-squares non-increasing fit of ``values`` (pool adjacent
    violators): equal weights, so every pooled block keeps its sum."""
    blocks = []  # [mean, size]
    for v in values:
        blocks.append([float(v), 1])
        while len(blocks) > 1 and blocks[-2][0] < blocks[-1][0]:
            mean, size = blocks.pop()
            blocks[-1][0] = (blocks[-1][0] * blocks[-1][1] + mean * size) / (
                blocks[-1][1] + size)
            blocks[-1][1] += size
    return np.concatenate([np.full(size, mean) for mean, size in blocks]
                          ) if blocks else np.empty(0)


def _repulsion(lam, top, rest=None):
    r""":math:`\sum_{j \ne i} 1/(\lambda_i - \lambda_j)` for
    :math:`i < \mathtt{top}`, in blocks of rows (an exact tie contributes 0).
    With ``rest = (count, sum, sum of squares)`` of the eigenvalues not
    computed (a truncated solver), their part of the sum is that of a
    semicircle with their mean and variance (:func:`_bulk_stieltjes`)."""
    out = np.empty(top)
    for start in range(0, top, 256):
        rows = slice(start, min(start + 256, top))
        gaps = lam[rows, None] - lam[None, :]
        with np.errstate(divide="ignore"):
            inverse = np.where(gaps != 0.0, 1.0 / gaps, 0.0)
        out[rows] = inverse.sum(axis=1)
    if rest is not None and rest[0] > 0:
        out += _bulk_stieltjes(lam[:top], *rest)
    return out


def _bulk_stieltjes(z, count, total, squares):
    r""":math:`\sum_j 1/(z - \lambda_j)` over ``count`` eigenvalues known only
    by their sum and sum of squares: ``count`` times the Stieltjes transform
    of the semicircle law of their mean :math:`b` and variance :math:`v`
    (radius :math:`R = 2\sqrt{v}`), :math:`2 (u - \sqrt{u^2 - R^2}) / R^2` at
    :math:`u = z - b` beyond the edge, its principal value :math:`2u/R^2`
    inside. The noise's bulk is a semicircle (the GOE's), widened a little
    by the data's small eigenvalues; its mean and variance are exact, from
    :math:`\operatorname{tr} \hat{M}` and :math:`\|\hat{M}\|_F^2`."""
    mean = total / count
    variance = max(squares / count - mean * mean, 0.0)
    u = np.asarray(z, dtype=np.float64) - mean
    if variance == 0.0:
        with np.errstate(divide="ignore"):
            return np.where(u != 0.0, count / u, 0.0)
    radius_sq = 4.0 * variance
    outside = np.abs(u) > math.sqrt(radius_sq)
    root = np.sqrt(np.where(outside, u * u - radius_sq, 0.0))
    inner = np.where(outside, u - np.sign(u) * root, u)
    return count * 2.0 * inner / radius_sq


#: Standard deviation of the Tracy–Widom law of the GOE (β = 1): the top
#: eigenvalue of a d × d GOE of off-diagonal variance τ² is about
#: ``τ (2√d + d^{−1/6} TW₁)``.
TRACY_WIDOM_SD = 1.2680
#: Standard deviations of the top noise eigenvalue beyond the bulk's edge at
#: which a released eigenvalue counts as fully resolved (weight 1).
RESOLVED_AT = 3.0


def gaussian_error(sd, n_features):
    r"""``(expected, upper)`` of :math:`\lVert \delta \rVert^2` for
    :math:`\delta` of :math:`d` independent :math:`N(0, \mathtt{sd}^2)`
    coordinates (a mean's noise): :math:`d\, \mathtt{sd}^2` and that plus
    two of its standard deviations, :math:`\mathtt{sd}^2 (d + 2\sqrt{2d})`
    (exceeded by 2–5% of draws; the margin of
    :func:`~sklearn_dppca._norm_plan.shrunk_error` too: a chi quantile of
    :math:`(\sqrt d + 3)^2`, 3.8 times the expected size at :math:`d = 10`,
    hid real components of tall tables, review 128 F2)."""
    return (n_features * sd**2,
            sd**2 * (n_features + 2.0 * math.sqrt(2.0 * n_features)))


def mean_spike(error, n_samples):
    r"""``(expected, upper)`` size of the rank-one term
    :math:`n \delta \delta^\top` that the private mean's error
    :math:`\delta` adds to the scatter of the rows centred on the mean
    (:math:`\sum (x_i - \hat m)(x_i - \hat m)^\top = \sum (x_i - m)(x_i -
    m)^\top + n \delta \delta^\top`, docs/privacy.rst §5), from
    ``error``, the ``(expected, upper)`` of :math:`\lVert \delta
    \rVert^2` (:func:`gaussian_error`, or with ``data_norm="auto"``
    :func:`~sklearn_dppca._norm_plan.shrunk_error`); ``(0, 0)`` without a
    mean (``error`` None). Public values only."""
    if error is None:
        return 0.0, 0.0
    return n_samples * error[0], n_samples * error[1]


def resolved_weights(lam, sigma, rest=None, spike=0.0):
    r"""How far each of ``lam`` (decreasing) stands out of the noise's bulk.

    The bulk of :math:`M + S` (:math:`S` GOE, off-diagonal variance
    :math:`\tau^2 = \sigma^2/2`) spans about :math:`b \pm 2\sqrt{d_b} \, \tau`
    around its centre :math:`b`, and its top eigenvalue fluctuates beyond
    that edge on the Tracy–Widom scale :math:`s = 1.27 \, d_b^{-1/6} \tau`.
    The eigenvalues above the edge are counted first, :math:`b` and
    :math:`d_b` being the mean and number of the others, iterated from all
    :math:`d` until none more cross (at most :math:`d` steps; the smallest
    never does). Each counted one gets the weight
    :math:`w = (\lambda - \mathrm{edge}) / (3 s)`, clipped to
    :math:`[0, 1]`: 0 at the edge, which the top eigenvalue of pure noise
    crosses 9–19% of the time (:math:`d` from 13 to 200), with a mean
    weight of 0.05–0.07 then; 1 at three standard deviations beyond, which
    it reaches under 1% of the time.

    With ``rest = (count, sum)`` of the eigenvalues not computed (a truncated
    solver: ``lam`` is the top of the spectrum), those are in the bulk, and
    at most the ``len(lam)`` computed ones can be counted above its edge.

    ``spike``: the upper size :math:`s` of a rank-one term of noise in the
    matrix, in a direction not known (the private mean's error,
    :func:`mean_spike`). Beyond :math:`\sqrt{d_b}\,\tau` it leaves the
    bulk, at about :math:`b + s + d_b \tau^2 / s` (a spike of the GOE); an
    eigenvalue counts only above that too, so the mean's error is not
    taken for a component of the data.

    Returns
    -------
    weights : ndarray of shape (r,)
        For the :math:`r` eigenvalues above the edge, in ``lam``'s order.
    """
    tau = sigma / math.sqrt(2.0)
    count, total = (0, 0.0) if rest is None else rest[:2]
    k = 0
    while True:
        size = lam.shape[0] - k + count
        centre = (lam[k:].sum() + total) / size
        edge = centre + 2.0 * math.sqrt(size) * tau
        if spike > math.sqrt(size) * tau:  # the mean's error out of the bulk
            edge = max(edge, centre + spike + size * tau * tau / spike)
        above = int(np.count_nonzero(lam > edge))
        if above <= k:
            break
        k = above
    scale = RESOLVED_AT * TRACY_WIDOM_SD * size ** (-1.0 / 6.0) * tau
    return np.clip((lam[:k] - edge) / scale, 0.0, 1.0)


def denoised_spectrum(eigvals, sigma, n_ranks, trace=None, rest=None,
                      hermitian=False, spike=(0.0, 0.0)):
    r"""Estimates of the data's spectrum from a release
    :math:`\hat{M} = M + S`.

    :math:`S` is the GOE (or GUE) kernel of :mod:`sklearn_dppca.noise`:
    diagonal variance :math:`\sigma^2`, off-diagonal (complex modulus)
    variance :math:`\tau^2 = \sigma^2/2`. Post-processing of released values
    and public :math:`\sigma` only (docs/privacy.rst §6, "The spectrum").

    1. The total :math:`T = \operatorname{tr} M`, by inverse-variance
       weighting of :math:`\operatorname{tr} \hat{M}` (variance
       :math:`d \sigma^2`) and ``trace = (value, sd)`` when a separate
       release of it is given.
    2. The :math:`r` eigenvalues above the noise's bulk
       (:func:`resolved_weights`) keep estimates of their own, from the
       released spectrum's Stieltjes transform
       :math:`h_i = \sum_{j \ne i} 1/(\hat{\lambda}_i - \hat{\lambda}_j)`:
       the data's eigenvalue
       :math:`\hat{\theta}_i = \hat{\lambda}_i - \tau^2 h_i` (it inverts
       :math:`\hat{\lambda} \approx \theta + d \tau^2 / \theta` of a spike,
       and the second-order shift
       :math:`\tau^2 \sum_j 1/(\theta_i - \theta_j)` in general), and the
       data's variance along the released eigenvector,
       :math:`\hat{\eta}_i = \hat{\lambda}_i - 2 \tau^2 h_i`
       (:math:`\theta \cos^2` of a spike: the Frobenius-optimal eigenvalue
       on that eigenvector; Bun, Bouchaud & Potters 2017), each weighted by
       how far it stands out, :math:`w_i` in :math:`[0, 1]`:
       :math:`L + w_i (\hat{\theta}_i - L)`.
    3. The other ranks, up to ``n_ranks``, cannot be told apart in the
       noise: each gets the level :math:`L` that makes the list sum to
       :math:`T`, :math:`L = (T - \sum w_i \hat{\theta}_i) /
       (\mathtt{n\_ranks} - \sum w_i)` (and the same with
       :math:`\hat{\eta}`).
    4. Each list is made non-increasing (pool adjacent violators, which keeps
       the sum) and clamped at 0.

    With :math:`\sigma = 0` both lists are the eigenvalues themselves,
    clamped at 0.

    ``spike = (expected, upper)`` (:func:`mean_spike`): the matrix holds a
    rank-one term of noise besides the data's, the private mean's error: an
    eigenvalue counts in step 2 only above where that term's would lie
    (:func:`resolved_weights`). The total :math:`T` keeps it: the rows are
    clipped around the private mean, which shrinks the term by how far
    beyond the bound they reach, not known from public values.

    Parameters
    ----------
    eigvals : ndarray of shape (d,)
        Every eigenvalue of the release, any order.
    sigma : float
        Its noise scale :math:`\sigma`.
    n_ranks : int
        Ranks estimated, :math:`m = \min(n, d)` (at most :math:`d`).
    hermitian : bool, default=False
        :math:`S` is the GUE kernel: its off-diagonal entries have
        :math:`\mathbb{E}|S_{ij}|^2 = \sigma^2` (:math:`\sigma^2/2` in the
        real part and in the imaginary part), so :math:`\tau^2 = \sigma^2`
        and the bulk's edge is at :math:`2\sqrt{d} \, \sigma`.
    trace : (float, float) or None
        A separate unbiased release of :math:`\operatorname{tr} M` and its
        noise's standard deviation.
    rest : (int, float, float, float) or None
        With a truncated solver, ``eigvals`` is the top of the spectrum, and
        ``rest`` the count, sum and sum of squares of the other eigenvalues
        (:math:`\operatorname{tr} \hat{M}` and :math:`\|\hat{M}\|_F^2` less
        the computed ones': exact), the sum in units of its last entry and the
        squares in units of that unit's square
        (:func:`~sklearn_dppca._base.top_with_rest`). The total is then exact
        as before; the bulk's edge (:func:`resolved_weights`) and the
        repulsion :math:`h_i` take the others from these moments
        (:func:`_bulk_stieltjes`), and at most ``len(eigvals)`` ranks have
        estimates of their own.

    Returns
    -------
    explained, captured : ndarray of shape (n_ranks,)
        :math:`\hat{\theta}` and :math:`\hat{\eta}` by rank,
        non-increasing, non-negative.
    n_resolved : int
        :math:`r`, the ranks above the bulk's edge, with estimates of their
        own (all ``n_ranks`` when :math:`\sigma = 0`).
    """
    lam = np.sort(np.asarray(eigvals, dtype=np.float64))[::-1]
    if sigma == 0.0:
        values = np.maximum(lam[:n_ranks], 0.0)
        if rest is not None and values.shape[0] < n_ranks:
            # the ranks not computed share what the computed ones leave: over
            # the n_ranks - k that can hold it (with n < d, the other d - n
            # are zero), so the total is exact, as scikit-learn's
            level = max(rest[1] * rest[3], 0.0) / (n_ranks - values.shape[0])
            values = np.r_[values, np.full(n_ranks - values.shape[0], level)]
            values = np.maximum(_non_increasing(values), 0.0)
        return values, values.copy(), n_ranks
    # in units of σ (τ² = 1/2; the GUE's E|H_ij|² is σ², τ² = 1), so that
    # nothing under- or overflows
    tau_sq = 1.0 if hermitian else 0.5
    lam = lam / sigma
    if rest is not None:  # from its unit to σ: a ratio near 1, no overflow
        ratio = rest[3] / sigma
        rest = (rest[0], rest[1] * ratio, rest[2] * ratio * ratio)
    d = lam.shape[0] + (0 if rest is None else rest[0])
    released = float(lam.sum()) + (0.0 if rest is None else rest[1])
    estimates = [(released, float(d))]  # (value, variance)
    if trace is not None:
        estimates.append((trace[0] / sigma, (trace[1] / sigma) ** 2))
    precision = sum(1.0 / var for _, var in estimates)
    total = sum(value / var for value, var in estimates) / precision
    weights = resolved_weights(lam, math.sqrt(2.0 * tau_sq), rest,
                               spike[1] / sigma)[: n_ranks - 1]
    resolved = weights.shape[0]
    repulsion = _repulsion(lam, resolved, rest)
    lists = []
    for factor in (tau_sq, 2.0 * tau_sq):  # τ² and 2τ²: θ̂, then η̂
        own = lam[:resolved] - factor * repulsion
        level = (total - weights @ own) / (n_ranks - weights.sum())
        top = level + weights * (own - level)
        fit = _non_increasing(np.r_[top, np.full(n_ranks - resolved, level)])
        lists.append(np.maximum(fit, 0.0) * sigma)
    return lists[0], lists[1], resolved


def _flip_signs(components):
    """Make the largest-magnitude entry of each row positive (deterministic signs)."""
    idx = np.argmax(np.abs(components), axis=1)
    signs = np.sign(components[np.arange(components.shape[0]), idx])
    signs[signs == 0] = 1.0
    return components * signs[:, None]


def _eigh(matrix):
    """All eigenpairs of a real symmetric or complex Hermitian matrix.

    NumPy's LAPACK, not SciPy's: the statistics pass runs on NumPy's BLAS, and
    switching libraries costs a spinning thread pool (see ``_stats``).
    """
    return np.linalg.eigh(matrix)


def power_passes(iterated_power, k, d):
    """The randomized range finder's passes: ``iterated_power``, or for
    ``"auto"`` scikit-learn's rule, 7 when ``k`` is under a tenth of ``d``,
    else 4."""
    if iterated_power != "auto":
        return iterated_power
    return 7 if k < 0.1 * d else 4


#: The filtered subspace iteration's degrees per round (:func:`top_eigenpairs`
#: with a ``floor``), in place of ``iterated_power="auto"``'s 7 or 4 passes:
#: 11 and 8 products with the matrix instead of 16 and 10. Measured on
#: released covariances (PrivatePCA on the three spikes of
#: ``bench_coherent_wide.py``, 20 000 × 10 000 at ε = 3, seeds 0–2): the top
#: 3's ``sin θ`` 0.486–0.491 against the range finder's 0.488–0.492 (fully
#: converged: 0.479–0.483); (2, 2, 2, 3), also 11 products, gave 0.496–0.499,
#: and (2, 3, 3), 9 products, 0.543–0.553. docs/privacy.rst, "Solvers".
FILTER_DEGREES = {7: (2, 2, 3, 3), 4: (2, 2, 3)}


def _filters(iterated_power, power_iteration_normalizer):
    """Whether, given a floor, the filtered subspace iteration replaces the
    range finder: both parameters left ``"auto"``."""
    return iterated_power == power_iteration_normalizer == "auto"


def solver_products(k, d, *, iterated_power="auto",
                    power_iteration_normalizer="auto", filtered=False):
    """Products of :func:`top_eigenpairs`'s ``"randomized"`` solver with the
    matrix: ``2 · iterated_power + 2`` for the range finder, one plus the
    sum of :data:`FILTER_DEGREES` for the filtered subspace iteration (with
    a ``floor``, both parameters ``"auto"``)."""
    passes = power_passes(iterated_power, k, d)
    if filtered and _filters(iterated_power, power_iteration_normalizer):
        return 1 + sum(FILTER_DEGREES[passes])
    return 2 * passes + 2


#: How far below its kernel's semicircle edge :func:`kernel_floor` is put:
#: an eigenvalue below the floor by a fraction :math:`f` of the interval's
#: half-width is amplified by about :math:`\cosh(m\sqrt{2f})` in a round of
#: degree :math:`m`, so a floor a little too high costs little, and one too
#: low only widens the interval.
FLOOR_MARGIN = 1.05


def kernel_floor(sigma, n_features, hermitian=False):
    r"""A lower bound of the spectrum of :math:`\sum y y^\top + S` from
    public values: the scatter matrix is positive semidefinite and the
    kernel :math:`S` has its smallest eigenvalue at the semicircle's edge,
    :math:`-\sigma\sqrt{2d}` for the GOE kernel (off-diagonal
    :math:`\mathbb{E} S_{ij}^2 = \sigma^2/2`) and :math:`-2\sigma\sqrt{d}`
    for the GUE kernel (``hermitian``; :math:`\mathbb{E}|S_{ij}|^2 =
    \sigma^2`), up to fluctuations of relative order :math:`d^{-2/3}`; by
    Weyl's inequality the release's is above :data:`FLOOR_MARGIN` times
    that."""
    edge = 2.0 * math.sqrt(n_features) if hermitian else math.sqrt(2.0 * n_features)
    return -FLOOR_MARGIN * sigma * edge


def unit_squares(values, unit):
    r""":math:`\sum |v / \mathtt{unit}|^2` over ``values`` (a scaled copy):
    the squares of a release near float64's range, in a unit of its scale,
    neither overflow nor underflow."""
    scaled = values / unit
    return float(np.vdot(scaled, scaled).real)


def _filtered_subspace(matrix, k, size, floor, centre, rng, degrees):
    r"""The top ``k`` eigenpairs of a Hermitian ``matrix`` (ascending Ritz
    values and vectors of the last basis) by subspace iteration with a
    Chebyshev filter (Zhou & Saad 2007), one round per entry of ``degrees``.

    Each round applies :math:`T_m((M - c I)/e)` to the basis, by the
    three-term recurrence (:math:`m` products), with :math:`[c - e, c + e] =
    [\mathtt{floor}, b]` the interval it damps, then orthonormalises it and
    takes its Rayleigh–Ritz pairs (the product of which is the next round's
    first). An eigenvalue :math:`\lambda = c + e (1 + g)` above :math:`b` is
    amplified by :math:`\cosh(m \operatorname{arccosh}(1 + g)) \approx
    e^{m \sqrt{2 g}}` against at most 1 inside, where the power passes of the
    range finder give :math:`e^{O(m g)}`: the eigenvalues a private release
    resolves stand just above its noise's bulk (:math:`g` small). ``floor``
    is a lower bound of the spectrum (an eigenvalue a little below it is
    amplified a little, not lost). :math:`b` starts at the bulk's upper edge
    as a semicircle of the spectrum's mean (``centre``) and variance would
    put it, the variance from the first product (of a Gaussian block,
    Hutchinson's estimate), and is then the largest Ritz value beyond the top
    ``k``: below :math:`\lambda_{k+1}` (Ritz values interlace from below), so
    the eigenvalues sought are never damped. (The basis's smallest Ritz
    value, as ChASE takes it for the lowest eigenpairs, sits deep in the
    bulk and damped too little: ``sin θ`` 0.188 against 0.143 on a spiked
    release at ε = 3.)
    """
    from scipy import linalg

    d = matrix.shape[0]
    omega = rng.standard_normal((d, size)).astype(matrix.dtype)
    product = matrix @ omega
    # the spread in units of the floor (the noise's scale), column by column
    unit = abs(floor) or max(abs(centre), 1.0)
    spread = sum(unit_squares(product[:, j], unit) for j in range(size)) / (
        size * d) - (centre / unit) ** 2
    upper = centre + 2.0 * unit * math.sqrt(max(spread, 0.0))
    basis, r = linalg.qr(omega, mode="economic", check_finite=False)
    del omega  # d × p blocks are most of the memory: none kept past its use
    product = linalg.solve_triangular(r, product.conj().T, trans="C",
                                      check_finite=False).conj().T  # M Q
    for degree in degrees:
        half, mid = (upper - floor) / 2.0, (upper + floor) / 2.0
        if not half > 0.0:  # an interval of zero width: nothing to damp
            half = max(abs(mid), 1.0) * np.finfo(np.float64).eps
        before, current = basis, (product - mid * basis) / half
        del basis, product  # not needed during the filter's products
        for _ in range(degree - 1):
            following = 2.0 * (matrix @ current - mid * current) / half - before
            scale = float(np.abs(following).max()) or 1.0  # no overflow
            before, current = current / scale, following / scale
            del following
        basis = linalg.qr(current, mode="economic", check_finite=False)[0]
        del before, current
        product = matrix @ basis
        core = basis.conj().T @ product
        values, small = _eigh((core + core.conj().T) / 2.0)
        upper = float(values[max(size - k - 1, 0)])
    return values[size - k:], basis @ small[:, size - k:]


def top_eigenpairs(matrix, k, solver, rng, *, tol=0.0, iterated_power="auto",
                   n_oversamples=10, power_iteration_normalizer="auto",
                   shift=0.0, floor=None, unit=1.0):
    r"""The ``k`` largest eigenpairs of a real symmetric or complex Hermitian
    ``matrix``, by decreasing eigenvalue, without all of them.

    ``solver="arpack"``: SciPy's ``eigsh`` (Lanczos) for the ``k`` largest
    algebraic eigenvalues, to relative accuracy ``tol`` (0: machine
    precision), from a start vector drawn from ``rng``. ``"randomized"``:
    Halko, Martinsson & Tropp's range finder on
    :math:`\mathtt{matrix} + \mathtt{shift} \cdot I` with
    :math:`k + \mathtt{n\_oversamples}` columns and ``iterated_power`` passes
    of :math:`(\mathtt{matrix} + \mathtt{shift} \cdot I)^2` (``"auto"``: 7
    when ``k`` is under a tenth of :math:`d`, else 4; the normaliser between
    passes as in scikit-learn's ``randomized_svd``: ``"auto"`` is none for
    at most 2 passes, else LU), then the Rayleigh–Ritz eigenpairs of
    ``matrix`` in that range. A range finder captures the eigenvalues
    largest in modulus: ``shift`` moves the spectrum so that those are the
    largest algebraic ones (for a released matrix: minus the centre of its
    noise's bulk). With a ``floor`` (a lower bound of the spectrum) and
    both ``iterated_power`` and ``power_iteration_normalizer`` ``"auto"``,
    ``"randomized"`` is instead a subspace iteration with Chebyshev filters
    that damp the spectrum from ``floor`` to the largest Ritz value beyond
    the top ``k`` (:func:`_filtered_subspace`, :data:`FILTER_DEGREES`): as accurate on
    released matrices in 11 (or 8) products as the range finder in 16 (or
    10). Memory: :math:`O(d \, (k + \mathtt{n\_oversamples}))`
    beside ``matrix``; time :math:`O(d^2 (k + \mathtt{n\_oversamples}))` per
    pass.

    ``unit`` is a public scale of the matrix (its noise's): ARPACK runs on
    the matrix in that unit, since its tolerances underflow on a matrix of
    entries near float64's smallest normal numbers.

    Every input is a released matrix and public values, and ``rng`` is the
    fit's generator after its noise: post-processing.
    """
    d = matrix.shape[0]
    size = min(d, k + n_oversamples)
    if k == 0:
        return np.empty(0), np.empty((d, 0), dtype=matrix.dtype)
    if solver == "arpack":
        from scipy.sparse.linalg import LinearOperator, eigsh

        # (with k ≥ d − 1 eigsh takes a dense eigensolver, which reads no
        # operator: the matrix scaled as a copy, at most (k + 1)² entries)
        if unit == 1.0:
            scaled = matrix
        elif k >= d - 1:
            scaled = matrix / unit
        else:
            scaled = LinearOperator(matrix.shape, matvec=lambda v: (matrix @ v) / unit,
                                    dtype=matrix.dtype)
        values, vectors = eigsh(scaled, k=k, which="LA", tol=tol,
                                v0=rng.uniform(-1.0, 1.0, d).astype(matrix.dtype))
        values = values * unit
    elif size >= d:  # the range is everything: every eigenpair, exactly
        values, vectors = _eigh(matrix)
        values, vectors = values[d - k:], vectors[:, d - k:]
    elif floor is not None and _filters(iterated_power, power_iteration_normalizer):
        values, vectors = _filtered_subspace(
            matrix, k, size, float(floor), -float(shift), rng,
            FILTER_DEGREES[power_passes(iterated_power, k, d)])
    else:
        from scipy import linalg

        n_iter = power_passes(iterated_power, k, d)
        normalizer = power_iteration_normalizer
        if normalizer == "auto":
            normalizer = "none" if n_iter <= 2 else "LU"

        def apply(block):
            return matrix @ block + shift * block

        def normalise(block):
            if normalizer == "LU":
                return linalg.lu(block, permute_l=True, check_finite=False)[0]
            if normalizer == "QR":
                return linalg.qr(block, mode="economic", check_finite=False)[0]
            # "none": the same range, scaled so that no pass overflows
            return block / (float(np.abs(block).max()) or 1.0)

        block = rng.standard_normal((d, size)).astype(matrix.dtype)
        for _ in range(n_iter):  # passes of (M + sI)², as randomized_svd's
            block = normalise(apply(normalise(apply(block))))
        basis = linalg.qr(apply(block), mode="economic", check_finite=False)[0]
        core = basis.conj().T @ (matrix @ basis)
        values, small = _eigh((core + core.conj().T) / 2.0)
        values, vectors = values[size - k:], basis @ small[:, size - k:]
    # the top k, largest first (SciPy's ARPACK returns k + 1 pairs of a
    # complex Hermitian matrix, through its general solver)
    order = np.argsort(values.real)[::-1][:k]
    return values[order], vectors[:, order]
