"""``--dask`` on an uncompressed CSV with quoted cells: Dask cuts the file
into blocks of bytes at line breaks, without knowing quotes, so a quoted
line break decided a refusal by where the blocks fell (review 97 F2). Every
file with one is refused before the charge, wherever it falls
(:mod:`sklearn_dppca._csv_quotes`)."""

import gzip
import io
import json
import os
import random

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("dask.dataframe")

from sklearn_dppca import BudgetAccountant, _cli_dask  # noqa: E402
from sklearn_dppca._csv_quotes import scan  # noqa: E402

from .test_cli import assert_one_error_line, run  # noqa: E402

FIT = ["--columns", "x,y", "-k", 1, "--epsilon", 1, "--delta", 1e-6,
       "--data-norm", 20, "--seed", 0, "-q"]
BROKEN = "a quoted cell holds a line break"


def survey(row=None, text="fine\nthanks"):
    """300 rows ``x,y,"comment"`` (18 bytes each): row ``row``'s comment,
    in a column not chosen, is ``text``."""
    rng = np.random.default_rng(0)
    lines = [f'{rng.integers(0, 10)},{rng.integers(0, 10)},"fine thanks"\n'
             for _ in range(300)]
    if row is not None:
        lines[row] = lines[row].replace("fine thanks", text)
    return "x,y,comment\n" + "".join(lines)


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of at most 1 000 bytes: the file of :func:`survey` is cut in 6,
    the second starting at byte 902 (5 412 bytes spread evenly; Dask's own
    rule, ``5 412 / (5 412 // 1 000)``, cut 5 blocks of 1 082: mend 108)."""
    monkeypatch.setattr(_cli_dask, "CSV_BLOCK", 1000)


def fit(capsys, path, *extra):
    return run(capsys, "fit", path, "--dask", *FIT, "-o", path.with_suffix(".json"),
               "--force", *extra)


def test_a_quoted_line_break_is_refused_wherever_it_falls(tmp_path, capsys,
                                                          small_blocks):
    """Row 49's line break is the first after byte 902, where Dask starts
    a block (row 59's, after byte 1 082, before mend 108's blocks of at
    most CSV_BLOCK): that table was refused ("EOF inside string"), its
    neighbour with the break in row 100 fitted, and so did both without
    the break; in memory all four fit. Both with a break are now refused, with one
    message naming the file, before the charge; without one both fit."""
    errors = []
    ledger = tmp_path / "budget.db"
    run(capsys, "ledger", "init", ledger, "--epsilon", 9, "--delta", 1e-6)
    for row in (49, 100):
        path = tmp_path / f"break{row}.csv"
        path.write_text(survey(row))
        if row == 49:  # the break Dask cut the file just after
            cut = _cli_dask.csv_blocksize([path])
            assert cut == 902
            assert path.read_bytes().index(b"\n", cut) == cut + 1
        rc, _, err = fit(capsys, path, "--ledger", ledger)
        assert rc == 2, err
        assert BudgetAccountant(path=ledger).n_charges == 0
        assert_one_error_line(err)
        assert err.endswith(f"{path}: {BROKEN}, which --dask cannot read in "
                            "blocks (its blocks are cut at line breaks): read "
                            "it without --dask, or save it as Parquet\n"), err
        errors.append(err.replace(str(path), "DATA"))
        rc, _, err = run(capsys, "fit", path, *FIT, "-o", tmp_path / "m.json",
                         "--force")  # in memory
        assert rc == 0, err
        path.write_text(survey(row, "fine thanks"))
        rc, _, err = fit(capsys, path)
        assert rc == 0, err
    assert errors[0] == errors[1]


def test_quoted_commas_and_quotes_without_a_line_break_fit(tmp_path, capsys,
                                                           small_blocks):
    """Escaped quotes (``""``), commas in quotes and a quote inside an
    unquoted cell (``5" wide``: a character, as pandas reads it) are no line
    break: the file fits, with the in-memory release."""
    text = survey()
    lines = text.splitlines(keepends=True)
    for i in range(1, len(lines), 7):
        lines[i] = lines[i].replace('"fine thanks"', '"she said ""fine, thanks"""')
    for i in range(3, len(lines), 11):
        lines[i] = lines[i].replace('"fine thanks"', '5" wide')
    path = tmp_path / "quotes.csv"
    path.write_text("".join(lines))
    models = []
    for extra in ([], ["--dask"]):
        rc, _, err = run(capsys, "fit", path, *FIT, *extra,
                         "-o", tmp_path / f"m{len(extra)}.json")
        assert rc == 0, err
        models.append(json.loads((tmp_path / f"m{len(extra)}.json").read_text()))
    np.testing.assert_allclose(models[0]["attributes"]["components_"],
                               models[1]["attributes"]["components_"], atol=1e-12)


def test_a_break_after_a_quote_inside_a_cell_is_found(tmp_path, capsys,
                                                      small_blocks):
    """``5" wide`` then a quoted cell with a line break: counting the
    quotes' parity misses that break (the first quote is a character); the
    scan follows pandas' reading, and refuses the file."""
    lines = survey().splitlines(keepends=True)
    lines[40] = lines[40].replace('"fine thanks"', '5" wide')
    lines[80] = lines[80].replace("fine thanks", "fine\nthanks")
    path = tmp_path / "inch.csv"
    path.write_text("".join(lines))
    assert path.read_bytes().count(b'"') % 2 == 1
    rc, _, err = fit(capsys, path)
    assert rc == 2 and BROKEN in err, err


def test_an_unterminated_quote_gets_the_in_memory_message(tmp_path, capsys,
                                                          small_blocks):
    """A quote never closed: the file cannot be read at all, and --dask
    refuses it in the in-memory words (it said which block failed)."""
    lines = survey().replace('"fine thanks"', "fine thanks").splitlines(
        keepends=True)
    lines[150] = lines[150].replace("fine thanks", '"fine thanks')
    path = tmp_path / "open.csv"
    path.write_text("".join(lines))
    rc, _, in_memory = run(capsys, "fit", path, *FIT, "-o", tmp_path / "m.json")
    assert rc == 2 and "EOF inside string" in in_memory, in_memory
    rc, _, err = fit(capsys, path)
    assert rc == 2 and err == in_memory, err


def test_a_compressed_csv_is_read_whole_and_keeps_its_line_breaks(
        tmp_path, capsys, small_blocks):
    """A compressed file is one partition, never cut: a quoted line break
    reads as in memory, and is not refused."""
    path = tmp_path / "break.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write(survey(59))
    rc, _, err = fit(capsys, path)
    assert rc == 0, err


def _pandas_reads(data, sep=","):
    """Per line break of ``data``: whether pandas reads it inside a quoted
    cell (the bytes up to it end inside one), cells split at ``sep``; and
    whether ``data`` does."""
    def ends_inside(head):
        try:
            pd.read_csv(io.BytesIO(head), header=None, names=range(60), dtype=str,
                        sep=sep)
        except pd.errors.EmptyDataError:
            return False
        except pd.errors.ParserError as exc:
            if "EOF inside string" in str(exc):
                return True
            raise
        return False

    breaks = [ends_inside(data[:i + 1]) for i, c in enumerate(data) if c == 10]
    return any(breaks), ends_inside(data)


def test_the_scan_reads_quotes_as_pandas_does(tmp_path):
    """Random bytes of ``a , " \\n \\r`` (and a byte order mark): the scan,
    in blocks of 1 to 7 bytes and in one, finds a quoted line break and an
    unterminated quote exactly where pandas' tokenizer reads them."""
    rng = random.Random(0)
    alphabet = [b"a", b",", b'"', b'"', b"\n", b"\r", b" "]
    path = tmp_path / "t.csv"
    for _ in range(600):
        data = b"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24)))
        if rng.random() < 0.1:
            data = b"\xef\xbb\xbf" + data
        path.write_bytes(data)
        want = _pandas_reads(data)
        for block in (1, 2, 3, 7, 2**20):
            assert scan(path, block) == want, (data, block)


@pytest.mark.parametrize("length", [1, 2, 63, 64, 65, 130, 131])
def test_a_long_run_of_quotes_across_blocks(tmp_path, length):
    """A run of quotes is never cut between blocks (whether it starts a cell
    decides how it reads): one longer than a block, at a cell's start or
    inside one, reads as pandas reads it."""
    path = tmp_path / "t.csv"
    for data in (b"a,b\n1," + b'"' * length + b"\n2,3\n",
                 b"a,b\n1,x" + b'"' * length + b"\n2,3\n",
                 b'a,b\n1,"x' + b'"' * length + b"\n2,3\n"):
        path.write_bytes(data)
        want = _pandas_reads(data)
        for block in (1, 5, 64, 100, 2**20):
            assert scan(path, block) == want, (data, block)


LONE_CR = "a line ends in a lone carriage return"


@pytest.mark.parametrize("blocks", ["small", "one"])
@pytest.mark.parametrize("layout", ["header", "first lines", "every line", "last"])
def test_a_line_ended_by_a_lone_cr_is_refused_at_any_size(tmp_path, capsys,
                                                          monkeypatch, blocks,
                                                          layout):
    """pandas reads a lone CR as a line break; Dask cuts blocks at LF only and
    put the bytes up to the first LF before each later block as its header:
    a header line ended by CR made row 1 part of that header, read once more
    per block (review 101 F1), and a file of CR lines only was one block.
    Refused before the charge, naming the file, whether the file spans
    several blocks or one; in memory it fits. CR LF is a line break to
    both, and fits."""
    if blocks == "small":
        monkeypatch.setattr(_cli_dask, "CSV_BLOCK", 1000)
    text = survey()
    lines = text.splitlines(keepends=True)
    ends = {"header": [0], "first lines": range(20), "every line":
            range(len(lines)), "last": [len(lines) - 1]}[layout]
    for i in ends:
        lines[i] = lines[i][:-1] + "\r"
    path = tmp_path / "cr.csv"
    path.write_text("".join(lines), newline="")
    ledger = tmp_path / "budget.db"
    run(capsys, "ledger", "init", ledger, "--epsilon", 9, "--delta", 1e-6)
    rc, _, err = fit(capsys, path, "--ledger", ledger)
    assert rc == 2 and LONE_CR in err, err
    assert_one_error_line(err)
    assert BudgetAccountant(path=ledger).n_charges == 0
    rc, _, err = run(capsys, "fit", path, *FIT, "-o", tmp_path / "m.json")
    assert rc == 0, err  # in memory
    path.write_text(text.replace("\n", "\r\n"), newline="")
    rc, _, err = fit(capsys, path)
    assert rc == 0, err


def test_the_scan_finds_a_lone_cr_as_pandas_reads_it(tmp_path):
    """Random bytes of ``a , " \\n \\r``: the scan finds a CR that no LF
    follows outside a quoted cell (pandas' line break, not Dask's) exactly
    where pandas reads one, in blocks of 1 to 7 bytes and in one."""
    from sklearn_dppca._csv_quotes import scan_lines

    rng = random.Random(1)
    alphabet = [b"a", b",", b'"', b'"', b"\n", b"\r", b"\r\n", b" "]
    path = tmp_path / "t.csv"
    for _ in range(400):
        data = b"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 20)))
        path.write_bytes(data)
        lone = any(c == 13 and data[i + 1:i + 2] != b"\n"
                   and not _pandas_reads(data[:i + 1])[1]  # not in quotes
                   for i, c in enumerate(data))
        want = (*_pandas_reads(data), lone)
        for block in (1, 2, 3, 7, 2**20):
            assert scan_lines(path, block) == want, (data, block)


def _fits_as_in_memory(capsys, tmp_path, path, n, args=FIT):
    """``fit --dask`` of ``path`` releases what the in-memory fit does (the
    same rows, the same noise), on ``n`` rows."""
    models = []
    for extra in ([], ["--dask"]):
        model = tmp_path / f"m{len(extra)}.json"
        rc, _, err = run(capsys, "fit", path, *args, *extra, "-o", model, "--force")
        assert rc == 0, err
        models.append(json.loads(model.read_text())["attributes"])
    assert models[0]["n_samples_"] == models[1]["n_samples_"] == n
    np.testing.assert_allclose(models[1]["components_"], models[0]["components_"],
                               atol=1e-9)


def _block_start(path):
    """The index of the row that starts Dask's second block of ``path``
    (its cut, at the patched block size)."""
    from dask.bytes import read_bytes

    first = read_bytes(str(path), delimiter=b"\n",
                       blocksize=_cli_dask.csv_blocksize([path])
                       )[1][0][0].compute()
    return first.count(b"\n") - 1


@pytest.mark.parametrize("cell", ["0,1", "0,1.5", "0,17"])
def test_a_row_that_starts_with_the_header_is_read_wherever_it_falls(
        tmp_path, capsys, small_blocks, cell):
    """pandas' default header ``0,1`` (``DataFrame(X).to_csv``): Dask wrote
    its header before a block only where the block did not start with the
    header's bytes, so a row ``0,1`` starting a block was dropped there (the
    fit read 599 of 600 rows) and ``0,1.5`` was taken for the header (the
    fit refused), both read mid-block: where the blocks fell, the bytes of
    every row before, decided it (mend 105). Every block is now read as
    rows."""
    lines = [f"{i % 7 + 2},{i % 5 + 2}\n" for i in range(600)]
    path = tmp_path / "default.csv"
    path.write_text("0,1\n" + "".join(lines))
    k = _block_start(path)
    fit_ = [a if a != "x,y" else "0,1" for a in FIT]
    for row in (k, k + 3):  # the start of block 2, and inside it
        rows = list(lines)
        rows[row] = cell + "\n"
        path.write_text("0,1\n" + "".join(rows))
        assert _block_start(path) == k
        _fits_as_in_memory(capsys, tmp_path, path, 600, fit_)


@pytest.mark.parametrize("blocks", ["small", "one"])
@pytest.mark.parametrize("lead", ["\n", "\r\n", "  \n", "\n\n"])
def test_a_blank_first_line_is_read_as_in_memory(tmp_path, capsys, monkeypatch,
                                                 blocks, lead):
    """A blank (or whitespace) line before the header: pandas skips it;
    Dask's header was that line, so every later block's first row was taken
    for the header and the read refused above one block (16 MiB) and fitted
    below: the file's size decided it (review 101 F2). Read as in memory,
    at any size."""
    if blocks == "small":
        monkeypatch.setattr(_cli_dask, "CSV_BLOCK", 1000)
    path = tmp_path / "lead.csv"
    path.write_text(lead + survey(), newline="")
    _fits_as_in_memory(capsys, tmp_path, path, 300)


@pytest.mark.parametrize("compressed", [False, True])
def test_a_later_row_with_a_field_more_is_read_the_same_wherever_it_falls(
        tmp_path, capsys, small_blocks, compressed):
    """In memory pandas refuses a row with more fields than the header
    ("Expected 2 fields"); --dask reads only the chosen columns, and pandas
    then drops the extra field (review 101 F6). Documented, not refused
    (counting each line's fields would slow the scan's search for one byte
    to a pass over every comma, and a compressed file is not scanned): what
    privacy needs is that where the row falls decides nothing, at a
    block's start (where no header precedes it) as inside one."""
    lines = [f"{i % 7},{i % 5}\n" for i in range(600)]
    path = tmp_path / "wide.csv"
    path.write_text("x,y\n" + "".join(lines))
    k = _block_start(path)
    models = []
    for row in (k, k + 3):
        rows = list(lines)
        rows[row] = "1,2,3\n"
        data = "x,y\n" + "".join(rows)
        path.write_text(data)
        assert _block_start(path) == k
        target = path
        if compressed:
            target = tmp_path / "wide.csv.gz"
            target.write_bytes(gzip.compress(data.encode()))
        rc, _, err = run(capsys, "fit", target, *FIT, "-o", tmp_path / "m.json",
                         "--force")
        assert rc == 2 and "Expected 2 fields" in err, err  # in memory
        rc, _, err = fit(capsys, target)
        assert rc == 0, err
        models.append(json.loads(target.with_suffix(".json").read_text()))
        rows[row] = "1,2\n"
        path.write_text("x,y\n" + "".join(rows))
        _fits_as_in_memory(capsys, tmp_path, path, 600)  # the row as 1,2
        same = json.loads((tmp_path / "m1.json").read_text())["attributes"]
        np.testing.assert_allclose(models[-1]["attributes"]["components_"],
                                   same["components_"], atol=1e-9)


@pytest.mark.parametrize("sizes", [[1.9], [1.0, 1.9, 3.5, 0.4]])
def test_blocks_are_at_most_csv_block_as_the_plan_counts(tmp_path, capsys,
                                                         monkeypatch, sizes):
    """The plan counts the parsing of a block of CSV_BLOCK bytes a thread;
    Dask divided a file by the block size rounded down, so that CSV_BLOCK
    itself cut a file of 1.9 times it as one block (of 2.5 times it, two
    of 1.25). Measured at the real 16 MiB, in a fresh process, a pass
    over a 33 MB file of single digits (1.99 times, one block) peaked
    321 MiB at 10 columns and 336 MiB at 500, 1.43 and 1.50 times the
    plan's 224 MiB a thread; in two blocks, 225 and 213 MiB (mend 108).
    Every block (to its line break) is now at most CSV_BLOCK, the same
    blocks for the frame, the count of the rows and the read, one size
    for several files, and the fit is the in-memory one."""
    from dask.bytes import read_bytes

    block = 1000
    monkeypatch.setattr(_cli_dask, "CSV_BLOCK", block)
    rng = np.random.default_rng(0)
    frames = []
    for i, size in enumerate(sizes):
        lines = [f"{rng.integers(0, 10)},{rng.integers(0, 10)}\n"
                 for _ in range(int(size * block) // 4)]
        (tmp_path / f"p{i}.csv").write_text("x,y\n" + "".join(lines))
        frames.append(pd.read_csv(tmp_path / f"p{i}.csv"))
    files = sorted(str(p) for p in tmp_path.glob("p*.csv"))
    path = tmp_path / "p*.csv"
    table = _cli_dask.LazyTable(str(path))
    blocks = [b.compute() for f in read_bytes(
        files, delimiter=b"\n", blocksize=table._csv["blocksize"],
        sample=False)[1] for b in f]
    assert max(map(len, blocks)) <= block + 4, sorted(map(len, blocks))
    assert table.frame.npartitions == len(blocks)
    matrix = _cli_dask.LazyMatrix(table, ["x", "y"], str(path), hint="")
    n = sum(map(len, frames))
    assert matrix.n_rows == n
    np.testing.assert_array_equal(matrix.X.compute(),
                                  pd.concat(frames)[["x", "y"]].to_numpy(float))
    whole = tmp_path / "whole.csv"
    pd.concat(frames).to_csv(whole, index=False)
    _fits_as_in_memory(capsys, tmp_path, whole, n)


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"),
                    reason="resets the peak RSS with /proc/self/clear_refs")
def test_a_block_of_empty_cells_is_parsed_within_the_plan(tmp_path):
    """A cell takes at least one byte (its comma), so a block of CSV_BLOCK
    bytes parses into at most CSV_BLOCK float64 entries: rows ``1,,,…`` (a
    NaN a byte, read with --fill) are the densest. A pass over a 16 MiB
    file of them, one block, on one thread, peaked 303 MiB at 500 columns
    (268 MiB at 10) in a fresh process, 1.35 times the plan's 224 MiB with
    10 CSV_BLOCKs counted for the parsing; single digits ``d,d,…`` 221 MiB
    (mend 108). 16 are counted now (320 MiB)."""
    from .test_cli_dask import _peaks

    head = ",".join(f"c{i}" for i in range(500)) + "\n"
    row = "1" + "," * 499 + "\n"
    path = tmp_path / "empty.csv"
    path.write_text(head + row * ((_cli_dask.CSV_BLOCK - len(head)) // len(row)))
    _, read, plan = _peaks(path)
    assert read <= plan, (read / 2**20, plan / 2**20)


def _digits_gz(folder, thousands):
    """A gzip CSV file of ``thousands`` thousand rows of 500 single digits."""
    rng = np.random.default_rng(0)
    body = "".join(",".join(map(str, r)) + "\n"
                   for r in rng.integers(0, 10, (1000, 500)))
    path = folder / "t.csv.gz"
    with gzip.open(path, "wt", compresslevel=1) as f:
        f.write(",".join(f"c{i}" for i in range(500)) + "\n" + body * thousands)
    return path


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"),
                    reason="resets the peak RSS with /proc/self/clear_refs")
def test_a_compressed_csv_read_whole_holds_what_the_plan_counts(tmp_path):
    """A compressed CSV file is read whole as one chunk (Dask cannot cut it
    into blocks): a pass on one thread held about 3 float64 copies of it,
    where chunk_bytes counted 2 beside the fixed parsing allowance of a
    block (mend 109: 1.20 times the plan on a gz file of 134 215 x 500
    single digits). The allowance is cut to one block here, so that a small
    file shows it: 16 000 x 500 held 1.15 times that plan."""
    import subprocess
    import sys

    from .test_cli_dask import _PEAK

    path = _digits_gz(tmp_path, 16)
    patch = "import sklearn_dppca._dask_memory as p\np.CSV_BLOCK_COPIES = 1\n"
    out = subprocess.run([sys.executable, "-c", patch + _PEAK, str(path)],
                         check=True, capture_output=True, text=True).stdout
    _, read, plan = (int(v) for v in out.split())
    assert read <= plan, (read / 2**20, plan / 2**20)


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"),
                    reason="resets the peak RSS with /proc/self/clear_refs")
def test_the_rows_of_a_compressed_csv_are_counted_in_pieces(tmp_path):
    """The count of a compressed CSV file's rows, before the plan, parsed
    the whole file into one frame (954 MiB on a 20 MB gz file of
    134 215 x 500 digits), so that a large one could exhaust the memory
    before the plan could refuse it: now counted by pieces (mend 109)."""
    import subprocess
    import sys

    from .test_cli_dask import _PEAK

    path = _digits_gz(tmp_path, 48)
    show = "\nprint(X.shape[0])"
    out = subprocess.run([sys.executable, "-c", _PEAK + show, str(path)],
                         check=True, capture_output=True, text=True).stdout
    built, _, _, n = (int(v) for v in out.split())
    assert n == 48000
    assert built <= 48000 * 500 * 8 / 2, built / 2**20
