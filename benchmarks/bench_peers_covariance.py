"""Private covariance: PrivatePCA against the five peers of Dong, Liang & Yi (2022).

Issue 23, item 4: the comparison of ``PrivatePCA``'s released covariance with
the mechanisms that Dong, Liang & Yi ("Differentially private covariance
revisited", NeurIPS 2022) compare, under their protocol, in this project. The
peers' published code carries no licence, so each peer below is written
afresh from its paper's algorithm as we know it (no code was copied or read);
where our memory of a detail is uncertain this docstring says so, and the
choice made is a sound one (never less noise than a proven calibration).

Protocol
--------
- Data: ``n`` rows of norm ``≤ 1`` (each dataset brought into the unit ball
  by a public rule, below); ``n`` is public.
- Target: the uncentred second moment ``Σ = XᵀX / n``.
- Error: ``‖Σ − Σ̂‖_F``; and ``sin θ`` of the top ``k ∈ {2, 5}`` released
  directions against the top ``k`` eigenvectors of ``XᵀX``
  (:func:`sklearn_dppca.metrics.principal_angle_sin`).
- Neighbours: **replace-one** (``X`` and ``X'`` differ in one row, same
  ``n``), for every mechanism, ours included.
- Privacy: **ρ-zCDP** (Bun & Steinke 2016) at ``ρ ∈ {0.01, 0.1, 1}``. A
  mechanism is ρ-zCDP when the Rényi divergence of order ``α`` between its
  outputs on neighbours is at most ``αρ`` for every ``α > 1``; zCDP composes
  by adding the ``ρ``'s. The Gaussian mechanism with L2 sensitivity ``Δ`` and
  noise ``N(0, σ²I)`` is ``Δ²/(2σ²)``-zCDP, so ``σ = Δ/√(2ρ)``.
- 20 repetitions (noise seeds) per cell and ``ρ``; mean ± sd.

Ours and the ρ ↔ μ mapping
--------------------------
``PrivatePCA(center=False, data_norm=1.0, epsilon=ε(ρ), delta=1e-6)`` with
``ε(ρ) = gdp_epsilon(√(2ρ), 1e-6)`` (0.575, 1.99, 7.29), i.e. ``μ = √(2ρ)``:
PrivatePCA converts ``ε`` back to exactly this ``μ`` (up to the 1e-14 of the
root-finder; ``tidy=False`` is used so that no rounding adds to ``μ``).

- μ-GDP (Dong, Roth & Su 2022) and ρ-zCDP are the **same** guarantee for one
  Gaussian release: both are statements about the pair ``N(0, 1)`` vs
  ``N(μ, 1)`` (``μ = Δ/σ``), whose Rényi divergence of order ``α`` is
  ``αμ²/2 = αρ`` exactly at ``μ = √(2ρ)``. With ``center=False`` and a fixed
  ``data_norm`` PrivatePCA makes exactly one Gaussian release (the scatter
  matrix ``Σ x xᵀ`` plus GOE noise, Frobenius sensitivity ``√2``): it is
  ρ-zCDP, and no more than that.
- Our multi-release fits (``data_norm="auto"``: noisy counts of a binary
  search, then the covariance) are ``μ``-GDP by the exact composition of GDP;
  μ-GDP implies ρ-zCDP with ``ρ = μ²/2`` (a μ-GDP mechanism is a
  post-processing of the Gaussian pair, Blackwell; Rényi divergences do not
  increase under post-processing). tests/test_benchmarks_smoke.py checks both.

``Σ̂ = get_covariance() · (n − 1)/n`` with ``n_components=None``: with every
component kept, scikit-learn's probabilistic-PCA model has no residual
variance, and ``get_covariance()`` is ``V diag(max(λ, 0)) Vᵀ / (n − 1)``,
``(λ, V)`` the eigenpairs of the noisy scatter matrix (scikit-learn divides by
``n − 1``); times ``(n − 1)/n`` it is the PSD part of the noisy ``XᵀX`` over
``n``, on the scale of ``Σ = XᵀX/n`` (the smoke test checks the conversion at
``ε = ∞``). The released noise on ``Σ``: GOE with ``σ = 1/(n√ρ)`` on the
diagonal and ``σ/√2`` off it. ``"PrivatePCA auto"`` is the same with
``data_norm="auto"`` (the private median norm as bound, 6% of ``μ²`` for the
search). The all-zero matrix is a baseline (error ``‖Σ‖_F``, no subspace).

The peers
---------
Every peer is ρ-zCDP under replace-one neighbours, by the Gaussian mechanism's
``Δ²/(2σ²)`` and additive zCDP composition unless stated. Sensitivities are
of ``Σ = XᵀX/n`` for rows of norm ``≤ r`` (``r = 1`` unless clipped):
``‖xxᵀ − x'x'ᵀ‖_F² = ‖x‖⁴ + ‖x'‖⁴ − 2(x·x')² ≤ 2r⁴``, so ``Δ_F = √2 r²/n``
(the papers often use the looser ``2r²/n``; using the tight bound is fair to
the peers and is what PrivatePCA uses). Every peer's output is projected onto
the PSD cone (negative eigenvalues set to 0): post-processing, costs no
budget, and never increases the Frobenius error (projection onto a convex
set containing ``Σ``).

GaussCov (Analyze Gauss; Dwork, Talwar, Thakurta & Zhang, STOC 2014)
    Releases ``Σ + E``, ``E`` symmetric with i.i.d. ``N(0, σ²)`` entries on
    and above the diagonal. The upper triangle ``(Σ_ij)_{i≤j}`` has L2
    sensitivity ``≤ ‖Δ‖_F ≤ √2/n`` (each off-diagonal entry counted once), so
    ``σ = √2/(n√(2ρ)) = 1/(n√ρ)``: the same ``σ`` as ours, with twice our
    off-diagonal variance.

SeparateCov (Dong, Liang & Yi 2022, the trace-sensitive algorithm)
    Releases eigenvalues and eigenvectors separately: the sorted eigenvalues
    ``λ(Σ) + N(0, σ_λ² I)`` with ``ρ/2`` and the eigenvectors of
    ``Σ + E`` (GaussCov's release) with ``ρ/2``; returns ``V diag(λ̃) Vᵀ``
    (``λ̃`` sorted descending, clamped at 0, paired with the eigenvectors in
    order). Sensitivity of the sorted eigenvalue vector: ``≤ ‖Δ‖_F ≤ √2/n``
    (Hoffman–Wielandt), so ``σ_λ = σ_V = 1/(n√(ρ/2))``. *Uncertain*: the
    equal split of ``ρ`` is our choice; we do not remember the paper's.

AdaptiveCov (Dong, Liang & Yi 2022, the tail-sensitive algorithm)
    *Our reconstruction* of "adaptive (trace-sensitive) clipping": we remember
    the idea (clip the rows at a privately chosen radius ``τ`` when most norms
    are small, then run the trace-sensitive algorithm on the clipped rows,
    whose sensitivities scale with ``τ²``) but not the paper's exact rule for
    ``τ``. Here: a histogram of the row norms on the public grid
    ``τ_j = 2^{−j/2}``, ``j = 0..19`` (L2 sensitivity ``√2``: a replaced row
    moves one count from one bin to another; ``σ_h = 1/√ρ_h`` with
    ``ρ_h = 0.1ρ``) is released, and ``τ`` minimises the error proxy
    ``bias(τ) + noise(τ)`` computed from the noisy counts (post-processing):
    ``bias = Σ_{rows beyond τ} (‖x‖² − τ²)/n`` (which bounds
    ``‖Σ − Σ_τ‖_F``), ``noise = √(d σ_λ² τ⁴ + 2√d σ_V τ² tr_τ)``, the shape of
    SeparateCov's bound ``√d/n + d^{1/4}√tr/√n`` at radius ``τ`` (``σ``'s at
    radius 1, ``tr_τ`` the clipped trace, norms at their bins' upper edges).
    Then SeparateCov on the rows clipped to ``τ`` with the remaining ``0.9ρ``
    (sensitivities ``√2τ²/n``). Total ``0.1ρ + 0.45ρ + 0.45ρ = ρ``.

EMCov (Amin, Dick, Kulesza, Muñoz Medina & Vassilvitskii, ICML 2019)
    Releases the eigenvalues with the Gaussian mechanism (as SeparateCov, with
    ``ρ/2``; the paper's pure-DP version uses Laplace noise) and the
    eigenvectors one at a time by the exponential mechanism: ``u_i`` is drawn
    on the unit sphere of the complement of ``u_1..u_{i−1}`` with density
    ``∝ exp(η uᵀ XᵀX u)`` (a Bingham distribution), sampled exactly by
    rejection from an angular central Gaussian envelope (Kent, Ganeiber &
    Mardia 2018); the last direction is determined by the others and costs
    nothing. The score ``uᵀXᵀXu`` has sensitivity 1 under replacement
    (``(u·x)² ∈ [0, 1]``), so each draw is ``ε_i``-DP with ``ε_i = 2η``;
    an exponential mechanism is ``ε_i``-bounded-range, hence
    ``ε_i²/8``-zCDP (Cesar & Rogers 2021): the ``d − 1`` draws share
    ``ρ/2``, ``ε_i = 2√(ρ/(d − 1))``, ``η = ε_i / 2``. (The generic
    ``ε_i``-DP ⇒ ``ε_i²/2``-zCDP of Bun & Steinke, which this benchmark
    used before, halves ``η``; we do not know which conversion Dong, Liang
    & Yi used. The split ``ρ/2 : ρ/2`` and the equal per-vector shares are
    our choice.)

CoinPress (Biswas, Dong, Kamath & Ullman, NeurIPS 2020)
    Iterative preconditioned estimation, ``T = 3`` steps with ``ρ/8, ρ/8,
    3ρ/4`` (the paper's ``1/4`` over the first ``T − 1`` steps, ``3/4`` on the
    last). Starting from the public bound ``A_0 = I ⪰ Σ`` (rows in the unit
    ball), step ``t`` whitens the rows ``y = A^{−1/2} x``, clips them at
    ``r = min(r_G, ‖A^{−1/2}‖₂)``, releases ``Z = YᵀY/n + E`` (``E`` as
    GaussCov's, ``Δ = √2 r²/n``), and sets ``A ← A^{1/2}(Z + ηI)A^{1/2}``
    with ``η = σ(2√d + 2√ln(1/β))``, a high-probability bound on ``‖E‖₂``
    (``β = 0.01``; eigenvalues of ``Z + ηI`` floored at ``η/100``); the last
    step returns ``A^{1/2} Z A^{1/2}``. ``r_G² = d + 2√(d ln(n/β)) +
    2 ln(n/β)`` is the paper's Gaussian clipping radius (Laurent–Massart).
    *Deviation, in CoinPress's favour*: the paper clips at ``r_G`` alone; here
    the rows are known to lie in the unit ball, so the public bound
    ``‖A^{−1/2}‖₂`` never clips and is used when smaller (at the first step it
    is 1 against ``r_G ≈ √d``). Any clipping radius is sound: the sensitivity
    uses the radius actually used.

Cells and the public scaling rules
----------------------------------
- ``spiked``: Gaussian, ``n = 20 000``, ``d = 50``, covariance
  ``Q diag(25, 20, 15, 10, 5, 1, …, 1) Qᵀ`` (``Q`` a random rotation).
- ``harmonic``: Gaussian, ``n = 60 000``, ``d = 200``, eigenvalues ``1/j``.
  For both: divided by the public radius ``R = √(m + 4s)``, ``m = tr`` and
  ``s = √(2 Σλ²)`` the mean and standard deviation of ``‖x‖²`` under the
  (public) model, then clipped to norm 1 (a per-row rule).
- ``wine`` 178 × 13, ``breast_cancer`` 569 × 30, ``digits`` 1797 × 64:
  :func:`sklearn_dppca.datasets.load_real_dataset` divided by its recommended
  ``data_norm`` (digits: pixels/16 then /8, a public rule, no row clipped;
  wine and breast cancer: standardised with their own mean and sd, **not** a
  private step, as everywhere in this project's benchmarks, then ``/2√d``),
  then clipped to norm 1.

The data are generated once (``--seed``); every (cell, ρ, repetition,
mechanism) draws its noise from a ``SeedSequence`` of its own, keyed by the
mechanism's name (a mechanism added later moves no other's draws). Fixed
seeds make the fits non-private; the ``PrivacyLeakWarning`` is silenced.

Timing: the wall time of every fit (including its pass over the rows) is
recorded; the table reports the median per fit at the ``harmonic`` cell
(60 000 × 200). BLAS runs on one thread (``--blas-threads``), as in
evaluate.py: on a shared 2-core machine that measures per-core cost.

Usage (from the repository root; the header prints which ``sklearn_dppca`` is
imported, so set ``PYTHONPATH=.`` where another copy is installed)::

    nice python benchmarks/bench_peers_covariance.py --out docs/_static/benchmarks
    python benchmarks/bench_peers_covariance.py --quick          # < 60 s
    python benchmarks/bench_peers_covariance.py --cells wine digits --reps 5

Output: Markdown tables of the Frobenius error, ``sin θ`` (k = 2 and 5), the
error relative to PrivatePCA's, and the fit times; with ``--out DIR``:
``peers_covariance.csv`` (numbers), ``peers_covariance_frob.csv``,
``peers_covariance_ratio.csv``, ``peers_covariance_sin.csv``,
``peers_covariance_timing.csv`` (formatted, for docs/benchmarks.rst) and
``peers_covariance.png`` (mean error against ρ, log-log, one panel per cell;
bars ± sd, the lower one cut at a tenth of the mean).
"""

import argparse
import csv
import math
import sys
import time
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import brentq
from threadpoolctl import threadpool_limits

import sklearn_dppca
from sklearn_dppca import (
    BudgetAccountant,
    NoisyReleaseWarning,
    PrivacyLeakWarning,
    PrivatePCA,
)
from sklearn_dppca.datasets import load_real_dataset
from sklearn_dppca.metrics import principal_angle_sin
from sklearn_dppca.privacy import gdp_epsilon

RHOS = (0.01, 0.1, 1.0)
DELTA = 1e-6
KS = (2, 5)
REPS = 20
OURS = "PrivatePCA"
MECHANISMS = (
    OURS, "PrivatePCA auto", "PrivatePCA nuclear", "GaussCov", "SeparateCov",
    "AdaptiveCov", "EMCov", "CoinPress", "zero",
)
PEERS = ("GaussCov", "SeparateCov", "AdaptiveCov", "EMCov", "CoinPress")
TIMING_CELL = "harmonic"

#: AdaptiveCov: share of ρ for the norm histogram, and its public grid.
ADAPTIVE_HIST_SHARE = 0.1
ADAPTIVE_GRID = 2.0 ** (-np.arange(20)[::-1] / 2.0)  # 2^-9.5 … 1, ascending
#: CoinPress: steps, budget shares, failure probability of its bounds.
COINPRESS_SHARES = (1 / 8, 1 / 8, 3 / 4)
COINPRESS_BETA = 0.01


# --------------------------------------------------------------------------
# Privacy calibrations (ρ-zCDP, replace-one neighbours)
# --------------------------------------------------------------------------
def gaussian_sigma(sensitivity, rho):
    """``σ`` of the Gaussian mechanism that is ``ρ``-zCDP: ``Δ / √(2ρ)``."""
    return sensitivity / math.sqrt(2.0 * rho)


def cov_sensitivity(n, radius=1.0):
    """L2 (Frobenius) sensitivity of ``XᵀX/n`` for rows of norm ``≤ radius``."""
    return math.sqrt(2.0) * radius**2 / n


def epsilon_for(rho, delta=DELTA):
    """Our ``ε`` at ``μ = √(2ρ)``: the root itself, so that ``μ`` is not rounded up."""
    return gdp_epsilon(math.sqrt(2.0 * rho), delta, tidy=False)


def emcov_eta(rho, d):
    """EMCov's inverse temperature per eigenvector: the ``d − 1`` draws share
    ``ρ/2``; each is ``ε_i``-DP with ``ε_i = 2η`` (score sensitivity 1), and
    an exponential mechanism, being bounded-range, is ``ε_i²/8``-zCDP
    (Cesar & Rogers 2021), so ``η = √(2ρ_i)``. (The generic ε-DP ⇒
    ``ε²/2``-zCDP conversion, used here before, halved ``η``.)"""
    rho_i = (rho / 2.0) / max(d - 1, 1)
    return math.sqrt(2.0 * rho_i)


# --------------------------------------------------------------------------
# Linear-algebra helpers
# --------------------------------------------------------------------------
def sym_noise(rng, d, sigma):
    """Symmetric ``E`` with i.i.d. ``N(0, σ²)`` entries on and above the diagonal."""
    g = np.triu(rng.standard_normal((d, d)))
    return (g + np.triu(g, 1).T) * sigma


def eigh_desc(a):
    w, v = np.linalg.eigh(a)
    return w[::-1], v[:, ::-1]


def from_eigen(w, v):
    """``V diag(max(w, 0)) Vᵀ``."""
    return (v * np.maximum(w, 0.0)) @ v.T


def psd_release(noisy):
    """The PSD projection of a noisy symmetric release and its eigenvectors
    by decreasing released eigenvalue."""
    w, v = eigh_desc((noisy + noisy.T) / 2.0)
    return from_eigen(w, v), v


def clip_rows(X, radius=1.0):
    """Rows scaled down to norm ``≤ radius`` (exactly, in floating point)."""
    X = np.array(X, dtype=np.float64)
    for _ in range(4):
        norms = np.linalg.norm(X, axis=1)
        over = norms > radius
        if not over.any():
            return X
        X[over] *= (radius / norms[over])[:, None]
    X[np.linalg.norm(X, axis=1) > radius] *= 1.0 - 1e-12
    return X


# --------------------------------------------------------------------------
# The mechanisms: f(X, rho, rng) -> (Σ̂, V) with V's columns the released
# directions by decreasing released variance (None for the zero matrix).
# --------------------------------------------------------------------------
def gauss_cov(X, rho, rng):
    n, d = X.shape
    sigma = gaussian_sigma(cov_sensitivity(n), rho)
    return psd_release(X.T @ X / n + sym_noise(rng, d, sigma))


def separate_cov(X, rho, rng, radius=1.0):
    """SeparateCov on rows of norm ``≤ radius``: ``ρ/2`` eigenvalues, ``ρ/2``
    eigenvectors."""
    n, d = X.shape
    cov = X.T @ X / n
    sigma = gaussian_sigma(cov_sensitivity(n, radius), rho / 2.0)
    lam = np.linalg.eigvalsh(cov)[::-1] + rng.standard_normal(d) * sigma
    _, v = eigh_desc(cov + sym_noise(rng, d, sigma))
    lam = np.maximum(np.sort(lam)[::-1], 0.0)
    return from_eigen(lam, v), v


def adaptive_radius(norms, n, d, rho, rng):
    """AdaptiveCov's clipping radius from a noisy histogram of the norms."""
    grid = ADAPTIVE_GRID
    rho_h = ADAPTIVE_HIST_SHARE * rho
    bins = np.searchsorted(grid, norms, side="left")  # first τ_j ≥ ‖x‖
    counts = np.bincount(np.minimum(bins, len(grid) - 1), minlength=len(grid))
    sigma_h = gaussian_sigma(math.sqrt(2.0), rho_h)
    noisy = counts + rng.standard_normal(len(grid)) * sigma_h
    noisy = np.maximum(noisy, 0.0)  # post-processing of the release from here on
    rho_rest = (1.0 - ADAPTIVE_HIST_SHARE) * rho
    sigma = gaussian_sigma(cov_sensitivity(n), rho_rest / 2.0)  # σ_λ = σ_V at radius 1
    sq = grid**2
    best, best_err = grid[-1], math.inf
    for j, tau in enumerate(grid):
        beyond = noisy[j + 1:]
        bias = float(beyond @ (sq[j + 1:] - sq[j])) / n
        trace = (float(noisy[: j + 1] @ sq[: j + 1]) + float(beyond.sum()) * sq[j]) / n
        noise = math.sqrt(d * sigma**2 * tau**4
                          + 2.0 * math.sqrt(d) * sigma * tau**2 * trace)
        if bias + noise < best_err:
            best, best_err = float(tau), bias + noise
    return best


def adaptive_cov(X, rho, rng):
    n, d = X.shape
    tau = adaptive_radius(np.linalg.norm(X, axis=1), n, d, rho, rng)
    return separate_cov(clip_rows(X, tau), (1.0 - ADAPTIVE_HIST_SHARE) * rho, rng,
                        radius=tau)


def sample_bingham(m, eta, rng, batch=32):
    """A unit vector ``z`` with density ``∝ exp(η zᵀ M z)`` on the sphere.

    Exact rejection sampling from the angular central Gaussian envelope (Kent,
    Ganeiber & Mardia 2018). In ``M``'s eigenbasis the density is
    ``∝ exp(−zᵀAz)`` with ``A = η(m_max − diag(m)) ⪰ 0``; the envelope
    ``(zᵀΩz)^{−q/2}``, ``Ω = I + 2A/b``, bounds it by
    ``e^{−(q−b)/2}(q/b)^{q/2}`` for every ``b ∈ (0, q]``; ``b`` solves
    ``Σ 1/(b + 2a_i) = 1``. Returns ``(z, proposals used)``.
    """
    w, vecs = np.linalg.eigh(m)
    a = eta * (w[-1] - w)
    q = a.shape[0]
    if q == 1:
        return vecs[:, 0], 0

    def excess(b):
        return float(np.sum(1.0 / (b + 2.0 * a))) - 1.0

    b = float(q)  # excess(q) ≤ 0; = 0 only when every a_i = 0
    if excess(b) < 0:
        b = brentq(excess, 1e-12, b, xtol=1e-12)
    scale = 1.0 / np.sqrt(1.0 + 2.0 * a / b)
    log_bound = -(q - b) / 2.0 + (q / 2.0) * math.log(q / b)
    used = 0
    while True:
        y = rng.standard_normal((batch, q)) * scale
        z = y / np.linalg.norm(y, axis=1, keepdims=True)
        t = (z * z) @ a
        log_accept = -t + (q / 2.0) * np.log1p(2.0 * t / b) - log_bound
        hit = np.flatnonzero(np.log(rng.random(batch)) < log_accept)
        if hit.size:
            return vecs @ z[hit[0]], used + int(hit[0]) + 1
        used += batch


def em_cov(X, rho, rng):
    n, d = X.shape
    gram = X.T @ X
    sigma = gaussian_sigma(cov_sensitivity(n), rho / 2.0)
    lam = np.linalg.eigvalsh(gram / n)[::-1] + rng.standard_normal(d) * sigma
    lam = np.maximum(np.sort(lam)[::-1], 0.0)
    eta = emcov_eta(rho, d)
    basis = np.eye(d)  # orthonormal basis of the complement of the drawn u's
    m = gram
    vectors = np.empty((d, d))
    for i in range(d):
        z, _ = sample_bingham(m, eta, rng)
        vectors[:, i] = basis @ z
        if i == d - 1:
            break
        # Householder reflection H with H z = ∓e_1: H[:, 1:] spans z's complement
        h = z.copy()
        h[0] += 1.0 if z[0] >= 0 else -1.0
        h /= np.linalg.norm(h)
        comp = np.eye(z.shape[0])[:, 1:] - 2.0 * np.outer(h, h[1:])
        basis = basis @ comp
        m = comp.T @ m @ comp
    return from_eigen(lam, vectors), vectors


def coinpress_radius(n, d, beta=COINPRESS_BETA):
    """CoinPress's Gaussian clipping radius ``r_G``."""
    log_term = math.log(n / beta)
    return math.sqrt(d + 2.0 * math.sqrt(d * log_term) + 2.0 * log_term)


def coinpress_cov(X, rho, rng, shares=COINPRESS_SHARES, beta=COINPRESS_BETA):
    n, d = X.shape
    r_gauss = coinpress_radius(n, d, beta)
    a_w, a_v = np.ones(d), np.eye(d)  # A = a_v diag(a_w) a_vᵀ, A_0 = I
    for t, share in enumerate(shares):
        root = (a_v * np.sqrt(a_w)) @ a_v.T
        inv_root = (a_v / np.sqrt(a_w)) @ a_v.T
        radius = min(r_gauss, 1.0 / math.sqrt(a_w.min()))
        Y = clip_rows(X @ inv_root, radius)
        sigma = gaussian_sigma(cov_sensitivity(n, radius), share * rho)
        z = Y.T @ Y / n + sym_noise(rng, d, sigma)
        if t == len(shares) - 1:
            return psd_release(root @ z @ root)
        eta = sigma * (2.0 * math.sqrt(d) + 2.0 * math.sqrt(math.log(1.0 / beta)))
        zw, zv = np.linalg.eigh((z + z.T) / 2.0)
        zw = np.maximum(zw + eta, eta / 100.0)
        a_w, a_v = np.linalg.eigh(root @ ((zv * zw) @ zv.T) @ root)
        a_w = np.maximum(a_w, 1e-300)


def fit_ours(X, rho, rng, data_norm=1.0):
    """``PrivatePCA`` of the protocol (uncentred, every component) at ``ρ``."""
    return PrivatePCA(center=False, data_norm=data_norm, epsilon=epsilon_for(rho),
                      delta=DELTA, random_state=rng,
                      accountant=BudgetAccountant()).fit(X)


def private_pca(X, rho, rng, data_norm=1.0):
    n = X.shape[0]
    est = fit_ours(X, rho, rng, data_norm)
    return est.get_covariance() * ((n - 1) / n), est.components_.T


def trace_ball(values, radius):
    """The projection of eigenvalues onto ``{μ ≥ 0, Σ μ ≤ radius}``: the
    eigenvalues of the nearest PSD matrix of trace at most ``radius`` (in
    Frobenius norm), by soft-thresholding at the ``τ ≥ 0`` that meets the
    trace (a simplex projection)."""
    positive = np.maximum(values, 0.0)
    if positive.sum() <= radius:
        return positive
    tau = brentq(lambda t: np.maximum(values - t, 0.0).sum() - radius,
                 0.0, float(values.max()))
    return np.maximum(values - tau, 0.0)


def private_pca_nuclear(X, rho, rng):
    """The same release as ``PrivatePCA``, post-processed as d'Orsi & Novikov
    (2026) do: the noisy matrix projected onto the nuclear-norm (here: PSD,
    trace) ball whose radius is the released trace estimate, instead of the
    de-noised spectrum (issue 34, item 3)."""
    n = X.shape[0]
    est = fit_ours(X, rho, rng)
    values = trace_ball(est.noisy_variance_ * (n - 1), est.total_variance_ * (n - 1))
    vectors = est.components_.T
    return (vectors * (values / n)) @ vectors.T, vectors


def private_pca_auto(X, rho, rng):
    """``None`` where the fit refuses a search drowned in its noise (public
    n and ε: the tables show "—")."""
    try:
        return private_pca(X, rho, rng, data_norm="auto")
    except ValueError as error:
        if "refused before any charge" not in str(error):
            raise
        return None, None


def zero(X, rho, rng):
    d = X.shape[1]
    return np.zeros((d, d)), None


FITS = {
    OURS: private_pca,
    "PrivatePCA auto": private_pca_auto,
    "PrivatePCA nuclear": private_pca_nuclear,
    "GaussCov": gauss_cov,
    "SeparateCov": separate_cov,
    "AdaptiveCov": adaptive_cov,
    "EMCov": em_cov,
    "CoinPress": coinpress_cov,
    "zero": zero,
}


# --------------------------------------------------------------------------
# Cells
# --------------------------------------------------------------------------
@dataclass
class Cell:
    name: str
    X: np.ndarray
    rule: str

    @property
    def shape(self):
        return f"{self.X.shape[0]} × {self.X.shape[1]}"


def gaussian_cell(name, n, spectrum, seed):
    rng = np.random.default_rng(seed)
    spectrum = np.asarray(spectrum, dtype=np.float64)
    d = spectrum.shape[0]
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    q *= np.sign(np.diag(r))
    X = (rng.standard_normal((n, d)) * np.sqrt(spectrum)) @ q.T
    radius = math.sqrt(spectrum.sum() + 4.0 * math.sqrt(2.0 * (spectrum**2).sum()))
    clipped = float(np.mean(np.linalg.norm(X, axis=1) > radius))
    return Cell(name, clip_rows(X / radius),
                f"/ R = {radius:.3g} (model), clip: {clipped:.2%} of rows clipped")


def real_cell(name):
    data = load_real_dataset(name)
    X = data.data / data.data_norm
    clipped = float(np.mean(np.linalg.norm(X, axis=1) > 1.0))
    rule = f"/ data_norm = {data.data_norm:.3g}, clip: {clipped:.2%} of rows clipped"
    return Cell(name, clip_rows(X), rule)


def make_cells(names, quick, seed):
    scale = 10 if quick else 1
    makers = {
        "spiked": lambda: gaussian_cell(
            "spiked", 20_000 // scale, [25, 20, 15, 10, 5] + [1] * 45, seed),
        "harmonic": lambda: gaussian_cell(
            "harmonic", 60_000 // scale,
            1.0 / np.arange(1, (60 if quick else 200) + 1), seed + 1),
        "wine": lambda: real_cell("wine"),
        "breast_cancer": lambda: real_cell("breast_cancer"),
        "digits": lambda: real_cell("digits"),
    }
    return [makers[name]() for name in names]


ALL_CELLS = ("spiked", "harmonic", "wine", "breast_cancer", "digits")


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------
def fit_rng(seed, ci, ri, rep, name):
    """The generator of one fit (cell, ρ, repetition, mechanism), keyed by
    the mechanism's name: adding a mechanism moves no other's draws."""
    return np.random.default_rng(np.random.SeedSequence(
        seed, spawn_key=(ci, ri, rep, zlib.crc32(name.encode()))))


def run_cell(cell, ci, rhos, reps, seed, mechanisms=MECHANISMS, log=print):
    """Every fit of one cell: a list of records (one per rho, rep, mechanism)."""
    X = cell.X
    n, d = X.shape
    truth = X.T @ X / n
    _, tvecs = eigh_desc(truth)
    records = []
    for ri, rho in enumerate(rhos):
        start = time.perf_counter()
        for rep in range(reps):
            for name in MECHANISMS:
                if name not in mechanisms:
                    continue
                rng = fit_rng(seed, ci, ri, rep, name)
                t0 = time.perf_counter()
                cov, vecs = FITS[name](X, rho, rng)
                elapsed = time.perf_counter() - t0
                frob = math.nan if cov is None else float(np.linalg.norm(truth - cov))
                rec = {"cell": cell.name, "n": n, "d": d, "rho": rho, "rep": rep,
                       "mechanism": name, "frob": frob, "time_s": elapsed}
                for k in KS:
                    rec[f"sin{k}"] = (math.nan if vecs is None else principal_angle_sin(
                        vecs[:, :k].T, tvecs[:, :k].T))
                records.append(rec)
        log(f"  {cell.name} ({cell.shape}) ρ = {rho:g}: {reps} reps in "
            f"{time.perf_counter() - start:.1f} s")
    return records


def summarise(records):
    groups = {}
    for r in records:
        groups.setdefault((r["cell"], r["rho"], r["mechanism"]), []).append(r)
    rows = []
    for (cell, rho, name), recs in groups.items():
        row = {"cell": cell, "n": recs[0]["n"], "d": recs[0]["d"], "rho": rho,
               "mu": math.sqrt(2.0 * rho), "epsilon": gdp_epsilon(math.sqrt(2.0 * rho),
                                                                  DELTA),
               "mechanism": name, "reps": len(recs)}
        for key in ("frob", *(f"sin{k}" for k in KS)):
            values = np.array([r[key] for r in recs])
            row[f"{key}_mean"] = float(values.mean())
            row[f"{key}_sd"] = float(values.std(ddof=1)) if len(values) > 1 else 0.0
        row["frob_median"] = float(np.median([r["frob"] for r in recs]))
        row["time_median_s"] = float(np.median([r["time_s"] for r in recs]))
        rows.append(row)
    return rows


def _fmt(mean, sd, digits=3):
    """``mean ± sd``, both to the decimal of the mean's ``digits``-th figure."""
    if math.isnan(mean):
        return "—"
    if mean == 0.0:
        return f"0 ± {sd:.2g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(mean))))
    return f"{mean:.{decimals}f} ± {sd:.{decimals}f}"


def tables(summary, cells, rhos):
    """The formatted tables: {name: (header, rows)}."""
    by = {(r["cell"], r["rho"], r["mechanism"]): r for r in summary}
    names = [m for m in MECHANISMS if any(k[2] == m for k in by)]
    out = {}
    head = ["cell", "ρ", *names]
    frob, ratio, sin = [], [], []
    for cell in cells:
        for rho in rhos:
            if (cell.name, rho, names[0]) not in by:
                continue
            label = [f"{cell.name} {cell.shape}", f"{rho:g}"]
            rows = [by.get((cell.name, rho, m)) for m in names]
            frob.append(label + [_fmt(r["frob_mean"], r["frob_sd"]) for r in rows])
            ours = by.get((cell.name, rho, OURS))
            if ours is not None:
                ratio.append(label + [f"{r['frob_mean'] / ours['frob_mean']:.2f}"
                                      for r in rows])
            sin.append(label + [
                "—" if math.isnan(r["sin2_mean"])
                else f"{r['sin2_mean']:.2f} / {r['sin5_mean']:.2f}" for r in rows])
    out["frob"] = (head, frob)
    out["ratio"] = (head, ratio)
    keep = [i for i, m in enumerate(head) if m != "zero"]  # zero: no subspace
    out["sin"] = ([head[i] for i in keep], [[row[i] for i in keep] for row in sin])
    timing = []
    for m in names:
        rows = [by.get((TIMING_CELL, rho, m)) for rho in rhos]
        if all(rows):
            median = np.median([r["time_median_s"] for r in rows])
            timing.append([m, f"{rows[0]['n']} × {rows[0]['d']}", f"{median:.3g}"])
    out["timing"] = (["mechanism", "cell", "median time per fit (s)"], timing)
    return out


def markdown(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


TITLES = {
    "frob": "Frobenius error ‖XᵀX/n − Σ̂‖_F, mean ± sd",
    "ratio": "Mean Frobenius error / PrivatePCA's (< 1: better than ours)",
    "sin": "sin θ of the top 2 / top 5, mean",
    "timing": "Fit time at the harmonic cell (median per fit, one BLAS thread)",
}


def write_outputs(out_dir, summary, tabs, cells, rhos):
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    keys = list(summary[0])
    with open(out_dir / "peers_covariance.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        for row in summary:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v)
                             for k, v in row.items()})
    for key, (header, rows) in tabs.items():
        with open(out_dir / f"peers_covariance_{key}.csv", "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(header)
            writer.writerows(rows)
    figure(out_dir / "peers_covariance.png", summary, cells, rhos)


STYLE = {
    OURS: dict(color="black", marker="o", lw=2.2),
    "PrivatePCA auto": dict(color="black", marker="o", ls="--", mfc="white"),
    "PrivatePCA nuclear": dict(color="black", marker="x", ls=":"),
    "GaussCov": dict(color="tab:blue", marker="s"),
    "SeparateCov": dict(color="tab:orange", marker="^"),
    "AdaptiveCov": dict(color="tab:green", marker="v"),
    "EMCov": dict(color="tab:purple", marker="D"),
    "CoinPress": dict(color="tab:brown", marker="P"),
    "zero": dict(color="grey", ls=":", marker=""),
}


def figure(path, summary, cells, rhos):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = {(r["cell"], r["rho"], r["mechanism"]): r for r in summary}
    ncol = 3
    nrow = math.ceil((len(cells) + 1) / ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol, 3.4 * nrow))
    axes = np.atleast_1d(axes).ravel()
    for ax, cell in zip(axes, cells):
        for name in MECHANISMS:
            pts = [by.get((cell.name, rho, name)) for rho in rhos]
            if any(p is None for p in pts):
                continue
            means = np.array([p["frob_mean"] for p in pts])
            sds = np.array([p["frob_sd"] for p in pts])
            # on a log axis a bar below 0 would reach the axis: the lower bar
            # is cut at a tenth of the mean (only heavy-tailed cells need it)
            yerr = np.vstack([np.minimum(sds, 0.9 * means), sds])
            ax.errorbar(rhos, means, yerr=yerr, label=name, capsize=2, ms=4,
                        **STYLE[name])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{cell.name} ({cell.shape})", fontsize=10)
        ax.set_xlabel("ρ (zCDP)")
        ax.set_ylabel("‖XᵀX/n − Σ̂‖_F")
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[len(cells):]:
        ax.axis("off")
    axes[len(cells)].legend(handles, labels, loc="center", frameon=False)
    fig.suptitle("Private second moment: error against ρ (mean ± sd over repetitions)",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="smoke run: n/10, d = 60 for harmonic, 2 reps (< 60 s)")
    p.add_argument("--reps", type=int, default=None, help=f"default {REPS} (quick: 2)")
    p.add_argument("--cells", nargs="+", choices=ALL_CELLS, default=list(ALL_CELLS))
    p.add_argument("--rhos", nargs="+", type=float, default=list(RHOS))
    p.add_argument("--mechanisms", nargs="+", choices=MECHANISMS,
                   default=list(MECHANISMS))
    p.add_argument("--seed", type=int, default=0, help="of the data and the noise")
    p.add_argument("--blas-threads", type=int, default=1, help="0: library default")
    p.add_argument("--out", default=None, help="folder for the CSVs and the figure")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.blas_threads > 0:
        with threadpool_limits(limits=args.blas_threads):
            return _main(args)
    return _main(args)


def _main(args):
    reps = args.reps or (2 if args.quick else REPS)
    start = time.perf_counter()
    cells = make_cells(args.cells, args.quick, args.seed)
    print(f"sklearn_dppca {sklearn_dppca.__version__} from "
          f"{Path(sklearn_dppca.__file__).parent}")
    print(f"ρ-zCDP at ρ ∈ {args.rhos}; ours at μ = √(2ρ), ε = "
          + ", ".join(f"{gdp_epsilon(math.sqrt(2 * r), DELTA):.3g}" for r in args.rhos)
          + f" (δ = {DELTA:g}); {reps} repetitions")
    for cell in cells:
        print(f"  {cell.name}: {cell.shape}, {cell.rule}")
    records = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyLeakWarning)
        # small n: components below the noise are the point of the cells
        warnings.simplefilter("ignore", NoisyReleaseWarning)
        # "auto" at small n warns that its search is drowned in noise: expected here
        warnings.filterwarnings("ignore", message='data_norm="auto" on',
                                category=UserWarning)
        for ci, cell in enumerate(cells):
            records += run_cell(cell, ci, args.rhos, reps, args.seed, args.mechanisms)
    summary = summarise(records)
    tabs = tables(summary, cells, args.rhos)
    print()
    for key, (header, rows) in tabs.items():
        if rows:
            print(f"### {TITLES[key]}\n\n{markdown(header, rows)}\n")
    runtime = time.perf_counter() - start
    print(f"total {runtime:.0f} s")
    if args.out:
        write_outputs(args.out, summary, tabs, cells, args.rhos)
        print(f"wrote {args.out}/peers_covariance*.csv and peers_covariance.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
