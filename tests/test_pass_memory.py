"""Memory plans that count what runs at large k: the dense path's truncated
solver (its d × p blocks) and the threads of a pass over the rows (each
holding its block's products and its part of the sum), measured as the peak
RSS of a fit in a fresh interpreter; and the threaded pass's own threads."""

import joblib
import numpy as np
import pytest

from sklearn_dppca._rows import CentredRows
from sklearn_dppca._stats import first_pass


def test_a_threaded_pass_runs_in_threads_whatever_joblibs_backend():
    """The pass ran in joblib's Parallel(prefer="threads"), which a user's
    backend overrides: under loky the first pass computed the rows' scales
    in worker processes, and the next pass clipped with uninitialised ones
    (differences of 1.4 at R = 0.05)."""
    import sklearn_dppca._blocks as blocks

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 50))
    W = rng.normal(size=(50, 1, 3)) * 0.1

    def two_passes(n_jobs):
        norms = first_pass(X, 5.0, with_sum=False).sq_norms
        rows = CentredRows(X, 5.0, X.mean(0), norms)
        rows.clipped_products(W, np.array([0.05]), n_jobs)
        return rows.clipped_products(W, np.array([0.05]), n_jobs)[0]

    expected = two_passes(None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(blocks, "_BLOCK_BYTES", 8 * 50 * 100)
        patch.setattr(blocks, "_MIN_BLOCK_ROWS", 100)
        with joblib.parallel_config(backend="loky"):
            threaded = two_passes(2)
    np.testing.assert_allclose(threaded, expected, rtol=1e-12, atol=1e-15)
