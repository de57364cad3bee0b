"""Text before a private step (review 99 F1): the vectorizers that learn
nothing (hashing, a public vocabulary without idf) are public maps, not
warned of in a Pipeline; those that learn a vocabulary or idf_ are, with
what leaks and what to use; the searches, which read numeric rows, refuse
text with that advice, before any charge."""

import pickle
import warnings

import numpy as np
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.feature_extraction.text import (
    CountVectorizer,
    HashingVectorizer,
    TfidfTransformer,
    TfidfVectorizer,
)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from sklearn_dppca import BudgetAccountant, PrivacyLeakWarning, PrivatePCA
from sklearn_dppca._search_plan import _is_stateless, keeps_columns
from sklearn_dppca.model_selection import PrivateGridSearchCV

VOCABULARY = [f"word{i}" for i in range(40)]


def _corpus(n=120, seed=0):
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(VOCABULARY, 12)) for _ in range(n)]


class _Hashing(HashingVectorizer):
    """A subclass: it may learn in fit, so it is not public."""


PUBLIC = {
    "hashing": lambda: [HashingVectorizer(n_features=2**8)],
    "hashing, any parameters": lambda: [HashingVectorizer(
        n_features=2**6, alternate_sign=False, norm=None, binary=True,
        ngram_range=(1, 2))],
    # min_df, max_df, max_features: ignored with a vocabulary
    "count, vocabulary": lambda: [CountVectorizer(
        vocabulary=VOCABULARY, min_df=5, max_df=0.1, max_features=3)],
    "tfidf, vocabulary, no idf": lambda: [TfidfVectorizer(
        vocabulary=VOCABULARY, use_idf=False, sublinear_tf=True, min_df=3)],
    "hashing then tf, no idf": lambda: [HashingVectorizer(n_features=2**8, norm=None),
                                        TfidfTransformer(use_idf=False)],
}
LEARNED = {
    "count": (CountVectorizer(), "which words they hold"),
    "tfidf": (TfidfVectorizer(), "which words they hold"),
    "tfidf, vocabulary, idf": (TfidfVectorizer(vocabulary=VOCABULARY), "idf_"),
    "tf, idf": (TfidfTransformer(), "idf_"),
}


@pytest.mark.parametrize("name", list(PUBLIC))
def test_public_text_steps_learn_nothing_from_the_documents(name):
    """What makes them public, checked on the installed scikit-learn: fitted
    on two corpora differing in one document (and on one document), their
    whole fitted state, their transform of new documents and the width the
    next step reads are identical."""
    corpus = _corpus()
    corpora = [corpus, corpus[:-1] + ["zzzrare word1 word1 " * 4], corpus[:1]]
    new = _corpus(10, seed=1) + ["word0 unseen"]
    fits = [make_pipeline(*PUBLIC[name](), FunctionTransformer(accept_sparse=True))
            .fit(c) for c in corpora]
    states = {tuple(pickle.dumps(vars(s)) for _, s in fit.steps[:-1])
              for fit in fits}
    assert len(states) == 1
    outputs = [fit[:-1].transform(new) for fit in fits]
    assert all(abs(out - outputs[0]).max() == 0 for out in outputs)
    assert len({fit[-1].n_features_in_ for fit in fits}) == 1
    for step in PUBLIC[name]():
        assert _is_stateless(step, text=True)
        # the searches, which do not check documents, do not take them
        assert not _is_stateless(step)
        assert not keeps_columns([step])  # the width is the vectorizer's


@pytest.mark.parametrize("name", list(LEARNED))
def test_learning_text_steps_are_not_public(name):
    step, _ = LEARNED[name]
    assert not _is_stateless(step, text=True)
    assert not _is_stateless(_Hashing(), text=True)
    # a public vocabulary, but a learned idf: not public
    assert not _is_stateless(TfidfTransformer(use_idf=True), text=True)


def _leak_warnings(steps, X):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make_pipeline(*steps, PrivatePCA(2, data_norm=1.0,
                                         accountant=BudgetAccountant())).fit(X)
    return [str(w.message) for w in caught if w.category is PrivacyLeakWarning
            and "without privacy" in str(w.message)]


@pytest.mark.parametrize("name", list(PUBLIC))
def test_public_text_steps_in_a_pipeline_are_not_warned_of(name):
    assert _leak_warnings(PUBLIC[name](), _corpus()) == []


@pytest.mark.parametrize("name", list(LEARNED))
def test_learning_text_steps_are_warned_of_with_what_leaks_and_what_to_use(name):
    step, leak = LEARNED[name]
    steps = [HashingVectorizer(n_features=2**8), step] if isinstance(
        step, TfidfTransformer) else [step]
    (message,) = _leak_warnings(steps, _corpus())
    assert type(step).__name__ in message and leak in message
    assert "HashingVectorizer(n_features=...)" in message
    assert "vocabulary=PUBLIC_LIST" in message and "use_idf=False" in message
    # not the scalers' advice, which names none of this
    assert "PrivateStandardScaler" not in message
    assert "(means, scales, fills)" not in message


def test_a_text_step_beside_a_scaler_gets_both_advices_and_others_keep_theirs():
    import pandas as pd

    X = pd.DataFrame({"text": _corpus(), "x": np.linspace(0, 1, 120)})
    table = ColumnTransformer([("t", CountVectorizer(), "text"),
                               ("x", StandardScaler(), ["x"])], sparse_threshold=0)
    (message,) = _leak_warnings([table], X)
    assert "which words they hold" in message and "PrivateStandardScaler" in message
    # the other steps' message is the one it was
    (message,) = _leak_warnings([StandardScaler()], np.random.default_rng(0)
                                .uniform(-0.3, 0.3, (100, 3)))
    assert "(means, scales, fills) are exact functions" in message
    assert "text" not in message.lower().replace("context", "")


@pytest.mark.parametrize("step", [HashingVectorizer(n_features=2**6),
                                  CountVectorizer(vocabulary=VOCABULARY),
                                  CountVectorizer()])
def test_searches_refuse_text_steps_before_the_charge(step):
    """The searches take numeric rows, checked before their charge; a text
    step is refused (raw text in a list, or a column of a table), naming
    the way: vectorize outside, search on the CSR rows."""
    import pandas as pd

    budget = BudgetAccountant(10.0, 1e-3)
    table = ColumnTransformer([("t", step, "text")], sparse_threshold=0)
    for steps, X in (([step], _corpus()),
                     ([table], pd.DataFrame({"text": _corpus()}))):
        search = PrivateGridSearchCV(
            make_pipeline(*steps, PrivatePCA(data_norm=1.0)),
            {"privatepca__n_components": [1, 2]}, accountant=budget)
        with pytest.raises(ValueError, match="raw text") as info:
            search.fit(X)
        assert "HashingVectorizer(n_features=...).transform(documents)" in str(
            info.value)
    assert budget.spent == (0.0, 0.0)
    # the way it names: hashed outside, searched on the CSR rows
    rows = HashingVectorizer(n_features=2**6).transform(_corpus())
    PrivateGridSearchCV(PrivatePCA(data_norm=1.0), {"n_components": [1, 2]},
                        accountant=budget).fit(rows)
    assert budget.spent[0] > 0


def test_the_guide_documents_the_text_route_and_its_code_runs():
    """docs/choosing.rst's Text section names the public vectorizers, the
    bound and the search's refusal of raw text; its code runs as shown,
    without a leak warning; docs/privacy.rst lists the public text steps."""
    import re
    import textwrap
    from pathlib import Path

    docs = Path(__file__).resolve().parents[1] / "docs"
    section = (docs / "choosing.rst").read_text().split(
        ".. _text-documents:")[1].split(".. _mixed-scales:")[0]
    for claim in ("HashingVectorizer", "vocabulary=WORDS", "use_idf=False",
                  "raw text is not", "``data_norm=1``", ":math:`\\sqrt d`"):
        assert claim in section, claim
    blocks = [textwrap.dedent(b) for b in re.findall(
        r"::\n\n((?:    .*\n|\n)+)", section)]
    assert len(blocks) == 2
    scope = {"documents": _corpus()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for block in blocks:
            exec(block, scope)  # noqa: S102 - the documentation's own code
    assert not [w for w in caught if w.category is PrivacyLeakWarning]
    assert scope["search"].best_params_["n_components"] in (2, 4, 8)
    privacy = (docs / "privacy.rst").read_text()
    assert "``TfidfTransformer(use_idf=False)``, which learns only" in privacy
