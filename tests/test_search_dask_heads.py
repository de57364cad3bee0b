"""A search over a Dask array whose candidates put public steps before the
private one (mend 103): the steps map the chunks where they are, and the
private step's path and memory are planned on them before the charge, as a
bare Dask fit's are (they were gathered into memory after the charge, and a
fit over ``memory_limit`` failed a charged search)."""

import re
import time
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
import dask  # noqa: E402
from sklearn.compose import ColumnTransformer  # noqa: E402
from sklearn.impute import SimpleImputer  # noqa: E402
from sklearn.pipeline import Pipeline, make_pipeline  # noqa: E402
from sklearn.preprocessing import OneHotEncoder  # noqa: E402

from sklearn_dppca import BudgetAccountant, CoherentPowerPCA, PrivatePCA  # noqa: E402
from sklearn_dppca._search_plan import _check_splits, _resolve_cv  # noqa: E402
from sklearn_dppca.linear_model import PrivateLDA  # noqa: E402
from sklearn_dppca.model_selection import PrivateGridSearchCV  # noqa: E402
from sklearn_dppca.preprocessing import PublicScaler  # noqa: E402

from .test_dask import _LargestResult  # noqa: E402

N, D, CHUNK = 6_000, 6, 1_000


def _rows():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D)) * 0.3
    X[:, 0] = rng.integers(0, 3, size=N)  # a category, for the encoder
    return X


def _never_read(block):
    """A chunk that must not be computed before the refusal."""
    if block.shape[0]:
        raise AssertionError("a chunk was read before the refusal")
    return block


HEADS = {
    "scaler": lambda: [("scale", PublicScaler(ranges=(-2.0, 2.0)))],
    "fill": lambda: [("fill", SimpleImputer(strategy="constant", fill_value=0.0,
                                            keep_empty_features=True))],
    "passthrough": lambda: [("skip", "passthrough"),
                            ("scale", PublicScaler(center=0.0, scale=2.0))],
    # a public encoder: 3 columns of one, a width known from its categories
    "encoder": lambda: [("encode", ColumnTransformer(
        [("onehot", OneHotEncoder(categories=[[0.0, 1.0, 2.0]],
                                  handle_unknown="ignore", sparse_output=False),
          [0])], remainder="passthrough", sparse_threshold=0))],
}
PRIVATE = {
    "pca": lambda limit: PrivatePCA(data_norm=3.0, memory_limit=limit),
    "power": lambda limit: CoherentPowerPCA(data_norm=3.0, n_iter=3,
                                            clip_radius=3.0, memory_limit=limit),
}


def _search(heads, private, limit, budget):
    pipe = Pipeline(HEADS[heads]() + [("pca", PRIVATE[private](limit))])
    return PrivateGridSearchCV(pipe, {"pca__n_components": [1, 2]}, epsilon=3.0,
                               cv=3, accountant=budget)


def _need(error):
    """The most GiB a refusal names as a fit's need."""
    return max(float(gib) for gib in
               re.findall(r"needs about ([0-9.e-]+) GiB", str(error)))


@pytest.mark.parametrize("private", sorted(PRIVATE))
@pytest.mark.parametrize("heads", sorted(HEADS))
def test_steps_before_the_private_one_are_planned_on_the_chunks(heads, private):
    """A limit that a bare fit of the Dask array is refused by refuses the
    search with steps before the private one before its charge and before
    any chunk is read, naming the need (the mapped chunks counted: more than
    the bare fit's); that need as the limit admits it, and its fits read the
    chunks mapped where they are, never more rows than a chunk at once.
    Before mend 103, the search was charged, then gathered every row and
    failed (or went over the limit)."""
    X = _rows()
    lazy = da.from_array(X, chunks=(CHUNK, D))
    with dask.config.set(scheduler="threads", num_workers=2), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        budget = BudgetAccountant()
        bare = PRIVATE[private](1024).set_params(n_components=2,
                                                  accountant=budget)
        with pytest.raises(MemoryError, match="chunks of rows its threads") \
                as bare_error:
            bare.fit(lazy)
        unread = lazy.map_blocks(_never_read, dtype=lazy.dtype)
        with pytest.raises(ValueError, match="before any budget was spent") as refused:
            _search(heads, private, 1024, budget).fit(unread)
        assert budget.n_charges == 0
        assert "MemoryError" in str(refused.value)
        assert "chunks of rows its threads read" in str(refused.value)
        # the mapped chunks counted beside the bare fit's
        assert _need(refused.value) > _need(bare_error.value)
        search = _search(heads, private, _need(refused.value) * 2**30, budget)
        with _LargestResult() as seen:
            search.fit(lazy)
        assert budget.n_charges == 1
        assert seen.rows <= CHUNK
        assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
        assert search.best_estimator_[-1].n_features_in_ == D + 2 * (heads == "encoder")


@pytest.mark.parametrize("private", [
    lambda limit: PrivatePCA(data_norm=3.0, memory_limit=limit),
    lambda limit: CoherentPowerPCA(data_norm=3.0, n_iter=3, clip_radius=3.0,
                                   memory_limit=limit)])
def test_the_need_a_search_names_admits_every_fit(private):
    """A search refused over memory_limit names the most any of its fits
    needs: that need as the limit admits it. The folds were planned first
    and the first refusal named a fold's need, which the refit (more rows:
    more of the first rows kept) then exceeded."""
    X = np.random.default_rng(0).normal(size=(N, D)) * 0.3
    lazy = da.from_array(X, chunks=(CHUNK, D))

    def search(limit, budget):
        return PrivateGridSearchCV(private(limit), {"n_components": [1, 2]},
                                   epsilon=3.0, cv=3, accountant=budget)

    with dask.config.set(scheduler="threads", num_workers=2), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        budget = BudgetAccountant()
        with pytest.raises(ValueError, match="before any budget was spent") as refused:
            search(1024, budget).fit(lazy)
        assert budget.n_charges == 0
        search(_need(refused.value) * 2**30, budget).fit(lazy)
        assert budget.n_charges == 1


def test_mapped_steps_give_the_search_of_the_rows_in_memory():
    """The chunks mapped by a PublicScaler give the scores and the release
    of the search over the same rows in memory (the same noise)."""
    X = _rows()

    def search(rows):
        pipe = make_pipeline(PublicScaler(ranges=(-2.0, 2.0)),
                             PrivatePCA(data_norm=3.0))
        return PrivateGridSearchCV(pipe, {"privatepca__n_components": [1, 2, 3]},
                                   epsilon=3.0, cv=3, random_state=0,
                                   accountant=BudgetAccountant()).fit(rows)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = search(X)
        got = search(da.from_array(X, chunks=(CHUNK, D)))
    np.testing.assert_allclose(got.cv_results_["mean_test_score"],
                               expected.cv_results_["mean_test_score"], rtol=1e-9)
    np.testing.assert_allclose(got.best_estimator_[-1].components_,
                               expected.best_estimator_[-1].components_,
                               rtol=1e-9, atol=1e-12)


def test_a_sparse_encoder_before_the_private_step_is_refused_on_dask():
    """A OneHotEncoder that makes sparse rows (its default) of a Dask array's
    dense chunks: the width and memory of what the private step reads are
    not planned, so the search is refused before the charge and before any
    chunk is read, naming the dense encoder that is."""
    lazy = da.from_array(_rows(), chunks=(CHUNK, D)).map_blocks(
        _never_read, dtype=float)
    pipe = make_pipeline(
        OneHotEncoder(categories=[[0.0, 1.0, 2.0]] * D, handle_unknown="ignore"),
        PrivatePCA(data_norm=3.0))
    budget = BudgetAccountant()
    search = PrivateGridSearchCV(pipe, {"privatepca__n_components": [1, 2]},
                                 epsilon=3.0, cv=3, accountant=budget)
    with pytest.raises(ValueError, match="sparse_output=False") as refused:
        search.fit(lazy)
    assert "before any budget was spent" in str(refused.value)
    assert budget.n_charges == 0


def test_a_supervised_search_maps_the_chunks_before_its_pca():
    """The supervised search plans its PCA on the mapped chunks too: a limit
    refuses it before the charge and before any chunk is read; that need as
    the limit admits it, with the scores of the rows in memory."""
    X = _rows()
    y = (X[:, 1] > 0).astype(int)

    def search(limit, budget, seed=None):
        pipe = make_pipeline(PublicScaler(ranges=(-2.0, 2.0)),
                             PrivatePCA(2, data_norm=3.0, memory_limit=limit),
                             PrivateLDA([0, 1], data_norm=3.0))
        return PrivateGridSearchCV(pipe, {"privatelda__alpha": [1.0, 2.0]},
                                   epsilon=3.0, cv=3, accountant=budget,
                                   random_state=seed)

    lazy = da.from_array(X, chunks=(CHUNK, D))
    with dask.config.set(scheduler="threads", num_workers=2), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        budget = BudgetAccountant()
        with pytest.raises(ValueError, match="chunks of rows its threads") as refused:
            search(1024, budget).fit(lazy.map_blocks(_never_read, dtype=float), y)
        assert budget.n_charges == 0
        limit = _need(refused.value) * 2**30
        got = search(limit, budget, seed=0).fit(lazy, y)
        assert budget.n_charges == 1
        expected = search(limit, BudgetAccountant(), seed=0).fit(X, y)
    np.testing.assert_allclose(got.cv_results_["mean_test_score"],
                               expected.cv_results_["mean_test_score"], rtol=1e-9)


def test_the_splits_check_is_linear_in_the_rows():
    """Five folds of 1.5·10⁶ rows are checked in well under a second (a
    count per row; np.unique and np.intersect1d sorted each split: 21 s on
    the project's 2-core machine), with every refusal kept."""
    n = 1_500_000
    splits = _resolve_cv(5, n)
    start = time.perf_counter()
    assert _check_splits(splits, n) == 4
    assert time.perf_counter() - start < 3.0
    train, test = splits[0]
    for bad, match in [([(np.r_[train, train[:1]], test)] + splits[1:], "repeat"),
                       ([(np.r_[train, test[:1]], test)] + splits[1:], "overlap"),
                       ([(train, np.r_[test, n])] + splits[1:], "outside")]:
        with pytest.raises(ValueError, match=match):
            _check_splits(bad, n)


def _twice(rows):
    return np.vstack([rows, rows])


def test_a_step_that_changes_a_chunks_rows_fails_after_the_charge():
    """A step before the private one that makes more (or fewer) rows of a
    chunk than it reads is no fixed map of each row: the chunk's declared
    rows (the fit's n) are not those read. It fails the charged search, as a
    step of another width does; it was fitted on twice the rows, counted once
    (twice the variance)."""
    from sklearn.preprocessing import FunctionTransformer

    X = da.from_array(_rows(), chunks=(CHUNK, D))
    budget = BudgetAccountant()
    search = PrivateGridSearchCV(
        make_pipeline(FunctionTransformer(_twice), PrivatePCA(data_norm=5.0)),
        {"privatepca__n_components": [2]}, epsilon=1.0, cv=2, accountant=budget)
    with pytest.raises(ValueError, match="another number.*budget of this search "
                                         "was spent"):
        search.fit(X)
    assert budget.n_charges == 1


def _frame():
    import pandas as pd

    rng = np.random.default_rng(1)
    cols = ["age", "income", "height", "weight"]
    return pd.DataFrame(rng.uniform(0, 1, size=(600, 4)) * [100, 1e5, 200, 150],
                        columns=cols)


RANGES = {"age": (0, 100), "income": (0, 1e5), "height": (0, 200),
          "weight": (0, 150), "unused": (0, 1)}
NAMED_HEADS = {
    "scaler": lambda: [PublicScaler(ranges=RANGES)],
    "columns": lambda: [ColumnTransformer(
        [("scale", PublicScaler(ranges=RANGES), ["weight", "age"])],
        remainder="drop", sparse_threshold=0)],
}


@pytest.mark.parametrize("heads", sorted(NAMED_HEADS))
@pytest.mark.parametrize("supervised", [False, True])
def test_a_dask_dataframe_search_maps_steps_keyed_by_name(heads, supervised):
    """Steps keyed by feature name (ranges by name, columns by name) map a
    Dask DataFrame's chunks as they map the frame in memory: the chunks
    reach them with the frame's column names (public), and the search gives
    the scores and the release of the same search on the pandas frame. They
    failed on the Dask array's unnamed row of zeros, refusing every
    candidate."""
    dd = pytest.importorskip("dask.dataframe")
    frame = _frame()
    y = (frame["age"] > 50).astype(int).to_numpy()

    def search(rows):
        tail = ([PrivatePCA(1, data_norm=2.0), PrivateLDA([0, 1], data_norm=2.0)]
                if supervised else [PrivatePCA(data_norm=2.0)])
        pipe = make_pipeline(*NAMED_HEADS[heads](), *tail)
        grid = ({"privatelda__alpha": [1.0, 2.0]} if supervised
                else {"privatepca__n_components": [1, 2]})
        budget = BudgetAccountant()
        found = PrivateGridSearchCV(pipe, grid, epsilon=3.0, cv=3, random_state=0,
                                    accountant=budget).fit(rows, y)
        assert budget.n_charges == 1
        return found

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = search(frame)
        got = search(dd.from_pandas(frame, npartitions=2))
    np.testing.assert_allclose(got.cv_results_["mean_test_score"],
                               expected.cv_results_["mean_test_score"], rtol=1e-9)
    assert got.best_params_ == expected.best_params_
    pca = [s for s in got.best_estimator_ if isinstance(s, PrivatePCA)][0]
    pca_in_memory = [s for s in expected.best_estimator_
                     if isinstance(s, PrivatePCA)][0]
    np.testing.assert_allclose(pca.components_, pca_in_memory.components_,
                               rtol=1e-9, atol=1e-12)
    # the refitted steps know the frame's names, as in memory
    np.testing.assert_array_equal(got.best_estimator_[0].feature_names_in_,
                                  list(frame.columns))


def test_a_range_missing_for_a_column_of_a_dask_dataframe_is_refused():
    """A step keyed by name that names no range for one of the frame's
    columns is refused before the charge, naming the column, as on the
    frame in memory."""
    dd = pytest.importorskip("dask.dataframe")
    frame = _frame()
    ranges = {k: v for k, v in RANGES.items() if k != "weight"}
    for rows in (frame, dd.from_pandas(frame, npartitions=2)):
        budget = BudgetAccountant()
        search = PrivateGridSearchCV(
            make_pipeline(PublicScaler(ranges=ranges), PrivatePCA(data_norm=2.0)),
            {"privatepca__n_components": [1, 2]}, epsilon=3.0, cv=3,
            accountant=budget)
        with pytest.raises(ValueError, match=re.escape(
                "ranges gives no (low, high) for the feature(s) ['weight']")) \
                as refused:
            search.fit(rows)
        assert budget.n_charges == 0
        assert "spent" not in str(refused.value) or \
            "before any budget was spent" in str(refused.value)


def test_a_supervised_search_refuses_unmappable_steps_before_the_charge():
    """A step before the supervised search's first private one that fails on
    the Dask DataFrame's row of zeros (a ColumnTransformer naming a column
    the frame lacks: public, its schema) is refused before the charge, as
    the unsupervised search refuses it; it failed the charged search."""
    dd = pytest.importorskip("dask.dataframe")
    frame = _frame()
    y = (frame["age"] > 50).astype(int).to_numpy()
    columns = ColumnTransformer([("scale", PublicScaler(ranges=(0.0, 1.0)),
                                  ["age", "nope"])], sparse_threshold=0)
    budget = BudgetAccountant()
    search = PrivateGridSearchCV(
        make_pipeline(columns, PrivatePCA(1, data_norm=2.0),
                      PrivateLDA([0, 1], data_norm=2.0)),
        {"privatelda__alpha": [1.0, 2.0]}, epsilon=3.0, cv=3, accountant=budget)
    with pytest.raises(ValueError, match="not columns of the dataframe.*nope") \
            as refused:
        search.fit(dd.from_pandas(frame, npartitions=2), y)
    assert "before any budget was spent" in str(refused.value)
    assert budget.n_charges == 0


@pytest.mark.parametrize("supervised", [False, True])
def test_bounds_by_name_after_mapped_steps_are_refused_before_the_charge(
        supervised):
    """A private step whose ``bounds`` is a dict by feature name, after
    public steps mapped over a Dask DataFrame's chunks (a ColumnTransformer
    with pandas output), is refused before the charge: the mapped chunks
    reach it without names, and its fit failed on the dict after the
    search's charge (review 105 F1). On the pandas frame it is fitted."""
    dd = pytest.importorskip("dask.dataframe")
    frame = _frame()
    y = (frame["age"] > 50).astype(int).to_numpy()
    box = {"weight": (0, 1), "age": (0, 1)}

    def search(rows, budget):
        columns = ColumnTransformer(
            [("s", PublicScaler(ranges=RANGES), ["weight", "age"])],
            remainder="drop", sparse_threshold=0,
            verbose_feature_names_out=False).set_output(transform="pandas")
        tail = PrivateLDA([0, 1], bounds=box) if supervised \
            else PrivatePCA(bounds=box)
        grid = ({"privatelda__alpha": [1.0, 2.0]} if supervised
                else {"privatepca__n_components": [1, 2]})
        return PrivateGridSearchCV(make_pipeline(columns, tail), grid,
                                   epsilon=3.0, cv=3, random_state=0,
                                   accountant=budget).fit(rows, y)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        budget = BudgetAccountant()
        search(frame, budget)
        assert budget.n_charges == 1
        budget = BudgetAccountant()
        with pytest.raises(ValueError, match="bounds is a dict by feature name"
                           ".*reach it without column names") as refused:
            search(dd.from_pandas(frame, npartitions=2), budget)
    assert budget.n_charges == 0
    assert "before any budget was spent" in str(refused.value)
    assert "The budget of this search was spent" not in str(refused.value)


@pytest.mark.parametrize("bounds, memory", [((-3, 3), 6.5e6), (None, 4e6)])
def test_a_bare_head_on_a_dask_array_is_planned_as_it_gathers(monkeypatch,
                                                               bounds, memory):
    """A bare private head on a Dask array gathers the rows into memory and,
    with bounds, clips a copy of them: the supervised search's plan counts
    them as the head's fit does, refusing before the charge (review 105 F2:
    the plan counted one copy with bounds, none without, and the fit
    refused after the search's charge). The memory lies between the two
    counts: the release (2.6 MB) and one or two copies (3.2 MB each)."""
    import sklearn_dppca.linear_model as lm
    from sklearn_dppca.linear_model import PrivateRidge

    n, d = 2000, 200
    monkeypatch.setattr(lm, "physical_memory", lambda: memory / lm.MEMORY_SHARE)
    rng = np.random.default_rng(0)
    X = da.from_array(rng.uniform(-3, 3, size=(n, d)), chunks=(500, d))
    y = rng.uniform(-3, 3, n)
    budget = BudgetAccountant(epsilon=10, delta=1e-5)
    head = PrivateRidge(y_bounds=(-3, 3), bounds=bounds, random_state=0,
                        data_norm=None if bounds else 50.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(MemoryError, match="Refused before any charge") \
                as refused:
            PrivateGridSearchCV(head, {"alpha": [0.1, 1.0]}, cv=5,
                                epsilon=1.0, accountant=budget).fit(X, y)
    assert budget.n_charges == 0
    assert "The budget of this search was spent" not in str(refused.value)
