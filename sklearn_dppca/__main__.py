"""Command line: ``python -m sklearn_dppca demo`` (also ``dppca demo``).

The demo is the package's main job on bundled data: private PCA of
scikit-learn's digits at several privacy budgets, compared with the
non-private PCA, with every fit charged to one budget accountant.
"""

import argparse
import sys
import warnings

import numpy as np


def _captured_variance(components, cov):
    return float(np.trace(components @ cov @ components.T))


def _sin_theta(estimate, reference):
    residual = reference.T - estimate.T @ (estimate @ reference.T)
    return float(np.linalg.norm(residual, 2))


def demo(n_components=2, epsilons=(1.0, 2.0, 5.0, 10.0), seed=None, out=sys.stdout):
    """Fit PrivatePCA on the digits at each ε and print how close it gets.

    Pixels are intensities in [0, 16], public knowledge: dividing by 16 puts
    each of the 64 pixels in [0, 1], so no row can exceed norm 8. The demo uses
    the tighter domain choice ``data_norm=3`` (a centred digit with about nine
    fully lit pixels of deviation), made without looking at the rows; rows
    beyond it are clipped, never dropped.
    """
    from sklearn.datasets import load_digits
    from sklearn.decomposition import PCA

    from . import BudgetAccountant, PrivatePCA

    X = load_digits().data / 16.0
    n, d = X.shape
    reference = PCA(n_components, svd_solver="covariance_eigh").fit(X)
    cov = np.cov(X, rowvar=False)
    best = _captured_variance(reference.components_, cov)
    accountant = BudgetAccountant()
    print(f"Private PCA of the digits: n={n} rows (people), d={d} features, "
          f"k={n_components} components, data_norm=3, delta=1e-6", file=out)
    print(f"{'epsilon':>8} {'captured variance':>18} {'sin(angle)':>11}", file=out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fixed --seed warns; the demo says so below
        for eps in epsilons:
            pca = PrivatePCA(n_components, epsilon=eps, data_norm=3.0,
                             random_state=seed, accountant=accountant).fit(X)
            ratio = _captured_variance(pca.components_, cov) / best
            sin = _sin_theta(pca.components_, reference.components_)
            print(f"{eps:>8g} {ratio:>17.1%} {sin:>11.3f}", file=out)
    print(f"{'inf':>8} {1:>17.1%} {0:>11.3f}   (scikit-learn PCA)", file=out)
    spent, delta = accountant.spent
    print(f"All {len(epsilons)} fits together spent epsilon={spent:.3f} at "
          f"delta={delta:g} (exact composition; the sum would be "
          f"{sum(epsilons):g}).", file=out)
    if seed is not None:
        print("Fixed --seed: the noise is reproducible, so these fits are NOT "
              "private.", file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="dppca", description="Differentially private PCA for scikit-learn."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("demo", help="private PCA of the bundled digits")
    run.add_argument("--n-components", type=int, default=2)
    run.add_argument("--epsilon", type=float, nargs="+", default=[1.0, 2.0, 5.0, 10.0])
    run.add_argument("--seed", type=int, default=None,
                     help="fix the noise (reproducible, not private)")
    args = parser.parse_args(argv)
    try:
        demo(args.n_components, args.epsilon, args.seed)
    except (ValueError, TypeError) as exc:
        print(f"dppca: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
