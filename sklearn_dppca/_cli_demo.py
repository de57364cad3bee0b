"""``dppca demo``: the package's main job on bundled data, and its
privacy–utility figure."""

import importlib.util
import sys
import warnings

import numpy as np


def _captured_variance(components, cov):
    return float(np.trace(components @ cov @ components.T))


def _sin_theta(estimate, reference):
    residual = reference.T - estimate.T @ (estimate @ reference.T)
    return float(np.linalg.norm(residual, 2))


#: What the demo's two columns mean (docs/privacy.rst §7), printed under them.
DEMO_DEFINITIONS = (
    "captured variance: share of the non-private top-k variance that the private "
    "components P capture, tr(P Cov P^T) / tr(V Cov V^T), V those of PCA "
    "(100% = as good as PCA)",
    "sin(angle): sine of the largest principal angle between the private and the "
    "non-private k-dimensional subspaces (0 = identical, 1 = orthogonal)",
)


def demo(n_components=2, epsilons=(1.0, 2.0, 5.0, 10.0), seed=None, out=None,
         plot=None):
    """Fit PrivatePCA on the digits at each ε and print how close it gets.

    Pixels are intensities in [0, 16], public knowledge: dividing by 16 puts
    each of the 64 pixels in [0, 1], so no row can exceed norm 8. The demo uses
    the tighter domain choice ``data_norm=4`` (a digit lights up about a quarter
    of its pixels: 16 lit pixels have norm 4), made without looking at the
    rows; rows beyond it are clipped, never dropped. (The private mean clips
    the raw rows, so a bound well below their norms would bias it.)

    ``plot``: a file name to save the privacy–utility curve to (PNG, needs
    matplotlib; checked before any fit).
    """
    from sklearn.datasets import load_digits
    from sklearn.decomposition import PCA

    from . import BudgetAccountant, PrivatePCA

    if plot is not None:
        _check_plot_target(plot)
    out = sys.stdout if out is None else out
    X = load_digits().data / 16.0
    n, d = X.shape
    if not 1 <= n_components <= d:
        raise ValueError(f"--n-components must be between 1 and the digits' "
                         f"{d} features, got {n_components}")
    reference = PCA(n_components, svd_solver="covariance_eigh").fit(X)
    cov = np.cov(X, rowvar=False)
    best = _captured_variance(reference.components_, cov)
    accountant = BudgetAccountant()
    print(f"Private PCA of the digits: n={n} rows (people), d={d} features, "
          f"k={n_components} components, data_norm=4, delta=1e-6", file=out)
    for line in DEMO_DEFINITIONS:
        print(f"  {line}", file=out)
    print(f"{'epsilon':>8} {'captured variance':>18} {'sin(angle)':>11}", file=out)
    curve = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fixed --seed warns; the demo says so below
        for eps in epsilons:
            pca = PrivatePCA(n_components, epsilon=eps, data_norm=4.0,
                             random_state=seed, accountant=accountant).fit(X)
            ratio = _captured_variance(pca.components_, cov) / best
            sin = _sin_theta(pca.components_, reference.components_)
            curve.append((eps, ratio, sin))
            print(f"{eps:>8g} {ratio:>17.1%} {sin:>11.3f}", file=out)
    print(f"{'inf':>8} {1:>17.1%} {0:>11.3f}   (scikit-learn PCA)", file=out)
    spent, delta = accountant.spent
    print(f"All {len(epsilons)} fits together spent epsilon={spent:.3f} at "
          f"delta={delta:g} (exact composition; the sum would be "
          f"{sum(epsilons):g}).", file=out)
    if seed is not None:
        print("Fixed --seed: the noise is reproducible, so these fits are NOT "
              "private.", file=out)
    if plot is not None:
        _plot_curve(curve, plot, n, d, n_components)
        print(f"Privacy-utility curve saved to {plot}", file=out)


def _check_plot_target(path):
    """Fail now, in one line, if ``--plot`` cannot be honoured."""
    if importlib.util.find_spec("matplotlib") is None:
        raise ImportError(
            "--plot draws with matplotlib, which is not installed: "
            "pip install matplotlib"
        )
    if not str(path).lower().endswith(".png"):
        raise ValueError(f"--plot {path}: name the figure *.png")
    from ._cli_io import check_writable

    check_writable(path)


def style_epsilon_axes(ax, epsilons, ylabel, ideal):
    """A privacy–utility panel: log ε axis ticked at ``epsilons``, the
    non-private value ``ideal`` dashed (also used by docs/choosing_figure.py)."""
    ax.axhline(ideal, color="grey", linestyle="--", linewidth=1,
               label="scikit-learn PCA")
    ax.set_xscale("log")
    ax.set_xticks(epsilons, labels=[f"{e:g}" for e in epsilons])
    ax.minorticks_off()
    ax.set_xlabel("epsilon (delta = 1e-6)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)


def _plot_curve(curve, path, n, d, k):
    """Captured variance and sin(angle) against ε, side by side, as a PNG.

    Drawn on a bare :class:`~matplotlib.figure.Figure` (no pyplot): the
    caller's matplotlib backend and state are left alone.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    eps, ratio, sin = (np.array(column) for column in zip(*sorted(curve)))
    fig = Figure(figsize=(8, 3.4), layout="constrained")
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    for ax, values, ideal, label in (
        (left, 100 * ratio, 100, "captured variance (%)"),
        (right, sin, 0, "sin(largest principal angle)"),
    ):
        ax.plot(eps, values, "o-", label="PrivatePCA")
        style_epsilon_axes(ax, eps, label, ideal)
    left.set_ylim(0, 105)
    right.set_ylim(-0.03, 1.03)
    left.legend(loc="lower right")
    fig.suptitle(f"Private PCA of the digits (n={n}, d={d}, k={k}, data_norm=4)")
    fig.savefig(path, dpi=120)
