"""The repository holds only the package, its tests, docs, examples and
benchmarks, their configuration, the README and the LICENSE: no wheels, no
build output."""

import ast
import fnmatch
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Every entry allowed at the root, and what uses it. A new one is added here
#: with its reason, or it does not belong in the repository.
ALLOWED = {
    ".ci": "the CI job (tests/test_readme.py checks its command)",
    ".gitignore": "git",
    "LICENSE": "the license text (pyproject.toml's license-files)",
    "README.md": "the project's front page and the package's long description",
    "pyproject.toml": "the build, the package metadata, the dependencies, "
    "pytest and ruff",
    "benchmarks": "the measurements behind docs/benchmarks.rst",
    "docs": "the documentation",
    "examples": "the gallery of the documentation",
    "sklearn_dppca": "the package",
    "tests": "the tests",
}


def _ignored_by_root_gitignore(name, is_dir):
    """Whether the root .gitignore ignores the root entry ``name`` (its simple
    patterns only: enough for the fallback below)."""
    path = ROOT / ".gitignore"
    patterns = path.read_text().splitlines() if path.exists() else []
    for pattern in patterns:
        pattern = pattern.strip()
        if not pattern or pattern.startswith(("#", "!")):
            continue
        dir_only = pattern.endswith("/")
        pattern = pattern.strip("/")
        if "/" in pattern or (dir_only and not is_dir):
            continue
        if fnmatch.fnmatch(name, pattern):
            return True
    return False


def _ignores_itself(path):
    """A directory whose own .gitignore ignores everything (ruff's cache)."""
    own = path / ".gitignore"
    return own.is_file() and "*" in own.read_text().split()


def root_entries():
    """The tracked entries at the root: ``git ls-files`` where git is
    installed, else the directory's entries less what .gitignore ignores."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    if shutil.which("git") is not None:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True,
        ).stdout.decode()
        return {path.split("/", 1)[0] for path in listed.split("\0") if path}
    return {
        name
        for name in os.listdir(ROOT)
        if name != ".git"
        and not _ignored_by_root_gitignore(name, (ROOT / name).is_dir())
        and not ((ROOT / name).is_dir() and _ignores_itself(ROOT / name))
    }


def test_root_holds_only_what_is_used():
    unexpected = sorted(root_entries() - set(ALLOWED))
    assert not unexpected, (
        f"{unexpected} at the repository root: commit only what the package, "
        "its docs or CI use (or add it to ALLOWED in tests/test_repository.py, "
        "with the reason)"
    )


def test_fallback_without_git_agrees(monkeypatch):
    """Without a git executable, the listing filtered by .gitignore finds the
    same entries (untracked, unignored files aside)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    tracked = root_entries()
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert tracked <= root_entries()


#: What a build, a test run or a docs build leaves behind, and archives of a
#: package: never committed (the .gitignore keeps most of them out).
BUILD_OUTPUT = ("*.whl", "*.tar.gz", "*.zip", "*.egg", "*.pyc", "*.so")
BUILD_DIRS = {"build", "dist", "__pycache__", ".pytest_cache", "_build",
              "auto_examples", "gen_modules"}


def tracked_files():
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("needs a git checkout and git")
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode()
    return [path for path in listed.split("\0") if path]


def test_no_wheel_archive_or_build_output_is_tracked():
    found = sorted(
        path for path in tracked_files()
        if any(fnmatch.fnmatch(path.rsplit("/", 1)[-1], p) for p in BUILD_OUTPUT)
        or any(part in BUILD_DIRS or part.endswith(".egg-info")
               for part in path.split("/")[:-1])
    )
    assert not found, f"build output or package archives committed: {found}"


def test_no_tracked_file_is_ignored():
    """A file that .gitignore ignores (generated docs, benchmark results) was
    committed by force: remove it, or stop ignoring it."""
    tracked_files()  # skips without git
    ignored = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--ignored", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode()
    assert [path for path in ignored.split("\0") if path] == []


def test_license_is_the_packaged_bsd_3_clause():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "BSD-3-Clause"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License\n")
    assert "the sklearn_dppca developers" in text.splitlines()[2]


def test_metadata_names_the_contact_and_the_project_urls():
    """docs/security.rst sends private reports to the maintainers' address in
    the package metadata: there is one."""
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any("@" in person.get("email", "") for person in project["maintainers"])
    assert {"Documentation", "Source", "Issues"} <= set(project["urls"])
    assert project["classifiers"] and project["keywords"]
    assert not any(c.startswith("License ::") for c in project["classifiers"])


def _docstrings():
    """Every module, class and function docstring of the package, by file."""
    package = Path(__file__).resolve().parents[1] / "sklearn_dppca"
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    yield path.name, node, doc


def test_docstrings_write_formulas_as_math_roles():
    """Issue 35: formulas in docstrings are :math: roles, as scikit-learn
    writes them; a ``…`` span is code. A span counts as a formula when it
    holds a mathematical symbol (or an operator between spaces) and nothing
    that reads as code (a call, a keyword, a snake_case or dotted name, a
    flag, a string, a file)."""
    math_char = re.compile(r"[≤≥‖√Σ∑²³⁴ᵀ⁻¹·×μσεδλθπ∞]| [=<>+\-*/^] ")
    code = re.compile(r"[A-Za-z]\w*\(|\w=|[a-z]+_[a-z_]+|\.\w|^-|['\"]|\.py"
                      r"|\.rst|@|>>>")
    roles, formulas = 0, []
    for name, _, doc in _docstrings():
        roles += doc.count(":math:`")
        formulas += [(name, span) for span in re.findall(
            r"(?<!`)``([^`]+)``(?!`)", doc)
            if math_char.search(span) and not code.search(span)]
    assert roles >= 50
    assert len(formulas) <= 170, formulas[:20]


def test_class_summaries_are_short():
    """Issue 35: no public class says more than 25 lines before its
    Parameters (scikit-learn's PCA: 23); the mathematics is in the guide."""
    for name, node, doc in _docstrings():
        if (isinstance(node, ast.ClassDef) and not node.name.startswith("_")
                and "\nParameters\n" in doc):
            head = doc.split("\nParameters\n")[0].strip("\n").splitlines()
            assert len(head) <= 25, (name, node.name, len(head))


def test_modules_are_under_a_thousand_lines():
    """Issue 35: the package is split by concern, no module over 1 000
    lines (docs/architecture.rst)."""
    package = ROOT / "sklearn_dppca"
    long = {path.name: n for path in package.rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) >= 1000}
    assert not long, long
