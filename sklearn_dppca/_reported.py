"""The fit's passes over the rows as a ``progress`` hook sees them: an
engine wrapped so that each pass is announced as it starts, with public
words only (what the pass computes), and a Dask pass's partitions counted
(the CLI's :class:`~sklearn_dppca._cli_progress.PassProgress`).
"""

from ._releases import (
    CENTRED,
    ENERGY,
    ENERGY_AND_STEP,
    FIRST_NORMS,
    GRAM,
    MEAN_SUM,
    PRODUCTS,
    TRACE,
)


class _ReportedPasses:
    """``data`` (InMemoryRows, ChunkedRows, ...) announcing each pass to ``progress``.

    Each pass is announced as it starts, ``progress("pass K: <what>")``, K
    counting from 1: a one-line string of public values only, what the pass
    computes. The passes themselves are fixed by the public parameters
    (``data_norm``, ``center``, a box) and by released values (the steps of
    ``data_norm="auto"``'s private mean, a far mean moved to, a branch of
    ``CoherentPowerPCA``), so their sequence reveals nothing more.

    Optional hooks of ``progress``, outside the estimators' API (the CLI's):

    - ``progress.partitions(done, total)``: each Dask pass's partitions done
      (see :func:`~sklearn_dppca._dask.reporting_partitions`). A Dask pass
      that starts unannounced (a step that reads rows this wrapper no longer
      holds) is announced then, as "a pass over the rows": on Dask every pass
      is one reduction, so every one is counted.
    - ``progress.planned(releases)``: before the first pass, the fit's
      planned releases (:class:`~sklearn_dppca._releases.Release`: each
      one's name, GDP μ, draws, branch and the pass it perturbs), public
      values only.
    - ``progress.finished(passes, exact)``: at the end of the fit, the number
      of passes announced, and whether that is all of them. It is not when
      the estimator's passes are ``hidden``
      (``CoherentPowerPCA(selection="repetition")``: their number would tell
      the number of trials, which stays secret; they are announced once,
      without a number, and their partitions are not reported).
    """

    def __init__(self, data, progress, hidden=None):
        self._data = data
        self.engine = data  # what norm bounds compute their statistics on
        self._progress = progress
        self._partitions = getattr(progress, "partitions", None)
        self._hidden = hidden  # why the rows' passes are not reported, or None
        self._hiding = False
        self.passes = 0
        self._fresh = False  # a pass announced whose partitions have not started

    def _say(self, what):
        if self._hiding:
            return
        self.passes += 1
        self._fresh = True
        self._progress(f"pass {self.passes}: {what}")

    def partitions(self, done, total):
        """A Dask pass's partitions done (``done = 0``: it starts)."""
        if self._hiding:
            return
        if done == 0:
            if not self._fresh:
                self._say("a pass over the rows")
            self._fresh = False
        if self._partitions is not None:
            self._partitions(done, total)

    def rebind(self, data):
        """This wrapper, now over ``data`` (the rows the norm bounds made: in
        the box, or moved to a far mean; they announce their copy)."""
        self._data = self.engine = data
        return self

    def finish(self):
        finished = getattr(self._progress, "finished", None)
        if finished is not None:
            finished(self.passes, not self._hiding)

    def announce(self, what):
        """A pass of a step outside this interface (the norm bounds)."""
        self._say(what)

    def plan(self, releases):
        """The fit's planned releases (:class:`~sklearn_dppca._releases.Release`,
        public values only), told before the first pass."""
        planned = getattr(self._progress, "planned", None)
        if planned is not None:
            planned(releases)

    def largest_norm(self):
        self._say("largest row norm (data_norm from the data)")
        return self._data.largest_norm()

    def first_pass(self, data_norm, with_sum):
        self._say(MEAN_SUM if with_sum else FIRST_NORMS)
        return self._data.first_pass(data_norm, with_sum)

    def gram(self, data_norm, mean):
        self._say(GRAM)
        return self._data.gram(data_norm, mean)

    def centred(self, data_norm, centre):
        self._say(CENTRED + ("" if self.passes else " (every value checked finite)"))
        return self._data.centred(data_norm, centre)

    def announce_part(self, what):
        """A step that reads only some of the rows (the pilot's): said, not
        counted as a pass over the rows, nor its partitions as a pass's."""
        if not self._hiding:
            self._progress(what)
            self._fresh = True

    def rows(self, data_norm, mean):
        return _ReportedRows(self._data.rows(data_norm, mean), self)

    def hide(self):
        """From now on, passes are neither numbered nor reported (said once)."""
        if not self._hiding:
            self._progress(f"pass {self.passes + 1} and on: {self._hidden}")
            self._hiding = True


class _ReportedRows:
    """The centred rows of ``_release`` (``CentredRows``, ``DaskCentredRows``),
    each of their passes announced by ``passes`` (a :class:`_ReportedPasses`)."""

    def __init__(self, rows, passes):
        self._rows = rows
        self._passes = passes

    def __getattr__(self, name):  # data_norm, mean, ...
        return getattr(self._rows, name)

    def _pass(self, what):
        if self._passes._hidden is not None:
            self._passes.hide()
        else:
            self._passes.announce(what)

    def clipped_products(self, *args, **kwargs):
        self._pass(PRODUCTS)
        return self._rows.clipped_products(*args, **kwargs)

    def sq_norm_sum(self):
        self._pass(TRACE)
        return self._rows.sq_norm_sum()

    def energy_then_products(self, *args, **kwargs):
        fused = self._rows.fuses_first_step
        self._pass(ENERGY_AND_STEP if fused else ENERGY)
        energy, products = self._rows.energy_then_products(*args, **kwargs)
        if fused:
            return energy, products

        def announced():
            self._pass(PRODUCTS)
            return products()

        return energy, announced

    def clipped_energy(self, *args, **kwargs):
        self._pass(ENERGY)
        return self._rows.clipped_energy(*args, **kwargs)


def _engine(data):
    """The rows' engine itself, under the CLI's progress wrapper if any."""
    return getattr(data, "engine", data)


def _rebound(data, rows):
    """``rows`` (an engine) under ``data``'s progress wrapper, if it has one,
    so that the passes over the new rows are announced as the old ones'."""
    rebind = getattr(data, "rebind", None)
    return rows if rebind is None else rebind(rows)


def _announce(data, what):
    """Tell the CLI's progress wrapper, if any, that a pass ``what`` starts
    (public words only: what the pass computes)."""
    announce = getattr(data, "announce", None)
    if announce is not None:
        announce(what)
