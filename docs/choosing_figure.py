"""Figures and table of docs/choosing.rst: what ε and data_norm buy.

Fits PrivatePCA (k = 2, δ = 1e-6) on the four bundled datasets of
:func:`sklearn_dppca.datasets.load_real_dataset` at several ε with their
recommended ``data_norm``, and on the digits at several ``data_norm``, over
60 noise seeds each (``--seeds``), and measures against the non-private PCA of the same
data (:mod:`sklearn_dppca.metrics`). Writes two PNGs to
``docs/_static/choosing/`` and prints the page's table. About 50 s of CPU::

    python docs/choosing_figure.py

The seeds are fixed so that the figures are reproducible; a fixed seed makes
a fit not private, which is why the warnings are silenced here and only here.
"""

import argparse
import warnings
from pathlib import Path

import numpy as np
from sklearn.decomposition import PCA

from sklearn_dppca import BudgetAccountant, PrivatePCA
from sklearn_dppca._cli_demo import style_epsilon_axes
from sklearn_dppca.datasets import REAL_DATASETS, load_real_dataset
from sklearn_dppca.metrics import captured_variance, principal_angle_sin

EPSILONS = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
DIGITS_NORMS = (1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0)
K, DELTA = 2, 1e-6
OUT = Path(__file__).resolve().parent / "_static" / "choosing"


def measure(X, epsilon, data_norm, seeds, reference, cov):
    """Median and quartiles of captured variance and sin θ over ``seeds``."""
    captured, sines = [], []
    for seed in seeds:
        pca = PrivatePCA(K, epsilon=epsilon, delta=DELTA, data_norm=data_norm,
                         random_state=seed, accountant=BudgetAccountant()).fit(X)
        captured.append(captured_variance(pca.components_, cov, reference))
        sines.append(principal_angle_sin(pca.components_, reference))
    return np.percentile(captured, [25, 50, 75]), np.percentile(sines, [25, 50, 75])


def reference_of(X):
    pca = PCA(K, svd_solver="covariance_eigh").fit(X)
    return pca.components_, np.cov(X, rowvar=False)


def main(n_seeds):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 11})
    seeds = range(n_seeds)
    OUT.mkdir(parents=True, exist_ok=True)
    warnings.simplefilter("ignore")  # fixed seeds, on purpose (see above)

    results = {}
    for name in REAL_DATASETS:
        data = load_real_dataset(name)
        reference, cov = reference_of(data.data)
        results[name] = (data, [measure(data.data, eps, data.data_norm, seeds,
                                        reference, cov) for eps in EPSILONS])

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
    for name, (data, rows) in results.items():
        n, d = data.data.shape
        label = f"{name} (n={n}, d={d})"
        for ax, which in zip(axes, (0, 1)):
            q = np.array([r[which] for r in rows])
            values = 100 * q if which == 0 else q
            (line,) = ax.plot(EPSILONS, values[:, 1], "o-", label=label)
            ax.fill_between(EPSILONS, values[:, 0], values[:, 2], alpha=0.15,
                            color=line.get_color())
    for ax, ylabel, ideal in ((axes[0], "captured variance (%)", 100),
                              (axes[1], "sin(largest principal angle)", 0)):
        style_epsilon_axes(ax, EPSILONS, ylabel, ideal)
    axes[0].set_ylim(0, 103)
    axes[1].set_ylim(-0.02, 1.02)
    axes[0].legend(loc="lower right", fontsize=9)
    fig.suptitle("PrivatePCA, k = 2, recommended data_norm: median and "
                 "interquartile range over 20 noise draws")
    fig.savefig(OUT / "epsilon_utility.png", dpi=110)

    digits = load_real_dataset("digits")
    reference, cov = reference_of(digits.data)
    fig, ax = plt.subplots(figsize=(10, 3.6), layout="constrained")
    norms_table = {}
    for eps in (1.0, 3.0, 10.0):
        q = np.array([measure(digits.data, eps, c, seeds, reference, cov)[0]
                      for c in DIGITS_NORMS]) * 100
        norms_table[eps] = q[:, 1]
        (line,) = ax.plot(DIGITS_NORMS, q[:, 1], "o-", label=f"epsilon = {eps:g}")
        ax.fill_between(DIGITS_NORMS, q[:, 0], q[:, 2], alpha=0.15,
                        color=line.get_color())
    ax.axvline(8.0, color="grey", linestyle=":", linewidth=1)
    ax.text(8.1, 5, "largest possible\nrow norm (8)", fontsize=9)
    ax.set_xscale("log")
    ax.set_xticks(DIGITS_NORMS, labels=[f"{c:g}" for c in DIGITS_NORMS])
    ax.minorticks_off()
    ax.set_ylim(0, 103)
    ax.set_xlabel("data_norm C (digits, pixels in [0, 1])")
    ax.set_ylabel("captured variance (%)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right")
    ax.set_title("Too small a bound biases (clipping), too large adds noise")
    fig.savefig(OUT / "data_norm_digits.png", dpi=110)

    print("captured variance, median (sin θ), PrivatePCA k = 2, δ = 1e-6")
    print("dataset".ljust(15) + "".join(f"ε = {e:g}".rjust(16) for e in EPSILONS))
    for name, (_, rows) in results.items():
        print(name.ljust(15) + "".join(
            f"{100 * r[0][1]:5.0f}% ({r[1][1]:.2f})".rjust(16) for r in rows))
    print("\ndigits, captured variance (median) against data_norm")
    print("ε".ljust(6) + "".join(f"C = {c:g}".rjust(9) for c in DIGITS_NORMS))
    for eps, row in norms_table.items():
        print(f"{eps:<6g}" + "".join(f"{v:8.0f}%" for v in row))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=60)
    main(parser.parse_args().seeds)
