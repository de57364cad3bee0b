"""CoherentPowerPCA: the preconditioned, clipped, coherence-adaptive power method."""

import functools
import math
import sys
from numbers import Integral, Real

import numpy as np
from joblib import effective_n_jobs
from sklearn.utils._param_validation import Interval, StrOptions

from ._base import PrivacyPlan, _BasePrivatePCA, budget_shares, top_with_rest
from ._coherent_random import random_plan, release_random
from ._coherent_repetition import repetition_plan, select_repetition
from ._coherent_rules import (  # noqa: F401 (decision_sensitivity, projection_gap: tests)
    DECISION_PART,
    ENERGY_RATIO,
    FIXED_SHARES,
    GAIN_MAX,
    GDP_ITERATIONS,
    GDP_SHARES,
    KAPPA_MAX,
    MIN_CLIP_RADIUS,
    RANDOM_SHARES,
    REPETITION_ARRAYS,
    WARM_START,
    WIDE_FALLBACK_PASSES,
    WIDE_OVERSAMPLES,
    WIDE_PASSES,
    covariance_init_mu,
    decision_sensitivity,
    dense_matrices,
    floor_level,
    preconditioner,
    predicted_errors,
    projection_gap,
    random_start_wins,
    repetition_batch,
    repetition_side,
    warm_start_estimate,
)
from ._param_docs import N_JOBS_CONSTRAINT, fill_parameter_docs
from ._paths import auto_solver
from ._private_pca import noisy_power, noisy_power_spectrum
from ._releases import ENERGY, GRAM, PRODUCTS, TRACE, Release
from ._rows import scatter_products, scatter_quadratic
from ._spectrum import _eigh
from .noise import add_goe_noise, dense_noise, goe_noise, noise_scale
from .privacy import gdp_epsilon, gdp_mu


def _quadratic(unit_gram):
    r""":math:`X \mapsto X^\top M X` from the exact :math:`M` (the dense
    path)."""
    return lambda X: X.T @ unit_gram @ X


@fill_parameter_docs
class CoherentPowerPCA(_BasePrivatePCA):
    r"""Private PCA by a preconditioned, clipped, noisy power method.

    A private rank-k power method that adapts to the coherence of the data
    (the coherence-adaptive power-method paper, its Algorithms 1–3; see
    References), with this package's tighter sensitivities and exact
    accounting. Every fit first releases the covariance matrix as
    :class:`PrivatePCA` does and takes its top-k eigenvectors; a few noisy
    power iterations, in which each row's contribution is clipped, then
    refine them. On incoherent data, where no row weighs much in the top
    components, the iterations can beat the one-shot release; elsewhere the
    default falls back to within about 2% of :class:`PrivatePCA`.

    By default (``selection="gdp"``) every decision of the fit — whether to
    iterate, and which result to release — is taken from values it has
    already released, so the whole fit is ``(epsilon, delta)``-differentially
    private under the replacement of one row, composed exactly and charged
    once. ``selection="repetition"`` is the paper's own private choice of the
    clipping radius and the number of iterations, by random repetitions in
    Rényi DP: much slower, and measured weaker (:ref:`benchmarks-coherent`).
    Fixed ``clip_radius`` and ``n_iter`` run that many iterations.

    The mechanism and its proof are in :ref:`privacy-estimators`; the
    automatic mode, step by step, in :doc:`/coherent`.

    Parameters
    ----------
    n_components : int or None, default=None
        Number of components :math:`k`; ``None`` means ``min(n_samples,
        n_features)``. A fraction, ``0`` and ``'mle'`` are not supported: the
        iterations and their budget are planned for a fixed :math:`k` before any
        spectrum is released.
    epsilon : float, default=1.0
        Privacy parameter :math:`\varepsilon > 0` of the whole fit, finite
        (the non-private baseline is ``PrivatePCA(epsilon=float("inf"))``).
    delta : float, default=1e-6
        Privacy parameter :math:`\delta` in (0, 1).
    %(norm_bound_parameters)s
        With ``selection="repetition"``, ``data_norm="auto"`` is refused: that
        plan is charged in Rényi DP and the bound's share could not compose
        exactly.
    center : bool, default=True
        Centre the data on a private mean.
    %(whiten_parameter)s
    %(non_finite_parameter)s
    copy, svd_solver
        scikit-learn :class:`~sklearn.decomposition.PCA`'s parameters, with
        its defaults and validation, accepted so that a ``PCA(...)`` call runs
        unchanged; a non-default value has no effect (this method runs its
        own noisy power iterations and never modifies ``X``) and raises a
        ``UserWarning`` at fit. PCA's ``tol``, ``iterated_power``,
        ``n_oversamples`` and ``power_iteration_normalizer`` are not accepted:
        here the iterations are ``n_iter`` and ``n_iter_max``.
    clip_radius : float or "auto", default="auto"
        The radius :math:`R` each row's contribution to a power iteration
        is clipped to, in unit-ball units (where that contribution has a
        norm about the row's leverage :math:`\lVert U_i \rVert`), at least
        ``1e-100`` (below, the noise, proportional to :math:`R`, would
        underflow: refused before the charge). ``"auto"``:
        :math:`\sqrt{k/n}` with ``selection="gdp"``, chosen from a grid
        with ``"repetition"``.
    n_iter : int or "auto", default="auto"
        The number of power iterations :math:`T`; ``"auto"``: 2 with
        ``selection="gdp"``, chosen from a grid with ``"repetition"``.
    selection : {"gdp", "repetition"}, default="gdp"
        How an automatic fit (``clip_radius`` or ``n_iter`` ``"auto"``)
        proceeds: the exact-GDP branch rule (:doc:`/coherent`), or the
        paper's random repetitions. Ignored when both are fixed, and with
        ``start="random"``.
    start : {"auto", "covariance", "random"}, default="auto"
        Where the power iterations start. ``"covariance"``: from the
        released covariance (:class:`PrivatePCA`'s release), as above.
        ``"random"``: from a random orthonormal basis, with no covariance
        release and no :math:`d \times d` matrix: ``n_iter`` iterations
        (``"auto"``: 8, or 16 from :math:`n \ge 50 d`) at :math:`R`
        (``"auto"``: :math:`\sqrt{k/n}`), no preconditioner, then
        :math:`X^\top M X` and the trace for the variances; ``selection``
        and ``path`` do not apply (``path="dense"`` is refused).
        ``"auto"``: ``"random"`` for an automatic fit (``path="auto"``,
        ``selection="gdp"``, ``clip_radius`` and ``n_iter`` ``"auto"``,
        NumPy, sparse or Dask input) whose covariance release would be noise
        by public values, :math:`2\sqrt{2}\, d^{3/2}/(\mu_{\mathrm{init}} n)
        \ge 3` with :math:`d \ge 100` (:ref:`which start
        <coherent-which-start>`), unless its noisy power path exceeds
        ``memory_limit`` where the dense path fits; ``"covariance"``
        otherwise.
    n_iter_max : int, default=32
        ``selection="repetition"`` only: cap of the grid of :math:`T` (the
        paper's :math:`T_{\max}` is impractically large). Every trial costs the same
        budget whatever its :math:`T`; a larger cap costs time, not privacy.
        (Not named ``max_iter``: it caps a public grid, not a loop run to
        convergence, and ``n_iter_`` may be 0; see ``n_iter_``.)
    expected_trials : int or "auto", default="auto"
        ``selection="repetition"`` only: mean :math:`1/\theta` of the
        geometric number of trials; ``"auto"`` is twice the number of grid
        points (at the fixed point of the plan's iteration; where the grid's
        size alternates, that of the last pass).
    failure_prob : float, default=0.1
        The :math:`\beta` of the floor :math:`\gamma` on the preconditioner's
        eigenvalues (and of the repetition score's margin).
    n_jobs : int or None, default=None
        Threads for the passes over the rows (scikit-learn's meaning).
    verbose : int, default=0
        Print progress to standard error: only public values (the stage of
        the fit, passes over the data) and, at the end, what was released
        (the branch, :math:`R`, :math:`T`). Never a trial count or a score.
    path : {"auto", "dense", "noisy_power"}, default="auto"
        ``"dense"``: the initialisation (and the fallback) release the
        :math:`d \times d` covariance, as described above. ``"noisy_power"``: no
        :math:`d \times d` matrix — the initialisation is the noisy power method's
        release (:class:`PrivatePCA`'s ``path="noisy_power"``), each
        iteration's preconditioner comes from a released :math:`k \times k` matrix,
        and the fallback continues the noisy power method; memory
        :math:`O(dk)` and each pass :math:`O(\mathrm{nnz} \cdot k)`
        (:ref:`without a d × d matrix <privacy-coherent-wide>`). Its
        initialisation is weaker than the dense one where the noise is near
        the spectrum's gaps (the power iterations then recover most of it;
        the default's rule, tuned on the dense path, then mostly falls
        back): ``"auto"`` takes it only where the dense matrices exceed
        ``memory_limit``, and ``"dense"`` wherever the other cannot run
        (``selection="repetition"``, ``n_components + 10 >= n_features``,
        Array API input). The path taken is ``path_``.
    %(memory_parameter)s
    random_state : None, int, RandomState or Generator, default=None
        Source of the noise; any fixed seed makes the fit not private (warned).
    accountant : BudgetAccountant or None, default=None
        Budget charged before every fit; shared, not copied, by ``clone``.

    Attributes
    ----------
    components_ : ndarray of shape (n_components_, n_features)
        The released basis, rotated to the principal axes of the released
        covariance within its span.
    noisy_variance_ : ndarray of shape (n_components_,)
        Variance of the released covariance (the first release
        :math:`\hat M`; the precision-weighted pair in the fallback) along
        each component, over ``n_samples - 1`` (not clamped).
    explained_variance_, captured_variance_ : ndarray of shape (n_components_,)
        As in PrivatePCA, by rank, from the released covariance's eigenvalues
        and noise scale (no separate trace is released: the total comes from
        that matrix's trace). ``captured_variance_`` is the variance along
        that matrix's own eigenvectors: for the power branch's components,
        which are better, it is conservative.
    explained_variance_ratio_, singular_values_, noise_variance_ : as in PrivatePCA
        From the released covariance's estimated spectrum.
    total_variance_ : float
        As in PrivatePCA, from the released covariance's trace.
    init_components_ : ndarray of shape (n_components_, n_features)
        The initialisation :math:`X^{(0)}` (top-k eigenvectors of the first
        release); not set when the random start ran (``branch_`` is
        ``"random"``): that start is not released.
    branch_ : str
        What was released: ``"power"`` (the power iterate), ``"init"`` (the
        initialisation: the go/no-go or, in the repetition mode, a noisy
        spectrum without a gap returned it), ``"fallback"`` (the averaged
        covariance releases; ``selection="gdp"``), ``"fixed"`` (fixed
        ``clip_radius`` and ``n_iter``), ``"repetition"`` (the best trial)
        or ``"random"`` (the random start).
    clip_radius_ : float or None
        Radius of the released iterate; ``None`` when no iteration's output
        was released (``branch_`` "init" or "fallback").
    n_iter_ : int
        Iterations behind the released components: 0 when the initialisation
        or the fallback was released.
    n_clipped_ : int or None
        With fixed :math:`(R, T)`: rows whose product was clipped in the last
        iteration, released with Gaussian noise (1% of the budget,
        sensitivity 1) and rounded; the exact count is never stored. ``None``
        (not released) in the automatic modes.
    path_ : str
        The path the fit took, ``"dense"`` or ``"noisy_power"``.
    mean_, n_components_, n_samples_, data_norm_, privacy_spent_ : as in PrivatePCA
    mean_norm_, clipped_fraction_, n_resolved_ : as in PrivatePCA
    n_features_in_, feature_names_in_ : as in PrivatePCA

    See Also
    --------
    PrivatePCA : The one-shot covariance mechanism, also the initialisation.

    References
    ----------
    Coherence-adaptive private rank-k PCA by a preconditioned, clipped block
    power method (Algorithms 1–3; the private choice of the clipping radius
    and the iteration count, Section C). It extends the coherence-adaptive
    guarantee of Nguyen et al. (2026) from the top singular vector to the
    top-k subspace.

    N. Papernot, T. Steinke. "Hyperparameter tuning with Rényi differential
    privacy." ICLR 2022.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca import CoherentPowerPCA
    >>> rng = np.random.default_rng(0)
    >>> ranges = np.array([3.0, 2.0, 1.0, 0.3, 0.3, 0.3, 0.3, 0.3])  # public
    >>> X = rng.uniform(-1, 1, size=(5000, 8)) * ranges
    >>> C = float(np.linalg.norm(ranges))  # from the ranges, not the rows
    >>> pca = CoherentPowerPCA(2, epsilon=2.0, data_norm=C, clip_radius=1.0,
    ...                        n_iter=4).fit(X)
    >>> pca.components_.shape, pca.n_iter_, pca.branch_
    ((2, 8), 4, 'fixed')
    """

    _parameter_constraints: dict = {
        # not scikit-learn PCA's randomized-solver parameters: it has none
        # of them (review 107 F1: scikit-learn's check_param_validation)
        **{key: value for key, value in _BasePrivatePCA._parameter_constraints.items()
           if key not in ("tol", "iterated_power", "n_oversamples",
                          "power_iteration_normalizer")},
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        # finite only: the floor γ and the private selection need noise, so
        # there is no non-private CoherentPowerPCA (PrivatePCA(epsilon=inf) is
        # the baseline)
        "epsilon": [Interval(Real, 0, math.inf, closed="neither")],
        "clip_radius": [
            Interval(Real, 0, None, closed="neither"),
            StrOptions({"auto"}),
        ],
        "n_iter": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "selection": [StrOptions({"gdp", "repetition"})],
        "start": [StrOptions({"auto", "covariance", "random"})],
        "n_iter_max": [Interval(Integral, 1, None, closed="left")],
        "expected_trials": [
            Interval(Integral, 1, None, closed="left"),
            StrOptions({"auto"}),
        ],
        "failure_prob": [Interval(Real, 0, 1, closed="neither")],
        "n_jobs": N_JOBS_CONSTRAINT,
        "verbose": ["verbose"],
        "path": [StrOptions({"auto", "dense", "noisy_power"})],
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
        norm_quantile="auto",
        center=True,
        whiten=False,
        non_finite="raise",
        copy=True,
        svd_solver="auto",
        clip_radius="auto",
        n_iter="auto",
        selection="gdp",
        start="auto",
        n_iter_max=32,
        expected_trials="auto",
        failure_prob=0.1,
        n_jobs=None,
        verbose=0,
        path="auto",
        memory_limit="auto",
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
        self.non_finite = non_finite
        self.copy = copy
        self.svd_solver = svd_solver
        self.clip_radius = clip_radius
        self.n_iter = n_iter
        self.selection = selection
        self.start = start
        self.n_iter_max = n_iter_max
        self.expected_trials = expected_trials
        self.failure_prob = failure_prob
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.path = path
        self.memory_limit = memory_limit
        self.random_state = random_state
        self.accountant = accountant

    @property
    def _pilot_centring(self):
        # The dense path's first release is of the Gram matrix: on many rows
        # it is centred in one pass around the first rows' centre (docs/
        # privacy.rst §5), Σ y yᵀ minus the released n ȳ ȳᵀ. Every statistic
        # taken from it (the initialisation, H, the go/no-go's traces) then
        # differs between neighbours only through Σ y yᵀ, as the analysis
        # assumes; the later passes clip around the released mean.
        return getattr(self, "_fit_path", "dense") == "dense"

    # ------------------------------------------------------------ path
    def _wide_obstacle(self, n_samples, n_features, engine):
        """Why the noisy power path cannot run this fit, or None."""
        if self._mode() == "repetition":
            return ("needs selection='gdp' or a fixed clip_radius and n_iter "
                    "(the repetitions' score eigendecomposes the d × d Gram "
                    "matrix)")
        return self._blocks_obstacle(engine, (n_samples, n_features))

    def _check_n_components(self, n_samples, n_features, width_known=True):
        """scikit-learn's checks, and the iterations that would buy nothing
        refused where the width is known before the charge: a single fit,
        and a search's plan for each candidate whose steps before it leave
        the width public (after other steps the plan passes the rows for it,
        ``width_known`` false)."""
        super()._check_n_components(n_samples, n_features)
        k = self.n_components or min(n_samples, n_features)
        fixed = self.clip_radius != "auto" and self.n_iter != "auto"
        # a search's candidate after steps of unknown width: fitted, not
        # refused after the search's charge
        width_known &= not getattr(self, "_width_after_charge", False)
        if width_known and k >= n_features and (self.start == "random" or fixed):
            # public: the iterations' QR keeps every direction, so their
            # share of the charge would buy nothing (review 57: the random
            # start's components come from 5% of it)
            what = ("start='random'" if self.start == "random"
                    else f"clip_radius={self.clip_radius!r} and n_iter={self.n_iter!r}")
            raise ValueError(
                f"{what} with n_components={k} >= n_features={n_features}: "
                "every direction is kept, so the power iterations would buy "
                "nothing with their share of the budget. Use the default "
                "(clip_radius='auto', n_iter='auto', start='auto'), which spends "
                "it on the covariance release, or fewer components.")

    def _automatic(self):
        return (self.selection == "gdp" and self.clip_radius == "auto"
                and self.n_iter == "auto")

    def _start(self, n_samples, n_features, engine):
        """``start`` with ``"auto"`` resolved (public values only: the
        shape, the parameters, the kind of input, the memory limit). The
        random start runs the noisy power path: where its blocks do not fit
        in ``memory_limit`` and the covariance start's dense matrices do,
        the covariance start (review 71: ``"auto"`` was refused where
        ``path="dense"`` ran)."""
        if self.start != "auto":
            return self.start
        k = self.n_components or min(n_samples, n_features)
        if (not self._automatic() or k >= n_features
                or self.path != "auto" or not math.isfinite(self.epsilon)
                or self._blocks_obstacle(engine) is not None):
            return "covariance"
        mu_init = covariance_init_mu(self.epsilon, self.delta, self.center)
        if not random_start_wins(n_samples, n_features, mu_init):
            return "covariance"
        path = self._first_fitting(n_samples, n_features, ["noisy_power", "dense"])
        return "random" if path == "noisy_power" else "covariance"

    def _path(self, n_samples, n_features, engine):
        """``"dense"`` or ``"noisy_power"``, from public values only (the
        shape, the parameters, the kind of input, the memory limit); the
        start resolved first."""
        self._fit_start = self._start(n_samples, n_features, engine)
        if self._mode() == "random":  # passes of d × k products only
            obstacle = self._blocks_obstacle(engine) or (
                "does not form a d × d matrix: path='dense'"
                if self.path == "dense" else None)
            if obstacle is not None:
                raise ValueError(f"start='random' {obstacle}.")
            return "noisy_power"
        obstacle = self._wide_obstacle(n_samples, n_features, engine)
        if self.path == "noisy_power":
            if obstacle is not None:
                raise ValueError(f"path='noisy_power' {obstacle}.")
            return "noisy_power"
        if self.path == "dense" or obstacle is not None:
            return "dense"
        return "dense" if self._dense_fits(n_samples, n_features) else "noisy_power"

    _oversampling = str(WIDE_OVERSAMPLES)  # no n_oversamples parameter here

    def _arrays_needed(self, n_samples, d, path):
        """The base's arrays, and with ``selection="repetition"`` a batch of
        trials' iterates, products and sums (:func:`repetition_batch`)."""
        return super()._arrays_needed(n_samples, d, path) + self._trials_bytes(
            n_samples, d)

    def _dense_release(self, n, d):  # what each mode holds
        return dense_matrices(self._mode(), n, d, self.n_components, self._jobs(n, d))

    def _trials_bytes(self, n_samples, d):
        if self.selection != "repetition" or self._mode() != "repetition":
            return 0
        k = self.n_components or min(n_samples, d)
        side = repetition_side(n_samples, d)
        return REPETITION_ARRAYS * 8 * side * k * repetition_batch(n_samples, d, k)

    def _memory_beside(self, n_samples, n_features):
        trials = self._trials_bytes(n_samples, n_features)
        return (f" and a batch of its repetitions' iterates ({trials / 2**30:.3g} "
                "GiB)") if trials else ""

    def _block_columns(self, n_samples, n_features):
        """:math:`p = k + 10` (no ``n_oversamples`` parameter here)."""
        return (self.n_components or min(n_samples, n_features)) + WIDE_OVERSAMPLES

    # ------------------------------------------------------------ privacy
    def _mode(self):
        """``"random"``, ``"fixed"``, ``"gdp"`` or ``"repetition"`` (public:
        parameters only)."""
        # "auto" as this fit's _path resolved it; never stale for repetitions
        if self.start == "random" or (self.start == "auto" and self._automatic()
                                      and getattr(self, "_fit_start", "") == "random"):
            return "random"
        if self.clip_radius != "auto" and self.n_iter != "auto":
            return "fixed"
        return self.selection

    def _hidden_passes(self):
        if self._mode() == "repetition":  # public: parameters only
            return ("random repetitions of the power method; how many passes "
                    "they take is not reported (it would tell the number of "
                    "trials)")
        return None

    def _say(self, level, message):
        """Progress line; callers pass only public or released values."""
        if self.verbose >= level:
            print(f"[CoherentPowerPCA] {message}", file=sys.stderr)

    def _budget_shares(self):
        r"""Shares of :math:`\mu_*^2` of the exact-GDP modes (fixed, or
        ``selection="gdp"``)."""
        mode = self._mode()
        if mode == "random":
            return budget_shares(RANDOM_SHARES, self.center)
        if mode == "gdp":
            return budget_shares(GDP_SHARES, self.center)
        return budget_shares(FIXED_SHARES, self.center)

    def _privacy_plan(self, n_samples, n_features):
        if self.clip_radius != "auto" and float(self.clip_radius) < MIN_CLIP_RADIUS:
            # the power step's noise Δ·R (sensitivity 2R) would underflow
            raise ValueError(
                f"clip_radius={self.clip_radius!r} is below {MIN_CLIP_RADIUS:.0e}: "
                "the power step's noise, proportional to it, would not be a "
                "normal number (the release would be exact). Rows are in the "
                "unit ball: use a radius near sqrt(n_components / n_samples), "
                "or 'auto'."
            )
        mode = self._mode()
        if mode == "fixed":  # exact GDP composition, as in the base
            return super()._privacy_plan(n_samples, n_features)
        k = self.n_components or min(n_samples, n_features)
        if mode == "random":
            plan = super()._privacy_plan(n_samples, n_features)  # RANDOM_SHARES
            return random_plan(self, plan, n_samples, n_features, k)
        if mode == "gdp":
            return self._gdp_plan(n_samples, k, tested=k < n_features)
        if k >= n_features:  # public: nothing to select, nothing to charge for
            raise ValueError(
                f"selection='repetition' chooses the clipping radius and the "
                f"iterations of a {k}-dimensional subspace of {n_features} "
                "features: with n_components >= n_features every direction is "
                "kept and no trial would run, while the selection's whole cost "
                "would be charged. Use selection='gdp' (or fewer components)."
            )
        return repetition_plan(self, n_samples, k)

    def _gdp_plan(self, n_samples, k, tested=True):
        r""":math:`\mu` of every release of ``selection="gdp"``; the charge is
        :math:`\mu_*`.

        Either branch spends :math:`w_{\mathrm{branch}} \mu_*^2`: the power
        branch's :math:`T` iterations
        :math:`(1 - p)\, w_{\mathrm{branch}} \mu_*^2` (:math:`p` =
        ``DECISION_PART``) and its go/no-go the rest; the fallback all of it.
        The composition is exactly :math:`\mu_*` whichever branch the
        released values choose. Without a test (``tested`` false: ``k`` is
        ``d``, where the power branch cannot run) its share goes to the
        fallback, so that the fit still spends what it is charged.
        """
        mu_total = gdp_mu(self.epsilon, self.delta)
        shares = self._budget_shares()
        n_iter = GDP_ITERATIONS if self.n_iter == "auto" else int(self.n_iter)
        test = shares["test"] if tested else 0.0
        branch = (shares["branch"] + shares["test"] - test) * mu_total**2
        mus = {name: mu_total * math.sqrt(shares[name])
               for name in ("mean", "init") if name in shares}
        mus["test"] = mu_total * math.sqrt(shares["test"] / 2.0)  # each of two
        mus["step"] = math.sqrt(branch * (1.0 - DECISION_PART) / n_iter)
        mus["decision"] = math.sqrt(branch * DECISION_PART)
        mus["fallback"] = math.sqrt(branch)
        composed = math.sqrt(sum(mus[name] ** 2 for name in ("mean", "init")
                                 if name in mus) + test * mu_total**2 + branch)
        radius = (math.sqrt(k / n_samples) if self.clip_radius == "auto"
                  else float(self.clip_radius))
        extra = {"n_iter": n_iter, "radius": radius, "mu_total": mu_total}
        spent = (gdp_epsilon(composed, self.delta), self.delta)
        return PrivacyPlan(mus=mus, charge={"mu": mu_total}, spent=spent, extra=extra)

    def _own_releases(self, plan, n_samples, n_features):
        # the initialisation: PrivatePCA's release of the Gram matrix, or on
        # the noisy power path WIDE_PASSES of the noisy power method's
        wide, mus, mode = self._fit_path == "noisy_power", plan.mus, self._mode()
        if mode == "random":
            n_iter = plan.extra["n_iter"]
            return [Release("step", mus["step"], PRODUCTS, draws=n_iter),
                    Release("variance", mus["variance"], TRACE, draws=2)]
        own = [Release("init", mus["init"], PRODUCTS if wide else GRAM,
                       draws=WIDE_PASSES if wide else 1)]
        if mode == "repetition":  # the trials' number stays secret
            return own + [Release("trials", None, PRODUCTS, draws=None)]
        n_iter = plan.extra["n_iter"] if mode == "gdp" else int(self.n_iter)
        if mode == "fixed":
            return own + [Release("power", mus["power"], PRODUCTS, draws=n_iter),
                          Release("count", mus["count"], PRODUCTS)]
        fallback = Release("fallback", mus["fallback"], PRODUCTS if wide else GRAM,
                           draws=WIDE_FALLBACK_PASSES if wide else 1)
        if (self.n_components or min(n_samples, n_features)) == n_features:
            return own + [fallback]  # no test: the power branch cannot run
        return own + [
            Release("test", mus["test"] * math.sqrt(2.0), ENERGY, draws=2),
            Release("step", mus["step"] * math.sqrt(n_iter), PRODUCTS,
                    draws=n_iter, branch="power"),
            Release("decision", mus["decision"], PRODUCTS if wide else GRAM,
                    draws=2 if wide else 1, branch="power"),
            fallback._replace(branch="fallback")]

    # ------------------------------------------------------------ release
    def _release(self, gram, rows, plan, rng, dtype):
        if self._mode() == "random":
            return release_random(self, rows, plan, rng, dtype)
        if self._fit_path == "noisy_power":
            return self._release_wide(rows, plan, rng, dtype)
        n, d = self.n_samples_, gram.shape[0]
        k = self.n_components or min(n, d)
        scale = rows.data_norm**2
        unit_gram = gram  # Σ a aᵀ, rows in the unit ball (in place: the
        unit_gram /= scale  # fit has no further use for the Gram matrix)
        # 1. Initialisation: PrivatePCA's release (sensitivity √2, unit units),
        # its noise added in place to a copy (no d × d noise array)
        sigma_init = math.sqrt(2.0) / plan.mus["init"]
        released = add_goe_noise(rng, unit_gram.copy(), sigma_init)
        eigvals, eigvecs, rest = self._eigenpairs(released, k, rng, sigma_init)
        init = eigvecs[:, :k]
        self.init_components_ = init.T.astype(dtype)
        self._say(1, "initialisation released")
        self.n_clipped_ = None

        mode = self._mode()
        if mode == "fixed":
            radius, n_iter = float(self.clip_radius), int(self.n_iter)
            noise_scale = math.sqrt(6.0 * n_iter) / plan.mus["power"]
            floor = floor_level(noise_scale, k, n_iter, self.failure_prob)
            final, counts = self._iterate(
                rows, _quadratic(unit_gram), init, [radius], [n_iter], [noise_scale],
                [floor], rng)
            final, branch = final[0], "fixed"
            # a count has sensitivity 1 under replacement
            noisy = counts[0] + rng.normal() / plan.mus["count"]
            self.n_clipped_ = max(0, int(round(noisy)))
        elif mode == "gdp":
            final, released, (eigvals, rest), branch, radius, n_iter = (
                self._gdp_branch(rows, unit_gram, released, eigvals, rest, init,
                                 sigma_init, k, plan, rng))
        else:
            final, radius, n_iter = select_repetition(
                self, rows, unit_gram, _quadratic(unit_gram), init, eigvals,
                sigma_init, k, plan.extra, rng)
            branch = "repetition" if n_iter else "init"
        self.branch_, self.clip_radius_, self.n_iter_ = branch, radius, n_iter
        self._say(1, f"released: {branch}" + (
            "" if radius is None else f" (R={radius:.4g}, T={n_iter})"))

        # Variances: the released covariance seen along the final span,
        # rotated to its principal axes there (post-processing only); the
        # spectrum estimated from that release's eigenvalues and noise scale
        # (the fallback's combined release has μ² = μ_init² + μ_fallback²).
        inner = final.T @ released @ final
        values, rotation = np.linalg.eigh((inner + inner.T) / 2.0)
        sigma = sigma_init
        if branch == "fallback":
            sigma = math.sqrt(2.0) / math.hypot(plan.mus["init"], plan.mus["fallback"])
        if rest is not None:  # the other eigenvalues' count, sum, squares, unit
            rest = (*rest[:3], rest[3] * scale)
        spectrum = self._spectrum(eigvals * scale, sigma * scale, rest=rest)
        self._set_components(
            (final @ rotation).T, values * scale / (n - 1), spectrum, dtype
        )

    def _eigenpairs(self, matrix, k, rng, sigma):
        r"""Eigenpairs of a released :math:`d \times d` matrix (a positive
        semidefinite scatter plus the GOE kernel of ``sigma``), by decreasing
        value.

        Every one, or, where scikit-learn's ``PCA`` would take its randomized
        solver on this public shape (:func:`auto_solver`), the top
        :math:`k + 1` by PrivatePCA's solver (the filtered subspace
        iteration, its floor from ``sigma``: :func:`top_eigenpairs`) and the
        others' count, sum and sum of squares from :math:`\operatorname{tr}\hat{M}`
        and :math:`\|\hat{M}\|_F^2`. The branch rule reads the top
        :math:`k + 1` only, the spectrum the rest. Post-processing of the
        release; the solver's start is drawn from ``rng`` after its noise.

        Returns
        -------
        (values, vectors, rest)
            ``rest`` is ``None`` when every eigenpair was computed.
        """
        n, d = self.n_samples_, matrix.shape[0]
        if k + 1 < d and auto_solver(n, d, self.n_components) == "randomized":
            return top_with_rest(matrix, k + 1, "randomized", rng, unit=sigma or None,
                                 floor=self._spectrum_floor(sigma, d))
        values, vectors = _eigh(matrix)
        order = np.argsort(values)[::-1]
        return values[order], vectors[:, order], None

    def _power_rule(self, rows, init, eigvals, sigma, noise_norm, step_noise,
                    floor, plan, rng, first_step=None):
        r"""Whether ``selection="gdp"`` runs the power branch: the clipping
        test's two releases (:math:`q(R)`, sensitivity :math:`R^2`: noise
        :math:`R^2/\mu_{\mathrm{test}}`), then the rule on them and on the
        initialisation's released eigenvalues ``eigvals`` (its noise
        ``sigma`` per entry, ``noise_norm`` in spectral norm), the power
        step's noise and the floor; public values otherwise
        (docs/coherent.rst).

        Returns ``(go, products)``. With ``first_step`` (the first power
        step's :math:`X B`, known before the test), ``products()`` gives that
        step's exact clipped products, from the test's pass where the engine
        reads the rows once for both (``energy_then_products``); they are
        released only if ``go``. Without, ``products`` is None."""
        n, d = self.n_samples_, init.shape[0]
        k = init.shape[1]
        mus, radius = plan.mus, plan.extra["radius"]
        s0 = warm_start_estimate(eigvals, k, noise_norm)
        kappa = k * max(float(eigvals[k - 1]), 0.0) * 2.0 * math.log(n * k) / n
        test_radii = np.array([2.0 * math.sqrt(k / n), floor**-0.5])
        W0 = init / np.sqrt(np.maximum(eigvals[:k], floor))
        products = None
        if first_step is None:
            energy = rows.clipped_energy(W0, test_radii)
        else:
            energy, products = rows.energy_then_products(
                W0, test_radii, first_step[:, None, :], [radius],
                effective_n_jobs(self.n_jobs))
        q = energy + [dense_noise(rng, (), r**2 / mus["test"]) for r in test_radii]
        power, fallback = predicted_errors(eigvals, k, sigma, step_noise, radius,
                                           mus, noise_norm=noise_norm, n_features=d)
        go = bool(q[0] >= ENERGY_RATIO * q[1] and s0 < WARM_START
                  and kappa <= KAPPA_MAX and power <= GAIN_MAX * fallback)
        return go, products

    def _gdp_branch(self, rows, unit_gram, released, eigvals, rest, init, sigma,
                    k, plan, rng):
        """Steps 1–3 of ``selection="gdp"``: the test, then one branch.

        Returns ``(X, covariance, (eigenvalues, rest), branch, R, T)``: the
        released basis, the released covariance it is described with (its
        eigenvalues as :meth:`_eigenpairs` gives them), and the public
        description of what ran.
        """
        d = unit_gram.shape[0]
        mus, extra = plan.mus, plan.extra
        radius, n_iter = extra["radius"], extra["n_iter"]
        floor = floor_level(sigma, k, n_iter, self.failure_prob)
        go, first = False, None
        if k < d:  # the first step's B from the released M̂: known before the test
            first_B = preconditioner(init.T @ released @ init, floor)
            go, first = self._power_rule(
                rows, init, eigvals, sigma, math.sqrt(2.0 * d) * sigma,
                2.0 / mus["step"], floor, plan, rng, first_step=init @ first_B)
        if not go:
            # Fallback: a second release of G, weighted with M̂ by precision
            # (σ² = 2/μ²): together one release of μ² = μ_init² + μ_fallback².
            combined = add_goe_noise(rng, unit_gram.copy(),
                                     math.sqrt(2.0) / mus["fallback"])
            w_init, w_fb = mus["init"] ** 2, mus["fallback"] ** 2
            # (w_init M̂ + w_fb M̂₂)/(w_init + w_fb), in place in M̂₂'s array
            combined *= w_fb / w_init
            combined += released
            combined *= w_init / (w_init + w_fb)
            # its kernel's variance: 2/(μ_init² + μ_fallback²)
            values, vectors, rest = self._eigenpairs(
                combined, k, rng, math.sqrt(2.0 / (w_init + w_fb)))
            return vectors[:, :k], combined, (values, rest), "fallback", None, 0
        # Power branch: Z = Σ a Clip_R(aᵀXB) + ΔR·G, sensitivity 2R, μ = 2/Δ;
        # B from the released Xᵀ M̂ X (no fresh release).
        noise = 2.0 / mus["step"]
        X = init
        for step in range(n_iter):
            if step:
                B = preconditioner(X.T @ released @ X, floor)
                sums, _ = rows.clipped_products((X @ B)[:, None, :], [radius],
                                                effective_n_jobs(self.n_jobs))
            else:  # the same products, from the test's pass where it made them
                sums, _ = first()
            X = np.linalg.qr(sums[:, 0] + dense_noise(rng, (d, k), noise * radius))[0]
            self._say(2, f"power iteration {step + 1} of {n_iter}")
        # Go/no-go: D = Σ a_iᵀ(P_T − P_0)a_i. Replacing a by b moves it by
        # aᵀMa − bᵀMb ∈ [λ_min(M) − λ_max(M), λ_max(M) − λ_min(M)], M = P_T − P_0,
        # ‖a‖, ‖b‖ ≤ 1: at most 2‖P_T − P_0‖₂, public given the released X,
        # plus the computed D's round-off (decision_sensitivity).
        sensitivity = decision_sensitivity(X, init, self.n_samples_)
        gain = np.trace(X.T @ unit_gram @ X) - np.trace(init.T @ unit_gram @ init)
        gain += dense_noise(rng, (), sensitivity / mus["decision"])
        if gain > 0:
            return X, released, (eigvals, rest), "power", radius, n_iter
        return init, released, (eigvals, rest), "init", None, 0

    def _release_wide(self, rows, plan, rng, dtype):
        r"""The noisy power path (docs/privacy.rst, "Without a d × d
        matrix"): no :math:`d \times d` matrix. Unit-ball units, as on the
        dense path.

        1. The initialisation: the noisy power method's ``WIDE_PASSES``
           releases at :math:`\mu_{\mathrm{init}}` (sensitivity
           :math:`\sqrt{2}` each, the trace with the last); :math:`X^{(0)}`
           its top :math:`k` left singular vectors.
        2. Fixed :math:`(R, T)`: :math:`T` iterations, each releasing
           :math:`H = X^\top M X` (GOE noise :math:`\Delta`, sensitivity
           :math:`\sqrt{2}`) for the preconditioner and :math:`Z` (noise
           :math:`\Delta R`, sensitivity :math:`2R`), then a last
           :math:`\hat{H}` along the result for its variances:
           :math:`(6T + 2)/\Delta^2 = \mu_{\mathrm{power}}^2`.
           ``selection="gdp"``: the dense path's released criteria on the
           initialisation's released values, then the power branch
           (:math:`T` iterations at
           :math:`6/\Delta^2 = \mu_{\mathrm{step}}^2` each, the go/no-go from
           :math:`\hat{H}` along the result and along :math:`X^{(0)}`, each
           at :math:`\mu_{\mathrm{decision}}/\sqrt{2}`) or the fallback
           (``WIDE_FALLBACK_PASSES`` more noisy power releases at
           :math:`\mu_{\mathrm{fallback}}`, from the initialisation's basis).
        """
        n, d = self.n_samples_, self.n_features_in_
        k = self.n_components or min(n, d)
        scale = rows.data_norm**2
        power = noisy_power(rows, d, self._block_columns(n, d), WIDE_PASSES,
                            plan.mus["init"], rng, n_jobs=self.n_jobs)
        init = power.basis[:, :k]
        self.init_components_ = init.T.astype(dtype)
        self._say(1, "initialisation released (noisy power method)")
        self.n_clipped_ = None
        quadratic = functools.partial(scatter_quadratic, rows)
        mode = self._mode()
        source, final, H = power, init, None  # H: a released k × k along final
        if mode == "fixed":
            radius, n_iter = float(self.clip_radius), int(self.n_iter)
            noise = math.sqrt(6.0 * n_iter + 2.0) / plan.mus["power"]
            floor = floor_level(noise, k, n_iter, self.failure_prob)
            finals, counts = self._iterate(rows, quadratic, init, [radius], [n_iter],
                                           [noise], [floor], rng)
            final, branch = finals[0], "fixed"
            self.n_clipped_ = max(0, int(round(counts[0] + rng.normal()
                                               / plan.mus["count"])))
            H = quadratic(final) + goe_noise(rng, k, noise)  # √2: μ = √2/Δ
        else:
            final, H, source, branch, radius, n_iter = self._gdp_branch_wide(
                rows, power, init, k, plan, rng, quadratic)
        self.branch_, self.clip_radius_, self.n_iter_ = branch, radius, n_iter
        self._say(1, f"released: {branch}" + (
            "" if radius is None else f" (R={radius:.4g}, T={n_iter})"))
        if H is None:  # the noisy power release's own components
            values, rotation = source.values[:k], np.eye(k)
        else:  # the released H along final, to its principal axes
            values, rotation = np.linalg.eigh((H + H.T) / 2.0)
        spectrum = noisy_power_spectrum(
            source.values[:k] * scale, source.trace * scale, min(n, d), n - 1,
            source.resolved(k, self._mean_spike()[1] / scale))
        self._set_components((final @ rotation).T, values * scale / (n - 1),
                             spectrum, dtype)

    def _gdp_branch_wide(self, rows, power, init, k, plan, rng, quadratic):
        """``selection="gdp"`` on the noisy power path: the released criteria
        of :meth:`_gdp_branch` on the initialisation's released values, then
        one branch. Returns ``(X, Ĥ or None, the release describing X's
        spectrum, branch, R, T)``."""
        d = self.n_features_in_
        mus, extra = plan.mus, plan.extra
        radius, n_iter = extra["radius"], extra["n_iter"]
        eigvals, sigma, edge = power.values, power.sigma, power.edge()
        noise = math.sqrt(6.0) / mus["step"]  # H (√2) and Z (2R): 6/Δ² each
        floor = floor_level(noise, k, n_iter, self.failure_prob)
        go, _ = self._power_rule(rows, init, eigvals, sigma, edge, noise, floor,
                                 plan, rng)
        if not go:
            more = noisy_power(rows, d, power.basis.shape[1], WIDE_FALLBACK_PASSES,
                               mus["fallback"], rng, start=power.basis,
                               n_jobs=self.n_jobs)
            return more.basis[:, :k], None, more, "fallback", None, 0
        X = self._iterate(rows, quadratic, init, [radius], [n_iter], [noise],
                          [floor], rng)[0][0]
        # Go/no-go: Ĥ along X and along X⁽⁰⁾ (sensitivity √2 each, at
        # μ_decision/√2): the released gain tr Ĥ_T − tr Ĥ_0
        sigma_h = noise_scale(math.sqrt(2.0), mus["decision"] / math.sqrt(2.0))
        both = scatter_products(rows, np.stack([X, init], axis=1))
        H_T = X.T @ both[:, 0] + goe_noise(rng, k, sigma_h)
        H_0 = init.T @ both[:, 1] + goe_noise(rng, k, sigma_h)
        if np.trace(H_T) > np.trace(H_0):
            return X, H_T, power, "power", radius, n_iter
        return init, H_0, power, "init", None, 0

    def _iterate(self, rows, quadratic, start, radii, iters, noise, floors, rng):
        r"""Run trials of the noisy power method in lock-step, one pass per
        step.

        Trial :math:`j` runs ``iters[j]`` iterations with radius
        ``radii[j]``, noise :math:`\Delta_j` = ``noise[j]`` and floor
        ``floors[j]``, from ``start``; ``quadratic(X)`` is the exact
        :math:`X^\top M X` (:math:`M` the unit-ball rows' scatter matrix),
        released here with GOE noise.
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
                # H has sensitivity √2 (docs/privacy.rst §3), μ = √2/Δ
                H = quadratic(X) + goe_noise(rng, k, noise[j])
                products[:, pos] = X @ preconditioner(H, floors[j])
            sums, clipped = rows.clipped_products(
                products, np.asarray(radii)[active], effective_n_jobs(self.n_jobs)
            )
            for pos, j in enumerate(active):
                # Σ a Clip_R(aᵀXB) has sensitivity 2R, noise ΔR: μ = 2/Δ
                Z = sums[:, pos] + dense_noise(rng, (d, k), noise[j] * radii[j])
                iterates[j] = np.linalg.qr(Z)[0]
                counts[j] = int(clipped[pos])
        return iterates, counts
