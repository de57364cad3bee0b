"""
Few rows for many features: a random start
==========================================

A private covariance release adds noise to all ``d × d`` entries, and a
row's contribution :math:`x x^\\top` has a norm of about ``d``: below
about :math:`n^* \\approx C^2 \\sqrt{d} / (\\mu s)` rows (``C`` the norm
bound, ``s`` a component's variance) a component does not stand out of
that noise, whatever else one does (:ref:`benchmarks-frontier`). With
``d`` in the hundreds and ``n`` only 10–20 times ``d``, that is every
component.

``CoherentPowerPCA(start="random")`` makes no covariance release. Its
power iterations start from a random basis and release the sums of the
rows each clipped to its direction, whose noise does not grow with
``d``.
Here it fits rows of covariance :math:`I + 10\\, u_1 u_1^\\top + 5\\,
u_2 u_2^\\top` beside :class:`~sklearn_dppca.PrivatePCA`, at ``ε = 1``
and ``δ = 0.01``, as ``n`` grows from 5 to 40 times ``d``.
"""

# %%
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.decomposition import PCA

from sklearn_dppca import (
    BudgetAccountant,
    CoherentPowerPCA,
    NoisyReleaseWarning,
    PrivacyLeakWarning,
    PrivatePCA,
)
from sklearn_dppca.metrics import principal_angle_sin

# Fixed seeds make the figure reproducible and the fits NOT private.
warnings.filterwarnings(
    "ignore", message="random_state=", category=PrivacyLeakWarning
)

d, k = 400, 2
spikes = np.array([10.0, 5.0])
multiples = [5, 10, 20, 40]


def spiked(n, basis, rng):
    """Rows of covariance I + Σ s_j u_j u_jᵀ."""
    X = rng.standard_normal((n, d))
    X += (rng.standard_normal((n, k)) * np.sqrt(spikes)) @ basis.T
    return X


# %%
# A public norm bound
# -------------------
# The bound must not be read from the data: here it is the 99th
# percentile of the row norm *of the model*, simulated from its
# parameters alone (a row's norm does not depend on the basis).
model_rows = spiked(20_000, np.eye(d)[:, :k], np.random.default_rng(1))
bound = float(np.quantile(np.linalg.norm(model_rows, axis=1), 0.99))
print(f"public bound: {bound:.1f} (√d = {np.sqrt(d):.0f})")

# %%
# Fit as n grows
# --------------
rng = np.random.default_rng(0)
basis = np.linalg.qr(rng.standard_normal((d, k)))[0]
makers = {
    "PrivatePCA": lambda: PrivatePCA(k, data_norm=bound),
    'PrivatePCA, "auto" bound': lambda: PrivatePCA(k, data_norm="auto"),
    'CoherentPowerPCA(start="random")': lambda: CoherentPowerPCA(
        k, data_norm=bound, start="random"),
}
errors = {name: [] for name in [*makers, "PCA (not private)"]}
for m in multiples:
    X = spiked(m * d, basis, rng)
    for name, make in makers.items():
        est = make().set_params(epsilon=1.0, delta=0.01, random_state=0,
                                accountant=BudgetAccountant())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", NoisyReleaseWarning)
            est.fit(X)
        sin_theta = principal_angle_sin(est.components_, basis.T)
        errors[name].append(sin_theta)
        if m == 10 and name == "PrivatePCA":
            # what PrivatePCA says of its own release at n = 10 d: its
            # first sentence, and the one that names the random start
            noisy = next(w for w in caught
                         if w.category is NoisyReleaseWarning)
            sentences = str(noisy.message).split(". ")
            print(sentences[0] + ".")
            print(next(s for s in sentences if "start=" in s) + ".")
    pca = PCA(k).fit(X)
    errors["PCA (not private)"].append(
        principal_angle_sin(pca.components_, basis.T))
for name, values in errors.items():
    print(f"{name}: sin θ = " + ", ".join(f"{v:.2f}" for v in values))

# %%
# The subspace error
# ------------------
fig, ax = plt.subplots(figsize=(6.4, 4.2))
for name, values in errors.items():
    style = (dict(linestyle=":", color="gray") if "not private" in name
             else dict(marker="o"))
    ax.plot(multiples, values, label=name, **style)
ax.set_xscale("log")
ax.minorticks_off()
ax.set_xticks(multiples, [f"{m} d" for m in multiples])
ax.set_xlabel(f"n (d = {d})")
ax.set_ylabel("sin θ of the top 2 (0 is exact)")
ax.set_ylim(0, 1.4)  # room for the legend above the curves
ax.set_yticks(np.linspace(0, 1, 6))
ax.set_title("ε = 1, δ = 0.01")
ax.legend(loc="upper right")
fig.tight_layout()
plt.show()

# %%
# At ``n = 5 d`` every private fit is close to a random subspace. From
# ``10 d`` the random start finds the two components first: its noise does
# not grow with ``d``, and PrivatePCA's own warning names it. With many
# rows the covariance release catches up. On coherent data (a few rows
# carrying the subspace) clipping each row to its direction discards what
# those rows carry, and the covariance release does better. So
# ``CoherentPowerPCA()``'s default, ``start="auto"``, takes the random
# start only where public values (``n``, ``d``, ε, δ) say the covariance
# release would be noise (:ref:`coherent-which-start`): here at every
# ``n`` shown.
