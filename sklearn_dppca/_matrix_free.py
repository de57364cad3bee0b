r"""The matrix-free path of a Gaussian release of the scatter matrix:
:math:`\hat{M} = \sum y y^\top + S` held as an operator, never formed, for
the estimators whose release is that matrix (``PrivatePCA``, with the GOE
kernel; ``ComplexGaussPCA``, with the GUE kernel). The choice of the path
from public values (dense, matrix-free, or ``PrivatePCA``'s noisy power
method) and the release itself; docs/privacy.rst, "The matrix-free path".
"""

import math

from ._dask import ChunkedRows
from ._paths import matrix_free_faster
from ._releases import PRODUCTS, Release
from ._reported import _engine
from ._rows import ImplicitScatter, sparse_row_jobs
from ._spectrum import solver_products
from ._threads import kernel_threads
from .noise import ImplicitGOE, ImplicitGUE, dense_noise, noise_scale


def _reread_costly(engine):
    r"""Whether each pass of the matrix-free path reads a Dask array's chunks
    again at a cost that keeps ``"auto"`` on the dense path: dense chunks
    (a Parquet partition decoded again). Sparse chunks are not: their dense
    path forms a :math:`d \times d` Gram matrix of every chunk from sparse
    products, which costs more than reading them again, so the cost model of
    sparse rows in memory applies."""
    engine = _engine(engine)
    return isinstance(engine, ChunkedRows) and not engine.sparse_chunks


class _MatrixFreeMixin:
    r"""The matrix-free path of a release :math:`\hat{M} = \sum y y^\top +
    S` (:class:`PrivatePCA`'s GOE kernel, :class:`ComplexGaussPCA`'s GUE
    kernel, by ``_hermitian_noise``): the choice of the path from public
    values and the release as an operator. ``_noisy_power``: whether the
    estimator also has ``path="noisy_power"``, which ``"auto"`` takes where
    the kernel's blocks do not fit in their cache."""

    _noisy_power = False

    @property
    def _pilot_centring(self):
        # releases of the Gram matrix: centred in one pass on many rows
        # (docs/privacy.rst §5); the matrix-free path centres on the mean
        return getattr(self, "_fit_path", "dense") == "dense"

    def _matrix_free_obstacle(self, n_samples, n_features, engine):
        r"""Why no path without a :math:`d \times d` matrix (matrix-free,
        noisy power) can run this fit, or None."""
        if (self.epsilon == math.inf and self.data_norm is None
                and getattr(self, "bounds", None) is None):
            return ("needs a norm bound (data_norm or bounds): epsilon=inf with "
                    "data_norm=None clips nothing, and these paths compute on "
                    "the rows scaled by the bound")
        solver = self._eigen_solver(n_samples, n_features)
        if solver != "randomized":
            return (f"needs svd_solver='randomized' (this fit's solver is "
                    f"{solver!r}: every eigenpair, or ARPACK's one vector at a "
                    "time, would need M̂ whole or a pass per vector)")
        return self._blocks_obstacle(engine, (n_samples, n_features))

    def _path(self, n_samples, n_features, engine):
        """The path, from public values only: the shape, the solver's
        parameters, the kind of input and the memory limit.

        ``"auto"``: dense where its matrices fit in ``memory_limit`` and a
        model of both costs does not predict the matrix-free path about as
        fast (:func:`matrix_free_faster`); otherwise the matrix-free path
        (the same release) where the kernel's blocks all fit in their cache
        or the estimator has no other, else the noisy power method: there
        every product would draw the kernel's deviates again (hours at
        :math:`d = 10^5`), while the noisy power method's cost grows as
        :math:`d k`. Where the path so chosen does not fit in
        ``memory_limit`` (with the copies of the rows), the first of the
        dense, matrix-free and noisy power paths that fits
        (:meth:`_first_fitting`)."""
        obstacle = self._matrix_free_obstacle(n_samples, n_features, engine)
        if self.path in ("matrix_free", "noisy_power"):
            if obstacle is not None:
                raise ValueError(f"path={self.path!r} {obstacle}.")
            return self.path
        if self.path == "dense" or obstacle is not None:
            return "dense"
        paths = ("dense", "matrix_free", "noisy_power") if self._noisy_power else (
            "dense", "matrix_free")
        preferred = self._preferred_path(n_samples, n_features, engine)
        return self._first_fitting(
            n_samples, n_features,
            [preferred] + [path for path in paths if path != preferred])

    def _preferred_path(self, n_samples, n_features, engine):
        """``"auto"``'s path by speed: dense where its matrices fit and the
        matrix-free path is not predicted about as fast, else matrix-free
        where the kernel's blocks fit in their cache (or there is no noisy
        power path), else the noisy power method."""
        k = self._truncated_k(n_samples, n_features)
        cached = self._kernel_cache(n_features) / self._kernel_bytes(n_features)
        if self._dense_fits(n_samples, n_features):
            if not matrix_free_faster(
                    n_samples, n_features, k + self.n_oversamples,
                    solver_products(
                        k, n_features, iterated_power=self.iterated_power,
                        power_iteration_normalizer=self.power_iteration_normalizer,
                        filtered=True),
                    _reread_costly(engine), min(1.0, cached),
                    hermitian=self._hermitian_noise):
                return "dense"
        if cached >= 1.0 or not self._noisy_power:
            return "matrix_free"
        return "noisy_power"

    def _own_releases(self, plan, n_samples, n_features):
        # the matrix-free path: the dense path's release, seen through the
        # solver's products; the noisy power method: one release per pass
        if self._fit_path == "dense":
            return super()._own_releases(plan, n_samples, n_features)
        passes = (self._noisy_power_passes(n_samples, n_features)
                  if self._fit_path == "noisy_power" else 1)
        return [Release("covariance", plan.mus["covariance"], PRODUCTS,
                        draws=passes)]

    @staticmethod
    def _covariance_sigma(rows, plan):
        r""":math:`\sigma` of the scatter matrix's release, on either path:
        its Frobenius sensitivity is :math:`\sqrt 2 C^2` (docs/privacy.rst
        §3) and the GOE kernel's coordinates are i.i.d. :math:`N(0,
        \sigma^2)`, so :math:`\mu = \sqrt 2 C^2 / \sigma` (§4); the GUE
        kernel's real part is that kernel and its imaginary part does not
        depend on the data (§6)."""
        return noise_scale(math.sqrt(2.0) * rows.data_norm**2, plan.mus["covariance"])

    @staticmethod
    def _released_trace(exact, sigma, rng):
        r"""``(exact + N(0, σ²), σ)``: the trace :math:`\sum \lVert y
        \rVert^2` released with the scatter matrix's :math:`\sigma`, drawn
        after its kernel, on either path. Jointly with the matrix the
        sensitivity is still :math:`\sqrt 2 C^2`, so it is free
        (docs/privacy.rst §6, "The trace")."""
        return exact + float(dense_noise(rng, (), sigma)), sigma

    def _implicit_release(self, rows, plan, rng):
        r"""The dense path's release, :math:`\hat{M} = \sum y y^\top + S`
        with the same :math:`\sigma` and the same trace release, held as an
        operator (:class:`~sklearn_dppca._rows.ImplicitScatter`; the kernel
        :class:`~sklearn_dppca.noise.ImplicitGOE`, or
        :class:`~sklearn_dppca.noise.ImplicitGUE` for a Hermitian release):
        its products are post-processing.

        Returns
        -------
        (released, sigma, trace)
            The operator, :math:`\sigma`, and the released trace with its
            :math:`\sigma` (drawn after the kernel's keys, as the dense
            path draws it after the kernel).
        """
        d = self.n_features_in_
        sigma = self._covariance_sigma(rows, plan)
        kernel = ImplicitGUE if self._hermitian_noise else ImplicitGOE
        cores = self._planned_cores()  # the threads the plan counted
        noise = kernel(rng, d, sigma, n_threads=kernel_threads(d, cores),
                       cache_bytes=self._kernel_cache(d))
        exact_trace = rows.data_norm**2 * rows.sq_norm_sum()
        trace = self._released_trace(exact_trace, sigma, rng)
        return (ImplicitScatter(rows, noise, exact_trace,
                                sparse_row_jobs(rows, cores)), sigma, trace)
