import numpy as np
import pytest


@pytest.fixture
def planted():
    """Rows with a planted 3-dimensional principal subspace, norms ≤ 1."""
    return make_planted(n=20_000, d=12, seed=0)


def make_planted(n, d, seed, top=(0.20, 0.12, 0.08), rest=0.004, shift=0.3):
    """Gaussian rows with covariance ``V diag(top) Vᵀ + rest·I``, shifted, clipped to 1.

    Returns ``X`` and the planted orthonormal basis ``V`` (d × k).
    """
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.normal(size=(d, d)))
    scales = np.sqrt(np.r_[top, np.full(d - len(top), rest)])
    X = (rng.normal(size=(n, d)) * scales) @ basis.T
    X += shift * basis[:, -1]  # a mean orthogonal to the planted subspace
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    X /= np.maximum(norms, 1.0)
    return X, basis[:, : len(top)]
