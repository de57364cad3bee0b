"""What post-processing, or a separate eigenvalue release, could do for our covariance.

Issue 23, item 2 asks ``get_covariance()`` of ``PrivatePCA(center=False,
data_norm=1)`` to beat every peer of :mod:`bench_peers_covariance` in every
cell. This script measures the bounds that decide which routes can, with
oracles that read the true ``Σ = XᵀX/n`` (they are yardsticks, not
estimators):

- ``ours``: ``‖Σ − Σ̂‖_F`` of ``get_covariance() · (n − 1)/n``, the same fits
  (same seeds) as bench_peers_covariance.py's PrivatePCA column.
- ``eigenvalues`` and ``oracle eig``: the exact split of ``ours`` in the
  basis ``V`` of the released eigenvectors, ``‖Σ − Σ̂‖² = ‖diag(VᵀΣV) − v̂‖² +
  ‖offdiag(VᵀΣV)‖²``. The first is what our eigenvalues ``v̂`` lose; the
  second, ``‖offdiag(VᵀΣV)‖``, is the error of ``V diag(VᵀΣV) Vᵀ``, the best
  matrix with our eigenvectors, which no choice of eigenvalues recovers. It
  bounds every post-processing that keeps the components: eigenvalue
  shrinkage, ``αΣ̂ + βI``, shrinkage toward zero.
- ``oracle αΣ̂+βI``: the best linear shrinkage toward a multiple of the
  identity (``α, β`` by least squares against ``Σ``).
- ``split s``: route (b), a share ``1 − s`` of ``μ²`` for a separate release
  of the eigenvalues and ``s`` for the covariance: the eigenvectors of ``Σ +
  S`` with ``S`` our GOE kernel at ``σ = √2 C²/(√s μ)/n``, with the oracle's
  eigenvalues (exact, as if the eigenvalue release had no noise). Any
  eigenvalue release on those eigenvectors is at least this.
- ``AdaptiveCov`` and ``zero``: the peer that wins the one cell we lose, and
  the all-zero matrix, as in bench_peers_covariance.py.

Usage (from the repository root)::

    PYTHONPATH=. nice python benchmarks/bench_cov_oracle.py
    PYTHONPATH=. python benchmarks/bench_cov_oracle.py --cells breast_cancer --rhos 0.01

Output: one Markdown table, mean ± sd over ``--reps`` (20) repetitions per
cell and ρ (the split rows: ``--split-reps``, 100, noise seeds of their own).
"""

import argparse
import math
import sys
import warnings
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_peers_covariance as peers  # noqa: E402

from sklearn_dppca import PrivacyLeakWarning  # noqa: E402
from sklearn_dppca.noise import goe_noise, noise_scale  # noqa: E402

SHARES = (0.9, 0.75, 0.5)
SMALL_CELLS = ("wine", "breast_cancer", "digits")


def off_diagonal_norm(w):
    return float(np.linalg.norm(w - np.diag(np.diag(w))))


def ours_row(X, truth, rho, rng):
    """Our error, its split, and the two oracles on our eigenvectors."""
    cov, vecs = peers.private_pca(X, rho, rng)
    w = vecs.T @ truth @ vecs
    released = np.diag(vecs.T @ cov @ vecs)
    d = truth.shape[0]
    design = np.stack([cov.ravel(), np.eye(d).ravel()], axis=1)
    coef = np.linalg.lstsq(design, truth.ravel(), rcond=None)[0]
    return {
        "ours": float(np.linalg.norm(truth - cov)),
        "eigenvalues": float(np.linalg.norm(np.diag(w) - released)),
        "oracle eig": off_diagonal_norm(w),
        "oracle αΣ̂+βI": float(np.linalg.norm(truth.ravel() - design @ coef)),
    }


def split_oracle(truth, n, rho, share, rng):
    """Best eigenvalues on the eigenvectors of a release at ``share`` of ``μ²``."""
    d = truth.shape[0]
    sigma = noise_scale(math.sqrt(2.0), math.sqrt(share * 2.0 * rho)) / n
    _, vecs = np.linalg.eigh(truth + goe_noise(rng, d, sigma))
    return off_diagonal_norm(vecs.T @ truth @ vecs)


def run(cells, rhos, reps, split_reps, seed, log=print):
    columns = ["ours", "eigenvalues", "oracle eig", "oracle αΣ̂+βI",
               *(f"split {s}" for s in SHARES), "AdaptiveCov", "zero"]
    rows = []
    for cell in peers.make_cells(cells, False, seed):
        X = cell.X
        n, _ = X.shape
        truth = X.T @ X / n
        ci = peers.ALL_CELLS.index(cell.name)
        for rho in rhos:
            ri = peers.RHOS.index(rho) if rho in peers.RHOS else len(peers.RHOS)
            values = {c: [] for c in columns}
            for rep in range(reps):
                # the seeds of bench_peers_covariance.py: same fits as its table
                ours = ours_row(X, truth, rho,
                                peers.fit_rng(seed, ci, ri, rep, peers.OURS))
                for key, value in ours.items():
                    values[key].append(value)
                adaptive, _ = peers.adaptive_cov(
                    X, rho, peers.fit_rng(seed, ci, ri, rep, "AdaptiveCov"))
                values["AdaptiveCov"].append(float(np.linalg.norm(truth - adaptive)))
                values["zero"].append(float(np.linalg.norm(truth)))
            rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(
                ci, ri, 10**6)))
            for share in SHARES:
                values[f"split {share}"] = [split_oracle(truth, n, rho, share, rng)
                                            for _ in range(split_reps)]
            rows.append([f"{cell.name} {cell.shape}", f"{rho:g}"] + [
                peers._fmt(float(np.mean(values[c])), float(np.std(values[c], ddof=1)))
                for c in columns])
            log(f"  {cell.name} ρ = {rho:g} done")
    return ["cell", "ρ", *columns], rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", nargs="+", default=list(SMALL_CELLS),
                        choices=peers.ALL_CELLS)
    parser.add_argument("--rhos", nargs="+", type=float, default=list(peers.RHOS))
    parser.add_argument("--reps", type=int, default=peers.REPS)
    parser.add_argument("--split-reps", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore", PrivacyLeakWarning)
    with threadpool_limits(1):
        head, rows = run(args.cells, args.rhos, args.reps, args.split_reps, args.seed,
                         log=lambda m: print(m, file=sys.stderr))
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
