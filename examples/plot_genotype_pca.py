r"""
Population structure from genotypes, privately
==============================================

Principal components of a genotype matrix (one row per person, one column
per genetic variant, the values 0, 1 or 2 copies of the minor allele) show
the populations the people come from: the classic use of PCA on data about
people that must not leak any one row.

Here :func:`~sklearn_dppca.datasets.make_genotypes` simulates 20 000 people
from three populations (Balding–Nichols model, ``F_ST = 0.05``) at 1 000
variants, and :class:`~sklearn_dppca.PrivatePCA` at ``ε = 1`` is compared
with scikit-learn's non-private PCA. The norm bound is public: the
generator computes it from the model's parameters, not from the draw.
With more variants than 1 000, ``svd_solver="auto"`` takes the randomized
top ``k`` of the released covariance, as scikit-learn's rule does
(post-processing, at no cost in budget); the covariance itself is a
``d × d`` release, so its memory grows as ``d²``.

The populations separate here because there are enough people for this
many variants. A covariance release shows a direction of the data only when
``n`` exceeds :math:`n^* = C^2 \sqrt{d} / (\mu s)` (:ref:`the threshold
<benchmarks-frontier>`, "Why every estimator here is a random subspace"):
with the bound :math:`C^2 \approx 0.9 d`, the covariance's share
:math:`\mu = 0.225` of ``ε = 1`` and the populations' variance along their
axes :math:`s \approx 0.012 d` (``F_ST = 0.05``, three populations),
:math:`n^* \approx 300 \sqrt{d}`: about 10 900 people at 1 000 variants.
At 20 000 people (1.8 :math:`n^*`) the top two's ``sin θ`` is about
:math:`n^*/n` (0.55 predicted, 0.58 measured) and the populations are
apart; at 10 000 people (below :math:`n^*`) the private fits are near
random planes (``sin θ`` 0.94–1.00, 68–98% nearest their own centre over
three seeds); at 10 000 × 20 000 (:math:`n^* \approx 41\,000`) every
private fit is a random plane (50%). More variants need more people
(:math:`n^*` grows as :math:`\sqrt{d}`), as do a smaller ``ε``
(:math:`n^*` about as :math:`1/\varepsilon`) and populations less apart
(as :math:`1/F_{ST}`).
"""

# %%
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.decomposition import PCA

from sklearn_dppca import PrivacyLeakWarning, PrivatePCA
from sklearn_dppca.datasets import make_genotypes
from sklearn_dppca.metrics import principal_angle_sin

# Fixed seeds make the figure reproducible and the fit NOT private.
warnings.filterwarnings(
    "ignore", message="random_state=", category=PrivacyLeakWarning
)

X, populations, info = make_genotypes(
    20_000, 1_000, n_populations=3, return_info=True, random_state=0
)
print(f"{X.shape[0]} people, {X.shape[1]} variants, "
      f"public data_norm {info.data_norm:.1f}")

# %%
# Two components, with and without privacy
# ----------------------------------------
exact = PCA(2).fit(X)
private = PrivatePCA(
    2, epsilon=1.0, data_norm=info.data_norm, random_state=0
).fit(X)
angle = principal_angle_sin(private.components_, exact.components_)
print(f"sin θ to the non-private components: {angle:.2f}")


def separated(Z, labels):
    """Share of people nearest to their own population's centroid."""
    centres = np.array([Z[labels == p].mean(0) for p in range(3)])
    distance = ((Z[:, None, :] - centres[None]) ** 2).sum(-1)
    return float(np.mean(distance.argmin(1) == labels))


views = {"PCA (not private)": exact.transform(X),
         "PrivatePCA, ε = 1": private.transform(X)}
for name, Z in views.items():
    print(f"{name}: {separated(Z, populations):.1%} nearest "
          "their own population's centre")

# %%
# The people in the first two components
# --------------------------------------
# The private components differ from the exact ones (the noise of a
# ``d × d`` release is large at ``ε = 1``), but they span nearly the same
# plane as far as the populations go: the three clusters stay apart.
fig, axes = plt.subplots(1, 2, figsize=(9, 4))
for ax, (name, Z) in zip(axes, views.items()):
    for p in range(3):
        rows = populations == p
        ax.scatter(Z[rows, 0], Z[rows, 1], s=2, alpha=0.3,
                   label=f"population {p}")
    ax.set_title(name)
    ax.set_xlabel("component 1")
    ax.set_ylabel("component 2")
axes[0].legend(markerscale=5)
fig.tight_layout()
plt.show()
