r"""CoherentPowerPCA's random start (``start="random"``, or ``"auto"`` where
:func:`~sklearn_dppca._coherent_rules.random_start_wins`): its plan and its
release.

:math:`T` clipped power iterations from a random orthonormal basis, with no
covariance release, no preconditioner and no :math:`d \times d` matrix,
then :math:`X^\top M X` and the trace for the variances (docs/privacy.rst,
"From a random start"). The estimator calls these with itself; they read
its parameters and set its fitted attributes as its own methods would.
"""

import math

import numpy as np
from joblib import effective_n_jobs

from ._coherent_rules import random_iterations, random_step_weights
from ._private_pca import noisy_power_spectrum
from ._rows import scatter_quadratic
from .noise import dense_noise, goe_noise, noise_scale


def random_plan(estimator, plan, n_samples, n_features, k):
    r"""``plan``, the base's at :data:`RANDOM_SHARES`, with the number of
    iterations :math:`T` and the radius :math:`R` (``extra``). The
    ``"step"`` share (``mus["step"]``, all iterations together) is split
    over the iterations by :func:`random_step_weights` when they run
    (:func:`release_random`), from the plan as the fit has it then:
    ``data_norm="auto"`` scales every share of the estimator's after its
    bound's releases (docs/privacy.rst §5), the step's included. The
    mean's :math:`\mu`, the iterations' and the variances' (``"variance"``:
    :math:`X^\top M X` and the trace, each at
    :math:`\mu_{\mathrm{variance}}/\sqrt{2}`) compose to exactly
    :math:`\mu_*`, the charge."""
    n_iter = (random_iterations(n_samples, n_features)
              if estimator.n_iter == "auto" else int(estimator.n_iter))
    radius = (math.sqrt(k / n_samples) if estimator.clip_radius == "auto"
              else float(estimator.clip_radius))
    return plan._replace(extra={"n_iter": n_iter, "radius": radius})


def release_random(estimator, rows, plan, rng, dtype):
    r"""``start="random"``: :math:`T` clipped power iterations from a
    random orthonormal basis (public, from the fit's generator), each
    releasing :math:`\sum_i a_i \operatorname{Clip}_R(a_i^\top X) +
    \Delta R G` (sensitivity :math:`2R`), then :math:`X^\top M X` and the
    trace for the variances (:math:`\sqrt 2` together)
    (:ref:`the random start <privacy-coherent-random>`)."""
    n, d = estimator.n_samples_, estimator.n_features_in_
    k = estimator.n_components or min(n, d)
    mus, n_iter = plan.mus, plan.extra["n_iter"]
    radius, scale = plan.extra["radius"], rows.data_norm**2
    # The start from a generator of its own, seeded by one draw of the
    # fit's: it is not released, and were it inferred it would tell
    # nothing of the noise drawn from the fit's generator.
    start = np.random.default_rng(int(rng.integers(2**63)))
    X = np.linalg.qr(start.standard_normal((d, k)))[0]
    # the step share split over the iterations now, from the plan the fit
    # has: one computed with the plan and kept would miss data_norm="auto"'s
    # scaling of the shares, and spend more than the charge
    step_mus = mus["step"] * np.sqrt(random_step_weights(n_iter))
    for step, mu in enumerate(step_mus):
        sums, _ = rows.clipped_products(X[:, None, :], [radius],
                                        effective_n_jobs(estimator.n_jobs))
        # σ = 2R/μ_t: sensitivity 2R, the t-th share of the step budget
        noise = dense_noise(rng, (d, k), 2.0 * radius / mu)
        X = np.linalg.qr(sums[:, 0] + noise)[0]
        estimator._say(2, f"power iteration {step + 1} of {n_iter}")
    # (XᵀGX, tr G) at one σ: sensitivity √2 together, as the covariance
    # with its trace (docs/privacy.rst, "The trace": projecting on X only
    # shrinks the first term); each at μ/√2 on its own sensitivity put √2
    # times Ĥ's noise for 0.87 of the share (review 64)
    sigma_h = noise_scale(math.sqrt(2.0), mus["variance"])
    H = scatter_quadratic(rows, X) + goe_noise(rng, k, sigma_h)
    trace = rows.sq_norm_sum() + float(dense_noise(rng, (), sigma_h))
    values, rotation = np.linalg.eigh((H + H.T) / 2.0)
    values, rotation = values[::-1], rotation[:, ::-1]
    vars(estimator).pop("init_components_", None)  # no initialisation released
    estimator.n_clipped_ = None
    estimator.branch_ = "random"
    estimator.clip_radius_, estimator.n_iter_ = radius, n_iter
    estimator._say(1, f"released: random start (R={radius:.4g}, T={n_iter})")
    # resolved: a variance above any a random direction reaches, the
    # mean eigenvalue (the released trace over d) at the Marchenko–Pastur
    # edge (1 + √(d/n))², plus Ĥ's noise: its edge σ√(2k) and three σ for
    # the fluctuations of a small matrix's top eigenvalue (post-processing)
    reach = (max(trace, 0.0) / d * (1.0 + math.sqrt(d / n)) ** 2
             + sigma_h * (math.sqrt(2.0 * k) + 3.0))
    # the private mean's error, n δδᵀ of the centred rows (_spectrum.
    # mean_spike, in the rows' unit-ball units): on few rows the iterations
    # find its direction. Expected beyond that reach, the noise warning names
    # center=False (review 124 F2); a variance counts only above its upper
    # size too (public values only)
    spike = estimator._mean_spike()
    estimator._mean_error_out = spike[0] / scale > reach
    resolved = int(np.count_nonzero(values > reach + spike[1] / scale))
    # the variance along an unresolved direction (the mean's error's: 0.27-
    # 0.43 of the total on isotropic rows) is left to the level of the rest,
    # as the covariance's spectrum leaves it
    spectrum = noisy_power_spectrum(
        np.maximum(values, 0.0) * scale, trace * scale, min(n, d), n - 1,
        resolved, own=resolved)
    estimator._set_components((X @ rotation).T, values * scale / (n - 1),
                              spectrum, dtype)
