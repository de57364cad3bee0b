"""Every example of the gallery (``examples/plot_*.py``) runs and makes a figure."""

import runpy
import time
from pathlib import Path

import pytest

plt = pytest.importorskip("matplotlib.pyplot")
from threadpoolctl import threadpool_limits  # noqa: E402 (after the skip)

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("plot_*.py"))


def test_examples_exist():
    assert len(EXAMPLES) >= 4


def code_lines(path):
    """``(number, line)`` of the code the gallery shows in code blocks: not
    the docstring, nor the comments after ``# %%``, which it shows as text."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next(n for n, line in enumerate(lines[1:], 1) if '"""' in line) + 1
    text = False
    for number, line in enumerate(lines[start:], start + 1):
        if line.startswith("# %%"):
            text = True
        elif not (text and line.startswith("#")):
            text = False
            yield number, line


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_code_fits_the_page_width(path):
    """The gallery's code column shows 72 characters in a 1280-pixel-wide
    window, with both sidebars (docs/_static/screenshots/quick_start.png)."""
    long = [number for number, line in code_lines(path) if len(line) > 72]
    assert long == [], f"{path.name}: code lines {long} are over 72 characters"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_and_makes_a_figure(path, monkeypatch, capsys):
    plt.switch_backend("Agg")
    plt.close("all")
    monkeypatch.setattr(plt, "show", lambda *args, **kwargs: None)
    monkeypatch.chdir(path.parent)
    start = time.perf_counter()
    # The examples' matrices are small: one BLAS thread is as fast, and it
    # is immune to OpenBLAS's spinning threads on a busy machine.
    with threadpool_limits(limits=1, user_api="blas"):
        runpy.run_path(str(path), run_name="__main__")
    elapsed = time.perf_counter() - start
    try:
        assert plt.get_fignums(), f"{path.name} made no figure"
        out = capsys.readouterr().out
        assert out, f"{path.name} printed nothing"
        # Numbers, as a reader wants them, not NumPy scalars' reprs
        assert "np.float" not in out and "np.int" not in out, out
    finally:
        plt.close("all")
    assert elapsed < 60, f"{path.name} took {elapsed:.0f} s"
