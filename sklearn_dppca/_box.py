"""Public bounds on the rows: one spelling of a box of per-feature ranges,
``(lower, upper)`` (scalars broadcast, a dict by feature name), checked,
and its radius around its centre: functions of public values only (the
rows are mapped into a box by the fit's step, ``_bounds._box_rows``;
:ref:`privacy-preprocessing`).
"""

import warnings

import numpy as np
from scipy import sparse
from sklearn.utils import assert_all_finite

from . import _array_api
from ._blocks import BoxedCSR


def by_feature_name(values, name, feature_names, what, instead):
    """The entries of the dict ``values`` in the order of ``feature_names``
    (it may name more features); refused without names, or with a feature
    it does not name."""
    if feature_names is None:
        raise ValueError(
            f"{name} is a dict by feature name, but X has no feature names: "
            f"fit a DataFrame with string column names, or give {instead} in "
            "the order of the columns."
        )
    missing = [str(f) for f in feature_names if f not in values]
    if missing:
        raise ValueError(f"{name} gives no {what} for the feature(s) {missing}.")
    return [values[f] for f in feature_names]


def parse_box(bounds, n_features, feature_names=None, name="bounds",
              pairs_deprecated=False):
    """``(lower, upper)`` float arrays of length ``n_features`` from the one
    spelling of public bounds the package takes everywhere:

    - ``(lower, upper)``: two numbers (broadcast) or arrays of length
      ``n_features``. A pair always means lower and upper, whatever the
      number of features;
    - a dict ``{feature name: (low, high)}``, for ``X`` with feature names
      (it may name more features than ``X`` has).

    Anything else is an error, never a guess. ``pairs_deprecated``: one
    ``(low, high)`` pair per feature, ``PublicScaler``'s former spelling, is
    still read, with a ``FutureWarning`` that says how to write it (with two
    features a pair of pairs is ``(lower, upper)``).
    """
    if isinstance(bounds, dict):
        values = by_feature_name(bounds, name, feature_names, "(low, high)",
                                 f"{name}=(lower, upper)")
        try:
            pairs = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            pairs = None
        if pairs is None or pairs.shape != (n_features, 2):
            raise ValueError(f"{name}: every value of the dict must be one "
                             f"(low, high) pair; got {bounds!r}.")
        return pairs[:, 0].copy(), pairs[:, 1].copy()
    try:
        pair = [np.asarray(side, dtype=np.float64) for side in bounds]
    except (TypeError, ValueError):
        pair = None
    if pair is not None and len(pair) == 2 and all(
            side.ndim == 0 or side.size == n_features for side in pair):
        return tuple(np.broadcast_to(side.ravel() if side.ndim else side,
                                     (n_features,)).copy() for side in pair)
    if (pairs_deprecated and pair is not None and len(pair) == n_features
            and all(side.shape == (2,) for side in pair)):
        pairs = np.stack(pair)
        warnings.warn(
            f"{name} as one (low, high) pair per feature is deprecated: give "
            f"{name}=(lower, upper), the lows and the highs, as every bounds "
            f"of the package takes them: {name}=({pairs[:, 0].tolist()}, "
            f"{pairs[:, 1].tolist()}); or a dict by feature name. With two "
            "features a pair of pairs already means (lower, upper).",
            FutureWarning, stacklevel=4)
        return pairs[:, 0].copy(), pairs[:, 1].copy()
    raise ValueError(
        f"{name} must be (lower, upper) — two numbers, or two arrays of length "
        f"n_features={n_features} — or a dict {{feature name: (low, high)}}; "
        f"got {bounds!r}."
    )


def check_box(bounds, n_features, feature_names=None):
    """``(lower, upper)`` of :func:`parse_box`, checked (``None`` for no
    bounds)."""
    if bounds is None:
        return None
    lower, upper = parse_box(bounds, n_features, feature_names)
    if not (np.isfinite(lower).all() and np.isfinite(upper).all()):
        raise ValueError("bounds must be finite.")
    if (lower > upper).any() or not (lower < upper).any():
        raise ValueError(
            "bounds: every lower must be <= its upper, and at least one feature "
            "must have lower < upper."
        )
    return lower, upper


def box_radius(lower, upper, center):
    r""":math:`(c, R)`: the centre the rows of the box ``[lower, upper]``
    (arrays of the data's dtype, :func:`inward_box`) are translated by, the
    box's midpoint or 0 without centring (float64), and :math:`R`, a bound
    on the norm of every translated row:
    :math:`\|\max(|\mathrm{lower} - c|, |\mathrm{upper} - c|)\|` computed in
    the dtype, as the rows are (:math:`|\operatorname{fl}(x - c)| \le
    \max(|\operatorname{fl}(\mathrm{lower} - c)|,
    |\operatorname{fl}(\mathrm{upper} - c)|)` for every :math:`x` in the
    box: rounding is monotone), rounded up: the norm computed in float64 may
    round below the exact one by a few units in the last place (review 63),
    so it is enlarged by :math:`(d + 4)` of them, more than that error."""
    dtype = lower.dtype
    centre = np.zeros_like(lower)
    if center:
        centre = ((lower.astype(np.float64) + upper) / 2.0).astype(dtype)
    with np.errstate(over="ignore"):
        reach = np.maximum(np.abs(lower - centre), np.abs(upper - centre))
    reach = reach.astype(np.float64)
    top = float(reach.max())  # ‖reach‖ without overflow; 0: one point
    radius = top * float(np.linalg.norm(reach / top)) if top else 0.0
    ulps = (reach.size + 4) * np.finfo(np.float64).eps
    return centre.astype(np.float64), radius * (1.0 + ulps)


def dtype_box(box, dtype, center):
    """``(box, centre, radius)`` of a fit on rows of ``dtype``: the box
    rounded inward (:func:`inward_box`), its centre and radius
    (:func:`box_radius`). A centred box every side of which holds one value
    of ``dtype`` is refused: its rows are one point. Public: the bounds,
    the dtype."""
    box = inward_box(*box, dtype)
    centre, radius = box_radius(*box, center)
    if radius == 0.0:
        raise ValueError(
            f"bounds: rounded inward to {np.dtype(dtype)} values, every side "
            "of the box holds one value, so the rows clipped to it are one "
            "point and the fit would release noise only. Pass float64 data, "
            "or give wider bounds.")
    return box, centre, radius


def public_box_norm(bounds, n_features, center, feature_names=None):
    """The norm bound that ``bounds=(lower, upper)`` implies for a fit on
    ``n_features`` columns, from public values only: the largest of
    :func:`box_radius` over the dtypes a fit computes in (float32, float64),
    so that it bounds the fit's own ``data_norm_`` whatever the data's
    dtype."""
    lower, upper = check_box(bounds, n_features, feature_names)
    return max(box_radius(*inward_box(lower, upper, dtype), center)[1]
               for dtype in (np.float32, np.float64))


def inward_box(lower, upper, dtype):
    r"""``(lower, upper)`` as arrays of ``dtype``, rounded inward.

    A bound that the cast rounds outward (``0.1`` in float32 is
    ``0.10000000149``) is moved to the next value of ``dtype`` toward the
    box's inside, so every row clipped to the cast box lies in the box the
    user gave, which the sensitivity assumes. A side with
    :math:`\mathrm{lower} = \mathrm{upper}` at a value ``dtype`` cannot
    represent keeps its nearest value (no value of ``dtype`` lies in it; the
    box's radius is computed from the values used, so the sensitivity still
    holds). float64 bounds are unchanged. A
    side beyond the dtype's range (the cast gives ``inf``) is refused.
    """
    dtype = np.dtype(dtype)
    with np.errstate(over="ignore"):  # ±1e300 in float32: ±inf, then ±max
        low, high = lower.astype(dtype), upper.astype(dtype)
    # nextafter(0, ±inf) is subnormal: an underflow by design, not an error
    with np.errstate(under="ignore"):
        low = np.where(low < lower, np.nextafter(low, dtype.type(np.inf)), low)
        high = np.where(high > upper, np.nextafter(high, dtype.type(-np.inf)), high)
    empty = low > high
    if empty.any():
        with np.errstate(over="ignore"):
            nearest = lower.astype(dtype)
        low, high = np.where(empty, nearest, low), np.where(empty, nearest, high)
    if not (np.isfinite(low).all() and np.isfinite(high).all()):
        raise ValueError(
            f"bounds: a side lies beyond the largest {dtype} value "
            f"({np.finfo(dtype).max:.3g}), where no {dtype} row can be. Give "
            "bounds within it, or pass float64 data."
        )
    return low.astype(dtype), high.astype(dtype)


def boxed_rows(X, lower, upper, centre, lazy=False):
    """A block of rows clipped into the box and translated (a copy). A CSR
    (or CSC) matrix stays sparse when the translation is 0 and 0 lies in
    the box (only its stored entries change; with ``lazy``, a CSR matrix is
    clipped as the passes read it, :class:`~sklearn_dppca._blocks.BoxedCSR`,
    never copied whole); otherwise it is densified.
    An infinite value is refused, as a NaN is, not clipped: the rows of
    ``non_finite="clip"`` were mapped before, so one is left only under
    ``"raise"``, whose domain is the finite rows. In-memory CSR rows that
    ``non_finite="clip"`` maps as the passes read them (a ``BoxedCSR``,
    finite once mapped) are clipped after the map, as the passes read them
    too, or densified a block at a time."""
    if isinstance(X, BoxedCSR):  # mapped or summed lazily, never copied whole
        X.check_finite()  # the values summed (none if mapped: finite)
        if stays_sparse(lower, upper, centre):
            return X.clipped(lower, upper)
        rows = X.toarray()  # a copy already: clipped in place
        np.clip(rows, lower.astype(rows.dtype), upper.astype(rows.dtype), out=rows)
        rows -= centre.astype(rows.dtype)
        return rows
    assert_all_finite(X.data if sparse.issparse(X) else X, input_name="X")
    if sparse.issparse(X):
        if stays_sparse(lower, upper, centre):
            if lazy and X.format == "csr":
                return BoxedCSR(X, lower, upper)
            return clipped_entries(X, lower, upper)
        rows = X.toarray()  # a copy already: clipped in place
        np.clip(rows, lower.astype(rows.dtype), upper.astype(rows.dtype), out=rows)
    else:
        rows = np.clip(X, lower, upper).astype(X.dtype, copy=False)
    rows -= centre.astype(rows.dtype)
    return rows


def clipped_entries(X, lower, upper):
    """A sparse ``X``'s stored entries clipped into the box, as a CSR
    matrix: :class:`~sklearn_dppca._blocks.BoxedCSR`'s block of every row,
    which shares ``X``'s indices (as CSR; read-only views, never written)
    and holds a clipped copy of its values, the one array the box adds,
    clipped :data:`~sklearn_dppca._blocks.CLIP_ENTRIES` at a time: a copy of
    ``X`` whole and three temporaries as long as its values made a
    dense-valued CSR fit peak at 4.75 times its plan (review 103 F2). A
    chunk of a Dask array is boxed so; in memory the rows are boxed as the
    passes read them (``BoxedCSR`` itself)."""
    X = X.tocsr()  # a fit's rows are CSR already (InMemoryRows): no copy
    boxed = BoxedCSR(X, lower, upper)[:X.shape[0]]
    if X.has_canonical_format:  # the same entries: no scan of them again
        boxed.has_canonical_format = True
    return boxed


def stays_sparse(lower, upper, centre):
    """Whether :func:`boxed_rows` keeps sparse rows sparse: zeros stay zeros."""
    return not centre.any() and (lower <= 0).all() and (upper >= 0).all()


def box_units(values, lower, upper, centre, width):
    r""":math:`\operatorname{clip}((\operatorname{clip}(x, l, u) - c) / w,
    -\tfrac{1}{2}, \tfrac{1}{2})`: values in box units."""
    z = (np.clip(values, lower, upper).astype(np.float64) - centre) / width
    return np.clip(z, -0.5, 0.5, out=z)


def box_sums(X, lower, upper, centre, width, free):
    r""":math:`(\sum z, \sum z^2)` per free feature, :math:`z` the rows in
    box units (:func:`box_units`), exact (released only with noise). A
    sparse ``X`` is never densified: each column's implicit zeros are one
    value :math:`z_0` counted :math:`n - \mathrm{nnz}` times.

    Box units are clipped into :math:`[-\tfrac{1}{2}, \tfrac{1}{2}]` after
    they are computed: :math:`c = \mathrm{fl}((l + u)/2)` rounds, and for a
    narrow box far from 0 it sits on a side (bounds
    ``(1, nextafter(1, 2))``: :math:`c = 1`, :math:`z \in \{0, 1\}`), so
    the computed :math:`z` can leave :math:`[-\tfrac{1}{2}, \tfrac{1}{2}]`
    by up to ½. After the clip every computed :math:`z_j` lies in
    :math:`[-\tfrac{1}{2}, \tfrac{1}{2}]` exactly (±½ are floats, and clip
    returns a bound or the value itself). Hence, for the values actually
    summed, :math:`|z_j - z'_j| \le 1`, so :math:`\sum z` has L2
    sensitivity :math:`\sqrt{d}`; and
    :math:`\mathrm{fl}(z_j^2) \in [0, \tfrac{1}{4}]` (rounding is monotone
    and ¼ is a float), so :math:`\sum z^2` has L2 sensitivity
    :math:`\sqrt{d}/4` (docs/privacy.rst, "The private standard scaler").
    The clip changes a value only where rounding pushed it out: at most a
    bias of such a narrow box's mean, never a larger sensitivity. A sparse
    column's :math:`(n - \mathrm{nnz}) z_0` is the sum of that many equal
    values in :math:`[-\tfrac{1}{2}, \tfrac{1}{2}]`: the same bound.
    """
    box = [side[free] for side in (lower, upper, centre, width)]
    xp = np if sparse.issparse(X) else _array_api.module_of(X)
    if xp is not np:  # on the device, in its widest float; d-vectors back
        wide = _array_api.widest_float(*_array_api.namespace(X))
        columns = xp.asarray(np.flatnonzero(free), device=_array_api.namespace(X)[1])
        values = xp.take(_array_api.astype(X, getattr(xp, wide.name)), columns, axis=1)
        low, high, mid, span = (_array_api.like(side, X, dtype=wide) for side in box)
        Z = xp.clip((xp.clip(values, low, high) - mid) / span, -0.5, 0.5)
        return (_array_api.to_host(xp.sum(Z, axis=0)),
                _array_api.to_host(xp.sum(Z * Z, axis=0)))
    if not sparse.issparse(X):
        Z = box_units(X[:, free], *box)
        return Z.sum(axis=0), (Z * Z).sum(axis=0)
    X = X.tocsc()[:, np.flatnonzero(free)]
    counts = np.diff(X.indptr)
    columns = np.repeat(np.arange(X.shape[1]), counts)
    z = box_units(X.data, *(side[columns] for side in box))
    zero = box_units(np.zeros_like(box[0]), *box)
    implicit = X.shape[0] - counts
    sums = np.bincount(columns, z, X.shape[1]) + implicit * zero
    squares = np.bincount(columns, z * z, X.shape[1]) + implicit * zero * zero
    return sums, squares
