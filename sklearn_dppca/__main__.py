"""Command line ``dppca`` (also ``python -m sklearn_dppca``).

``dppca fit DATA --n-components K --epsilon E --delta D --data-norm C -o MODEL``
    Fit a private PCA on a CSV or Parquet table and write the released model
    (components, variances, private mean, privacy spent, parameters) as JSON.
    ``--data-norm auto`` chooses the bound privately; ``--bounds LOW HIGH`` (or
    a CSV file of per-feature bounds) gives public ranges instead, and
    ``--scale`` also maps each column from its range to [0, 1] before the
    fit. ``--fill-missing VALUE`` replaces missing values by a public
    constant. Both maps are stored in the model and applied by ``transform``.
``dppca fit DATA --dask [--scheduler ADDRESS] ...``
    The same fit on tables larger than memory: DATA may then be a glob
    (``'data/part-*.parquet'``) or a directory of Parquet (or CSV) files,
    read partition by partition by Dask, on local threads or on the
    ``dask.distributed`` cluster at ADDRESS; each pass over the rows is one
    reduction on the workers, and the noise is drawn once, here.
``dppca transform MODEL DATA -o OUT``
    Project a table on a saved model; writes CSV or Parquet (``-o -``: CSV on
    standard output). ``--dask``: DATA as for ``fit --dask``, the projection
    written chunk by chunk.
``dppca ledger init|show|verify|head FILE``
    Create a budget ledger (``--epsilon E --delta D``), print its charges,
    spent and remaining budget, check its hash chain (``--anchor N:HASH``:
    also that it extends an anchor kept elsewhere), or print its anchor.
    ``dppca fit --ledger FILE`` charges the fit to it, refused before the
    data is read when it would go over.
``dppca demo [--plot FILE.png]``
    The package's main job on bundled data: private PCA of scikit-learn's
    digits at several privacy budgets, compared with the non-private PCA,
    with every fit charged to one budget accountant; ``--plot`` also saves
    the privacy–utility curve (needs matplotlib).

``dppca --version``
    Print the package's version.

User errors print one line, ``dppca: error: <message>``, on standard error and
exit with status 2; privacy warnings print ``dppca: warning: <message>``,
naming the command's flags (``--seed``, ``--data-norm``) where the estimators
name their parameters. ``fit -v`` reports, as they happen, the reading of the
table and each pass over its rows ("pass K: what"; with ``--dask``, also its
partitions done, as a bar on a terminal), then how many passes there were,
with public values only (file name, rows × columns, partitions, what the pass
computes).
"""

import concurrent.futures
import contextlib
import csv
import os
import re
import sys
import warnings
from types import SimpleNamespace

import numpy as np

from . import _cli_args
from ._cli_args import ESTIMATORS
from ._cli_demo import demo
from ._csv_dialect import csv_dialect
from ._released import FEWER_FEATURES, SCALE_ADVICE, SPARSE_SCALE_ADVICE

# ------------------------------------------------------------------ fit
#: Options that only one estimator takes: option dest -> estimator choice.
_ONLY_FOR = {
    "clip_radius": "coherent",
    "n_iter": "coherent",
    "n_iter_max": "coherent",
    "selection": "coherent",
    "start": "coherent",
    "target": "complex",
}


def _say(args, message):
    """A progress line on standard error, unless ``--quiet``."""
    if not args.quiet:
        print(f"dppca: {message}", file=sys.stderr, flush=True)


def _warn(message):
    from ._cli_io import one_line

    print(f"dppca: warning: {one_line(message)}", file=sys.stderr, flush=True)


#: The estimators' advice to scale the features, in Python terms.
_SCALER_ADVICE = f"(?:{re.escape(SCALE_ADVICE)}|{re.escape(SPARSE_SCALE_ADVICE)})"

#: The estimators' warnings name Python parameters; the CLI user typed flags.
#: Applied in order: the known sentences first, then any parameter name left.
_FLAG_WORDING = (
    (r"\bdata_norm is None, so it was set to\b",
     "--estimate-data-norm set the bound to"),
    (r"\bLeave random_state=None \(operating-system entropy\)",
     "Leave out --seed (the noise then comes from operating-system entropy)"),
    (r"\bdata_norm=\"auto\"", "--data-norm auto"),
    (r"\bbounds=\(lower, upper\)", "--bounds LOW HIGH"),
    (_SCALER_ADVICE, "by their public ranges with --scale and --bounds FILE "
     "(no budget)"),
    (re.escape(FEWER_FEATURES), "a public selection of the columns with "
     "--columns"),
    (r"\w+\(n_components=k(, svd_solver='randomized')?, path='(\w+)'\)",
     r"--path \2"),
    (r"\w+\(n_components=(\d+)(, svd_solver='randomized')?, path='(\w+)'\)",
     r"-k \1 --path \3"),
    (r"\bmemory_limit=(\S+) \* 2\*\*30 admits", r"--memory-limit \1 admits"),
    (r"\(bounds and non_finite='clip' map them\)", "(--bounds clips them)"),
    (r"\bpath='(\w+)'", r"--path \1"),
    (r"n_components \+ n_oversamples =", "n_components + 10 (oversampling) ="),
    (r"\bmemory_limit=\S+ \(", "--memory-limit ("),
    (r"(?<!worker's )\bmemory_limit\b", "--memory-limit"),  # not a Dask worker's
    (r"\brandom_state=(-?\d+)", r"--seed \1"),
    (r"\brandom_state\b", "--seed"),
    (r"\bdata_norm\b", "--data-norm"),
    (r"\bn_components\b", "--n-components"),
    (r"\bclip_radius\b", "--clip-radius"),
    (r"\bn_iter_max\b", "--n-iter-max"),
    (r"\bn_iter\b", "--n-iter"),
    (r"\bselection=\"repetition\"", "--selection repetition"),
)


#: The memory refusal's "fewer Dask threads", which have no flag: how to get them.
_THREADS_ADVICE = (
    "fewer Dask threads, need less)",
    "fewer Dask threads, need less: set DASK_NUM_WORKERS=N in the environment "
    "for N threads, or give --scheduler ADDRESS for a cluster's workers to read "
    "them)")


def in_flags(message):
    """An estimator's message with its Python parameter names as CLI flags.

    >>> in_flags("random_state=3 fixes the noise")
    '--seed 3 fixes the noise'
    """
    for pattern, flag in _FLAG_WORDING:
        message = re.sub(pattern, flag, message)
    return message


def _verbose(args, message):
    """A progress line on standard error with ``-v``, as it happens."""
    if args.verbose and not args.quiet:
        _say(args, message)


def _read_reporting(args, read_table, dialect, sniff):
    """``read_table(args.data)``; with ``-v`` a line before and one after.

    Both name public values only: the file, then its rows × columns.
    """
    _verbose(args, f"reading {args.data}")
    frame = read_table(args.data, numeric_header=args.numeric_header,
                       dialect=dialect, sniff=sniff)
    _verbose(args, f"read {frame.shape[0]} rows x {frame.shape[1]} columns "
                   f"from {args.data}")
    return frame


def _read_matrix(args, columns, hint, fill=None, missing_hint=None, check=None,
                 inspect=None):
    """The chosen columns of DATA as float64 rows, with ``-v`` progress.

    Returns ``(X, names, lazy)``: in memory, ``X`` a NumPy array (CSR for
    ``.npz``) and ``lazy`` None; with ``--dask``, ``X`` a Dask array and
    ``lazy`` the :class:`~sklearn_dppca._cli_dask.LazyMatrix` (or, for
    ``.npz`` files, :class:`~sklearn_dppca._cli_dask.LazySparse`) it came
    from (``check``: its chunks' own checks). ``inspect(frame)``, if given,
    is called on the table read (its columns only are looked at) before its
    matrix is made. Public values only are reported: the files, the rows ×
    columns, the number of partitions.
    """
    from ._cli_io import is_sparse_file, numeric_matrix, read_sparse, read_table

    dialect, sniff = csv_dialect(args, args.data)
    if dialect["sep"] in ";\t" and dialect["decimal"] == ".":  # a public hint
        hint += (f" (with --sep {dialect['sep']!r}, decimals written 1,5 need "
                 "--decimal ',')")

    sparse_data = is_sparse_file(args.data)  # .npz: lists a directory or glob
    if sparse_data and args.dask:  # CSR chunks, one per file
        from ._cli_dask import LazySparse, table_files

        _verbose(args, f"reading {args.data} with Dask")
        files, _ = table_files(args.data)
        lazy = LazySparse(files, columns, args.data, fill=fill,
                          missing_hint=missing_hint, check=check)
        if inspect is not None:
            inspect(SimpleNamespace(columns=lazy.names))
        _verbose(args, f"read {lazy.n_rows} rows x {len(lazy.names)} columns "
                       f"in {_partitions(lazy, len(files))} from {args.data}")
        return lazy.X, lazy.names, lazy
    if sparse_data:  # a SciPy sparse matrix: CSR, never dense
        _refuse_many_files(args.data)
        _verbose(args, f"reading {args.data}")
        X, names = read_sparse(args.data, columns, fill=fill,
                               missing_hint=missing_hint)
        # rows x columns only: how many values are stored depends on the data
        _verbose(args, f"read {X.shape[0]} rows x {X.shape[1]} columns from "
                       f"{args.data}")
        if inspect is not None:
            inspect(SimpleNamespace(columns=names))
        return X, names, None
    if not args.dask:
        _refuse_many_files(args.data)
        frame = _read_reporting(args, read_table, dialect, sniff)
        if inspect is not None:
            inspect(frame)
        X, names = numeric_matrix(frame, columns, args.data, hint=hint, fill=fill,
                                  missing_hint=missing_hint, dialect=dialect)
        return X, names, None
    from ._cli_dask import LazyMatrix, LazyTable

    _verbose(args, f"reading {args.data} with Dask")
    table = LazyTable(args.data, numeric_header=args.numeric_header,
                      dialect=dialect, sniff=sniff)
    if inspect is not None:
        inspect(table.frame)
    lazy = LazyMatrix(table, columns, args.data, hint=hint, fill=fill,
                      missing_hint=missing_hint, check=check)
    _verbose(args, f"read {lazy.n_rows} rows x {len(table.frame.columns)} columns "
                   f"in {_partitions(lazy, table.n_files)} from {args.data}")
    return lazy.X, lazy.names, lazy


def _partitions(lazy, n_files):
    """``"3 partitions (2 files)"``: how DATA was cut (public: the files);
    ``"2 files"`` where the partitions are not public (uncompressed CSV, cut
    by bytes: ``lazy.partitions`` None)."""
    def count(n, what):
        return f"{n} {what}{'' if n == 1 else 's'}"

    if lazy.partitions is None:
        return count(n_files, "file")
    return f"{count(lazy.partitions, 'partition')} ({count(n_files, 'file')})"


def _refuse_dense_maps(args):
    """``--scale`` maps each column's zero to a non-zero value: refused on a
    sparse matrix before it is read (``transform`` refuses a model fitted
    with it the same way)."""
    from ._cli_io import is_sparse_file

    if args.scale and is_sparse_file(args.data):
        raise ValueError(
            f"--scale maps each column of {args.data} from its --bounds to [0, 1], "
            "which makes a sparse matrix dense: scale it yourself, keeping zeros "
            "at zero (or give --bounds alone)")


def _refuse_many_files(path):
    """A directory or a glob is read with ``--dask`` only: say so."""
    import glob

    pattern = path != "-" and not os.path.exists(path) and glob.has_magic(path)
    if pattern or os.path.isdir(path):
        raise ValueError(f"{path} names several files: read them with --dask")


def _check_dask_options(args):
    """``--scheduler`` needs ``--dask``, which needs Dask: fail before the
    data is read (and before any budget is spent)."""
    if args.scheduler is not None and not args.dask:
        raise ValueError(f"--scheduler {args.scheduler} runs the computation on "
                         "that Dask cluster: add --dask")
    if args.dask:
        from ._cli_dask import require_dask

        require_dask(args.scheduler)


def _scheduler(args):
    """``--scheduler``'s client for the block (closed after it), if any."""
    if not args.dask:
        return contextlib.nullcontext()
    from ._cli_dask import scheduler

    if args.scheduler is not None:
        _verbose(args, f"connecting to the Dask scheduler at {args.scheduler}")
    return scheduler(args.scheduler)


def _fit_reporting_passes(estimator, X, args, partitions=True):
    """``estimator.fit(X)``, announcing each pass over the rows with ``-v``
    (and its partitions done, if ``partitions``: their number is public).

    The estimators' ``fit`` takes no progress hook, so this does what
    scikit-learn's fit context does (validate the parameters once, not again
    in nested calls) and calls the shared ``_fit`` with one. Returns the
    :class:`~sklearn_dppca._cli_progress.PassProgress`, which holds the
    number of passes (counted with ``-q`` too).
    """
    from sklearn import config_context

    from ._cli_progress import PassProgress

    progress = PassProgress(args.verbose, args.quiet, partitions=partitions)
    estimator._validate_params()
    with config_context(skip_parameter_validation=True):
        # Estimators' own verbose output (print) goes with the progress, so
        # that ``-o -`` keeps standard output for the model alone.
        with contextlib.redirect_stdout(sys.stderr):
            try:
                estimator._fit(X, progress=progress)
            finally:
                progress.close()  # a bar left by a failed pass
    return progress


def _refuse_idle_coherent_options(args):
    """Refuse a coherent-only option that would change nothing (the
    estimator ignores it there, as its docstring says): a flag given
    should act, as the other estimators' options refused above."""
    fixed = all(getattr(args, dest) not in (None, "auto")
                for dest in ("clip_radius", "n_iter"))
    if args.n_iter_max is not None and args.selection != "repetition":
        raise ValueError("--n-iter-max caps the grid of --selection repetition "
                         "only: give that too, or leave --n-iter-max out")
    if args.selection == "repetition" and (fixed or args.start == "random"):
        why = ("--clip-radius and --n-iter are both fixed" if fixed
               else "--start random chooses neither")
        raise ValueError(f"--selection chooses --clip-radius and --n-iter, but {why}: "
                         "leave --selection out")


def _make_estimator(args):
    import sklearn_dppca

    for dest, choice in _ONLY_FOR.items():
        if getattr(args, dest) is not None and args.estimator != choice:
            option = "--" + dest.replace("_", "-")
            raise ValueError(f"{option} applies only to --estimator {choice}")
    if args.data_norm is None and not args.estimate_data_norm and not args.bounds:
        raise ValueError("give --data-norm C, --data-norm auto, --bounds or "
                         "--estimate-data-norm (NOT private)")
    if args.estimate_data_norm and args.bounds:
        raise ValueError("--estimate-data-norm takes the norm bound from the data, "
                         "--bounds from the public box: give one of them")
    if args.scale and not args.bounds:
        raise ValueError("--scale maps each column from its public range to "
                         "[0, 1]: give the ranges with --bounds FILE (or --bounds "
                         "LOW HIGH for all columns)")
    if args.fill_missing == "mid" and not args.bounds:
        raise ValueError("--fill-missing mid fills the middle of each column's "
                         "public range: give the ranges with --bounds")
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
        _refuse_idle_coherent_options(args)
        params["verbose"] = 0 if args.quiet else args.verbose
        for dest in ("clip_radius", "n_iter", "n_iter_max", "selection", "start"):
            if getattr(args, dest) is not None:
                params[dest] = getattr(args, dest)
    elif args.estimator == "complex" and args.target is not None:
        params["target"] = args.target
    estimator = getattr(sklearn_dppca, ESTIMATORS[args.estimator])
    if args.path is not None:
        paths = estimator._parameter_constraints["path"][0].options
        if args.path not in paths:
            raise ValueError(f"--path {args.path} does not apply to --estimator "
                             f"{args.estimator} (its: {', '.join(sorted(paths))})")
        params["path"] = args.path
        if args.path in ("matrix_free", "noisy_power") and args.estimator != "coherent":
            if not isinstance(args.n_components, int):  # review 83 F4
                raise ValueError(f"--path {args.path} needs an integer --n-components "
                                 "(a fraction needs every eigenvalue: --path dense)")
            params["svd_solver"] = "randomized"  # as the refusals advise
    if args.memory_limit is not None:
        params["memory_limit"] = (args.memory_limit if args.memory_limit == "auto"
                                  else args.memory_limit * 2.0**30)
    return estimator(**params)


def fit_command(args):
    """``dppca fit``: fit on a table, write the released model as JSON."""
    from ._cli_io import MISSING_HINT, check_writable, is_sparse_file, require_pandas
    from ._cli_model import model_to_dict
    from ._released import FeatureScaleWarning, NoisyReleaseWarning
    from .privacy import PrivacyLeakWarning

    require_pandas("fit")
    _check_dask_options(args)
    _refuse_dense_maps(args)
    estimator = _make_estimator(args)  # bad options fail before the data is read
    csv_dialect(args, args.data)
    check_writable(args.output)  # and before any budget is spent
    _refuse_overwrite(args)
    if args.data == "-" and args.bounds == ["-"]:
        raise ValueError("DATA and --bounds both read standard input: give "
                         "one of them as a file")
    ledger = _use_ledger(args, estimator)
    columns = None
    if args.columns:
        # NAME,NAME,... as a CSV line: a quoted name may hold a comma
        columns = [c.strip() for arg in args.columns
                   for c in next(csv.reader([arg], skipinitialspace=True), [])]
        columns = [c for c in columns if c]
        if not columns:
            raise ValueError("--columns names no column: give NAME,NAME,...")
    loaded = _load_bounds(args, columns)  # as do bad bounds (review 56)
    fill = args.fill_missing
    if fill == "mid":  # each column's public midpoint, once the columns are known
        def fill(names):
            lower, upper = _per_column(_read_bounds(args, loaded, names), names)
            return (lower / 2.0 + upper / 2.0).tolist()  # finite: no overflow
    with _scheduler(args):
        # with --bounds, an infinite value would be clipped into the box
        # before the fit's own check sees it: refused as each chunk is read
        X, names, lazy = _read_matrix(
            args, columns, hint="choose the numeric ones with --columns NAME,NAME,...",
            fill=fill, missing_hint=MISSING_HINT,
            check="infinite" if args.bounds else None,
        )
        n_samples, n_features = X.shape
        if callable(fill):
            fill = fill(names)
        preprocessing = None
        if args.bounds:
            bounds = _read_bounds(args, loaded, names)
            if args.scale:
                X, bounds, scale = _scale_by_bounds(X, bounds, names)
                preprocessing = {"scale": scale}
            estimator.set_params(bounds=bounds)
        if fill is not None:
            preprocessing = dict(preprocessing or {}, fill_missing=fill)
        if args.delta >= 1.0 / n_samples:
            _warn(f"--delta {args.delta:g} is not well below 1/n = "
                  f"{1.0 / n_samples:.3g} (n={n_samples} rows): a fit may then "
                  "reveal whole rows")
        norm = args.data_norm if isinstance(args.data_norm, str) else (
            "from the bounds" if args.data_norm is None and args.bounds else
            "from the data" if args.data_norm is None else f"{args.data_norm:g}")
        scaled = (", each column scaled from its --bounds to [0, 1]"
                  if args.scale else "")
        _say(args, f"fitting {type(estimator).__name__} "
                   f"(n_components={args.n_components}, epsilon={args.epsilon:g}, "
                   f"delta={args.delta:g}, data_norm={norm}) on {n_samples} rows x "
                   f"{n_features} columns of {args.data}{scaled}")
        charges = estimator.accountant.n_charges
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                progress = _fit_reporting_passes(
                    estimator, X, args,
                    partitions=lazy is None or lazy.partitions is not None)
            except (ValueError, TypeError, OSError, MemoryError) as exc:
                error = _fit_error(exc, args, estimator, charges, lazy)
                if error is exc:
                    raise
                raise error from exc
            except KeyboardInterrupt:  # Ctrl-C: said charged where it was
                if estimator.accountant.n_charges == charges:
                    raise
                raise KeyboardInterrupt(_charge_stays(args)) from None
    _verbose(args, progress.summary())
    leaks, noisy, seen = [], [], set()
    sparse_rows = is_sparse_file(args.data)
    for w in caught:
        message = str(w.message)
        if issubclass(w.category, (FeatureScaleWarning, NoisyReleaseWarning)):
            # fitted on an array: the columns' names
            message = re.sub(r"\bfeature (\d+)\b",
                             lambda m: f"{names[int(m.group(1))]!r}", message)
        if args.scale:  # already on a common scale: not advice to give
            message = re.sub(" or put the features on a common scale "
                             + _SCALER_ADVICE, "", message)
            message = re.sub("Put the features on a common scale "
                             + _SCALER_ADVICE + ", tighten", "Tighten", message)
        if sparse_rows:  # --scale is refused there: say what works instead
            message = re.sub(_SCALER_ADVICE, "by scaling the matrix's columns "
                             "yourself, keeping zeros at zero (no budget)", message)
        if message in seen:
            continue
        seen.add(message)
        message = in_flags(message)  # printed and stored in the flags' words
        if issubclass(w.category, PrivacyLeakWarning):
            leaks.append(message)
        elif issubclass(w.category, (FeatureScaleWarning, NoisyReleaseWarning)):
            noisy.append(message)
        _warn(message)
    # public values: how the rows were read (partitions: fixed by the files)
    reading = {"passes": progress.passes, "all_passes_counted": progress.exact,
               "partitions": None if lazy is None else lazy.partitions}
    model = model_to_dict(estimator, names, leaks, preprocessing, reading,
                          release_warnings=noisy)
    if args.bounds:  # the public box the rows were clipped into, per column
        lower, upper = _per_column(bounds, names)
        model["bounds"] = {"lower": np.asarray(lower).tolist(),
                           "upper": np.asarray(upper).tolist()}
        if args.scale:
            model["in_original_units"] = _in_original_units(estimator, scale)
    _save_charged(model, args)
    eps, delta = estimator.privacy_spent_
    where = "standard output" if args.output == "-" else args.output
    _say(args, f"done: n_components_={estimator.n_components_}, "
               f"spent epsilon={eps:.6g} at delta={delta:g}"
               f"{'' if not leaks else ' (NOT private, see warnings)'}"
               f"{' (mostly noise or one feature, see warnings)' if noisy else ''}"
               "; "
               f"model written to {where}")
    _report_ledger(args, ledger)
    return 0


#: A memory refusal of a table read in memory: the estimator refuses before
#: it reads the rows, but pandas has read the whole table by then.
_READ_IN_MEMORY = ("The fit was refused before reading the data or spending "
                   "any budget.", "The fit was refused before spending any "
                   "budget (the table was read into memory first: --dask reads "
                   "it in chunks).")


def _fit_error(exc, args, estimator, charges, lazy):
    """The error of a fit stopped by ``exc``: in the flags' words (e.g.
    n_components too large), a NaN or inf in a chunk with the columns named
    (``lazy``), a memory refusal with how to run fewer threads; where the fit
    had been charged (``charges`` before it: with ``--dask``, later rows are
    read after the charge), saying so (:func:`_charge_stays`: public)."""
    if isinstance(exc, ValueError):
        try:
            if lazy is not None:
                lazy.name_bad_values(exc)
            exc = ValueError(in_flags(str(exc)))
        except ValueError as named:
            exc = named
    elif isinstance(exc, MemoryError):
        message = str(exc).replace(*_THREADS_ADVICE)
        if lazy is None:  # pandas read the table first (review 97 M1)
            message = message.replace(*_READ_IN_MEMORY)
        exc = MemoryError(in_flags(message))
    if estimator.accountant.n_charges == charges:
        return exc
    return ValueError(f"{_message(exc)} ({_charge_stays(args)})")


def _save_charged(model, args):
    """Write the charged fit's model to ``-o``; a failure (a closed standard
    output, a full disk) is one error line naming ``-o`` and saying that the
    charge stays (review 97 F4, M2)."""
    from ._cli_io import one_line
    from ._cli_model import save_model

    try:
        save_model(model, args.output)
    except BrokenPipeError:
        _silence_stdout()
        raise ValueError("standard output was closed before the model was "
                         f"written ({_charge_stays(args)})") from None
    except OSError as exc:
        raise ValueError(f"{args.output}: cannot write the model: "
                         f"{exc.strerror or one_line(exc)} "
                         f"({_charge_stays(args)})") from None


def _silence_stdout():
    """Point standard output at the null device, so that nothing more is
    written to a closed pipe (Python's flush at exit would complain)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _charge_stays(args):
    return (f"the fit had been charged epsilon={args.epsilon:g}, "
            f"delta={args.delta:g}; that charge stays")


# --------------------------------------------------------------- ledger
def _refuse_overwrite(args):
    """A model file is overwritten only with ``--force``: a fit into an
    existing file is more often a mistake than a wish to spend again; and
    never where it is a file the fit reads: the data's, its ledger, its
    ``--bounds`` file."""
    bounds = args.bounds if args.bounds and len(args.bounds) == 1 else []
    _refuse_output_among_inputs(args, [*bounds, *filter(None, [args.ledger])])
    if args.output != "-" and os.path.exists(args.output) and not args.force:
        raise ValueError(f"{args.output} already exists; pass --force to "
                         "overwrite it")


def _refuse_output_among_inputs(args, others):
    """Refuse ``-o`` where it names one of the files the command reads: DATA
    (with ``--dask``, every file its glob or directory names) or
    ``others``."""
    if args.output == "-" or not os.path.exists(args.output):
        return
    inputs = [args.data, *others]
    if getattr(args, "dask", False) and args.data != "-":
        from ._cli_dask import table_files

        inputs += table_files(args.data)[0]
    if any(os.path.samefile(args.output, f) for f in inputs if os.path.isfile(f)):
        raise ValueError(f"-o {args.output} is an input of this command: "
                         "writing it would overwrite it; name another file")


def _use_ledger(args, estimator):
    """The ``--ledger`` accountant, checked against the fit before any data
    is read; ``None`` without ``--ledger``."""
    if args.ledger is None:
        return None
    from .privacy import BudgetAccountant, gdp_mu

    # a file name that is not UTF-8 holds surrogates: written with escapes
    label = (f"dppca fit {args.data}".encode("utf-8", "backslashreplace")
             .decode("utf-8") if args.label is None else args.label)
    ledger = BudgetAccountant(path=args.ledger, label=label)
    # Exact for the GDP-accounted fits; a --selection repetition fit (an
    # RDP curve) is checked exactly again when it is charged.
    ledger.check(mu=gdp_mu(args.epsilon, args.delta))
    estimator.set_params(accountant=ledger)
    return ledger


def _report_ledger(args, ledger):
    if ledger is not None:
        eps, delta = ledger.spent
        _say(args, f"ledger {ledger.path}: {ledger.n_charges} charge(s), spent "
                   f"epsilon={eps:.6g} of {ledger.epsilon:g} at delta={delta:g}")


def _load_bounds(args, columns):
    """``--bounds`` read and checked before DATA is: ``(low, high)`` numbers,
    or ``(names, cells)`` of a file whose header names the features (at least
    the fitted ones) and whose two rows are their lower and upper bounds;
    None without ``--bounds``. Public values, refused with the flag, the file
    and the columns named (:func:`_check_bounds`): the two numbers, and the
    file's columns that ``columns`` (``--columns``) chooses; without it, the
    columns of DATA's header when it is read (:func:`_read_bounds`). A file's
    other columns are not read (a shared file may hold ``n/a`` for them)."""
    values = args.bounds
    if not values:
        return None
    if len(values) == 1:
        loaded = _bounds_file(values[0], args)
        if columns:
            _read_bounds(args, loaded, columns)
        return loaded
    if len(values) != 2:
        raise ValueError("--bounds takes two numbers LOW HIGH or one CSV file")
    try:
        lower, upper = (np.array([float(v)]) for v in values)
    except ValueError:
        raise ValueError(f"--bounds: expected two numbers LOW HIGH or one CSV "
                         f"file, got {' '.join(values)!r}") from None
    _check_bounds("--bounds", ["every column"], lower, upper, args.scale)
    return float(lower[0]), float(upper[0])


def _bounds_file(path, args):
    """``(names, cells)`` of a ``--bounds`` file: its header's names, each
    once (a CSV's header read as written: pandas renames a repeated name),
    and its two rows as text or numbers; a CSV read with ``--sep`` and
    ``--decimal``."""
    from ._cli_io import quote_names, read_table, table_format

    dialect, sniff = csv_dialect(args, path)
    try:  # public: no row of data
        frame = read_table(path, numeric_header=True, dialect=dialect,
                           sniff=sniff)
    except FileNotFoundError:
        raise ValueError(f"--bounds {path}: no such file") from None
    except ValueError as exc:  # it names the file
        raise ValueError(f"--bounds {exc}") from None
    if frame.shape[0] != 2:
        raise ValueError(f"--bounds {path}: expected two rows (lower, upper), "
                         f"got {frame.shape[0]}")
    if path != "-" and table_format(path) == "csv":  # standard input: read once
        import pandas as pd

        header = [str(n) for n in pd.read_csv(path, header=None, nrows=1,
                                              dtype=str, **dialect).iloc[0]]
        repeated = sorted({n for n in header if header.count(n) > 1})
        if repeated:
            raise ValueError(f"--bounds {path}: the column(s) {quote_names(repeated)} "
                             "appear more than once in its header")
    return [str(n) for n in frame.columns], frame


def _check_bounds(where, names, lower, upper, scale):
    from ._cli_io import quote_names

    def refuse(which, what):
        if which.any():
            raise ValueError(f"{where}: the bound(s) of "
                             f"{quote_names([n for n, w in zip(names, which) if w])} "
                             f"{what}")

    refuse(np.isnan(lower) | np.isnan(upper), "are missing")
    refuse(np.isinf(lower) | np.isinf(upper), "are not finite: give finite ranges")
    refuse(lower > upper, "are reversed: lower above upper")
    if (lower == upper).all():
        raise ValueError(f"{where}: every range is empty (lower = upper): the box "
                         "holds one point, and nothing to fit")
    if scale:
        refuse(lower == upper, "make an empty range (lower = upper): nothing to "
               "scale by (--scale)")
        with np.errstate(over="ignore"):
            refuse(np.isinf(upper - lower), "make a range wider than float64 "
                   "holds: nothing to scale by (--scale)")


def _read_bounds(args, loaded, names):
    """The bounds of the columns ``names`` (checked), from
    :func:`_load_bounds`: the two numbers, or per-column arrays. A name also
    matches the one column of the file written with spaces around it."""
    if not isinstance(loaded[0], list):  # LOW HIGH, checked
        return loaded
    from ._cli_io import as_written, quote_names

    file_names, frame = loaded
    where = f"--bounds {args.bounds[0]}"
    index = {n: i for i, n in enumerate(file_names)}
    written = as_written(names, file_names)
    missing = [str(n) for n, w in zip(names, written) if w not in index]
    if missing:
        raise ValueError(f"{where}: no bounds for the columns {quote_names(missing)}. "
                         "Give their ranges in the file, or fit only the columns "
                         "it covers with --columns NAME,NAME,... (a label "
                         "column, for one, is not a feature)")
    chosen = frame.iloc[:, [index[w] for w in written]]
    try:
        table = chosen.to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: the bounds of the chosen columns must be "
                         "numbers") from None
    _check_bounds(where, [str(n) for n in names], table[0], table[1], args.scale)
    return table[0], table[1]


def _per_column(bounds, names):
    """``--bounds`` (two numbers, or per-column arrays) as two arrays of one
    value per column."""
    return (np.broadcast_to(np.asarray(side, dtype=np.float64), (len(names),))
            for side in bounds)


def _scale_by_bounds(X, bounds, names):
    """``--scale``: ``X`` with each column mapped from its public range to
    [0, 1] (:class:`~sklearn_dppca.preprocessing.PublicScaler`), the box the
    estimator then clips into, and the map as the model stores it."""
    from .preprocessing import PublicScaler

    lower, upper = _per_column(bounds, names)  # checked by _load_bounds
    # stateless: fitted on the ranges alone (a row of zeros gives d)
    scaler = PublicScaler((lower, upper)).fit(np.zeros((1, len(names))))
    scale = {"lower": lower.tolist(), "upper": upper.tolist()}
    return _map_rows(scaler.transform, X, len(names)), (0.0, 1.0), scale


def _in_original_units(estimator, scale):
    """``--scale``: the released ``mean_`` mapped back from [0, 1] to each
    column's public range (post-processing), as the model reports it beside
    the scaled one."""
    lower, upper = (np.asarray(scale[side], dtype=np.float64)
                    for side in ("lower", "upper"))
    return {"mean_": (lower + np.asarray(estimator.mean_, dtype=np.float64)
                      * (upper - lower)).tolist()}


def _map_rows(function, X, n_columns):
    """``function(X)``, a map of rows; on a Dask array, chunk by chunk (the
    same code on each, so the same values as in memory)."""
    from ._dask import is_dask_collection

    if is_dask_collection(X):
        return X.map_blocks(function, dtype=np.float64,
                            chunks=(X.chunks[0], (n_columns,)))
    return function(X)


# ------------------------------------------------------------ transform
def transform_command(args):
    """``dppca transform``: project a table on a saved model."""
    from ._cli_io import (
        as_written,
        check_writable,
        is_sparse_file,
        quote_names,
        require_pandas,
        table_format,
        write_table,
    )
    from ._cli_model import load_model

    require_pandas("transform")
    _check_dask_options(args)
    csv_dialect(args, args.data)
    model = load_model(args.model)
    if model.scale_ranges is not None and is_sparse_file(args.data):
        raise ValueError(
            f"the model was fitted with --scale, which maps each column's zero "
            f"to a non-zero value: {args.data}, a sparse matrix, would become "
            "dense; give it as a table")
    if args.output != "-":
        _refuse_output_among_inputs(args, [args.model])
        table_format(args.output)
        check_writable(args.output)

    def match(frame):  # by stripped names where exact ones differ, as --columns
        written = as_written(model.feature_names, list(frame.columns))
        extra = [c for c in frame.columns if c not in written]
        missing = [n for n, c in zip(model.feature_names, written)
                   if c not in frame.columns]
        if missing:
            raise ValueError(
                f"{args.data} lacks {len(missing)} of the model's "
                f"{len(model.feature_names)} feature column(s): "
                f"{quote_names(missing)}"
            )
        if extra:
            _say(args, f"ignoring column(s) not in the model: {quote_names(extra)}")

    with _scheduler(args):
        X, _, lazy = _read_matrix(
            args, model.feature_names, hint="the model was fitted on numeric columns",
            fill=model.fill_missing, missing_hint="the model was fitted without "
            "--fill-missing: drop or fill them first", check="all", inspect=match,
        )
        Z = _map_rows(model.transform, X, model.n_components_)
        if lazy is None:
            write_table(Z, model.get_feature_names_out(), args.output)
        else:
            from ._cli_dask import write_lazy_table

            try:
                write_lazy_table(Z, model.get_feature_names_out(), args.output)
            except ValueError as exc:  # NaN or inf in a chunk: name the columns
                lazy.name_bad_values(exc)
                raise
    where = "standard output" if args.output == "-" else args.output
    _say(args, f"wrote {Z.shape[0]} rows x {Z.shape[1]} components to {where}")
    return 0


# --------------------------------------------------------------- parser
def build_parser():
    """The ``dppca`` parser (:func:`~sklearn_dppca._cli_args.build_parser`)."""
    return _cli_args.build_parser(fit_command, transform_command, demo)


def _message(exc):
    from ._cli_io import one_line

    if isinstance(exc, OSError) and exc.strerror and exc.filename:
        return f"{exc.filename}: {exc.strerror}"
    return one_line(exc) or type(exc).__name__


def _error(exc):
    print(f"dppca: error: {_message(exc)}", file=sys.stderr, flush=True)
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
        _silence_stdout()
        return 1
    except KeyboardInterrupt as exc:
        print(f"dppca: interrupted{f' ({exc})' if str(exc) else ''}", file=sys.stderr)
        return 130
    except (ValueError, TypeError, OSError, ImportError, MemoryError) as exc:
        # BudgetExceededError, pandas' parser errors and scikit-learn's
        # InvalidParameterError are all ValueErrors; a lost Dask cluster's
        # connection an OSError.
        return _error(exc)
    except Exception as exc:
        # a lost Dask scheduler (CancelledError) or workers that died running
        # a task (distributed's KilledWorker): the cluster's failure, named
        if not (isinstance(exc, concurrent.futures.CancelledError)
                or type(exc).__module__.startswith("distributed")):
            raise
        return _error(ValueError(
            f"the Dask cluster stopped the computation ({type(exc).__name__}: "
            f"{exc}); a fit stopped after its charge stays charged"))


if __name__ == "__main__":
    sys.exit(main())
