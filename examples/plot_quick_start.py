"""
Quick start: private PCA of the digits
======================================

Project scikit-learn's handwritten digits (1797 images of 8×8 pixels) on two
principal components, once with scikit-learn's non-private
:class:`~sklearn.decomposition.PCA` and twice with
:class:`~sklearn_dppca.PrivatePCA`, and compare the pictures.
"""

# %%
# The data and a public norm bound
# --------------------------------
# Every pixel lies in the public range ``[0, 16]``, so dividing by 16 puts
# each image in ``[0, 1]^64``: a scale chosen without looking at the data.
# The norm bound ``data_norm`` must be public too. ``√64 = 8`` never clips a
# row, but the noise grows with ``data_norm²``. A handwritten digit lights up
# roughly a quarter of its 64 pixels, which gives the public guess
# ``data_norm = √16 = 4``: the densest images are clipped (a small bias), and
# the noise is four times smaller than with 8.
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.decomposition import PCA

from sklearn_dppca import (
    BudgetAccountant,
    PrivacyLeakWarning,
    PrivatePCA,
)
from sklearn_dppca.datasets import load_digits_for_pca
from sklearn_dppca.metrics import captured_variance

# The fixed seeds below make the figures reproducible and the fits NOT
# private; silence only that warning. Leave random_state=None for real
# data.
warnings.filterwarnings(
    "ignore", message="random_state=", category=PrivacyLeakWarning
)

digits = load_digits_for_pca()
X, y = digits.data, digits.target
print(f"{X.shape[0]} images of {X.shape[1]} pixels, "
      f"in [{X.min():g}, {X.max():g}]")

# %%
# Fit under one budget
# --------------------
# A :class:`~sklearn_dppca.BudgetAccountant` holds the total budget; every
# fit is charged to it before it reads the data, and the fits compose
# exactly (two fits at ε = 1 and ε = 3 spend less than ε = 4 together).
budget = BudgetAccountant(epsilon=4.0, delta=1e-6)
reference = PCA(n_components=2).fit(X)
cov = np.cov(X, rowvar=False)

fits = {}
for epsilon in [3.0, 1.0]:
    pca = PrivatePCA(
        n_components=2,
        epsilon=epsilon,
        delta=1e-6,
        data_norm=4.0,
        accountant=budget,
        random_state=0,
    )
    fits[epsilon] = pca.fit(X)
    share = captured_variance(pca.components_, cov)
    eps_fit, delta_fit = pca.privacy_spent_
    print(
        f"epsilon={epsilon:g}: spent ({eps_fit:g}, {delta_fit:g}), "
        f"captures {share:.0%} of the best 2-D variance"
    )
eps_spent, delta_spent = budget.spent
print(f"both fits spent epsilon={eps_spent:.3f} at "
      f"delta={delta_spent:g} of the budget epsilon={budget.epsilon:g}")

# %%
# Compare the projections
# -----------------------
# The sign of each principal axis is arbitrary; for the comparison only, each
# private axis is flipped to point like the non-private one. The private
# projections are offset too: the private mean is the mean of the *clipped*
# rows, and it carries noise.
panels = [("PCA (not private)", reference)] + [
    (f"PrivatePCA, ε = {eps:g}", est) for eps, est in fits.items()
]
fig, axes = plt.subplots(1, 3, figsize=(12, 4.2), sharex=True,
                         sharey=True)
for ax, (title, est) in zip(axes, panels):
    agreement = np.sum(est.components_ * reference.components_, axis=1)
    signs = np.sign(agreement)
    Z = est.transform(X) * signs
    points = ax.scatter(Z[:, 0], Z[:, 1], c=y, cmap="tab10", s=6,
                        alpha=0.8)
    share = captured_variance(est.components_, cov)
    ax.set_title(f"{title}\ncaptured variance {share:.0%}")
    ax.set_xlabel("component 1")
axes[0].set_ylabel("component 2")
fig.colorbar(points, ax=axes, label="digit", ticks=range(10))
plt.show()

# %%
# With ε = 3 the digits form the same clusters as without privacy. With
# ε = 1 on only 1797 images the noise starts to turn the plane: private PCA
# needs more rows, or a larger ε, for the same picture. See
# :ref:`sphx_glr_auto_examples_plot_privacy_utility.py` for the whole curve,
# and how the choice of ``data_norm`` moves it.
