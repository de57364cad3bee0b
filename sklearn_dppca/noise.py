"""Noise kernels of the Gaussian mechanisms (:ref:`privacy-noise`).

Every kernel draws from a :class:`numpy.random.Generator` made once per fit
by :func:`make_generator`. With ``random_state=None`` that generator is seeded
from operating-system entropy.

.. warning::
   These samplers use floating-point Gaussian sampling, which is not a
   formally hardened implementation of the Gaussian mechanism (Mironov 2012;
   Jin et al. 2022): the low-order bits of a floating-point release can, in
   principle, leak more than the analysis says. A fixed ``random_state`` makes
   the noise predictable to anyone who knows it, and the release is then not
   private at all.

This module imports nothing from the estimators.
"""

import math
from concurrent.futures import ThreadPoolExecutor
from numbers import Integral

import numpy as np

from ._accounting import saturating_float

__all__ = [
    "ImplicitGOE",
    "add_goe_noise",
    "add_gue_noise",
    "dense_noise",
    "goe_noise",
    "gue_noise",
    "make_generator",
]


def make_generator(random_state=None):
    """The fit's single random generator.

    Parameters
    ----------
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        ``None`` seeds from operating-system entropy (the only private
        choice). A non-negative int seeds a new generator. A ``RandomState`` is advanced
        (one draw seeds the generator), as scikit-learn's convention wants.
        A ``Generator`` is used as is.

    Returns
    -------
    rng : numpy.random.Generator

    Examples
    --------
    >>> from sklearn_dppca.noise import make_generator
    >>> make_generator(0).standard_normal() == make_generator(0).standard_normal()
    True
    """
    if random_state is None:
        return np.random.default_rng()  # SeedSequence() draws OS entropy
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**32, size=4))
    if isinstance(random_state, Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(
                f"random_state must be a non-negative int; got {random_state!r}.")
        return np.random.default_rng(int(random_state))
    raise ValueError(
        "random_state must be None, an int, a numpy RandomState or Generator; "
        f"got {random_state!r}."
    )


#: The smallest positive normal float64. A noise scale below it is subnormal
#: (a few significant bits, or none) or 0: the draw would be (nearly) exact.
TINY = float(np.finfo(np.float64).tiny)


def _check_scale(sigma):
    r""":math:`\sigma` as a float: 0 (only the non-private fit's
    :func:`noise_scale` gives it) or a positive, finite, normal number."""
    if isinstance(sigma, (str, bytes, bool, np.bool_)):
        raise TypeError(f"sigma must be a real number; got {sigma!r}.")
    sigma = saturating_float(sigma)  # an integer beyond a float: refused below
    if not (sigma == 0.0 or TINY <= sigma < math.inf):
        raise ValueError(
            f"sigma must be 0 or a positive, finite, normal number (at least "
            f"{TINY:.3g}); got {sigma!r}."
        )
    return sigma


def dense_noise(rng, shape, sigma):
    r""":math:`\sigma G` with :math:`G` of i.i.d. N(0, 1) entries.

    Parameters
    ----------
    rng : numpy.random.Generator
    shape : int or tuple of int
    sigma : float

    Returns
    -------
    noise : ndarray of float64 with the given shape

    Examples
    --------
    >>> from sklearn_dppca.noise import dense_noise, make_generator
    >>> dense_noise(make_generator(0), (2, 3), 1.0).shape
    (2, 3)
    """
    return rng.standard_normal(shape) * _check_scale(sigma)


def goe_noise(rng, n_features, sigma):
    r"""Symmetric (GOE) kernel :math:`S = \sigma (G + G^\top) / 2`.

    Diagonal entries are N(0, σ²), off-diagonal ones N(0, σ²/2). The
    coordinates of :math:`S` in the orthonormal basis
    :math:`\{E_{ii}\} \cup \{(E_{ij} + E_{ji})/\sqrt{2} : i < j\}` of symmetric
    matrices are i.i.d. N(0, σ²), so adding :math:`S` to a symmetric statistic
    of Frobenius sensitivity :math:`s` is a Gaussian mechanism with
    :math:`\mu = s / \sigma`.

    Parameters
    ----------
    rng : numpy.random.Generator
    n_features : int
    sigma : float

    Returns
    -------
    noise : ndarray of shape (n_features, n_features)

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.noise import goe_noise, make_generator
    >>> S = goe_noise(make_generator(0), 4, 1.0)
    >>> bool(np.array_equal(S, S.T))
    True
    """
    sigma = _check_scale(sigma)
    g = rng.standard_normal((n_features, n_features))
    g += g.T  # exactly symmetric
    g *= sigma / 2.0
    return g


def gue_noise(rng, n_features, sigma):
    r"""Hermitian (GUE) kernel
    :math:`H = \sigma [(G_1 + G_1^\top)/2 + i (G_2 - G_2^\top)/2]`.

    :math:`\operatorname{Re} H` is drawn first, from the same generator state,
    and equals :func:`goe_noise`'s output exactly; :math:`\operatorname{Im} H`
    is antisymmetric and independent of everything else, so a Hermitian
    release costs what the real one costs.

    Parameters
    ----------
    rng : numpy.random.Generator
    n_features : int
    sigma : float

    Returns
    -------
    noise : ndarray of complex128, shape (n_features, n_features)

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.noise import gue_noise, make_generator
    >>> H = gue_noise(make_generator(0), 4, 1.0)
    >>> bool(np.array_equal(H, H.conj().T))
    True
    """
    real = goe_noise(rng, n_features, sigma)
    g = rng.standard_normal((n_features, n_features))
    g -= g.T
    g *= _check_scale(sigma) / 2.0
    return real + 1j * g


def noise_scale(sensitivity, mu):
    r""":math:`\sigma = s/\mu` of a Gaussian release, and 0 for the
    non-private :math:`\mu = \infty` (``epsilon=inf``), whatever the
    sensitivity (``inf`` without clipping).

    For a finite :math:`\mu`, :math:`\sigma` must be a positive, finite,
    normal float64 (at least :data:`TINY`): a quotient that underflows to 0
    or to a subnormal number would release the statistic (nearly) exactly,
    and one that overflows would release nothing but noise. Such a
    :math:`\sigma` raises ``ValueError``, whatever computed the sensitivity
    (docs/privacy.rst, "Randomness and floating point"). Callers whose
    sensitivity scales with a power of the bound compute it in units that
    cannot underflow (for example
    :math:`C_{\max}^2 \cdot \sqrt{\sum (C_c/C_{\max})^4}`, not
    :math:`\sqrt{\sum C_c^4}`).

    Examples
    --------
    >>> from sklearn_dppca.noise import noise_scale
    >>> noise_scale(2.0, 4.0), noise_scale(2.0, float("inf"))
    (0.5, 0.0)
    """
    if mu == math.inf:
        return 0.0
    sigma = float(sensitivity) / float(mu)
    if not TINY <= sigma < math.inf:
        raise ValueError(
            f"The noise scale sigma = sensitivity / mu = {sensitivity!r} / "
            f"{mu!r} = {sigma!r} is not a positive, finite, normal number (at "
            f"least {TINY:.3g}): the release would be exact, or all noise. "
            "Rescale the data and its bound toward 1, or choose a less "
            "extreme epsilon."
        )
    return sigma


#: Entries of the standard normal blocks drawn at a time by the in-place
#: kernels (32 MiB of float64): their memory beyond the matrix itself.
_BLOCK_ENTRIES = 1 << 22


def _square(matrix, kind):
    """Refuse what ``add_*_noise`` cannot add its kernel to in place, before
    a draw: a partly noised or half-modified matrix would be a leak."""
    if not (isinstance(matrix, np.ndarray) and matrix.ndim == 2
            and matrix.shape[0] == matrix.shape[1]
            and matrix.dtype.kind == kind and matrix.flags.writeable):
        what = "complex" if kind == "c" else "real floating"
        got = (f"{matrix.dtype} array of shape {matrix.shape}"
               if isinstance(matrix, np.ndarray) else type(matrix).__name__)
        raise ValueError(f"matrix must be a square, writeable {what} NumPy "
                         f"array; got a {got}.")
    return matrix


def _add_symmetric_blocks(rng, matrix, scale, sign):
    r""":math:`\mathtt{matrix} \mathrel{+}= \mathtt{scale} \cdot (G +
    \mathtt{sign} \cdot G^\top)` in place, :math:`G` of i.i.d. N(0, 1)
    entries drawn row block by row block: the same stream as
    ``rng.standard_normal((d, d))``, without a d × d array of it.

    ``sign=1``: a symmetric increment, ``-1``: antisymmetric. Entries
    :math:`(i, j)` and :math:`(j, i)` receive the same two products in the
    same order (:math:`\mathtt{scale} \cdot G_{ij}` at :math:`i`'s block,
    :math:`\mathtt{scale} \cdot G_{ji}` at :math:`j`'s; the block on the
    diagonal as one exactly (anti)symmetric sum), so an exactly symmetric
    (antisymmetric) ``matrix`` stays so.
    """
    d = matrix.shape[0]
    rows = max(1, _BLOCK_ENTRIES // max(d, 1))
    for a in range(0, d, rows):
        b = min(a + rows, d)
        g = rng.standard_normal((b - a, d))
        g *= scale
        diagonal = g[:, a:b]
        matrix[a:b, a:b] += diagonal + sign * diagonal.T
        for cols in (slice(0, a), slice(b, d)):
            part = g[:, cols]
            matrix[a:b, cols] += part
            if sign > 0:
                matrix[cols, a:b] += part.T
            else:
                matrix[cols, a:b] -= part.T
    return matrix


def add_goe_noise(rng, matrix, sigma):
    r"""Add the GOE kernel of :func:`goe_noise` to ``matrix``, in place.

    The kernel is :math:`\sigma (G + G^\top)/2` with :math:`G` the same draws
    as :func:`goe_noise`'s (row block by row block: at most 32 MiB beside
    ``matrix``, never a second d × d array), so the result equals ``matrix +
    goe_noise(rng, d, sigma)`` up to the rounding of the additions, and the
    generator is left in the same state. Returns ``matrix``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.noise import add_goe_noise, goe_noise, make_generator
    >>> M = add_goe_noise(make_generator(0), np.eye(3), 1.0)
    >>> bool(np.allclose(M, np.eye(3) + goe_noise(make_generator(0), 3, 1.0)))
    True
    """
    scale = _check_scale(sigma) / 2.0
    return _add_symmetric_blocks(rng, _square(matrix, "f"), scale, 1)


def add_dense_noise(rng, matrix, sigma):
    """Add :func:`dense_noise` of ``matrix``'s shape to the float64
    ``matrix``, in place, by blocks of rows (at most 8 MiB beside it): the
    same draws in the same order, so the result equals ``matrix +
    dense_noise(rng, matrix.shape, sigma)`` and the generator is left in the
    same state. Returns ``matrix``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.noise import add_dense_noise, dense_noise, make_generator
    >>> M = add_dense_noise(make_generator(0), np.ones((4, 3)), 2.0)
    >>> bool(np.array_equal(M, 1.0 + dense_noise(make_generator(0), (4, 3), 2.0)))
    True
    """
    sigma = _check_scale(sigma)
    width = int(np.prod(matrix.shape[1:], dtype=np.int64)) or 1
    rows = max(1, 2**20 // width)
    for start in range(0, matrix.shape[0], rows):
        part = matrix[start:start + rows]
        part += rng.standard_normal(part.shape) * sigma
    return matrix


def add_gue_noise(rng, matrix, sigma):
    """Add the GUE kernel of :func:`gue_noise` to the complex ``matrix``, in
    place (the real part as :func:`add_goe_noise`, then the imaginary part
    from the next draws, as :func:`gue_noise` draws them). Returns
    ``matrix``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.noise import add_gue_noise, gue_noise, make_generator
    >>> M = add_gue_noise(make_generator(0), np.eye(3, dtype=complex), 1.0)
    >>> bool(np.allclose(M, np.eye(3) + gue_noise(make_generator(0), 3, 1.0)))
    True
    """
    scale = _check_scale(sigma) / 2.0
    _square(matrix, "c")
    _add_symmetric_blocks(rng, matrix.real, scale, 1)
    _add_symmetric_blocks(rng, matrix.imag, scale, -1)
    return matrix


#: Precisions of :class:`ImplicitGOE`'s blocks and products.
_PRECISIONS = {"single": np.float32, "double": np.float64}

#: Side of the square blocks in which :class:`ImplicitGOE` draws its kernel
#: (drawn as 8 MiB of float64 each, kept as 4 MiB of float32).
IMPLICIT_BLOCK = 1024


def kernel_bytes(n_features, block=IMPLICIT_BLOCK, itemsize=4):
    r"""Bytes of the blocks on and above the diagonal of a :math:`d \times d`
    :class:`ImplicitGOE`, kept in single precision (``itemsize`` 4; 8 for
    double): all that is ever drawn, and all a full cache holds,
    :math:`\mathtt{itemsize} (d^2 + \sum_i b_i^2) / 2` with :math:`b_i` the
    block rows' sides."""
    d, b = int(n_features), int(block)
    full, last = divmod(d, b)
    return itemsize * (d * d + full * b * b + last * last) // 2


class ImplicitGOE:
    r"""The GOE kernel of :func:`goe_noise`, never held whole: ``S @ V`` by
    blocks.

    :math:`S` is a fixed :math:`d \times d` matrix with the law of
    ``goe_noise(rng, d, sigma)`` (diagonal entries N(0, σ²), off-diagonal
    ones N(0, σ²/2), exactly symmetric), defined by a 256-bit key drawn from
    ``rng`` at construction: its :math:`b \times b` block :math:`(i, j)`,
    :math:`i \le j`, is drawn from a generator seeded by the key and
    :math:`(i, j)` alone, :math:`\sigma (G + G^\top)/2` on the diagonal and
    :math:`\sigma G/\sqrt{2}` above it (the block below is its transpose).
    Every product redraws the blocks it needs, so :math:`S` is the same
    matrix in every product, whatever the order or the threads, and memory
    is :math:`O(d \cdot p)` beside ``n_threads`` blocks. Time:
    :math:`d^2/2` normal draws and :math:`2 d^2 p` flops per product with
    :math:`V` of :math:`p` columns.

    Blocks of :math:`S/\sigma` are drawn in double precision, then kept and
    multiplied in ``precision`` (single: half the memory and time, an error
    of :math:`2^{-24}` per entry), :math:`\sigma` applied to the product in
    double; :meth:`rounded` rounds a sum with a product to the kernel's
    significand. The key is as secret as the fit's generator: whoever knows
    it knows :math:`S` (the warning on fixed seeds applies).

    Parameters
    ----------
    rng : numpy.random.Generator
        The fit's generator; one draw (the key) is taken from it.
    n_features : int
    sigma : float
    block : int, default=IMPLICIT_BLOCK
        Side of the blocks (public: part of the definition of :math:`S`).
    n_threads : int, default=1
        Threads drawing blocks in a product (each with its own output, summed
        at the end); the result does not depend on it beyond rounding.
    cache_bytes : int, default=0
        Memory for blocks kept once drawn (the first ones, up to this many
        bytes): later products only multiply them. The same matrix either
        way; at most :func:`kernel_bytes` are ever needed (the blocks on and
        above the diagonal).
    precision : {"single", "double"}, default="single"
        Precision of the blocks kept and of the products (returned in double
        precision; docs/privacy.rst, "The matrix-free path").
    antisymmetric : bool, default=False
        The antisymmetric kernel instead: :math:`\sigma (G - G^\top)/2` on
        the diagonal blocks, the block below minus the transpose of the one
        above (off-diagonal entries N(0, σ²/2), a zero diagonal): the
        imaginary part of :func:`gue_noise`'s kernel
        (:class:`ImplicitGUE`).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.noise import ImplicitGOE, make_generator
    >>> S = ImplicitGOE(make_generator(0), 5, 1.0, block=2)
    >>> dense = S @ np.eye(5)
    >>> bool(np.array_equal(dense, dense.T))
    True
    >>> bool(np.allclose(S @ dense, dense @ dense))
    True
    """

    def __init__(self, rng, n_features, sigma, block=IMPLICIT_BLOCK, n_threads=1,
                 cache_bytes=0, precision="single", antisymmetric=False):
        if precision not in _PRECISIONS:
            raise ValueError(
                f"precision must be 'single' or 'double', got {precision!r}.")
        self.sigma = _check_scale(sigma)
        for name, value, least in (("n_features", n_features, 0), ("block", block, 1)):
            if not isinstance(value, Integral) or isinstance(value, bool) \
                    or not least <= value < 2**31:
                raise ValueError(f"{name} must be an integer in [{least}, 2**31); "
                                 f"got {value!r}.")
        self.shape = (int(n_features), int(n_features))
        self.dtype = np.dtype(np.float64)  # of the products returned
        self.precision = np.dtype(_PRECISIONS[precision])
        self.block = int(block)
        self.n_threads = max(1, int(n_threads))
        self._antisymmetric = bool(antisymmetric)
        self._key = [int(word) for word in rng.integers(0, 2**63, size=4)]
        self._trace = None
        # the first blocks (in the order of _pairs) whose entries fit in
        # cache_bytes are kept once drawn: the same values, drawn once
        self._cache, self._cacheable = {}, set()
        used = 0
        for i, j in self._pairs():
            size = self.precision.itemsize * self._side(i) * self._side(j)
            if used + size > cache_bytes:
                break
            self._cacheable.add((i, j))
            used += size

    def _side(self, i):
        """Rows of block row ``i`` (the last one may be short)."""
        return min(self.block, self.shape[0] - i * self.block)

    def _draw(self, i, j, buffer=None, rounded=None):
        r"""Block ``(i, j)``, :math:`i \le j`, of :math:`S/\sigma` in the
        kernel's precision (into ``buffer`` and ``rounded``, C-contiguous
        arrays of at least the block's entries in double and in the
        kernel's precision, if given: no fresh pages). Unit scale: single
        precision's range holds it whatever :math:`\sigma`."""
        if (i, j) in self._cache:
            return self._cache[i, j]
        shape, count = (self._side(i), self._side(j)), self._side(i) * self._side(j)
        keep = (i, j) in self._cacheable  # fresh arrays, kept
        g = None if buffer is None or keep else buffer[:count].reshape(shape)
        seed = np.random.SeedSequence(self._key, spawn_key=(i, j))
        g = np.random.Generator(np.random.SFC64(seed)).standard_normal(shape, out=g)
        if i == j:  # exactly (anti)symmetric, and so after rounding
            if self._antisymmetric:
                g -= g.T.copy()
            else:
                g += g.T.copy()
            scale = 0.5
        else:
            scale = math.sqrt(0.5)
        if self.precision == np.float64:
            out = g
        elif rounded is None or keep:
            out = np.empty(shape, dtype=self.precision)
        else:
            out = rounded[:count].reshape(shape)
        # scaled in double precision, then rounded once (S/σ: unit scale)
        np.multiply(g, scale, out=out, casting="same_kind")
        if keep:
            self._cache[i, j] = out  # one thread per block: no race
        return out

    def _pairs(self):
        m = -(-self.shape[0] // self.block)
        return [(i, j) for i in range(m) for j in range(i, m)]

    def rounded(self, values):
        """``values`` (float64) rounded to the kernel's significand (24 bits
        in single precision, half to even), keeping double precision's range
        (but for the largest doubles, within half a unit of 24 bits of
        float64's maximum, which round to infinity as correct rounding
        would): for a product's sum, so that none of its digits comes from
        one term alone."""
        if self.precision == np.float64:
            return values
        significand, exponent = np.frexp(values)
        bits = np.finfo(self.precision).nmant + 1
        return np.ldexp(np.round(np.ldexp(significand, bits)), exponent - bits)

    def __matmul__(self, V):
        V = np.asarray(V, dtype=np.float64)
        vector = V.ndim == 1
        V = V.reshape(self.shape[0], -1)
        if self.sigma == 0.0:  # the non-private fit's kernel: nothing drawn
            self._trace = 0.0
            return np.zeros(V.shape).ravel() if vector else np.zeros(V.shape)
        b = self.block
        # each column of V at unit scale in the kernel's precision; its scale
        # and σ go on the product, in double precision (no overflow or
        # underflow; one scale for all columns rounded a column far smaller
        # than the largest to 0, and its product had no noise: review 59)
        unit = np.maximum(V.max(axis=0), -V.min(axis=0))  # no |V| temporary
        unit[unit == 0.0] = 1.0
        low = np.empty(V.shape, dtype=self.precision)  # divided in double, rounded
        np.divide(V, unit, out=low, casting="same_kind")
        pairs = self._pairs()
        parts = min(self.n_threads, len(pairs))

        # the largest block's entries: min(b, d)² (a kernel narrower than a
        # block drew into b² entries, 12 MB beside a plan of 4 MB at d = 60:
        # mend 120); none where the cache holds every block
        side = min(b, self.shape[0])
        entries = 0 if self._cacheable.issuperset(pairs) else side * side

        def work(part):
            out, trace = np.zeros_like(low), 0.0
            buffer = np.empty(entries)
            rounded = (None if self.precision == np.float64  # drawn in place
                       else np.empty(entries, dtype=self.precision))
            for i, j in pairs[part::parts]:
                g = self._draw(i, j, buffer, rounded)
                rows = slice(i * b, i * b + g.shape[0])
                cols = slice(j * b, j * b + g.shape[1])
                out[rows] += g @ low[cols]
                if i == j:
                    trace += float(np.trace(g, dtype=np.float64))
                elif self._antisymmetric:
                    out[cols] -= g.T @ low[rows]
                else:
                    out[cols] += g.T @ low[rows]
            return out, trace

        if parts == 1:
            results = [work(0)]
        else:
            with ThreadPoolExecutor(parts) as pool:
                results = list(pool.map(work, range(parts)))
        self._trace = self.sigma * sum(r[1] for r in results)
        out = results[0][0].astype(np.float64)
        for part, _ in results[1:]:  # the threads' parts, in double precision
            out += part
        out *= self.sigma
        out *= unit  # apart: σ · unit alone could overflow (per column)
        return out.ravel() if vector else out

    def trace(self):
        r""":math:`\operatorname{tr} S` (from the diagonal blocks alone if no
        product has run)."""
        if self.sigma == 0.0:
            return 0.0
        if self._trace is None:
            m = -(-self.shape[0] // self.block)
            self._trace = self.sigma * sum(
                float(np.trace(self._draw(i, i), dtype=np.float64)) for i in range(m))
        return self._trace


class ImplicitGUE:
    r"""The GUE kernel of :func:`gue_noise`, never held whole: ``H @ V`` by
    blocks, for the matrix-free path of
    :class:`~sklearn_dppca.ComplexGaussPCA`.

    :math:`H = A + iB` with :math:`A` the :class:`ImplicitGOE` drawn first
    from ``rng`` (the kernel :class:`~sklearn_dppca.PrivatePCA`'s
    matrix-free path would draw from the same generator state) and
    :math:`B` its antisymmetric counterpart from a second key: the law of
    :func:`gue_noise` (diagonal N(0, σ²) and real, off-diagonal entries of
    independent real and imaginary parts N(0, σ²/2)). For complex
    :math:`V = V_r + i V_i`, :math:`H V = (A V_r - B V_i) + i (A V_i + B
    V_r)`: each kernel multiplies :math:`[V_r, V_i]` once, so a product costs
    :math:`d^2` draws (the first time) and :math:`8 d^2 p` flops, four times
    the real kernel's. The parameters are :class:`ImplicitGOE`'s;
    ``cache_bytes`` is shared equally by the two parts.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.noise import ImplicitGUE, make_generator
    >>> H = ImplicitGUE(make_generator(0), 5, 1.0, block=2)
    >>> dense = H @ np.eye(5)
    >>> bool(np.array_equal(dense, dense.conj().T))
    True
    """

    def __init__(self, rng, n_features, sigma, block=IMPLICIT_BLOCK, n_threads=1,
                 cache_bytes=0, precision="single"):
        parts = dict(block=block, n_threads=n_threads, cache_bytes=cache_bytes // 2,
                     precision=precision)
        self.real = ImplicitGOE(rng, n_features, sigma, **parts)
        self.imag = ImplicitGOE(rng, n_features, sigma, antisymmetric=True, **parts)
        self.sigma, self.shape = self.real.sigma, self.real.shape
        self.n_threads = self.real.n_threads
        self.dtype = np.dtype(np.complex128)

    def __matmul__(self, V):
        V = np.asarray(V, dtype=np.complex128)
        vector = V.ndim == 1
        V = V.reshape(self.shape[0], -1)
        p = V.shape[1]
        both = np.hstack([V.real, V.imag])
        a = self.real @ both
        out = np.empty(V.shape, dtype=self.dtype)  # filled in place: no temporaries
        out.real, out.imag = a[:, :p], a[:, p:]
        del a  # before the second product's
        a = self.imag @ both
        out.real -= a[:, p:]
        out.imag += a[:, :p]
        return out.ravel() if vector else out

    def rounded(self, values):
        """:meth:`ImplicitGOE.rounded` of the real and imaginary parts, in
        place."""
        values.real = self.real.rounded(values.real)
        values.imag = self.real.rounded(values.imag)
        return values

    def trace(self):
        r""":math:`\operatorname{tr} H = \operatorname{tr} A` (real: :math:`B`'s
        diagonal is zero)."""
        return self.real.trace()
