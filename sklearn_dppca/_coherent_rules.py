r"""The coherent power method's rules: pure functions of released and
public values.

The budget's shares and the branch rule's thresholds of each mode, the
eigenvalue floor and the preconditioner of each power step, the
go/no-go's sensitivity, the branch rule's estimates (the warm start, the
predicted errors of either branch), the Rényi accounting of
``selection="repetition"`` and the size of its batches of trials.
:class:`~sklearn_dppca.CoherentPowerPCA` applies them; docs/privacy.rst §6
and docs/coherent.rst derive them.
"""

import math

import numpy as np

from ._base import budget_shares
from ._paths import PASS_PARTS, PASS_PRODUCTS, SOLVER_BLOCKS, auto_solver
from ._stats import _block_rows
from .privacy import DEFAULT_ORDERS, gdp_mu, rdp_to_epsilon, repeated_rdp

#: Smallest ``clip_radius``: the power step's noise ``Δ R`` stays a normal
#: number for every accepted budget (Δ ≥ 4e-108; _base.SMALLEST_SENSITIVITY).
MIN_CLIP_RADIUS = 1e-100
#: Shares of μ*² (fixed R and T; exact GDP composition, docs/privacy.rst §2).
FIXED_SHARES = {"mean": 0.10, "init": 0.44, "power": 0.45, "count": 0.01}
#: Shares of μ*² of the default automatic mode (``selection="gdp"``): the
#: clipping test's two releases share "test"; "branch" is spent either by the
#: power branch (its iterations, then the go/no-go) or by the fallback's
#: second covariance release — the same μ² whichever runs.
GDP_SHARES = {"mean": 0.10, "init": 0.45, "test": 0.02, "branch": 0.43}
#: Part of the branch share the power branch gives its go/no-go release.
DECISION_PART = 0.05 / 0.43
#: Shares of the RDP scale ρ (``selection="repetition"``): each Gaussian
#: release costs ``λ · share · ρ``; "power" and "score" are one trial's,
#: repeated. No count of clipped rows is released in this mode.
AUTO_SHARES = {"mean": 0.10, "init": 0.40, "power": 0.40, "score": 0.10}
#: The branch rule of ``selection="gdp"`` (module docs): the power branch runs
#: only when all three released criteria agree.
ENERGY_RATIO = 0.8  # q(2√(k/n)) ≥ 0.8 q(γ^{-1/2}): rows' products are small
WARM_START = 0.7  # ŝ₀ < 0.7: the initialisation is a warm start
KAPPA_MAX = 1.0  # κ̂ = k λ̂_k 2 ln(nk)/n ≤ 1: the theory's winning regime
GAIN_MAX = 0.6  # predicted error: power ≤ 0.6 × fallback (a clear predicted win)
#: Power iterations of the default (``n_iter="auto"`` with selection="gdp").
GDP_ITERATIONS = 2
#: The path without a ``d × d`` matrix (``path="noisy_power"``): its
#: initialisation's columns beyond ``k`` and passes, and the fallback's
#: passes (from the initialisation's basis).
WIDE_OVERSAMPLES = 10
WIDE_PASSES = 4
WIDE_FALLBACK_PASSES = 2
#: ``start="random"``: shares of μ*² (the iterations from a random basis, then
#: the variances: ``Xᵀ M X`` and the trace, half each) and its iterations
#: (the step share split over them by :func:`random_step_weights`): see
#: :func:`random_iterations`.
RANDOM_SHARES = {"mean": 0.10, "step": 0.80, "variance": 0.10}
RANDOM_ITERATIONS = 8
RANDOM_ITERATIONS_MANY_ROWS = 16
#: From this many rows per feature on, the random start takes the larger count.
MANY_ROWS_PER_FEATURE = 50
#: ``start="auto"``: the random start from this ratio of the initialisation's
#: noise to the rows' mean eigenvalue on (:func:`covariance_noise_ratio`), on
#: at least this many features (docs/coherent.rst, "Which start").
RANDOM_START_RATIO = 3.0
RANDOM_START_FEATURES = 100


def random_step_weights(n_iter):
    r"""Shares of the step budget :math:`\mu_{\mathrm{step}}^2` of the
    random start's :math:`T` iterations: equal, but for the last three,
    which double from one to the next (:math:`T = 8`: 1, 1, 1, 1, 1, 2, 4,
    8, over 19).

    The early iterations only turn a random basis towards the top subspace;
    the last one's noise is what the components keep. Measured on the
    spiked rows of docs/benchmarks.rst ("Where n is close to d"), on seeds
    apart from the benchmark's, equal shares over 5 iterations left
    ``sin θ`` 0.44 at :math:`d = 1000`, :math:`n = 20 d`, and this schedule
    0.29."""
    weights = 2.0 ** np.maximum(0, np.arange(n_iter) - (n_iter - 4))
    return weights / weights.sum()


def random_iterations(n_samples, n_features):
    r"""``n_iter="auto"`` of the random start, from the public shape: 8
    iterations below :math:`50 d` rows, 16 from there on.

    Near :math:`n \approx d` each iteration's noise is what limits the fit,
    and fewer iterations, each with more of the budget, do better (docs/
    benchmarks.rst, "Where n is close to d": at :math:`n = 10 d`, 16
    iterations gave 0.81 where 8 gave 0.61). With many rows the noise is
    small and what limits it is convergence: the clipped, sign-like step
    converges more slowly than a power step where the top eigenvalues are
    close to the next, and 8 iterations stopped short (0.44 against
    ``PrivatePCA``'s 0.017 at :math:`d = 50`, :math:`n = 10^5`, eigengap
    0.5; 16 gave 0.017). On the spiked rows, where both converge, 16 cost
    at most 10% more error from :math:`50 d` on."""
    if n_samples >= MANY_ROWS_PER_FEATURE * n_features:
        return RANDOM_ITERATIONS_MANY_ROWS
    return RANDOM_ITERATIONS


def covariance_init_mu(epsilon, delta, center):
    r""":math:`\mu_{\mathrm{init}}`, the covariance start's initialisation
    in ``selection="gdp"``: :math:`\mu_* \sqrt{w_{\mathrm{init}}}` with
    :data:`GDP_SHARES` (0.45 of :math:`\mu_*^2`, 0.5 without centring)."""
    return gdp_mu(epsilon, delta) * math.sqrt(
        budget_shares(GDP_SHARES, center)["init"])


def covariance_noise_ratio(n_samples, n_features, mu_init):
    r""":math:`\rho = \nu / (n/d) = 2\sqrt{2}\, d^{3/2} / (\mu_{\mathrm{init}}\, n)`:
    :math:`\nu = 2\sigma\sqrt{d}`, :math:`\sqrt 2` times the spectral norm
    :math:`\sigma\sqrt{2d}` of the initialisation's GOE noise
    :math:`\sigma(G + G^\top)/2` (:math:`\sigma = \sqrt{2}/\mu_{\mathrm{init}}`,
    unit-ball units; the threshold 3 was tuned on this :math:`\rho`), over
    the largest mean eigenvalue :math:`n/d` that the unit-ball Gram matrix can
    have (its trace is at most :math:`n`).

    A component stands out of that release only if its eigenvalue exceeds
    the mean by about :math:`\rho/\sqrt 2` times the mean; the random start's
    releases have no :math:`\sqrt{d}` in their noise against their signal.
    A function of public values only (the shape and the budget)."""
    return 2.0 * math.sqrt(2.0) * n_features**1.5 / (mu_init * n_samples)


def random_start_wins(n_samples, n_features, mu_init):
    r"""Whether ``start="auto"`` takes the random start:
    :math:`d \ge 100` and :func:`covariance_noise_ratio` at least 3.

    Measured against the covariance start (docs/coherent.rst, "Which
    start"; ``bench_coherent.py`` with either start, 70 cells): on every
    cell with :math:`d \ge 100` and :math:`\rho \ge 2.4` the random start
    was as accurate or better (0.48–1.00×); the cell above
    :math:`\rho = 1.5` where it lost (1.70×, :math:`d = 800`,
    :math:`\varepsilon = 10`) had :math:`\rho = 1.72`. Below 100 features
    both are random directions wherever :math:`\rho \ge 3`. Public values
    only."""
    return (n_features >= RANDOM_START_FEATURES
            and covariance_noise_ratio(n_samples, n_features, mu_init)
            >= RANDOM_START_RATIO)


def floor_level(noise_scale, k, n_iter, failure_prob):
    r"""The eigenvalue floor
    :math:`\gamma = 4\Delta(2\sqrt{k} + \sqrt{2 \ln(8T/\beta)})`
    (docs/privacy.rst §6)."""
    return 4.0 * noise_scale * (
        2.0 * math.sqrt(k) + math.sqrt(2.0 * math.log(8.0 * n_iter / failure_prob))
    )


def preconditioner(H, floor):
    r""":math:`B = \tilde{H}^{-1/2}`, :math:`\tilde{H}` = :math:`H` with its
    eigenvalues floored at ``floor``.

    Defined for every symmetric :math:`H` (any sign) as long as ``floor`` is
    positive.
    """
    values, vectors = np.linalg.eigh((H + H.T) / 2.0)
    return (vectors / np.sqrt(np.maximum(values, floor))) @ vectors.T


def projection_gap(X, Y):
    r""":math:`\|XX^\top - YY^\top\|_2` for orthonormal :math:`X, Y` of equal
    rank: the sine of the largest principal angle, the largest singular
    value of :math:`Y - X(X^\top Y)` (not
    :math:`\sqrt{1 - \sigma_{\min}(X^\top Y)^2}`, whose cancellation returns
    0 for close subspaces that differ)."""
    return min(1.0, float(np.linalg.norm(Y - X @ (X.T @ Y), 2)))


def decision_sensitivity(X, init, n_samples):
    r"""L2 sensitivity of the go/no-go statistic :math:`D =
    \operatorname{tr}(X^\top G X) - \operatorname{tr}(\mathrm{init}^\top G
    \, \mathrm{init})` as computed: :math:`2\|P_T - P_0\|_2`
    (:func:`projection_gap`) plus twice a bound on the round-off of the
    computed :math:`D`, :math:`4 (d + 2) k n \varepsilon` (each trace is at
    most :math:`k n` in absolute terms, and each of its entries sums
    :math:`d + 2` rounded products), so that a neighbour's different
    round-off is covered by the noise too: a decision between close
    subspaces is never noiseless."""
    d, k = X.shape
    roundoff = 4.0 * (d + 2) * k * n_samples * np.finfo(np.float64).eps
    return 2.0 * (projection_gap(X, init) + roundoff)


def warm_start_estimate(eigvals, k, noise_norm):
    r""":math:`\hat{s}_0`: the initialisation's error predicted from its
    released spectrum.

    With :math:`\nu` the noise's spectral norm and
    :math:`\hat{g} = \hat\lambda_k - \hat\lambda_{k+1}`, the gap
    :math:`\theta` that a perturbation of norm :math:`\nu/2` along the
    subspace turns into :math:`\hat{g}` solves
    :math:`\hat{g} = (\theta - \nu/2)^2/\theta`; the larger root is
    :math:`\hat\theta = ((\nu + \hat{g}) + \sqrt{\hat{g}(2\nu + \hat{g})})/2`
    and :math:`\hat{s}_0 = \nu/(2\hat\theta)` (Davis–Kahan).
    A function of released eigenvalues and public values only.
    """
    gap = max(float(eigvals[k - 1] - eigvals[k]), 0.0)
    theta = ((noise_norm + gap) + math.sqrt(gap * (2.0 * noise_norm + gap))) / 2.0
    return noise_norm / (2.0 * theta) if theta > 0 else math.inf


def predicted_errors(eigvals, k, sigma, noise, radius, mus, noise_norm=None,
                     n_features=None):
    r"""Predicted :math:`\sin\theta` of the power branch and of the fallback.

    Power: the iteration's noise :math:`\Delta R \cdot G` against its signal
    :math:`\approx \sqrt{\lambda_k}`,
    :math:`\Delta R(\sqrt{d} + \sqrt{k})/\sqrt{\hat\lambda_k}`. Fallback: the
    gap :math:`\hat\theta` estimated from the initialisation
    (:func:`warm_start_estimate`, noise :math:`\sigma`) seen through the
    averaged release's noise :math:`\sigma_c` (:math:`\sigma_c^2 =
    2/(\mu_{\mathrm{init}}^2 + \mu_{\mathrm{fallback}}^2)`):
    :math:`\hat{s}_0 \sigma_c/\sigma`. Released eigenvalues and public values
    only. ``noise_norm``: the initialisation's noise's spectral norm (default
    the GOE kernel's, :math:`\sqrt{2d}\, \sigma`); ``n_features``:
    :math:`d` where ``eigvals`` is not the whole spectrum (the noisy power
    path gives both).
    """
    d = eigvals.shape[0] if n_features is None else n_features
    if noise_norm is None:
        noise_norm = math.sqrt(2.0 * d) * sigma
    combined = math.sqrt(2.0 / (mus["init"] ** 2 + mus["fallback"] ** 2))
    fallback = warm_start_estimate(eigvals, k, noise_norm)
    fallback *= combined / sigma
    lam_k = float(eigvals[k - 1])
    if lam_k <= 0:
        return math.inf, fallback
    power = noise * radius * (math.sqrt(d) + math.sqrt(k)) / math.sqrt(lam_k)
    return power, fallback


def selection_rdp(rho, shares, theta, orders=DEFAULT_ORDERS):
    r"""RDP curve of a ``selection="repetition"`` fit at scale ``rho``
    (§2, §6).

    Gaussian releases outside the selection (mean, initialisation) cost
    :math:`\lambda \cdot \mathrm{share} \cdot \rho`; one trial (its :math:`T`
    power iterations at :math:`\Delta = \chi\sqrt{T}` and its noisy score)
    costs :math:`\lambda (w_{\mathrm{power}} + w_{\mathrm{score}}) \rho`,
    repeated a :math:`\mathrm{Geometric}(\theta)` number of times (Papernot
    & Steinke, Theorem 2).
    """
    trial = orders * ((shares["power"] + shares["score"]) * rho)
    outside = sum(w for k, w in shares.items() if k not in ("power", "score"))
    return orders * (outside * rho) + repeated_rdp(trial, theta, orders)


def calibrate_selection(epsilon, delta, theta, shares):
    r"""The scale :math:`\rho` at which a repetition fit spends exactly
    :math:`(\varepsilon, \delta)`.

    Bisection on :math:`\log\rho`: the spent :math:`\varepsilon` grows with
    :math:`\rho`. The repetition theorem's :math:`\ln(1/\theta)` terms do not
    vanish as :math:`\rho \to 0`, so budgets below a floor cannot be met at
    all: those raise a ``ValueError`` naming the smallest reachable
    :math:`\varepsilon`.
    """

    def spent(log_rho):
        return rdp_to_epsilon(selection_rdp(math.exp(log_rho), shares, theta), delta)[0]

    lo, hi = -40.0, 10.0
    floor = spent(lo)
    if floor >= epsilon:
        raise ValueError(
            f"epsilon={epsilon:.6g} is below what selection='repetition' can "
            f"reach at delta={delta:g} with {1.0 / theta:.4g} expected trials: "
            f"the smallest reachable epsilon is {floor:.6g}. Use a larger epsilon, "
            "fewer expected_trials, fixed clip_radius and n_iter, or "
            "selection='gdp' (exact at any epsilon)."
        )
    while spent(hi) < epsilon:
        hi += 10.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if spent(mid) <= epsilon else (lo, mid)
    return math.exp(lo)


#: Arrays of (trials · k) columns that a batch of ``selection="repetition"``
#: holds, each of d rows or of a block of rows (whichever is more): the
#: iterates, the products, their clipped sums, and the pass's products of a
#: block of rows and their scaled copy (measured: 147 MB for a plan of 60 at
#: 2 000 × 300, before batches were bounded by the block's rows).
REPETITION_ARRAYS = 6


def repetition_side(n_samples, n_features):
    """Rows of a batch's largest arrays: d, or a pass's block of rows."""
    return max(n_features, min(n_samples, _block_rows(n_features)))


def repetition_batch(n_samples, n_features, k):
    """Trials per lock-step batch of ``selection="repetition"``: at most 256,
    and at most 2²¹ entries in each of a batch's arrays."""
    side = repetition_side(n_samples, n_features)
    return max(1, min(256, 2**21 // max(side * k, 1)))


#: The power iterations' d × k arrays (the iterate, the products, their
#: clipped sums, the noise, the sum, QR's copy and factor) beside each pass
#: thread's (``PASS_PARTS`` and ``PASS_PRODUCTS``), as the noisy power path
#: counts them (:func:`dense_matrices`; its solver's blocks:
#: ``SOLVER_BLOCKS``, the truncated solver's of the top k + 1).
ITERATION_ARRAYS = 8


def dense_matrices(mode, n_samples, n_features, n_components, threads):
    r"""The dense path's arrays from its release on, at their peak, in units
    of :math:`8 d^2` bytes, beside the pass's blocks of rows and the noise's
    (the base's plan): public values only (the mode, the shape,
    ``n_components``, the threads of a pass: ``threads``, the plan's).

    Each phase holds the Gram matrix :math:`G` and the release :math:`\hat M`
    (the fallback's combination :math:`\hat M_2` in its place from the
    fallback on), the initialisation's eigenvectors, and from them on
    ``init_components_`` (:math:`k \times d`). The eigenvectors: every one
    (:math:`d^2`; LAPACK's syevd holds a copy, the eigenvectors and a
    :math:`2 d^2` workspace while it runs), or where ``_eigenpairs`` takes
    the top :math:`k + 1` only, :math:`d \times p` (:data:`SOLVER_BLOCKS`
    while the solver runs). The phases: the first eigensolve; the power
    iterations (:data:`ITERATION_ARRAYS`, and each thread's part of the sum
    and its block's products, ``PASS_PARTS`` :math:`d \times k` and
    ``PASS_PRODUCTS`` :math:`b \times k` with :math:`b` a block's rows); the
    fallback's (``"gdp"``) :math:`\hat M_2` beside :math:`\hat M` and the
    first step's :math:`X B`, and its eigensolve; the exact :math:`G`'s
    eigh of ``selection="repetition"``; the variances (the fallback's
    eigenvectors too, :math:`k \times k` matrices and their eigh, four
    :math:`d \times k` copies of the components). Measured peaks (VmHWM
    less the RSS before the fit, in d², n = 2d, at d = 1 500 / 2 500 /
    4 000), against this count with the rows' and the noise's blocks:
    k = 10, fixed 4.16 / 3.76 / 3.09 (plan 7.1 / 5.7 / 3.9), ``"gdp"``
    (fallback) 5.40 / 4.28 / 3.69 (8.2 / 6.8 / 4.9), repetition (k = 3,
    ε = 100, its trials beside) 6.28 / 6.59 / 6.61 (16.6 / 11.5 / 8.6);
    the default (``n_components=None``: every eigenpair, the fallback)
    11.21 / 11.24 / 11.08 (17.0 / 15.7 / 13.8: 11 matrices at the
    variances' eigh, counted as 12). The plan counted six
    matrices (every eigenpair) whatever the mode: twice the k = 10 fits,
    and under the default's (issue 31).
    """
    d = n_features
    k = n_components or min(n_samples, d)
    full = not (k + 11 < d and auto_solver(n_samples, d, n_components) == "randomized")
    x, y = min(d, k + 11) / d, k / d
    vectors = 1.0 if full else x
    solve = 4.0 if full else SOLVER_BLOCKS * x
    phases = [2.0 + solve, 2.0 + 2.0 * vectors + 6.0 * y + 2.0 * y * y]
    if k < d:  # the power iterations (none where every direction is kept)
        blocks = min(n_samples, _block_rows(d) * threads) / d  # the threads' rows
        arrays = (1.0 + ITERATION_ARRAYS  # and init_components_
                  + threads * PASS_PARTS + PASS_PRODUCTS * blocks)
        phases.append(2.0 + vectors + arrays * y)
    if mode in ("gdp", "random"):  # the fallback: M̂₂, the first step's X B
        phases.append(3.0 + vectors + 2.0 * y + solve)
    if mode == "repetition":  # the exact G's every eigenpair
        phases.append(6.0 + vectors + y)
    return max(phases)
