"""The README's set-up commands are the ones CI and users actually run."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands():
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)


def test_ci_runs_exactly_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci in readme_commands()


def test_readme_main_job_runs_the_demo():
    assert any(cmd.endswith("dppca demo") for cmd in readme_commands())


def test_demo_runs_and_reports(capsys):
    from sklearn_dppca.__main__ import main

    assert main(["demo", "--epsilon", "1", "3", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    assert "spent epsilon=" in out and "NOT private" in out


def test_cli_errors_are_one_line(capsys):
    from sklearn_dppca.__main__ import main

    assert main(["demo", "--epsilon", "-1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dppca: error:") and err.count("\n") == 1


def test_readme_quick_start_runs(capsys):
    text = (ROOT / "README.md").read_text()
    code = re.findall(r"```python\n(.*?)\n```", text, flags=re.S)[0]
    assert len(code.splitlines()) <= 10
    exec(compile(code, "README.md", "exec"), {})
    assert "1e-06" in capsys.readouterr().out


# ------------------------------------------- the docs carry their own reference
OUTSIDE_REFERENCES = ("ALGORITHMS.md", "COHERENT_AUTO.md", "../shared")


def _mentions_outside(paths):
    return sorted(
        f"{path.relative_to(ROOT)}: {word}"
        for path in paths
        for word in OUTSIDE_REFERENCES
        if word in path.read_text(encoding="utf-8")
    )


def test_readme_and_docs_point_to_no_file_outside_the_repository():
    docs = ROOT / "docs"
    paths = [ROOT / "README.md", *docs.glob("*.rst"), *docs.glob("*.py"),
             *(ROOT / "examples").glob("*.py")]
    assert _mentions_outside(paths) == []


def test_package_tests_and_benchmarks_point_to_no_file_outside_the_repository():
    paths = [*(ROOT / "sklearn_dppca").glob("*.py"),
             *(ROOT / "benchmarks").glob("*.py"), *(ROOT / "benchmarks").glob("*.md"),
             *(p for p in (ROOT / "tests").glob("*.py") if p.name != "test_readme.py")]
    assert _mentions_outside(sorted(p for p in paths if p.is_file())) == []


def test_papers_are_named_not_numbered():
    """What users read cites the papers by name, never as the numbered
    reading list ("seed 000") they came from."""
    numbered = re.compile(r"\bseed\s+0\d\d\b", flags=re.I)
    paths = [ROOT / "README.md", *(ROOT / "docs").glob("*.rst"),
             *(ROOT / "docs").glob("*.py"), *(ROOT / "examples").glob("*.py"),
             *(ROOT / "sklearn_dppca").glob("*.py"),
             *(ROOT / "benchmarks").glob("*.py"), *(ROOT / "benchmarks").glob("*.md")]
    found = sorted(str(path.relative_to(ROOT)) for path in paths
                   if numbered.search(path.read_text(encoding="utf-8")))
    assert found == []


PRIVACY_SECTIONS = [
    "§1 Privacy model", "§2 Accounting", "§3 Sensitivities", "§4 Noise kernels",
    "§5 Centering", "§6 The three estimators", "§7 Utility measures",
    "§8 Scaling features", "§9 Supervised heads",
]


def test_privacy_page_has_the_numbered_sections_the_code_cites():
    lines = (ROOT / "docs" / "privacy.rst").read_text(encoding="utf-8").splitlines()
    titles = [line for line, under in zip(lines, lines[1:])
              if line.startswith("§") and set(under) == {"-"}
              and len(under) >= len(line)]
    assert titles == PRIVACY_SECTIONS


def test_choosing_page_is_in_the_toctree_with_its_figures():
    docs = ROOT / "docs"
    assert "   choosing\n" in (docs / "user_guide.rst").read_text(encoding="utf-8")
    text = (docs / "choosing.rst").read_text(encoding="utf-8")
    images = re.findall(r"^\.\. image:: (\S+)$", text, flags=re.M)
    assert len(images) == 2
    for image in images:
        assert (docs / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", image
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/choosing.rst)" in readme


def test_quick_start_explains_what_the_variance_ratios_estimate():
    for path in (ROOT / "README.md", ROOT / "docs" / "user_guide.rst"):
        text = " ".join(path.read_text(encoding="utf-8").split())
        assert "explained_variance_ratio_" in text and "captured_variance_" in text
        assert "scikit-learn's" in text and "0.15 and 0.13" in text


# ------------------------------------------------ the site, without building it
SCREENSHOTS = ["landing", "quick_start", "gallery_example", "benchmarks"]


def test_screenshots_of_the_site_are_kept_small():
    """docs/screenshots.py keeps four pictures of the built site; each stays
    a small PNG, so that the repository does not grow with every refresh."""
    folder = ROOT / "docs" / "_static" / "screenshots"
    for name in SCREENSHOTS:
        data = (folder / f"{name}.png").read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", name
        assert len(data) <= 320 * 1024, f"{name}.png: {len(data) // 1024} KB"
    assert sorted(p.stem for p in folder.glob("*.png")) == sorted(SCREENSHOTS)


def test_screenshot_script_names_the_pages_it_keeps():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "screenshots", ROOT / "docs" / "screenshots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert sorted(module.PAGES) == sorted(SCREENSHOTS)
    assert module.PAGES["landing"] == "index.html"


def test_the_docs_serve_their_own_mathjax():
    """Issue 32: the formulas render offline. The build bundles MathJax
    (sphinx-mathjax-offline, in the docs extra), and the screenshot script
    refuses a page that loads a script from the network."""
    import importlib.util

    conf = (ROOT / "docs" / "conf.py").read_text()
    assert '"sphinx-mathjax-offline"' in conf
    assert "sphinx-mathjax-offline" in (ROOT / "pyproject.toml").read_text()
    spec = importlib.util.spec_from_file_location(
        "screenshots", ROOT / "docs" / "screenshots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.remote_scripts('<script src="_static/mathjax/tex-chtml.js">') == []
    cdn = '<script defer="defer" src="https://cdn.jsdelivr.net/npm/mathjax@3">'
    assert module.remote_scripts(cdn) == [cdn]
