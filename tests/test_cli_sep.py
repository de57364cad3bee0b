"""``--sep`` and ``--decimal``: CSV files separated by ``;`` or tabs (with
decimal commas), as spreadsheets and survey tools export them, read by
``fit`` and ``transform``, in memory and with ``--dask``; without ``--sep``
such a file is refused from its header line alone, naming the flag."""

import io
import json
import random
import sys

import numpy as np
import pandas as pd
import pytest

from sklearn_dppca import BudgetAccountant

from .test_cli import assert_one_error_line, run
from .test_cli_dask_csv import _pandas_reads

FIT = ["-k", 1, "--epsilon", 1, "--delta", 1e-6, "--data-norm", 20,
       "--seed", 0, "-q"]


def table(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(np.round(rng.normal(size=(n, 3)) * [3, 2, 1], 3),
                        columns=["a", "b", "c"])


def write(path, frame, sep=",", decimal="."):
    frame.to_csv(path, index=False, sep=sep, decimal=decimal)
    return path


def components(path):
    return np.array(json.loads(path.read_text())["attributes"]["components_"])


def fit(capsys, data, model, *extra):
    return run(capsys, "fit", data, *FIT, "-o", model, "--force", *extra)


@pytest.mark.parametrize("sep, flag, what, suffix", [
    (";", "--sep ';'", "';'", "csv"), ("\t", "--sep tab", "tabs", "csv"),
    (",", "--sep ','", "','", "tsv"), (";", "--sep ';'", "';'", "tsv")])
def test_without_sep_the_header_names_the_flag_before_the_charge(
        tmp_path, capsys, sep, flag, what, suffix):
    """A ``;``- or tab-separated file read with ``,`` was refused as one
    non-numeric column named ``a;b;c``; now its header names the flag, and
    nothing is charged. The rows are never read: a row that cannot be
    parsed (a quote never closed) gets the same refusal. A ``*.tsv`` file,
    read with tabs, likewise where its header holds ``,`` or ``;``."""
    ledger = tmp_path / "budget.db"
    run(capsys, "ledger", "init", ledger, "--epsilon", 9, "--delta", 1e-6)
    good = write(tmp_path / f"good.{suffix}", table(), sep=sep)
    bad = tmp_path / f"bad.{suffix}"
    bad.write_text(good.read_text() + f'1{sep}"2{sep}3\n')
    for path in (good, bad):
        rc, _, err = fit(capsys, path, tmp_path / "m.json", "--ledger", ledger)
        assert rc == 2, err
        assert_one_error_line(err)
        assert (f"{path}: this file looks separated by {what} \u2014 pass "
                f"{flag}") in err, err
        assert BudgetAccountant(path=ledger).n_charges == 0
        rc, _, err = run(capsys, "fit", path, "--dask", *FIT, "-o",
                         tmp_path / "m.json", "--force", "--ledger", ledger)
        assert rc == 2 and f"pass {flag}" in err, err
        assert BudgetAccountant(path=ledger).n_charges == 0


def test_a_comma_file_with_one_column_named_with_a_semicolon_fits(tmp_path, capsys):
    """``--sep ,`` given: a header ``a;b`` is one column's name."""
    path = tmp_path / "one.csv"
    path.write_text("a;b\n" + "".join(f"{v}\n" for v in range(1, 30)))
    rc, _, err = fit(capsys, path, tmp_path / "m.json")
    assert rc == 2 and "--sep ','" in err, err
    rc, _, err = fit(capsys, path, tmp_path / "m.json", "--sep", ",")
    assert rc == 0, err


@pytest.mark.parametrize("sep, flag", [(";", ";"), ("\t", "tab"), ("\t", "\\t"),
                                       ("\t", "\t"), ("|", "|")])
@pytest.mark.parametrize("dask", [False, True])
def test_sep_reads_the_file_as_its_comma_twin(tmp_path, capsys, sep, flag, dask):
    """The same table separated by ``,`` and by ``sep`` (decimal commas
    with ``--decimal ,`` where ``sep`` is not a comma): the same release."""
    pytest.importorskip("dask.dataframe") if dask else None
    frame = table()
    extra = ["--dask"] if dask else []
    comma = write(tmp_path / "comma.csv", frame)
    rc, _, err = fit(capsys, comma, tmp_path / "comma.json", *extra)
    assert rc == 0, err
    other = write(tmp_path / "other.csv", frame, sep=sep, decimal=",")
    rc, _, err = fit(capsys, other, tmp_path / "other.json", "--sep", flag,
                     "--decimal", ",", *extra)
    assert rc == 0, err
    np.testing.assert_allclose(components(tmp_path / "other.json"),
                               components(tmp_path / "comma.json"), atol=1e-12)
    # transform reads it too, and projects as on the comma file
    outputs = []
    for path, args in ((comma, []), (other, ["--sep", flag, "--decimal", ","])):
        rc, out, err = run(capsys, "transform", tmp_path / "comma.json", path,
                           "-o", "-", *extra, *args)
        assert rc == 0, err
        outputs.append(out)
    assert outputs[0] == outputs[1]


def test_decimal_commas_without_decimal_are_named_in_the_refusal(tmp_path, capsys):
    path = write(tmp_path / "d.csv", table(), sep=";", decimal=",")
    rc, _, err = fit(capsys, path, tmp_path / "m.json", "--sep", ";")
    assert rc == 2, err
    assert "non-numeric column(s)" in err and "need --decimal ','" in err, err


def test_standard_input_is_sniffed_and_read_with_sep(tmp_path, capsys,
                                                      monkeypatch):
    text = write(tmp_path / "s.csv", table(), sep=";").read_text()
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    rc, _, err = fit(capsys, "-", tmp_path / "m.json")
    assert rc == 2 and "-: this file looks separated by ';'" in err, err
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    rc, _, err = fit(capsys, "-", tmp_path / "m.json", "--sep", ";")
    assert rc == 0, err
    rc, _, err = fit(capsys, write(tmp_path / "c.csv", table()),
                     tmp_path / "c.json")
    assert rc == 0, err
    np.testing.assert_allclose(components(tmp_path / "m.json"),
                               components(tmp_path / "c.json"), atol=1e-12)


def test_a_bounds_file_is_read_with_sep(tmp_path, capsys):
    data = write(tmp_path / "d.csv", table(), sep=";", decimal=",")
    bounds = tmp_path / "b.csv"
    bounds.write_text("a;b;c\n-10;-10;-0,5\n10;10;0,5\n")
    rc, _, err = fit(capsys, data, tmp_path / "m.json", "--sep", ";",
                     "--decimal", ",", "--bounds", bounds)
    assert rc == 0, err
    rc, _, err = fit(capsys, write(tmp_path / "c.csv", table()),
                     tmp_path / "c.json", "--bounds", bounds)
    assert rc == 2 and "--bounds" in err and "pass --sep ';'" in err, err


@pytest.mark.parametrize("args, words", [
    (["--sep", ";;"], "must be one ASCII character"),
    (["--sep", '"'], "must be one ASCII character"),
    (["--sep", "\u00a7"], "must be one ASCII character"),
    (["--decimal", "1"], "must be one character"),
    (["--sep", ";", "--decimal", ";"], "--sep and --decimal are both ';'"),
])
def test_bad_sep_or_decimal_is_refused(tmp_path, capsys, args, words):
    path = write(tmp_path / "d.csv", table())
    rc, _, err = fit(capsys, path, tmp_path / "m.json", *args)
    assert rc == 2 and words in err, err
    assert not (tmp_path / "m.json").exists()


def test_dask_refuses_a_quoted_line_break_after_a_semicolon(tmp_path, capsys):
    """``--dask`` cuts a file at line breaks: one inside a quoted cell is
    refused (mend 98); with ``--sep ';'`` a quote after ``;`` opens a cell,
    as pandas reads it (the scan took only ``,`` for a cell's start)."""
    pytest.importorskip("dask.dataframe")
    lines = [f'{i % 7};{i % 5};"fine thanks"\n' for i in range(60)]
    lines[30] = '1;2;"fine\nthanks"\n'
    path = tmp_path / "q.csv"
    path.write_text("x;y;comment\n" + "".join(lines))
    rc, _, err = run(capsys, "fit", path, "--dask", "--sep", ";", "--columns",
                     "x,y", *FIT, "-o", tmp_path / "m.json")
    assert rc == 2 and "a quoted cell holds a line break" in err, err


def test_the_scan_reads_quotes_after_sep_as_pandas_does(tmp_path):
    """Random bytes of ``a ; , " \\n``: with ``sep=';'`` the scan finds a
    quoted line break and an unterminated quote where pandas' tokenizer,
    reading with ``sep=';'``, does."""
    from sklearn_dppca._csv_quotes import scan_lines

    rng = random.Random(0)
    alphabet = [b"a", b";", b",", b'"', b'"', b"\n", b" "]
    path = tmp_path / "t.csv"
    for _ in range(400):
        data = b"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 20)))
        path.write_bytes(data)
        want = _pandas_reads(data, sep=";")
        for block in (1, 2, 3, 7, 2**20):
            assert scan_lines(path, block, sep=";")[:2] == want, (data, block)


@pytest.mark.parametrize("name", ["t.tsv", "t.tsv.gz"])
@pytest.mark.parametrize("dask", [False, True])
def test_a_tsv_file_is_read_with_tabs(tmp_path, capsys, name, dask):
    # review 118: a *.tsv file was refused as of an unknown table format
    frame = table()
    comma = write(tmp_path / "t.csv", frame)
    tabs = write(tmp_path / name, frame, sep="\t")
    extra = ["--dask"] if dask and not name.endswith(".gz") else []
    assert fit(capsys, comma, tmp_path / "a.json")[0] == 0
    assert fit(capsys, tabs, tmp_path / "b.json", *extra)[0] == 0
    np.testing.assert_allclose(components(tmp_path / "b.json"),
                               components(tmp_path / "a.json"), atol=1e-12)


def test_a_tsv_file_with_decimal_commas_needs_only_decimal(tmp_path, capsys):
    # the options' early check took --decimal , against the default ',' sep
    frame = table()
    assert fit(capsys, write(tmp_path / "t.csv", frame), tmp_path / "a.json")[0] == 0
    tabs = write(tmp_path / "t.tsv", frame, sep="\t", decimal=",")
    assert fit(capsys, tabs, tmp_path / "b.json", "--decimal", ",")[0] == 0
    np.testing.assert_allclose(components(tmp_path / "b.json"),
                               components(tmp_path / "a.json"), atol=1e-12)


def _tables(folder, frame, names, sep=","):
    """``frame`` split over the files ``names`` in ``folder`` (tabs or
    ``sep``; ``*.gz`` compressed)."""
    folder.mkdir()
    for part, name in zip(np.array_split(np.arange(len(frame)), len(names)), names):
        rows = frame.iloc[part]
        rows.to_csv(folder / name, index=False,
                    sep="\t" if ".tsv" in name else sep)
    return folder


@pytest.mark.parametrize("names, glob", [
    (["p0.tsv", "p1.tsv", "p2.tsv"], False), (["p0.tsv", "p1.tsv"], True),
    (["p0.tsv.gz", "p1.tsv.gz"], False), (["p0.tsv", "p1.tsv", "_SUCCESS"], False)])
def test_dask_reads_a_directory_or_glob_of_tsv_files_with_tabs(
        tmp_path, capsys, names, glob):
    """Mend 136: with ``--dask``, a directory or ``dir/*`` glob of
    ``*.tsv`` files was read with ``,`` (the name given decides: not
    ``*.tsv``), and refused from the header as ``','``-less. Where every
    table it names is ``*.tsv`` (compressed or not) it is read with tabs,
    as one ``*.tsv`` file is: the release of the same rows as one CSV."""
    pytest.importorskip("dask.dataframe")
    frame = table(n=60)
    comma = write(tmp_path / "all.csv", frame)
    assert fit(capsys, comma, tmp_path / "a.json", "--dask")[0] == 0
    folder = _tables(tmp_path / "parts", frame,
                     [n for n in names if n != "_SUCCESS"])
    if "_SUCCESS" in names:  # not a table: ignored
        (folder / "_SUCCESS").write_text("")
    data = f"{folder}/*" if glob else folder
    rc, _, err = fit(capsys, data, tmp_path / "b.json", "--dask")
    assert rc == 0, err
    np.testing.assert_allclose(components(tmp_path / "b.json"),
                               components(tmp_path / "a.json"), atol=1e-12)
    rc, out, err = run(capsys, "transform", tmp_path / "a.json", data, "--dask",
                       "-o", "-")
    assert rc == 0, err
    rc, want, err = run(capsys, "transform", tmp_path / "a.json", comma, "-o", "-")
    assert rc == 0, err
    np.testing.assert_allclose(pd.read_csv(io.StringIO(out)),
                               pd.read_csv(io.StringIO(want)), atol=1e-12)


@pytest.mark.parametrize("glob", [False, True])
def test_dask_refuses_a_mix_of_tsv_and_csv_files_naming_sep(tmp_path, capsys, glob):
    """Mend 136: a directory or glob naming both ``*.tsv`` and ``*.csv``
    files has no one separator by name: refused before any row is read and
    before the charge, naming ``--sep`` (which reads every file with it)."""
    pytest.importorskip("dask.dataframe")
    ledger = tmp_path / "budget.db"
    run(capsys, "ledger", "init", ledger, "--epsilon", 9, "--delta", 1e-6)
    folder = _tables(tmp_path / "parts", table(n=60), ["p0.tsv", "p1.csv"])
    data = f"{folder}/p*" if glob else folder
    for command in ("fit", "transform"):
        argv = ((command, data, *FIT, "-o", tmp_path / "m.json", "--force",
                 "--ledger", ledger) if command == "fit" else
                (command, tmp_path / "m.json", data, "-o", "-"))
        charges = BudgetAccountant(path=ledger).n_charges
        rc, _, err = run(capsys, *argv, "--dask")
        assert rc == 2, err
        assert_one_error_line(err)
        assert "*.tsv" in err and "*.csv" in err and "--sep" in err, err
        assert BudgetAccountant(path=ledger).n_charges == charges
        if command == "fit":  # with --sep: every file read with it
            (folder / "p0.tsv").write_text(
                (folder / "p0.tsv").read_text().replace("\t", ","))
            rc, _, err = run(capsys, *argv, "--dask", "--sep", ",")
            assert rc == 0, err
            (folder / "p0.tsv").write_text(
                (folder / "p0.tsv").read_text().replace(",", "\t"))


@pytest.mark.parametrize("dask", [False, True])
def test_transform_reads_as_fit_does_and_writes_the_output_names_separator(
        tmp_path, capsys, dask):
    """``--sep``/``--decimal`` are the input file's, not the model's (not
    stored): ``transform`` finds a ``*.tsv`` file's tabs by its name and
    refuses a ``;`` file without ``--sep`` from its header, as ``fit``
    does. Its output is ``,``-separated with ``.`` decimals whatever the
    input's separator, but tab-separated where it is named ``*.tsv`` (mend
    136: ``-o out.tsv`` held commas, which ``dppca`` then read with tabs
    and refused)."""
    pytest.importorskip("dask.dataframe") if dask else None
    extra = ["--dask"] if dask else []
    frame = table()
    comma = write(tmp_path / "t.csv", frame)
    model = tmp_path / "m.json"
    rc, _, err = run(capsys, "fit", comma, *FIT[:1], 2, *FIT[2:], "-o", model)
    assert rc == 0, err
    rc, want, err = run(capsys, "transform", model, comma, "-o", "-")
    assert rc == 0 and want.splitlines()[0] == "privatepca0,privatepca1", err
    semi = write(tmp_path / "s.csv", frame, sep=";", decimal=",")
    rc, _, err = run(capsys, "transform", model, semi, "-o", "-", *extra)
    assert rc == 2 and "pass --sep ';'" in err, err
    for data, args in ((write(tmp_path / "t.tsv", frame, sep="\t"), []),
                       (semi, ["--sep", ";", "--decimal", ","])):
        for out, sep in (("o.csv", ","), ("o.tsv", "\t"), ("o.tsv.gz", "\t")):
            path = tmp_path / out
            path.unlink(missing_ok=True)
            rc, _, err = run(capsys, "transform", model, data, "-o", path,
                             *args, *extra)
            assert rc == 0, err
            written = pd.read_csv(path, sep=sep)
            assert list(written.columns) == ["privatepca0", "privatepca1"]
            np.testing.assert_allclose(written, pd.read_csv(io.StringIO(want)),
                                       atol=1e-12)
            # dppca reads its own output back by its name (no --sep)
            assert fit(capsys, path, tmp_path / "again.json")[0] == 0
