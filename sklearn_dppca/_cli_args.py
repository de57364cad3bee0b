"""The ``dppca`` command's argument parser class and the types of its
options: numbers in a range, ``auto`` or a number, ``n_components``."""

import argparse
import re

import numpy as np

#: What argparse reads as a negative number rather than an option: its own
#: ``-3`` and ``-.5``, and the exponent form ``-1e3`` and ``-inf`` it reads
#: as options (``--bounds -inf inf`` then said "expected an argument").
NEGATIVE_NUMBER = re.compile(
    r"^-((\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|inf(inity)?)$", re.IGNORECASE)


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, like every other error; a negative number
    in exponent form (``--bounds -1e3 1e3``) is a value, as ``-1000`` is."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE_NUMBER

    def error(self, message):
        self.exit(2, f"dppca: error: {message} (see '{self.prog} --help')\n")


def _n_components(text):
    try:
        value = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            value = None
    if value is None or not (
        value >= 1 if isinstance(value, int) else 0.0 < value < 1.0
    ):
        raise argparse.ArgumentTypeError(
            f"must be an integer >= 1, or a fraction in (0, 1) of the variance "
            f"to keep, got {text!r}"
        )
    return value


def _number(kind, low, high=None, closed_low=False, what="number"):
    """An argparse type: a finite ``kind`` in (low, high), ``[low`` if closed."""

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            value = None
        ok = value is not None and np.isfinite(value) and (
            value >= low if closed_low else value > low
        ) and (high is None or value < high)
        if not ok:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value

    parse.__name__ = parse.what = what
    return parse


_positive = _number(float, 0.0, what="a positive number")


_finite = _number(float, -np.inf, what="a finite number")


_probability = _number(float, 0.0, 1.0, what="a number in (0, 1)")


_count = _number(int, 1, closed_low=True, what="an integer >= 1")


_seed = _number(int, 0, closed_low=True, what="an integer >= 0")


def _word_or(word, kind):
    """An option type taking ``word`` as it is, or a value of ``kind``."""
    def parse(text):
        if text == word:
            return text
        try:
            return kind(text)
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(
                f"must be '{word}' or {kind.what}, got {text!r}"
            ) from None

    parse.__name__ = f"'{word}' or {kind.what}"
    return parse


def _auto_or(kind):
    return _word_or("auto", kind)


def _mid_or(kind):
    return _word_or("mid", kind)
