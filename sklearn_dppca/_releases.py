r"""The releases a fit plans, in the order it makes them: public values only.

A fit's plan (:class:`~sklearn_dppca._base.PrivacyPlan`, with the norm
bounds' :class:`~sklearn_dppca._bounds.BoundsPlan`) is fixed from public
values before any row is read. :meth:`_BasePrivatePCA._releases` lists it
as :class:`Release` records: each release's name, its GDP :math:`\mu`, the
pass over the rows whose statistic it perturbs, how many draws it takes and
the released choice it runs under. The CLI's ``-v`` prints them before the
fit; the tests check that they compose to the charge
(:func:`composed_mu`) and that each is made in the pass it names.

The pass names are the ones :class:`~sklearn_dppca._reported._ReportedPasses`
announces as each pass starts (the constants below), so the plan and the
progress lines cannot drift apart.
"""

import math
from typing import NamedTuple

# What a pass over the rows computes, as announced (public wording only).
MEAN_SUM = "row norms and the clipped sum for the private mean"
FIRST_NORMS = "row norms (every value checked finite)"
GRAM = "Gram matrix of the centred, clipped rows"
CENTRED = "Gram matrix and sum of the rows clipped around the centre"
PILOT_SUM = "row norms and the clipped sum for the centre"
BIN_SUMS = "their sums per bin"
NORMS_AROUND = "row norms around the private mean"
PRODUCTS = "power-method products of the clipped rows"
TRACE = "sum of the squared norms of the clipped rows (the trace)"
ENERGY = ("clipped energy along the initial components (the test that chooses "
          "the branch)")
ENERGY_AND_STEP = ENERGY + " and the first step's " + PRODUCTS


class Release(NamedTuple):
    """One release of a fit, as planned (public values only)."""

    name: str  # its key in the plan's ``mus``, or the norm bounds' step
    mu: float | None  # GDP μ of all its draws together; None: charged in RDP
    reads: str  # the pass whose statistic it perturbs, as announced
    draws: int | None = 1  # None: a number the released values fix
    at_most: bool = False  # ``draws`` is an upper bound (an adaptive stop)
    branch: str | None = None  # the released choice it is made under

    def line(self):
        """One line for the CLI's ``-v``.

        >>> Release("covariance", 1.25, GRAM).line()
        'release covariance: mu=1.25; pass: Gram matrix of the centred, clipped rows'
        """
        mu = "charged in Renyi DP" if self.mu is None else f"mu={self.mu:.4g}"
        draws = ("" if self.draws == 1 else " in a secret number of draws"
                 if self.draws is None else
                 f" in {'at most ' if self.at_most else ''}{self.draws} draws")
        branch = "" if self.branch is None else f" (if {self.branch})"
        return f"release {self.name}{branch}: {mu}{draws}; pass: {self.reads}"


def composed_mu(releases):
    r"""The GDP :math:`\mu` the releases compose to along the costliest
    branch: :math:`\sqrt{\sum \mu^2}` over those made whatever is released,
    plus the largest sum over one branch (the branches are alternatives).
    ``None`` when any release is charged in Rényi DP."""
    if any(r.mu is None for r in releases):
        return None
    always, branches = 0.0, {}
    for r in releases:
        if r.branch is None:
            always += r.mu**2
        else:
            branches[r.branch] = branches.get(r.branch, 0.0) + r.mu**2
    return math.sqrt(always + max(branches.values(), default=0.0))
