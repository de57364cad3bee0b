"""CoherentPowerPCA: the private preconditioned, clipped power method (seed 000)."""

import math
import sys
from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from ._base import PrivacyPlan, _BasePrivatePCA, _eigh, budget_shares
from .noise import dense_noise, goe_noise
from .privacy import DEFAULT_ORDERS, rdp_to_epsilon, repeated_rdp

#: Shares of μ*² (fixed R and T; exact GDP composition, ALGORITHMS.md §2).
FIXED_SHARES = {"mean": 0.10, "init": 0.44, "power": 0.45, "count": 0.01}
#: Shares of the RDP scale ρ (automatic R or T): each Gaussian release costs
#: ``λ · share · ρ``; "power" and "score" are one trial's, repeated.
AUTO_SHARES = {"mean": 0.10, "init": 0.39, "power": 0.40, "score": 0.10, "count": 0.01}
def floor_level(noise_scale, k, n_iter, failure_prob):
    """The eigenvalue floor ``γ = 4Δ(2√k + √(2 ln(8T/β)))`` of ALGORITHMS.md §6."""
    return 4.0 * noise_scale * (
        2.0 * math.sqrt(k) + math.sqrt(2.0 * math.log(8.0 * n_iter / failure_prob))
    )


def preconditioner(H, floor):
    """``B = H̃^{-1/2}``, ``H̃`` = ``H`` with its eigenvalues floored at ``floor``.

    Defined for every symmetric ``H`` (any sign) as long as ``floor > 0``.
    """
    values, vectors = np.linalg.eigh((H + H.T) / 2.0)
    return (vectors / np.sqrt(np.maximum(values, floor))) @ vectors.T


def selection_rdp(rho, shares, theta, orders=DEFAULT_ORDERS):
    """RDP curve of an automatic fit at scale ``rho`` (ALGORITHMS.md §2, §6).

    Gaussian releases outside the selection (mean, initialisation, the count
    of clipped rows) cost ``λ · share · ρ``; one trial (its ``T`` power
    iterations at ``Δ = χ√T`` and its noisy score) costs ``λ (w_power +
    w_score) ρ``, repeated a ``Geometric(θ)`` number of times (Papernot &
    Steinke, Theorem 2).
    """
    trial = orders * ((shares["power"] + shares["score"]) * rho)
    outside = sum(w for k, w in shares.items() if k not in ("power", "score"))
    return orders * (outside * rho) + repeated_rdp(trial, theta, orders)


def calibrate_selection(epsilon, delta, theta, shares):
    """The scale ρ at which an automatic fit spends exactly ``(ε, δ)``.

    Bisection on ``log ρ``: the spent ``ε`` grows with ρ.
    """

    def spent(log_rho):
        return rdp_to_epsilon(selection_rdp(math.exp(log_rho), shares, theta), delta)[0]

    lo, hi = -40.0, 10.0
    while spent(hi) < epsilon:
        hi += 10.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if spent(mid) <= epsilon else (lo, mid)
    return math.exp(lo)


class CoherentPowerPCA(_BasePrivatePCA):
    """Private PCA by a preconditioned, clipped, noisy power method.

    The algorithm of seed 000 (Algorithms 1–3 and Section C), with this
    package's tighter sensitivities and exact accounting (ALGORITHMS.md §2,
    §3, §6). Rows ``a_i`` are centred privately, clipped to ``data_norm`` and
    scaled to the unit ball. The fit then

    1. releases the scatter matrix with GOE noise, as :class:`PrivatePCA`
       does, and starts from its top-k eigenvectors ``X⁽⁰⁾``;
    2. iterates ``T`` times: ``H = Xᵀ(Σ a aᵀ)X + Δ·S_k`` (sensitivity √2),
       ``B = H̃^{-1/2}`` with the eigenvalues of ``H`` floored at
       ``γ = 4Δ(2√k + √(2 ln(8T/β)))``, ``Z = Σ a_i Clip_R(a_iᵀXB) + ΔR·G``
       (sensitivity 2R), ``X`` = the Q of the thin QR of ``Z``. Per iteration
       ``μ² = 6/Δ²``.

    The clipping radius ``R`` bounds each row's influence: its error scales
    with the coherence ``‖U‖_∞`` of the data rather than with ``√d``, so the
    method wins on incoherent data whose top-k variance is spread thin.

    With ``clip_radius="auto"`` and/or ``n_iter="auto"``, ``(R, T)`` are
    chosen privately (Section C): public power-of-two grids
    ``R_j = 2^j sqrt(k/n)`` up to the largest radius that can clip at all
    (``γ^{-1/2}`` for the fewest iterations) and ``T_ℓ = 2^ℓ`` up to
    ``max_iter``; one shared initialisation; a
    ``Geometric(θ)`` number of trials, each drawing ``(R, T)`` uniformly and
    running the iteration with ``Δ(T) = χ√T`` (so every trial costs the same),
    scored by the robust ``s_{a,b} = ‖(I − XXᵀ) f_{a,b}(Σ a aᵀ)‖₂`` (sensitivity
    √2/h) plus Gaussian noise; the best noisy score wins. Privacy is accounted
    in Rényi DP with Papernot & Steinke's theorem and the improved conversion,
    calibrated so that the fit spends exactly ``(epsilon, delta)``. If the
    noisy initial spectrum shows no gap (``h ≤ 0``) the initialisation is
    returned.

    Parameters
    ----------
    n_components : int or None, default=None
        Number of components ``k``; ``None`` means ``min(n_samples,
        n_features)``.
    epsilon : float, default=1.0
        Privacy parameter ``ε > 0`` of the whole fit.
    delta : float, default=1e-6
        Privacy parameter ``δ`` in (0, 1).
    data_norm : float, "auto" or None, default=None
        Bound ``C`` on the L2 norm of a row; rows beyond it are scaled down to
        it. Choose it from domain knowledge, never from the data. ``"auto"``
        chooses it privately: a small share of the budget buys a noisy tree of
        row-norm counts over ``norm_range``, and ``C`` is its
        ``norm_quantile`` (refused with a Rényi-DP plan, i.e. clip_radius
        or n_iter "auto"; with centring, one bound for the mean's rows and
        one for the centred rows; see :doc:`bounds`). ``None`` takes the
        largest row norm of the data, which is **not private** and raises a
        :class:`~sklearn_dppca.PrivacyLeakWarning`; with ``bounds`` given it
        follows from the box instead.
    bounds : (lower, upper) or None, default=None
        Public per-feature ranges, scalars or arrays of length n_features.
        Rows are clipped into the box; the private mean is the box's midpoint
        plus a private mean of the residuals, and ``data_norm=None`` means
        the box's radius around that midpoint.
    norm_range : (float, float), default=(1e-8, 1e12)
        ``(low, high)``, ``0 < low < high``: the public grid of candidate
        bounds of ``data_norm="auto"`` (four per octave). Norms beyond it
        fall in its last value.
    norm_quantile : float in (0, 1], default=0.5
        Fraction of the rows that ``data_norm="auto"`` aims to keep unclipped.
    center : bool, default=True
        Centre the data on a private mean.
    whiten : bool, default=False
        Scale the projections to unit released variance.
    clip_radius : float or "auto", default="auto"
        The radius ``R`` (in unit-ball units, where a row's product
        ``aᵀXB`` has norm about its leverage ``‖U_i‖``). ``"auto"`` chooses it
        privately from the grid.
    n_iter : int or "auto", default="auto"
        The number of power iterations ``T``; ``"auto"`` chooses it privately.
    max_iter : int, default=32
        Cap of the automatic grid of ``T`` (the paper's ``T_max`` is
        impractically large). Every trial costs the same budget whatever its
        ``T``; a larger cap costs time, not privacy.
    expected_trials : int or "auto", default="auto"
        Mean ``1/θ`` of the geometric number of trials. ``"auto"`` is twice the
        number of grid points. More trials find better ``(R, T)`` but each
        doubling costs budget (``ln(1/θ)`` enters the privacy cost).
    failure_prob : float, default=0.1
        The ``β`` of the floor ``γ`` and of the score's margin ``ε_w``.
    n_jobs : int or None, default=None
        Threads for the passes over the rows (scikit-learn's meaning).
    verbose : int, default=0
        Print the progress of the trials (trial, its ``(R, T)``, best noisy
        score) to standard error.
    random_state : None, int, RandomState or Generator, default=None
        Source of the noise; any fixed seed makes the fit not private (warned).
    accountant : BudgetAccountant or None, default=None
        Budget charged before every fit; shared, not copied, by ``clone``.

    Attributes
    ----------
    components_ : ndarray of shape (n_components_, n_features)
        The final iterate's orthonormal basis, rotated to the principal axes
        of the released initial matrix within its span.
    explained_variance_ : ndarray of shape (n_components_,)
        Variance of the released initial matrix along each component, over
        ``n_samples − 1`` (clamped at 0).
    explained_variance_ratio_, singular_values_, noise_variance_ : as in PrivatePCA
        From the released initial spectrum.
    init_components_ : ndarray of shape (n_components_, n_features)
        The initialisation ``X⁽⁰⁾`` (top-k eigenvectors of the first release).
    clip_radius_ : float or None
        Radius used (chosen, when ``"auto"``); ``None`` when the
        initialisation was returned and no iteration ran.
    n_iter_ : int
        Iterations run (0 when the initialisation was returned).
    n_trials_ : int
        Trials run by the automatic selection (0 with fixed ``(R, T)``).
    selection_score_ : float or None
        The winning noisy score (released), ``None`` with fixed ``(R, T)``.
    n_clipped_ : int
        Rows whose product was clipped in the last iteration, released with
        Gaussian noise (1% of the budget, sensitivity 1) and rounded; the exact
        count is never stored.
    mean_, n_components_, n_samples_, data_norm_, privacy_spent_ : as in PrivatePCA
    n_features_in_, feature_names_in_ : as in PrivatePCA

    See Also
    --------
    PrivatePCA : The one-shot covariance mechanism, also the initialisation.

    References
    ----------
    Seed 000: coherence-adaptive private rank-k PCA by a preconditioned,
    clipped block power method (Algorithms 1–3, Section C).

    N. Papernot, T. Steinke. "Hyperparameter tuning with Rényi differential
    privacy." ICLR 2022.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca import CoherentPowerPCA
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(5000, 8)) * [3.0, 2.0, 1.0, 0.3, 0.3, 0.3, 0.3, 0.3]
    >>> X /= np.linalg.norm(X, axis=1).max()
    >>> pca = CoherentPowerPCA(2, epsilon=2.0, data_norm=1.0, clip_radius=1.0,
    ...                        n_iter=4).fit(X)
    >>> pca.components_.shape, pca.n_iter_
    ((2, 8), 4)
    """

    _parameter_constraints: dict = {
        **_BasePrivatePCA._parameter_constraints,
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "clip_radius": [
            Interval(Real, 0, None, closed="neither"),
            StrOptions({"auto"}),
        ],
        "n_iter": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "expected_trials": [
            Interval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
        ],
        "failure_prob": [Interval(Real, 0, 1, closed="neither")],
        "n_jobs": [Integral, None],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        n_components=None,
        *,
        epsilon=1.0,
        delta=1e-6,
        data_norm=None,
        bounds=None,
        norm_range=(1e-8, 1e12),
        norm_quantile=0.5,
        center=True,
        whiten=False,
        clip_radius="auto",
        n_iter="auto",
        max_iter=32,
        expected_trials="auto",
        failure_prob=0.1,
        n_jobs=None,
        verbose=0,
        random_state=None,
        accountant=None,
    ):
        self.n_components = n_components
        self.epsilon = epsilon
        self.delta = delta
        self.data_norm = data_norm
        self.bounds = bounds
        self.norm_range = norm_range
        self.norm_quantile = norm_quantile
        self.center = center
        self.whiten = whiten
        self.clip_radius = clip_radius
        self.n_iter = n_iter
        self.max_iter = max_iter
        self.expected_trials = expected_trials
        self.failure_prob = failure_prob
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.random_state = random_state
        self.accountant = accountant

    # ------------------------------------------------------------ privacy
    def _automatic(self):
        return self.clip_radius == "auto" or self.n_iter == "auto"

    def _iteration_grid(self):
        """Public grid of iteration counts ``T_ℓ = 2^ℓ ≤ max_iter`` (or n_iter)."""
        if self.n_iter == "auto":
            return 2 ** np.arange(int(math.log2(self.max_iter)) + 1)
        return np.array([int(self.n_iter)])

    def _radius_grid(self, n_samples, k, chi, iters):
        """Public grid of radii ``2^j sqrt(k/n)`` up to the largest that can clip.

        A row's product has norm at most ``γ^{-1/2}`` (``‖B‖ ≤ γ^{-1/2}``), and
        the floor ``γ`` is smallest for the fewest iterations; larger radii
        never clip, so the grid stops there, with that radius as its last
        point (no clipping at all).
        """
        if self.clip_radius != "auto":
            return np.array([float(self.clip_radius)])
        first = int(iters.min())
        top = floor_level(chi * math.sqrt(first), k, first, self.failure_prob) ** -0.5
        smallest = math.sqrt(k / n_samples)
        radii = [smallest * 2.0**j for j in range(64) if smallest * 2.0**j < top]
        return np.array(radii + [top])

    def _budget_shares(self):
        """Shares of ``μ*²`` with fixed ``(R, T)``: every release is Gaussian."""
        return budget_shares(FIXED_SHARES, self.center)

    def _privacy_plan(self, n_samples, n_features):
        if not self._automatic():  # exact GDP composition, as in the base
            return super()._privacy_plan(n_samples, n_features)
        k = self.n_components or min(n_samples, n_features)
        iters = self._iteration_grid()
        shares = budget_shares(AUTO_SHARES, self.center)
        # The radius grid's top depends on χ, χ on θ, and θ (by default) on the
        # grid's size: iterate to the fixed point, on public values only.
        size = None
        for _ in range(20):
            expected = self.expected_trials
            if expected == "auto":
                expected = 2 * iters.size * (size or 8)
            theta = 1.0 / expected
            rho = calibrate_selection(self.epsilon, self.delta, theta, shares)
            # one trial's T iterations at Δ = χ√T cost λ·3/χ² (μ² = 6/Δ² each)
            chi = math.sqrt(3.0 / (shares["power"] * rho))
            radii = self._radius_grid(n_samples, k, chi, iters)
            if radii.size == size:
                break
            size = radii.size
        # Gaussian releases: λ μ²/2 = λ w ρ, so μ = sqrt(2 w ρ).
        mus = {
            name: math.sqrt(2.0 * shares[name] * rho)
            for name in ("mean", "init", "count")
            if name in shares
        }
        curve = selection_rdp(rho, shares, theta)
        spent = (rdp_to_epsilon(curve, self.delta)[0], self.delta)
        extra = {
            "theta": theta,
            "radii": radii,
            "iters": iters,
            "chi": chi,
            # the noisy score (sensitivity √2/h, std √2ζ/h) costs λ/(2ζ²)
            "zeta": math.sqrt(1.0 / (2.0 * shares["score"] * rho)),
        }
        return PrivacyPlan(mus=mus, charge={"rdp": curve}, spent=spent, extra=extra)

    # ------------------------------------------------------------ release
    def _release(self, gram, rows, plan, rng, dtype):
        n, d = self.n_samples_, gram.shape[0]
        k = self.n_components or min(n, d)
        scale = rows.data_norm**2
        unit_gram = gram / scale  # Σ a aᵀ, rows in the unit ball
        # 1. Initialisation: PrivatePCA's release (sensitivity √2, unit units).
        sigma_init = math.sqrt(2.0) / plan.mus["init"]
        released = unit_gram + goe_noise(rng, d, sigma_init)
        eigvals, eigvecs = _eigh(released)
        order = np.argsort(eigvals)[::-1]
        eigvals, init = eigvals[order], eigvecs[:, order[:k]]
        self.init_components_ = init.T.astype(dtype)
        self.n_trials_, self.selection_score_ = 0, None

        if not self._automatic():
            radius, n_iter = float(self.clip_radius), int(self.n_iter)
            noise_scale = math.sqrt(6.0 * n_iter) / plan.mus["power"]
            floor = floor_level(noise_scale, k, n_iter, self.failure_prob)
            final, counts = self._iterate(
                rows, unit_gram, init, [radius], [n_iter], [noise_scale], [floor], rng
            )
            final, count = final[0], counts[0]
        else:
            final, radius, n_iter, count = self._select(
                rows, unit_gram, init, eigvals, sigma_init, k, plan.extra, rng
            )
        self.clip_radius_, self.n_iter_ = radius, n_iter
        if count is None:
            self.n_clipped_ = 0
        else:  # a count has sensitivity 1 under replacement
            noisy = count + rng.normal() / plan.mus["count"]
            self.n_clipped_ = max(0, int(round(noisy)))

        # Variances: the released initial matrix seen along the final span,
        # rotated to its principal axes there (post-processing only).
        inner = final.T @ released @ final
        values, rotation = np.linalg.eigh((inner + inner.T) / 2.0)
        _, total, noise_variance = self._spectrum(eigvals * scale)
        self._set_components(
            (final @ rotation).T, values * scale / (n - 1), total, noise_variance, dtype
        )

    def _iterate(self, rows, unit_gram, start, radii, iters, noise, floors, rng):
        """Run trials of the noisy power method in lock-step, one pass per step.

        Trial ``j`` runs ``iters[j]`` iterations with radius ``radii[j]``,
        noise ``Δ_j = noise[j]`` and floor ``floors[j]``, from ``start``.
        Returns the final iterates and each trial's count of clipped rows in
        its last iteration (exact: released only with noise).
        """
        d, k = start.shape
        iterates = [start] * len(radii)
        counts = [None] * len(radii)
        for step in range(max(iters)):
            active = [j for j, t in enumerate(iters) if t > step]
            products = np.empty((d, len(active), k))
            for pos, j in enumerate(active):
                X = iterates[j]
                # H has sensitivity √2 (ALGORITHMS.md §3), μ = √2/Δ
                H = X.T @ unit_gram @ X + goe_noise(rng, k, noise[j])
                products[:, pos] = X @ preconditioner(H, floors[j])
            sums, clipped = rows.clipped_products(
                products, np.asarray(radii)[active], self.n_jobs
            )
            for pos, j in enumerate(active):
                # Σ a Clip_R(aᵀXB) has sensitivity 2R, noise ΔR: μ = 2/Δ
                Z = sums[:, pos] + dense_noise(rng, (d, k), noise[j] * radii[j])
                iterates[j] = np.linalg.qr(Z)[0]
                counts[j] = int(clipped[pos])
            if self.verbose > 1:
                print(f"[CoherentPowerPCA] iteration {step + 1}: "
                      f"{len(active)} trial(s) running", file=sys.stderr)
        return iterates, counts

    def _select(self, rows, unit_gram, init, eigvals, sigma_init, k, extra, rng):
        """Private choice of ``(R, T)`` (seed 000, Section C)."""
        d = init.shape[0]
        radii, iters = extra["radii"], extra["iters"]
        if k >= d:
            return init, None, 0, None
        margin = sigma_init * (
            2.0 * math.sqrt(d) + math.sqrt(2.0 * math.log(8.0 / self.failure_prob))
        )
        low, high = eigvals[k] + margin, eigvals[k - 1] - margin
        gap = high - low
        if gap <= 0:  # no gap in the noisy spectrum: return the initialisation
            if self.verbose:
                print("[CoherentPowerPCA] no eigenvalue gap after the "
                      "initialisation: returning it", file=sys.stderr)
            return init, None, 0, None
        # f_{a,b}(Σ a aᵀ): a clipped linear ramp of the exact eigenvalues; the
        # score only needs its non-zero part (low rank).
        values, vectors = np.linalg.eigh(unit_gram)
        ramp = np.clip((values - low) / gap, 0.0, 1.0)
        keep = ramp > 0
        weighted = vectors[:, keep] * ramp[keep]

        n_trials = int(rng.geometric(extra["theta"]))
        choice_r = rng.integers(radii.size, size=n_trials)
        choice_t = rng.integers(iters.size, size=n_trials)
        trial_radii = radii[choice_r]
        trial_iters = iters[choice_t]
        noise = extra["chi"] * np.sqrt(trial_iters)
        floors = [
            floor_level(noise[j], k, trial_iters[j], self.failure_prob)
            for j in range(n_trials)
        ]
        finals, counts = [], []
        batch = 256  # trials per lock-step batch: bounds the d × (batch·k) products
        for first in range(0, n_trials, batch):
            part = slice(first, first + batch)
            f, c = self._iterate(
                rows, unit_gram, init, trial_radii[part], trial_iters[part],
                noise[part], floors[part], rng,
            )
            finals += f
            counts += c
        scores = np.empty(n_trials)
        best = 0
        for j, X in enumerate(finals):
            residual = weighted - X @ (X.T @ weighted)
            exact = np.linalg.norm(residual, 2) if residual.size else 0.0
            # s_{a,b} has sensitivity √2/h; noise std √2ζ/h: μ = 1/ζ
            scores[j] = exact + math.sqrt(2.0) * extra["zeta"] / gap * rng.normal()
            if scores[j] < scores[best]:
                best = j
            if self.verbose:
                print(f"[CoherentPowerPCA] trial {j + 1}/{n_trials}: "
                      f"R={trial_radii[j]:.4g} T={trial_iters[j]} noisy score="
                      f"{scores[j]:.4f} best={scores[best]:.4f}", file=sys.stderr)
        self.n_trials_ = n_trials
        self.selection_score_ = float(scores[best])
        radius, n_iter = float(trial_radii[best]), int(trial_iters[best])
        return finals[best], radius, n_iter, counts[best]
