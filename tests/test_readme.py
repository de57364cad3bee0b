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
