"""Categorical columns encoded privately: with a public list of categories
(review 90 F1). The refusal of text columns names that way, never the
default encoder, whose categories are learned from the rows."""

import numpy as np
import pandas as pd
import pytest

from sklearn_dppca import PrivatePCA


def _survey(n=200, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(18, 90, n) / 90,
                         "region": rng.choice(["N", "S", "E"], n)})


@pytest.mark.parametrize("kind", ["frame", "array"])
def test_text_refusal_names_a_private_encoding(kind):
    X = _survey()
    if kind == "array":
        X = X.to_numpy(dtype=object)
    with pytest.raises(ValueError) as info:
        PrivatePCA(2, data_norm=2.0).fit(X)
    message = str(info.value)
    # the public list of categories, with unknown values ignored
    assert ("OneHotEncoder(categories=[PUBLIC_LIST], handle_unknown='ignore', "
            "sparse_output=False)") in message
    assert "pd.Categorical(column, categories=PUBLIC_LIST)" in message
    # the default is named only as what leaks, never as the advice
    assert "for instance with sklearn.preprocessing.OneHotEncoder" not in message
    assert "categories='auto')" in message and "not private" in message


# --------------------------------------------------------------------------
# Public encoders: accepted beside a private step, like the stateless steps
# --------------------------------------------------------------------------
import warnings  # noqa: E402

from sklearn.compose import ColumnTransformer, make_column_selector  # noqa: E402
from sklearn.exceptions import FitFailedWarning  # noqa: E402
from sklearn.pipeline import Pipeline  # noqa: E402
from sklearn.preprocessing import OneHotEncoder  # noqa: E402

from sklearn_dppca import BudgetAccountant, PrivacyLeakWarning  # noqa: E402
from sklearn_dppca._search_plan import _is_stateless, keeps_columns  # noqa: E402
from sklearn_dppca.model_selection import PrivateGridSearchCV  # noqa: E402

REGIONS = ["N", "S", "E"]


def _public(**kw):
    return OneHotEncoder(categories=[REGIONS], handle_unknown="ignore",
                         sparse_output=False, **kw)


def _table(encoder=None, remainder="passthrough", sparse_threshold=0, **kw):
    return ColumnTransformer([("oh", encoder or _public(), ["region"])],
                             remainder=remainder,
                             sparse_threshold=sparse_threshold, **kw)


class _Sub(OneHotEncoder):
    pass


@pytest.mark.parametrize("step, public", [
    (_public(), True),
    (_public(drop="first"), False),
    (_public(drop="if_binary"), False),
    (_public(drop=["N"]), False),
    (OneHotEncoder(categories=[REGIONS], handle_unknown="ignore"), True),
    (OneHotEncoder(), False),  # categories learned from the rows
    (OneHotEncoder(handle_unknown="ignore"), False),
    (OneHotEncoder(categories=[REGIONS]), False),  # "error": raises on a value
    (OneHotEncoder(categories=[REGIONS], handle_unknown="infrequent_if_exist"),
     False),
    (_public(min_frequency=5), False),  # counts
    (_public(max_categories=2), False),
    (_Sub(categories=[REGIONS], handle_unknown="ignore"), False),
    (_table(), True),
    (_table(remainder="drop"), True),
    (ColumnTransformer([("oh", _public(), make_column_selector(
        dtype_exclude="number"))], remainder="passthrough",
        sparse_threshold=0), True),
    (_table(OneHotEncoder()), False),
    (_table(remainder=OneHotEncoder()), False),
    (ColumnTransformer([("oh", _public(), lambda X: ["region"])]), False),
    # the output's kind is the rows' density against 0.3 wherever a part is
    # sparse: a sparse encoder's, or sparse X passed through (review 93 F1)
    (_table(OneHotEncoder(categories=[REGIONS], handle_unknown="ignore"),
            sparse_threshold=0.3), False),
    (_table(sparse_threshold=0.3), False),
    (ColumnTransformer([("x", "passthrough", [0])]), False),
    (_table(OneHotEncoder(categories=[REGIONS], handle_unknown="ignore"),
            sparse_threshold=0), True),
])
def test_public_encoders_are_stateless_but_change_the_columns(step, public):
    assert _is_stateless(step) is public
    assert not keeps_columns([step])  # an encoder changes the width


def test_public_encoder_in_a_pipeline_fits_without_leak_warning():
    df = _survey()
    df.loc[3, "region"] = np.nan  # not a listed category: a row of zeros
    df.loc[4, "region"] = "RareIsland"  # unknown: zeros, never a column
    pipe = Pipeline([("enc", _table()), ("pca", PrivatePCA(2, data_norm=2.0))])
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyLeakWarning)
        pipe.fit(df)
    assert pipe[-1].n_features_in_ == 4  # 3 listed categories and the age
    assert list(pipe[0].get_feature_names_out()) == [
        "oh__region_N", "oh__region_S", "oh__region_E", "remainder__age"]
    with pytest.warns(PrivacyLeakWarning, match="OneHotEncoder"):
        Pipeline([("enc", _table(OneHotEncoder(sparse_output=False))),
                  ("pca", PrivatePCA(2, data_norm=2.0))]).fit(df)


def test_search_accepts_a_public_encoder_and_knows_its_width():
    df = _survey(300)
    pipe = Pipeline([("enc", _table()), ("pca", PrivatePCA(data_norm=2.0))])
    acc = BudgetAccountant()
    with pytest.warns(FitFailedWarning, match=r"1 of the 2 candidates cannot be fitted"
                      r"[\s\S]*n_components=5"):  # 4 columns: public, before
        search = PrivateGridSearchCV(pipe, {"pca__n_components": [2, 5]},
                                     epsilon=1.0, accountant=acc).fit(df)
    assert acc.n_charges == 1
    assert search.best_params_ == {"pca__n_components": 2}
    assert search.best_estimator_[-1].n_features_in_ == 4
    assert list(search.feature_names_in_) == ["age", "region"]


def test_search_refuses_a_sparse_density_dependent_table():
    pipe = Pipeline([("enc", _table(sparse_threshold=0.3)),
                     ("pca", PrivatePCA(data_norm=2.0))])
    with pytest.raises(ValueError, match="Set sparse_threshold=0"):
        PrivateGridSearchCV(pipe, {"pca__n_components": [1]},
                            epsilon=1.0).fit(_survey())


@pytest.mark.parametrize("case", ["infinity", "unhashable", "text passed on"])
def test_search_refuses_rows_the_encoder_cannot_read_before_the_charge(case):
    df = _survey()
    enc = _table()
    if case == "infinity":  # a numeric column, encoded with listed values
        df["level"] = np.where(np.arange(len(df)) == 5, np.inf, 1.0)
        enc = ColumnTransformer([("oh", _public(), ["region"]), (
            "lv", OneHotEncoder(categories=[[1.0, 2.0]], handle_unknown="ignore",
                                sparse_output=False), ["level"])],
            remainder="passthrough", sparse_threshold=0)
        match = "cannot read a value"
    elif case == "unhashable":
        df["region"] = df["region"].astype(object)
        df.at[5, "region"] = ["N"]
        match = "cannot read a value"
    else:
        df["note"] = "x"
        match = "does not make numbers"
    acc = BudgetAccountant()
    pipe = Pipeline([("enc", enc), ("pca", PrivatePCA(data_norm=2.0))])
    with pytest.raises(ValueError, match=match) as info:
        PrivateGridSearchCV(pipe, {"pca__n_components": [1]}, epsilon=1.0,
                            accountant=acc).fit(df)
    assert "before it spent any budget" in str(info.value)
    assert acc.n_charges == 0


def test_user_guide_documents_private_encoding():
    from pathlib import Path

    docs = Path(__file__).resolve().parents[1] / "docs"
    guide = (docs / "choosing.rst").read_text()
    section = guide.split(".. _categorical-columns:")[1].split(".. _mixed-scales:")[0]
    assert 'OneHotEncoder(categories=[REGIONS], handle_unknown="ignore"' in section
    assert "pd.Categorical" in section and "Why not the default encoder" in section
    assert "OneHotEncoder`` of public categories" in (docs / "privacy.rst").read_text()


def test_an_encoder_with_a_drop_warns_of_unknown_categories_so_is_not_public():
    """With a drop, scikit-learn's transform warns "Found unknown categories"
    when a row holds a value outside the lists: a warning, before the
    private step's charge, that tells someone does. Such an encoder is not a
    public map (only drop=None is)."""
    import pandas as pd
    from sklearn.preprocessing import OneHotEncoder

    frame = pd.DataFrame({"r": ["N", "S", "X"]})
    for drop in ("first", "if_binary", ["N"]):
        encoder = OneHotEncoder(categories=[["N", "S", "E"]],
                                handle_unknown="ignore", drop=drop,
                                sparse_output=False)
        with pytest.warns(UserWarning, match="unknown categories"):
            encoder.fit_transform(frame)
        assert not _is_stateless(encoder)


@pytest.mark.parametrize("where", ["remainder", "nested"])
def test_an_encoder_in_the_remainder_or_nested_is_checked_before_the_charge(where):
    """The check before the charge fitted the top level's encoders only: an
    encoder in ``remainder`` or in a nested ColumnTransformer met infinity
    after the charge, and the search failed charged (review 93 F2)."""
    df = _survey()
    df["level"] = np.where(np.arange(len(df)) == 5, np.inf, 1.0)
    level = OneHotEncoder(categories=[[1.0, 2.0]], handle_unknown="ignore",
                          sparse_output=False)
    if where == "remainder":
        enc = ColumnTransformer([("oh", _public(), ["region"]),
                                 ("a", "passthrough", ["age"])],
                                remainder=level, sparse_threshold=0)
    else:
        inner = ColumnTransformer([("lv", level, ["level"])], sparse_threshold=0)
        enc = ColumnTransformer([("oh", _public(), ["region"]),
                                 ("in", inner, ["level"]),
                                 ("a", "passthrough", ["age"])], sparse_threshold=0)
    acc = BudgetAccountant()
    pipe = Pipeline([("enc", enc), ("pca", PrivatePCA(data_norm=2.0))])
    with pytest.raises(ValueError, match="cannot read a value"):
        PrivateGridSearchCV(pipe, {"pca__n_components": [1]}, epsilon=1.0,
                            accountant=acc).fit(df)
    assert acc.n_charges == 0


def test_a_categorical_column_before_a_public_encoder_is_refused_by_its_dtype():
    """scikit-learn's encoder reads a categorical column in its categories'
    dtype: inferred from the values, int64 for rows of numbers and object
    once one row is text, which reached the released categories_ and
    decided whether an unsorted list was refused (review 94 F1); casting it
    for the search alone changed which neighbour was refused (review 95
    F1). The searches refuse it by its dtype before the charge; as text,
    neighbours fit alike and the refitted model reads the caller's table."""
    rng = np.random.default_rng(0)
    base = pd.DataFrame({"age": rng.random(120),
                         "level": rng.integers(1, 3, 120)})
    other = base.copy()
    other["level"] = other["level"].astype(object)
    other.loc[7, "level"] = "N"  # unlisted: a row of zeros
    enc = ColumnTransformer([("lv", OneHotEncoder(
        categories=[[3, 1, 2]], handle_unknown="ignore", sparse_output=False),
        ["level"])], remainder="passthrough", sparse_threshold=0)
    pipe = Pipeline([("enc", enc), ("pca", PrivatePCA(data_norm=2.0))])
    kinds = set()
    for table in (base, other):
        acc = BudgetAccountant()
        search = PrivateGridSearchCV(pipe, {"pca__n_components": [1]},
                                     epsilon=1.0, accountant=acc)
        with pytest.raises(ValueError, match="'level' are pandas categoricals"):
            search.fit(table.assign(level=pd.Categorical(table["level"])))
        assert acc.n_charges == 0
        text = table.astype({"level": object})
        search.fit(text)
        assert acc.n_charges == 1
        kinds.add(search.best_estimator_[0].named_transformers_["lv"]
                  .categories_[0].dtype)
        assert search.transform(text).shape == (120, 1)
    assert kinds == {np.dtype(object)}
    assert not _is_stateless(OneHotEncoder(categories=[[b"N", b"S"]],
                                           handle_unknown="ignore"))


def test_the_search_scores_a_table_its_column_transformer_selects_by_name():
    """score validated a DataFrame into an array before the refitted
    Pipeline read it, so a ColumnTransformer selecting columns by name
    failed (review 95 F3): the frame reaches the steps, as in fit."""
    df = _survey()
    search = PrivateGridSearchCV(
        Pipeline([("enc", _table()), ("pca", PrivatePCA(data_norm=2.0))]),
        {"pca__n_components": [1]}, epsilon=1.0,
        accountant=BudgetAccountant()).fit(df)
    assert search.score(df) == search.scorer_(search.best_estimator_, df)
    with pytest.raises(ValueError, match="feature names"):
        search.score(df.rename(columns={"age": "years"}))
