"""How a fit computes, chosen from public values before the data is read:
scikit-learn's rule for the solver, the machine's memory and the share a
fit may take of it, and the model of the dense and matrix-free paths'
costs (``_BasePrivatePCA._path``, ``_memory_needed``)."""

import os
from numbers import Integral

#: Share of the machine's memory that a fit may take with
#: ``memory_limit="auto"`` (``_check_memory``): beyond it the fit is refused
#: before any charge.
MEMORY_SHARE = 0.8


def physical_memory():
    """Bytes of this machine's physical memory, or None where it cannot be
    told (a public fact about the machine, not about the data)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def auto_solver(n_samples, n_features, n_components):
    r"""scikit-learn's ``svd_solver="auto"`` rule on the public shape:
    ``"covariance_eigh"`` when the features are few (at most 1 000, with ten
    times as many rows), ``"full"`` when the problem is small (at most 500
    either way) or ``n_components`` is not an integer below
    :math:`0.8 \min(n, d)`, otherwise ``"randomized"``."""
    if n_features <= 1_000 and n_samples >= 10 * n_features:
        return "covariance_eigh"
    k = n_components
    if max(n_samples, n_features) <= 500 or not isinstance(k, Integral):
        return "full"
    smallest = min(n_samples, n_features)
    return "randomized" if 1 <= k < 0.8 * smallest else "full"


def matrix_free_faster(n_samples, n_features, size, products, chunked,
                       cached=0.0, hermitian=False):
    r"""Whether the matrix-free path is predicted faster than the dense one,
    or at most :data:`MATRIX_FREE_SLOWDOWN` times slower (it saves the
    dense path's two :math:`d \times d` matrices), from public values: the
    shape, the solver's block
    :math:`\mathtt{size} = k + \mathtt{n\_oversamples}` and its products with
    the released matrix (:func:`~sklearn_dppca._spectrum.solver_products`), whether
    the rows are a Dask array, and the fraction ``cached`` of the kernel's
    blocks kept in memory once drawn.

    A model of both costs (:data:`PATH_COSTS`, seconds measured on two cores
    with ``benchmarks/bench_wide.py``; their ratios are what matter). Dense:
    the Gram matrix (:math:`n d^2`), its noise (:math:`d^2`) and the
    randomized solver's ``products`` with it (:math:`d^2 \, \mathtt{size}`
    each). Matrix-free, per product: a
    pass over the rows (:math:`n d \, \mathtt{size}`) and a product with the
    kernel (:math:`d^2 \, \mathtt{size}`, in single precision), whose
    blocks not kept are drawn again (:math:`d^2/2` draws in all the first
    time). Sparse rows are
    costed as dense (their density is not public). A Dask array's pass also
    reads its chunks again: there the dense path is kept unless memory
    forces the other. A Hermitian release (``hermitian``, the GUE kernel)
    draws twice the deviates, and each complex product costs four real ones
    with a ``d × d`` matrix and two passes' worth of columns over the rows.
    """
    if chunked:
        return False
    n, d = float(n_samples), float(n_features)
    cost = PATH_COSTS
    parts, flops = (2, 4) if hermitian else (1, 1)
    dense = (cost["gram"] * n * d * d + parts * cost["draws"] * d * d
             + products * flops * cost["product"] * d * d * size)
    draws = parts * cost["draws"] * d * d / 2 * (1 + (products - 1) * (1.0 - cached))
    free = draws + products * (parts * cost["pass"] * n * d * size
                               + flops * cost["kernel"] * d * d * size)
    return free < MATRIX_FREE_SLOWDOWN * dense


#: How much slower than the dense path the matrix-free one may be predicted
#: and still be chosen for its memory (``O(d k)`` and the kernel's cache,
#: against ``2 d²``). The model's constants are two-threaded, where the
#: dense path's BLAS gains most: on 2 000 × 5 000 with one thread, predicted
#: 0.95 (k = 10) and 1.53 (k = 50) measured 0.46 and 0.75; on 20 000 × 2 000
#: with two, predicted 2.3 measured 2.9 (dense kept).
MATRIX_FREE_SLOWDOWN = 1.6


#: Seconds per unit of :func:`matrix_free_faster`'s terms, measured on two
#: cores: the Gram matrix per ``n d²``, normal draws per entry of the
#: kernel, a product with a ``d × d`` matrix per ``d² size`` (double
#: precision; the implicit kernel's, in single precision, half of it), and a
#: pass of products with the rows per ``n d size``.
PATH_COSTS = {"gram": 1.45e-11, "draws": 4e-9, "product": 7e-11, "kernel": 3.5e-11,
              "pass": 2.2e-10}


#: Share of ``memory_limit`` the matrix-free path may fill with the kernel's
#: blocks, kept once drawn (at most the ``2 d²`` bytes of the blocks on and
#: above the diagonal): later products multiply them instead of drawing
#: them again (about 10× faster per product at d = 5 000, p = 20, one thread).
KERNEL_CACHE_SHARE = 0.125


#: The kernel's cache where the machine's memory cannot be told.
DEFAULT_KERNEL_CACHE = 2**30
