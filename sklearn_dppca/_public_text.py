"""Text vectorizers whose fitted state is a function of their parameters
only: public maps of each document, like the stateless steps (review 99 F1).

scikit-learn's ``HashingVectorizer`` learns nothing: its ``fit`` validates
its parameters, and each document's row is a fixed function of that
document (its width is ``n_features``). A ``CountVectorizer`` or a
``TfidfVectorizer`` given a ``vocabulary`` keeps it as its
``vocabulary_`` (``min_df``, ``max_df`` and ``max_features`` are then
ignored: scikit-learn prunes a learned vocabulary only), and its width is
``len(vocabulary)``; with ``use_idf=False`` no ``idf_`` is learned, and a
``TfidfTransformer(use_idf=False)`` learns only its input's width. Each is
matched by its exact class: a subclass may learn in ``fit``. A callable
``analyzer``, ``tokenizer`` or ``preprocessor`` must be a fixed function
of each document, as a ``FunctionTransformer``'s ``func`` must.

Without a vocabulary, a vectorizer learns which words the documents hold
(its ``vocabulary_``, its width, its feature names); with ``use_idf=True``
it learns ``idf_``, each word's document frequency: both exact functions
of the rows, released through the next step's width and output.
"""


def is_public_text(step):
    """A text vectorizer whose fitted state is public (module docstring):
    ``HashingVectorizer`` (any parameters), ``CountVectorizer`` with a
    ``vocabulary``, ``TfidfVectorizer`` with a ``vocabulary`` and
    ``use_idf=False``, ``TfidfTransformer(use_idf=False)``; exact classes."""
    from sklearn.feature_extraction.text import (
        CountVectorizer,
        HashingVectorizer,
        TfidfTransformer,
        TfidfVectorizer,
    )

    kind = type(step)
    if kind is HashingVectorizer:
        return True
    if kind is TfidfTransformer:
        return step.use_idf is False
    if kind is CountVectorizer or kind is TfidfVectorizer:
        return step.vocabulary is not None and (
            kind is CountVectorizer or step.use_idf is False)
    return False


def learned_text(step):
    """What a text step that is not public learns from the documents
    (``"vocabulary"``, ``"idf"``), as a set, searched through a
    ``ColumnTransformer``; empty for any other step."""
    from sklearn.compose import ColumnTransformer
    from sklearn.feature_extraction.text import (
        CountVectorizer,
        TfidfTransformer,
        TfidfVectorizer,
    )

    if isinstance(step, ColumnTransformer):
        parts = [t for _, t, _ in step.transformers] + [step.remainder]
        return set().union(*(learned_text(t) for t in parts))
    learned = set()
    if isinstance(step, CountVectorizer) and step.vocabulary is None:
        learned.add("vocabulary")
    if isinstance(step, (TfidfVectorizer, TfidfTransformer)) and step.use_idf:
        learned.add("idf")
    return learned


def text_leak_advice(learned):
    """The warning's sentences for text steps that learn ``learned``
    (:func:`learned_text`): what leaks, and the public steps to use."""
    leaks = []
    if "vocabulary" in learned:
        leaks.append(
            "a vectorizer without a vocabulary learns it from the documents: "
            "which words they hold, and how many (its size is the width the "
            "next step reads and releases, its words the feature names)")
    if "idf" in learned:
        leaks.append(
            "use_idf=True learns idf_, each word's document frequency, which "
            "weighs every row the next step reads")
    return (
        "For text, " + "; ".join(leaks) + ". Use HashingVectorizer("
        "n_features=...) (it learns nothing; a small n_features keeps the "
        "noise low), or a public vocabulary: CountVectorizer(vocabulary="
        "PUBLIC_LIST) or TfidfVectorizer(vocabulary=PUBLIC_LIST, "
        "use_idf=False), and TfidfTransformer(use_idf=False).")


#: Where a search's text comes from: a public vectorizer, outside it.
TEXT_OUTSIDE = (
    "Vectorize the documents outside the search with a step that learns "
    "nothing, HashingVectorizer(n_features=...).transform(documents) or "
    "CountVectorizer(vocabulary=PUBLIC_LIST) (TfidfVectorizer with "
    "use_idf=False), and search on the CSR rows it makes (with norm='l2', "
    "data_norm=1).")
