"""Command line ``dppca`` (also ``python -m sklearn_dppca``).

``dppca fit DATA --n-components K --epsilon E --delta D --data-norm C -o MODEL``
    Fit a private PCA on a CSV or Parquet table and write the released model
    (components, variances, private mean, privacy spent, parameters) as JSON.
    ``--data-norm auto`` chooses the bound privately; ``--bounds LOW HIGH`` (or
    a CSV file of per-feature bounds) gives public ranges instead.
``dppca transform MODEL DATA -o OUT``
    Project a table on a saved model; writes CSV or Parquet (``-o -``: CSV on
    standard output).
``dppca demo``
    The package's main job on bundled data: private PCA of scikit-learn's
    digits at several privacy budgets, compared with the non-private PCA,
    with every fit charged to one budget accountant.

User errors print one line, ``dppca: error: <message>``, on standard error and
exit with status 2; privacy warnings print ``dppca: warning: <message>``.
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np


def _captured_variance(components, cov):
    return float(np.trace(components @ cov @ components.T))


def _sin_theta(estimate, reference):
    residual = reference.T - estimate.T @ (estimate @ reference.T)
    return float(np.linalg.norm(residual, 2))


def demo(n_components=2, epsilons=(1.0, 2.0, 5.0, 10.0), seed=None, out=None):
    """Fit PrivatePCA on the digits at each ε and print how close it gets.

    Pixels are intensities in [0, 16], public knowledge: dividing by 16 puts
    each of the 64 pixels in [0, 1], so no row can exceed norm 8. The demo uses
    the tighter domain choice ``data_norm=4`` (a digit lights up about a quarter
    of its pixels: 16 lit pixels have norm 4), made without looking at the
    rows; rows beyond it are clipped, never dropped. (The private mean clips
    the raw rows, so a bound well below their norms would bias it.)
    """
    from sklearn.datasets import load_digits
    from sklearn.decomposition import PCA

    from . import BudgetAccountant, PrivatePCA

    out = sys.stdout if out is None else out
    X = load_digits().data / 16.0
    n, d = X.shape
    reference = PCA(n_components, svd_solver="covariance_eigh").fit(X)
    cov = np.cov(X, rowvar=False)
    best = _captured_variance(reference.components_, cov)
    accountant = BudgetAccountant()
    print(f"Private PCA of the digits: n={n} rows (people), d={d} features, "
          f"k={n_components} components, data_norm=4, delta=1e-6", file=out)
    print(f"{'epsilon':>8} {'captured variance':>18} {'sin(angle)':>11}", file=out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fixed --seed warns; the demo says so below
        for eps in epsilons:
            pca = PrivatePCA(n_components, epsilon=eps, data_norm=4.0,
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


# ------------------------------------------------------------------ fit
ESTIMATORS = {
    "private": "PrivatePCA",
    "complex": "ComplexGaussPCA",
    "coherent": "CoherentPowerPCA",
}
#: Options that only one estimator takes: option dest -> estimator choice.
_ONLY_FOR = {
    "clip_radius": "coherent",
    "n_iter": "coherent",
    "max_iter": "coherent",
    "target": "complex",
}


def _say(args, message):
    """A progress line on standard error, unless ``--quiet``."""
    if not args.quiet:
        print(f"dppca: {message}", file=sys.stderr, flush=True)


def _warn(message):
    from ._cli_io import one_line

    print(f"dppca: warning: {one_line(message)}", file=sys.stderr, flush=True)


def _make_estimator(args):
    import sklearn_dppca

    for dest, choice in _ONLY_FOR.items():
        if getattr(args, dest) is not None and args.estimator != choice:
            option = "--" + dest.replace("_", "-")
            raise ValueError(f"{option} applies only to --estimator {choice}")
    if args.data_norm is None and not args.estimate_data_norm and not args.bounds:
        raise ValueError("give --data-norm C, --data-norm auto, --bounds or "
                         "--estimate-data-norm (NOT private)")
    params = dict(
        n_components=args.n_components,
        epsilon=args.epsilon,
        delta=args.delta,
        data_norm=args.data_norm,
        center=args.center,
        whiten=args.whiten,
        random_state=args.seed,
        accountant=sklearn_dppca.BudgetAccountant(),
    )
    if args.estimator == "coherent":
        if not isinstance(args.n_components, int):
            raise ValueError("--estimator coherent needs an integer --n-components")
        params["verbose"] = args.verbose
        for dest in ("clip_radius", "n_iter", "max_iter"):
            if getattr(args, dest) is not None:
                params[dest] = getattr(args, dest)
    elif args.estimator == "complex" and args.target is not None:
        params["target"] = args.target
    return getattr(sklearn_dppca, ESTIMATORS[args.estimator])(**params)


def fit_command(args):
    """``dppca fit``: fit on a table, write the released model as JSON."""
    from ._cli_io import (
        check_writable,
        model_to_dict,
        numeric_matrix,
        read_table,
        save_model,
    )
    from .privacy import PrivacyLeakWarning

    estimator = _make_estimator(args)  # bad options fail before the data is read
    check_writable(args.output)  # and before any budget is spent
    columns = None
    if args.columns:
        columns = [c.strip() for arg in args.columns for c in arg.split(",")]
        columns = [c for c in columns if c]
    frame = read_table(args.data)
    X, names = numeric_matrix(
        frame, columns, args.data,
        hint="choose the numeric ones with --columns NAME,NAME,...",
    )
    n_samples, n_features = X.shape
    if args.bounds:
        estimator.set_params(bounds=_read_bounds(args.bounds, names))
    if args.delta >= 1.0 / n_samples:
        _warn(f"delta={args.delta:g} is not well below 1/n = {1.0 / n_samples:.3g} "
              f"(n={n_samples} rows): a fit may then reveal whole rows")
    norm = args.data_norm if isinstance(args.data_norm, str) else (
        "from the bounds" if args.data_norm is None and args.bounds else
        "from the data" if args.data_norm is None else f"{args.data_norm:g}")
    _say(args, f"fitting {type(estimator).__name__} "
               f"(n_components={args.n_components}, epsilon={args.epsilon:g}, "
               f"delta={args.delta:g}, data_norm={norm}) on {n_samples} rows x "
               f"{n_features} columns of {args.data}")
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimator.fit(X)
    elapsed = time.perf_counter() - start
    leaks, seen = [], set()
    for w in caught:
        message = str(w.message)
        if message in seen:
            continue
        seen.add(message)
        if issubclass(w.category, PrivacyLeakWarning):
            leaks.append(message)
        _warn(message)
    save_model(model_to_dict(estimator, names, leaks), args.output)
    eps, delta = estimator.privacy_spent_
    where = "standard output" if args.output == "-" else args.output
    _say(args, f"done in {elapsed:.2f} s: n_components_={estimator.n_components_}, "
               f"spent epsilon={eps:.6g} at delta={delta:g}"
               f"{'' if not leaks else ' (NOT private, see warnings)'}; "
               f"model written to {where}")
    return 0


def _read_bounds(values, names):
    """``--bounds``: ``(low, high)`` numbers, or per-feature rows of a CSV file.

    The file has a header of feature names (at least the fitted ones) and two
    rows, the lower and the upper bounds.
    """
    if len(values) == 2:
        try:
            return float(values[0]), float(values[1])
        except ValueError:
            raise ValueError(f"--bounds: expected two numbers LOW HIGH or one CSV "
                             f"file, got {' '.join(values)!r}") from None
    if len(values) != 1:
        raise ValueError("--bounds takes two numbers LOW HIGH or one CSV file")
    from ._cli_io import quote_names, read_table

    frame = read_table(values[0])
    missing = [str(n) for n in names if n not in frame.columns]
    if missing:
        raise ValueError(f"--bounds {values[0]}: no bounds for the columns "
                         f"{quote_names(missing)}")
    if frame.shape[0] != 2:
        raise ValueError(f"--bounds {values[0]}: expected two rows (lower, upper), "
                         f"got {frame.shape[0]}")
    try:
        table = frame[list(names)].to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"--bounds {values[0]}: bounds must be numbers") from None
    return table[0], table[1]


# ------------------------------------------------------------ transform
def transform_command(args):
    """``dppca transform``: project a table on a saved model."""
    from ._cli_io import (
        check_writable,
        load_model,
        numeric_matrix,
        quote_names,
        read_table,
        table_format,
        write_table,
    )

    model = load_model(args.model)
    if args.output != "-":
        table_format(args.output)
        check_writable(args.output)
    frame = read_table(args.data)
    extra = [c for c in frame.columns if c not in model.feature_names]
    missing = [c for c in model.feature_names if c not in frame.columns]
    if missing:
        raise ValueError(
            f"{args.data} lacks {len(missing)} of the model's "
            f"{len(model.feature_names)} feature column(s): {quote_names(missing)}"
        )
    if extra:
        _say(args, f"ignoring column(s) not in the model: {quote_names(extra)}")
    X, _ = numeric_matrix(frame, model.feature_names, args.data,
                          hint="the model was fitted on numeric columns")
    Z = model.transform(X)
    write_table(Z, model.get_feature_names_out(), args.output)
    where = "standard output" if args.output == "-" else args.output
    _say(args, f"wrote {Z.shape[0]} rows x {Z.shape[1]} components to {where}")
    return 0


# --------------------------------------------------------------- parser
class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, like every other error."""

    def error(self, message):
        self.exit(2, f"dppca: error: {message} (see '{self.prog} --help')\n")


def _n_components(text):
    try:
        value = int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            value = None
    if value is None or not (
        value >= 1 if isinstance(value, int) else 0.0 < value < 1.0
    ):
        raise argparse.ArgumentTypeError(
            f"must be an integer >= 1, or a fraction in (0, 1) of the variance "
            f"to keep, got {text!r}"
        )
    return value


def _number(kind, low, high=None, closed_low=False, what="number"):
    """An argparse type: a finite ``kind`` in (low, high), ``[low`` if closed."""

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            value = None
        ok = value is not None and np.isfinite(value) and (
            value >= low if closed_low else value > low
        ) and (high is None or value < high)
        if not ok:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value

    parse.__name__ = parse.what = what
    return parse


_positive = _number(float, 0.0, what="a positive number")
_probability = _number(float, 0.0, 1.0, what="a number in (0, 1)")
_count = _number(int, 1, closed_low=True, what="an integer >= 1")


def _auto_or(kind):
    def parse(text):
        if text == "auto":
            return text
        try:
            return kind(text)
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(
                f"must be 'auto' or {kind.what}, got {text!r}"
            ) from None

    parse.__name__ = f"'auto' or {kind.what}"
    return parse


def build_parser():
    parser = _Parser(
        prog="dppca",
        description="Differentially private PCA for scikit-learn.",
        epilog="Run 'dppca COMMAND --help' for the options of a command.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    fit = commands.add_parser(
        "fit", help="fit a private PCA on a CSV/Parquet table, write the model as JSON",
        description="Fit a differentially private PCA on the rows of DATA (one row "
        "per person) and write the released model as JSON. Only released values "
        "are written: components, variances, the private mean, the privacy spent, "
        "the parameters.",
    )
    fit.add_argument("data", metavar="DATA",
                     help="table to fit: *.csv (with a header; '-' for standard "
                     "input) or *.parquet (needs pyarrow)")
    fit.add_argument("-o", "--output", metavar="MODEL", required=True,
                     help="model JSON to write ('-': standard output)")
    fit.add_argument("--n-components", "-k", metavar="K", type=_n_components,
                     required=True,
                     help="components to keep (a fraction in (0, 1): of the variance)")
    fit.add_argument("--epsilon", metavar="E", type=_positive, required=True,
                     help="privacy parameter epsilon > 0 of the fit")
    fit.add_argument("--delta", metavar="D", type=_probability, required=True,
                     help="privacy parameter delta in (0, 1), well below 1/n")
    norm = fit.add_mutually_exclusive_group()
    norm.add_argument("--data-norm", metavar="C", type=_auto_or(_positive),
                      help="public bound on a row's L2 norm, from domain knowledge; "
                      "rows beyond it are clipped. 'auto': chosen privately, from a "
                      "small share of the budget")
    norm.add_argument("--estimate-data-norm", action="store_true",
                      help="take the bound from the data (NOT private; warns)")
    fit.add_argument("--bounds", metavar="LOW HIGH | FILE", nargs="+",
                     help="public range of every feature (two numbers), or a CSV "
                     "FILE with a header of feature names and two rows, lower and "
                     "upper: rows are clipped into the box, which also gives the "
                     "norm bound unless --data-norm is given")
    fit.add_argument("--estimator", choices=list(ESTIMATORS), default="private",
                     help="private: PrivatePCA (default); complex: ComplexGaussPCA; "
                     "coherent: CoherentPowerPCA")
    fit.add_argument("--columns", metavar="NAME,...", action="append",
                     help="numeric columns to use (default: all columns, which must "
                     "then all be numeric); may be repeated")
    fit.add_argument("--center", action=argparse.BooleanOptionalAction, default=True,
                     help="centre on a private mean (default: --center)")
    fit.add_argument("--whiten", action="store_true",
                     help="scale projections to unit released variance")
    fit.add_argument("--target", choices=["covariance", "subspace"],
                     help="complex only: what the components approximate "
                     "(default: covariance)")
    fit.add_argument("--clip-radius", metavar="R", type=_auto_or(_positive),
                     help="coherent only: clipping radius, or 'auto' (default)")
    fit.add_argument("--n-iter", metavar="T", type=_auto_or(_count),
                     help="coherent only: power iterations, or 'auto' (default)")
    fit.add_argument("--max-iter", metavar="T", type=_count,
                     help="coherent only: cap of the automatic iteration grid "
                     "(default: 32)")
    fit.add_argument("--seed", type=int, default=None,
                     help="fix the noise, for reproducible tests only: the fit is "
                     "then NOT private")
    fit.add_argument("-v", "--verbose", action="count", default=0,
                     help="coherent: print the progress of the trials (-vv: of "
                     "every iteration)")
    fit.add_argument("-q", "--quiet", action="store_true",
                     help="no start/end lines (warnings are still printed)")
    fit.set_defaults(run=fit_command)

    tr = commands.add_parser(
        "transform", help="project a table on a saved model",
        description="Project the rows of DATA on the components of MODEL: "
        "(X - mean) @ components.T, whitened if the model was. DATA must have the "
        "model's feature columns (by name); other columns are ignored.",
    )
    tr.add_argument("model", metavar="MODEL", help="model JSON written by 'dppca fit'")
    tr.add_argument("data", metavar="DATA",
                    help="table to project: *.csv ('-': standard input) or *.parquet")
    tr.add_argument("-o", "--output", metavar="OUT", required=True,
                    help="*.csv or *.parquet to write ('-': CSV on standard output)")
    tr.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    tr.set_defaults(run=transform_command)

    run = commands.add_parser("demo", help="private PCA of the bundled digits",
                              description="Private PCA of scikit-learn's digits at "
                              "several budgets, compared with the non-private PCA.")
    run.add_argument("--n-components", type=int, default=2)
    run.add_argument("--epsilon", type=float, nargs="+", default=[1.0, 2.0, 5.0, 10.0])
    run.add_argument("--seed", type=int, default=None,
                     help="fix the noise (reproducible, not private)")
    run.set_defaults(run=lambda args: demo(args.n_components, args.epsilon, args.seed)
                     or 0)
    return parser


def _error(exc):
    from ._cli_io import one_line

    if isinstance(exc, OSError) and exc.strerror and exc.filename:
        message = f"{exc.filename}: {exc.strerror}"
    else:
        message = one_line(exc) or type(exc).__name__
    print(f"dppca: error: {message}", file=sys.stderr, flush=True)
    return 2


def main(argv=None):
    """Run ``dppca``; returns the exit status (0, or 2 on a user error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    try:
        return args.run(args)
    except BrokenPipeError:  # e.g. `dppca transform ... -o - | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print("dppca: interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, OSError, ImportError) as exc:
        # BudgetExceededError, pandas' parser errors and scikit-learn's
        # InvalidParameterError are all ValueErrors.
        return _error(exc)


if __name__ == "__main__":
    sys.exit(main())
