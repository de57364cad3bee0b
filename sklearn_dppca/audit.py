r"""Empirical privacy audits: lower bounds on ε from many fits.

A mechanism that claims :math:`(\varepsilon, \delta)`-DP bounds how well *any*
test can tell two neighbouring datasets apart from its output. An audit fits
the estimator many times, with independent seeds, on two neighbouring
datasets chosen adversarially (one row changed in the worst-case direction),
computes a distinguishing statistic of each release, and turns how well the
statistic separates the two into a *lower* confidence bound on the ε the
mechanism really has. If that lower bound exceeds the claimed ε, the claim
is false (with the confidence of the bound).

Two bounds are computed:

- **Threshold test** (any statistic): for a threshold :math:`t`, the false and
  true positive rates of :math:`S > t` satisfy
  :math:`\mathrm{TPR} \le e^\varepsilon \mathrm{FPR} + \delta` under
  :math:`(\varepsilon, \delta)`-DP, so
  :math:`\varepsilon \ge \ln((\mathrm{TPR} - \delta)/\mathrm{FPR})`.
  Clopper–Pearson intervals bound the rates; the threshold is chosen on one
  half of the fits and evaluated on the other, so the choice does not bias
  the bound.
- **Gaussian test** (when the statistic *is* a noisy Gaussian release, such as
  a coordinate of the private mean): the mean shift over the standard
  deviation estimates the GDP :math:`\mu`; a lower confidence bound on it
  converts to ε with :func:`~sklearn_dppca.privacy.gdp_epsilon`.

An audit can only refute a claim, never prove it: passing means no violation
was detected at this sample size.

Examples
--------
>>> from sklearn_dppca import PrivatePCA
>>> from sklearn_dppca.audit import audit, mean_statistic, neighbouring_datasets
>>> X, X_prime = neighbouring_datasets(200, 3, data_norm=1.0, kind="opposite")
>>> result = audit(PrivatePCA(data_norm=1.0), X, X_prime, mean_statistic(0),
...                n_fits=200, random_state=0)
>>> result.epsilon_lower <= 1.0
True
"""

import math
import warnings
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Optional

import numpy as np
from scipy import sparse, stats
from scipy.optimize import brentq
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from ._released import NoisyReleaseWarning
from .privacy import BudgetAccountant, PrivacyLeakWarning, gdp_epsilon

__all__ = [
    "AuditResult",
    "audit",
    "clopper_pearson_epsilon",
    "gaussian_mu_lower",
    "mean_statistic",
    "neighbouring_datasets",
    "scatter_statistic",
    "subspace_statistic",
    "threshold_ceiling",
]


def neighbouring_datasets(n_samples, n_features, data_norm=1.0, kind="orthogonal",
                          scale=0.1, random_state=0):
    r"""Two datasets that differ in their first row, chosen adversarially.

    The other rows are Gaussian, of norm about
    :math:`\mathtt{scale} \cdot \mathtt{data\_norm}`.
    ``kind="orthogonal"``: the changed row is :math:`C e_1` in one and
    :math:`C e_2` in the other — the pair that attains the scatter matrix's
    Frobenius sensitivity :math:`\sqrt{2} C^2`. ``kind="opposite"``:
    :math:`C e_1` against :math:`-C e_1` — the pair that attains the clipped
    sum's sensitivity :math:`2C` (and leaves the scatter matrix unchanged).

    Returns
    -------
    X, X_prime : ndarray of shape (n_samples, n_features)

    Examples
    --------
    >>> from sklearn_dppca.audit import neighbouring_datasets
    >>> X, Y = neighbouring_datasets(10, 3)
    >>> int((X != Y).any(axis=1).sum())
    1
    """
    for name, value, least in (("n_samples", n_samples, 1),
                               ("n_features", n_features, 2)):
        if isinstance(value, bool) or not isinstance(value, Integral) or value < least:
            raise ValueError(f"neighbouring_datasets needs an integer {name} >= "
                             f"{least}; got {value!r}.")
    if not (isinstance(data_norm, Real) and 0.0 < data_norm < math.inf):
        raise ValueError(
            f"data_norm must be a positive finite number; got {data_norm!r}.")
    if not (isinstance(scale, Real) and 0.0 <= scale < math.inf):
        raise ValueError(f"scale must be a non-negative finite number; got {scale!r}.")
    if kind not in ("orthogonal", "opposite"):
        raise ValueError(f"kind must be 'orthogonal' or 'opposite'; got {kind!r}.")
    rng = np.random.default_rng(random_state)
    X = rng.normal(size=(n_samples, n_features)) * (
        scale * data_norm / math.sqrt(n_features)
    )
    X_prime = X.copy()
    X[0] = data_norm * np.eye(n_features)[0]
    X_prime[0] = data_norm * (np.eye(n_features)[1] if kind == "orthogonal"
                              else -np.eye(n_features)[0])
    return X, X_prime


def mean_statistic(feature=0):
    r"""Statistic: one coordinate of ``mean_`` times :math:`n` (a Gaussian release).

    On "opposite" neighbours it shifts by :math:`2C`, the sensitivity of the
    clipped sum: its Gaussian test estimates the mean release's :math:`\mu`.

    Examples
    --------
    >>> from sklearn_dppca import PrivatePCA
    >>> from sklearn_dppca.audit import mean_statistic, neighbouring_datasets
    >>> X, _ = neighbouring_datasets(200, 3, kind="opposite")
    >>> statistic = mean_statistic(feature=0)
    >>> pca = PrivatePCA(2, epsilon=1.0, data_norm=1.0).fit(X)
    >>> isinstance(statistic(pca), float), statistic.gaussian
    (True, True)
    """

    if isinstance(feature, bool) or not isinstance(feature, Integral) or feature < 0:
        raise ValueError(f"feature must be a non-negative integer; got {feature!r}.")

    def statistic(estimator):
        _reads_features(estimator, "mean_statistic", least=feature + 1)
        missing = [a for a in ("mean_", "n_samples_") if not hasattr(estimator, a)]
        if missing:
            raise ValueError(f"mean_statistic reads a PCA's mean_ and n_samples_; "
                             f"this fit has no {' and no '.join(missing)}.")
        return float(estimator.mean_[feature]) * estimator.n_samples_

    statistic.gaussian = True
    return statistic


def scatter_statistic(estimator):
    r"""Statistic: :math:`\langle \hat M, (E_{11} - E_{22})/\sqrt{2} \rangle` of the
    released scatter matrix.

    Reconstructed from a fit that keeps every component
    (:math:`\mathtt{components\_}^\top \operatorname{diag}(\mathtt{noisy\_variance\_}
    \, (n - 1)) \, \mathtt{components\_}`, the released eigenvalues before their
    de-noising, negative ones included): exact. On "orthogonal" neighbours
    the exact statistic shifts by :math:`\sqrt{2} C^2`, the scatter matrix's
    sensitivity: its Gaussian test estimates the covariance release's
    :math:`\mu`.

    Examples
    --------
    With a huge ``epsilon`` the noise vanishes and the statistic is the exact
    one, :math:`(M_{11} - M_{22})/\sqrt{2}` for the scatter matrix
    :math:`M = X^\top X`:

    >>> import numpy as np
    >>> from sklearn_dppca import PrivatePCA
    >>> from sklearn_dppca.audit import neighbouring_datasets, scatter_statistic
    >>> X, _ = neighbouring_datasets(1000, 3, scale=0.5)
    >>> pca = PrivatePCA(epsilon=1e6, data_norm=1.0, center=False).fit(X)
    >>> M = X.T @ X
    >>> bool(np.isclose(scatter_statistic(pca), (M[0, 0] - M[1, 1]) / np.sqrt(2),
    ...                 rtol=1e-2))
    True
    """
    _reads_features(estimator, "scatter_statistic")
    if estimator.components_.shape[0] != estimator.n_features_in_:
        raise ValueError(
            "scatter_statistic reconstructs the released matrix from every "
            f"component; this fit kept {estimator.components_.shape[0]} of "
            f"{estimator.n_features_in_} (fit with n_components=None).")
    variance = estimator.noisy_variance_ * (estimator.n_samples_ - 1)
    released = (estimator.components_.T * variance) @ estimator.components_
    return float(released[0, 0] - released[1, 1]) / math.sqrt(2.0)


scatter_statistic.gaussian = True


def subspace_statistic(estimator):
    r"""Statistic: :math:`\lVert P e_1 \rVert^2 - \lVert P e_2 \rVert^2` for the
    projection :math:`P` on the components.

    For any estimator (a threshold test only): on "orthogonal" neighbours the
    changed row pulls the subspace toward :math:`e_1` in one dataset and
    :math:`e_2` in the other.

    Examples
    --------
    Without noise (a huge ``epsilon``) and with few other rows, the changed
    row decides the top component:

    >>> from sklearn_dppca import PrivatePCA
    >>> from sklearn_dppca.audit import neighbouring_datasets, subspace_statistic
    >>> X, X_prime = neighbouring_datasets(20, 3)
    >>> pca = PrivatePCA(1, epsilon=1e6, data_norm=1.0, center=False)
    >>> [round(subspace_statistic(pca.fit(D))) for D in (X, X_prime)]
    [1, -1]
    """
    _reads_features(estimator, "subspace_statistic")
    components = estimator.components_
    first, second = components[:, 0], components[:, 1]
    return float(first @ first - second @ second)


def _reads_features(estimator, name, least=2):
    """Refuse an unfitted estimator, or one fitted on fewer features than
    the statistic reads (two: it compares features 1 and 2)."""
    check_is_fitted(estimator)
    if estimator.n_features_in_ < least:
        raise ValueError(f"{name} reads feature {least - 1} (counting from 0); "
                         f"this fit has {estimator.n_features_in_} feature(s).")


def _rate_bounds(successes, trials, alpha):
    r"""One-sided :math:`1 - \alpha` Clopper–Pearson bounds of a binomial
    rate: a lower and an upper bound, each holding with probability at least
    :math:`1 - \alpha` on its own."""
    low, high = 0.0, 1.0
    if successes:
        low = stats.beta.ppf(alpha, successes, trials - successes + 1)
    if successes < trials:
        high = stats.beta.ppf(1 - alpha, successes + 1, trials - successes)
    return float(low), float(high)


def _check_level(alpha, delta=0.0):
    """Refuse a confidence level or a δ outside its range."""
    if isinstance(alpha, bool) or not (isinstance(alpha, Real) and 0.0 < alpha < 1.0):
        raise ValueError(f"alpha must be a number in (0, 1); got {alpha!r}.")
    if isinstance(delta, bool) or not (isinstance(delta, Real) and 0.0 <= delta < 1.0):
        raise ValueError(f"delta must be a number in [0, 1); got {delta!r}.")


def _check_n_fits(n_fits):
    if isinstance(n_fits, bool) or not isinstance(n_fits, Integral) or n_fits < 4:
        raise ValueError(f"n_fits must be an integer of at least 4; got {n_fits!r}.")


def _finite_samples(samples, name, minimum):
    """``samples`` as a 1-D float array of at least ``minimum`` finite values."""
    values = np.asarray(samples, dtype=float).ravel()
    if values.size < minimum:
        raise ValueError(f"{name} needs at least {minimum} samples on each side; "
                         f"got {values.size}.")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} needs finite samples; got NaN or infinite values "
                         "(a statistic that failed on some fit?).")
    return values


def threshold_ceiling(n_fits, delta, alpha=0.05):
    r"""The largest ε :func:`clopper_pearson_epsilon` can return with
    ``n_fits`` samples a side: its bound on two samples separated completely.

    An audit whose statistic has only the threshold test cannot refute a
    claimed ε at or above it, whatever the mechanism; it needs more fits.

    Examples
    --------
    >>> from sklearn_dppca.audit import threshold_ceiling
    >>> round(threshold_ceiling(40, 1e-5), 2), round(threshold_ceiling(400, 1e-5), 2)
    (1.6, 3.98)
    """
    _check_level(alpha, delta)
    _check_n_fits(n_fits)
    half = n_fits - n_fits // 2  # the evaluation half of clopper_pearson_epsilon
    tpr_low, _ = _rate_bounds(half, half, alpha / 2)
    _, fpr_high = _rate_bounds(0, half, alpha / 2)
    return max(0.0, math.log(max(tpr_low - delta, 1e-300) / fpr_high))


def clopper_pearson_epsilon(samples, samples_prime, delta, alpha=0.05):
    r"""Lower confidence bound on ε from the best threshold test.

    The test (a threshold, its direction, and which dataset's samples are the
    positives) is chosen on the first half of each sample, to maximise the
    point estimate of :math:`\ln((\mathrm{TPR} - \delta)/\mathrm{FPR})`; the
    bound is computed on the second half from one-sided Clopper–Pearson bounds
    of the two rates, each at level :math:`1 - \mathtt{alpha}/2`, so that it
    holds with probability at least :math:`1 - \mathtt{alpha}`. Every
    direction and both roles are valid tests, since the neighbour relation is
    symmetric. With ``n`` samples a side the bound is at most
    :func:`threshold_ceiling`\ ``(n, delta, alpha)``.

    Returns
    -------
    epsilon : float
        ``0.0`` when no test separates the samples.

    Examples
    --------
    Samples of a Gaussian release with :math:`\mu = 1` on the two datasets: the
    bound is positive and below the ε that :math:`\mu = 1` really has.

    >>> import numpy as np
    >>> from sklearn_dppca.audit import clopper_pearson_epsilon
    >>> from sklearn_dppca.privacy import gdp_epsilon
    >>> rng = np.random.default_rng(0)
    >>> a, b = rng.normal(0.0, 1.0, 2000), rng.normal(1.0, 1.0, 2000)
    >>> 0.0 < clopper_pearson_epsilon(a, b, delta=1e-6) < gdp_epsilon(1.0, 1e-6)
    True
    >>> clopper_pearson_epsilon(a, rng.normal(0.0, 1.0, 2000), delta=1e-6)
    0.0
    """
    _check_level(alpha, delta)
    a = _finite_samples(samples, "clopper_pearson_epsilon", 4)
    b = _finite_samples(samples_prime, "clopper_pearson_epsilon", 4)
    halves = {"a": (a[: a.size // 2], a[a.size // 2 :]),
              "b": (b[: b.size // 2], b[b.size // 2 :])}
    best, choice = -np.inf, None
    for sign in (1.0, -1.0):
        for negatives, positives in (("a", "b"), ("b", "a")):
            s, t = sign * halves[negatives][0], sign * halves[positives][0]
            for threshold in np.unique(np.r_[s, t]):
                fpr = (np.sum(s > threshold) + 0.5) / (s.size + 1)
                tpr = (np.sum(t > threshold) + 0.5) / (t.size + 1)
                value = math.log(max(tpr - delta, 1e-300) / fpr)
                if value > best:
                    best, choice = value, (sign, negatives, positives, threshold)
    sign, negatives, positives, threshold = choice
    s, t = sign * halves[negatives][1], sign * halves[positives][1]
    _, fpr_high = _rate_bounds(int(np.sum(s > threshold)), s.size, alpha / 2)
    tpr_low, _ = _rate_bounds(int(np.sum(t > threshold)), t.size, alpha / 2)
    if tpr_low <= delta:
        return 0.0
    return max(0.0, math.log((tpr_low - delta) / fpr_high))


def gaussian_mu_lower(samples, samples_prime, alpha=0.05):
    r"""Lower confidence bound on the GDP :math:`\mu` of a Gaussian release.

    :math:`\hat\mu = \lvert \mathrm{mean}_1 - \mathrm{mean}_0 \rvert / s` with the
    pooled standard deviation :math:`s`; the bound is the lower limit of the
    two-sided :math:`1 - \mathtt{alpha}` noncentral-t confidence interval of
    the standardised mean difference (exact under normality): two-sided,
    since the sign of the shift is read off the samples, so the bound holds
    with probability at least :math:`1 - \mathtt{alpha}` whatever
    :math:`\mu` is, 0 included.

    Returns
    -------
    mu : float
        Non-negative.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_dppca.audit import gaussian_mu_lower
    >>> rng = np.random.default_rng(0)
    >>> a, b = rng.normal(0.0, 1.0, 2000), rng.normal(1.0, 1.0, 2000)  # μ = 1
    >>> bool(0.9 < gaussian_mu_lower(a, b) < 1.0)
    True
    """
    _check_level(alpha)
    a = _finite_samples(samples, "gaussian_mu_lower", 3)
    b = _finite_samples(samples_prime, "gaussian_mu_lower", 3)
    n_a, n_b = a.size, b.size
    pooled = math.sqrt(((n_a - 1) * a.var(ddof=1) + (n_b - 1) * b.var(ddof=1))
                       / (n_a + n_b - 2))
    if pooled == 0:
        return math.inf if a.mean() != b.mean() else 0.0
    scale = math.sqrt(1.0 / n_a + 1.0 / n_b)
    t_obs = abs(b.mean() - a.mean()) / pooled / scale
    dof = n_a + n_b - 2
    level = 1 - alpha / 2
    if stats.nct.cdf(t_obs, dof, 0.0) <= level:
        return 0.0  # not significant: no positive lower bound

    def excess(noncentrality):
        return stats.nct.cdf(t_obs, dof, noncentrality) - level

    high = t_obs + 10.0
    while excess(high) > 0:  # the t distribution's heavy tail at few samples
        high *= 2.0
    if math.isnan(excess(high)):
        # far beyond where SciPy evaluates the noncentral t (t ≈ 1e16: next
        # to no noise): T = (Z + λ)/sqrt(V/dof) with Z negligible beside λ,
        # so λ is at least T sqrt(V/dof) at V's lower quantile, less Z's
        return max(0.0, t_obs * math.sqrt(stats.chi2.ppf(alpha / 2, dof) / dof)
                   - stats.norm.ppf(level)) * scale
    return brentq(excess, 0.0, high) * scale


def _changed_rows(X, X_prime, y, y_prime):
    """How many rows (with their labels) differ between the two datasets."""
    if sparse.issparse(X) or sparse.issparse(X_prime):
        if X.shape != getattr(X_prime, "shape", None):
            return None
        differ = np.asarray(abs(sparse.csr_matrix(X) - sparse.csr_matrix(X_prime))
                            .sum(axis=1)).ravel() != 0
    else:
        a, b = np.asarray(X), np.asarray(X_prime)
        if a.ndim != 2 or a.shape != b.shape:
            return None
        differ = ~((a == b) | ((a != a) & (b != b))).all(axis=1)  # NaN equals NaN
    if (y is None) != (y_prime is None):
        return None
    if y is not None:
        y, y_prime = np.asarray(y), np.asarray(y_prime)
        if y.shape != y_prime.shape or y.shape[:1] != differ.shape:
            return None
        differ = differ | (y != y_prime).reshape(len(differ), -1).any(axis=1)
    return int(differ.sum())


@dataclass
class AuditResult:
    """What an audit found.

    ``epsilon_lower`` is the larger of the two bounds, and holds with
    probability at least ``1 - alpha``. It bounds the ε of the release
    the statistic reads: :func:`mean_statistic` reads only the mean's
    release, so compare its ``mu_lower`` with the μ of the mean's share of
    the budget, not with the fit's whole ε. ``threshold_ceiling`` is the
    largest ``epsilon_threshold`` these ``n_fits`` allow
    (:func:`threshold_ceiling`).

    Examples
    --------
    >>> from sklearn_dppca import PrivatePCA
    >>> from sklearn_dppca.audit import AuditResult, audit, mean_statistic
    >>> from sklearn_dppca.audit import neighbouring_datasets
    >>> X, X_prime = neighbouring_datasets(200, 3, kind="opposite")
    >>> result = audit(PrivatePCA(data_norm=1.0), X, X_prime, mean_statistic(0),
    ...                n_fits=50, random_state=0)
    >>> isinstance(result, AuditResult), result.n_fits, result.samples.shape
    (True, 50, (50,))
    """

    epsilon_lower: float
    epsilon_threshold: float
    mu_estimate: Optional[float]
    mu_lower: Optional[float]
    epsilon_gaussian: Optional[float]
    n_fits: int
    samples: np.ndarray
    samples_prime: np.ndarray
    threshold_ceiling: float


def audit(estimator, X, X_prime, statistic, n_fits=500, delta=None, alpha=0.05,
          random_state=None, y=None, y_prime=None):
    r"""Fit ``estimator`` ``n_fits`` times on each dataset and bound ε from below.

    Parameters
    ----------
    estimator : estimator
        Cloned for every fit, with a fresh ``random_state`` and a private
        unlimited accountant (audits do not spend a real budget: the data are
        synthetic): it needs both parameters, as the package's estimators,
        scalers and heads have. To audit a Pipeline, wrap it in a
        :class:`~sklearn_dppca.model_selection.PrivateGridSearchCV` with one
        candidate.
    X, X_prime : array-like
        Neighbouring datasets, of one shape, that differ in exactly one row
        (see :func:`neighbouring_datasets`); anything else is refused, since
        a bound on such a pair says nothing of the claimed ε.
    statistic : callable
        Maps a fitted estimator to a float. If it has ``gaussian = True``, the
        Gaussian test runs too.
    n_fits : int, default=500
        Fits per dataset, at least 4. Where the statistic has only the
        threshold test, a claimed ε at or above :func:`threshold_ceiling`
        cannot be refuted: a ``UserWarning`` says so.
    delta : float, default=None
        :math:`\delta` of the bounds; the estimator's ``delta`` by default.
    alpha : float, default=0.05
        One minus the confidence of ``epsilon_lower`` (where both tests run,
        each bound is taken at ``alpha / 2``).
    random_state : int >= 0 or None
        Seeds of the fits (drawn from one ``SeedSequence``).
    y, y_prime : array-like or None, default=None
        Labels of ``X`` and ``X_prime``, for a supervised estimator (the
        neighbours then differ in one row *and* its label).

    Returns
    -------
    AuditResult

    Examples
    --------
    Audit the covariance release of :class:`~sklearn_dppca.PrivatePCA` at
    ``epsilon=1`` on the neighbours that attain its sensitivity. The lower
    bound found does not exceed the claimed ε:

    >>> from sklearn_dppca import PrivatePCA
    >>> from sklearn_dppca.audit import audit, neighbouring_datasets
    >>> from sklearn_dppca.audit import scatter_statistic
    >>> X, X_prime = neighbouring_datasets(200, 3, scale=0.5)
    >>> estimator = PrivatePCA(epsilon=1.0, data_norm=1.0, center=False)
    >>> result = audit(estimator, X, X_prime, scatter_statistic, n_fits=100,
    ...                random_state=0)
    >>> result.epsilon_lower <= 1.0
    True
    """
    params = estimator.get_params()
    missing = [p for p in ("random_state", "accountant") if p not in params]
    if missing:
        raise ValueError(
            f"audit sets each fit's random_state and accountant; this estimator "
            f"has no {' and no '.join(missing)} parameter. Wrap a Pipeline in a "
            "PrivateGridSearchCV with one candidate.")
    if random_state is not None and (isinstance(random_state, bool) or not (
            isinstance(random_state, Integral) and random_state >= 0)):
        raise ValueError("random_state must be None or an integer >= 0 (the "
                         f"entropy of a SeedSequence); got {random_state!r}.")
    if delta is None and "delta" not in params:
        raise ValueError("give delta=...: this estimator has no delta parameter.")
    delta = params["delta"] if delta is None else delta
    _check_level(alpha, delta)
    _check_n_fits(n_fits)
    changed = _changed_rows(X, X_prime, y, y_prime)
    if changed != 1:
        raise ValueError(
            "audit needs neighbouring datasets: two of one shape that differ in "
            "exactly one row (and its label); "
            + ("their shapes differ" if changed is None
               else f"they differ in {changed}") + ".")
    gaussian = getattr(statistic, "gaussian", False)
    level = alpha / 2 if gaussian else alpha  # two bounds: each at alpha / 2
    ceiling = threshold_ceiling(n_fits, delta, level)
    claimed = params.get("epsilon")
    if not gaussian and isinstance(claimed, Real) and claimed >= ceiling:
        warnings.warn(
            f"this audit cannot refute epsilon={claimed}: with n_fits={n_fits} its "
            f"threshold test returns at most {ceiling:.3g}; use more fits.",
            UserWarning, stacklevel=2)
    seeds = np.random.SeedSequence(random_state).generate_state(2 * n_fits)
    values = []
    with warnings.catch_warnings():
        # seeded by design: that warning only (one that the fit is not
        # private, data_norm=None for one, stays shown)
        warnings.filterwarnings("ignore", message=r"random_state=.* fixes the noise",
                                category=PrivacyLeakWarning)
        # each fit's note that its release is mostly noise, on synthetic
        # data, repeated 2 n_fits times: nothing of the audit's subject
        warnings.filterwarnings("ignore", category=NoisyReleaseWarning)
        for data, labels, offset in ((X, y, 0), (X_prime, y_prime, n_fits)):
            column = []
            for i in range(n_fits):
                fit = clone(estimator).set_params(
                    random_state=int(seeds[offset + i]), accountant=BudgetAccountant()
                )
                value = statistic(fit.fit(data, labels))
                if np.ndim(value) != 0:  # m values of one fit are not m fits
                    raise ValueError(
                        "statistic must return one number per fit; it returned "
                        f"an array of shape {np.shape(value)}.")
                column.append(float(value))
            values.append(np.asarray(column, dtype=float))
    samples, samples_prime = values
    eps_threshold = clopper_pearson_epsilon(samples, samples_prime, delta, level)
    mu_estimate = mu_lower = eps_gaussian = None
    if gaussian:
        pooled = math.sqrt((samples.var(ddof=1) + samples_prime.var(ddof=1)) / 2.0)
        shift = abs(samples_prime.mean() - samples.mean())
        mu_estimate = shift / pooled if pooled else (math.inf if shift else 0.0)
        mu_lower = gaussian_mu_lower(samples, samples_prime, level)
        if mu_lower == 0.0:
            eps_gaussian = 0.0
        elif delta == 0.0 or mu_lower == math.inf:  # no Gaussian shift is (ε, 0)-DP
            eps_gaussian = math.inf
        else:
            eps_gaussian = gdp_epsilon(mu_lower, delta)
    lower = max(eps_threshold, eps_gaussian or 0.0)
    return AuditResult(lower, eps_threshold, mu_estimate, mu_lower, eps_gaussian,
                       n_fits, samples, samples_prime, ceiling)
