"""The memory a search over a Dask array plans before its charge (mend 103)."""

import re
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
import dask  # noqa: E402

from sklearn_dppca import BudgetAccountant, CoherentPowerPCA, PrivatePCA  # noqa: E402
from sklearn_dppca.model_selection import PrivateGridSearchCV  # noqa: E402

N, D, CHUNK = 6_000, 6, 1_000


def _need(error):
    """The most GiB a refusal names as a fit's need."""
    return max(float(gib) for gib in
               re.findall(r"needs about ([0-9.e-]+) GiB", str(error)))


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
