"""``dppca fit --dask`` and ``transform --dask``: Parquet files larger than
memory, streamed through Dask (local threads or a distributed cluster)."""

import io
import json
import os
import types

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyarrow")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

# Dask's own Parquet reader, on pandas 3.1
pytestmark = pytest.mark.filterwarnings(
    "ignore:The inplace keyword in DataFrame.reset_index")

from sklearn_dppca import BudgetAccountant, _dask  # noqa: E402
from sklearn_dppca._cli_progress import PassProgress  # noqa: E402

from .test_cli import assert_one_error_line, run  # noqa: E402

FEATURES = ["a", "b", "c", "d", "e"]
N_FILES, N_ROWS = 3, 400
FIT = ["-k", "2", "--epsilon", "1.5", "--delta", "1e-6", "--seed", "0"]


def make_parts(seed=0):
    rng = np.random.default_rng(seed)
    return [
        pd.DataFrame(rng.normal(size=(N_ROWS, len(FEATURES))) * [1.0, 0.6, 0.3, 0.1,
                                                                 0.05] + 0.2,
                     columns=FEATURES)
        for _ in range(N_FILES)
    ]


def write_parts(folder, parts):
    folder.mkdir(parents=True, exist_ok=True)
    for i, part in enumerate(parts):
        part.to_parquet(folder / f"part-{i}.parquet", index=False)
    return folder


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """3 Parquet files of 400 rows x 5 columns, and the same rows as one CSV."""
    root = tmp_path_factory.mktemp("tables")
    parts = make_parts()
    write_parts(root / "parts", parts)
    pd.concat(parts).to_csv(root / "all.csv", index=False)
    return root


@pytest.fixture(scope="module")
def cluster():
    """An in-process cluster: one worker, two threads (started once)."""
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=":0") as cluster:
        yield cluster


def fitted(path):
    model = json.loads(path.read_text())
    return model, {k: np.asarray(v) if isinstance(v, list) else v
                   for k, v in model["attributes"].items()}


def assert_same_release(one, other):
    for name in ("components_", "explained_variance_", "mean_", "noise_variance_"):
        np.testing.assert_allclose(one[name], other[name], rtol=1e-10, atol=1e-10,
                                   err_msg=name)


def test_fit_on_a_cluster_equals_the_in_memory_fit(tables, cluster, tmp_path,
                                                   capsys):
    ledger = tmp_path / "budget.db"
    rc = run(capsys, "ledger", "init", ledger, "--epsilon", 3, "--delta", 1e-6)[0]
    assert rc == 0
    remote, local = tmp_path / "remote.json", tmp_path / "local.json"
    rc, _, err = run(capsys, "fit", tables / "parts" / "part-*.parquet", "--dask",
                     "--scheduler", cluster.scheduler_address, *FIT,
                     "--data-norm", 3, "--ledger", ledger, "-v", "-o", remote)
    assert rc == 0, err
    rc, _, err_local = run(capsys, "fit", tables / "all.csv", *FIT, "--data-norm", 3,
                           "-v", "-o", local)
    assert rc == 0, err_local
    (model, attributes), (_, expected) = fitted(remote), fitted(local)
    assert_same_release(attributes, expected)
    assert attributes["n_samples_"] == N_FILES * N_ROWS
    assert BudgetAccountant(path=ledger).n_charges == 1
    assert model["reading"] == {"passes": 2, "all_passes_counted": True,
                                "partitions": N_FILES}
    # -v: the numbered passes, their partitions, the count; line by line
    assert "\r" not in err and all(line.startswith("dppca: ")
                                   for line in err.splitlines())
    lines = err.splitlines()
    for expected_line in (
        f"dppca: read {N_FILES * N_ROWS} rows x 5 columns in {N_FILES} partitions "
        f"({N_FILES} files) from {tables / 'parts' / 'part-*.parquet'}",
        "dppca: pass 1: row norms and the clipped sum for the private mean",
        f"dppca: pass 1: {N_FILES}/{N_FILES} partitions",
        "dppca: pass 2: Gram matrix of the centred, clipped rows",
        f"dppca: pass 2: {N_FILES}/{N_FILES} partitions",
        "dppca: read the rows in 2 passes",
    ):
        assert expected_line in lines, err
    assert "dppca: read the rows in 2 passes" in err_local.splitlines()
    assert "pass 3" not in err


def test_progress_shows_no_value_of_the_rows(tables, cluster, tmp_path, capsys):
    """Public values only: a table of the same shape, one row made far larger,
    prints the same progress; no exact statistic of the rows appears."""
    other = write_parts(tmp_path / "other", make_parts(seed=1))
    big = pd.read_parquet(other / "part-1.parquet")
    big.iloc[7] = 1e6
    big.to_parquet(other / "part-1.parquet", index=False)

    def progress(folder, *extra):
        rc, _, err = run(capsys, "fit", folder, "--dask", "--scheduler",
                         cluster.scheduler_address, *FIT, *extra, "-v",
                         "-o", tmp_path / "m.json", "--force")
        assert rc == 0, err
        return [line.replace(str(folder), "DATA") for line in err.splitlines()
                if not line.startswith(("dppca: warning:", "dppca: done:"))]

    assert progress(tables / "parts", "--data-norm", 3) == progress(
        other, "--data-norm", 3)
    err = "\n".join(progress(tables / "parts", "--data-norm", "auto"))
    X = pd.concat(make_parts()).to_numpy()
    secrets = [np.linalg.norm(X, axis=1).max(), *X.mean(axis=0), X.sum()]
    for value in secrets:
        for text in (f"{value:g}", f"{value:.4g}", f"{value:.3f}", repr(value)):
            assert text not in err, (text, err)
    assert "read the rows in" in err and "passes" in err


def test_a_directory_and_local_threads(tables, tmp_path, capsys):
    """DATA a directory, no --scheduler: Dask's local threads; the same release."""
    model = tmp_path / "dir.json"
    rc, _, err = run(capsys, "fit", tables / "parts", "--dask", *FIT,
                     "--data-norm", 3, "-o", model)
    assert rc == 0, err
    rc, _, err = run(capsys, "fit", tables / "all.csv", *FIT, "--data-norm", 3,
                     "-o", tmp_path / "local.json")
    assert rc == 0, err
    assert_same_release(fitted(model)[1], fitted(tmp_path / "local.json")[1])
    assert "partitions" not in err  # not a terminal, no -v: start and end only


def test_scheduler_needs_dask(tables, tmp_path, capsys):
    ledger = tmp_path / "budget.db"
    run(capsys, "ledger", "init", ledger, "--epsilon", 3, "--delta", 1e-6)
    rc, _, err = run(capsys, "fit", tables / "all.csv", *FIT, "--data-norm", 3,
                     "--scheduler", "tcp://127.0.0.1:8786", "--ledger", ledger,
                     "-o", tmp_path / "m.json")
    assert rc == 2
    assert err == ("dppca: error: --scheduler tcp://127.0.0.1:8786 runs the "
                   "computation on that Dask cluster: add --dask\n")
    assert BudgetAccountant(path=ledger).n_charges == 0
    assert not (tmp_path / "m.json").exists()
    # several files without --dask: say how to read them
    rc, _, err = run(capsys, "fit", tables / "parts", *FIT, "--data-norm", 3,
                     "-o", tmp_path / "m.json")
    assert rc == 2 and "read them with --dask" in err


def test_checks_of_the_columns_and_values(tables, tmp_path, capsys):
    """As in memory: non-numeric columns named; missing and infinite values
    named with what to do, before any charge."""
    parts = make_parts()
    for part in parts:
        part["city"] = "x"
    write_parts(tmp_path / "text", parts)
    rc, _, err = run(capsys, "fit", tmp_path / "text", "--dask", *FIT,
                     "--data-norm", 3, "-o", tmp_path / "m.json")
    assert rc == 2 and "non-numeric column(s) 'city'; choose the numeric ones with " \
        "--columns" in err
    rc, _, err = run(capsys, "fit", tmp_path / "text", "--dask", *FIT,
                     "--data-norm", 3, "--columns", ",".join(FEATURES),
                     "-o", tmp_path / "m.json")
    assert rc == 0, err

    parts = make_parts()
    parts[1].loc[5, "c"] = np.nan
    parts[2].loc[9, "e"] = np.inf
    write_parts(tmp_path / "holes", parts)
    ledger = tmp_path / "budget.db"
    run(capsys, "ledger", "init", ledger, "--epsilon", 9, "--delta", 1e-6)
    fit = ["fit", tmp_path / "holes", "--dask", *FIT, "--data-norm", 3,
           "--ledger", ledger, "-o", tmp_path / "h.json"]
    rc, _, err = run(capsys, *fit)
    assert rc == 2 and "missing values (NaN or empty cells) in column(s) 'c';" in err
    assert "--fill-missing VALUE" in err
    # an infinite value is refused even where --bounds would clip it
    for extra in (["--fill-missing", 0], ["--fill-missing", 0, "--bounds", -3, 3]):
        rc, _, err = run(capsys, *fit, *extra)
        assert rc == 2 and err.endswith("infinite values in column(s) 'e'\n"), err
    assert BudgetAccountant(path=ledger).n_charges == 0
    # filled and scaled chunk by chunk: the in-memory release
    parts[2].loc[9, "e"] = 0.0
    write_parts(tmp_path / "holes", parts)
    pd.concat(parts).to_csv(tmp_path / "holes.csv", index=False)
    extra = ["--fill-missing", "mid", "--bounds", -3, 3, "--scale"]
    assert run(capsys, *fit, *extra)[0] == 0
    rc, _, err = run(capsys, "fit", tmp_path / "holes.csv", *FIT, "--data-norm", 3,
                     *extra, "-o", tmp_path / "local.json")
    assert rc == 0, err
    (model, attributes), (local, expected) = (fitted(tmp_path / "h.json"),
                                              fitted(tmp_path / "local.json"))
    assert_same_release(attributes, expected)
    assert model["preprocessing"] == local["preprocessing"]


def test_numbers_past_dasks_dtype_sample_are_numbers(tmp_path, capsys):
    """Dask types a CSV's columns from the first 256 kB of its first file;
    a later number of a wider type (1.5 or an empty cell in a column of
    integers, an integer beyond 64 bits), in a chosen column or not, must not
    fail the read where its neighbour is fitted: the chosen columns are read
    as float64, the others not at all, and the release is the in-memory
    one. Parquet's null type (a column with no value) is a number too."""
    rows = [f"{i % 3},{i % 5},{i % 2}" for i in range(400)]
    cells = {"int": "1", "float": "1.5", "empty": "",
             "huge": "99999999999999999999"}
    for name, cell in cells.items():
        folder = tmp_path / name
        folder.mkdir()
        for i in range(2):
            late = [f"{cell},{cell},{cell}" if (i, r) == (1, 350) else row
                    for r, row in enumerate(rows)]
            (folder / f"part-{i}.csv").write_text("a,b,c\n" + "\n".join(late) + "\n")
        for columns in (["--columns", "a,b"], ["--columns", "c", "-k", 1]):
            fit = ["fit", folder, *FIT, "--data-norm", 3, "--fill-missing", 0,
                   *columns, "--force"]
            rc, _, err = run(capsys, *fit, "--dask", "-o", tmp_path / "d.json")
            assert rc == 0, (name, err)
            both = folder / "both.csv"
            both.write_text("a,b,c\n" + "\n".join(
                [*rows, *(f"{cell},{cell},{cell}" if r == 350 else row
                          for r, row in enumerate(rows))]) + "\n")
            rc, _, err = run(capsys, "fit", both, *fit[2:], "-o", tmp_path / "m.json")
            both.unlink()
            assert rc == 0, (name, err)
            assert_same_release(fitted(tmp_path / "d.json")[1],
                                fitted(tmp_path / "m.json")[1])
    parts = make_parts()
    parts[0]["g"] = None  # no value at all: Parquet's null type
    write_parts(tmp_path / "null", parts)
    for dask in ([], ["--dask"]):
        rc, _, err = run(capsys, "fit", tmp_path / "null" / "part-0.parquet", *FIT,
                         "--data-norm", 3, "--fill-missing", 0, *dask, "--force",
                         "-o", tmp_path / "n.json")
        assert rc == 0, err


def test_where_a_cell_sits_decides_nothing(tmp_path, capsys):
    """A review's neighbours: an integer beyond 64 bits among Dask's first
    rows (typed as text there) refused the column, at row 350 it did not;
    a column of True and False was fitted and its neighbour with one 0.5
    refused. Now each pair reads alike with and without Dask: the integer
    is a number, True and False are text (write 1 and 0), and text past the
    first rows is named as in memory, its cell never quoted."""
    rows = [f"{i % 3},{i % 5}" for i in range(400)]
    flags = [f"{i % 3},{'True' if i % 2 else 'False'}" for i in range(400)]

    def outcome(name, lines, where, cell, *dask):
        lines = [f"{r.split(',')[0]},{cell}" if i == where else r
                 for i, r in enumerate(lines)]
        path = tmp_path / f"{name}.csv"
        path.write_text("a,b\n" + "\n".join(lines) + "\n")
        rc, _, err = run(capsys, "fit", path, *FIT, "--data-norm", 3, *dask,
                         "--force", "-o", tmp_path / "m.json")
        return rc, err.replace(str(path), "DATA")

    for dask in ([], ["--dask"]):
        for where in (5, 350):
            assert outcome("big", rows, where, "99999999999999999999", *dask)[0] == 0
            rc, err = outcome("text", rows, where, "Jane Doe 555-0100", *dask)
            assert rc == 2 and "non-numeric column(s) 'b'" in err and "Jane" not in err
        for lines, where, cell in ((flags, 0, "True"), (flags, 350, "0.5")):
            rc, err = outcome("flags", lines, where, cell, *dask)
            assert rc == 2 and "non-numeric column(s) 'b'" in err, err
            assert "True and False do not: write them as 1 and 0" in err


def test_transform_streams_the_projection(tables, cluster, tmp_path, capsys):
    model = tmp_path / "m.json"
    assert run(capsys, "fit", tables / "all.csv", *FIT, "--data-norm", 3,
               "-o", model)[0] == 0
    rc, _, err = run(capsys, "transform", model, tables / "all.csv",
                     "-o", tmp_path / "local.csv")
    assert rc == 0, err
    expected = pd.read_csv(tmp_path / "local.csv")
    for out in ("out.parquet", "out.csv.gz"):
        rc, _, err = run(capsys, "transform", model, tables / "parts", "--dask",
                         "--scheduler", cluster.scheduler_address,
                         "-o", tmp_path / out)
        assert rc == 0, err
        assert err == f"dppca: wrote 1200 rows x 2 components to {tmp_path / out}\n"
        got = (pd.read_parquet if out.endswith("parquet") else pd.read_csv)(
            tmp_path / out)
        pd.testing.assert_frame_equal(got, expected, atol=1e-12)
    rc, out, _ = run(capsys, "transform", model, tables / "parts", "--dask",
                     "-o", "-", "-q")
    assert rc == 0
    pd.testing.assert_frame_equal(pd.read_csv(io.StringIO(out)), expected,
                                  atol=1e-12)
    parts = make_parts()
    parts[2].loc[3, "b"] = np.nan
    write_parts(tmp_path / "holes", parts)
    rc, _, err = run(capsys, "transform", model, tmp_path / "holes", "--dask",
                     "-o", tmp_path / "h.csv")
    assert rc == 2 and "missing values (NaN or empty cells) in column(s) 'b'" in err
    assert not (tmp_path / "h.csv").exists()  # no partial file


def test_worker_processes(tables, tmp_path, capsys):
    """Workers in their own processes: what they run travels pickled."""
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster:
        rc, _, err = run(capsys, "fit", tables / "parts", "--dask", "--scheduler",
                         cluster.scheduler_address, *FIT, "--data-norm", "auto",
                         "--fill-missing", 0, "-o", tmp_path / "remote.json")
    assert rc == 0, err
    rc, _, err = run(capsys, "fit", tables / "all.csv", *FIT, "--data-norm", "auto",
                     "-o", tmp_path / "local.json")
    assert rc == 0, err
    assert_same_release(fitted(tmp_path / "remote.json")[1],
                        fitted(tmp_path / "local.json")[1])


# ------------------------------------------------------------ the hook
def test_partition_counts_leave_the_reduction_unchanged(cluster):
    """map_reduce under reporting_partitions: the same tree, the same result
    bit for bit, on local threads and on a client; the partitions counted."""
    import dask.array as da

    X = da.from_array(np.random.default_rng(0).normal(size=(1000, 4)),
                      chunks=(170, 4))
    plain = _dask.centred_gram(X, 2.0, np.zeros(4))
    seen = []
    with _dask.reporting_partitions(lambda done, total: seen.append((done, total))):
        counted = _dask.centred_gram(X, 2.0, np.zeros(4))
    np.testing.assert_array_equal(counted, plain)
    assert seen == [(done, 6) for done in range(7)]
    with distributed.Client(cluster) as client:
        seen.clear()
        with _dask.reporting_partitions(lambda *args: seen.append(args)):
            remote = _dask.centred_gram(X, 2.0, np.zeros(4))
        assert _dask._active_client() is client
    np.testing.assert_array_equal(remote, plain)
    assert seen == [(done, 6) for done in range(7)]


@pytest.mark.parametrize("verbose", [0, 1])
def test_bar_on_a_terminal(verbose):
    """A terminal: a bar redrawn in place (with -v, one per pass, kept);
    elsewhere, lines at each quarter of the partitions only with -v."""
    def draw(**kwargs):
        stream = io.StringIO()
        progress = PassProgress(verbose, False, stream=stream, **kwargs)
        progress("pass 1: Gram matrix of the centred, clipped rows")
        for done in range(9):
            progress.partitions(done, 8)
        progress.finished(1, True)
        return stream.getvalue()

    terminal = draw(tty=True)
    assert "\r\033[Kdppca: pass 1" in terminal and "8/8 partitions" in terminal
    assert terminal.endswith("\n" if verbose else "\r\033[K")
    log = draw(tty=False)
    assert "\r" not in log
    assert log.splitlines() == ([] if not verbose else [
        "dppca: pass 1: Gram matrix of the centred, clipped rows",
        "dppca: pass 1: 2/8 partitions", "dppca: pass 1: 4/8 partitions",
        "dppca: pass 1: 6/8 partitions", "dppca: pass 1: 8/8 partitions",
    ])
    quiet = io.StringIO()
    progress = PassProgress(verbose, True, stream=quiet, tty=True)
    progress("pass 1: x")
    progress.partitions(0, 1)
    assert quiet.getvalue() == ""


def test_many_rows_read_once_from_the_cli(cluster, tmp_path, capsys):
    """Issue 24 from the shell: on many rows the numeric fit reads every file
    once; the steps on the first rows are said, not counted as passes."""
    rng = np.random.default_rng(5)
    folder = write_parts(tmp_path / "many", [
        pd.DataFrame(rng.normal(size=(50_000, len(FEATURES))) * 0.1 + 0.2,
                     columns=FEATURES) for _ in range(3)])
    model = tmp_path / "many.json"
    rc, _, err = run(capsys, "fit", folder, "--dask", "--scheduler",
                     cluster.scheduler_address, "-k", "2", "--epsilon", "2",
                     "--delta", "1e-6", "--seed", "0", "--data-norm", 1, "-v",
                     "-o", model)
    assert rc == 0, err
    assert "dppca: the first 32768 rows: row norms and the clipped sum" in err
    assert "read the rows in 1 pass" in err
    assert json.loads(model.read_text())["reading"]["passes"] == 1


def test_many_rows_interrupted_or_failing_after_the_first_rows_stay_charged(
        tmp_path, capsys, monkeypatch):
    """Issue 30, item 1, from the shell: on many rows a fit is charged once
    the first rows are read, before their first release. Ctrl-C at "pass 1"
    (after the first rows' steps were shown) exits 130 and leaves the
    charge; an infinite value in the last row exits 2, charged too (before:
    both exited with the steps' lines shown and nothing charged). The lines
    shown before the charge are the plan's only."""
    from sklearn_dppca._cli_progress import PassProgress as Progress

    rng = np.random.default_rng(5)
    parts = [pd.DataFrame(rng.normal(size=(50_000, len(FEATURES))) * 0.1 + 0.2,
                          columns=FEATURES) for _ in range(3)]
    folder = write_parts(tmp_path / "many", parts)
    ledger = tmp_path / "budget.db"
    run(capsys, "ledger", "init", ledger, "--epsilon", 9, "--delta", 1e-6)
    fit = ["fit", folder, "--dask", "-k", "2", "--epsilon", "1", "--delta",
           "1e-6", "--data-norm", "auto", "--ledger", ledger, "-v",
           "-o", tmp_path / "m.json"]
    shown = []
    original = Progress.__call__

    def interrupt_at_pass_1(self, message):
        shown.append((message, BudgetAccountant(path=ledger).n_charges))
        original(self, message)
        if message.startswith("pass 1"):
            raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(Progress, "__call__", interrupt_at_pass_1)
        rc, _, err = run(capsys, *fit)
    assert rc == 130 and "interrupted (the fit had been charged epsilon=1, " \
        "delta=1e-06; that charge stays)" in err
    assert BudgetAccountant(path=ledger).n_charges == 1
    before = [m for m, charges in shown if not charges]
    assert before and not any("step" in m for m in before)
    assert any("step" in m for m, charges in shown if charges)

    parts[2].loc[49_999, "a"] = np.inf
    write_parts(folder, parts)
    rc, _, err = run(capsys, *fit)
    assert rc == 2 and err.endswith(
        "infinite values in column(s) 'a' (the fit had been charged epsilon=1, "
        "delta=1e-06; that charge stays)\n"), err
    assert BudgetAccountant(path=ledger).n_charges == 2


def test_an_error_after_the_charge_says_that_it_stays(tmp_path, capsys):
    """Review 69, F5: a NaN past the first rows of a --dask fit on many rows
    stopped it after its charge with the in-memory refusal word for word,
    which comes before any charge: nothing said that the budget was spent
    (and without --ledger nothing recorded it). The line now says so, with
    the fit's epsilon and delta only; a refusal before the charge does
    not."""
    rng = np.random.default_rng(6)
    parts = [pd.DataFrame(rng.normal(size=(50_000, len(FEATURES))) * 0.1 + 0.2,
                          columns=FEATURES) for _ in range(3)]
    parts[2].loc[20_000, "c"] = np.nan
    folder = write_parts(tmp_path / "many", parts)
    ledger = tmp_path / "budget.db"
    run(capsys, "ledger", "init", ledger, "--epsilon", 9, "--delta", 1e-6)
    fit = ["fit", folder, "--dask", "-k", "2", "--epsilon", "1", "--delta",
           "1e-7", "--data-norm", "1", "-o", tmp_path / "m.json"]
    charged = (" (the fit had been charged epsilon=1, delta=1e-07; that charge "
               "stays)\n")
    for extra in ([], ["--ledger", ledger]):
        rc, _, err = run(capsys, *fit, *extra)
        assert rc == 2 and err.endswith(charged), err
        assert "missing values (NaN or empty cells) in column(s) 'c';" in err
        assert_one_error_line(err)
        line = err.splitlines()[-1]  # no row count, no row, no value
        assert not any(n in line for n in ("150000", "20000", "nan")), line
    assert BudgetAccountant(path=ledger).n_charges == 1
    # before the charge (few rows: every value is checked first): no charge
    small = write_parts(tmp_path / "few", [parts[2].iloc[19_000:21_000]])
    fit[1] = small
    rc, _, err = run(capsys, *fit, "--ledger", ledger)
    assert rc == 2 and "in column(s) 'c'" in err and "charged" not in err, err
    assert BudgetAccountant(path=ledger).n_charges == 1


# --- sparse matrices in parts: .npz files, one block of rows each ------------
def write_sparse_parts(folder, nan=None, inf=None):
    """The rows of tests/test_cli.py's sparse codes in three .npz files (the
    second stored as CSC: any format scipy.sparse.save_npz writes); ``nan``
    and ``inf``: (part, stored value) to spoil."""
    from scipy import sparse

    from .test_cli import sparse_codes

    folder.mkdir(parents=True, exist_ok=True)
    path, X = sparse_codes(folder)
    parts = [X[i:i + 150].copy() for i in (0, 150, 300)]  # 150, 150, 100 rows
    for where, value in ((nan, np.nan), (inf, np.inf)):
        if where is not None:
            parts[where[0]].data[where[1]] = value
    for i, part in enumerate(parts):
        sparse.save_npz(folder / f"part-{i}.npz", part.tocsc() if i == 1 else part)
    path.unlink()
    return X, parts


def test_sparse_parts_fit_and_transform_as_in_memory(cluster, tmp_path, capsys):
    """A directory or a glob of .npz files is one Dask array of CSR chunks:
    the release of the whole matrix in memory, and its projection."""
    from scipy import sparse

    X, _ = write_sparse_parts(tmp_path / "codes")
    sparse.save_npz(tmp_path / "all.npz", X)
    fit = ["-k", 2, "--epsilon", 2, "--delta", 1e-6, "--data-norm", 3, "--seed", 5]
    rc, _, err = run(capsys, "fit", tmp_path / "all.npz", *fit,
                     "-o", tmp_path / "local.json")
    assert rc == 0, err
    for data, extra in ((tmp_path / "codes", ()),
                        (f"{tmp_path}/codes/part-*.npz",
                         ("--scheduler", cluster.scheduler_address))):
        model = tmp_path / "parts.json"
        rc, _, err = run(capsys, "fit", data, "--dask", *extra, *fit, "-v",
                         "--force", "-o", model)
        assert rc == 0, err
        assert (f"read 400 rows x 60 columns in 3 partitions (3 files) from "
                f"{data}") in err
        assert str(X.nnz) not in err  # how many values are stored: not public
        (saved, got), (_, expected) = fitted(model), fitted(tmp_path / "local.json")
        assert_same_release(got, expected)
        assert saved["feature_names"][:2] == ["x0", "x1"]
        assert saved["reading"]["partitions"] == 3
    rc, _, err = run(capsys, "transform", model, tmp_path / "codes", "--dask",
                     "-o", tmp_path / "z.csv")
    assert rc == 0, err
    rc, _, err = run(capsys, "transform", tmp_path / "local.json", tmp_path / "all.npz",
                     "-o", tmp_path / "z0.csv")
    assert rc == 0, err
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "z.csv"),
                                  pd.read_csv(tmp_path / "z0.csv"), atol=1e-10)
    # chosen columns, chunk by chunk
    rc, _, err = run(capsys, "fit", tmp_path / "codes", "--dask", *fit,
                     "--columns", "x3,x7,x9", "-o", tmp_path / "cols.json")
    assert rc == 0, err
    rc, _, err = run(capsys, "fit", tmp_path / "all.npz", *fit,
                     "--columns", "x3,x7,x9", "-o", tmp_path / "cols0.json")
    assert rc == 0, err
    assert_same_release(fitted(tmp_path / "cols.json")[1],
                        fitted(tmp_path / "cols0.json")[1])


def test_sparse_parts_are_checked_before_any_charge(tmp_path, capsys):
    """Stored NaN and infinite values named by column, files of other widths
    or of complex values, and --scale: refused before the ledger is charged;
    a filled NaN fits."""
    from scipy import sparse

    X, parts = write_sparse_parts(tmp_path / "holes", nan=(2, 4), inf=(1, 7))
    nan_column = f"x{parts[2].indices[4]}"
    inf_column = f"x{parts[1].tocsr().indices[7]}"
    ledger = tmp_path / "budget.db"
    run(capsys, "ledger", "init", ledger, "--epsilon", 9, "--delta", 1e-6)
    fit = ["fit", "--dask", "-k", 2, "--epsilon", 2, "--delta", 1e-6,
           "--data-norm", 3, "--ledger", ledger, "-o", tmp_path / "m.json"]
    rc, _, err = run(capsys, *fit[:1], tmp_path / "holes", *fit[1:])
    assert rc == 2 and f"missing values (NaN or empty cells) in column(s) " \
        f"'{nan_column}'" in err
    for extra in (["--fill-missing", 0], ["--fill-missing", 0, "--bounds", 0, 1]):
        rc, _, err = run(capsys, *fit[:1], tmp_path / "holes", *fit[1:], *extra)
        assert rc == 2 and err.endswith(
            f"infinite values in column(s) '{inf_column}'\n"), err
    rc, _, err = run(capsys, *fit[:1], tmp_path / "holes", *fit[1:],
                     "--bounds", 0, 1, "--scale")
    assert rc == 2 and "makes a sparse matrix dense" in err
    sparse.save_npz(tmp_path / "holes" / "part-3.npz", sparse.csr_matrix((5, 61)))
    rc, _, err = run(capsys, *fit[:1], tmp_path / "holes", *fit[1:])
    assert rc == 2 and "different numbers of columns" in err and "60, " in err
    sparse.save_npz(tmp_path / "holes" / "part-3.npz", (X[:5] * 1j).tocsr())
    rc, _, err = run(capsys, *fit[:1], tmp_path / "holes", *fit[1:])
    assert rc == 2 and "holds complex128 values, not real numbers" in err
    assert BudgetAccountant(path=ledger).n_charges == 0
    assert not (tmp_path / "m.json").exists()
    # several files without --dask: say how to read them
    rc, _, err = run(capsys, *fit[:1], f"{tmp_path}/holes/*.npz", *fit[2:])
    assert rc == 2 and "read them with --dask" in err
    (tmp_path / "holes" / "part-3.npz").unlink()
    parts[1].data[7] = 0.0
    sparse.save_npz(tmp_path / "holes" / "part-1.npz", parts[1])
    rc, _, err = run(capsys, *fit[:1], tmp_path / "holes", *fit[1:],
                     "--fill-missing", 0)
    assert rc == 0, err
    assert BudgetAccountant(path=ledger).n_charges == 1


def test_a_lost_scheduler_is_one_error_line(tables, tmp_path, capsys, monkeypatch):
    """A review killed the cluster mid-fit: the fit ended in a traceback and
    exit status 1 (a cancelled future is no ValueError), and the progress
    counted the cancelled partitions as done."""
    from distributed.client import FutureCancelledError

    from sklearn_dppca import PrivatePCA

    def lost(*args, **kwargs):
        raise FutureCancelledError("chunk", reason="scheduler-connection-lost")

    monkeypatch.setattr(PrivatePCA, "_fit", lost)
    rc, _, err = run(capsys, "fit", tables / "all.csv", *FIT, "--data-norm", 3,
                     "--dask", "-o", tmp_path / "m.json")
    assert rc == 2 and "dppca: error: the Dask cluster stopped" in err, err
    assert_one_error_line(err)
    # workers that died running a task (a second review): the same line, not
    # a traceback; any other error still raises
    from distributed.scheduler import KilledWorker

    def killed(*args, **kwargs):
        worker = types.SimpleNamespace(address="tcp://127.0.0.1:1")
        raise KilledWorker("dppca-_chunk_gram-0", worker, 4)

    monkeypatch.setattr(PrivatePCA, "_fit", killed)
    rc, _, err = run(capsys, "fit", tables / "all.csv", *FIT, "--data-norm", 3,
                     "--dask", "-o", tmp_path / "m.json")
    assert rc == 2 and "KilledWorker" in err and "stays charged" in err, err
    assert_one_error_line(err)
    monkeypatch.setattr(PrivatePCA, "_fit", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        run(capsys, "fit", tables / "all.csv", *FIT, "--data-norm", 3,
            "--dask", "-o", tmp_path / "m.json")


def test_a_workers_read_never_carries_a_cell():
    """A worker logs a failed task's exception: pandas' parse error quoted
    the cell ('could not convert string to float: ...') into the cluster's
    logs before the charge. Each block is parsed by the package's reader,
    whose error is constant text, with pandas' suppressed."""
    from sklearn_dppca._cli_dask import _NotANumber, _read_csv_block

    block = io.BytesIO(b"a,b\n1,2\nAlice Smith 4 Elm St,3\n")
    with pytest.raises(_NotANumber) as caught:
        _read_csv_block(block, dtype={"a": np.float64, "b": np.float64})
    assert "Alice" not in repr(caught.value)
    assert caught.value.__suppress_context__ and caught.value.__cause__ is None
    rows = _read_csv_block(io.BytesIO(b"a,b\n1,2\n"), dtype=np.float64)
    assert rows.to_numpy().tolist() == [[1.0, 2.0]]


def test_an_uncompressed_csvs_partitions_are_neither_shown_nor_recorded(
        tables, tmp_path, capsys):
    """Dask cuts an uncompressed CSV into blocks of bytes, so how many depends
    on how the values are written: one longer decimal made two partitions of
    one, shown by -v before the charge and kept in the model (review 45)."""
    model = tmp_path / "m.json"
    rc, _, err = run(capsys, "fit", tables / "all.csv", "--dask", "-k", 2,
                     "--epsilon", 1, "--delta", 1e-6, "--data-norm", 3, "-v",
                     "-o", model)
    assert rc == 0, err
    assert "in 1 file from" in err and "partition" not in err
    assert json.loads(model.read_text())["reading"]["partitions"] is None
    progress = PassProgress(verbose=True, quiet=False, stream=io.StringIO(),
                            tty=True, partitions=False)
    progress("pass 1: the Gram matrix")
    progress.partitions(1, 2)
    assert "partitions" not in progress.stream.getvalue()


@pytest.mark.parametrize("dask", [[], ["--dask"]])
def test_a_malformed_line_is_refused_without_its_row(tmp_path, capsys, dask):
    """pandas' parse error names the line; in memory it was removed, with
    --dask it was not (review 60)."""
    rows = np.random.default_rng(0).uniform(0, 1, (300, 3))
    lines = ["a,b,c"] + [",".join(f"{v:.4f}" for v in r) for r in rows]
    lines[151] = '"0.1,0.2'
    path = tmp_path / "open_quote.csv"
    path.write_text("\n".join(lines) + "\n")
    rc, _, err = run(capsys, "fit", path, "-k", 1, "--epsilon", 1, "--delta", 1e-6,
                     "--data-norm", 2, "-o", tmp_path / "m.json", *dask)
    assert rc == 2 and "cannot parse CSV" in err
    assert_one_error_line(err)
    unnamed = err.replace(str(tmp_path), "")  # pytest-151: its folder's number
    assert "151" not in unnamed and "152" not in unnamed


@pytest.mark.parametrize("bad", [b'3,"unterminated\n', b"3\xe9,4\n"])
def test_the_read_naming_text_columns_quotes_no_row_or_byte(tmp_path, bad,
                                                           monkeypatch):
    """After a cell that is not a number stops the first read, the files are
    read again as text to name the columns: that read gave pandas' raw message
    (the row of an open quote, a non-UTF-8 byte) before the charge (review 97
    F3). An open quote is now refused before Dask reads a row (review 97 F2);
    the read's own refusal is checked past that scan."""
    from sklearn_dppca import _cli_dask
    from sklearn_dppca._cli_dask import LazyTable, _reading

    (tmp_path / "part-0.csv").write_bytes(b"a,b\n" + b"1,2\n" * 40)
    (tmp_path / "part-1.csv").write_bytes(b"a,b\n" + b"1,2\n" * 40 + bad)
    pattern = str(tmp_path / "*.csv")
    if b'"' in bad:
        with pytest.raises(ValueError, match="cannot parse CSV") as caught:
            LazyTable(pattern)
        unnamed = str(caught.value).replace(str(tmp_path), "")  # pytest-141
        assert not any(s in unnamed for s in ("41", "42", "position"))
        monkeypatch.setattr(_cli_dask, "_whole_lines", lambda path, sep=",": None)
    table = LazyTable(pattern)
    for read in (lambda: table.text_columns(["a", "b"]),  # a worker's log
                 lambda: _reading(pattern, lambda: table.text_columns(["a", "b"]))):
        with pytest.raises(ValueError) as caught:
            read()
        message = str(caught.value).replace(str(tmp_path), "")  # pytest-141
        assert "cannot parse CSV" in message or "not UTF-8" in message, message
        assert not any(s in message for s in ("41", "42", "0xe9", "position"))


def test_an_empty_csv_gets_the_in_memory_message(tmp_path, capsys):
    """Review 69, F4: an empty CSV file with --dask was refused in Dask's
    words around pandas' ("cannot parse CSV: An error occurred while calling
    the read_csv method ..."); it now gets the in-memory line. In a folder
    whose first file (the one the header is read from) is empty, that file
    is named."""
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    fit = ["fit", empty, "-k", 1, "--epsilon", 1, "--delta", 1e-6,
           "--data-norm", 2, "-o", tmp_path / "m.json"]
    rc, _, in_memory = run(capsys, *fit)
    assert rc == 2 and in_memory.endswith(
        f"{empty}: the file is empty (no header, no rows)\n"), in_memory
    rc, _, err = run(capsys, *fit, "--dask")
    assert rc == 2 and err == in_memory, err
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "a.csv").write_text("")
    (folder / "b.csv").write_text("a,b\n1,2\n3,4\n")
    fit[1] = folder
    rc, _, err = run(capsys, *fit, "--dask")
    assert rc == 2 and err.endswith(
        f"{folder / 'a.csv'}: the file is empty (no header, no rows)\n"), err
    assert_one_error_line(err)


def test_a_memory_refusal_says_how_to_run_fewer_threads(tmp_path, capsys,
                                                        monkeypatch):
    """Review 69, F3 (its CLI half): a --dask fit refused for the chunks
    that its threads read advised "fewer Dask threads", which dppca has no
    flag for; the line now says how (Dask's DASK_NUM_WORKERS, or
    --scheduler), and fewer threads are then admitted. (Its other advice
    is in flags: --path, --memory-limit.)"""
    import dask

    from sklearn_dppca import _paths

    # 250 MB: the plan counts Arrow's first read of Parquet (64 MiB) and each
    # thread's slices of a chunk (24 MiB) too (review 69 F2)
    monkeypatch.setattr(_paths, "physical_memory", lambda: int(2.5e8))
    path = tmp_path / "wide.parquet"  # one chunk of 16 MB
    pd.DataFrame(np.random.default_rng(0).uniform(size=(4000, 500)),
                 columns=[f"x{i}" for i in range(500)]).to_parquet(path, index=False)
    fit = ["fit", path, "--dask", "-k", 2, "--epsilon", 1, "--delta", 1e-7,
           "--data-norm", 5, "-q", "-o", tmp_path / "m.json"]
    with dask.config.set(num_workers=8):
        rc, _, err = run(capsys, *fit)
    assert rc == 2 and "the chunks of rows its threads read" in err, err
    assert_one_error_line(err)
    assert ("fewer Dask threads, need less: set DASK_NUM_WORKERS=N in the "
            "environment for N threads, or give --scheduler ADDRESS") in err, err
    with dask.config.set(num_workers=1):
        rc, _, err = run(capsys, *fit)
    assert rc == 0, err


#: Measures, in a fresh interpreter, the peak RSS growth of the CLI's
#: --dask matrix: built (the row counts read before the plan), and a pass
#: over it on one thread (each chunk read, squared and summed), against the
#: plan's chunk_bytes per thread and what a process's read maps once
#: (read_base; review 69 F2).
_PEAK = """
import re, sys
import dask, dask.array, dask.dataframe, pandas, pyarrow.parquet
from sklearn_dppca._cli_dask import LazyMatrix, LazyTable
from sklearn_dppca._dask import ChunkedRows
from sklearn_dppca._dask_memory import chunk_bytes
try:
    from sklearn_dppca._dask_memory import read_base
except ImportError:  # before review 69 F2's mend
    read_base = lambda X: 0
def reset():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _kib("VmRSS")
def _kib(what):
    status = open("/proc/self/status").read()
    return 1024 * int(re.search(what + r":\\s+(\\d+)", status).group(1))
with dask.config.set(scheduler="threads", num_workers=2):
    start = reset()
    X = LazyMatrix(LazyTable(sys.argv[1]), None, sys.argv[1], hint="").X
    built = _kib("VmHWM") - start
with dask.config.set(scheduler="synchronous"):
    start = reset()
    (X * X).sum(axis=0).compute()
    read = _kib("VmHWM") - start
print(built, read, chunk_bytes(ChunkedRows(X)) + read_base(X))
"""


def _peaks(path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _PEAK, str(path)], check=True,
                         capture_output=True, text=True).stdout
    return [int(v) for v in out.split()]


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"),
                    reason="resets the peak RSS with /proc/self/clear_refs")
@pytest.mark.parametrize("shape", [(2000, 2500), (25000, 200)])
def test_a_pass_over_parquet_holds_what_the_plan_counts(tmp_path, shape):
    """A Parquet chunk is read by slices into one float64 array: a pass on
    one thread peaks within chunk_bytes (it held ~6 chunks through Arrow,
    pandas and the float64 cast, 3 times the plan: review 69 F2)."""
    X = np.random.default_rng(0).normal(size=shape)
    path = tmp_path / "t.parquet"
    pd.DataFrame(X, columns=[f"c{i}" for i in range(shape[1])]).to_parquet(path)
    _, read, plan = _peaks(path)
    assert read <= plan, (read / 2**20, plan / 2**20)


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"),
                    reason="resets the peak RSS with /proc/self/clear_refs")
def test_a_csv_is_read_in_blocks_the_plan_counts(tmp_path):
    """An uncompressed CSV file is cut into blocks of CSV_BLOCK bytes: a
    pass on one thread peaks within chunk_bytes, which counts their parsing,
    and the count of the rows before the plan holds at most that on each of
    two threads (Dask's default blocks of up to 64 MiB held 4 times the plan
    in a pass, and 768 MiB in the count of a 150 MB file: review 69 F2)."""
    # the same 50 000 x 200 file (94 MB, six blocks), written as 1 000
    # distinct rows 50 times: pandas' to_csv of 10**7 cells took 15 s
    X = np.random.default_rng(0).normal(size=(1000, 200)).round(6)
    head, *rows = pd.DataFrame(X, columns=[f"c{i}" for i in range(200)]).to_csv(
        index=False).splitlines(keepends=True)
    path = tmp_path / "t.csv"
    path.write_text(head + "".join(rows) * 50)
    built, read, plan = _peaks(path)
    assert read <= plan, (read / 2**20, plan / 2**20)
    assert built <= 2 * plan, (built / 2**20, plan / 2**20)


def test_parquet_integers_beyond_2_53_are_read_as_in_memory(tmp_path, capsys):
    """Arrow's safe cast refused an int64 or uint64 cell beyond 2**53 and
    its message, printed, quoted the cell, before any charge; in memory the
    same file fitted (review 81 F1). Rounded to float64 as in memory."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.uniform(size=500),
                          "id": rng.integers(0, 3, 500).astype(np.int64),
                          "u": rng.integers(0, 3, 500).astype(np.uint64)})
    frame.loc[7, "id"] = 2**53 + 1
    frame.loc[9, "u"] = 2**64 - 1
    frame.to_parquet(tmp_path / "big.parquet", index=False)
    models = []
    for extra in ([], ["--dask"]):
        rc, _, err = run(capsys, "fit", tmp_path / "big.parquet", *extra, "-k", 1,
                         "--epsilon", 1, "--delta", 1e-6, "--data-norm", 3,
                         "--seed", 1, "-q", "-o", tmp_path / f"m{len(extra)}.json")
        assert rc == 0 and "9007199254740993" not in err, err
        models.append(json.loads((tmp_path / f"m{len(extra)}.json").read_text()))
    np.testing.assert_allclose(models[0]["attributes"]["components_"],
                               models[1]["attributes"]["components_"], atol=1e-12)


def test_a_later_csv_with_another_header_is_refused_before_the_charge(
        tmp_path, capsys):
    """Review 83 F1: Dask reads every CSV file's columns by position under
    the first file's names, so a later file written ``y,x`` was fitted with
    its columns swapped, silently, and charged. Each file's first line is now
    compared with the first file's before the plan: such a file is refused,
    named, its line never quoted (in a file without a header it is a row);
    so is one with other names (pandas' "Usecols do not match columns"),
    compressed or not."""
    ledger = tmp_path / "budget.db"
    run(capsys, "ledger", "init", ledger, "--epsilon", 9, "--delta", 1e-6)
    first = "x,y\n1,2\n3,4\n5,6\n"
    for name, later, suffix in (("order", "y,x\n1,2\n3,4\n", ".csv"),
                                ("renamed", "income,age\n100,200\n300,400\n", ".csv"),
                                ("noheader", "17,19\n23,29\n", ".csv"),
                                ("wider", "x,y,z\n1,2,3\n", ".csv.gz")):
        folder = tmp_path / name
        folder.mkdir()
        pd.read_csv(io.StringIO(first)).to_csv(folder / f"p0{suffix}", index=False)
        (folder / f"p1{suffix}").write_bytes(later.encode())
        if suffix == ".csv.gz":
            pd.read_csv(io.StringIO(later)).to_csv(folder / f"p1{suffix}", index=False)
        rc, _, err = run(capsys, "fit", folder, "--dask", "-k", 1, "--epsilon", 1,
                         "--delta", 1e-7, "--data-norm", 10, "--ledger", ledger,
                         "-o", tmp_path / "m.json")
        assert rc == 2, (name, err)
        assert_one_error_line(err)
        assert err.endswith(
            f"{folder / ('p1' + suffix)}: its header line is not that of the first "
            f"file, {folder / ('p0' + suffix)}"
            f"{' (the same names in another order)' if name == 'order' else ''}: "
            "every CSV file needs the same column names in the same order (each "
            "file's columns are read by position)\n"), err
        unnamed = err.replace(str(tmp_path), "")  # pytest-173: its folder's number
        assert not any(w in unnamed for w in ("income", "17", "Usecols")), err
    assert BudgetAccountant(path=ledger).n_charges == 0
    # the same header in every file: fitted as one table
    (tmp_path / "order" / "p1.csv").write_text("x,y\n2,1\n4,3\n")
    rc, _, err = run(capsys, "fit", tmp_path / "order", "--dask", "-k", 1,
                     "--epsilon", 1, "--delta", 1e-7, "--data-norm", 10,
                     "-o", tmp_path / "m.json")
    assert rc == 0, err


def test_a_later_parquet_files_schema_is_checked_before_the_charge(
        tmp_path, capsys):
    """Review 83 F2, F3: Dask types the columns from the first Parquet
    file's schema. A later file without a chosen column failed in a pass
    with pyarrow's KeyError and a traceback (exit 1), one storing it as
    text with "a cell of a chosen column is not a number", naming neither
    file nor column; on many rows (the centre from the first ones) both came
    after the charge. Every file's schema (its footer) is now checked before
    the plan: refused in one line naming the file, as the first file's
    columns are; text is read only where the first file's is text that
    holds numbers; decimals and the null type are numbers in any file."""
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(3)
    big = pa.table({"x": rng.normal(size=140_000) * 0.1,
                    "y": rng.normal(size=140_000) * 0.1})
    ledger = tmp_path / "budget.db"
    run(capsys, "ledger", "init", ledger, "--epsilon", 9, "--delta", 1e-6)
    fit = ["--dask", "-k", 1, "--epsilon", 1, "--delta", 1e-9, "--data-norm", 3,
           "--fill-missing", 0, "--ledger", ledger, "--force",
           "-o", tmp_path / "m.json"]
    later = {"missing": pa.table({"x": [0.1, 0.2]}),
             "words": pa.table({"x": ["secret", "0.5"], "y": [0.1, 0.2]}),
             "numbers_as_text": pa.table({"x": ["0.1", "0.5"], "y": [0.1, 0.2]}),
             "numbers_as_bytes": pa.table({"x": [b"0.1", b"0.5"], "y": [0.1, 0.2]}),
             "dates": pa.table({"x": pa.array([1, 2], pa.timestamp("s")),
                                "y": [0.1, 0.2]})}
    def fit_two(name, first, second):  # a folder of two files, fitted
        folder = tmp_path / name
        folder.mkdir()
        pq.write_table(first, folder / "p0.parquet")
        pq.write_table(second, folder / "p1.parquet")
        return folder, run(capsys, "fit", folder, *fit)

    for name, table in later.items():
        folder, (rc, _, err) = fit_two(name, big, table)
        assert rc == 2, (name, err)
        assert_one_error_line(err)
        p1 = folder / "p1.parquet"
        assert err.endswith(
            f"{p1} has no column(s) 'y', which the first file, {folder / 'p0.parquet'}"
            ", has: every file needs the chosen columns\n" if name == "missing" else
            f"{p1}: non-numeric column(s) 'x'; choose the numeric ones with "
            "--columns NAME,NAME,...\n"), err
        assert "secret" not in err and "charged" not in err, err
    assert BudgetAccountant(path=ledger).n_charges == 0
    # numbers in any numeric type, or none (the null type); another type
    # where the first file stores the column so, as objects that are numbers
    fine = {"decimal_and_null": (big, pa.table({
                "x": pa.array([decimal.Decimal("0.25")] * 2, pa.decimal128(10, 2)),
                "y": pa.array([None, None], pa.null())})),
            "text_first": (pa.table({"x": [b"0.1", b"0.2", b"0.3"],
                                     "y": [0.1, 0.2, 0.3]}),
                           pa.table({"x": [b"0.5", b"0.6"],
                                     "y": pa.array([1, 2], pa.int32())}))}
    for name, (first, second) in fine.items():
        _, (rc, _, err) = fit_two(name, first, second)
        assert rc == 0, (name, err)


def test_a_later_file_that_is_not_parquet_is_named(tmp_path, capsys):
    """A truncated later file was refused in Arrow's words, naming no file
    (review 87 F6)."""
    folder = tmp_path / "parts"
    folder.mkdir()
    pd.DataFrame({"x": [1.0, 2.0, 3.0], "y": [4.0, 5.0, 6.0]}).to_parquet(
        folder / "a.parquet", index=False)
    (folder / "b.parquet").write_bytes((folder / "a.parquet").read_bytes()[:100])
    rc, _, err = run(capsys, "fit", folder, "--dask", "-k", 1, "--epsilon", 1,
                     "--delta", 1e-6, "--data-norm", 20, "-q",
                     "-o", tmp_path / "m.json")
    assert rc == 2 and "b.parquet: cannot read it as Parquet" in err, err
    assert_one_error_line(err)


def test_a_csv_whose_rows_are_wider_than_its_header_is_refused(tmp_path, capsys):
    """`x,y` over rows of three fields: pandas read the first field as an
    index in memory, Dask by position: two releases of one file (review 87
    F5). Refused in both, before the charge, no cell quoted."""
    data = tmp_path / "wide_rows.csv"
    data.write_text("x,y\n9,5,6\n9,7,8\n9,1,2\n")
    for extra in ([], ["--dask"]):
        rc, _, err = run(capsys, "fit", data, *extra, "-k", 1, "--epsilon", 1,
                         "--delta", 1e-6, "--data-norm", 20, "-q",
                         "-o", tmp_path / "m.json")
        assert rc == 2 and "its rows have more fields than its header" in err, err
        assert_one_error_line(err)
        assert "9" not in err.replace(str(tmp_path), "")
