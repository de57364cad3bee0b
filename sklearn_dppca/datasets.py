"""Data for testing and benchmarking private PCA.

- :func:`make_coherent_low_rank` — synthetic rows with a planted rank-k
  principal subspace whose coherence, eigengap and top-k eigenvalue spread
  are controlled (the quantities the error bounds of
  :ref:`privacy-estimators` and :ref:`privacy-utility` depend on), scaled
  into the ball of radius ``data_norm``.
- :func:`load_real_dataset` and :func:`load_digits_for_pca` — scikit-learn's
  bundled real datasets, scaled for private PCA, with a recommended
  ``data_norm``.

Import it explicitly: ``from sklearn_dppca.datasets import ...``.

This module imports nothing from the estimators.
"""

import math
from numbers import Integral, Real

import numpy as np
from scipy import sparse as _sparse
from sklearn import datasets as _sk_datasets
from sklearn.utils import Bunch

from ._accounting import saturating_float
from .noise import make_generator

__all__ = [
    "REAL_DATASETS",
    "STANDARDISED_NORM_FACTOR",
    "load_digits_for_pca",
    "load_real_dataset",
    "make_coherent_low_rank",
    "make_genotypes",
]

# Rows per block when generating: about 32 MiB of float64.
_BLOCK_BYTES = 32 * 2**20


def _sq_norms(block):
    return np.einsum("ij,ij->i", block, block)


# --------------------------------------------------------------------------
# Synthetic data
# --------------------------------------------------------------------------
def _check_int(value, name, low, high=None):
    ok = isinstance(value, Integral) and not isinstance(value, bool)
    if ok:
        ok = value >= low and (high is None or value <= high)
    if not ok:
        bounds = f"≥ {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be an integer {bounds}; got {value!r}.")
    return int(value)


#: Largest ``data_norm`` of the generators: its square (and the rows'
#: squared norms) stay finite floats; its inverse is the smallest, whose
#: square (the eigenvalues) stays a normal float.
MAX_DATA_NORM = 1e150
#: Smallest ``fst``: the smallest normal float, so that ``(1 − F)/F`` is
#: finite.
TINY = float(np.finfo(np.float64).tiny)


def _check_real(value, name, low, high, low_open=False, high_open=False):
    ok = isinstance(value, Real) and not isinstance(value, bool)
    if ok:
        v = saturating_float(value)  # an integer beyond a float: outside any range
        ok = (v > low if low_open else v >= low) and (
            v < high if high_open else v <= high
        )
    if not ok:
        interval = (
            ("(" if low_open else "[") + f"{low}, {high}" + (")" if high_open else "]")
        )
        raise ValueError(f"{name} must be a real number in {interval}; got {value!r}.")
    return float(value)


def _check_bool(value, name):
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be a bool; got {value!r}.")


def _left_basis(rng, n_samples, n_components, coherence):
    r"""Planted :math:`U` (:math:`n \times k`): orthonormal, mean-zero
    columns.

    ``coherence=None``: i.i.d. Gaussian rows on all :math:`n` rows.
    Otherwise the signal lives on :math:`m = k / c^2` random rows (at least
    :math:`k`), each of the same norm :math:`\approx \sqrt{k/m}` in a
    uniformly random direction of :math:`\mathbb{R}^k`, so that every unit
    vector of the span, whatever basis an SVD picks, has its largest entry
    close to :math:`\sqrt{k/m} \approx c`. The columns are then centred
    over all :math:`n` rows (the other rows receive a tiny constant,
    :math:`O(\sqrt{k} / n)`) and made orthonormal by their polar factor,
    which keeps the rows' directions.
    """
    k = n_components
    if coherence is None:
        rows = np.arange(n_samples)
        block = rng.standard_normal((n_samples, k))
    else:
        m = int(min(n_samples, max(k, round(k / coherence**2))))
        rows = np.sort(rng.choice(n_samples, size=m, replace=False))
        block = rng.standard_normal((m, k))
        block /= np.linalg.norm(block, axis=1, keepdims=True)
    U = np.zeros((n_samples, k))
    U[rows] = block
    U -= U.mean(axis=0)
    left, _, right = np.linalg.svd(U, full_matrices=False)
    return left @ right, len(rows)


def make_coherent_low_rank(
    n_samples,
    n_features,
    n_components=5,
    *,
    coherence=None,
    eigengap=0.5,
    spread=1.0,
    data_norm=1.0,
    return_info=False,
    random_state=None,
):
    r"""Rows with a planted principal subspace of controlled coherence.

    The rows are :math:`X = U \operatorname{diag}(\sigma) V + E`, scaled so
    that the longest has norm ``data_norm``:

    - :math:`V` (``components``, :math:`k \times d`) are uniformly random
      orthonormal principal directions;
    - :math:`U` (:math:`n \times k`, orthonormal, mean-zero columns) sets how
      the signal is spread over the rows, i.e. the coherence
      :math:`\lVert U \rVert_\infty = \max \lvert U_{ij} \rvert`;
    - :math:`\sigma` (:math:`k`) sets the top-k eigenvalues;
    - :math:`E` is Gaussian noise, isotropic in the orthogonal complement of
      the span of :math:`V`: each row :math:`\sim N(0, \tau^2 (I - V^\top V))`.

    Because the noise is orthogonal to :math:`V`, every row's coordinates on
    the principal directions are exactly the signal,
    :math:`\langle x_i, v_j \rangle = \sigma_j U_{ij}` (the identity
    :math:`U_{ij} = \langle a_i, v_j \rangle / \sigma_j` of the
    coherence-adaptive power-method paper behind CoherentPowerPCA), and the
    coherence of the data's own top-k left singular vectors tracks
    :math:`U`'s at every eigengap the sample can resolve.

    **The population.**
    :math:`\mathbb{E}[X^\top X] / n = V^\top \operatorname{diag}(\lambda_1, \ldots,
    \lambda_k) V + \lambda_{k+1} (I - V^\top V)` with
    :math:`\lambda_j = \sigma_j^2 / n` and :math:`\lambda_{k+1} = \tau^2`, the
    expectation taken over the noise. The signal's rows have mean zero exactly
    (:math:`U`'s columns are centred) and the noise has mean zero, so this is
    also the covariance. Its eigenvalues are returned as ``info.eigenvalues``;
    ``components`` are its top-k eigenvectors (any orthonormal basis of the
    top-k eigenspace when ``spread=1``, where the top-k eigenvalues are
    equal), and

    - :math:`\lambda_1 / \lambda_k` = ``spread``, with :math:`\lambda_j`
      decaying geometrically in between;
    - :math:`(\lambda_k - \lambda_{k+1}) / \lambda_k` = ``eigengap``; all
      :math:`d - k` bottom eigenvalues equal :math:`\lambda_{k+1}`, so the
      eigengap also fixes the noise level.

    **Scale.** After the draw, everything is multiplied by one factor so
    that the longest row has norm exactly ``data_norm``; the clipping
    :math:`x \mapsto x \cdot \min(1, C / \lVert x \rVert)` that follows only
    absorbs round-off. The rows thus fill the ball as a real deployment's
    ``data_norm`` would, and the absolute eigenvalues follow from the other
    parameters: coherent data must fit its spiky rows into the ball, so its
    eigenvalues are small, as in real data. The factor is the one quantity
    read from the noise draw; the population is stated for the model scaled
    by it.

    **Coherence.** ``coherence=None`` draws i.i.d. Gaussian rows of :math:`U`
    (incoherent, like natural data):
    :math:`\lVert U \rVert_\infty \approx \sqrt{2 \ln(nk) / n}`. A value
    :math:`c` puts the signal on :math:`m \approx k / c^2` random rows (at
    least :math:`k`), each carrying an equal share :math:`\sqrt{k/m}` of
    :math:`U`'s norm in a random direction of :math:`\mathbb{R}^k`, so that
    the largest entry is about :math:`c` whatever basis of the subspace an
    SVD returns (a rotation of the basis rotates every row, and no row is
    longer than the others). :math:`c = \sqrt{k/n}` spreads the signal evenly
    over all rows, the least coherence a generic subspace keeps in every
    basis. Measured with :func:`sklearn_dppca.metrics.coherence` on ``X``
    (top :math:`k`), the realised coherence lies within about
    :math:`[0.7c, 1.4c]` for eigengaps ≥ 0.5, both spreads and all
    :math:`c`. At small eigengaps the noise takes over: once
    :math:`\lambda_k / \lambda_{k+1}` approaches the sampling resolution
    :math:`1 + \sqrt{d/n}`, the data's top-k singular vectors are mostly
    noise and its coherence is the noise's,
    :math:`\approx \sqrt{2 \ln(nk) / n}`.

    Parameters
    ----------
    n_samples : int
        Number of rows :math:`n` (people), more than ``n_components``.
    n_features : int
        Number of features :math:`d`, more than ``n_components``.
    n_components : int, default=5
        Rank :math:`k` of the planted signal.
    coherence : float, default=None
        Target :math:`\lVert U \rVert_\infty` in :math:`[\sqrt{k/n}, 1]`;
        ``None`` for Gaussian (incoherent) :math:`U`.
    eigengap : float, default=0.5
        Relative gap :math:`(\lambda_k - \lambda_{k+1}) / \lambda_k` in
        :math:`(0, 1]`. ``1`` gives noise-free rank-k data.
    spread : float, default=1.0
        Ratio :math:`\lambda_1 / \lambda_k \ge 1` of the top-k eigenvalues.
        ``1`` gives :math:`k` equal eigenvalues (the top-k variance spread
        evenly); larger values make them decay geometrically from
        :math:`\lambda_1` to :math:`\lambda_1 / \mathtt{spread}`.
    data_norm : float, default=1.0
        Norm bound :math:`C` of the rows (the estimators' ``data_norm``), in
        :math:`[10^{-150}, 10^{150}]` (the rows' squared norms and the
        eigenvalues are computed).
    return_info : bool, default=False
        Also return a :class:`~sklearn.utils.Bunch` describing the data.
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        Randomness of the construction; an int makes it deterministic.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        The rows, each of norm at most ``data_norm``.
    components : ndarray of shape (n_components, n_features)
        The true principal directions :math:`V`, orthonormal rows, ordered by
        decreasing eigenvalue (compare them with an estimator's
        ``components_`` using :mod:`sklearn_dppca.metrics`).
    info : Bunch
        Only when ``return_info=True``, with

        - ``coherence`` : float, :math:`\lVert U \rVert_\infty` of the planted
          :math:`U`;
        - ``eigenvalues`` : ndarray of shape (n_features,), population
          eigenvalues :math:`\lambda_1 \ge \ldots \ge \lambda_d` (per row, in
          the units of ``X``);
        - ``singular_values`` : ndarray of shape (n_components,),
          :math:`\sigma` of the noise-free signal
          :math:`U \operatorname{diag}(\sigma) V`;
        - ``left_singular_vectors`` : ndarray of shape (n_samples,
          n_components), the planted :math:`U`;
        - ``noise_std`` : float, :math:`\tau`, the noise's standard deviation
          along each direction orthogonal to :math:`V`;
        - ``n_signal_rows`` : int, rows that carry the signal (:math:`m`; the
          others get only the :math:`O(\sqrt{k} / n)` constant that centres
          :math:`U`).

    Raises
    ------
    ValueError
        If a parameter is out of range.

    Notes
    -----
    Time and memory are :math:`O(n d)`: the noise is drawn and projected in
    row blocks straight into ``X``, and no :math:`n \times n` matrix is formed
    (:math:`n = 100\,000`, :math:`d = 1000` takes a few seconds, dominated by
    the Gaussian draws and the 800 MB of ``X`` itself). The realised coherence
    of ``X`` (:func:`sklearn_dppca.metrics.coherence` with
    ``n_components=k``) differs from ``info.coherence`` only by how the SVD
    rotates a basis of the subspace and by the noise's small perturbation
    of it.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.datasets import make_coherent_low_rank
    >>> from sklearn_dppca.metrics import coherence
    >>> X, V, info = make_coherent_low_rank(
    ...     2000, 20, 3, coherence=0.2, eigengap=0.5, return_info=True,
    ...     random_state=0)
    >>> X.shape, V.shape
    ((2000, 20), (3, 20))
    >>> bool((np.linalg.norm(X, axis=1) <= 1.0 + 1e-12).all())
    True
    >>> bool(0.1 < coherence(X, n_components=3) <= 0.2)
    True
    >>> lam = info.eigenvalues
    >>> round(float((lam[2] - lam[3]) / lam[2]), 12)  # the eigengap
    0.5
    """
    n = _check_int(n_samples, "n_samples", 2)
    d = _check_int(n_features, "n_features", 2)
    k = _check_int(n_components, "n_components", 1, min(n, d) - 1)
    if coherence is not None:
        c_min = math.sqrt(k / n)
        coherence = _check_real(coherence, "coherence", 0.0, 1.0, low_open=True)
        if coherence < c_min * (1.0 - 1e-9):
            raise ValueError(
                f"coherence must be None or in [√(k/n), 1] = [{c_min:.4g}, 1] for "
                f"n_samples={n}, n_components={k}; got {coherence!r}. (No "
                "rank-k subspace keeps a smaller coherence in every basis.)"
            )
    eigengap = _check_real(eigengap, "eigengap", 0.0, 1.0, low_open=True)
    spread = _check_real(spread, "spread", 1.0, math.inf, high_open=True)
    # squared norms are computed: the bound's square must be a finite float
    data_norm = _check_real(data_norm, "data_norm", 1.0 / MAX_DATA_NORM, MAX_DATA_NORM)
    _check_bool(return_info, "return_info")
    rng = make_generator(random_state)

    # Population eigenvalues before scaling: λ_1 = 1, geometric to 1/spread.
    top = spread ** (-np.arange(k) / (k - 1)) if k > 1 else np.ones(1)
    tail = (1.0 - eigengap) * top[-1]  # λ_{k+1}: the noise variance τ²

    basis, _ = np.linalg.qr(rng.standard_normal((d, k)))  # V as d × k columns
    components = np.ascontiguousarray(basis.T)
    U, n_signal_rows = _left_basis(rng, n, k, coherence)
    singular_values = np.sqrt(n * top)
    tau = math.sqrt(tail)

    weighted = U * singular_values
    X = np.empty((n, d))
    blocks = [
        (start, min(start + step, n))
        for step in [max(1, _BLOCK_BYTES // (8 * d))]
        for start in range(0, n, step)
    ]
    max_sq_norm = 0.0
    for start, stop in blocks:
        block = X[start:stop]
        if tau > 0.0:
            rng.standard_normal(out=block)
            # τ (G − G V Vᵀ) + W Vᵀ: noise ⟂ span(V) plus signal, one product.
            coef = weighted[start:stop] - tau * (block @ basis)
            block *= tau
            block += coef @ components
        else:
            np.matmul(weighted[start:stop], components, out=block)
        max_sq_norm = max(max_sq_norm, float(np.max(_sq_norms(block))))

    # One scale puts the longest row on the sphere of radius C; the clipping
    # x ↦ x · min(1, C/‖x‖) then only absorbs round-off.
    scale = data_norm / math.sqrt(max_sq_norm)
    for start, stop in blocks:
        block = X[start:stop]
        block *= scale
        norms = np.sqrt(_sq_norms(block))
        over = norms > data_norm
        if over.any():
            block[over] *= (data_norm / norms[over])[:, None]

    if not return_info:
        return X, components
    planted = np.concatenate([top, np.full(d - k, tail)])
    eigenvalues = planted * scale**2
    if np.any(eigenvalues[planted > 0] < np.finfo(np.float64).tiny):
        raise ValueError(
            f"the eigenvalues (down to about data_norm² (1 − eigengap) / spread) "
            f"underflow float64 at data_norm={data_norm:g} and spread={spread:g}: "
            "give a larger data_norm or a smaller spread.")
    info = Bunch(
        coherence=float(np.max(np.abs(U))),
        eigenvalues=eigenvalues,
        singular_values=singular_values * scale,
        left_singular_vectors=U,
        noise_std=tau * scale,
        n_signal_rows=n_signal_rows,
    )
    return X, components, info


def _genotype_norm_bound(n_variants, fst, maf_range):
    r"""Public bound on a genotype row's norm, from the model's parameters.

    A row's squared norm is a sum of :math:`d` i.i.d. terms :math:`g^2`
    (each variant draws its own ancestral and population frequency), so it
    is close to normal with mean :math:`d\,\mathbb{E}[g^2]` and variance
    :math:`d \operatorname{Var}(g^2)`. With :math:`q` a population
    frequency, :math:`\mathbb{E}[q] = m_1`,
    :math:`\mathbb{E}[q^2] = m_2 + F (m_1 - m_2)` (:math:`m_1`, :math:`m_2`
    the moments of the uniform ancestral frequency), and given :math:`q`,
    :math:`\mathbb{E}[g^2] = 2q + 2q^2`, :math:`\mathbb{E}[g^4] = 2q + 14q^2`.
    The bound is the mean plus four standard deviations, capped by the hard
    bound :math:`2\sqrt{d}`.
    """
    low, high = maf_range
    m1 = (low + high) / 2.0
    m2 = (low * low + low * high + high * high) / 3.0
    q1, q2 = m1, m2 + fst * (m1 - m2)
    second = 2.0 * q1 + 2.0 * q2
    fourth = 2.0 * q1 + 14.0 * q2
    variance = max(fourth - second**2, 0.0)
    sq_bound = n_variants * second + 4.0 * math.sqrt(n_variants * variance)
    return float(min(math.sqrt(sq_bound), 2.0 * math.sqrt(n_variants)))


def make_genotypes(
    n_samples=1000,
    n_variants=20_000,
    n_populations=3,
    *,
    fst=0.05,
    maf_range=(0.05, 0.5),
    sparse=False,
    dtype=np.float64,
    return_info=False,
    random_state=None,
):
    r"""A simulated genotype matrix of a few populations (Balding–Nichols).

    Each entry is the number of copies (0, 1 or 2) of variant :math:`j`'s
    minor allele carried by sample :math:`i`, drawn under the Balding–Nichols
    model of population structure:

    - each variant's ancestral allele frequency is
      :math:`p_j \sim \operatorname{Uniform}(\mathtt{maf\_range})`;
    - each population :math:`k` drifts from it:
      :math:`p_{kj} \sim \operatorname{Beta}(p_j (1 - F)/F, (1 - p_j)(1 - F)/F)`
      with :math:`F` = ``fst``, so that :math:`\mathbb{E}[p_{kj}] = p_j` and
      :math:`\operatorname{Var}(p_{kj}) = F p_j (1 - p_j)`;
    - each sample belongs to one population, the populations balanced (their
      sizes differ by at most one, in a random order of the rows), and its
      genotype is :math:`x_{ij} \sim \operatorname{Binomial}(2, p_{kj})`,
      independently over :math:`i` and :math:`j` given the frequencies.

    The populations' mean genotypes differ by
    :math:`\approx \sqrt{8 F d \, \mathbb{E}[p(1 - p)]}` between two
    populations, against a within-population spread of about
    :math:`\sqrt{2 p(1 - p)}` along any direction, so the top
    :math:`\mathtt{n\_populations} - 1` principal components separate them
    once :math:`F d` is large: genotype PCA, the classic privacy-sensitive use
    of PCA on wide data.

    Parameters
    ----------
    n_samples : int, default=1000
        Number of samples (rows), at least ``n_populations``.
    n_variants : int, default=20_000
        Number of variants (columns).
    n_populations : int, default=3
        Number of populations.
    fst : float, default=0.05
        Fixation index :math:`F` in :math:`(0, 1)`, at least the smallest
        normal float: how far the populations' allele
        frequencies drift from the ancestral ones (0.05 is typical of
        continental human populations; smaller values are harder to
        separate).
    maf_range : tuple of two floats, default=(0.05, 0.5)
        ``(low, high)`` with
        :math:`0 < \mathtt{low} \le \mathtt{high} \le 0.5`: the range of the
        ancestral minor-allele frequencies.
    sparse : bool, default=False
        Return ``X`` as a :class:`scipy.sparse.csr_matrix`, as genotype
        matrices are often stored (most entries are 0 at rare variants). The
        values are the same as with ``sparse=False`` for the same
        ``random_state``.
    dtype : float dtype, default=np.float64
        Floating-point dtype of ``X``; the values 0, 1 and 2 are exact in
        any. ``np.float32`` halves the memory of ``X`` (a fit's own working
        blocks stay in double precision: its peak shrinks by less).
    return_info : bool, default=False
        Also return a :class:`~sklearn.utils.Bunch` describing the model.
    random_state : None, int, numpy.random.RandomState or numpy.random.Generator
        Randomness of the construction; an int makes it deterministic.

    Returns
    -------
    X : ndarray or csr_matrix of shape (n_samples, n_variants)
        The genotypes, with values in :math:`\{0, 1, 2\}`.
    populations : ndarray of shape (n_samples,), int
        The population :math:`0, \ldots, \mathtt{n\_populations} - 1` of each
        sample.
    info : Bunch
        Only when ``return_info=True``, with

        - ``ancestral_frequencies`` : ndarray of shape (n_variants,),
          :math:`p_j`;
        - ``population_frequencies`` : ndarray of shape (n_populations,
          n_variants), :math:`p_{kj}`;
        - ``data_norm`` : float, a **public** bound on the rows' norms,
          computed from ``n_variants``, ``fst`` and ``maf_range`` only (not
          from the draw): the mean of a row's squared norm plus four of its
          standard deviations, capped by the hard bound :math:`2\sqrt{d}`.
          Pass it as the estimators' ``data_norm``. A normal tail would put
          :math:`3 \cdot 10^{-5}` of the rows beyond it, but the rows of one
          population share its frequencies, and at rare variants a squared
          norm is skewed: measured on 200 000 rows, :math:`10^{-4}` to
          :math:`4 \cdot 10^{-3}` of them exceed it (the most at rare
          variants and few of them, ``n_variants=100``,
          ``maf_range=(0.005, 0.01)``), and are clipped by the fit.

    Raises
    ------
    ValueError
        If a parameter is out of range.

    Notes
    -----
    Time and memory are :math:`O(n d)`: the rows are drawn in blocks of about
    32 MB, one uniform number per entry compared with the cumulative
    probabilities :math:`(1 - p)^2` and :math:`1 - p^2` of the genotypes 0 and
    1, and written straight into ``X``. With ``sparse=True`` each block is
    converted to CSR before the next is drawn, so no dense :math:`n \times d`
    array is formed; the blocks are stacked at the end (the stored values and
    indices twice, briefly). At the default ``maf_range`` about 46% of the
    entries are non-zero, so a CSR matrix is larger than the dense array;
    it pays off with ``maf_range`` near 0.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.decomposition import PCA
    >>> from sklearn_dppca.datasets import make_genotypes
    >>> X, populations = make_genotypes(300, 2000, random_state=0)
    >>> X.shape, sorted(np.unique(X).tolist())
    ((300, 2000), [0.0, 1.0, 2.0])
    >>> np.bincount(populations).tolist()
    [100, 100, 100]

    The top two principal components separate the populations:

    >>> Z = PCA(2).fit_transform(X)
    >>> centres = np.array([Z[populations == k].mean(axis=0) for k in range(3)])
    >>> nearest = np.argmin(((Z[:, None, :] - centres) ** 2).sum(axis=2), axis=1)
    >>> float(np.mean(nearest == populations))
    1.0
    """
    n = _check_int(n_samples, "n_samples", 1)
    d = _check_int(n_variants, "n_variants", 1)
    n_pop = _check_int(n_populations, "n_populations", 1)
    if n_pop > n:
        raise ValueError(
            f"n_populations must be at most n_samples={n}; got {n_populations!r}."
        )
    # (1 − F) / F must be a finite float: F at least the smallest normal one
    fst = _check_real(fst, "fst", TINY, 1.0, high_open=True)
    try:
        low, high = maf_range
        low = _check_real(low, "maf_range[0]", 0.0, 0.5, low_open=True)
        high = _check_real(high, "maf_range[1]", low, 0.5)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            "maf_range must be a pair (low, high) with 0 < low ≤ high ≤ 0.5; "
            f"got {maf_range!r}."
        ) from exc
    _check_bool(sparse, "sparse")
    _check_bool(return_info, "return_info")
    try:
        floating = np.issubdtype(np.dtype(dtype), np.floating)
    except TypeError:
        floating = False
    if not floating:
        raise ValueError(f"dtype must be a floating-point dtype; got {dtype!r}.")
    dtype = np.dtype(dtype)
    if sparse and dtype not in (np.float32, np.float64):
        raise ValueError("sparse=True takes dtype float32 or float64 (SciPy's "
                         f"sparse matrices have no {dtype}); got {dtype}.")
    rng = make_generator(random_state)

    populations = rng.permutation(np.arange(n) % n_pop)
    ancestral = rng.uniform(low, high, size=d)
    scale = (1.0 - fst) / fst
    frequencies = rng.beta(ancestral * scale, (1.0 - ancestral) * scale,
                           size=(n_pop, d))
    # x ≥ 1 when u ≥ P(x = 0) = (1 − p)², x = 2 when u ≥ P(x ≤ 1) = 1 − p².
    at_least_one = (1.0 - frequencies) ** 2
    two = 1.0 - frequencies**2

    step = max(1, _BLOCK_BYTES // (8 * d))
    X = None if sparse else np.empty((n, d), dtype=dtype)
    blocks = []
    for start in range(0, n, step):
        stop = min(start + step, n)
        labels = populations[start:stop]
        u = rng.random((stop - start, d))
        threshold = at_least_one[labels]
        block = np.empty((stop - start, d), dtype=dtype) if sparse else X[start:stop]
        np.greater_equal(u, threshold, out=block)
        np.take(two, labels, axis=0, out=threshold)
        block += u >= threshold
        if sparse:
            blocks.append(_sparse.csr_matrix(block))
    if sparse:
        X = _sparse.vstack(blocks, format="csr", dtype=dtype)
        del blocks
    if not return_info:
        return X, populations
    info = Bunch(
        ancestral_frequencies=ancestral,
        population_frequencies=frequencies,
        data_norm=_genotype_norm_bound(d, fst, (low, high)),
    )
    return X, populations, info


# --------------------------------------------------------------------------
# Real data
# --------------------------------------------------------------------------
#: Recommended ``data_norm`` of standardised data is this times ``√d``: a
#: standardised row has mean squared norm ``d``, and on the bundled datasets
#: a radius ``2√d`` clips 2.8 % of the breast-cancer rows, 0.2 % of the
#: diabetes rows and none of the wine rows.
STANDARDISED_NORM_FACTOR = 2.0

#: Names accepted by :func:`load_real_dataset`.
REAL_DATASETS = ("digits", "breast_cancer", "wine", "diabetes")

_LOADERS = {
    "breast_cancer": (
        _sk_datasets.load_breast_cancer,
        "Wisconsin breast cancer: 30 features of cell nuclei",
    ),
    "wine": (_sk_datasets.load_wine, "Wine recognition: 13 chemical measurements"),
    "diabetes": (
        lambda: _sk_datasets.load_diabetes(scaled=False),
        "Diabetes: age, sex, body-mass index, blood pressure and 6 serum "
        "measurements, unscaled",
    ),
}


def load_real_dataset(name):
    r"""A bundled scikit-learn dataset, scaled for private PCA.

    ``"digits"`` has a public scale: pixels take values in :math:`[0, 16]`,
    so the data is divided by 16 and every row, in :math:`[0, 1]^{64}`, has
    norm at most :math:`\sqrt{64} = 8`, the recommended ``data_norm`` (no row
    is ever clipped; a smaller public radius clips the densest images but
    adds less noise).

    ``"breast_cancer"``, ``"wine"`` and ``"diabetes"`` have no public range,
    so each feature is standardised (mean 0, variance 1) **with the data's
    own mean and standard deviation. That scaling is not private**: it reads
    every row, and the released components then leak through it. It serves
    benchmarks and examples only; a real deployment must scale with public
    ranges (domain knowledge, published reference values) instead. The
    recommended ``data_norm`` is
    :math:`\mathtt{STANDARDISED\_NORM\_FACTOR} \cdot \sqrt{d} = 2\sqrt{d}`
    (see :data:`STANDARDISED_NORM_FACTOR` for how many rows it clips).

    The data comes with scikit-learn: nothing is downloaded.

    Parameters
    ----------
    name : {"digits", "breast_cancer", "wine", "diabetes"}

    Returns
    -------
    data : Bunch
        With ``data`` (ndarray of shape (n_samples, n_features), float64),
        ``data_norm`` (float, the recommended norm bound), ``feature_names``
        (ndarray of str), ``description`` (str: source, scaling, norm bound),
        ``target`` (ndarray of shape (n_samples,), the dataset's labels or
        regression target, unscaled) and ``public_scaling`` (bool, whether
        the scaling used public knowledge only).

    Raises
    ------
    ValueError
        If ``name`` is not one of :data:`REAL_DATASETS`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.datasets import load_real_dataset
    >>> wine = load_real_dataset("wine")
    >>> wine.data.shape, round(wine.data_norm, 3), wine.public_scaling
    ((178, 13), 7.211, False)
    >>> bool(np.allclose(wine.data.mean(axis=0), 0.0))
    True
    """
    if name == "digits":
        raw = _sk_datasets.load_digits()
        d = raw.data.shape[1]
        return Bunch(
            data=raw.data / 16.0,
            data_norm=float(math.sqrt(d)),
            feature_names=np.asarray(raw.feature_names, dtype=object),
            description=(
                "Digits: 1797 handwritten digits as 8×8 images (64 pixels). "
                "Pixel values in the public range [0, 16] are divided by 16, "
                "so rows lie in [0, 1]^64 and have norm at most 8 = data_norm. "
                "This scaling uses public knowledge only."
            ),
            target=raw.target,
            public_scaling=True,
        )
    if not isinstance(name, str) or name not in _LOADERS:
        raise ValueError(f"name must be one of {REAL_DATASETS}; got {name!r}.")
    loader, title = _LOADERS[name]
    raw = loader()
    X = np.asarray(raw.data, dtype=np.float64)
    n, d = X.shape
    std = X.std(axis=0)
    X = (X - X.mean(axis=0)) / np.where(std > 0.0, std, 1.0)
    data_norm = STANDARDISED_NORM_FACTOR * math.sqrt(d)
    return Bunch(
        data=X,
        data_norm=float(data_norm),
        feature_names=np.asarray(raw.feature_names, dtype=object),
        description=(
            f"{title} ({n} rows, {d} features). Each feature is standardised "
            "with the data's own mean and standard deviation: this scaling is "
            "NOT private, and a real deployment must scale with public ranges "
            f"instead. data_norm = {STANDARDISED_NORM_FACTOR:g}·√{d} = "
            f"{data_norm:.3f}; rows beyond it are clipped by the estimators."
        ),
        target=np.asarray(raw.target),
        public_scaling=False,
    )


def load_digits_for_pca():
    r"""scikit-learn's digits, scaled by the public pixel range, for private PCA.

    Same as ``load_real_dataset("digits")``: the pixels (public range
    :math:`[0, 16]`) are divided by 16, so rows lie in :math:`[0, 1]^{64}`,
    and the recommended ``data_norm`` is the public bound
    :math:`\sqrt{64} = 8`.

    Returns
    -------
    data : Bunch
        See :func:`load_real_dataset`.

    Examples
    --------
    >>> from sklearn_dppca.datasets import load_digits_for_pca
    >>> digits = load_digits_for_pca()
    >>> digits.data.shape, digits.data_norm, float(digits.data.max())
    ((1797, 64), 8.0, 1.0)
    """
    return load_real_dataset("digits")
