"""The package's own refusals before a charge, marked as such.

An error whose message says that nothing was spent (a memory plan's
refusal, a head's refusal of its labels, an accountant's refusal of a
charge) may be raised by a fit inside a search after the search's charge:
the search then replaces that sentence by one saying the step failed after
its charge (:func:`~sklearn_dppca._search_run.charged_search`). Only the
errors marked here are rewritten: a user's own error text is left as it is
(review 104 F3: a sentence of a user's message was replaced)."""

#: The attribute that marks an error as one of the package's refusals.
_MARK = "_sklearn_dppca_refusal"


def refusal(error):
    """``error``, marked as the package's own refusal before any budget was
    spent (raise ``refusal(MemoryError(...))``)."""
    setattr(error, _MARK, True)
    return error


def is_refusal(error):
    """Whether ``error`` is marked by :func:`refusal`."""
    return getattr(error, _MARK, False) is True
