"""Tests of the noise kernels (docs/privacy.rst §4) and of make_generator.

Every statistical test draws from a fixed seed, so it is deterministic; the
tolerances are still derived from the sampling distribution with a wide margin
(tail probabilities ≤ 1e-6 for the chi-square and F bounds, ≥ 6 standard errors
for means and correlations, p > 1e-3 for Kolmogorov–Smirnov), so a change of
seed would not make them flaky either.
"""

import math

import numpy as np
import pytest
from scipy import stats

from sklearn_dppca.noise import (
    ImplicitGOE,
    dense_noise,
    goe_noise,
    gue_noise,
    make_generator,
    noise_scale,
)

TAIL = 1e-6  # two-sided tail probability used for chi-square / F bounds


def _upper_indices(n):
    return np.triu_indices(n, k=1)


def _goe_coordinates(S):
    """Coordinates of symmetric S in the basis {E_ii} ∪ {(E_ij+E_ji)/√2 : i<j}."""
    iu = _upper_indices(S.shape[-1])
    diag = np.diagonal(S, axis1=-2, axis2=-1)
    off = math.sqrt(2.0) * S[..., iu[0], iu[1]]
    return diag, off


def _assert_standard_normal(z, label=""):
    """z looks i.i.d. N(0, 1): mean, chi-square variance bound and KS test."""
    n = z.size
    assert abs(z.mean()) < 6.0 / math.sqrt(n), label
    lo = stats.chi2.ppf(TAIL / 2, n) / n
    hi = stats.chi2.isf(TAIL / 2, n) / n
    second_moment = float(np.mean(z * z))  # the mean is known to be 0
    assert lo < second_moment < hi, (label, second_moment, lo, hi)
    assert stats.kstest(z, "norm").pvalue > 1e-3, label


def _assert_same_variance(a, b, label=""):
    """Two zero-mean samples have the same variance (F test at tail 1e-6)."""
    ratio = np.mean(a * a) / np.mean(b * b)
    lo = stats.f.ppf(TAIL / 2, a.size, b.size)
    hi = stats.f.isf(TAIL / 2, a.size, b.size)
    assert lo < ratio < hi, (label, ratio, lo, hi)


# ==========================================================================
# make_generator
# ==========================================================================
def test_make_generator_none_is_fresh_entropy():
    """random_state=None gives a new OS-seeded generator each time (different draws)."""
    a = make_generator(None).standard_normal(8)
    b = make_generator(None).standard_normal(8)
    assert isinstance(make_generator(None), np.random.Generator)
    assert not np.array_equal(a, b)
    assert make_generator(None) is not make_generator(None)


@pytest.mark.parametrize("seed", [0, 42, np.int64(7), 2**40])
def test_make_generator_int_is_reproducible(seed):
    """An int (Python or NumPy) seeds a new generator reproducibly."""
    a = make_generator(seed).standard_normal(8)
    b = make_generator(seed).standard_normal(8)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(
        a, np.random.default_rng(int(seed)).standard_normal(8)
    )


def test_make_generator_different_ints_differ():
    """Different seeds give different streams."""
    assert not np.array_equal(
        make_generator(0).standard_normal(8), make_generator(1).standard_normal(8)
    )


def test_make_generator_randomstate_is_advanced():
    """A RandomState is consumed: two generators made from it differ, and the whole
    sequence is reproducible from the RandomState's seed."""
    rs = np.random.RandomState(3)
    state_before = rs.get_state()[1].copy()
    a = make_generator(rs).standard_normal(8)
    assert not np.array_equal(rs.get_state()[1], state_before)
    b = make_generator(rs).standard_normal(8)
    assert not np.array_equal(a, b)

    rs2 = np.random.RandomState(3)
    np.testing.assert_array_equal(make_generator(rs2).standard_normal(8), a)
    np.testing.assert_array_equal(make_generator(rs2).standard_normal(8), b)


def test_make_generator_passes_generator_through():
    """A Generator is used as is (same object, its state is shared)."""
    g = np.random.default_rng(5)
    assert make_generator(g) is g


@pytest.mark.parametrize(
    "bad", ["0", 1.5, True, False, [1, 2], np.bool_(True), object()]
)
def test_make_generator_rejects_bad_values(bad):
    """Strings, floats, bools, lists and arbitrary objects raise ValueError."""
    with pytest.raises(ValueError):
        make_generator(bad)


def test_make_generator_rejects_negative_seed():
    """A negative int is not a valid seed (NumPy's ValueError)."""
    with pytest.raises(ValueError):
        make_generator(-1)


# ==========================================================================
# dense_noise
# ==========================================================================
def test_dense_noise_shape_and_dtype():
    """dense_noise returns float64 of the requested shape (int or tuple)."""
    rng = make_generator(0)
    assert dense_noise(rng, 5, 1.0).shape == (5,)
    out = dense_noise(rng, (3, 4), 2.0)
    assert out.shape == (3, 4)
    assert out.dtype == np.float64
    assert dense_noise(rng, (2, 3, 4), 1.0).shape == (2, 3, 4)


def test_dense_noise_is_sigma_times_standard_normal():
    """dense_noise is exactly σ times the generator's standard normals."""
    sigma = 2.75
    np.testing.assert_array_equal(
        dense_noise(make_generator(9), (7, 3), sigma),
        make_generator(9).standard_normal((7, 3)) * sigma,
    )


def test_dense_noise_distribution():
    """Entries of dense_noise are i.i.d. N(0, σ²)."""
    sigma = 3.5
    z = dense_noise(make_generator(2024), (400, 250), sigma).ravel() / sigma
    _assert_standard_normal(z, "dense")


def test_dense_noise_zero_sigma():
    """σ = 0 gives exact zeros."""
    np.testing.assert_array_equal(
        dense_noise(make_generator(0), (3, 3), 0.0), np.zeros((3, 3))
    )


@pytest.mark.parametrize("kernel", ["dense", "goe", "gue"])
@pytest.mark.parametrize("bad_sigma", [-1.0, float("nan"), float("inf"), 1e-310,
                                       5e-324])
def test_kernels_reject_bad_sigma(kernel, bad_sigma):
    """Negative, NaN, infinite and subnormal σ raise ValueError in every
    kernel (issue 30 §3: a subnormal σ is noise the analysis did not plan)."""
    rng = make_generator(0)
    with pytest.raises(ValueError):
        if kernel == "dense":
            dense_noise(rng, (3, 3), bad_sigma)
        elif kernel == "goe":
            goe_noise(rng, 3, bad_sigma)
        else:
            gue_noise(rng, 3, bad_sigma)


@pytest.mark.parametrize("sensitivity, mu", [
    (1e-200, 1e200),  # underflows to 0
    (1e-300, 1e10),  # subnormal
    (1e240, 1e-100),  # overflows
    (0.0, 1.0),
    (math.nan, 1.0),
])
def test_noise_scale_refuses_a_scale_that_is_not_a_positive_normal_number(
        sensitivity, mu):
    """Issue 30 §3: a finite μ never gets σ = 0 or a subnormal σ (the release
    would be exact, or its noise a few ulps): noise_scale raises."""
    with pytest.raises(ValueError, match="normal"):
        noise_scale(sensitivity, mu)


def test_noise_scale_of_the_non_private_fit_and_of_the_extremes():
    assert noise_scale(math.inf, math.inf) == 0.0
    tiny = np.finfo(np.float64).tiny
    assert noise_scale(tiny, 1.0) == tiny
    assert noise_scale(math.sqrt(2.0) * 1e-200, 1e6) == pytest.approx(
        math.sqrt(2.0) * 1e-206, rel=1e-15)


# ==========================================================================
# GOE kernel
# ==========================================================================
@pytest.mark.parametrize("n", [1, 2, 5, 64])
def test_goe_noise_is_exactly_symmetric(n):
    """S == Sᵀ bit for bit, float64, shape (n, n)."""
    S = goe_noise(make_generator(n), n, 1.7)
    assert S.shape == (n, n)
    assert S.dtype == np.float64
    assert np.array_equal(S, S.T)


def test_goe_noise_definition():
    """S = σ (G + Gᵀ)/2 with G the generator's next n×n standard normals."""
    sigma, n = 0.8, 6
    G = make_generator(11).standard_normal((n, n))
    np.testing.assert_allclose(
        goe_noise(make_generator(11), n, sigma), sigma * (G + G.T) / 2, rtol=1e-15
    )


def test_goe_coordinates_are_iid_normal_sigma_squared():
    """In the orthonormal basis of symmetric matrices the coordinates are N(0, σ²):
    pooled mean, chi-square variance bound and KS test, diagonal and off-diagonal."""
    sigma, n, draws = 2.5, 40, 150
    rng = make_generator(20240601)
    S = np.stack([goe_noise(rng, n, sigma) for _ in range(draws)])
    diag, off = _goe_coordinates(S)
    diag, off = diag.ravel() / sigma, off.ravel() / sigma  # 6 000 and 117 000 samples
    _assert_standard_normal(diag, "diagonal")
    _assert_standard_normal(off, "off-diagonal")
    _assert_standard_normal(np.concatenate([diag, off]), "all coordinates")
    _assert_same_variance(diag, off, "diagonal vs off-diagonal")


def test_goe_raw_entries_variances():
    """Raw entries: diagonal N(0, σ²), off-diagonal N(0, σ²/2) (docs/privacy.rst §4)."""
    sigma, n, draws = 0.3, 30, 200
    rng = make_generator(77)
    S = np.stack([goe_noise(rng, n, sigma) for _ in range(draws)])
    iu = _upper_indices(n)
    _assert_standard_normal(np.diagonal(S, axis1=1, axis2=2).ravel() / sigma, "diag")
    _assert_standard_normal(
        S[:, iu[0], iu[1]].ravel() / (sigma / math.sqrt(2.0)), "off"
    )


def test_goe_distinct_coordinates_are_uncorrelated():
    """Across draws, each coordinate has variance σ² and distinct coordinates have
    near-zero correlation (|r| < 6/√draws for all 45 × 44 / 2 pairs)."""
    sigma, n, draws = 1.3, 9, 8000  # 9 diagonal + 36 off-diagonal = 45 coordinates
    rng = make_generator(4321)
    S = np.stack([goe_noise(rng, n, sigma) for _ in range(draws)])
    diag, off = _goe_coordinates(S)
    coords = np.concatenate([diag, off], axis=1) / sigma  # (draws, 45)
    # per-coordinate variance: chi-square bound, Bonferroni over 45 coordinates
    per_coord = np.mean(coords * coords, axis=0)
    lo = stats.chi2.ppf(TAIL / 90, draws) / draws
    hi = stats.chi2.isf(TAIL / 90, draws) / draws
    assert np.all((lo < per_coord) & (per_coord < hi)), per_coord
    corr = np.corrcoef(coords, rowvar=False)
    off_diag = corr[~np.eye(corr.shape[0], dtype=bool)]
    assert np.max(np.abs(off_diag)) < 6.0 / math.sqrt(draws)
    # in particular S_ij and S_ji are one coordinate, not two: exact symmetry
    assert np.array_equal(S, np.swapaxes(S, 1, 2))


def test_goe_scales_linearly_in_sigma():
    """Same seed, σ scaled by c: the kernel is scaled by c (to rounding)."""
    base = goe_noise(make_generator(3), 7, 1.0)
    np.testing.assert_allclose(
        goe_noise(make_generator(3), 7, 4.0), 4.0 * base, rtol=1e-15
    )
    np.testing.assert_array_equal(
        goe_noise(make_generator(3), 7, 0.0), np.zeros((7, 7))
    )


# ==========================================================================
# GUE kernel
# ==========================================================================
@pytest.mark.parametrize("n", [1, 2, 5, 64])
def test_gue_noise_is_exactly_hermitian(n):
    """H == Hᴴ bit for bit, complex128, shape (n, n)."""
    H = gue_noise(make_generator(n), n, 0.9)
    assert H.shape == (n, n)
    assert H.dtype == np.complex128
    assert np.array_equal(H, H.conj().T)


@pytest.mark.parametrize("seed", [0, 1, 123])
@pytest.mark.parametrize("sigma", [0.5, 3.0])
def test_gue_real_part_is_goe_from_same_seed(seed, sigma):
    """Re H equals goe_noise drawn from the same seed, exactly."""
    n = 12
    H = gue_noise(make_generator(seed), n, sigma)
    S = goe_noise(make_generator(seed), n, sigma)
    assert np.array_equal(H.real, S)


def test_gue_imaginary_part_is_antisymmetric_with_zero_diagonal():
    """Im H == −(Im H)ᵀ exactly and its diagonal is exactly 0."""
    H = gue_noise(make_generator(8), 20, 1.1)
    assert np.array_equal(H.imag, -H.imag.T)
    assert np.all(np.diag(H.imag) == 0.0)
    assert np.all(np.diag(H).imag == 0.0)


def test_gue_imaginary_entries_are_normal_half_sigma_squared():
    """Off-diagonal Im H_ij ~ N(0, σ²/2), i.e. √2 Im H_ij / σ is standard normal,
    with the same variance as the off-diagonal GOE coordinates of Re H."""
    sigma, n, draws = 1.7, 40, 150
    rng = make_generator(99)
    H = np.stack([gue_noise(rng, n, sigma) for _ in range(draws)])
    iu = _upper_indices(n)
    im = H.imag[:, iu[0], iu[1]].ravel() * math.sqrt(2.0) / sigma
    _assert_standard_normal(im, "imaginary")
    _, off = _goe_coordinates(H.real)
    _assert_same_variance(im, off.ravel() / sigma, "Im vs Re coordinates")


def test_gue_imaginary_part_independent_of_real_part():
    """Im and Re coordinates of H are uncorrelated across draws."""
    sigma, n, draws = 1.0, 6, 8000  # 15 upper entries each
    rng = make_generator(5150)
    H = np.stack([gue_noise(rng, n, sigma) for _ in range(draws)])
    iu = _upper_indices(n)
    re = H.real[:, iu[0], iu[1]]
    im = H.imag[:, iu[0], iu[1]]
    cross = np.corrcoef(np.concatenate([re, im], axis=1), rowvar=False)[:15, 15:]
    assert np.max(np.abs(cross)) < 6.0 / math.sqrt(draws)


@pytest.mark.parametrize("d, block", [(1, 1 << 22), (37, 1 << 22), (37, 50), (37, 7)])
def test_in_place_kernels_are_the_dense_ones_without_a_second_matrix(d, block,
                                                                    monkeypatch):
    """add_goe_noise / add_gue_noise draw the same normals as goe_noise /
    gue_noise, row block by row block, into the matrix itself: equal up to
    the rounding of the additions, exactly symmetric (Hermitian), and the
    generator left in the same state."""
    from sklearn_dppca import noise
    from sklearn_dppca.noise import add_goe_noise, add_gue_noise

    monkeypatch.setattr(noise, "_BLOCK_ENTRIES", block)
    base = np.arange(d * d, dtype=float).reshape(d, d)
    base = base + base.T
    rng_a, rng_b = make_generator(3), make_generator(3)
    got = add_goe_noise(rng_a, base.copy(), 1.3)
    want = base + goe_noise(rng_b, d, 1.3)
    assert np.array_equal(got, got.T)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-12)
    assert rng_a.standard_normal() == rng_b.standard_normal()
    rng_a, rng_b = make_generator(4), make_generator(4)
    got = add_gue_noise(rng_a, base.astype(complex), 0.7)
    want = base + gue_noise(rng_b, d, 0.7)
    assert np.array_equal(got, got.conj().T)
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-12)
    assert rng_a.standard_normal() == rng_b.standard_normal()


def test_implicit_kernel_scales_each_column_of_its_product():
    """One scale for all of V rounded a column 1e-40 times the largest to
    (nearly) 0 in single precision, and its product had no noise (review
    59): every column's relative error is now single precision's."""
    d = 200
    S = ImplicitGOE(make_generator(0), d, 1.0, block=64)
    dense = S @ np.eye(d)
    V = np.random.default_rng(1).standard_normal((d, 3)) * [4.0, 3e-40, 4e-50]
    got, exact = S @ V, dense @ V
    error = np.linalg.norm(got - exact, axis=0) / np.linalg.norm(exact, axis=0)
    assert error.max() < 1e-5
