"""The progress of ``dppca fit``'s passes over the rows, on standard error.

:class:`PassProgress` is the ``progress`` hook of the estimators' ``_fit``
(see ``_reported._ReportedPasses``): told as each pass starts ("pass K: what"),
as each partition of a Dask pass is done, and at the end how many passes
there were. What it prints is a function of public values only: the pass
numbers and descriptions (fixed by the parameters and released values), and
the count of partitions done out of their number (which the files fix).
No time, rate or duration is printed: those depend on the data.

- With ``-v``: before the fit, a line per planned release (its μ, its draws
  and the pass it perturbs); a line per pass as it starts; for a Dask pass,
  its partitions done. On a terminal, one bar redrawn in place, ended by a
  newline when the pass is done; elsewhere (a log, a pipe, the tests), plain
  lines at each quarter of the partitions (the same lines whatever the
  timing).
- Without ``-v``, on a terminal: one bar for the current Dask pass, redrawn
  in place and cleared at the end. Elsewhere, nothing.
- ``-q``: nothing.
"""

import math
import shutil
import sys

_BAR_WIDTH = 20


class PassProgress:
    """The CLI's ``progress`` for ``estimator._fit(X, progress=...)``.

    Parameters
    ----------
    verbose : bool
        ``-v``: a line per pass, and the partitions' progress.
    quiet : bool
        ``-q``: print nothing (the passes are still counted).
    stream : file, default=sys.stderr
    tty : bool or None
        Whether ``stream`` is a terminal (``None``: ask it).
    partitions : bool, default=True
        Whether the partitions done are shown: not where their number is not
        public (uncompressed CSV files, which Dask cuts by bytes).

    Attributes
    ----------
    passes : int or None
        Once the fit is done: the passes counted.
    exact : bool or None
        Whether ``passes`` is all of them.
    """

    def __init__(self, verbose, quiet, stream=None, tty=None, partitions=True):
        self.stream = sys.stderr if stream is None else stream
        if tty is None:
            isatty = getattr(self.stream, "isatty", None)
            tty = bool(isatty and isatty())
        self.lines = bool(verbose) and not quiet
        self.bar = tty and not quiet
        self._counted = partitions
        self.passes = None
        self.exact = None
        self._pass = None  # "pass K: what" of the current pass
        self._marks = ()  # the counts of partitions that print a line
        self._drawn = False  # a bar drawn and not yet ended

    def _print(self, message):
        self._end_bar()
        print(f"dppca: {message}", file=self.stream, flush=True)

    def __call__(self, message):
        """A pass starts: ``message`` is ``"pass K: what"``."""
        self._end_bar()
        self._pass = message
        if self.lines:
            self._print(message)

    def planned(self, releases):
        """Before the first pass, with ``-v``: the fit's planned releases, one
        line each (their GDP μ and the pass each perturbs)."""
        if self.lines:
            for release in releases:
                self._print(release.line())

    def partitions(self, done, total):
        """``done`` of the ``total`` partitions of the current pass are done."""
        if not self._counted:
            return
        if done == 0:
            self._marks = {math.ceil(total * q / 4) for q in (1, 2, 3, 4)}
        if self.bar:
            self._draw(done, total)
        elif self.lines and done in self._marks:
            self._print(f"{self._label()}: {done}/{total} partitions")

    def finished(self, passes, exact):
        """The fit has read the rows in ``passes`` passes (all, if ``exact``)."""
        self._end_bar()
        self.passes, self.exact = passes, exact

    def summary(self):
        """"read the rows in N passes", or None before the fit is done."""
        if self.passes is None:
            return None
        plural = "" if self.passes == 1 else "es"
        if self.exact:
            return f"read the rows in {self.passes} pass{plural}"
        return (f"read the rows in at least {self.passes} pass{plural} (not all "
                "were counted)")

    def close(self):
        """End a bar still drawn (a pass that failed)."""
        self._end_bar()

    # ------------------------------------------------------------ the bar
    def _label(self):
        """``"pass K"`` of the current pass."""
        return (self._pass or "pass").split(":")[0]

    def _draw(self, done, total):
        filled = _BAR_WIDTH * done // total
        bar = f"[{'#' * filled}{'-' * (_BAR_WIDTH - filled)}] {done}/{total} partitions"
        # with -v the pass's line is above; without, name it here
        text = f"dppca: {self._label() if self.lines else self._pass or 'pass'}"
        width = shutil.get_terminal_size().columns - 1
        room = width - len(bar) - 2
        if len(text) > room:
            text = text[: max(room - 3, 0)] + "..."
        self.stream.write(f"\r\033[K{text}: {bar}")
        self.stream.flush()
        self._drawn = True
        if done == total and self.lines:  # with -v, each pass's bar stays
            self.stream.write("\n")
            self._drawn = False

    def _end_bar(self):
        if self._drawn:
            # with -v, the bar of an unfinished pass (an error) stays
            self.stream.write("\n" if self.lines else "\r\033[K")
            self.stream.flush()
            self._drawn = False
