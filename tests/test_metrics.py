"""Tests of the utility measures (docs/privacy.rst §7) on hand-built cases."""

import numpy as np
import pytest
from scipy.linalg import hadamard, subspace_angles

from sklearn_dppca.metrics import (
    captured_variance,
    coherence,
    principal_angle_sin,
    projection_distance,
    rank_k_covariance_error,
)


def random_basis(rng, k, d):
    """(k, d) basis with orthonormal rows."""
    q, _ = np.linalg.qr(rng.standard_normal((d, k)))
    return q.T


def random_rotation(rng, k):
    q, _ = np.linalg.qr(rng.standard_normal((k, k)))
    return q


def rotated_pair(angles, d=7):
    """Two (k, d) bases whose principal angles are exactly ``angles``.

    Row j of the first is e_j; row j of the second turns it by angles[j]
    towards e_{k+j}.
    """
    k = len(angles)
    e = np.eye(d)
    ref = e[:k]
    comp = np.array(
        [np.cos(t) * e[j] + np.sin(t) * e[k + j] for j, t in enumerate(angles)]
    )
    return comp, ref


# --------------------------------------------------------------------------
# principal_angle_sin and projection_distance
# --------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2, 3])
def test_identical_subspaces_are_at_distance_zero(k):
    rng = np.random.default_rng(k)
    V = random_basis(rng, k, 9)
    same = random_rotation(rng, k) @ V  # another basis of the same span
    assert principal_angle_sin(same, V) == pytest.approx(0.0, abs=1e-14)
    assert projection_distance(same, V) == pytest.approx(0.0, abs=1e-14)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_orthogonal_subspaces(k):
    e = np.eye(2 * k + 1)
    assert principal_angle_sin(e[:k], e[k : 2 * k]) == 1.0
    assert projection_distance(e[:k], e[k : 2 * k]) == pytest.approx(np.sqrt(2 * k))


@pytest.mark.parametrize("t", [1e-9, 1e-4, 0.3, np.pi / 6, 1.2, np.pi / 2])
def test_rotation_by_a_known_angle(t):
    comp, ref = rotated_pair([t, 0.0])
    assert principal_angle_sin(comp, ref) == pytest.approx(np.sin(t), rel=1e-9)
    assert projection_distance(comp, ref) == pytest.approx(
        np.sqrt(2) * np.sin(t), rel=1e-9
    )


def test_several_angles():
    angles = [0.1, 0.7, 0.4]
    comp, ref = rotated_pair(angles)
    sines = np.sin(angles)
    assert principal_angle_sin(comp, ref) == pytest.approx(sines.max(), rel=1e-12)
    assert projection_distance(comp, ref) == pytest.approx(
        np.sqrt(2 * np.sum(sines**2)), rel=1e-12
    )


def test_invariant_to_sign_and_rotation_of_either_basis():
    rng = np.random.default_rng(1)
    comp, ref = random_basis(rng, 3, 10), random_basis(rng, 3, 10)
    sin0, dist0 = principal_angle_sin(comp, ref), projection_distance(comp, ref)
    signs = np.diag([-1.0, 1.0, -1.0])
    for a, b in [
        (signs @ comp, ref),
        (comp, signs @ ref),
        (random_rotation(rng, 3) @ comp, random_rotation(rng, 3) @ ref),
    ]:
        assert principal_angle_sin(a, b) == pytest.approx(sin0, rel=1e-12)
        assert projection_distance(a, b) == pytest.approx(dist0, rel=1e-12)
    # symmetric when both have k rows
    assert principal_angle_sin(ref, comp) == pytest.approx(sin0, rel=1e-12)
    assert projection_distance(ref, comp) == pytest.approx(dist0, rel=1e-12)


def test_agrees_with_scipy_and_the_explicit_projections():
    rng = np.random.default_rng(2)
    for k, d in [(1, 5), (3, 8), (4, 30)]:
        comp, ref = random_basis(rng, k, d), random_basis(rng, k, d)
        largest = subspace_angles(comp.T, ref.T).max()
        assert principal_angle_sin(comp, ref) == pytest.approx(np.sin(largest))
        explicit = np.linalg.norm(comp.T @ comp - ref.T @ ref)
        assert projection_distance(comp, ref) == pytest.approx(explicit, rel=1e-12)


def test_bounds_on_random_subspaces():
    rng = np.random.default_rng(3)
    for _ in range(20):
        k = int(rng.integers(1, 5))
        comp, ref = random_basis(rng, k, 8), random_basis(rng, k, 8)
        s, dist = principal_angle_sin(comp, ref), projection_distance(comp, ref)
        assert 0.0 <= s <= 1.0
        assert np.sqrt(2) * s - 1e-12 <= dist <= np.sqrt(2 * k) * s + 1e-12


def test_bases_of_different_sizes():
    e = np.eye(6)
    # components contain the reference: 0; reference larger: 1
    assert principal_angle_sin(e[:3], e[:2]) == pytest.approx(0.0, abs=1e-15)
    assert principal_angle_sin(e[:2], e[:3]) == 1.0
    # nested subspaces of dimensions 2 and 3 are √1 apart
    assert projection_distance(e[:3], e[:2]) == pytest.approx(1.0)


def test_float32_bases_are_accepted():
    rng = np.random.default_rng(4)
    V = random_basis(rng, 3, 500).astype(np.float32)
    assert principal_angle_sin(V, V) < 1e-5


@pytest.mark.parametrize("metric", [principal_angle_sin, projection_distance])
def test_subspace_metrics_reject_bad_input(metric):
    e = np.eye(4)
    with pytest.raises(ValueError, match="2-D"):
        metric(e[0], e[:1])
    with pytest.raises(ValueError, match="finite"):
        metric(np.where(e[:2] == 1, np.nan, 0.0), e[:2])
    with pytest.raises(ValueError, match="finite"):
        metric(e[:2], np.where(e[:2] == 1, np.inf, 0.0))
    with pytest.raises(ValueError, match="same number of features"):
        metric(e[:2], np.eye(5)[:2])
    with pytest.raises(ValueError, match="orthonormal rows"):
        metric(2 * e[:2], e[:2])
    with pytest.raises(ValueError, match="orthonormal rows"):
        metric(np.ones((2, 4)) / 2, e[:2])
    with pytest.raises(ValueError, match="pass its transpose"):
        metric(e[:, :2], e[:, :2])  # (d, k) column bases
    with pytest.raises(ValueError, match="real"):
        metric(e[:2] * 1j, e[:2])
    with pytest.raises(ValueError, match="empty"):
        metric(np.empty((0, 4)), e[:2])
    with pytest.raises(ValueError, match="numeric"):
        metric(np.array([["a", "b"]]), e[:1, :2])


def test_orthonormality_tolerance_is_adjustable():
    e = np.eye(3)[:2] * (1 + 1e-4)
    with pytest.raises(ValueError, match="orthonormal"):
        principal_angle_sin(e, np.eye(3)[:2])
    assert principal_angle_sin(e, np.eye(3)[:2], atol=1e-3) < 1e-3
    for atol in (-1.0, np.nan, np.inf, "1e-3", True):
        with pytest.raises(ValueError, match="atol must be"):
            principal_angle_sin(e, np.eye(3)[:2], atol=atol)
    # float16's 10 sqrt(d) eps is 0.1 at d = 100: a row of norm 1.04 passed,
    # and its angle with its own span read 0.08 (review 48)
    long = (np.eye(100)[:1] * 1.04).astype(np.float16)
    with pytest.raises(ValueError, match="orthonormal"):
        principal_angle_sin(long, np.eye(100)[:1])
    unit = np.eye(100)[:1].astype(np.float16)
    assert principal_angle_sin(unit, np.eye(100)[:1]) == 0.0


# --------------------------------------------------------------------------
# rank_k_covariance_error
# --------------------------------------------------------------------------
def random_covariance(rng, d, eigenvalues=None):
    q = random_rotation(rng, d)
    w = rng.uniform(0.1, 3.0, d) if eigenvalues is None else np.asarray(eigenvalues)
    return (q * w) @ q.T, q, w


def test_rank_k_error_of_the_best_approximation_is_zero():
    rng = np.random.default_rng(5)
    cov, q, w = random_covariance(rng, 6, [5.0, 4.0, 3.0, 2.0, 1.0, 0.5])
    best = (q[:, :2] * w[:2]) @ q[:, :2].T
    assert rank_k_covariance_error(best, cov, 2) == pytest.approx(0.0, abs=1e-12)
    # the whole covariance is M_k + the tail, at distance ‖tail‖_F
    assert rank_k_covariance_error(cov, cov, 2) == pytest.approx(np.linalg.norm(w[2:]))


def test_rank_k_error_brute_force_and_relative():
    rng = np.random.default_rng(6)
    cov, q, w = random_covariance(rng, 7)
    order = np.argsort(w)[::-1][:3]
    best = (q[:, order] * w[order]) @ q[:, order].T
    psi = rng.standard_normal((7, 7))
    expected = np.linalg.norm(psi - best)
    assert rank_k_covariance_error(psi, cov, 3) == pytest.approx(expected)
    assert rank_k_covariance_error(psi, cov, 3, relative=True) == pytest.approx(
        expected / np.linalg.norm(w[order])
    )
    assert rank_k_covariance_error(np.zeros((7, 7)), cov, 3, relative=True) == (
        pytest.approx(1.0)
    )


def test_rank_k_error_rejects_bad_input():
    cov = np.diag([2.0, 1.0, 0.5])
    with pytest.raises(ValueError, match="k must be an integer in \\[1, 3\\]"):
        rank_k_covariance_error(cov, cov, 0)
    with pytest.raises(ValueError, match="k must be"):
        rank_k_covariance_error(cov, cov, 4)
    with pytest.raises(ValueError, match="k must be"):
        rank_k_covariance_error(cov, cov, 1.0)
    with pytest.raises(ValueError, match="k must be"):
        rank_k_covariance_error(cov, cov, True)
    with pytest.raises(ValueError, match="same shape"):
        rank_k_covariance_error(np.eye(2), cov, 1)
    with pytest.raises(ValueError, match="square"):
        rank_k_covariance_error(cov, np.ones((3, 2)), 1)
    with pytest.raises(ValueError, match="symmetric"):
        rank_k_covariance_error(cov, np.triu(np.ones((3, 3))), 1)
    with pytest.raises(ValueError, match="finite"):
        rank_k_covariance_error(np.full((3, 3), np.nan), cov, 1)
    with pytest.raises(ValueError, match="non-zero"):
        rank_k_covariance_error(cov, np.zeros((3, 3)), 1, relative=True)


# --------------------------------------------------------------------------
# captured_variance
# --------------------------------------------------------------------------
def test_captured_variance_hand_cases():
    cov = np.diag([4.0, 3.0, 2.0, 1.0])
    e = np.eye(4)
    assert captured_variance(e[:2], cov) == 1.0
    assert captured_variance(e[[3, 2]], cov) == pytest.approx(3.0 / 7.0)
    assert captured_variance(e[[3, 2]], cov, reference=e[[2, 1]]) == pytest.approx(
        3.0 / 5.0
    )
    # a 45° rotation of e1 towards e4 captures (4 + 1)/2 + 3 of 7
    comp = np.array([[1, 0, 0, 1] / np.sqrt(2), e[1]])
    assert captured_variance(comp, cov) == pytest.approx(5.5 / 7.0)


def test_captured_variance_invariance_and_bounds():
    rng = np.random.default_rng(7)
    cov, q, w = random_covariance(rng, 8)
    top = q[:, np.argsort(w)[::-1][:3]].T
    assert captured_variance(random_rotation(rng, 3) @ top, cov) == pytest.approx(1.0)
    for _ in range(10):
        comp = random_basis(rng, 3, 8)
        ratio = captured_variance(comp, cov)
        assert 0.0 <= ratio <= 1.0
        assert captured_variance(-comp[::-1], cov) == pytest.approx(ratio)
        assert captured_variance(comp, cov, reference=top) == pytest.approx(ratio)


def test_captured_variance_rejects_bad_input():
    e = np.eye(3)
    with pytest.raises(ValueError, match=r"\(3, 3\)"):
        captured_variance(e[:1], np.eye(4))
    with pytest.raises(ValueError, match="no positive variance"):
        captured_variance(e[:1], np.zeros((3, 3)))
    with pytest.raises(ValueError, match="orthonormal rows"):
        captured_variance(e[:1], np.eye(3), reference=2 * e[:1])
    with pytest.raises(ValueError, match="same number of features"):
        captured_variance(e[:1], np.eye(3), reference=np.eye(4)[:1])
    with pytest.raises(ValueError, match="symmetric"):
        captured_variance(e[:1], np.triu(np.ones((3, 3))))


# --------------------------------------------------------------------------
# coherence
# --------------------------------------------------------------------------
def test_coherence_of_data_is_that_of_its_left_singular_vectors():
    rng = np.random.default_rng(8)
    n, d = 200, 6
    U, _ = np.linalg.qr(rng.standard_normal((n, d)))
    U[:, 1] = 0.0
    U[7, 1] = 1.0  # a spike on the second direction
    U, _ = np.linalg.qr(U)
    X = (U * [6.0, 5.0, 4.0, 3.0, 2.0, 1.0]) @ random_rotation(rng, d)
    spike = np.abs(U[:, :2]).max()
    assert spike > 0.99  # QR kept the spike, up to the part along column 0
    assert coherence(X, n_components=1) == pytest.approx(np.abs(U[:, 0]).max())
    assert coherence(X, n_components=2) == pytest.approx(spike)
    assert coherence(X) == pytest.approx(np.abs(U).max())
    assert coherence(-3.0 * X, n_components=1) == pytest.approx(coherence(X, 1))


def test_coherence_of_an_orthonormal_basis_is_its_largest_entry():
    rng = np.random.default_rng(9)
    U, _ = np.linalg.qr(rng.standard_normal((300, 4)))
    assert coherence(U) == np.abs(U).max()
    assert coherence(U, n_components=2) == np.abs(U[:, :2]).max()


def test_coherence_extremes():
    n = 64
    H = hadamard(n) / np.sqrt(n)  # flattest possible: every |U_ij| = 1/√n
    assert coherence(H) == pytest.approx(1 / np.sqrt(n))
    assert coherence(H[:, :5] * [5.0, 4.0, 3.0, 2.0, 1.0]) == pytest.approx(
        1 / np.sqrt(n)
    )
    assert coherence(np.eye(n)) == 1.0
    assert coherence(np.diag(np.arange(1.0, 6.0))) == 1.0


def test_coherence_bounds_and_gaussian_level():
    rng = np.random.default_rng(10)
    n, d = 5000, 8
    X = rng.standard_normal((n, d))
    c = coherence(X)
    assert 1 / np.sqrt(n) <= c <= 1.0
    expected = np.sqrt(2 * np.log(n * d) / n)
    assert expected / 2 < c < 2 * expected


def test_coherence_ignores_the_null_space():
    # rank 1: the 2nd left singular vector is arbitrary and must not count
    X = np.outer(np.ones(50), [1.0, 2.0])
    assert coherence(X) == pytest.approx(1 / np.sqrt(50))


def test_coherence_does_not_centre():
    X = np.ones((100, 3))
    X[:, 1:] = np.random.default_rng(11).standard_normal((100, 2)) * 1e-3
    # the constant column dominates: U_1 = 1/√n, no centring
    assert coherence(X, n_components=1) == pytest.approx(0.1, rel=1e-3)


def test_coherence_rejects_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        coherence(np.ones(5))
    with pytest.raises(ValueError, match="finite"):
        coherence(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError, match="zero"):
        coherence(np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"n_components must be an integer in \[1, 2"):
        coherence(np.eye(4)[:, :2], n_components=3)
    with pytest.raises(ValueError, match="n_components"):
        coherence(np.eye(4), n_components=0)


def test_measures_do_not_overflow_near_the_largest_float():
    """Each measure is homogeneous in the covariance (or the rows): entries
    near the largest float give the measure of the same matrix scaled down,
    with no overflow warning."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 6))
    cov = A @ A.T
    cov /= np.abs(cov).max()
    basis = random_basis(rng, 2, 6)
    psi = (basis.T * [2.0, 1.0]) @ basis
    X = rng.standard_normal((20, 4))
    with np.errstate(all="raise"):
        for scale in (1e160, 1e300, 1e307):
            assert captured_variance(basis, scale * cov) == pytest.approx(
                captured_variance(basis, cov), rel=1e-12)
            assert rank_k_covariance_error(
                scale * psi, scale * cov, 2, relative=True) == pytest.approx(
                rank_k_covariance_error(psi, cov, 2, relative=True), rel=1e-12)
            assert coherence(scale * X) == pytest.approx(coherence(X), rel=1e-12)
        assert rank_k_covariance_error(1e300 * psi, 1e300 * cov, 2) == pytest.approx(
            1e300 * rank_k_covariance_error(psi, cov, 2), rel=1e-12)


def test_sparse_input_is_refused_by_name_and_object_numbers_are_read():
    from scipy import sparse

    rng = np.random.default_rng(1)
    basis = random_basis(rng, 2, 5)
    with pytest.raises(ValueError, match="dense array; got a sparse csr_matrix"):
        principal_angle_sin(sparse.csr_matrix(basis), basis)
    with pytest.raises(ValueError, match="X must be a dense array"):
        coherence(sparse.csr_array(rng.standard_normal((10, 3))))
    same = principal_angle_sin(basis.astype(object), basis)
    assert same == pytest.approx(0.0, abs=1e-7)
    with pytest.raises(ValueError, match="numeric"):
        principal_angle_sin(np.array([["a"] * 5] * 2, dtype=object), basis)
