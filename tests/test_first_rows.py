"""The first rows (docs/privacy.rst §5): on many rows the centre the rows are
clipped around comes from the first rows, so that the numeric fit reads every
row once and ``data_norm="auto"`` twice; rows in an order the first rows do
not represent cost a pass more, not the quality."""

import math

import dask
import dask.array as da
import numpy as np
import pytest

from sklearn_dppca import (
    CoherentPowerPCA,
    ComplexGaussPCA,
    PrivatePCA,
    _base,
    _bounds,
    _norm_plan,
    _norm_stats,
)
from sklearn_dppca._stats import (
    _clip_scales,
    _sq_norms,
    clipped_gram,
    first_pass,
    weighted_gram,
)
from sklearn_dppca.noise import noise_scale
from sklearn_dppca.privacy import BudgetAccountant, gdp_mu

pytestmark = pytest.mark.filterwarnings("ignore::sklearn_dppca.PrivacyLeakWarning")

N, D, EPSILON = 140_000, 5, 2.0  # the first 32 768 rows give the centre
N_CHUNKS = 10


def _rows(order=None, seed=0):
    """Rows of norm below 1 (the bound of the numeric fits) around 0.2."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D)) * [0.2, 0.1, 0.05, 0.05, 0.05] + 0.2
    if order == "sorted":  # ordered by a feature: the first rows sit apart
        X = X[np.argsort(X[:, 0])]
    return X


def _fit(make, X, progress=None, **params):
    estimator = make(**params).set_params(
        epsilon=EPSILON, random_state=0, accountant=BudgetAccountant())
    estimator._fit(X, progress=progress)
    return estimator


def _reads(make, X, **params):
    """Reads of each chunk of a Dask array of ``X`` by one fit (synchronous
    scheduler): the last chunk is read once per pass over every row, the
    first also by the steps on the first rows."""
    reads = np.zeros(N_CHUNKS, dtype=int)

    def read(block, block_info=None):
        if block_info is not None and block.shape[0]:
            reads[block_info[0]["chunk-location"][0]] += 1
        return block

    lazy = da.from_array(X, chunks=(N // N_CHUNKS, D)).map_blocks(read, dtype=X.dtype)
    lines = []
    with dask.config.set(scheduler="synchronous"):
        _fit(make, lazy, progress=lines.append, **params)
    return reads, lines


def test_how_many_first_rows_is_public():
    mu = gdp_mu(EPSILON, 1e-6)
    assert _norm_plan.pilot_rows(N, D, mu) == _norm_plan.PILOT_MIN_ROWS
    assert _norm_plan.pilot_rows(_norm_plan.PILOT_FACTOR * 2**15 - 1, D, mu) is None
    # more rows at a small epsilon or many features
    assert _norm_plan.pilot_rows(10**9, 10_000, mu) == math.ceil(
        _norm_plan.PILOT_SCALE * 100 / mu)
    assert _norm_plan.pilot_rows(10**9, D, math.inf) is None  # epsilon=inf


@pytest.mark.parametrize("make, auto, passes", [
    (PrivatePCA, False, 1),
    (PrivatePCA, True, 2),
    (ComplexGaussPCA, False, 1),
    (ComplexGaussPCA, True, 2),
    (CoherentPowerPCA, False, 2),  # and its clipping test's pass
    (CoherentPowerPCA, True, 3),
])
def test_rows_in_any_order_are_read_once_or_twice(make, auto, passes):
    """Issue 24: with the first rows' centre, the numeric fit reads every row
    once (the Gram matrix and the sum that corrects the mean together) and
    "auto" twice (its last mean step, whose counts serve the covariance's
    search, and the Gram matrix); the chunks of the first rows are read
    once, kept for the steps on them and for the passes over every row."""
    params = dict(n_components=2, data_norm="auto" if auto else 1.0)
    reads, lines = _reads(make, _rows(), **params)
    first = -(-32768 // (N // N_CHUNKS))  # chunks holding the first rows
    assert list(reads) == [1] * first + [passes] * (N_CHUNKS - first)
    assert sum(line.startswith("pass ") for line in lines) == passes
    assert any(line.startswith("the first 32768 rows: ") for line in lines)


def test_first_rows_are_kept_only_where_they_fit_in_memory_limit():
    """A Dask array's first rows are kept in memory for the fit: beyond the
    plan (review 61: 22 GiB of them beside a plan of 3 GiB, after the
    charge). Where they do not fit in ``memory_limit`` beside it, every step
    reads every row instead (public: the plan, the chunks, the limit)."""
    from sklearn_dppca._dask import ChunkedRows

    X = _rows()
    lazy = da.from_array(X, chunks=(N // N_CHUNKS, D))
    probe = PrivatePCA(2, data_norm=1.0)
    with dask.config.set(scheduler="synchronous"):
        probe._plan_path(N, D, ChunkedRows(lazy))
        chunk = probe._copied_rows(N, D, ChunkedRows(lazy))[0]
    assert chunk == (N // N_CHUNKS) * D * 16  # one thread's chunk, and in float64
    needed = probe._memory_needed(N, D) + chunk
    kept = 3 * (N // N_CHUNKS) * D * 8  # the three chunks holding 32 768 rows
    for room, passes in [(kept // 2, 2), (2 * kept, 1)]:
        reads, _ = _reads(PrivatePCA, X, n_components=2, data_norm=1.0,
                          memory_limit=needed + room)
        assert reads[0] == reads[-1] == passes


@pytest.mark.parametrize("auto, most", [(False, 2), (True, 4)])
def test_rows_the_first_do_not_represent_cost_a_pass_not_the_quality(auto, most):
    """Rows sorted by a feature: the first rows' centre is off. The numeric
    fit sees it in its first release of the correction and reads the rows
    again around the corrected centre; "auto"'s steps on every row move the
    centre the rest of the way. The fit stays as good as one whose mean is
    released from every row (no pilot)."""
    X = _rows("sorted")
    params = dict(n_components=2, data_norm="auto" if auto else 1.0)
    reads, lines = _reads(PrivatePCA, X, **params)
    assert 1 < reads[-1] <= most
    if not auto:
        assert "the first rows' centre was off" in lines[-1]
    pilot = _fit(PrivatePCA, X, **params)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_norm_plan, "PILOT_FACTOR", math.inf)  # every row for the mean
        whole = _fit(PrivatePCA, X, **params)
    truth = np.cov(X.T)
    for fit in (pilot, whole):
        assert np.linalg.norm(fit.mean_ - X.mean(axis=0)) < 2e-3
    error = [np.linalg.norm(fit.get_covariance() - truth) for fit in (pilot, whole)]
    assert error[0] < 1.5 * error[1]


@pytest.mark.parametrize("make", [PrivatePCA, ComplexGaussPCA, CoherentPowerPCA])
@pytest.mark.parametrize("data_norm", [1.0, "auto"])
@pytest.mark.parametrize("order", [None, "sorted"])
def test_chunks_release_what_memory_releases(make, data_norm, order):
    """Issue 24, item 4: the same seed releases the same fit from a Dask
    array and from memory, with the first rows' centre and after a miss."""
    X = _rows(order)
    params = dict(n_components=2, data_norm=data_norm)
    local = _fit(make, X, **params)
    with dask.config.set(scheduler="synchronous"):
        lazy = _fit(make, da.from_array(X, chunks=(N // N_CHUNKS, D)), **params)
    assert lazy.data_norm_ == local.data_norm_
    for name in ("mean_", "components_", "explained_variance_", "noisy_variance_"):
        np.testing.assert_allclose(getattr(lazy, name), getattr(local, name),
                                   rtol=1e-8, atol=1e-12, err_msg=name)


def _fit_recording(monkeypatch, make):
    """A numeric fit of ``make`` with the first rows, and what it released:
    the σ of the mean's draws (the first rows' sum, then the correction
    twice) and the plan's μ as the release saw it."""
    sigmas, mus = [], {}
    for module in (_base, _bounds):
        real = module.dense_noise

        def spy(rng, shape, sigma, real=real):
            sigmas.append(sigma)
            return real(rng, shape, sigma)

        monkeypatch.setattr(module, "dense_noise", spy)
    real_release = make._release

    def release(self, gram, rows, plan, rng, dtype):
        mus.update(plan.mus)
        return real_release(self, gram, rows, plan, rng, dtype)

    monkeypatch.setattr(make, "_release", release)
    fit = _fit(make, _rows(), n_components=2, data_norm=1.0)
    mu = gdp_mu(EPSILON, 1e-6)
    assert mus["mean"] == pytest.approx(mu * math.sqrt(0.1 * 0.25))
    assert mus["centring"] == pytest.approx(mu * math.sqrt(0.1 * 0.75 / 2))
    assert sigmas[0] == pytest.approx(noise_scale(2.0, mus["mean"]))
    assert sigmas[1:3] == pytest.approx([noise_scale(2.0, mus["centring"])] * 2)
    assert fit.privacy_spent_ == (EPSILON, 1e-6)
    return mus, mu


def test_the_releases_compose_to_the_charge(monkeypatch):
    """The numeric fit's releases: the first rows' mean (sensitivity 2C at
    μ* √(0.1 · 0.25)), the sum of the clipped rows twice (2C, μ* √(0.1 · 0.75
    / 2) each), the Gram matrix and its trace (√2 C², μ* √0.9): Σ μ² = μ*²,
    each σ the analytic calibration of its μ."""
    mus, mu = _fit_recording(monkeypatch, PrivatePCA)
    assert mus["mean"] ** 2 + 2 * mus["centring"] ** 2 + mus["covariance"] ** 2 == (
        pytest.approx(mu**2))


def test_a_power_methods_releases_with_the_first_rows_compose_to_the_charge(
        monkeypatch):
    """CoherentPowerPCA on many rows: the first rows' mean, the two releases
    of the clipped rows' sum (their share of the mean's), the initialisation
    (√2 in unit-ball units), the clipping test's two counts (R²) and the
    branch (its share whichever runs) compose to μ*."""
    mus, mu = _fit_recording(monkeypatch, CoherentPowerPCA)
    branch = mus["fallback"] ** 2  # = T μ_step² + μ_decision²
    assert math.isclose(mus["step"] ** 2 * 2 + mus["decision"] ** 2, branch)
    total = (mus["mean"] ** 2 + 2 * mus["centring"] ** 2 + mus["init"] ** 2
             + 2 * mus["test"] ** 2 + branch)
    assert total == pytest.approx(mu**2, rel=1e-12)


@pytest.mark.parametrize("data_norm", [1.0, "auto"])
@pytest.mark.parametrize("chunked", [False, True])
def test_a_nan_past_the_first_rows_fails_the_fit_charged_after_a_release(
        data_norm, chunked):
    """The fit is charged before the first rows' first release. In memory
    every value is checked finite before it, so a NaN past the first rows
    is refused uncharged; a Dask array's later rows are read after the
    charge, and the fit that fails on them stays charged (issue 30, item 1:
    before, it failed uncharged after showing the steps' lines)."""
    X = _rows()
    X[-3, 1] = np.nan
    accountant = BudgetAccountant()
    estimator = PrivatePCA(2, epsilon=EPSILON, data_norm=data_norm,
                           accountant=accountant)
    data = da.from_array(X, chunks=(N // N_CHUNKS, D)) if chunked else X
    with pytest.raises(ValueError, match="NaN") as info:
        with dask.config.set(scheduler="synchronous"):
            estimator.fit(data)
    assert accountant.n_charges == (1 if chunked else 0)
    assert not hasattr(estimator, "components_")
    # what to do, and (charged) that it was charged: a Dask review found the
    # charged error bare of both
    assert "non_finite='clip'" in str(info.value)
    assert ("This fit was charged" in str(info.value)) == chunked


class _Watch:
    """A progress callable recording each line with whether the fit was
    charged when it was shown; raises ``KeyboardInterrupt`` at line
    ``stop`` (an interrupt at that moment)."""

    def __init__(self, accountant, stop=None, barrier=None):
        self.accountant, self.stop, self.barrier = accountant, stop, barrier
        self.lines = []

    def __call__(self, line):
        self.lines.append((line, self.accountant.n_charges))
        if self.barrier is not None and len(self.lines) == 1:
            self.barrier.wait(30)  # every fit has passed check() here
        if len(self.lines) == self.stop:
            raise KeyboardInterrupt

    def before_the_charge(self):
        return [line for line, charged in self.lines if not charged]


def _watched_fit(X, data_norm, chunked=False, stop=None, seed=None):
    accountant = BudgetAccountant()
    watch = _Watch(accountant, stop)
    estimator = PrivatePCA(2, epsilon=EPSILON, data_norm=data_norm,
                           accountant=accountant, random_state=seed)
    data = da.from_array(X, chunks=(N // N_CHUNKS, D)) if chunked else X
    with dask.config.set(scheduler="synchronous"):
        try:
            estimator._fit(data, progress=watch)
        except KeyboardInterrupt:
            pass
    return watch, accountant.n_charges


@pytest.mark.parametrize("data_norm", [1.0, "auto"])
@pytest.mark.parametrize("chunked", [False, True])
def test_nothing_that_depends_on_the_rows_is_shown_before_the_charge(
        data_norm, chunked):
    """Issue 30, item 1: the lines shown before the charge are the public
    plan, the same on neighbouring first rows and for every seed; the first
    rows' mean steps (how many ran is a release) come after it."""
    X, X_prime = _rows(), _rows()
    X_prime[0] = 1.0 / math.sqrt(D)  # the first row moved to the bound
    seen = set()
    for rows in (X, X_prime):
        for seed in range(3):
            watch, charges = _watched_fit(rows, data_norm, chunked, seed=seed)
            assert charges == 1
            seen.add(tuple(watch.before_the_charge()))
    (public,) = seen
    assert public and all(line.startswith("the first 32768 rows: ") for line in public)
    assert not any("step" in line for line in public)


@pytest.mark.parametrize("data_norm", [1.0, "auto"])
def test_an_interrupt_leaves_a_fit_charged_once_it_could_have_shown_a_release(
        data_norm):
    """An interrupt before the charge finds only public lines shown and
    charges nothing; one at any later line finds the fit charged (before:
    an interrupt at "pass 1" came after the steps' lines, uncharged)."""
    watch, _ = _watched_fit(_rows(), data_norm)
    public = len(watch.before_the_charge())
    assert not any("step" in line for line in watch.before_the_charge())
    for stop in range(1, len(watch.lines) + 1):
        interrupted, charges = _watched_fit(_rows(), data_norm, stop=stop)
        assert charges == (0 if stop <= public else 1)
        assert len(interrupted.lines) == stop


def test_concurrent_fits_on_a_budget_for_one_release_once(monkeypatch):
    """Issue 30, item 1: four fits that all pass check() together on a
    budget for one: one is charged and releases; the other three are refused
    at the charge, having shown only the public lines (before: all four
    showed the first rows' steps)."""
    import threading

    from sklearn_dppca import BudgetExceededError

    X = _rows()
    accountant = BudgetAccountant(epsilon=EPSILON)
    barrier = threading.Barrier(4)
    watches = [_Watch(accountant, barrier=barrier) for _ in range(4)]
    outcomes = [None] * 4

    def fit(i):
        try:
            PrivatePCA(2, epsilon=EPSILON, data_norm="auto",
                       accountant=accountant)._fit(X, progress=watches[i])
            outcomes[i] = "released"
        except BudgetExceededError:
            outcomes[i] = "refused"

    threads = [threading.Thread(target=fit, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["refused"] * 3 + ["released"]
    assert accountant.n_charges == 1
    public = {tuple(w.before_the_charge()) for w, o in zip(watches, outcomes)
              if o == "released"}
    assert not any("step" in line for lines in public for line in lines)
    for watch, outcome in zip(watches, outcomes):
        if outcome == "refused":
            assert {tuple(line for line, _ in watch.lines)} == public


def _adversarial_rows(centre, bound):
    """Rows around ``centre``: at it, inside, exactly at the bound and a hair
    past it, far out (beyond the raw Gram matrix's rows), and huge."""
    rng = np.random.default_rng(5)
    d = centre.shape[0]
    unit = rng.normal(size=d)
    unit /= np.linalg.norm(unit)
    rows = [centre, centre + 0.5 * bound * unit, centre + bound * unit,
            centre + bound * (1 + 1e-12) * unit, centre + 7.9 * bound * unit,
            centre + 1e3 * bound * unit, np.full(d, 1e200)]
    return np.vstack(rows + list(centre + 0.3 * bound * rng.normal(size=(200, d))))


def _direct(X, bound, centre):
    """``Σ clip_C(x − c)``, row by row, as the analysis states it."""
    return sum(_clip_scales(row[None], _sq_norms(row[None]), bound, centre)[0]
               * (row - centre) for row in X)


@pytest.mark.parametrize("layout", ["C", "F"])
@pytest.mark.parametrize("far", [0.0, 20.0])
def test_the_clipped_sums_of_the_gram_pass_are_exact(layout, far):
    """The Gram matrix's pass sums ``y = clip_C(x − c)`` and ``y yᵀ`` (every
    ``y`` of norm at most C: sensitivities 2C and √2 C²), in row blocks
    (:func:`clipped_gram`) or, for a dense chunk in either layout without
    rows far out, in whole-array operations (:func:`weighted_gram`)."""
    centre = np.linspace(-1.0, 1.0, 6) * far / 3
    bound = 1.5
    X = np.asarray(_adversarial_rows(centre, bound), order=layout)
    rows = np.ascontiguousarray(X)
    direction = centre / np.linalg.norm(centre) if far else None
    first = first_pass(rows, bound, with_sum=False, direction=direction)
    gram, _, total = clipped_gram(rows, bound, centre, first, with_sum=True)
    np.testing.assert_allclose(total, _direct(X, bound, centre), rtol=1e-9,
                               atol=1e-9 * bound)
    assert weighted_gram(X, bound, centre) is None  # rows far out
    with np.errstate(over="ignore"):
        distance = np.linalg.norm(X - centre, axis=1)
    for radius in (bound, bound / 4):  # a few rows clipped, then most
        inside = X[distance < 8 * radius]
        fast_gram, fast_total = weighted_gram(inside, radius, centre)
        slow_gram, _, slow_total = clipped_gram(np.ascontiguousarray(inside), radius,
                                                centre, with_sum=True)
        np.testing.assert_allclose(fast_total, _direct(inside, radius, centre),
                                   rtol=1e-9, atol=1e-9 * radius)
        np.testing.assert_allclose(fast_gram, slow_gram, rtol=1e-9,
                                   atol=1e-9 * radius**2)
    # one row replaced moves the sum by at most 2C
    swapped = rows.copy()
    swapped[0] = centre + 1e6 * bound
    _, _, other = clipped_gram(swapped, bound, centre, with_sum=True)
    assert np.linalg.norm(other - total) <= 2 * bound * (1 + 1e-9)


@pytest.mark.parametrize("kind", ["opposite", "orthogonal"])
def test_an_attack_on_the_first_row_measures_the_claimed_mu(kind):
    """Neighbours that differ in the first row, which both the first rows'
    centre and the covariance's pass read: the mean (``c + ȳ``, in which
    ``c`` cancels) shifts by exactly the two releases of the clipped sum, and
    the scatter matrix by the Gram matrix's release; neither beats its μ, and
    no test beats ε."""
    from sklearn_dppca.audit import (
        audit,
        mean_statistic,
        neighbouring_datasets,
        scatter_statistic,
    )

    epsilon, n_fits = 3.0, 300
    X, Y = neighbouring_datasets(2**17, 3, kind=kind, scale=0.7)
    estimator = PrivatePCA(epsilon=epsilon, delta=1e-6, data_norm=1.0)
    assert _norm_plan.pilot_rows(2**17, 3, gdp_mu(epsilon, 1e-6))  # the first rows
    statistic = mean_statistic(0) if kind == "opposite" else scatter_statistic
    result = audit(estimator, X, Y, statistic, n_fits=n_fits, random_state=4)
    assert result.epsilon_lower <= epsilon
    share = 0.1 * 0.75 if kind == "opposite" else 0.9
    expected = gdp_mu(epsilon, 1e-6) * math.sqrt(share)
    assert abs(result.mu_estimate - expected) < 3 * math.sqrt(2.0 / n_fits)


def test_the_first_step_on_every_row_counts_as_the_explicit_centring(monkeypatch):
    """The first step on every row takes its norms by expansion: the same
    counts and clipped sum as the rows centred explicitly, far rows and rows
    that overflow included (last bin; clipped to the radius)."""
    rng = np.random.default_rng(2)
    centre = np.full(6, 3.0)
    X = centre + rng.normal(size=(5000, 6)) * np.logspace(-1, 1, 5000)[:, None]
    X[:3] = np.array([1e200, 1e300, -1e250])[:, None]
    edges = _bounds.norm_grid(_bounds.DEFAULT_NORM_RANGE)
    expanded = _norm_stats._around(np.asfortranarray(X), centre, edges**2,
                                   radius=2.0)
    monkeypatch.setattr(_norm_stats, "EXPAND_REACH", 0.0)
    explicit = _norm_stats._around(X, centre, edges**2, radius=2.0)
    np.testing.assert_array_equal(expanded.counts, explicit.counts)
    np.testing.assert_allclose(expanded.fixed, explicit.fixed, rtol=1e-10)
