"""The fitted model of every private PCA: what scikit-learn's ``PCA`` does
with its attributes, on the released ones (``transform``,
``inverse_transform``, ``get_covariance``, ``get_precision`` and the
probabilistic-PCA ``score``). Post-processing only: every method reads
fitted attributes, all of them released values (docs/privacy.rst).
"""

import math

import numpy as np
from scipy import sparse
from sklearn.base import TransformerMixin
from sklearn.utils import assert_all_finite, check_array
from sklearn.utils.validation import check_is_fitted, validate_data

from . import _array_api
from ._array_api import check_same_namespace
from ._blocks import map_into
from ._dask import (
    as_dask_array,
    check_numeric_columns,
    has_sparse_chunks,
    is_dask_collection,
    saturate_big_numbers,
)
from ._row_maps import row_spans
from ._warning_rules import warn_if_scored_exactly


def whiten_scale(variance, whiten, total):
    r"""What ``transform`` divides each component's score by:
    :math:`\sqrt{\lambda_j}` (``whiten=True``, scikit-learn's) or, for
    ``whiten="partial"``, :math:`(\lambda_j T)^{1/4}`, the geometric mean of
    the component's standard deviation and the data's total one
    (:math:`\lambda` = ``explained_variance_``, :math:`T` =
    ``total_variance_``): released values only, floored at the dtype's
    epsilon. Each component's scale is its own, so the first :math:`k`
    scores of a fit are those of its truncation to :math:`k` components.
    The estimators' ``transform`` and the CLI's share it."""
    xp = _array_api.module_of(variance)  # NumPy for NumPy
    if isinstance(whiten, str):  # "partial"
        scale = xp.sqrt(xp.sqrt(variance * float(total)))
    else:
        scale = xp.sqrt(variance)
    return xp.maximum(scale, xp.full_like(scale, xp.finfo(scale.dtype).eps))


def map_non_finite(X):
    """The public map of ``non_finite="clip"``: :func:`numpy.nan_to_num` of
    every value (NaN → 0, ±inf → ± the dtype's largest finite value), on a
    copy of validated ``X``, in its dtype: a Dask array lazily, chunk by
    chunk; a sparse matrix's stored values; an Array API array with its
    namespace's functions. ``X`` is never modified."""
    if is_dask_collection(X):  # each chunk as in memory (CSR ones too)
        return X.map_blocks(map_non_finite, dtype=X.dtype)
    if hasattr(X, "tocsr"):  # SciPy sparse: the implicit zeros are finite
        return _mapped_values(X)
    if _array_api.namespace(X) is not None:
        return _array_api.nan_to_num(X)
    # one copy, mapped in place by blocks of rows: nan_to_num's masks are a
    # block's, not the whole array's (0.6 of a copy more: review 60)
    out = np.array(X, copy=True)
    flat = out.reshape(out.shape[0], -1) if out.ndim else out.reshape(1, 1)
    band = max(1, 2**20 // max(flat.shape[1], 1))
    for start in range(0, flat.shape[0], band):
        np.nan_to_num(flat[start:start + band], copy=False)
    return out


def _mapped_values(X):
    """A sparse ``X`` with its stored values mapped by
    :func:`numpy.nan_to_num`, a run at a time (``_blocks.map_into``):
    CSR or CSC, a copy of the values alone beside read-only views of ``X``'s
    own indices; another format, converted to CSR (a copy already, mapped
    in place). A copy of the matrix whole (its indices too, and masks as
    long as its values) peaked at 1.4 times a fit's plan (mend 124); a fit
    no longer copies: its passes map the block of rows they read
    (``_rows.lazy_rows``, mend 129)."""
    if X.format in ("csr", "csc"):
        values = np.array(X.data, copy=True)
        indices, indptr = X.indices.view(), X.indptr.view()
        indices.flags.writeable = indptr.flags.writeable = False  # X's own
        # set after construction: SciPy's constructor may copy the views
        out = type(X)(X.shape, dtype=X.dtype)
        out.data, out.indices, out.indptr = values, indices, indptr
        out.has_canonical_format = X.has_canonical_format
    else:
        out = X.tocsr(copy=True)
    map_into(out.data, out.data)  # in place, a run at a time
    return out


def _finite_chunk(rows):
    """A Dask chunk, refused if it holds NaN or inf (scikit-learn's error)."""
    assert_all_finite(rows.data if sparse.issparse(rows) else rows, input_name="X")
    return rows


def _quadratic_form(rows, mean, components, variance, rest, finite=False):
    """The quadratic form of ``_log_likelihood`` on NumPy or CSR rows (a
    Dask chunk: checked for NaN and inf first if ``finite``), by blocks of
    :func:`row_spans`."""
    if finite:
        _finite_chunk(rows)
    out = np.empty(rows.shape[0])
    if sparse.issparse(rows):  # the centre's terms, once for every block
        shift, mean_squares = mean @ components.T, mean @ mean
    for a, b in row_spans(rows):
        block = rows[a:b]
        if sparse.issparse(block):
            block = block.astype(np.float64)
            with np.errstate(over="ignore", invalid="ignore"):  # redone below
                projected = block @ components.T - shift
                squares = (np.asarray(block.multiply(block).sum(axis=1)).ravel()
                           - 2.0 * (block @ mean) + mean_squares)
                residue = np.maximum(
                    squares - np.einsum("ij,ij->i", projected, projected), 0.0)
            # a term that overflowed (inf - inf is NaN): the row densified,
            # and read as a dense row is
            far = np.flatnonzero(~(np.isfinite(squares) & np.isfinite(residue)
                                   & np.isfinite(projected).all(axis=1)))
            if far.size:
                projected[far], residue[far] = _dense_terms(
                    block[far].toarray(), mean, components)
        else:
            projected, residue = _dense_terms(block, mean, components)
        out[a:b] = (projected**2 / variance).sum(axis=1) + rest * residue
    return out


def _dense_terms(block, mean, components):
    """The projections of dense rows centred on ``mean`` and the squared
    norms of their residues."""
    centred = np.subtract(block, mean, dtype=np.float64)
    projected = centred @ components.T
    centred -= projected @ components
    return projected, np.einsum("ij,ij->i", centred, centred)


class _PCAModelMixin(TransformerMixin):
    """The methods of a fitted private PCA (mixed into ``_BasePrivatePCA``).

    A ``TransformerMixin`` itself, so that scikit-learn wraps ``transform``
    defined here for ``set_output`` (it wraps the methods a class defines).
    """

    # ------------------------------------------------------------ transform
    def transform(self, X):
        """Project ``X`` on the released components.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_components_)
        """
        check_is_fitted(self)
        if is_dask_collection(X):  # lazily, chunk by chunk: a Dask array
            X = self._check_dask_input(X)
            if self._finite_input():  # refused as in memory, chunk by chunk
                X = X.map_blocks(_finite_chunk, dtype=X.dtype, meta=X._meta)
            return self._transform(self._mapped(X))
        X = saturate_big_numbers(X)  # as the fit reads them: infinite
        check_numeric_columns(X)
        check_same_namespace(X, self, attribute="components_", method="transform")
        namespace = _array_api.namespace(X)
        if namespace is not None:
            X = _array_api.plain(X, namespace[0])
        X = validate_data(
            self,
            X,
            accept_sparse=("csr", "csc") if namespace is None else False,
            dtype=[np.float64, np.float32]
            if namespace is None
            else _array_api.float_dtypes(*namespace),
            reset=False,
            ensure_all_finite=self._finite_input(),
        )
        return self._transform(self._mapped(X))

    def _finite_input(self):
        """Whether validated input must be finite (``non_finite="raise"``);
        with ``"clip"`` it is mapped by :meth:`_mapped` instead."""
        return getattr(self, "non_finite", "raise") == "raise"

    def _mapped(self, X):
        """Validated ``X`` through the public map of ``non_finite="clip"``
        (:func:`map_non_finite`), unchanged with ``"raise"``."""
        return X if self._finite_input() else map_non_finite(X)

    def _check_dask_input(self, X):
        X, names = as_dask_array(X)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but {type(self).__name__} is "
                f"expecting {self.n_features_in_} features as input."
            )
        fitted = getattr(self, "feature_names_in_", None)
        if fitted is not None and names is not None and list(names) != list(fitted):
            raise ValueError(
                "The feature names should match those that were passed during fit."
            )
        return X

    def _transform(self, X):
        if is_dask_collection(X):
            # by blocks of rows, lazily: Dask multiplies NumPy chunks only (CSR
            # chunks one at a time), and the saturation below looks at the
            # scores, which computed at once would run the caller's graph at
            # transform(), outside the next private step's silence (review
            # 123 F2)
            k = self.components_.shape[0]
            dtype = np.result_type(X.dtype, self.components_.dtype)
            if X.numblocks[1] > 1:
                X = X.rechunk({1: -1})
            return X.map_blocks(self._transform, chunks=(X.chunks[0], (k,)),
                                meta=np.empty((0, 0), dtype=dtype))
        X, components, mean = self._in_dtype_of(X, X, self.components_, self.mean_)
        # In a Pipeline this projects the training rows after this step's
        # charge and before the next private step's, outside both silences:
        # a flag one value raises (a product underflowing to a subnormal or
        # 0, one overflowing to inf) would be a warning, or under
        # np.seterr(all="raise") a failure, that one row decides (as
        # PublicScaler's map, review 113 F1). The values are the product's.
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            X_new = self._projected(X, components, mean)
            xp = _array_api.module_of(X_new)
            if not bool(xp.all(xp.isfinite(X_new))):
                X_new = self._saturated(X, X_new, components, mean)
        return X_new

    def _projected(self, X, components, mean, scale=None):
        """The scores of ``X``'s rows, each divided by ``scale`` (its
        entry) first where given."""
        centre = mean @ components.T
        if scale is None:
            X_new = X @ components.T - centre
        else:
            rows = (sparse.diags(1.0 / scale) @ X if sparse.issparse(X)
                    else X / scale[:, None])
            X_new = rows @ components.T - centre / scale[:, None]
        return X_new / self._whiten_scale() if self.whiten else X_new

    def _saturated(self, X, X_new, components, mean):
        """``X_new`` with the rows of finite values whose scores overflowed
        (to ±inf, or NaN from inf − inf) projected again at the scale of
        their largest entry and saturated at the dtype's largest finite
        values, as the scalers' maps are: in a Pipeline a finite row must
        not become a non-finite one that the next private step refuses
        after this step's charge (review 120 F2). Rows with a non-finite
        entry keep their scores."""
        xp = _array_api.module_of(X_new)
        if sparse.issparse(X):  # in the scores' dtype: a float32 fit stays float32
            largest = np.asarray(abs(X).max(axis=1).toarray(),
                                 dtype=X_new.dtype).ravel()
        else:
            largest = xp.max(xp.abs(X), axis=1)
        finite = xp.isfinite(largest) & (largest > 0)
        scale = xp.where(finite, largest, xp.ones_like(largest))
        big = float(xp.finfo(X_new.dtype).max)
        again = xp.clip(self._projected(X, components, mean, scale)
                        * scale[:, None], -big, big)
        overflowed = finite & ~xp.all(xp.isfinite(X_new), axis=1)
        return xp.where(overflowed[:, None], again, X_new)

    def _whiten_scale(self):
        return whiten_scale(self.explained_variance_, self.whiten,
                            self.total_variance_)

    def inverse_transform(self, X):
        r"""Map projected data back to feature space.

        Exact on the span of ``components_``: ``inverse_transform(transform(X))``
        is the projection of :math:`X - \mathtt{mean\_}` on that span, plus
        ``mean_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_components_)

        Returns
        -------
        X_original : ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        if is_dask_collection(X):
            X, _ = as_dask_array(X)
            if has_sparse_chunks(X):  # as a sparse matrix is refused
                raise TypeError(
                    "Sparse data was passed for X, but dense data is required: "
                    "inverse_transform takes dense scores (map the chunks with "
                    ".toarray()).")
            X = X.map_blocks(_finite_chunk, dtype=X.dtype, meta=X._meta)
        elif (namespace := _array_api.namespace(X)) is not None:
            check_same_namespace(
                X, self, attribute="components_", method="inverse_transform"
            )
            check_numeric_columns(X)  # refused without quoting a value
            X = check_array(X, dtype=_array_api.float_dtypes(*namespace))
        else:
            X = saturate_big_numbers(X)
            check_numeric_columns(X)
            X = check_array(X, dtype=[np.float64, np.float32])
        if X.shape[1] != self.n_components_:
            raise ValueError(
                f"X has {X.shape[1]} features, but inverse_transform expects "
                f"n_components_={self.n_components_} features."
            )
        components = self.components_
        if self.whiten:
            scale = self._whiten_scale()
            components = components * _array_api.xp_column(
                _array_api.module_of(scale), scale
            )
        X, components, mean = self._in_dtype_of(X, X, components, self.mean_)
        return X @ components + mean

    def _in_dtype_of(self, X, *arrays):
        """``arrays`` (``X`` too, if passed) in the wider of ``X``'s and the
        fit's precision, for an Array API ``X``: NumPy promotes a float32
        fit's attributes in a product with float64 rows, PyTorch refuses
        mixed dtypes (a float32 fit's ``transform`` of float64 rows raised
        its own error). Unchanged for NumPy and Dask."""
        namespace = _array_api.namespace(X)
        if namespace is None:
            return arrays
        xp = namespace[0]
        wide = xp.result_type(X.dtype, self.components_.dtype)
        return tuple(xp.astype(a, wide, copy=False) for a in arrays)

    @property
    def _n_features_out(self):
        return self.components_.shape[0]

    # --------------------------------------------- probabilistic PCA model
    def _model(self):
        r"""The probabilistic PCA model, on the host in float64.

        ``(components, variances, residual)`` with
        :math:`\operatorname{cov} = \mathtt{components}^\top
        \operatorname{diag}(\mathtt{variances} - \mathtt{residual}) \,
        \mathtt{components} + \mathtt{residual} \cdot I`: the variance along
        a component is :math:`\max(c, \sigma^2)`, :math:`c` its
        ``captured_variance_`` (the data's variance along it, estimated) and
        :math:`\sigma^2` = ``noise_variance_``; scikit-learn's model, whose
        :math:`c` is its ``explained_variance_`` (they are equal without
        noise). With ``whiten=True`` scikit-learn scales the components by
        the whitening scale :math:`\sqrt{\lambda}` (:math:`\lambda` =
        ``explained_variance_``) in its model, which makes it
        :math:`\sigma^2 + \lambda \cdot \max(c - \sigma^2, 0)`: kept for
        drop-in parity (see :meth:`get_covariance`); ``whiten="partial"``,
        which scikit-learn does not have, keeps the data's model.
        """
        components = _array_api.to_host(self.components_)
        variance = _array_api.to_host(self.captured_variance_)
        residual = float(self.noise_variance_)
        excess = np.maximum(variance - residual, 0.0)
        if self.whiten and not isinstance(self.whiten, str):  # True, not "partial"
            excess = excess * _array_api.to_host(self.explained_variance_)
        return components, excess + residual, residual

    def _floored_model(self):
        r""":meth:`_model` with its variances floored.

        A residual of 0 (the de-noising clamps it there on few rows at small
        :math:`\varepsilon`) becomes the released total's share per remaining
        direction, :math:`(\mathtt{total\_variance\_} -
        \sum \mathtt{variances}) / (d - k)`, released values; then
        floors at machine precision relative to the largest variance keep
        the precision finite when released variances are 0. Component
        variances are at least the residual one, as in the model.
        """
        components, variance, residual = self._model()
        k, d = components.shape
        total = getattr(self, "total_variance_", None)
        if residual <= 0.0 and total is not None and d > k:
            # a residual the de-noising clamped to 0 (few rows, small ε):
            # the released total's share per remaining direction instead
            residual = max((float(total) - float(variance.sum())) / (d - k), 0.0)
        scale = max(float(variance.max(initial=0.0)), residual)
        floor = np.finfo(np.float64).eps * scale if scale > 0 else 1.0
        residual = max(residual, floor)
        return components, np.maximum(variance, residual), residual

    def _host_precision(self):
        """The precision of the floored model, by its eigenstructure (float64)."""
        components, variance, residual = self._floored_model()
        if components.shape[0] == components.shape[1]:  # no residual subspace
            return (components.T / variance) @ components
        precision = (components.T * (1.0 / variance - 1.0 / residual)) @ components
        precision.flat[:: precision.shape[0] + 1] += 1.0 / residual
        return precision

    def _in_fit_dtype(self, values):
        """Host float64 ``values`` in the fit's namespace, device and dtype."""
        if isinstance(self.components_, np.ndarray):
            return values.astype(self.components_.dtype, copy=False)
        return _array_api.like(values, self.components_)

    def get_covariance(self):
        r"""Covariance of the data under the probabilistic PCA model.

        :math:`\operatorname{cov} = \mathtt{components\_}^\top
        \operatorname{diag}(v - \sigma^2) \, \mathtt{components\_} + \sigma^2 I`
        with :math:`\sigma^2` = ``noise_variance_`` and
        :math:`v = \max(\mathtt{captured\_variance\_}, \sigma^2)`:
        scikit-learn's model, with the data's variance along each released
        component (``captured_variance_``) where scikit-learn has
        ``explained_variance_`` (without noise they are equal). Along a noisy
        component the data has less variance than its own eigenvalue, and
        this choice is the Frobenius-optimal one for the released components
        (docs/privacy.rst §6, "The spectrum"); ``score`` and
        ``get_precision`` use the same model.

        With ``whiten=True``, scikit-learn's ``PCA`` scales its (unit-norm)
        components by :math:`\sqrt{\mathtt{explained\_variance\_}}` in this
        formula, so that :math:`v - \sigma^2 = \lambda \cdot \max(c - \sigma^2, 0)`
        (:math:`\lambda` = ``explained_variance_``, :math:`c` =
        ``captured_variance_``). This
        method does the same, and so do :meth:`get_precision`,
        :meth:`score_samples` and :meth:`score`, so that they equal
        scikit-learn's for either value of ``whiten`` at
        ``epsilon=float("inf")``. That whitened model is not the
        probabilistic PCA model of the data (its variances are in squared
        units; scikit-learn issue #13898). The released attributes do not
        depend on ``whiten``, which only scales ``transform``'s output: for
        the data's model, call these methods with ``whiten=False``
        (``set_params(whiten=False)`` on the fitted estimator is
        post-processing and costs no budget). ``whiten="partial"``, which
        scikit-learn does not have, leaves the model the data's.

        Returns
        -------
        cov : array of shape (n_features, n_features)
            In the fit's namespace, on its device and in its dtype (float32
            for a float32 fit), computed in float64.
        """
        check_is_fitted(self)
        self._check_square_result("get_covariance")
        components, variance, residual = self._model()
        cov = (components.T * (variance - residual)) @ components
        cov.flat[:: cov.shape[0] + 1] += residual
        return self._in_fit_dtype(cov)

    def get_precision(self):
        """Inverse of :meth:`get_covariance`, by its eigenstructure.

        Variances are floored at machine precision relative to the largest,
        so the precision is finite even when the released residual variance
        is 0.

        Returns
        -------
        precision : array of shape (n_features, n_features)
            In the fit's namespace, on its device and in its dtype, computed
            in float64.
        """
        check_is_fitted(self)
        self._check_square_result("get_precision")
        return self._in_fit_dtype(self._host_precision())

    def _check_square_result(self, name):
        """Refuse a ``d × d`` result (two float64 ``d × d`` arrays while it is
        computed) over ``memory_limit``, with a clear error, rather than run
        out of memory part-way: on wide data the model's methods that need
        no such matrix are named."""
        d = self.n_features_in_
        needed, limit = 16.0 * d * d, self._memory_limit()
        if limit is not None and needed > limit:
            raise MemoryError(
                f"{name} returns a {d} × {d} matrix, which takes about "
                f"{needed / 2**30:.3g} GiB to compute, over this estimator's "
                f"memory_limit ({limit / 2**30:.3g} GiB). score, score_samples, "
                "transform and inverse_transform need no such matrix; the model "
                "is components_, captured_variance_ and noise_variance_ "
                "(get_covariance's docstring gives the formula)."
            )

    def _log_likelihood(self, X):
        r"""Per-sample log-likelihood of validated ``X``, in float64 where the
        device has it (on ``X``'s device for an Array API input).

        With :math:`W` = ``components`` (orthonormal rows), :math:`v` their
        floored variances and :math:`r` the residual one, the model's
        precision is :math:`W^\top \operatorname{diag}(1/v) W + (I - W^\top
        W)/r`, so for :math:`c = x - \mathtt{mean\_}` the quadratic form is
        :math:`\sum_j (Wc)_j^2/v_j + \lVert c - W^\top W c\rVert^2/r`:
        :math:`O(dk)` per row and no :math:`d \times d` matrix. Dense rows
        are centred by blocks; sparse rows (CSR or CSC) implicitly, with
        :math:`\lVert c - W^\top Wc\rVert^2 = \lVert x\rVert^2 - 2 x
        \cdot \mathtt{mean\_} + \lVert\mathtt{mean\_}\rVert^2 -
        \lVert Wc\rVert^2`, never densified; a Dask array chunk by chunk,
        lazily (a Dask array of log-likelihoods, as ``transform``'s output).
        """
        check_is_fitted(self)
        warn_if_scored_exactly(self)
        dask = is_dask_collection(X)
        X = saturate_big_numbers(X)  # a Dask collection as it is
        check_numeric_columns(X)
        if not dask:
            check_same_namespace(X, self, attribute="components_",
                                 method="score_samples")
        namespace = _array_api.namespace(X)
        if dask:  # lazily, chunk by chunk, as transform
            X = self._check_dask_input(X)
        elif namespace is None:
            X = validate_data(self, X,
                              dtype=[np.float64, np.float32], reset=False,
                              accept_sparse=("csr", "csc"),
                              ensure_all_finite=self._finite_input())
        else:
            X = validate_data(self, _array_api.plain(X, namespace[0]),
                              dtype=_array_api.float_dtypes(*namespace),
                              reset=False, ensure_all_finite=self._finite_input())
        X = self._mapped(X)
        components, variance, residual = self._floored_model()
        n_features, k = X.shape[1], variance.shape[0]
        # without a residual subspace (k = d) its term is rounding: left out
        rest = 1.0 / residual if k < n_features else 0.0
        if namespace is not None:  # on X's device, in float64 where it has it
            xp, device = namespace
            dtype = _array_api.widest_float(xp, device)
            basis = _array_api.like(components, X, dtype)
            centred = xp.astype(X, basis.dtype) - xp.astype(self.mean_, basis.dtype)
            projected = centred @ basis.T
            residue = centred - projected @ basis
            quad = (xp.sum(projected**2 / _array_api.like(variance, X, dtype), axis=1)
                    + rest * xp.sum(residue**2, axis=1))
        elif dask:
            quad = X.map_blocks(
                _quadratic_form, np.asarray(self.mean_, dtype=np.float64),
                components, variance, rest, self._finite_input(),
                drop_axis=1, dtype=np.float64)
        else:
            quad = _quadratic_form(X.tocsr() if sparse.issparse(X) else X,
                                   np.asarray(self.mean_, dtype=np.float64),
                                   components, variance, rest)
        logdet = float(np.log(variance).sum()) + (n_features - k) * math.log(residual)
        ll = -0.5 * (quad + n_features * math.log(2.0 * math.pi) + logdet)
        return X, ll

    def score_samples(self, X):
        """Log-likelihood of each sample under the probabilistic PCA model.

        The model of :meth:`get_covariance` (which, like scikit-learn's,
        depends on ``whiten``).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Sparse rows (CSR or CSC) are centred implicitly, never densified;
            a Dask array or DataFrame is scored chunk by chunk, lazily.

        Returns
        -------
        ll : array of shape (n_samples,)
            In ``X``'s namespace and device (a Dask array for Dask input;
            NumPy for sparse), in the wider of ``X``'s and the
            fit's dtypes (float32 for float32 data and fit), as scikit-learn;
            computed in float64.
        """
        X, ll = self._log_likelihood(X)
        if sparse.issparse(X) or is_dask_collection(X):
            return ll.astype(np.result_type(X.dtype, self.mean_.dtype))
        xp = _array_api.module_of(X)
        return _array_api.astype(ll, xp.result_type(X.dtype, self.mean_.dtype))

    def score(self, X, y=None):
        r"""Average log-likelihood of the samples (higher is better).

        Lets ``GridSearchCV`` and ``cross_val_score`` select hyperparameters
        without a scorer. The model of :meth:`get_covariance`; the average is
        taken in float64. Time :math:`O(ndk)` (:math:`O(\mathrm{nnz} \cdot k)`
        for sparse rows) and no :math:`d \times d` matrix, as
        :meth:`score_samples`.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
        y : Ignored

        Returns
        -------
        ll : float
        """
        _, ll = self._log_likelihood(X)
        if is_dask_collection(ll):
            return float(ll.mean().compute())
        return float(_array_api.module_of(ll).mean(ll))
