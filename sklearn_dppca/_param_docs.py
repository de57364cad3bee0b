"""The parameter text the estimators share, filled into their docstrings
(:func:`fill_parameter_docs`), so that one definition documents them all,
and the constraint of the ``n_jobs`` they share."""

from numbers import Integral

from sklearn.utils._param_validation import Interval

#: ``n_jobs``' constraint (CoherentPowerPCA, PrivateGridSearchCV): ``None``, a
#: positive count or joblib's negative one; ``0``, which joblib refuses only
#: when the threads start (after the charge), is refused with the other
#: parameters, before the data is read.
N_JOBS_CONSTRAINT = [Interval(Integral, 1, None, closed="left"),
                     Interval(Integral, None, -1, closed="right"), None]


#: Parameter text the estimators share, by placeholder name, filled into their
#: docstrings by :func:`fill_parameter_docs` (a line ``%(name)s``).
SHARED_PARAMETER_DOCS = {
    # n_components and epsilon as PrivatePCA and ComplexGaussPCA take them
    "choice_parameters": """\
    n_components : int, float, 'mle' or None, default=None
        Number of components to keep. ``None`` keeps ``min(n_samples,
        n_features)``; ``0`` keeps none (``transform`` returns an
        ``(n_samples, 0)`` array); a float in (0, 1) keeps the fewest
        components whose released explained-variance ratio exceeds it;
        ``'mle'`` keeps Minka's maximum-likelihood choice of the dimension
        (needs ``n_samples >= n_features``), computed, like every other
        choice here, on the *released* eigenvalues, and at most the
        components that stand out of the noise (``n_resolved_``, at least
        one): free post-processing. The noise's bulk looks like structure to
        Minka's rule, which would keep nearly every rank at ``epsilon=1``;
        capped, it matches scikit-learn's choice where the components it
        picks stand out (``epsilon=inf``: always). A fraction is not capped: it
        is compared with ``explained_variance_ratio_``, computed from the
        released, noisy spectrum, where the ranks the noise does not resolve
        share what is left of the total equally, so the cumulative ratio reaches
        it late and at small ``epsilon`` it keeps more components than
        scikit-learn's ``PCA``, most of them noise (PrivatePCA on the digits,
        ``data_norm=4``: ``0.8`` keeps 40 to 48 components at ``epsilon=1``, 2
        to 5 of them resolved, and 13 at ``epsilon=100``, as ``PCA`` does).
        ``n_resolved_`` counts the components that stand out; ``'mle'`` keeps at
        most those.
    epsilon : float, default=1.0
        Privacy parameter :math:`\\varepsilon > 0` of the whole fit.
        ``float("inf")`` is the non-private fit: no noise, scikit-learn's
        answer on the rows clipped to ``data_norm`` (not clipped at all when
        ``data_norm`` is ``None``), with a
        :class:`~sklearn_dppca.PrivacyLeakWarning`. It is charged as
        infinite, so any finite accountant refuses it (before reading the
        data) and only the unlimited default admits it: a grid over
        ``epsilon`` can include the non-private baseline.
""",
    # the norm bound and its private or public choice (every estimator)
    "norm_bound_parameters": """\
    data_norm : float, "auto" or None, default=None
        Bound :math:`C` on the L2 norm of a row; rows beyond it are scaled down to
        it. Choose it from domain knowledge, never from the data. ``"auto"``
        chooses it privately: a small share of the budget buys a noisy binary
        search of the row-norm counts over ``norm_range`` for their
        ``norm_quantile`` (with centring, a bound for each step of the
        private mean and one for the centred rows; see :doc:`/bounds`).
        ``None`` takes the largest row norm of the data, which is **not
        private** and raises a
        :class:`~sklearn_dppca.PrivacyLeakWarning`; with ``bounds`` given it
        follows from the box instead.
        Between ``1e-100`` and ``1e120`` for float64 data, ``1e-15`` and
        ``1e15`` for float32.
        How to choose it, and ``epsilon`` and ``delta``: :ref:`choosing`.
    bounds : (lower, upper), dict or None, default=None
        Public per-feature ranges: ``(lower, upper)``, two scalars or two
        arrays of length n_features, or a dict ``{feature name: (low,
        high)}`` for a DataFrame (the one spelling of every public bound of
        the package, :ref:`public-bounds-spelling`). Rows are clipped into
        the box; the private mean is the box's midpoint plus a private mean
        of the residuals, projected into the box (a ``mean_`` outside a
        feature's public range is never reported), and ``data_norm=None``
        means the box's radius around that midpoint.
    norm_range : (float, float), default=(1e-8, 1e12)
        ``(low, high)``, ``0 < low < high``: the public grid of candidate
        bounds of ``data_norm="auto"`` (four per octave). Norms beyond it
        fall in its last value.
    norm_quantile : float in (0, 1] or "auto", default="auto"
        Fraction of the rows that ``data_norm="auto"`` aims to keep unclipped.
        ``"auto"`` chooses it from public values only: the median when
        ``n_components`` is an integer below ``min(n_samples, n_features)``
        (a subspace); otherwise (the whole covariance)
        :math:`1 - \\sqrt{d(d+1)} / (3 (\\mu^* n)^{3/4})`, at least the
        median (:math:`d` features, :math:`n` rows, :math:`\\mu^*` =
        ``gdp_mu(epsilon, delta)``; see :doc:`/bounds`). The private mean's
        steps aim at the median.
""",
    # transform's scaling of the scores (every estimator)
    "whiten_parameter": """\
    whiten : bool or "partial", default=False
        Scale the projections to unit released variance (``True``). As in
        scikit-learn, it also changes the model of ``get_covariance``,
        ``get_precision`` and ``score`` (see :meth:`get_covariance`), not the
        release. ``"partial"`` divides each component's score by
        :math:`(\\lambda_j T)^{1/4}` (``explained_variance_`` times
        ``total_variance_``): dimensionless scores whose squared norm is
        :math:`\\sum_j \\sqrt{\\lambda_j / T} \\le \\sqrt{k}` on average, the
        input a private head wants (``data_norm=1``; :ref:`supervised`).
""",
    # what a NaN or infinite value in X does (every estimator)
    "non_finite_parameter": """\
    non_finite : {"raise", "clip"}, default="raise"
        What a NaN or infinite value in ``X`` does. ``"raise"``: the fit is
        refused with a ``ValueError`` naming it, before any charge (such a
        dataset is outside the privacy model's domain of finite rows).
        ``"clip"``: each value goes first through a fixed public map, exactly
        :func:`numpy.nan_to_num` with its defaults (NaN → 0, ±inf → ± the
        largest finite value of the dtype the fit computes in: float64, or
        float32 for float32 input); then every row is clipped to
        ``data_norm`` as any row is. The guarantee then holds for every
        dataset: the neighbouring relation is on the raw rows, the map acts on
        each row alone, and each mapped row still has norm at most :math:`C`
        after clipping, so every sensitivity stands (:ref:`privacy-domain`).
        ``transform`` and ``score`` map their rows the same way. ``X`` itself
        is never modified: the fit maps a copy (a Dask array lazily, chunk by
        chunk; an Array API array with its namespace's functions).
        :class:`~sklearn_dppca.model_selection.PrivateGridSearchCV` fits a
        private step that has steps before it in a Pipeline with ``"clip"``.
""",
    # the memory a fit may take (every estimator)
    "memory_parameter": """\
    memory_limit : float or "auto", default="auto"
        Bytes the fit's largest arrays may take, estimated from public values
        (the shape and the parameters) before the data is read. A fit that
        needs more is refused with a ``MemoryError`` before any charge,
        naming a path that fits and the least ``memory_limit`` (in GiB,
        rounded up) that admits each path it names, rather than running out
        of memory part-way after its charge. After the fit it bounds the
        ``d × d`` results (``get_covariance``, ``get_precision``), refused
        over it with a ``MemoryError``. ``"auto"``: 80% of this machine's
        physical memory (no check where it cannot be told).
""",
    # scikit-learn PCA's solver parameters: how the release is eigendecomposed
    "solver_parameters": """\
    svd_solver : {"auto", "full", "covariance_eigh", "arpack", "randomized"}, \
default="auto"
        How the released (noisy) matrix is eigendecomposed: post-processing,
        so the release, its noise and its cost in budget are the same for
        every value (:ref:`solvers <privacy-solvers>`). ``"full"`` and
        ``"covariance_eigh"``: every eigenpair (LAPACK). ``"arpack"``: the
        top ``n_components`` by SciPy's Lanczos ``eigsh``. ``"randomized"``:
        the top ``n_components`` by a randomized range finder (Halko et al.):
        :math:`O(d^2 k)` time and :math:`O(dk)` memory beside the matrix,
        instead of :math:`O(d^3)` (:math:`d` features, :math:`k`
        components). ``"auto"``: scikit-learn's rule on the public shape —
        ``"full"`` for at most 1 000 features with ten times as many rows, for
        a problem of at most 500 either way, or for ``n_components`` that is
        not an integer; otherwise ``"randomized"`` when ``n_components`` is
        below ``0.8 * min(n_samples, n_features)``. With a truncated solver,
        ``n_components`` must be an integer (``None``: ``min(n_samples,
        n_features)``, minus one with ARPACK), as scikit-learn requires, and
        the spectrum's attributes take the eigenvalues not computed from the
        released matrix's trace and Frobenius norm.
    tol : float, default=0.0
        ``"arpack"``'s relative accuracy (0: machine precision).
    iterated_power : int or "auto", default="auto"
        ``"randomized"``'s power passes (``"auto"``: 7 when ``n_components``
        is under a tenth of the features, else 4). For ``PrivatePCA`` and
        ``ComplexGaussPCA`` with both this and ``power_iteration_normalizer``
        ``"auto"``,
        ``"randomized"`` is a subspace iteration with Chebyshev filters
        instead, as accurate on a released matrix in 11 (or 8) products with
        it as the range finder in 16 (or 10) (:ref:`solvers
        <privacy-solvers>`); an explicit value runs scikit-learn's range
        finder.
    n_oversamples : int, default=10
        ``"randomized"``'s extra columns beyond ``n_components``.
    power_iteration_normalizer : {"auto", "QR", "LU", "none"}, default="auto"
        ``"randomized"``'s normaliser between passes (``"auto"``: none for
        at most 2 passes, else LU), as in scikit-learn's ``randomized_svd``.
    copy : bool, default=True
        Accepted for drop-in compatibility with scikit-learn's ``PCA``; a fit
        never modifies ``X``, so ``copy=False`` has no effect (a
        ``UserWarning`` says so).
""",
    # the supervised heads of sklearn_dppca.linear_model
    "head_rows": """\
    data_norm : float or None, default=None
        Public bound on the norm of the input rows; rows beyond it are
        clipped. ``None`` with ``bounds``: the box's radius around its
        midpoint. After a ``PrivatePCA(whiten="partial")``, 1 (its scores
        are dimensionless: :ref:`supervised-head-input`).
    bounds : (lower, upper), dict or None, default=None
        Public per-feature ranges of the input rows (after a
        :class:`~sklearn_dppca.preprocessing.PublicScaler` to :math:`[0, 1]`:
        ``(0, 1)``). Rows are clipped into the box and translated by its
        midpoint, public maps the intercept absorbs, so the norm bound is the
        box's radius around it (:math:`\\sqrt{d}/2` for the unit box) unless
        ``data_norm`` is smaller. One of ``data_norm`` and ``bounds`` is
        required.
""",
    "head_budget": """\
    epsilon : float, default=1.0
        Privacy parameter :math:`\\varepsilon > 0` of the fit;
        ``float("inf")`` is the non-private fit (a
        :class:`~sklearn_dppca.PrivacyLeakWarning`).
    delta : float, default=1e-6
        Privacy parameter :math:`\\delta` in (0, 1).
""",
    "head_non_finite": """\
    non_finite : {"raise", "clip"}, default="raise"
        ``"raise"`` refuses a NaN or infinite entry before the charge;
        ``"clip"`` maps it (NaN to 0, ±inf to ± the largest float), a public
        map of each value, in the fit and in the predictions. A
        :class:`~sklearn_dppca.model_selection.PrivateGridSearchCV` fits a
        head with steps before it with ``"clip"``.
""",
    "head_randomness": """\
    random_state : None, int, RandomState or Generator, default=None
        Source of the noise; a fixed seed makes the fit not private.
    accountant : BudgetAccountant or None, default=None
        Budget charged before the fit; ``None``: the default accountant.
""",
}


def fill_parameter_docs(cls):
    """Class decorator: put the shared parameter text in ``cls``'s docstring,
    where a line ``%(name)s`` stands for ``SHARED_PARAMETER_DOCS[name]``."""
    for name, text in SHARED_PARAMETER_DOCS.items():
        cls.__doc__ = cls.__doc__.replace(f"    %({name})s\n", text)
    return cls
