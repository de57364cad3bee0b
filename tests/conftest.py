import sys

import numpy as np
import pytest

from sklearn_dppca import _defaults


@pytest.fixture(autouse=True)
def _forget_accountant_blocks():
    """Each test starts in a process where no ``with accountant:`` block has
    been entered: a worker thread with no block of its own resolves its
    default from every block entered in the process (get_default_accountant),
    so one test's blocks would otherwise decide another's."""
    yield
    with _defaults._default_lock:
        _defaults._block_accountants.clear()


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



#: pandas dtypes of a DataFrame column: numbers (accepted, as float64; the
#: extension dtypes can hold a missing value) and the rest (refused, naming the
#: column), for the in-memory and the Dask tests.
EXTENSION_DTYPES = ["Float64", "Int64", "boolean"]
NUMERIC_DTYPES = EXTENSION_DTYPES + ["int64", "bool", "float32"]
NON_NUMERIC_DTYPES = ["str", "string", "category", "category-of-numbers"]


def typed_frame(dtype, n=300, missing=False, seed=0):
    """A DataFrame of float columns ``"x"``, ``"y"`` and a column ``"z"`` of ``dtype``.

    Returns the frame and its values as float64 (``None`` when ``z`` is not
    numeric). ``missing=True`` (extension dtypes) makes ``z[5]`` ``pd.NA``.
    """
    import pandas as pd

    rng = np.random.default_rng(seed)
    x, y, raw = rng.normal(size=(3, n))
    numeric = {"Float64": raw, "float32": raw, "Int64": np.round(3 * raw),
               "int64": np.round(3 * raw), "boolean": raw > 0, "bool": raw > 0}
    if dtype in numeric:
        z = pd.Series(numeric[dtype]).astype(dtype)
        if missing:
            z[5] = pd.NA
    elif dtype == "category-of-numbers":
        z = pd.Series(pd.Categorical(np.round(3 * raw)))
    else:
        z = pd.Series(np.where(raw > 0, "a", "b"), dtype=dtype)
    frame = pd.DataFrame({"x": x, "y": y, "z": z})
    values = frame.astype("float64").to_numpy() if dtype in numeric else None
    return frame, values


def generators_in_pickle(obj):
    """Names of the random generators (or their states and seeds) that a
    pickle of ``obj`` carries."""
    import io
    import pickle

    kinds = (np.random.Generator, np.random.BitGenerator,
             np.random.SeedSequence, np.random.RandomState)
    found = []

    class Scan(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, kinds):
                found.append(type(obj).__name__)

    Scan(io.BytesIO()).dump(obj)
    return found


class interrupted_at:
    """Raise ``KeyboardInterrupt`` (a Ctrl-C's) at the first call of the
    function named ``name`` made from a function named ``caller``, inside
    the ``with`` block: an interrupt landing at that exact point."""

    def __init__(self, name, caller):
        self.name, self.caller = name, caller

    def _trace(self, frame, event, arg):
        if (event == "call" and frame.f_code.co_name == self.name
                and frame.f_back is not None
                and frame.f_back.f_code.co_name == self.caller):
            sys.settrace(None)
            raise KeyboardInterrupt(f"at {self.name} from {self.caller}")

    def __enter__(self):
        sys.settrace(self._trace)
        return self

    def __exit__(self, *exc_info):
        sys.settrace(None)
