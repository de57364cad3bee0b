"""
One budget for a whole grid search
==================================

Tune the number of private components of a
:class:`~sklearn.pipeline.Pipeline` (``PrivatePCA`` then a classifier) with
:class:`~sklearn.model_selection.GridSearchCV`, charging every fit to one
shared :class:`~sklearn_dppca.BudgetAccountant`, and read what the search
was charged.
"""

# %%
# The pipeline and the budget
# ---------------------------
# The accountant is a parameter of :class:`~sklearn_dppca.PrivatePCA`. It is
# *shared*, not copied, when GridSearchCV clones the pipeline for each
# candidate and fold, so every fit the search makes is charged to it. Each
# fit is checked against the budget before it reads the data.
#
# Only the PCA step is private. The classifier is trained on the projected
# rows and their labels without noise, and the cross-validation scores —
# hence the chosen ``n_components`` — read the data too: the ε below
# covers what the PCA fits release, not the classifier or the scores.
import math
import textwrap
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import make_pipeline

from sklearn_dppca import (
    BudgetAccountant,
    BudgetExceededError,
    PrivacyLeakWarning,
    PrivatePCA,
)
from sklearn_dppca.datasets import load_digits_for_pca
from sklearn_dppca.privacy import gdp_epsilon, gdp_mu

# The fixed seed makes the example reproducible and the fits NOT
# private.
warnings.filterwarnings(
    "ignore", message="random_state=", category=PrivacyLeakWarning
)

digits = load_digits_for_pca()
X_train, X_test, y_train, y_test = train_test_split(
    digits.data, digits.target, random_state=0
)

budget = BudgetAccountant(epsilon=6.0, delta=1e-6)
pipe = make_pipeline(
    PrivatePCA(epsilon=1.0, delta=1e-6, data_norm=4.0,
               accountant=budget, random_state=0),
    LogisticRegression(max_iter=1000),
)
param_grid = {"privatepca__n_components": [5, 10, 20, 30]}

# %%
# Plan the cost before searching
# ------------------------------
# A search makes ``n_candidates × n_splits`` fits plus one refit of the best
# candidate on the whole training set: here ``4 × 3 + 1 = 13`` fits at ε = 1.
# Fits compose exactly in Gaussian DP (their GDP parameters ``μ`` add in
# squares), so 13 fits cost far less than ε = 13. Checking the whole plan
# first means the search is not refused halfway, after spending.
n_fits = len(param_grid["privatepca__n_components"]) * 3 + 1
mu_fit = gdp_mu(1.0, 1e-6)
# raises BudgetExceededError if over the budget
planned, _ = budget.check(mu=math.sqrt(n_fits) * mu_fit)
print(f"{n_fits} fits at epsilon=1 would spend epsilon={planned:.3f} "
      "in total")

# %%
# Search
# ------
# ``error_score="raise"``: with scikit-learn's default (``nan``) a refused
# fit would only be a warning inside the search. This in-memory accountant
# needs ``n_jobs=1`` (or a threading backend): a copy of it in another
# process cannot report back, and refuses to be charged. For ``n_jobs=-1``,
# keep the budget on a ledger file,
# ``BudgetAccountant(3.0, path="budget.db")``: every worker process then
# charges the same file.
search = GridSearchCV(pipe, param_grid, cv=3, error_score="raise")
search.fit(X_train, y_train)

eps_spent, delta_spent = budget.spent
print(f"charged fits: {budget.n_charges}")
print(f"spent: epsilon={eps_spent:.3f}, delta={delta_spent:g} "
      f"(budget epsilon={budget.epsilon:g}; "
      f"naive sum would be {n_fits:g})")
print(f"left for one more fit: epsilon={budget.remaining():.3f}")
print("best:", search.best_params_,
      f"test accuracy {search.score(X_test, y_test):.3f}")

# %%
# Each fit warns, with a ``NoisyReleaseWarning``, that none of its components
# stands out of the noise: at ε = 1 on a fold's 898 rows (and the refit's
# 1 347), with ``data_norm=4``, the components are close to random directions.
# The accuracy above is that of the non-private classifier trained on up to
# 30 random projections of the digits, which keep much of what separates
# them; it says little of what the PCA learned. A larger ε, or rows scaled
# to a tighter bound, give components that carry the data's structure (the
# :ref:`privacy-utility example <sphx_glr_auto_examples_plot_privacy_utility.py>`),
# and :class:`~sklearn_dppca.model_selection.PrivateGridSearchCV` with a
# private head makes the scores and the choice private too.

# %%
# A second search does not fit
# ----------------------------
# The same search again would bring the total to 26 fits, ε ≈ 6.06 > 6: the
# plan is refused before anything is fitted, and nothing is charged. (Without
# the check, the search would have run until its first refused fit, and the
# fits before it would have been charged.)
try:
    budget.check(mu=math.sqrt(n_fits) * mu_fit)
except BudgetExceededError as exc:
    print("refused:", textwrap.fill(str(exc), width=72))
print("still charged:", budget.n_charges, "fits")

# %%
# What the search was charged, and what it found
# ----------------------------------------------
fits = np.arange(0, 2 * n_fits + 1)
exact = [gdp_epsilon(math.sqrt(j) * mu_fit, 1e-6) if j else 0.0
         for j in fits]

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
ax1.plot(fits, fits * 1.0, ":", color="gray", label="naive sum of ε")
ax1.plot(fits, exact, "-", label="exact composition (GDP)")
ax1.axhline(budget.epsilon, color="C3", linestyle="--",
            label="budget ε = 6")
ax1.plot([budget.n_charges], [eps_spent], "o", color="C0",
         label=f"after the search: {budget.n_charges} fits, "
         f"ε = {eps_spent:.2f}")
ax1.set_xlabel("number of fits at ε = 1 charged to the accountant")
ax1.set_ylabel("ε spent (δ = 1e-6)")
ax1.set_ylim(0, 10)
ax1.legend(loc="upper left")
ax1.set_title("The budget")

ks = param_grid["privatepca__n_components"]
mean = search.cv_results_["mean_test_score"]
sd = search.cv_results_["std_test_score"]
ax2.errorbar(ks, mean, yerr=sd, marker="o", capsize=3,
             label="cross-validated accuracy")
ax2.plot([search.best_params_["privatepca__n_components"]],
         [search.score(X_test, y_test)], "s", color="C2",
         label="refit best, held-out accuracy")
ax2.set_xlabel("n_components of PrivatePCA (ε = 1 each)")
ax2.set_ylabel("accuracy")
ax2.set_title("The search")
ax2.legend(loc="lower right")
fig.tight_layout()
plt.show()
