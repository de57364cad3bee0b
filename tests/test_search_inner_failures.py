"""A search's failures after its charge, in memory: a step before the
private one that drops or repeats rows, and an inner fit's own refusal
(review 103 F1, F3)."""
import numpy as np
import pytest
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import FunctionTransformer

from sklearn_dppca import BudgetAccountant, PrivatePCA
from sklearn_dppca.linear_model import PrivateLDA
from sklearn_dppca.model_selection import PrivateGridSearchCV

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
SPENT = "The budget of this search was spent"


def _positive_first(rows):
    return rows[rows[:, 0] > 0]


def _twice(rows):
    return np.vstack([rows, rows])


@pytest.mark.parametrize("step", [_positive_first, _twice])
def test_a_step_that_changes_the_rows_in_memory_fails_after_the_charge(step):
    """A step that keeps some rows (or repeats them) is no fixed map of each
    row: in memory the search fitted the private step on its output and
    released best_estimator_.n_samples_, the count of rows a filter kept.
    It fails the charged search, as on a Dask array (_ChunkMap)."""
    X = np.random.default_rng(0).normal(size=(800, 5))
    budget = BudgetAccountant()
    search = PrivateGridSearchCV(
        make_pipeline(FunctionTransformer(step), PrivatePCA(data_norm=5.0)),
        {"privatepca__n_components": [2]}, epsilon=5.0, cv=2, accountant=budget)
    with pytest.raises(ValueError, match=f"another number of rows.*{SPENT}"):
        search.fit(X)
    assert budget.n_charges == 1


def test_a_supervised_step_that_drops_rows_fails_after_the_charge():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(800, 5)), rng.integers(0, 2, 800)
    budget = BudgetAccountant()
    search = PrivateGridSearchCV(
        Pipeline([("f", FunctionTransformer(_positive_first)),
                  ("pca", PrivatePCA(data_norm=5.0)),
                  ("lda", PrivateLDA([0, 1], data_norm=5.0))]),
        {"pca__n_components": [2]}, epsilon=5.0, cv=2, accountant=budget)
    with pytest.raises(ValueError, match=f"another number of rows.*{SPENT}"):
        search.fit(X, y)
    assert budget.n_charges == 1


def _wide(rows):
    return np.hstack([rows] * 500) if len(rows) > 1 else rows


def test_an_inner_refusal_after_the_charge_does_not_say_nothing_was_spent():
    """An inner fit's own refusal before its own charge (its memory plan),
    raised after the search's: the message said both "refused before
    reading the data or spending any budget" and that the search's budget
    was spent. Its sentence now says the fit failed after the charge."""
    X = np.random.default_rng(0).normal(size=(600, 6))
    budget = BudgetAccountant()
    search = PrivateGridSearchCV(
        Pipeline([("f", FunctionTransformer(_wide)),
                  ("p", PrivatePCA(data_norm=5.0, memory_limit=2e7))]),
        {"p__n_components": [2]}, epsilon=1.0, cv=2, accountant=budget)
    _refused_after_the_charge(search, budget, (X,), "spending any budget",
                              "more than memory_limit")


def _refused_after_the_charge(search, budget, data, unspent, reason):
    """The search fails with an inner refusal after its one charge: the
    refusal's sentence ``unspent`` replaced ("step", not "fit": a validation
    fold's transform may raise it, review 104 F3), the spent sentence last,
    its ``reason`` kept."""
    with pytest.raises(MemoryError) as raised:
        search.fit(*data)
    message = str(raised.value)
    assert budget.n_charges == 1
    assert unspent not in message
    assert "This step inside the search failed after the search's charge." in message
    assert message.endswith(SPENT + ": the error came after its charge.")
    assert reason in message


def _lookup(rows):
    if len(rows) < 300:  # the validation folds only: after the charge
        raise ValueError("Feature store lookup failed for table 'users'. "
                         "The retry loop spent nothing on backoff. See the logs.")
    return rows


def test_a_users_own_error_text_is_not_rewritten_after_the_charge():
    """Only the package's own refusals (marked) have their "spent nothing"
    sentence replaced: a user's step whose message says "spent nothing"
    lost that sentence to "This fit inside the search failed ..." (review
    104 F3)."""
    X = np.random.default_rng(0).normal(size=(600, 5))
    budget = BudgetAccountant()
    search = PrivateGridSearchCV(
        make_pipeline(FunctionTransformer(_lookup), PrivatePCA(data_norm=5.0)),
        {"privatepca__n_components": [2]}, epsilon=1.0, cv=3,
        accountant=budget, error_score="raise")
    with pytest.raises(ValueError) as raised:
        search.fit(X)
    own = ("Feature store lookup failed for table 'users'. The retry loop "
           "spent nothing on backoff. See the logs.")
    assert str(raised.value) == f"{own} {SPENT}: the error came after its charge."
    assert str(raised.value.__cause__) == own
    assert budget.n_charges == 1


@pytest.mark.parametrize("int64", [False, True])
def test_a_search_on_csc_rows_counts_their_copy_before_the_charge(int64):
    """Each fit copies CSC rows to CSR and its plan counts the copy, but the
    search's plan (on a stand-in of CSR kind) did not: at a memory_limit
    between the two, the search charged and every fold fit refused (review
    104 F1). The search's stand-in keeps the format: refused before the
    charge, naming the CSR copy, not a "float copy"."""
    from scipy import sparse

    X = sparse.random(2000, 200, density=0.3, format="csc", random_state=0)
    if int64:  # a csc_array keeps them, and its fits' CSR copies too (review
        # 119 F1: the search's stand-in counted int32 indices)
        X = sparse.csc_array(X)
        X.indices, X.indptr = X.indices.astype(np.int64), X.indptr.astype(np.int64)
    fold = X[:1000]

    def fits(rows, limit):
        try:
            PrivatePCA(2, data_norm=5.0, memory_limit=limit,
                       accountant=BudgetAccountant()).fit(rows)
        except MemoryError:
            return False
        return True

    # the least limit a CSR fold's fit is admitted at (with int64 indices:
    # a CSC fold's of int32 indices, which the search's stand-in counted)
    narrower = (sparse.csc_array((fold.data, fold.indices.astype(np.int32),
                                  fold.indptr.astype(np.int32)), shape=fold.shape)
                if int64 else fold.tocsr())
    low, high = 1e5, 1e9
    while high / low > 1.001:
        mid = (low * high) ** 0.5
        low, high = (low, mid) if fits(narrower, mid) else (mid, high)
    limit = high * (1.005 if int64 else 1.02)  # int64: 4 bytes more an entry
    assert fits(narrower, limit) and not fits(fold, limit)  # between the plans
    budget = BudgetAccountant()
    search = PrivateGridSearchCV(PrivatePCA(data_norm=5.0, memory_limit=limit),
                                 {"n_components": [2]}, epsilon=1.0, cv=2,
                                 accountant=budget, refit=False)
    with pytest.raises(ValueError, match="before any budget") as raised:
        search.fit(X)
    assert budget.n_charges == 0
    assert "CSR copy its rows made of CSC X" in str(raised.value)
    assert "float copy" not in str(raised.value)
    search.set_params(estimator__memory_limit=1e12).fit(X)  # fits where admitted
    assert budget.n_charges == 1


def test_a_heads_memory_refusal_after_the_charge_says_the_budget_was_spent(
        monkeypatch):
    """A head's memory refusal ("Refused before any charge."), raised by a
    fit inside a supervised search after the search's charge (a step that
    widens the rows it reads: the plan saw its output on no row), is marked
    as the package's refusal: its sentence is replaced, as a PrivatePCA's
    is (review 105 F2: it said "Refused before any charge." and that the
    search's budget was spent)."""
    import sklearn_dppca.linear_model as lm
    from sklearn_dppca.linear_model import PrivateRidge

    monkeypatch.setattr(lm, "physical_memory", lambda: 5e7 / lm.MEMORY_SHARE)
    rng = np.random.default_rng(0)
    X, y = rng.uniform(-1, 1, size=(600, 6)), rng.uniform(-1, 1, 600)
    budget = BudgetAccountant()
    search = PrivateGridSearchCV(
        make_pipeline(FunctionTransformer(_wide),
                      PrivateRidge(data_norm=5.0, y_bounds=(-1, 1))),
        {"privateridge__alpha": [1.0]}, epsilon=1.0, cv=2, accountant=budget)
    _refused_after_the_charge(search, budget, (X, y), "Refused before any charge",
                              "this head's release")


def test_a_gathering_refusal_is_rewritten_after_a_charge():
    """check_gathered's refusal is marked: raised inside a charged search,
    its sentence "Refused before any chunk is read or budget charged." is
    replaced (review 105 F2)."""
    from sklearn_dppca import _paths
    from sklearn_dppca._search_run import charged_search

    da = pytest.importorskip("dask.array")
    X = da.zeros((10_000, 1_000), chunks=(1_000, 1_000))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_paths, "physical_memory", lambda: 1e6)
        with pytest.raises(MemoryError) as raised, charged_search():
            _paths.check_gathered(X, "A step", copies=1)
    message = str(raised.value)
    assert "Refused before any chunk is read" not in message
    assert "This step inside the search failed after the search's charge." in message
    assert message.endswith(SPENT + ": the error came after its charge.")
