"""The repository root holds only what the package, its docs and CI use."""

import fnmatch
import os
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
    "README.md": "the project's front page and the package's long description",
    "pyproject.toml": "the build, the dependencies, pytest and ruff",
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
