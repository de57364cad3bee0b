"""
A private classifier, its n_components chosen privately
========================================================

Scale, reduce with :class:`~sklearn_dppca.PrivatePCA`, classify with
:class:`~sklearn_dppca.linear_model.PrivateLDA`, and choose
``n_components`` by cross-validated accuracy with
:class:`~sklearn_dppca.model_selection.PrivateGridSearchCV`: every fold
fit, every score, the choice and the refit are private, under one
charge.
The accuracy on held-out rows is shown against ε beside the same
pipeline without privacy.
"""

# %%
# The pipeline
# ------------
# Every fitted step is private: the PCA, and the head, whose fit reads
# the rows *and the labels*. The scaler maps the public pixel range
# (0 to 16) and learns nothing. The heads need public bounds:
# ``data_norm`` for their input rows and, for the classifier, the labels
# it may meet (``classes``). The PCA's bound is the radius of the unit
# box around its centre (sqrt(64)/2 = 4). With ``whiten="partial"`` the
# head sees each component's score over the fourth root of its released
# variance times the total one: dimensionless rows, for which a bound of
# 1 suits any data, and whose weak components the head's noise no longer
# drowns.
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.pipeline import Pipeline

from sklearn_dppca import (
    BudgetAccountant,
    PrivacyLeakWarning,
    PrivatePCA,
)
from sklearn_dppca.linear_model import PrivateLDA
from sklearn_dppca.model_selection import PrivateGridSearchCV
from sklearn_dppca.preprocessing import PublicScaler

# The fixed seeds make the example reproducible and the fits NOT
# private.
warnings.filterwarnings("ignore", category=PrivacyLeakWarning)

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(
    X, y, test_size=0.25, random_state=0
)

pipe = Pipeline([
    ("scale", PublicScaler(ranges=(0, 16))),
    ("pca", PrivatePCA(data_norm=4.0, whiten="partial")),
    ("lda", PrivateLDA(classes=list(range(10)), data_norm=1.0)),
])
grid = {"pca__n_components": [5, 10, 20, 30]}

# %%
# The private search, at several budgets
# --------------------------------------
# ``epsilon`` is the budget of the *whole* search: 4 candidates on 3
# folds, their noisy accuracies, and the refit of the best on all rows.
epsilons = [1.0, 3.0, 10.0, 30.0]
seeds = range(3)
accuracy = np.empty((len(epsilons), len(seeds)))
for i, eps in enumerate(epsilons):
    for j in seeds:
        search = PrivateGridSearchCV(
            pipe, grid, cv=3, epsilon=eps, random_state=j,
            accountant=BudgetAccountant(),
        ).fit(X_train, y_train)
        accuracy[i, j] = search.score(X_test, y_test)
        k = search.best_params_["pca__n_components"]
        print(f"epsilon={eps:g} seed {j}: n_components={k}, "
              f"test accuracy {accuracy[i, j]:.3f}")

# %%
# Without privacy
# ---------------
# The same pipeline, scikit-learn's own PCA and discriminant, and its
# exact grid search.
exact = GridSearchCV(
    Pipeline([("scale", PublicScaler(ranges=(0, 16))), ("pca", PCA()),
              ("lda", LinearDiscriminantAnalysis())]),
    grid, cv=3,
).fit(X_train, y_train)
best_k = exact.best_params_["pca__n_components"]
reference = exact.score(X_test, y_test)
print(f"without privacy: n_components={best_k}, "
      f"test accuracy {reference:.3f}")

fig, ax = plt.subplots(figsize=(6, 4))
ax.errorbar(epsilons, accuracy.mean(axis=1), yerr=accuracy.std(axis=1),
            marker="o", capsize=3, label="private search, all steps")
ax.axhline(reference, color="grey", linestyle="--",
           label="without privacy")
ax.set_xscale("log")
ax.set_xlabel("epsilon of the whole search (delta = 1e-6)")
ax.set_ylabel("test accuracy (digits)")
ax.set_ylim(0, 1)
ax.legend(loc="lower right")
fig.tight_layout()
plt.show()

# %%
# What was released, and what was not
# -----------------------------------
# ``search.cv_results_`` holds each candidate's *noisy* accuracy over the
# validation rows of all folds pooled (one release per search: less noise
# than one per fold), and ``search.best_estimator_`` the refitted pipeline.
# scikit-learn's ``GridSearchCV`` and ``cross_val_score`` would return exact
# accuracies of the validation rows: a head scored by them warns
# (``PrivacyLeakWarning``). For cross-validation scores alone, use
# :func:`~sklearn_dppca.model_selection.private_cross_val_score`.
