"""Categorical columns encoded privately: with a public list of categories
(review 90 F1). The refusal of text columns names that way, never the
default encoder, whose categories are learned from the rows."""

import numpy as np
import pandas as pd
import pytest

from sklearn_dppca import PrivatePCA


def _survey(n=200, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"age": rng.integers(18, 90, n) / 90,
                         "region": rng.choice(["N", "S", "E"], n)})


@pytest.mark.parametrize("kind", ["frame", "array"])
def test_text_refusal_names_a_private_encoding(kind):
    X = _survey()
    if kind == "array":
        X = X.to_numpy(dtype=object)
    with pytest.raises(ValueError) as info:
        PrivatePCA(2, data_norm=2.0).fit(X)
    message = str(info.value)
    # the public list of categories, with unknown values ignored
    assert "OneHotEncoder(categories=[PUBLIC_LIST], handle_unknown='ignore')" \
        in message
    assert "pd.Categorical(column, categories=PUBLIC_LIST)" in message
    # the default is named only as what leaks, never as the advice
    assert "for instance with sklearn.preprocessing.OneHotEncoder" not in message
    assert "categories='auto')" in message and "not private" in message
