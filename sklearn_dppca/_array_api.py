r"""Array API inputs (PyTorch, CuPy, array_api_strict): statistics on their
device.

Under ``sklearn.config_context(array_api_dispatch=True)``, an input that is
an array of a non-NumPy Array API namespace is read by :class:`ArrayAPIRows`,
a plain blocked implementation of the engine interface that
:class:`~sklearn_dppca._rows.InMemoryRows` and
:class:`~sklearn_dppca._dask.ChunkedRows` also implement (``largest_norm``,
``first_pass``, ``gram``, ``rows``). Every pass reads blocks of rows with the
namespace's own functions, on the input's device; only O(d) and O(d²)
results ever cross to the host. A float32 input's blocks are computed in the
device's widest float (float64 where it has one), as the NumPy engine
computes float32 rows in float64: in float32, a sum of millions of rows
rounds by steps as large as one row's contribution, so that replacing one
row moved the computed mean's sum by 1.18 times its sensitivity and the Gram
matrix by 1.06 times its own (10⁷ rows of 2 features, review 58), and a
Gram matrix beyond float32's range overflowed after the charge. The fitted
attributes keep the input's precision.

What runs where:

- device: the row norms and the finiteness check, the clipped sum, the
  centred clipped Gram matrix :math:`\sum y y^\top`, the clipped products of
  CoherentPowerPCA's power steps, the eigendecomposition of the noisy Gram
  matrix (PrivatePCA, ComplexGaussPCA), and ``transform``/``inverse_transform``;
- host: the noise, drawn from the fit's one NumPy generator
  (:func:`~sklearn_dppca.noise.make_generator`) and moved to the device, so a
  fit releases the same values as a NumPy fit with the same seed up to
  round-off (below the first-rows threshold, docs/privacy.rst §5: the
  NumPy engine centres many rows on their first rows, this one never);
  the post-processing of the d eigenvalues (selection, ratios);
  CoherentPowerPCA's small d × k and k × k linear algebra.

Sensitivity of the *computed* statistic (docs/privacy.rst §3): the bounds
:math:`2C` and :math:`\sqrt{2} C^2` hold for sums of rows of norm at most
:math:`C`. A row's norm is computed in floating point, with a relative error
below :math:`(d/2 + 2) u` (:math:`u` the unit round-off,
:math:`\mathrm{eps} = 2u`), and scaling the row costs two more roundings, so
rows are clipped at :math:`C / (1 + (d + 8)\,\mathrm{eps})`: every clipped
row *as computed* (the vector that enters the sums) has a true norm at most
:math:`C`. The sensitivity argument then applies to the exact sums of the
computed rows; the round-off of the summation itself is a relative
perturbation of order :math:`u` (float32: :math:`6 \times 10^{-8}`), as in
every floating-point implementation. The same margin (over :math:`k`
entries) is applied to the radius :math:`R` of the clipped products.
Where float32 matrix products round their inputs further (PyTorch's TF32 or
bfloat16 settings, CuPy's ``CUPY_TF32``), the margin grows by that rounding
(see :func:`reduced_float32_products`).
"""

import math
import os

import numpy as np
from sklearn import get_config
from sklearn.externals import array_api_compat
from sklearn.utils._array_api import _convert_to_numpy
from sklearn.utils.validation import validate_data

from ._rows import CentredRows
from ._stats import subnormal_safe

try:  # scikit-learn >= 1.8
    from sklearn.utils._array_api import check_same_namespace
except ImportError:  # pragma: no cover

    def check_same_namespace(X, estimator, *, attribute, method):
        return None


#: Elements per block of rows: 2 Mi (16 MiB of float64; half as many rows of
#: float32 input, each block copied into float64), large enough that a GPU's
#: matrix products run near full speed; a block, its copy in the computing
#: precision and its centred and clipped copies stay within the ~32 MiB of
#: rows that the memory plan counts.
BLOCK_ELEMENTS = 2**21


def namespace(X):
    """``(xp, device)`` of ``X`` if the Array API path applies to it, else ``None``.

    It applies under ``array_api_dispatch=True`` to arrays of a namespace other
    than NumPy's (and other than Dask's, which has its own engine). Without
    dispatch, or for NumPy arrays, lists, DataFrames and sparse matrices,
    ``None``: the NumPy engine is used exactly as without this module.
    """
    if not get_config()["array_api_dispatch"]:
        return None
    if (
        array_api_compat.is_numpy_array(X)
        or array_api_compat.is_dask_array(X)
        or not array_api_compat.is_array_api_obj(X)
    ):
        return None
    xp = array_api_compat.array_namespace(X)
    return xp, array_api_compat.device(X)


#: Relative rounding of a float32 product's inputs when the library rounds
#: them to TF32 (2⁻¹¹) or bfloat16 (2⁻⁸): an upper bound for either.
REDUCED_PRODUCT_ROUNDING = 2.0**-7


def reduced_float32_products(xp, dtype):
    """Whether float32 matrix products may round their inputs below float32.

    PyTorch's ``set_float32_matmul_precision("high")`` (or ``"medium"``, or
    its ``fp32_precision = "tf32"``) and CuPy's ``CUPY_TF32=1`` make the Gram
    matrix a sum of *rounded* rows, up to :math:`2^{-8}` longer than the
    clipped ones: the clipping margin then covers that rounding too.
    """
    if dtype != xp.float32:
        return False
    if array_api_compat.is_cupy_namespace(xp):
        return os.environ.get("CUPY_TF32", "0") != "0"
    if not array_api_compat.is_torch_namespace(xp):
        return False
    import torch

    try:
        if torch.get_float32_matmul_precision() != "highest":
            return True
    except RuntimeError:  # legacy and new settings mixed: assume reduced
        return True
    matmul = torch.backends.cuda.matmul
    precision = getattr(matmul, "fp32_precision", "none")
    return precision not in ("none", "ieee") or bool(matmul.allow_tf32)


def module_of(array):
    """The namespace to compute with on ``array``: NumPy itself for an ndarray."""
    if isinstance(array, np.ndarray):
        return np
    return array_api_compat.array_namespace(array)


def float_dtypes(xp, device):
    """The float dtypes ``validate_data`` may keep: float64 (if the device has
    it) and float32, in the namespace's own dtype objects."""
    available = xp.__array_namespace_info__().dtypes(
        kind="real floating", device=device
    )
    return [available[name] for name in ("float64", "float32") if name in available]


def widest_float(xp, device):
    """float64 if ``device`` has it, else float32: as a NumPy dtype, the
    precision to compute in on that device."""
    available = xp.__array_namespace_info__().dtypes(
        kind="real floating", device=device
    )
    return np.dtype("float64" if "float64" in available else "float32")


def astype(array, dtype):
    """``array`` in ``dtype`` (of its own namespace), not copied if it is."""
    if isinstance(array, np.ndarray):
        return array.astype(dtype, copy=False)
    return module_of(array).astype(array, dtype, copy=False)


def to_host(array):
    """``array`` as a NumPy array, floats in at least double precision.

    float32 becomes float64 and complex64 complex128, so that the host
    post-processing is the NumPy path's (no copy of a float64 ndarray).
    """
    if not isinstance(array, np.ndarray):
        if getattr(array, "requires_grad", False):
            array = array.detach()
        array = _convert_to_numpy(array, array_api_compat.array_namespace(array))
    if array.dtype.kind not in "fc":
        return np.asarray(array)
    return np.asarray(array, dtype=np.promote_types(array.dtype, np.float64))


def numpy_dtype(X):
    """The NumPy dtype matching ``X``'s (``X`` of any namespace)."""
    if isinstance(getattr(X, "dtype", None), np.dtype):
        return X.dtype
    xp = array_api_compat.array_namespace(X)
    names = {v: k for k, v in xp.__array_namespace_info__().dtypes().items()}
    return np.dtype(names[X.dtype])


def like(values, reference, dtype=None):
    """NumPy ``values`` moved to ``reference``'s namespace and device.

    In ``dtype`` (a NumPy dtype) if given, else in ``reference``'s precision,
    complex if ``values`` is complex. A NumPy ``reference`` gets ``values``
    unchanged.
    """
    if isinstance(reference, np.ndarray):
        return values
    if dtype is None:
        dtype = numpy_dtype(reference)
        if np.iscomplexobj(values):
            dtype = np.result_type(dtype, np.complex64)
    xp = array_api_compat.array_namespace(reference)
    host = np.ascontiguousarray(values, dtype=dtype)  # cast on the host: less to move
    return xp.asarray(host, device=array_api_compat.device(reference))


def add_noise(matrix, noise):
    """``matrix + noise``, the noise drawn on the host and moved to ``matrix``'s
    namespace and device, in its precision (complex noise: the complex dtype)."""
    return matrix + like(noise, matrix)


def eigh(matrix):
    """All eigenpairs of a symmetric or Hermitian matrix, in its namespace.

    NumPy's LAPACK for an ndarray; the namespace's ``linalg.eigh`` otherwise
    (on the device). A namespace or device without a (complex) ``eigh``
    falls back to NumPy on the host, for this d × d step only.
    """
    if isinstance(matrix, np.ndarray):
        return np.linalg.eigh(matrix)
    xp = array_api_compat.array_namespace(matrix)
    try:
        return xp.linalg.eigh(matrix)
    except (AttributeError, NotImplementedError, RuntimeError, TypeError):
        return np.linalg.eigh(to_host(matrix))


def move_attributes(estimator, xp, device):
    """Fitted float arrays of ``estimator`` (NumPy) moved to ``xp`` on ``device``,
    as scikit-learn's estimators do under dispatch. Their dtypes are kept."""
    for name, value in list(vars(estimator).items()):
        if (
            name.endswith("_")
            and isinstance(value, np.ndarray)
            and value.dtype.kind in "fc"
        ):
            setattr(estimator, name, xp.asarray(value, device=device))


class ArrayAPIRows:
    r"""The statistics of an Array API array, in blocks of rows, on its device.

    Same interface as :class:`~sklearn_dppca._rows.InMemoryRows`:
    ``largest_norm``, then ``first_pass`` (reads every row, checks them all
    finite, returns :math:`\sum \operatorname{clip}_C(x_i)` if asked), then
    ``gram`` and ``rows`` for the centred, clipped rows. Sums come back to
    the host as float64 NumPy arrays; the Gram matrix stays on the device.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        float32 or float64, of namespace ``xp`` on ``device``. Never modified.
    """

    def __init__(self, X, xp, device):
        self.X, self.xp, self.device = X, xp, device
        n_samples, n_features = X.shape
        # the precision the statistics are computed in (module docstring)
        self.np_dtype = widest_float(xp, device)
        self.dtype = float_dtypes(xp, device)[0]
        # half the rows where each block is copied into that precision: the
        # copy is one more block-sized array (review 60: 1.16 times the plan)
        elements = BLOCK_ELEMENTS // (1 if X.dtype == self.dtype else 2)
        self.block_rows = max(1, elements // max(n_features, 1))
        # clipping margin of the computed norms (module docstring), and of the
        # rounding of a product's inputs where float32 products are reduced
        self.eps = float(xp.finfo(self.dtype).eps)
        self.rounding = 1.0  # of a product's inputs, beyond the dtype's
        if reduced_float32_products(xp, self.dtype):
            self.rounding += REDUCED_PRODUCT_ROUNDING
        self.shrink = 1.0 / ((1.0 + (n_features + 8) * self.eps) * self.rounding)

    # ------------------------------------------------------------ helpers
    def _blocks(self):
        """Blocks of rows, in the computing precision (a copy where that is
        not the input's)."""
        n = self.X.shape[0]
        for start in range(0, n, self.block_rows):
            yield astype(self.X[start : min(start + self.block_rows, n), ...],
                         self.dtype)

    def _device(self, values):
        """Host values as a device array of the computing precision."""
        return like(np.asarray(values, dtype=np.float64), self.X, dtype=self.np_dtype)

    def _norms(self, rows):
        r"""``(top, unit)`` with
        :math:`\|x\| = \mathrm{top} \cdot \mathrm{unit}` per row, and the
        finiteness check of the rows.

        ``top = None``, :math:`\mathrm{unit} = \|x\|` unless some
        :math:`\|x\|` is not finite; then the rows are checked for NaN and
        infinity (scikit-learn's error), and the norms of the block are
        measured as :math:`\max|x| \cdot \|x / \max|x|\|`, which cannot
        overflow.
        """
        xp = self.xp
        with np.errstate(over="ignore", invalid="ignore"):  # NumPy-backed: expected
            norms = xp.linalg.vector_norm(rows, axis=1)  # one read, no temporary
        if bool(xp.all(xp.isfinite(norms))):
            return None, norms
        if bool(xp.any(xp.isnan(rows))):
            raise ValueError("Input X contains NaN.")
        if not bool(xp.all(xp.isfinite(rows))):
            raise ValueError(
                f"Input X contains infinity or a value too large for {self.X.dtype}."
            )
        top = xp.max(xp.abs(rows), axis=1)
        top = xp.where(top > 0, top, xp.ones_like(top))
        scaled = rows / xp.reshape(top, (-1, 1))
        return top, xp.sqrt(xp.sum(scaled * scaled, axis=1))

    def _scales(self, rows, limit):
        r""":math:`\min(1, \mathrm{limit}/\|x\|)` per row (``limit`` already
        has the margin)."""
        xp = self.xp
        top, unit = self._norms(rows)  # also the finiteness check
        if limit == math.inf:  # epsilon=inf without data_norm: no clipping
            return xp.ones_like(unit)
        if top is None:
            bound = xp.full_like(unit, limit)
            return bound / xp.maximum(unit, bound)  # exactly 1 inside the ball
        # the block's norms were rescaled (some row's overflowed): per row,
        # ratio = C / max|x| overflows for a tiny row of the block (inside
        # the ball: 1, never inf / inf) and is subnormal for a huge row with
        # a small C, where each rounding errs by up to a subnormal step, far
        # beyond the margin: those scales lose two steps, so that the scaled
        # row stays within C (a row beyond 10³⁰⁰ C may become 0)
        with np.errstate(over="ignore", under="ignore"):  # NumPy-backed
            ratio = limit / top
            inside = unit <= ratio
            scale = xp.where(inside, xp.ones_like(unit), ratio / unit)
            return subnormal_safe(scale, xp.finfo(rows.dtype), xp)

    def _clipped(self, block, limit, centre):
        r"""The rows :math:`\operatorname{clip}(x - m)` of a block as computed
        (norms ≤ C)."""
        if centre is None:  # never scale the caller's rows in place
            return block * xp_column(self.xp, self._scales(block, limit))
        rows = block - centre  # our own copy: scaled in place
        rows *= xp_column(self.xp, self._scales(rows, limit))
        return rows

    # --------------------------------------------------------- interface
    def largest_norm(self):
        """Largest row norm (the non-private estimate of ``data_norm``)."""
        largest = 0.0
        for block in self._blocks():
            top, unit = self._norms(block)
            norms = unit if top is None else top * unit
            largest = max(largest, float(self.xp.max(norms)))
        return largest

    def first_pass(self, data_norm, with_sum):
        r"""Read (and check) every row; :math:`\sum \operatorname{clip}_C(x_i)`
        if ``with_sum``.

        The clipped sum has L2 sensitivity :math:`2C` (docs/privacy.rst §3).
        """
        xp = self.xp
        limit = data_norm * self.shrink
        total = None
        for block in self._blocks():
            scales = self._scales(block, limit)  # the finiteness check
            if with_sum:
                part = scales @ block
                total = part if total is None else total + part
        if not with_sum:
            return None
        if total is None:  # pragma: no cover (at least 2 rows)
            total = xp.zeros(self.X.shape[1], dtype=self.dtype, device=self.device)
        return to_host(total)

    def gram(self, data_norm, mean):
        r""":math:`\sum y y^\top`, :math:`y = \operatorname{clip}_C(x - m)`, on
        the device (sensitivity :math:`\sqrt{2} C^2`).

        :math:`\|a a^\top - b b^\top\|_F^2 = \|a\|^4 + \|b\|^4 - 2(a \cdot b)^2
        \le 2C^4` for rows of norm ≤ C (docs/privacy.rst §3). Plain: each
        block is centred and clipped, then :math:`y^\top y` added; the result
        is symmetrised.
        """
        centre = None if mean is None else self._device(mean)
        limit = data_norm * self.shrink
        gram = None
        for block in self._blocks():
            rows = self._clipped(block, limit, centre)
            part = rows.T @ rows
            gram = part if gram is None else gram + part
        return (gram + gram.T) / 2

    def rows(self, data_norm, mean):
        return ArrayAPICentredRows(self, data_norm, mean)


def xp_column(xp, vector):
    """``vector`` as a column (``vector[:, None]``)."""
    return xp.reshape(vector, (-1, 1))


class ArrayAPICentredRows:
    r""":class:`~sklearn_dppca._rows.CentredRows` on the device.

    The rows :math:`a_i = \operatorname{clip}_C(x_i - m) / C` in the unit
    ball, rebuilt block by block at every pass. ``W`` comes from the host
    and the sums go back to it: CoherentPowerPCA's small d × k and k × k
    algebra runs in NumPy.
    """

    def __init__(self, data, data_norm, mean):
        self.data = data
        self.data_norm = data_norm
        self.mean = mean

    def clipped_products(self, W, radii, n_jobs=None):
        r""":math:`\sum_i a_i \operatorname{Clip}_{R_j}(a_i^\top W_j)` for
        several trials :math:`j` in one pass.

        Frobenius sensitivity :math:`2R` under replacement of one row: each
        term has norm at most :math:`\|a\| R \le R` (docs/privacy.rst §3);
        the radius keeps the margin of the computed norms (over the
        :math:`k` entries). ``n_jobs``
        is ignored: the device runs each block in parallel.

        Parameters
        ----------
        W : ndarray of shape (n_features, n_trials, k)
        radii : ndarray of shape (n_trials,)
        n_jobs : ignored

        Returns
        -------
        products : ndarray of shape (n_features, n_trials, k), float64
        n_clipped : ndarray of shape (n_trials,)
            Rows whose product was clipped, per trial (not released as is).
        """
        data, xp = self.data, self.data.xp
        d, n_trials, k = W.shape
        shrink = 1.0 / ((1.0 + (k + 8) * data.eps) * data.rounding)
        radii = np.asarray(radii, dtype=np.float64) * shrink
        # float32 rows with a radius near or below float32's normal range
        # (clip_radius may be 1e-100): the radius would round to 0 or to a
        # subnormal, whose rounding errs far beyond the margin (0/0 = NaN for
        # a zero product, terms of 1.67 R): their products in float64
        wide = (data.np_dtype == np.float32
                and float(radii.min()) < FLOAT32_SMALLEST_RADIUS)
        dtype = np.float64 if wide else data.np_dtype
        flat = like(np.reshape(W, (d, n_trials * k)), data.X, dtype=dtype)
        radii = like(radii, data.X, dtype=dtype)
        centre = None if self.mean is None else data._device(self.mean)
        limit = self.data_norm * data.shrink
        total, counts = None, np.zeros(n_trials, dtype=np.int64)
        for block in data._blocks():
            unit = data._clipped(block, limit, centre) / self.data_norm
            if wide:
                unit = xp.astype(unit, xp.float64)
            products = xp.reshape(unit @ flat, (-1, n_trials, k))
            norms = xp.sqrt(xp.sum(products * products, axis=2))
            # min(1, R/‖p‖), and 1 for p = 0
            factor = radii / xp.maximum(norms, radii)
            over = xp.sum(xp.astype(norms > radii, xp.int64), axis=0)
            counts += to_host(over).astype(np.int64)
            factor = xp.reshape(factor, (-1, n_trials, 1))
            products = xp.reshape(products * factor, (-1, n_trials * k))
            part = unit.T @ products
            total = part if total is None else total + part
        return to_host(total).reshape(d, n_trials, k), counts

    # in memory, as CentredRows: the products' pass only when asked
    fuses_first_step = False
    energy_then_products = CentredRows.energy_then_products

    def clipped_energy(self, W, radii):
        r""":math:`q(R) = \sum_i \min(\|a_i^\top W\|^2, R^2)` for several
        radii, in one pass.

        Every computed term lies in :math:`[0, R^2]` (the ``min`` is exact in
        floating point), so replacing one row moves :math:`q(R)` by at most
        :math:`R^2` whatever the rounding of the products.

        Parameters
        ----------
        W : ndarray of shape (n_features, k)
        radii : ndarray of shape (n_radii,)

        Returns
        -------
        q : ndarray of shape (n_radii,), float64
            Exact (released only with noise).
        """
        data, xp = self.data, self.data.xp
        flat = data._device(W)
        centre = None if self.mean is None else data._device(self.mean)
        limit = self.data_norm * data.shrink
        caps = data._device(np.asarray(radii, dtype=np.float64) ** 2)
        total = np.zeros(caps.shape[0])
        for block in data._blocks():
            unit = data._clipped(block, limit, centre) / self.data_norm
            products = unit @ flat
            sq = xp.reshape(xp.sum(products * products, axis=1), (-1, 1))
            total += to_host(xp.sum(xp.minimum(sq, caps), axis=0)).astype(np.float64)
        return total


def nan_to_num(X):
    """``numpy.nan_to_num`` of an Array API array, with its namespace's
    functions, on its device and in its dtype: NaN → 0, ±inf → ± the dtype's
    largest finite value. A new array; ``X`` is not modified."""
    xp = array_api_compat.array_namespace(X)
    top = xp.full_like(X, float(xp.finfo(X.dtype).max))
    out = xp.where(xp.isnan(X), xp.zeros_like(X), X)
    out = xp.where(out > top, top, out)
    return xp.where(out < -top, -top, out)


#: The smallest clipping radius of products computed in float32 (a tenth of
#: float32's smallest normal over its eps): below it a product's entries
#: round by subnormal steps, and the products are computed in float64.
FLOAT32_SMALLEST_RADIUS = 1e-30


def plain(X, xp, name=None):
    """``X`` refused if complex (scikit-learn's check reads a NumPy dtype's
    ``kind``, which other namespaces' dtypes lack, so a complex tensor was
    cast to its real part with a warning), sparse (a PyTorch sparse layout)
    or without data (PyTorch's ``meta`` device), and detached from an
    autograd graph (a tensor that requires grad cannot be read on the host):
    public properties, checked before any charge."""
    if xp.isdtype(X.dtype, "complex floating"):
        held = "" if name is None else f" ({name} holds complex numbers)"
        raise ValueError(f"Complex data not supported{held}.")
    if str(getattr(X, "layout", "strided")).rsplit(".", 1)[-1] != "strided":
        raise TypeError(
            "A sparse tensor has no Array API form: pass X.to_dense(), or a "
            "SciPy CSR matrix (sparse rows are fitted on the host).")
    if getattr(getattr(X, "device", None), "type", None) == "meta":
        raise ValueError("X is a tensor on the 'meta' device, which holds no data.")
    if getattr(X, "requires_grad", False):
        X = X.detach()
    return X


def fit_rows(estimator, X, xp, device, non_finite="raise"):
    """Validated ``X`` (float64 or float32, at least 2 rows) and its engine;
    with ``non_finite="clip"``, its values mapped by :func:`nan_to_num`."""
    X = validate_data(
        estimator,
        plain(X, xp),
        dtype=float_dtypes(xp, device),
        ensure_min_samples=2,
        ensure_all_finite=False,  # checked by the first pass
    )
    if non_finite == "clip":
        X = nan_to_num(X)
    return X, ArrayAPIRows(X, xp, device)


