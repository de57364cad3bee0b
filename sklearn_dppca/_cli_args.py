"""The ``dppca`` command's argument parser: its class, the types of its
options (numbers in a range, ``auto`` or a number, ``n_components``) and
the options of its commands."""

import argparse
import re

import numpy as np

#: What argparse reads as a negative number rather than an option: its own
#: ``-3`` and ``-.5``, and the exponent form ``-1e3`` and ``-inf`` it reads
#: as options (``--bounds -inf inf`` then said "expected an argument").
NEGATIVE_NUMBER = re.compile(
    r"^-((\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|inf(inity)?)$", re.IGNORECASE)


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line, like every other error; a negative number
    in exponent form (``--bounds -1e3 1e3``) is a value, as ``-1000`` is."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE_NUMBER

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


_finite = _number(float, -np.inf, what="a finite number")


_probability = _number(float, 0.0, 1.0, what="a number in (0, 1)")


_count = _number(int, 1, closed_low=True, what="an integer >= 1")


_seed = _number(int, 0, closed_low=True, what="an integer >= 0")


def _word_or(word, kind):
    """An option type taking ``word`` as it is, or a value of ``kind``."""
    def parse(text):
        if text == word:
            return text
        try:
            return kind(text)
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(
                f"must be '{word}' or {kind.what}, got {text!r}"
            ) from None

    parse.__name__ = f"'{word}' or {kind.what}"
    return parse


def _auto_or(kind):
    return _word_or("auto", kind)


def _mid_or(kind):
    return _word_or("mid", kind)


#: The estimators ``--estimator`` names.
ESTIMATORS = {
    "private": "PrivatePCA",
    "complex": "ComplexGaussPCA",
    "coherent": "CoherentPowerPCA",
}


def _separator(text):
    """``--sep``: one ASCII character, ``tab`` or ``\\t`` (as a shell passes
    ``'\\t'``) for a tab; not a quote or a line break."""
    text = {"tab": "\t", "\\t": "\t"}.get(text, text)
    if len(text) != 1 or not text.isascii() or text in '"\n\r':
        raise argparse.ArgumentTypeError(
            f"must be one ASCII character (tab: 'tab' or '\\t'), not a quote "
            f"or a line break, got {text!r}")
    return text


def _decimal_mark(text):
    """``--decimal``: one ASCII character, not a quote, line break or
    digit."""
    if len(text) != 1 or not text.isascii() or text in '"\n\r' or text.isdigit():
        raise argparse.ArgumentTypeError(
            f"must be one character ('.' or ','), got {text!r}")
    return text


def _add_csv_options(command):
    command.add_argument(
        "--sep", metavar="CHAR", type=_separator,
        help="the character between a CSV's cells (default: ','): ';' or tab "
        "(--sep tab, or --sep '\\t') for many spreadsheet and survey exports; "
        "every CSV the command reads (DATA; with fit a --bounds FILE too) is "
        "read with it")
    command.add_argument(
        "--decimal", metavar="CHAR", type=_decimal_mark,
        help="a CSV's decimal mark (default: '.'): ',' reads 1,5 as 1.5 "
        "(with --sep ';' or tab)")


def _add_dask_options(command, name):
    _add_csv_options(command)
    command.add_argument(
        "--numeric-header", action="store_true",
        help="a CSV's first line is its header even though every name in it is "
        "a number (gene IDs, years); without it such a line is refused as a "
        "row of data")
    command.add_argument(
        "--dask", action="store_true",
        help="read DATA with Dask, partition by partition, never whole: DATA "
        "may then be a glob ('data/part-*.parquet', quoted) or a directory of "
        "Parquet (or CSV) files" + (
            "; each pass over the rows is one Dask reduction, and a terminal "
            "(or -v) shows the partitions done" if name == "fit" else
            "; the projection is written chunk by chunk") +
        " (needs the dask extra)")
    command.add_argument(
        "--scheduler", metavar="ADDRESS",
        help="with --dask: run on the dask.distributed scheduler at ADDRESS "
        "(tcp://host:8786), whose workers read DATA (default: threads of this "
        "process)")


def build_parser(fit_command, transform_command, demo):
    """The ``dppca`` parser; its commands run the functions given (the
    ``__main__`` module's)."""
    from . import __version__
    from ._cli_ledger import _add_ledger_commands

    parser = _Parser(
        prog="dppca",
        description="Differentially private PCA for scikit-learn.",
        epilog="Run 'dppca COMMAND --help' for the options of a command.",
    )
    parser.add_argument("--version", action="version",
                        version=f"%(prog)s {__version__}")
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
                     "input) or *.parquet (needs pyarrow); with --dask also a "
                     "glob or a directory of such files; or a sparse matrix, "
                     "*.npz (scipy.sparse.save_npz; columns x0, x1, ...), with "
                     "--dask also several, one block of rows each")
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
    fit.add_argument("--scale", action="store_true",
                     help="with --bounds: also map each column from its public "
                     "range to [0, 1] before the fit (stored in the model, so "
                     "that 'dppca transform' applies the same map); --data-norm "
                     "is then in those units")
    fit.add_argument("--fill-missing", metavar="VALUE", type=_mid_or(_finite),
                     help="replace missing values (NaN, empty cells) by this public "
                     "constant before the fit, or 'mid': by the middle of each "
                     "column's --bounds (stored in the model); without it missing "
                     "values are an error")
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
    fit.add_argument("--n-iter-max", metavar="T", type=_count,
                     help="coherent only: cap of the iteration grid of "
                     "--selection repetition (default: 32)")
    fit.add_argument("--selection", choices=["gdp", "repetition"],
                     help="coherent only, with an 'auto' radius or count: gdp "
                     "(default), one exact-GDP run with a private go/no-go; "
                     "repetition, the paper's random repetitions (slower, and "
                     "not with --data-norm auto)")
    fit.add_argument("--start", choices=["auto", "covariance", "random"],
                     help="coherent only: where the power iterations start: "
                     "covariance, the released covariance; random, a random "
                     "basis with no covariance release (better for wide rows "
                     "with few rows per column); auto (default), random where "
                     "public values say the covariance release would be noise")
    fit.add_argument("--path", choices=["auto", "dense", "matrix_free", "noisy_power"],
                     help="how the release is computed (default: auto, chosen "
                     "from public values): dense, with d x d matrices; "
                     "matrix_free (private, complex), the same release without "
                     "them; noisy_power (private, coherent), the noisy power "
                     "method, another release, for very many features or very "
                     "sparse rows")
    fit.add_argument("--memory-limit", metavar="GIB", type=_auto_or(_number(
                         float, 0.0, 2.0**40, what="a number of GiB in (0, 2**40)")),
                     help="GiB the fit may take; a fit that needs more is "
                     "refused before the data is read (default: auto, 80%% of "
                     "this machine's memory)")
    fit.add_argument("--seed", type=_seed, default=None,
                     help="fix the noise, for reproducible tests only: the fit is "
                     "then NOT private")
    fit.add_argument("-v", "--verbose", action="count", default=0,
                     help="progress as it happens: reading DATA, each pass over "
                     "the rows (with --dask, its partitions done), how many "
                     "passes; coherent: also its stages and the released "
                     "branch (-vv: every power iteration)")
    fit.add_argument("-q", "--quiet", action="store_true",
                     help="no start/end lines (warnings are still printed)")
    _add_dask_options(fit, "fit")
    fit.set_defaults(run=fit_command)

    tr = commands.add_parser(
        "transform", help="project a table on a saved model",
        description="Project the rows of DATA on the components of MODEL: "
        "(X - mean) @ components.T, whitened if the model was. DATA must have the "
        "model's feature columns (by name); other columns are ignored.",
    )
    tr.add_argument("model", metavar="MODEL", help="model JSON written by 'dppca fit'")
    tr.add_argument("data", metavar="DATA",
                    help="table to project: *.csv ('-': standard input) or "
                    "*.parquet; with --dask also a glob or a directory of files; "
                    "or a sparse matrix, *.npz (with --dask, also several)")
    tr.add_argument("-o", "--output", metavar="OUT", required=True,
                    help="*.csv or *.parquet to write ('-': CSV on standard output)")
    tr.add_argument("-v", "--verbose", action="count", default=0,
                    help="also report reading DATA as it happens")
    tr.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    _add_dask_options(tr, "transform")
    tr.set_defaults(run=transform_command)
    _add_ledger_commands(commands, fit)

    run = commands.add_parser("demo", help="private PCA of the bundled digits",
                              description="Private PCA of scikit-learn's digits at "
                              "several budgets, compared with the non-private PCA.")
    run.add_argument("--n-components", metavar="K", type=_count, default=2,
                     help="components to keep, 1 to 64 (default: 2)")
    run.add_argument("--epsilon", metavar="E", type=_positive, nargs="+",
                     default=[1.0, 2.0, 5.0, 10.0],
                     help="the budgets to fit at (default: 1 2 5 10)")
    run.add_argument("--seed", type=_seed, default=None,
                     help="fix the noise (reproducible, not private)")
    run.add_argument("--plot", metavar="FILE.png", default=None,
                     help="also save the privacy-utility curve as a PNG "
                     "(needs matplotlib)")
    run.set_defaults(run=lambda args: demo(args.n_components, args.epsilon, args.seed,
                                           plot=args.plot) or 0)
    return parser
