r"""CoherentPowerPCA's ``selection="repetition"``: its plan and its private
selection of the clipping radius and the number of iterations.

A geometric number of trials of the power method, each at a radius and a
number of iterations drawn from public grids, scored with noise; only the
best trial's basis leaves (Papernot & Steinke's random repetitions; the
Rényi accounting in :func:`~sklearn_dppca._coherent_rules.selection_rdp`;
docs/privacy.rst §2 and §6, "Random repetitions"). The estimator calls
these with itself; they read its parameters as its own methods would.
"""

import math

import numpy as np

from ._base import PrivacyPlan, budget_shares
from ._coherent_rules import (
    AUTO_SHARES,
    calibrate_selection,
    floor_level,
    repetition_batch,
    selection_rdp,
)
from .privacy import rdp_to_epsilon


def iteration_grid(estimator):
    r"""Public grid of iteration counts :math:`T_\ell = 2^\ell`, up to
    ``n_iter_max`` (or ``n_iter``)."""
    if estimator.n_iter == "auto":
        return 2 ** np.arange(int(math.log2(estimator.n_iter_max)) + 1)
    return np.array([int(estimator.n_iter)])


def radius_grid(estimator, n_samples, k, chi, iters):
    r"""Public grid of radii :math:`2^j \sqrt{k/n}` up to the largest that
    can clip.

    A row's product has norm at most :math:`\gamma^{-1/2}`
    (:math:`\|B\| \le \gamma^{-1/2}`), and the floor :math:`\gamma` is
    smallest for the fewest iterations; larger radii never clip, so the
    grid stops there, with that radius as its last point (no clipping at
    all).
    """
    if estimator.clip_radius != "auto":
        return np.array([float(estimator.clip_radius)])
    first = int(iters.min())
    top = floor_level(chi * math.sqrt(first), k, first, estimator.failure_prob) ** -0.5
    smallest = math.sqrt(k / n_samples)
    radii = [smallest * 2.0**j for j in range(64) if smallest * 2.0**j < top]
    return np.array(radii + [top])


def repetition_plan(estimator, n_samples, k):
    """The plan of ``selection="repetition"``: the trials' public grids,
    their noise scales and the selection's RDP curve, the charge."""
    iters = iteration_grid(estimator)
    shares = budget_shares(AUTO_SHARES, estimator.center)
    # The radius grid's top depends on χ, χ on θ, and θ (by default) on the
    # grid's size: iterate to the fixed point, on public values only.
    size = None
    for _ in range(20):
        expected = estimator.expected_trials
        if expected == "auto":
            expected = 2 * iters.size * (size or 8)
        theta = 1.0 / expected
        rho = calibrate_selection(estimator.epsilon, estimator.delta, theta, shares)
        # one trial's T iterations at Δ = χ√T cost λ·3/χ² (μ² = 6/Δ² each)
        chi = math.sqrt(3.0 / (shares["power"] * rho))
        radii = radius_grid(estimator, n_samples, k, chi, iters)
        if radii.size == size:
            break
        size = radii.size
    # Gaussian releases: λ μ²/2 = λ w ρ, so μ = sqrt(2 w ρ).
    mus = {
        name: math.sqrt(2.0 * shares[name] * rho)
        for name in ("mean", "init")
        if name in shares
    }
    curve = selection_rdp(rho, shares, theta)
    spent = (rdp_to_epsilon(curve, estimator.delta)[0], estimator.delta)
    extra = {
        "theta": theta,
        "radii": radii,
        "iters": iters,
        "chi": chi,
        # the noisy score (sensitivity √2/h, std √2ζ/h) costs λ/(2ζ²)
        "zeta": math.sqrt(1.0 / (2.0 * shares["score"] * rho)),
    }
    return PrivacyPlan(mus=mus, charge={"rdp": curve}, spent=spent, extra=extra)


def select_repetition(estimator, rows, unit_gram, quadratic, init, eigvals,
                      sigma_init, k, extra, rng):
    r"""Private choice of :math:`(R, T)` (the paper's Section C);
    ``quadratic`` gives the exact :math:`X^\top M X` of the trials'
    iterations.

    Returns only the best trial's :math:`(X, R, T)`: the number of
    trials and every score stay inside (Papernot & Steinke's theorem
    covers nothing more), and nothing about them is printed.
    """
    d = init.shape[0]
    radii, iters = extra["radii"], extra["iters"]
    if k >= d:
        return init, None, 0
    margin = sigma_init * (
        2.0 * math.sqrt(d) + math.sqrt(2.0 * math.log(8.0 / estimator.failure_prob))
    )
    low, high = eigvals[k] + margin, eigvals[k - 1] - margin
    gap = high - low
    if gap <= 0:  # no gap in the noisy spectrum: return the initialisation
        return init, None, 0
    estimator._say(1, "selection by random repetitions running")
    # f_{a,b}(Σ a aᵀ): a clipped linear ramp of the exact eigenvalues; the
    # score only needs its non-zero part (low rank).
    values, vectors = np.linalg.eigh(unit_gram)
    ramp = np.clip((values - low) / gap, 0.0, 1.0)
    keep = ramp > 0
    weighted = vectors[:, keep] * ramp[keep]

    n_trials = int(rng.geometric(extra["theta"]))
    # trials in lock-step batches, each scored as it ends and only the
    # best kept: memory is a batch's (repetition_batch), whatever the
    # hidden number of trials (every trial's iterate was kept: review 57)
    batch = repetition_batch(estimator.n_samples_, d, k)
    best, best_score = None, math.inf
    for first in range(0, n_trials, batch):
        size = min(batch, n_trials - first)
        trial_radii = radii[rng.integers(radii.size, size=size)]
        trial_iters = iters[rng.integers(iters.size, size=size)]
        noise = extra["chi"] * np.sqrt(trial_iters)
        floors = [floor_level(noise[j], k, trial_iters[j], estimator.failure_prob)
                  for j in range(size)]
        finals = estimator._iterate(rows, quadratic, init, trial_radii,
                                    trial_iters, noise, floors, rng)[0]
        for j, X in enumerate(finals):
            residual = weighted - X @ (X.T @ weighted)
            exact = np.linalg.norm(residual, 2) if residual.size else 0.0
            # s_{a,b} has sensitivity √2/h; noise std √2ζ/h: μ = 1/ζ
            score = exact + math.sqrt(2.0) * extra["zeta"] / gap * rng.normal()
            if score < best_score:
                best_score = score
                best = (X, float(trial_radii[j]), int(trial_iters[j]))
    return best
