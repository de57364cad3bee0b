"""A release that is mostly noise says so (issue 32, item 1).

The diagnostics (NoisyReleaseWarning, FeatureScaleWarning's component rule)
read released values and public noise scales only: post-processing, issued
after the charge. Tested on a survey table like the issue's (a population
count beside small scales), fitted the three ways a new user does and the
way the warnings advise.
"""

import re
import types
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.pipeline import make_pipeline

from sklearn_dppca import BudgetAccountant, NoisyReleaseWarning, PrivatePCA
from sklearn_dppca._released import (
    warn_if_mean_projected,
    warn_if_noise_dominated,
    warn_if_one_feature_dominates,
)
from sklearn_dppca.preprocessing import FeatureScaleWarning, PublicScaler

RANGES = {"popul": (0, 10_000), "PID": (0, 6), "ideology": (1, 7),
          "age": (18, 90), "educ": (0, 4)}
LOWER, UPPER = np.array(list(RANGES.values()), dtype=float).T
DIAGNOSTICS = (NoisyReleaseWarning, FeatureScaleWarning)


def survey(n=944, seed=0):
    """944 rows like the 1996 election study's: party identification and
    ideology driven by one latent lean, an age, an education level and a
    heavy-tailed population count (its range 10⁴, the others' under 10²)."""
    rng = np.random.default_rng(seed)
    lean = rng.normal(size=n)
    return pd.DataFrame({
        "popul": np.clip(rng.lognormal(5, 2.2, size=n), 0, 10_000).round(),
        "PID": np.clip(np.round(3 + 1.8 * lean + rng.normal(size=n)), 0, 6),
        "ideology": np.clip(np.round(4 + 1.5 * lean + rng.normal(size=n)), 1, 7),
        "age": np.clip(rng.normal(47, 16, size=n), 18, 90).round(),
        "educ": np.clip(np.round(2 + 0.8 * rng.normal(size=n)), 0, 4),
    })


def diagnostics(estimator, X):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimator.fit(X)
    return [(w.category, str(w.message)) for w in caught
            if issubclass(w.category, DIAGNOSTICS)]


def private(**params):
    params = {"n_components": 2, "epsilon": 1.0, **params}
    return PrivatePCA(accountant=BudgetAccountant(), **params)


@pytest.mark.parametrize("seed", range(4))
def test_a_huge_norm_bound_warns_that_components_are_noise(seed):
    """Three components of which the population is the only signal: the
    other two are noise (each crosses the edge by chance 9–19% of the time,
    both far less often)."""
    caught = diagnostics(private(n_components=3, data_norm=8000.0,
                                 random_state=seed), survey())
    noise = [m for c, m in caught if c is NoisyReleaseWarning]
    assert len(noise) == 1
    assert re.search(r"of the 3 released components (do|does) not stand out", noise[0])
    for knob in ("tighter data_norm", "PublicScaler", "more epsilon",
                 "n_components="):
        assert knob in noise[0]


def test_sparse_rows_are_advised_a_scaling_that_keeps_them_sparse():
    """On sparse rows the private scaler centres (refused) and a public one
    keeps them sparse only from 0: the advice named PrivateStandardScaler,
    which a user following it found refused (review 90 F5)."""
    from scipy import sparse

    X = sparse.csr_matrix(survey().to_numpy())
    caught = diagnostics(private(n_components=3, data_norm=8000.0,
                                 random_state=0), X)
    noise = [m for c, m in caught if c is NoisyReleaseWarning]
    assert len(noise) == 1 and "PublicScaler, ranges from 0" in noise[0]
    assert "PrivateStandardScaler" not in noise[0]


@pytest.mark.parametrize("seed", range(4))
def test_ranges_without_scaling_warn_that_the_mean_left_them(seed):
    est = private(bounds=(LOWER, UPPER), random_state=seed)
    caught = diagnostics(est, survey())
    means = [m for c, m in caught
             if c is NoisyReleaseWarning and m.startswith("The private mean of")]
    assert len(means) == 1
    assert "'PID'" in means[0] and "'popul'" not in means[0]
    assert ((LOWER <= est.mean_) & (est.mean_ <= UPPER)).all()


@pytest.mark.parametrize("seed", range(4))
def test_auto_without_scaling_warns_that_one_feature_dominates(seed):
    caught = diagnostics(private(data_norm="auto", random_state=seed), survey())
    scale = [m for c, m in caught if c is FeatureScaleWarning]
    assert len(scale) == 1 and "'popul'" in scale[0]


@pytest.mark.parametrize("seed", range(4))
def test_the_advised_scaling_leaves_nothing_to_warn(seed):
    pipe = make_pipeline(PublicScaler(RANGES),
                         private(n_components=1, bounds=(0, 1), random_state=seed))
    assert diagnostics(pipe, survey()) == []
    assert pipe[-1].n_resolved_ == 1


def released(ratio, loading, resolved=1):
    """A fitted model's released values: a first component with ``loading``
    on feature 0 (the rest spread evenly) explaining ``ratio`` of the total."""
    d, first = 5, np.full(5, np.sqrt((1.0 - loading**2) / 4))
    first[0] = loading
    total = 100.0 / ratio
    return types.SimpleNamespace(
        n_components_=1, n_resolved_=resolved, components_=first[None, :],
        explained_variance_=np.array([100.0]),
        explained_variance_ratio_=np.array([ratio]),
        noise_variance_=(total - 100.0) / (d - 1), total_variance_=total,
        data_norm_=1.0, n_samples_=10_000, n_features_in_=d, epsilon=1.0,
        delta=1e-6)


def test_the_component_rule_needs_a_resolved_dominant_component():
    """Fires on a resolved first component that is one feature and nearly all
    the variance, where the released diagonal (ratio ~50) does not; not on
    axis-aligned data of differing variances (87%), nor below the edge."""
    with pytest.warns(FeatureScaleWarning,
                      match="the first component is feature 0 alone"):
        warn_if_one_feature_dominates(released(0.96, 0.97))
    for quiet in (released(0.87, 0.99), released(0.96, 0.9),
                  released(0.96, 0.97, resolved=0)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            warn_if_one_feature_dominates(quiet)
    rng = np.random.default_rng(0)  # PrivatePCA's docstring example
    X = rng.normal(size=(10_000, 5)) * [3.0, 1.0, 0.5, 0.2, 0.1]
    X /= np.linalg.norm(X, axis=1).max()
    assert diagnostics(private(data_norm=1.0, random_state=0), X) == []


def test_wide_rows_with_a_noisy_covariance_are_pointed_to_the_random_start():
    """With d ≥ 100 and n ≥ 5 d a covariance fit whose components are noise
    names CoherentPowerPCA(start="random"); narrow rows, too few rows and a
    random-start fit itself do not."""
    from sklearn_dppca import CoherentPowerPCA

    def message(n, d, **attrs):
        view = types.SimpleNamespace(
            n_components_=2, n_resolved_=0, data_norm_=1.0, epsilon=1.0,
            n_samples_=n, n_features_in_=d, **attrs)
        with pytest.warns(NoisyReleaseWarning) as caught:
            warn_if_noise_dominated(view)
        return str(caught[0].message)

    assert "CoherentPowerPCA(start='random')" in message(2_000, 200)
    assert "With 2000 rows of 200 features" in message(2_000, 200)
    for quiet in (message(2_000, 50), message(900, 200),
                  message(2_000, 200, branch_="random")):
        assert "start='random'" not in quiet
    X = np.random.default_rng(0).normal(size=(1_500, 150))
    with pytest.warns(NoisyReleaseWarning, match="start='random'"):
        PrivatePCA(2, data_norm=30.0, epsilon=1.0, random_state=0,
                   accountant=BudgetAccountant()).fit(X)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        CoherentPowerPCA(2, start="random", data_norm=30.0, epsilon=1.0,
                         random_state=0, accountant=BudgetAccountant()).fit(X)
    assert not any("start='random'" in str(w.message) for w in caught)


def test_the_noise_advice_keeps_the_resolved_components_or_says_none_is():
    """With some components resolved the warning advises keeping
    n_resolved_ of them (docs/privacy.rst); with none, it says so and names
    more epsilon, more rows and a tighter data_norm, not "keep
    n_components=1" to a fit that already has it."""

    def message(k, resolved):
        view = types.SimpleNamespace(n_components_=k, n_resolved_=resolved,
                                     data_norm_=8.0, epsilon=1.0)
        with pytest.warns(NoisyReleaseWarning) as caught:
            warn_if_noise_dominated(view)
        return str(caught[0].message)

    assert "keep n_components=2 (the resolved ones)" in message(3, 2)
    assert "more rows" in message(3, 2)
    for k in (1, 3):
        none = message(k, 0)
        assert "n_components=" not in none
        assert "no component is resolved at this budget" in none
        for knob in ("tighter data_norm", "more epsilon", "more rows"):
            assert knob in none
    rng = np.random.default_rng(0)  # review 70's fit: one component, none resolved
    X = rng.integers(0, 5, size=(200, 2)).astype(float)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        PrivatePCA(n_components=1, data_norm=8.0, random_state=0,
                   accountant=BudgetAccountant()).fit(X)
    noisy = [str(w.message) for w in caught if w.category is NoisyReleaseWarning]
    assert len(noisy) == 1 and "no component is resolved" in noisy[0]
    assert "keep n_components" not in noisy[0]


def released_only(estimator):
    """The fitted attributes the diagnostics may read, and nothing else."""
    names = ("n_components_", "n_resolved_", "components_", "explained_variance_",
             "explained_variance_ratio_", "noise_variance_", "total_variance_",
             "data_norm_", "n_samples_", "n_features_in_", "feature_names_in_",
             "epsilon", "delta", "mean_", "branch_",
             # public: the mean's error against the noise's bulk, from the
             # noise scales, n and d (the noise warning's hint)
             "_mean_error_out")
    return types.SimpleNamespace(**{a: getattr(estimator, a) for a in names
                                    if hasattr(estimator, a)})


@pytest.mark.parametrize("params", [{"data_norm": 8000.0},
                                    {"bounds": (LOWER, UPPER)},
                                    {"data_norm": "auto"}])
def test_neighbours_warn_apart_only_through_released_values(params):
    """On two neighbouring tables (one row replaced by an extreme one), over
    seeds, every diagnostic a fit shows is recomputed from its released
    attributes alone (and the projected mean: the noisy mean is released
    before the projection): the warnings are post-processing."""
    X = survey()
    Y = X.copy()
    Y.iloc[0] = [10_000, 0, 7, 90, 0]
    for data in (X, Y):
        for seed in range(3):
            est = private(random_state=seed, **params)
            shown = diagnostics(est, data)
            again = []
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                view = released_only(est)
                warn_if_noise_dominated(view)
                warn_if_one_feature_dominates(view)
            again = [(w.category, str(w.message)) for w in caught]
            kept = [(c, m) for c, m in shown if not m.startswith("The private mean of")]
            assert sorted(kept, key=str) == sorted(again, key=str)


def test_the_mean_rule_reads_the_released_mean_and_the_box():
    view = types.SimpleNamespace(feature_names_in_=np.array(["a", "b"]))
    with pytest.warns(NoisyReleaseWarning, match=r"1 of 2 features \('b'\)"):
        warn_if_mean_projected(view, np.array([0.5, 7.0]), np.array([0.5, 6.0]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_mean_projected(view, np.array([0.5, 6.0]), np.array([0.5, 6.0]))


def test_the_cli_keeps_the_warnings_with_the_model(tmp_path, capsys):
    pytest.importorskip("pandas")
    from sklearn_dppca.__main__ import main

    table = tmp_path / "survey.csv"
    survey().to_csv(table, index=False)
    model = tmp_path / "m.json"
    # three components, two of them noise (see the first test)
    rc = main(["fit", str(table), "-k", "3", "--epsilon", "1", "--delta", "1e-6",
               "--data-norm", "8000", "--seed", "0", "-o", str(model)])
    err = capsys.readouterr().err
    assert rc == 0
    assert "of the 3 released components do not stand out of the noise" in err
    assert "tighter --data-norm" in err and "--n-components=" in err
    assert "mostly noise or one feature, see warnings" in err
    import json

    saved = json.loads(model.read_text())
    assert len(saved["privacy_warnings"]) == 1  # the fixed seed's
    assert any("not stand out" in w for w in saved["release_warnings"])


def test_the_noise_advice_names_fewer_features_where_the_noise_grows_with_them():
    """The covariance's noise bulk widens as sqrt(d) (d public): a wide
    hashed fit that is noise was told a tighter bound and scaling only, not
    fewer features (review 99 F3: 2^16 hashed features gave sin 1.00, 2^12
    gave 0.30). The random start's releases' noise does not grow with d:
    not said there, nor on narrow rows (d < 100), where it is not the knob."""

    def message(**attrs):
        view = types.SimpleNamespace(n_components_=2, n_resolved_=0,
                                     data_norm_=1.0, epsilon=1.0, **attrs)
        with pytest.warns(NoisyReleaseWarning) as caught:
            warn_if_noise_dominated(view)
        return str(caught[0].message)

    wide = message(n_samples_=500, n_features_in_=4096)
    assert "square root of the number of features" in wide
    assert ("keep fewer features (a public selection, or a smaller "
            "HashingVectorizer(n_features=...); d=4096 now)") in wide
    assert "keeping fewer components would not help" in wide
    for quiet in (message(n_samples_=500, n_features_in_=4096, branch_="random"),
                  message(n_samples_=500, n_features_in_=50), message()):
        assert "fewer features" not in quiet and "square root" not in quiet
    from sklearn.feature_extraction.text import HashingVectorizer

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(3000)]
    docs = [" ".join(rng.choice(words, 20)) for _ in range(300)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make_pipeline(HashingVectorizer(n_features=2**12), PrivatePCA(
            3, data_norm=1.0, epsilon=1.0, random_state=0,
            accountant=BudgetAccountant())).fit(docs)
    noisy = [str(w.message) for w in caught if w.category is NoisyReleaseWarning]
    assert noisy and "smaller HashingVectorizer(n_features=...); d=4096" in noisy[0]


def test_the_cli_names_fewer_columns_for_fewer_features(tmp_path, capsys):
    pytest.importorskip("pandas")
    from sklearn_dppca.__main__ import main

    table = tmp_path / "wide.csv"
    rng = np.random.default_rng(0)
    pd.DataFrame(rng.uniform(0, 1, (600, 120)),
                 columns=[f"c{i}" for i in range(120)]).to_csv(table, index=False)
    rc = main(["fit", str(table), "-k", "3", "--epsilon", "1", "--delta", "1e-6",
               "--data-norm", "20", "-o", str(tmp_path / "m.json")])
    err = capsys.readouterr().err
    assert rc == 0
    assert "keep fewer features (a public selection of the columns with " \
           "--columns; d=120 now)" in err, err
    assert "HashingVectorizer" not in err
