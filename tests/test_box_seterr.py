"""A box with a bound at 0 under ``np.seterr(all="raise")`` (review 115 F1)."""

import numpy as np
import pytest

from sklearn_dppca import BudgetAccountant, PrivatePCA


@pytest.mark.parametrize("bounds", [(0.0, 1.0), (-1.0, 0.0)])
def test_box_at_zero_fits_under_seterr_raise(bounds):
    # the inward rounding's nextafter(0, ±inf) is subnormal: an underflow
    # by design, which must not fail a fit on a public box
    X = np.random.default_rng(0).random((300, 3)) - 0.5
    accountant = BudgetAccountant()
    with np.errstate(all="raise"):
        model = PrivatePCA(2, bounds=bounds, accountant=accountant).fit(X)
    assert model.components_.shape == (2, 3)
    assert len(accountant.charges) == 1
