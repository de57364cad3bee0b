"""The ``dppca`` command line: fit → JSON model → transform, and its errors."""

import io
import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from sklearn_dppca import (
    BudgetAccountant,
    CoherentPowerPCA,
    ComplexGaussPCA,
    PrivacyLeakWarning,
    PrivatePCA,
    _cli_io,
    _cli_model,
)
from sklearn_dppca.__main__ import in_flags, main

FEATURES = ["a", "b", "c", "d", "e"]
COMMON = {
    "components_", "explained_variance_", "explained_variance_ratio_",
    "singular_values_", "mean_", "noise_variance_", "n_components_",
    "n_samples_", "data_norm_", "privacy_spent_",
}
EXTRA = {
    "private": set(),
    "complex": set(),  # Ψ: from components_ and noisy_variance_ (not d × d JSON)
    "coherent": {"branch_", "clip_radius_", "n_iter_", "n_clipped_"},
}
#: The CLI options of each estimator and the same fit in Python.
CASES = {
    "private": ([], PrivatePCA, {}),
    "complex": (["--whiten"], ComplexGaussPCA, {"whiten": True}),
    "coherent": (["--clip-radius", "1", "--n-iter", "2", "--no-center"],
                 CoherentPowerPCA, {"clip_radius": 1.0, "n_iter": 2, "center": False}),
}


def make_frame(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, len(FEATURES))) * [1.0, 0.6, 0.3, 0.1, 0.05] + 0.2
    return pd.DataFrame(X, columns=FEATURES)


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "data.csv"
    make_frame().to_csv(path, index=False)
    return path


def noise_warning(line):
    """A NoisyReleaseWarning's line: the second component of this small
    table is noise at these budgets (a diagnostic of the release itself,
    tested in tests/test_release_warnings.py)."""
    return "not stand out of the noise" in line


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_error_line(err):
    """One error line, the last; before it only progress lines, no traceback."""
    lines = err.splitlines()
    assert err.endswith("\n") and lines[-1].startswith("dppca: error:"), err
    assert all(line.startswith("dppca: ") for line in lines), err
    assert sum(line.startswith("dppca: error:") for line in lines) == 1, err


def fit_args(data, model, *extra, epsilon=1.5):
    return ["fit", data, "-k", 2, "--epsilon", epsilon, "--delta", 1e-6,
            "--data-norm", 3, "-o", model, *extra]


def test_transform_whitens_partially_as_the_estimator(data, tmp_path, capsys):
    """A model file with whiten="partial" (written from an estimator) is
    applied with the estimator's scale, (λ_j T)^{1/4}; without
    total_variance_ it is refused as damaged."""
    model, out = tmp_path / "model.json", tmp_path / "out.csv"
    rc, _, err = run(capsys, *fit_args(data, model, "--seed", 0))
    assert rc == 0, err
    saved = json.loads(model.read_text())
    saved["parameters"]["whiten"] = "partial"
    model.write_text(json.dumps(saved))
    rc, _, err = run(capsys, "transform", model, data, "-o", out)
    assert rc == 0, err
    X = make_frame().to_numpy()
    with pytest.warns(PrivacyLeakWarning):
        est = PrivatePCA(2, epsilon=1.5, delta=1e-6, data_norm=3.0, random_state=0,
                         whiten="partial", accountant=BudgetAccountant()).fit(X)
    np.testing.assert_allclose(pd.read_csv(out).to_numpy(), est.transform(X),
                               rtol=0, atol=1e-12)
    del saved["attributes"]["total_variance_"]
    model.write_text(json.dumps(saved))
    rc, _, err = run(capsys, "transform", model, data, "-o", out)
    assert rc != 0 and "damaged model" in err and "total_variance_" in err


@pytest.mark.parametrize("name", list(CASES))
def test_fit_transform_round_trip_matches_the_estimator(name, data, tmp_path, capsys):
    options, cls, params = CASES[name]
    model, out = tmp_path / "model.json", tmp_path / "out.csv"
    rc, _, err = run(capsys, *fit_args(data, model, "--estimator", name, "--seed", 0,
                                       *options))
    assert rc == 0, err
    rc, _, err = run(capsys, "transform", model, data, "-o", out)
    assert rc == 0, err

    X = make_frame().to_numpy()
    with pytest.warns(PrivacyLeakWarning):
        est = cls(2, epsilon=1.5, delta=1e-6, data_norm=3.0, random_state=0,
                  accountant=BudgetAccountant(), **params).fit(X)
    saved = json.loads(model.read_text())
    np.testing.assert_array_equal(saved["attributes"]["components_"], est.components_)
    result = pd.read_csv(out)
    assert list(result.columns) == list(est.get_feature_names_out())
    np.testing.assert_allclose(result.to_numpy(), est.transform(X), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", list(CASES))
def test_model_json_holds_exactly_the_released_attributes(name, data, tmp_path, capsys):
    model = tmp_path / "model.json"
    options = CASES[name][0]
    assert run(capsys, *fit_args(data, model, "--estimator", name, *options))[0] == 0
    saved = json.loads(model.read_text())
    assert set(saved) == {"format", "format_version", "sklearn_dppca_version",
                          "estimator", "parameters", "feature_names", "attributes",
                          "privacy_warnings", "release_warnings", "reading"}
    assert saved["format_version"] == 1
    # how the rows were read, public values (coherent: also in each of its
    # two power iterations)
    assert saved["reading"] == {"passes": 4 if name == "coherent" else 2,
                                "all_passes_counted": True, "partitions": None}
    assert saved["estimator"] == CASES[name][1].__name__
    spectrum = {"captured_variance_", "total_variance_", "noisy_variance_",
                "n_resolved_"}
    path = {"path_"}  # every estimator's (ComplexGaussPCA: dense or matrix-free)
    assert set(saved["attributes"]) == (COMMON | EXTRA[name] | {"mean_norm_"}
                                        | spectrum | path)
    assert "accountant" not in saved["parameters"]
    assert saved["parameters"]["random_state"] is None
    assert saved["feature_names"] == FEATURES
    assert saved["privacy_warnings"] == []
    eps, delta = saved["attributes"]["privacy_spent_"]
    assert eps == pytest.approx(1.5, rel=1e-9) and delta == 1e-6
    assert saved["attributes"]["n_samples_"] == 300
    if name == "complex":  # Ψ, not written, is a function of what is
        components = np.asarray(saved["attributes"]["components_"])
        values = np.asarray(saved["attributes"]["noisy_variance_"])
        psi = components.T @ np.diag(np.maximum(values, 0.0)) @ components
        assert np.allclose(psi, psi.T)
        assert np.linalg.eigvalsh(psi).min() > -1e-9 * max(values.max(), 1.0)


def test_floats_round_trip_exactly(data, tmp_path, capsys):
    model = tmp_path / "model.json"
    run(capsys, *fit_args(data, model))
    loaded = _cli_model.load_model(model)
    text = model.read_text()
    again = json.dumps(json.loads(text), indent=1, allow_nan=False) + "\n"
    assert again == text  # every float printed as its shortest repr
    assert loaded.components_.dtype == np.float64


def test_fixed_seed_and_estimated_norm_warn_that_the_fit_is_not_private(
    data, tmp_path, capsys
):
    model = tmp_path / "model.json"
    rc, _, err = run(capsys, "fit", data, "-k", 2, "--epsilon", 1, "--delta", 1e-6,
                     "--estimate-data-norm", "--seed", 3, "-o", model)
    assert rc == 0
    warnings = [line for line in err.splitlines()
                if line.startswith("dppca: warning:") and not noise_warning(line)]
    assert len(warnings) == 2
    assert all("not" in w.lower() and "private" in w.lower() for w in warnings)
    saved = json.loads(model.read_text())
    assert len(saved["privacy_warnings"]) == 2
    # stored as printed: in the flags' words
    assert any("--seed 3" in w for w in saved["privacy_warnings"])
    assert not any("random_state" in w for w in saved["privacy_warnings"])
    assert saved["parameters"]["random_state"] == 3
    assert saved["parameters"]["data_norm"] is None


def test_columns_select_numeric_ones_and_transform_ignores_extras(tmp_path, capsys):
    frame = make_frame().assign(person=[f"p{i}" for i in range(300)])
    path = tmp_path / "people.csv"
    frame.to_csv(path, index=False)
    model, out = tmp_path / "m.json", tmp_path / "o.csv"
    rc, _, err = run(capsys, *fit_args(path, model, "--columns", "c,a",
                                       "--columns", "b"))
    assert rc == 0, err
    assert json.loads(model.read_text())["feature_names"] == ["c", "a", "b"]
    rc, _, err = run(capsys, "transform", model, path, "-o", out)
    assert rc == 0 and "'person'" in err and "'d'" in err
    assert pd.read_csv(out).shape == (300, 2)


def test_quiet_and_stdout(data, tmp_path, capsys):
    rc, out, err = run(capsys, *fit_args(data, "-", "-q"))
    assert rc == 0 and all(noise_warning(line) for line in err.splitlines())
    model = tmp_path / "m.json"
    model.write_text(out)
    rc, out, err = run(capsys, "transform", model, data, "-o", "-", "-q")
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == "privatepca0,privatepca1" and len(lines) == 301


def test_progress_lines_and_coherent_verbose(data, tmp_path, capsys):
    rc, _, err = run(capsys, *fit_args(data, tmp_path / "m.json", "--estimator",
                                       "coherent", "-v"))
    assert rc == 0
    assert "dppca: fitting CoherentPowerPCA" in err and "dppca: done:" in err
    assert "[CoherentPowerPCA] released: " in err  # the estimator's own progress
    assert "trial" not in err and "score" not in err  # nothing of a selection


def test_parquet_round_trip(data, tmp_path, capsys):
    pytest.importorskip("pyarrow")
    source = tmp_path / "data.parquet"
    make_frame().to_parquet(source)
    model, out = tmp_path / "m.json", tmp_path / "out.parquet"
    assert run(capsys, *fit_args(source, model, "--seed", 1))[0] == 0
    assert run(capsys, "transform", model, source, "-o", out)[0] == 0
    csv_out = tmp_path / "out.csv"
    assert run(capsys, "transform", model, data, "-o", csv_out)[0] == 0
    np.testing.assert_array_equal(pd.read_parquet(out), pd.read_csv(csv_out))


def test_parquet_without_an_engine_says_to_install_pyarrow(tmp_path, capsys,
                                                           monkeypatch):
    monkeypatch.setattr(_cli_io, "_PARQUET_ENGINES", ("no_such_engine_dppca",))
    path = tmp_path / "data.parquet"
    path.write_bytes(b"PAR1")
    rc, _, err = run(capsys, *fit_args(path, tmp_path / "m.json"))
    assert rc == 2 and "pip install pyarrow" in err and err.count("\n") == 1


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


ERRORS = {
    "empty file": lambda t, d: fit_args(_write(t, "e.csv", ""), t / "m.json"),
    "header only": lambda t, d: fit_args(_write(t, "h.csv", "a,b\n"), t / "m.json"),
    "NaN": lambda t, d: fit_args(_write(t, "n.csv", "a,b\n1,\n2,3\n"), t / "m.json"),
    "infinity": lambda t, d: fit_args(_write(t, "i.csv", "a,b\n1,inf\n2,3\n"),
                                      t / "m.json"),
    "ragged CSV": lambda t, d: fit_args(_write(t, "r.csv", "a,b\n1,2\n1,2,3,4\n"),
                                        t / "m.json"),
    "non-numeric": lambda t, d: fit_args(_write(t, "s.csv", "a,b\nx,1\ny,2\n"),
                                         t / "m.json"),
    "unknown column": lambda t, d: fit_args(d, t / "m.json", "--columns", "a,zz"),
    "one row": lambda t, d: fit_args(_write(t, "o.csv", "a,b\n1,2\n"), t / "m.json"),
    "too many components": lambda t, d: ["fit", d, "-k", 9, "--epsilon", 1, "--delta",
                                         1e-6, "--data-norm", 1, "-o", t / "m.json"],
    "missing file": lambda t, d: fit_args(t / "nope.csv", t / "m.json"),
    "unknown format": lambda t, d: fit_args(t / "data.xlsx", t / "m.json"),
    "output folder missing": lambda t, d: fit_args(d, t / "no" / "m.json"),
    "option of another estimator": lambda t, d: fit_args(d, t / "m.json",
                                                         "--n-iter", 3),
    "coherent fraction": lambda t, d: ["fit", d, "-k", 0.5, "--epsilon", 1, "--delta",
                                       1e-6, "--data-norm", 1, "--estimator",
                                       "coherent", "-o", t / "m.json"],
    # argparse usage errors: one line too
    "no data_norm": lambda t, d: ["fit", d, "-k", 2, "--epsilon", 1, "--delta", 1e-6,
                                  "-o", t / "m.json"],
    "negative epsilon": lambda t, d: fit_args(d, t / "m.json", epsilon=-1),
    "no command": lambda t, d: [],
    "model not JSON": lambda t, d: ["transform", d, d, "-o", t / "o.csv"],
    "model not a model": lambda t, d: ["transform", _write(t, "x.json", "[1]"), d,
                                       "-o", t / "o.csv"],
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_are_one_line_with_exit_status_2(case, data, tmp_path, capsys):
    rc, out, err = run(capsys, *ERRORS[case](tmp_path, data))
    assert rc == 2
    assert_one_error_line(err)
    assert not (tmp_path / "m.json").exists()


def test_integers_beyond_64_bits_are_numbers(tmp_path, capsys):
    """pandas keeps a column holding an integer beyond 64 bits as objects:
    it is a number like its neighbour's 1, not a non-numeric column (a
    refusal that would tell the two apart); text is still refused."""
    rows = "".join(f"{i % 3},{i % 5}\n" for i in range(50))
    for cell in ("1", "99999999999999999999", "-9223372036854775809"):
        path = _write(tmp_path, "big.csv", "a,b\n" + rows + f"2,{cell}\n")
        rc, _, err = run(capsys, *fit_args(path, tmp_path / "m.json", "--force"))
        assert rc == 0, (cell, err)
    # pandas 3 types these columns as text, not objects (review 97 F1): an
    # integer of 2**63 beside a negative one, of 30 digits beside -1 or 1.5
    for cells in (f"{2**63}\n2,-1", "1" * 30 + "\n2,-1", "1" * 30 + "\n2,1.5",
                  f"{2**63}\n2,1"):
        path = _write(tmp_path, "mix.csv", "a,b\n" + rows + f"2,{cells}\n")
        rc, _, err = run(capsys, *fit_args(path, tmp_path / "m.json", "--force"))
        assert rc == 0, (cells, err)
    # ... and beside a missing cell, or a marker (review 101 F3): text
    # there too, where pandas keeps "" and "NA" as they are; missing values
    # as --dask's read makes them (filled here), the column a number
    for cells in (f"{2**63}\n2,\n2,-1", f"{2**64 - 1}\n2,NA", f"{2**63}\n2,null"):
        path = _write(tmp_path, "gap.csv", "a,b\n" + rows + f"2,{cells}\n")
        for extra in ([], ["--dask"]):
            rc, _, err = run(capsys, *fit_args(path, tmp_path / "m.json", "--force",
                                               "--fill-missing", 0, *extra))
            assert rc == 0, (cells, extra, err)
    for cell in ("x", "1_0", "0x10"):  # not a number to pandas' CSV parser
        path = _write(tmp_path, "text.csv", "a,b\n" + rows + f"2,{cell}\n2,-1\n")
        rc, _, err = run(capsys, *fit_args(path, tmp_path / "m.json", "--force"))
        assert rc == 2 and "non-numeric column(s) 'b'" in err, (cell, err)
    # beyond a float: the infinite value it rounds to, refused as "1e400" is
    for cell in ("1e400", "1" + "0" * 400):
        path = _write(tmp_path, "huge.csv", "a,b\n" + rows + f"2,{cell}\n")
        rc, _, err = run(capsys, *fit_args(path, tmp_path / "m.json", "--force"))
        assert rc == 2 and "infinite values in column(s) 'b'" in err, (cell, err)


def test_negative_numbers_in_exponent_form_are_values(data, tmp_path, capsys):
    """argparse reads -1e3 as an option; the parser reads it as -1000."""
    models = [tmp_path / "e.json", tmp_path / "f.json"]
    for low, model in zip(("-1e3", "-1000"), models):
        rc, _, err = run(capsys, *fit_args(data, model, "--bounds", low, "1e3",
                                           "--seed", 3))
        assert rc == 0, err
    assert (json.loads(models[0].read_text())["attributes"]
            == json.loads(models[1].read_text())["attributes"])


def test_transform_checks_features_and_model_version(data, tmp_path, capsys):
    model = tmp_path / "m.json"
    run(capsys, *fit_args(data, model))
    narrow = tmp_path / "narrow.csv"
    make_frame()[["a", "b", "c"]].to_csv(narrow, index=False)
    rc, _, err = run(capsys, "transform", model, narrow, "-o", tmp_path / "o.csv")
    assert rc == 2 and err.count("\n") == 1
    assert "lacks 2 of the model's 5" in err and "'d', 'e'" in err

    saved = json.loads(model.read_text())
    saved["format_version"] = 99
    model.write_text(json.dumps(saved))
    rc, _, err = run(capsys, "transform", model, data, "-o", tmp_path / "o.csv")
    assert rc == 2 and "version 99" in err and err.count("\n") == 1
    assert not (tmp_path / "o.csv").exists()


def test_refused_budget_is_one_line_and_writes_nothing(data, tmp_path, capsys,
                                                       monkeypatch):
    import sklearn_dppca

    monkeypatch.setattr(sklearn_dppca, "BudgetAccountant",
                        lambda: BudgetAccountant(epsilon=1.0))
    rc, _, err = run(capsys, *fit_args(data, tmp_path / "m.json", epsilon=2))
    assert rc == 2 and "budget" in err
    assert_one_error_line(err)
    assert not (tmp_path / "m.json").exists()


def test_python_m_help():
    result = subprocess.run([sys.executable, "-m", "sklearn_dppca", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert all(word in result.stdout for word in ("fit", "transform", "demo"))


# ------------------------------------------------ messages in the CLI's words
def _run_without(module, argv):
    """``dppca argv`` in a fresh interpreter where ``import module`` fails."""
    code = (f"import sys; sys.modules[{module!r}] = None; "
            "from sklearn_dppca.__main__ import main; sys.exit(main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", code, *map(str, argv)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", ["fit", "transform"])
def test_without_pandas_names_the_extra_to_install(command, data, tmp_path):
    if command == "fit":
        argv = fit_args(data, tmp_path / "m.json")
    else:
        argv = ["transform", tmp_path / "m.json", data, "-o", tmp_path / "o.csv"]
    result = _run_without("pandas", argv)
    assert result.returncode == 2
    assert result.stderr == (
        f"dppca: error: 'dppca {command}' reads tables with pandas, which is not "
        f"installed: {_cli_io.cli_extra_command()}\n"
    )
    assert result.stdout == "" and not (tmp_path / "m.json").exists()


class _Distribution:
    def __init__(self, direct_url):
        self.direct_url = direct_url

    def read_text(self, name):
        assert name == "direct_url.json"
        return None if self.direct_url is None else json.dumps(self.direct_url)


@pytest.mark.parametrize("direct_url, command", [
    # pip install -e . in a checkout
    ({"url": "file:///home/me/sklearn_dppca", "dir_info": {"editable": True}},
     'pip install -e "/home/me/sklearn_dppca[cli]"'),
    # pip install . in a checkout
    ({"url": "file:///home/me/src%20dir", "dir_info": {}},
     'pip install "/home/me/src dir[cli]"'),
    # from an index (no direct_url.json), or a downloaded wheel
    (None, 'pip install "sklearn_dppca[cli]"'),
    ({"url": "file:///tmp/sklearn_dppca-0.1.0-py3-none-any.whl",
      "archive_info": {}}, 'pip install "sklearn_dppca[cli]"'),
])
def test_the_pandas_hint_names_a_command_for_this_installation(
        monkeypatch, direct_url, command):
    monkeypatch.setattr(_cli_io, "distribution",
                        lambda name: _Distribution(direct_url))
    assert _cli_io.cli_extra_command() == command


def test_the_pandas_hint_without_an_installed_package(monkeypatch):
    def missing(name):
        raise _cli_io.PackageNotFoundError(name)

    monkeypatch.setattr(_cli_io, "distribution", missing)
    assert _cli_io.cli_extra_command() == 'pip install "sklearn_dppca[cli]"'


SEED_WARNING = (
    "dppca: warning: --seed 3 fixes the noise: anyone who knows it can subtract "
    "the noise, and the fit is not private. Leave out --seed (the noise then comes "
    "from operating-system entropy) for a private release."
)


def test_warnings_name_the_flags_not_the_python_parameters(data, tmp_path, capsys):
    rc, _, err = run(capsys, "fit", data, "-k", 2, "--epsilon", 1, "--delta", 1e-6,
                     "--estimate-data-norm", "--seed", 3, "-o", tmp_path / "m.json")
    assert rc == 0
    warned = [line for line in err.splitlines()
              if line.startswith("dppca: warning:") and not noise_warning(line)]
    largest = np.linalg.norm(make_frame().to_numpy(), axis=1).max()
    assert warned == [
        f"dppca: warning: --estimate-data-norm set the bound to the largest row "
        f"norm of the data ({largest:.6g}). This is NOT differentially private: the "
        "bound itself depends on the data. Give --data-norm from domain knowledge, "
        "without looking at the data, or --data-norm auto (a private choice from a "
        "small share of the budget), or public --bounds LOW HIGH.",
        SEED_WARNING,
    ]
    assert "random_state" not in err and "data_norm" not in err.replace(
        "data_norm=from", "")


def test_delta_warning_names_the_flag(data, tmp_path, capsys):
    rc, _, err = run(capsys, "fit", data, "-k", 2, "--epsilon", 1, "--delta", 0.01,
                     "--data-norm", 3, "-o", tmp_path / "m.json")
    assert rc == 0
    assert ("dppca: warning: --delta 0.01 is not well below 1/n = 0.00333 "
            "(n=300 rows): a fit may then reveal whole rows") in err.splitlines()


def test_estimator_errors_name_the_flags(data, tmp_path, capsys):
    rc, _, err = run(capsys, "fit", data, "-k", 9, "--epsilon", 1, "--delta", 1e-6,
                     "--data-norm", 1, "-o", tmp_path / "m.json")
    assert rc == 2
    assert_one_error_line(err)
    assert err.splitlines()[-1].startswith(
        "dppca: error: --n-components=9 must be between 0 and")


@pytest.mark.parametrize("message, expected", [
    ("random_state=3 fixes the noise", "--seed 3 fixes the noise"),
    ("random_state=-1 fixes", "--seed -1 fixes"),
    ("data_norm is None, so it was set to x",
     "--estimate-data-norm set the bound to x"),
    ("Give data_norm from domain knowledge", "Give --data-norm from domain knowledge"),
    ("n_components=9 must be", "--n-components=9 must be"),
    ("clip_radius and n_iter, n_iter_max", "--clip-radius and --n-iter, --n-iter-max"),
    ("data_norm_ and n_components_ stay", "data_norm_ and n_components_ stay"),
])
def test_in_flags_translates_parameter_names(message, expected):
    from sklearn_dppca.__main__ import in_flags

    assert in_flags(message) == expected


# ------------------------------------------------------------------ progress
def _progress_lines(err):
    return [line for line in err.splitlines()
            if line.startswith("dppca: ") and not line.startswith(
                ("dppca: warning:", "dppca: done:"))]


def test_verbose_reports_reading_and_each_pass_with_public_values_only(
    data, tmp_path, capsys
):
    rc, _, err = run(capsys, *fit_args(data, tmp_path / "m.json", "-v"))
    assert rc == 0
    shape = "300 rows x 5 columns"
    assert _progress_lines(err) == [
        f"dppca: reading {data}",
        f"dppca: read {shape} from {data}",
        f"dppca: fitting PrivatePCA (n_components=2, epsilon=1.5, delta=1e-06, "
        f"data_norm=3) on {shape} of {data}",
        # the plan, before any row is read: each release, its μ, its pass
        "dppca: release mean: mu=0.1089; pass: row norms and the clipped sum "
        "for the private mean",
        "dppca: release covariance: mu=0.3267; pass: Gram matrix of the "
        "centred, clipped rows",
        "dppca: pass 1: row norms and the clipped sum for the private mean",
        "dppca: pass 2: Gram matrix of the centred, clipped rows",
        "dppca: read the rows in 2 passes",
    ]
    # Only public values: another table of the same shape prints the same
    # lines (but the file name), one with a far larger row included.
    other = tmp_path / "other.csv"
    frame = make_frame(seed=1)
    frame.iloc[0] = 1e6
    frame.to_csv(other, index=False)
    rc, _, err_other = run(capsys, *fit_args(other, tmp_path / "m2.json", "-v"))
    assert rc == 0
    assert _progress_lines(err_other) == [
        line.replace(str(data), str(other)) for line in _progress_lines(err)
    ]
    # Without -v: the start and end lines only.
    rc, _, err = run(capsys, *fit_args(data, tmp_path / "m3.json"))
    assert [line.split(" ")[1] for line in err.splitlines()
            if not noise_warning(line)] == ["fitting", "done:"]


def test_transform_verbose_reports_reading(data, tmp_path, capsys):
    model = tmp_path / "m.json"
    assert run(capsys, *fit_args(data, model, "-q"))[0] == 0
    rc, _, err = run(capsys, "transform", model, data, "-o", tmp_path / "o.csv", "-v")
    assert rc == 0
    assert err.splitlines()[:2] == [f"dppca: reading {data}",
                                    f"dppca: read 300 rows x 5 columns from {data}"]


def test_passes_are_reported_as_they_start(data):
    """The hook is called during the fit, not after it, and names every pass."""
    X = make_frame().to_numpy()
    est = PrivatePCA(2, epsilon=1.0, data_norm=None, center=False,
                     accountant=BudgetAccountant())
    seen = []

    def progress(message):
        seen.append((message, hasattr(est, "components_")))

    with pytest.warns(PrivacyLeakWarning):
        est._fit(X, progress=progress)
    assert [fitted for _, fitted in seen] == [False, False, False]
    assert [m.split(": ")[1] for m, _ in seen] == [
        "largest row norm (data_norm from the data)",
        "row norms (every value checked finite)",
        "Gram matrix of the centred, clipped rows",
    ]


def test_passes_of_the_power_method_are_numbered_but_not_a_selections(
    data, tmp_path, capsys
):
    """CoherentPowerPCA's own passes are announced when their number is public
    (fixed T, or the gdp branch released); those of --selection repetition
    are not, nor counted: their number would tell the number of trials."""
    model = tmp_path / "m.json"
    rc, _, err = run(capsys, *fit_args(data, model, "--estimator", "coherent",
                                       "--clip-radius", 1, "--n-iter", 2, "-v"))
    assert rc == 0, err
    assert [line for line in _progress_lines(err)
            if line.startswith(("dppca: pass ", "dppca: read the"))][2:] == [
        "dppca: pass 3: power-method products of the clipped rows",
        "dppca: pass 4: power-method products of the clipped rows",
        "dppca: read the rows in 4 passes",
    ]
    # seeded: the selection may choose no iteration at all ("init"), rarely
    # (one run of the full suite in about forty), which this test is not about
    rc, _, err = run(capsys, *fit_args(data, model, "--estimator", "coherent",
                                       "--selection", "repetition", "--n-iter-max",
                                       2, "-v", "--force", "--seed", 0, epsilon=50))
    assert rc == 0, err
    assert "[CoherentPowerPCA] released: repetition" in err
    assert "dppca: pass 3 and on: random repetitions of the power method; how " \
        "many passes they take is not reported" in err
    assert "pass 4" not in err
    assert "dppca: read the rows in at least 2 passes (not all were counted)" in err
    assert json.loads(model.read_text())["reading"]["all_passes_counted"] is False


def test_the_copy_into_the_box_is_a_counted_pass(data, tmp_path, capsys):
    """In memory, the rows clipped into --bounds are a copy of the rows: a pass
    like the others, announced and counted, so the count is complete."""
    model = tmp_path / "m.json"
    rc, _, err = run(capsys, *fit_args(data, model, "--bounds", -5, 5, "-v",
                                       "--force"))
    assert rc == 0, err
    passes = [line for line in _progress_lines(err) if line.startswith("dppca: pass ")]
    assert passes[0] == "dppca: pass 1: the rows clipped into the box (one copy)"
    assert f"dppca: read the rows in {len(passes)} passes" in err
    assert json.loads(model.read_text())["reading"]["all_passes_counted"] is True


def test_estimator_verbose_output_leaves_stdout_to_the_model(data, capsys):
    rc, out, err = run(capsys, "fit", data, "-k", 2, "--epsilon", 1, "--delta", 1e-6,
                       "--data-norm", 3, "--estimator", "coherent",
                       "--clip-radius", 1, "--n-iter", 2, "-vv", "-o", "-")
    assert rc == 0
    assert json.loads(out)["estimator"] == "CoherentPowerPCA"
    assert "[CoherentPowerPCA] released: fixed (R=1, T=2)" in err


# ---------------------------------------------------------------------- demo
def test_demo_defines_its_measures_and_saves_the_curve(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    figure = tmp_path / "curve.png"
    rc, out, err = run(capsys, "demo", "--epsilon", 1, 4, "--seed", 0,
                       "--plot", figure)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[1] == (
        "  captured variance: share of the non-private top-k variance that the "
        "private components P capture, tr(P Cov P^T) / tr(V Cov V^T), V those of "
        "PCA (100% = as good as PCA)"
    )
    assert lines[2] == (
        "  sin(angle): sine of the largest principal angle between the private and "
        "the non-private k-dimensional subspaces (0 = identical, 1 = orthogonal)"
    )
    assert lines[-1] == f"Privacy-utility curve saved to {figure}"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert figure.stat().st_size > 10_000


@pytest.mark.parametrize("args, says", [
    (["--n-components", 0], "argument --n-components: must be an integer >= 1"),
    (["--n-components", 65], "between 1 and the digits' 64 features"),
    (["--epsilon", 0], "argument --epsilon: must be a positive number"),
    (["--epsilon", "nan"], "argument --epsilon: must be a positive number"),
    (["--seed", -1], "argument --seed: must be an integer >= 0"),
])
def test_demo_arguments_are_checked_in_one_line(args, says, capsys):
    rc, out, err = run(capsys, "demo", *args)
    assert rc == 2 and says in err and err.count("\n") == 1 and out == ""


def test_transform_refuses_to_write_over_its_input(data, tmp_path, capsys):
    model = tmp_path / "m.json"
    assert run(capsys, *fit_args(data, model))[0] == 0
    copy = tmp_path / "rows.csv"
    copy.write_text(data.read_text())
    before = copy.read_text()
    rc, _, err = run(capsys, "transform", model, copy, "-o", copy)
    assert rc == 2 and "is an input of this command" in err
    assert copy.read_text() == before
    # the model too, though its name is no table's
    saved = model.read_text()
    rc, _, err = run(capsys, "transform", model, copy, "-o", model)
    assert rc == 2 and "is an input of this command" in err
    assert model.read_text() == saved


def test_demo_plot_without_matplotlib_says_what_to_install(tmp_path, capsys,
                                                           monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    rc, out, err = run(capsys, "demo", "--plot", tmp_path / "curve.png")
    assert rc == 2 and out == ""
    assert err == ("dppca: error: --plot draws with matplotlib, which is not "
                   "installed: pip install matplotlib\n")
    assert not (tmp_path / "curve.png").exists()


def test_demo_plot_needs_a_png_name(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    rc, out, err = run(capsys, "demo", "--plot", tmp_path / "curve.pdf")
    assert rc == 2 and out == ""
    name = tmp_path / "curve.pdf"
    assert err == f"dppca: error: --plot {name}: name the figure *.png\n"


# ------------------------------------------ --data-norm auto and --bounds
def _fit_without_norm(data, model, *extra):
    return ["fit", data, "-k", 2, "--epsilon", 2, "--delta", 1e-6, "-o", model,
            *extra]


def test_data_norm_auto_matches_the_estimator(data, tmp_path, capsys):
    model = tmp_path / "model.json"
    argv = _fit_without_norm(data, model, "--data-norm", "auto", "--seed", 4)
    argv[argv.index("--epsilon") + 1] = 5
    rc, _, err = run(capsys, *argv)
    assert rc == 0, err
    assert "data_norm=auto" in err
    X = make_frame().to_numpy()
    with pytest.warns(PrivacyLeakWarning):  # the fixed seed
        est = PrivatePCA(2, epsilon=5.0, delta=1e-6, data_norm="auto",
                         random_state=4, accountant=BudgetAccountant()).fit(X)
    saved = json.loads(model.read_text())
    assert saved["parameters"]["data_norm"] == "auto"
    assert saved["attributes"]["data_norm_"] == est.data_norm_
    np.testing.assert_array_equal(saved["attributes"]["components_"], est.components_)
    eps, _ = saved["attributes"]["privacy_spent_"]
    assert eps == pytest.approx(5.0, rel=1e-9)
    # the seed's warning only: "auto" is private
    assert len(saved["privacy_warnings"]) == 1


def test_a_drowned_search_is_refused_in_the_flags_words(data, tmp_path, capsys):
    """On 300 rows at ε = 2 with centring, each comparison of the searches
    would have noise of 77 rows (more than n/4): the fit is refused before
    any charge (issue 22; it used to warn and fit), in one line that names
    the flags to use instead and the smallest ε that would run."""
    ledger = tmp_path / "budget.ledger"
    rc, _, err = run(capsys, "ledger", "init", ledger, "--epsilon", 10,
                     "--delta", 1e-5)
    assert rc == 0, err
    model = tmp_path / "model.json"
    argv = _fit_without_norm(data, model, "--data-norm", "auto", "--ledger", ledger)
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == ""
    assert_one_error_line(err)
    error = err.splitlines()[-1]
    assert error.startswith("dppca: error: --data-norm auto on 300 rows at "
                            "epsilon=2: each comparison")
    assert "noise of 77 rows" in error and "refused before any charge" in error
    assert "give --data-norm (a number" in error and "--bounds LOW HIGH" in error
    assert error.endswith("or an epsilon of at least 2.07.")
    assert not model.exists()
    rc, out, _ = run(capsys, "ledger", "show", ledger)
    assert rc == 0 and "in 0 charge(s)" in out


def test_bounds_scalars_and_file_give_the_box_norm(data, tmp_path, capsys):
    model = tmp_path / "model.json"
    rc, _, err = run(capsys, *_fit_without_norm(data, model, "--bounds", "-4", "4"))
    assert rc == 0, err
    saved = json.loads(model.read_text())
    assert saved["privacy_warnings"] == []
    assert saved["attributes"]["data_norm_"] == pytest.approx(4 * np.sqrt(5))
    lower = [-4, -3, -2, -1, -1]
    upper = [4, 3, 2, 1, 3]
    path = tmp_path / "bounds.csv"
    pd.DataFrame([lower, upper], columns=FEATURES).iloc[:, ::-1].to_csv(path,
                                                                       index=False)
    rc, _, err = run(capsys, *_fit_without_norm(data, model, "--bounds", path,
                                                "--data-norm", "auto", "--seed", 5,
                                                "--force"))
    assert rc == 0, err
    saved = json.loads(model.read_text())
    X = make_frame().to_numpy()
    with pytest.warns(PrivacyLeakWarning):  # the fixed seed
        est = PrivatePCA(2, epsilon=2.0, delta=1e-6, data_norm="auto",
                         bounds=(np.array(lower), np.array(upper)), random_state=5,
                         accountant=BudgetAccountant()).fit(X)
    assert saved["attributes"]["data_norm_"] == est.data_norm_
    np.testing.assert_array_equal(saved["attributes"]["mean_"], est.mean_)


BOUNDS_FILES = {  # header and two rows of a --bounds file over FEATURES
    "twice.csv": ",".join([*FEATURES, FEATURES[0]]) + "\n0,0,0,0,0,0\n1,1,1,1,1,1\n",
    "nan.csv": ",".join(FEATURES) + "\n,0,0,0,0\n1,1,1,1,1\n",
    "inf.csv": ",".join(FEATURES) + "\n-inf,0,0,0,0\n1,1,1,1,1\n",
    "reversed.csv": ",".join(FEATURES) + "\n0,0,2,0,0\n1,1,1,1,1\n",
    "flat.csv": ",".join(FEATURES) + "\n0,0,0,0,0\n0,1,1,1,1\n",
}


CHOSEN = ["--columns", ",".join(FEATURES)]


@pytest.mark.parametrize("extra, match", [
    (["--bounds", "nope.csv"], "--bounds nope.csv: no such file"),
    (["--bounds", "a", "b"], "expected two numbers"),
    (["--bounds", "1", "2", "3"], "two numbers LOW HIGH or one CSV"),
    (["--bounds", "2", "1"], "are reversed"),
    (["--bounds", "twice.csv"], f"'{FEATURES[0]}' appear more than once"),
    ([*CHOSEN, "--bounds", "nan.csv"], f"bound(s) of '{FEATURES[0]}' are missing"),
    ([*CHOSEN, "--bounds", "inf.csv"], f"bound(s) of '{FEATURES[0]}' are not finite"),
    ([*CHOSEN, "--bounds", "reversed.csv"], f"of '{FEATURES[2]}' are reversed"),
    ([*CHOSEN, "--bounds", "flat.csv", "--scale"], f"of '{FEATURES[0]}' make an empty"),
    (["--bounds", "1", "1"], "every range is empty"),
    (["--bounds", "-1e308", "1e308", "--scale"], "wider than float64"),
    (["--bounds", "0", "1", "--estimate-data-norm"], "give one of them"),
    ([], "--data-norm auto"),
])
def test_bad_bounds_options_are_one_line_errors(extra, match, data, tmp_path,
                                               capsys, monkeypatch):
    """Refused before DATA is read (review 56: after it, and some with a
    Python parameter's name, or not at all); a file's values, for the
    columns --columns names (the others, once DATA's header names them)."""
    monkeypatch.chdir(tmp_path)
    for name, text in BOUNDS_FILES.items():
        (tmp_path / name).write_text(text)
    rc, _, err = run(capsys, *_fit_without_norm(data, tmp_path / "m.json", "-v",
                                                *extra))
    assert rc == 2
    assert_one_error_line(err)
    assert match in err
    assert "reading" not in err
    assert not (tmp_path / "m.json").exists()


def test_a_midpoint_near_float64s_range_fills_a_missing_cell(tmp_path, capsys):
    """--fill-missing mid computed (lower + upper) / 2, infinite for a range
    near float64's top: a table with a missing cell was refused before the
    charge (as infinite), its neighbour without one fitted (review 56)."""
    frame = make_frame(50)[FEATURES[:2]] * 1e306 + 1.2e308
    full = tmp_path / "full.csv"
    frame.to_csv(full, index=False)
    frame.iloc[3, 0] = np.nan
    missing = tmp_path / "missing.csv"
    frame.to_csv(missing, index=False)
    for path in (full, missing):
        rc, _, err = run(capsys, "fit", path, "-k", 1, "--epsilon", 1, "--delta",
                         1e-6, "--bounds", 1e308, 1.7e308, "--scale",
                         "--fill-missing", "mid", "-q", "-o", tmp_path / "m.json",
                         "--force")
        assert rc == 0, err


def test_bounds_file_must_name_every_column(data, tmp_path, capsys):
    path = tmp_path / "bounds.csv"
    pd.DataFrame([[0, 0], [1, 1]], columns=["a", "b"]).to_csv(path, index=False)
    rc, _, err = run(capsys, *_fit_without_norm(data, tmp_path / "m.json",
                                                "--bounds", path))
    assert rc == 2 and "no bounds for the columns" in err


def test_cli_progress_does_not_call_a_private_bound_non_private(tmp_path, capsys):
    """With --data-norm auto, -v announces the finiteness pass of
    read_bounds as "largest row norm (data_norm from the data)", the
    message of the NOT private data_norm=None; the search and mean-step passes
    are not announced at all. The progress lines must describe the passes
    that run."""
    from sklearn_dppca.__main__ import main

    rng = np.random.default_rng(0)
    path = tmp_path / "data.csv"
    np.savetxt(path, rng.normal(size=(300, 3)), delimiter=",", header="a,b,c",
               comments="")
    rc = main(["fit", str(path), "-k", "2", "--epsilon", "5", "--delta", "1e-6",
               "--data-norm", "auto", "-o", str(tmp_path / "m.json"), "-v"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "data_norm from the data" not in err


def test_selection_repetition_reaches_the_coherent_estimator(data, tmp_path, capsys):
    model = tmp_path / "m.json"
    rc, _, err = run(capsys, "fit", data, "-k", 2, "--epsilon", 2, "--delta", 1e-6,
                     "--data-norm", 3, "--estimator", "coherent", "--selection",
                     "repetition", "--n-iter-max", 2, "-o", model)
    assert rc == 0, err
    saved = json.loads(model.read_text())
    assert saved["parameters"]["selection"] == "repetition"
    assert saved["attributes"]["branch_"] in ("repetition", "init")  # h ≤ 0: init
    rc, _, err = run(capsys, "fit", data, "-k", 2, "--epsilon", 2, "--delta", 1e-6,
                     "--data-norm", 3, "--selection", "gdp", "-o", tmp_path / "p.json")
    assert rc == 2 and "--selection" in err


def test_version_prints_the_package_version(capsys):
    import sklearn_dppca

    rc, out, err = run(capsys, "--version")
    assert rc == 0 and err == ""
    assert out == f"dppca {sklearn_dppca.__version__}\n"


def test_version_from_python_dash_m():
    import sklearn_dppca

    result = subprocess.run([sys.executable, "-m", "sklearn_dppca", "--version"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout == f"dppca {sklearn_dppca.__version__}\n"


def test_start_random_reaches_the_coherent_estimator(data, tmp_path, capsys):
    model = tmp_path / "m.json"
    rc, _, err = run(capsys, "fit", data, "-k", 2, "--epsilon", 2, "--delta", 1e-6,
                     "--data-norm", 3, "--estimator", "coherent", "--start",
                     "random", "-o", model, "-v")
    assert rc == 0, err
    saved = json.loads(model.read_text())
    assert saved["parameters"]["start"] == "random"
    assert saved["attributes"]["branch_"] == "random"
    # 300 rows of 5 columns: n ≥ 50 d, so 16 iterations
    assert "release step: mu=" in err and "in 16 draws" in err
    rc, _, err = run(capsys, "fit", data, "-k", 2, "--epsilon", 2, "--delta", 1e-6,
                     "--data-norm", 3, "--start", "random", "-o", tmp_path / "p.json")
    assert rc == 2 and "--start" in err


# --- sparse matrices (.npz) --------------------------------------------------
def sparse_codes(tmp_path, nan=False, n=400, d=60):
    """Binary code rows saved with scipy.sparse.save_npz; a stored NaN."""
    from scipy import sparse

    rng = np.random.default_rng(3)
    X = sparse.random(n, d, density=0.1, random_state=rng, format="csr")
    X.data[:] = 1.0
    if nan:
        X.data[4] = np.nan
    path = tmp_path / ("nan.npz" if nan else "codes.npz")
    sparse.save_npz(path, X)
    return path, X


def test_fit_and_transform_a_sparse_matrix_as_the_estimator(tmp_path, capsys):
    """A .npz matrix is read as CSR and never densified: the fit is
    PrivatePCA's on the same matrix with the same seed, its columns x0, x1,
    ...; transform writes its projection."""
    path, X = sparse_codes(tmp_path)
    model = tmp_path / "m.json"
    rc, _, err = run(capsys, "fit", path, "-k", 2, "--epsilon", 2, "--delta", 1e-6,
                     "--data-norm", 3, "--seed", 5, "-v", "-o", model)
    assert rc == 0, err
    # public values only: not how many values are stored
    assert f"read 400 rows x 60 columns from {path}\n" in err
    assert str(X.nnz) not in err
    # no advice to --scale, which a sparse matrix refuses
    assert "--scale" not in err
    saved = json.loads(model.read_text())
    assert saved["feature_names"][:2] == ["x0", "x1"]
    with pytest.warns(Warning):
        ref = PrivatePCA(2, epsilon=2, delta=1e-6, data_norm=3.0, random_state=5,
                         accountant=BudgetAccountant()).fit(X)
    np.testing.assert_allclose(saved["attributes"]["components_"], ref.components_,
                               atol=1e-12)
    out = tmp_path / "z.csv"
    rc, _, err = run(capsys, "transform", model, path, "-o", out)
    assert rc == 0, err
    np.testing.assert_allclose(pd.read_csv(out).to_numpy(), ref.transform(X),
                               atol=1e-10)
    rc, _, err = run(capsys, "fit", path, "-k", 2, "--epsilon", 2, "--delta", 1e-6,
                     "--data-norm", 3, "--columns", "x3,x7,x9", "-o",
                     tmp_path / "cols.json")
    assert rc == 0, err
    assert json.loads((tmp_path / "cols.json").read_text())["feature_names"] == [
        "x3", "x7", "x9"]


@pytest.mark.parametrize("extra, match", [
    ((), "missing values .* column\\(s\\) 'x"),
    (("--bounds", 0, 1, "--scale"), "makes a sparse matrix dense"),
    (("--columns", "x1,y"), "no column\\(s\\) 'y'"),
])
def test_sparse_matrices_are_refused_clearly_before_any_charge(tmp_path, capsys,
                                                               extra, match):
    path, _ = sparse_codes(tmp_path, nan=True)
    ledger = tmp_path / "ledger.db"
    run(capsys, "ledger", "init", ledger, "--epsilon", 10, "--delta", 1e-5)
    rc, _, err = run(capsys, "fit", path, "-k", 2, "--epsilon", 2, "--delta", 1e-6,
                     "--data-norm", 3, "--ledger", ledger, *extra,
                     "-o", tmp_path / "m.json")
    assert rc == 2
    assert_one_error_line(err)
    assert re.search(match, err), err
    assert not (tmp_path / "m.json").exists()
    assert BudgetAccountant(path=ledger).n_charges == 0


def test_a_filled_sparse_matrix_fits(tmp_path, capsys):
    path, _ = sparse_codes(tmp_path, nan=True)
    rc, _, err = run(capsys, "fit", path, "-k", 2, "--epsilon", 2, "--delta", 1e-6,
                     "--data-norm", 3, "--fill-missing", 0, "-o", tmp_path / "m.json")
    assert rc == 0, err


@pytest.mark.parametrize("edit, named", [
    (lambda m: m.update(parameters=None), "'parameters' not of the type"),
    (lambda m: m.update(feature_names="abcde"), "'feature_names' not of the type"),
    (lambda m: m.update(estimator=["PrivatePCA"]), "'estimator' not of the type"),
    (lambda m: m.update(format_version=2, preprocessing=[1]), "'preprocessing'"),
    (lambda m: m.update(format_version=2, preprocessing={"scale": {"lower": [0] * 5}}),
     "missing 'upper'"),
    (lambda m: m["attributes"]["components_"][0].__setitem__(0, float("nan")),
     "non-finite or negative values in 'components_'"),
    (lambda m: m["attributes"].update(explained_variance_=[1.0, -1.0]),
     "'explained_variance_'"),
    # review 45: NaN or inf written with exit 0, or an unclear error
    (lambda m: m.update(parameters=dict(m["parameters"], whiten="partial"),
                        attributes=dict(m["attributes"], total_variance_=-1.0)),
     "'total_variance_'"),
    (lambda m: m.update(parameters=dict(m["parameters"], whiten="partial"),
                        attributes=dict(m["attributes"], total_variance_=None)),
     "without total_variance_"),
    (lambda m: m["attributes"]["components_"][0].__setitem__(0, 1e308),
     "not orthonormal"),
    (lambda m: m.update(feature_names=[m["feature_names"][0]] * 5),
     "a feature name repeats"),
])
def test_transform_refuses_a_hand_edited_model(edit, named, data, tmp_path, capsys):
    """A review's hand edits gave tracebacks (a list where a dict belongs, a
    missing key) or silently wrote NaN (a NaN loading, a negative variance
    under whitening): each is now one error line naming what is wrong."""
    model = tmp_path / "model.json"
    rc, _, err = run(capsys, *fit_args(data, model, "--seed", 0))
    assert rc == 0, err
    saved = json.loads(model.read_text())
    edit(saved)
    model.write_text(json.dumps(saved))
    rc, out, err = run(capsys, "transform", model, data, "-o", "-")
    assert rc == 2 and "damaged model" in err and named in err, err
    assert_one_error_line(err)


@pytest.mark.parametrize("options, named", [
    (["--n-iter-max", 5], "--n-iter-max caps the grid of --selection repetition"),
    (["--selection", "repetition", "--clip-radius", 0.1, "--n-iter", 2],
     "--clip-radius and --n-iter are both fixed"),
    (["--selection", "repetition", "--start", "random"], "--start random"),
])
def test_coherent_options_that_would_do_nothing_are_refused(options, named, data,
                                                             tmp_path, capsys):
    """A review saw these accepted and ignored (the models differed only in
    the stored option): refused before the data is read, as options of
    another estimator are."""
    rc, _, err = run(capsys, *fit_args(data, tmp_path / "m.json", "--estimator",
                                       "coherent", *options))
    assert rc == 2 and named in err, err
    assert not (tmp_path / "m.json").exists()


def test_columns_naming_no_column_is_refused_before_the_read(data, tmp_path, capsys):
    rc, _, err = run(capsys, *fit_args(data, tmp_path / "m.json", "--columns", ",",
                                       "-v"))
    assert rc == 2 and "--columns names no column" in err and "reading" not in err


def test_minus_inf_is_a_value_of_bounds(data, tmp_path, capsys):
    """argparse read ``-inf`` as an option: "expected at least one argument"."""
    rc, _, err = run(capsys, "fit", data, "-k", 1, "--epsilon", 1, "--delta", 1e-6,
                     "--bounds", "-inf", "inf", "-o", tmp_path / "m.json")
    assert rc == 2 and "are not finite" in err, err


def test_a_model_nested_too_deep_is_one_error_line(data, tmp_path, capsys):
    model = tmp_path / "deep.json"
    model.write_text("[" * 100_000 + "]" * 100_000)
    rc, _, err = run(capsys, "transform", model, data, "-o", "-")
    assert rc == 2 and "nested too deep" in err
    assert_one_error_line(err)


def test_a_csv_without_a_header_is_refused_before_the_charge(tmp_path, capsys):
    """pandas reads a headerless CSV's first row as its column names: that
    row left the fit and became the model's feature names, shared with it
    (review 45). pandas' own default names 0, 1, ... are a header."""
    rows = make_frame().to_numpy()
    headerless = tmp_path / "rows.csv"
    np.savetxt(headerless, rows, delimiter=",", fmt="%.6f")
    for extra in ([], ["--dask"]):
        model = tmp_path / "m.json"
        rc, _, err = run(capsys, *fit_args(headerless, model), *extra)
        assert rc == 2 and "reads as numbers, not column names" in err, err
        assert f"{rows[0, 0]:.6f}"[:5] not in err and not model.exists()
    gap = tmp_path / "gap.csv"  # an empty cell in that row: "Unnamed: 1"
    gap.write_text("1.5,,2.5,3.5,4.5\n" + headerless.read_text())
    assert run(capsys, *fit_args(gap, tmp_path / "m.json"), "--fill-missing", 0)[0] == 2
    gap.write_text("1.5,NA,2.5,3.5,4.5\n" + headerless.read_text())  # a marker
    assert run(capsys, *fit_args(gap, tmp_path / "m.json"), "--fill-missing", 0)[0] == 2
    indexed = tmp_path / "indexed.csv"  # pandas' defaults: ",0,1,2,3,4"
    pd.DataFrame(rows).to_csv(indexed)
    assert run(capsys, *fit_args(indexed, tmp_path / "i.json"))[0] == 0
    numbered = tmp_path / "numbered.csv"
    pd.DataFrame(rows).to_csv(numbered, index=False)
    assert run(capsys, *fit_args(numbered, tmp_path / "n.json"))[0] == 0
    genes = tmp_path / "genes.csv"  # a header of numbers: Entrez gene IDs
    pd.DataFrame(rows, columns=["7157", "672", "1956", "4609", "3845"]).to_csv(
        genes, index=False)
    assert run(capsys, *fit_args(genes, tmp_path / "g.json"))[0] == 2
    for extra in ([], ["--dask"]):
        rc, _, err = run(capsys, *fit_args(genes, tmp_path / "g.json"),
                         "--numeric-header", "--force", *extra)
        assert rc == 0, err
    model = json.loads((tmp_path / "g.json").read_text())
    assert model["feature_names"] == ["7157", "672", "1956", "4609", "3845"]
    rc, _, err = run(capsys, "transform", tmp_path / "g.json", genes,
                     "--numeric-header", "-o", "-")
    assert rc == 0, err


def test_a_header_is_a_row_only_where_pandas_reads_its_cells_as_numbers():
    """Python's float() also reads ``1_1`` and non-ASCII digits, which pandas
    reads as text: a header of item codes was refused (review 47)."""
    from sklearn_dppca._cli_io import _read_as_numbers

    text = ["1_1", "2_10", "\u0661\u0662", "\uff11", "0x10", "q1"]
    numbers = ["7", " 7 ", "-1.5e3", "inf", "1.0.1", "NA", "Unnamed: 2"]
    assert _read_as_numbers(text + numbers).tolist() == [False] * 6 + [True] * 7


def test_a_csv_that_is_not_utf8_is_named_without_its_bytes(data, tmp_path, capsys):
    latin = tmp_path / "latin.csv"
    frame = make_frame(n=50).assign(name="Ren\u00e9")
    latin.write_bytes(frame.to_csv(index=False).encode("latin-1"))
    for extra in ([], ["--dask"]):
        rc, _, err = run(capsys, *fit_args(latin, tmp_path / "m.json"), *extra)
        assert rc == 2 and "is not UTF-8 text" in err and "0xe9" not in err, err


def test_no_command_writes_over_the_files_it_reads(data, tmp_path, capsys):
    """``-o`` naming one of a glob's or a directory's files (``--dask``), or a
    fit's own DATA with ``--force``, replaced it (review 45)."""
    parts = tmp_path / "parts"
    parts.mkdir()
    for i in range(2):
        make_frame(n=100, seed=i).to_parquet(parts / f"part-{i}.parquet")
    model = tmp_path / "m.json"
    assert run(capsys, *fit_args(data, model))[0] == 0
    before = (parts / "part-0.parquet").read_bytes()
    for source in (parts / "part-*.parquet", parts):
        rc, _, err = run(capsys, "transform", model, source, "--dask", "-o",
                         parts / "part-0.parquet")
        assert rc == 2 and "is an input of this command" in err, err
    assert (parts / "part-0.parquet").read_bytes() == before
    kept = data.read_text()
    rc, _, err = run(capsys, *fit_args(data, data), "--force")
    assert rc == 2 and "is an input of this command" in err and data.read_text() == kept
    ledger = tmp_path / "budget.db"
    rc, _, err = run(capsys, "ledger", "init", ledger, "--epsilon", 5, "--delta", 1e-5)
    assert rc == 0, err
    rc, _, err = run(capsys, *fit_args(data, ledger), "--ledger", ledger, "--force")
    assert rc == 2 and "is an input of this command" in err


def test_written_files_are_named_and_permitted_as_expected(data, tmp_path, capsys):
    """A zip archive's member is the file's name (it was the temporary
    ``.dppca-*.tmp``), and a written file gets a new file's permissions
    under the umask, or those of the file it replaces (it got 0600)."""
    import os
    import zipfile

    model = tmp_path / "m.json"
    assert run(capsys, *fit_args(data, model))[0] == 0
    out = tmp_path / "z.csv.zip"
    old = os.umask(0o022)
    try:
        assert run(capsys, "transform", model, data, "-o", out)[0] == 0
        assert zipfile.ZipFile(out).namelist() == ["z.csv"]
        assert out.stat().st_mode & 0o777 == 0o644
        out.chmod(0o640)
        assert run(capsys, "transform", model, data, "-o", out)[0] == 0
        assert out.stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)


def test_columns_with_spaces_or_commas_and_a_malformed_line(tmp_path, capsys):
    """--columns split on commas and stripped names, so a header written
    ``a, b`` (columns ' b') or a name holding a comma could not be chosen;
    pandas' parse error named the malformed line (review 56); ``dppca
    transform`` did not find the model's ' age' in a table written ``age``."""
    table = tmp_path / "spaced.csv"
    frame = make_frame(60)[FEATURES[:2]]
    frame.columns = ["income, net", " age"]
    frame.assign(label="x").to_csv(table, index=False)
    model = tmp_path / "m.json"
    rc, _, err = run(capsys, "fit", table, "-k", 1, "--epsilon", 1, "--delta", 1e-6,
                     "--data-norm", 5, "--columns", '"income, net",age', "-q",
                     "-o", model)
    assert rc == 0, err
    assert json.loads(model.read_text())["feature_names"] == ["income, net", " age"]
    plain = tmp_path / "plain.csv"  # the same columns written without the space
    frame.set_axis(["income, net", "age"], axis=1).to_csv(plain, index=False)
    rc, out, err = run(capsys, "transform", model, plain, "-o", "-")
    assert rc == 0, err
    rc, spaced, err = run(capsys, "transform", model, table, "-o", "-")
    assert rc == 0 and out == spaced, err
    bounds = tmp_path / "bounds.csv"  # names as written elsewhere: no spaces
    bounds.write_text('"income, net",age\n-5,-5\n5,5\n')
    rc, _, err = run(capsys, "fit", table, "-k", 1, "--epsilon", 1, "--delta", 1e-6,
                     "--bounds", bounds, "--columns", '"income, net",age', "-q",
                     "-o", model, "--force")
    assert rc == 0, err
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n3,4,5\n6,7\n")
    rc, _, err = run(capsys, "fit", bad, "-k", 1, "--epsilon", 1, "--delta", 1e-6,
                     "--data-norm", 5, "-o", tmp_path / "n.json")
    assert rc == 2 and "cannot parse CSV" in err
    assert err.rstrip().endswith("Expected 2 fields in a line"), err  # no line named


def test_a_shared_bounds_file_needs_ranges_for_the_fitted_columns_only(
        data, tmp_path, capsys):
    """A file covering more columns than the fit, some without a range, was
    refused over them; Parquet bounds named *.pq failed (review 60)."""
    bounds = tmp_path / "shared.csv"
    bounds.write_text(",".join([*FEATURES, "zip"]) + "\n" + "-5," * 5 + "n/a\n"
                      + "5," * 5 + "\n")
    for extra in ([], CHOSEN):
        rc, _, err = run(capsys, *_fit_without_norm(data, tmp_path / "m.json",
                                                    "--bounds", bounds, "--force",
                                                    *extra))
        assert rc == 0, err
    pytest.importorskip("pyarrow")
    frame = pd.read_csv(bounds)[FEATURES]
    frame.to_parquet(tmp_path / "b.pq", index=False)
    rc, _, err = run(capsys, *_fit_without_norm(data, tmp_path / "m.json", "--bounds",
                                                tmp_path / "b.pq", "--force"))
    assert rc == 0, err


@pytest.mark.parametrize("dask", [[], ["--dask"]])
def test_pandas_warnings_about_the_rows_are_not_shown(tmp_path, capsys, dask):
    """Review 69, F1: text in a row of a column not fitted, past pandas'
    first chunk, made pandas' DtypeWarning name that column on stderr before
    the charge (the one difference from the same file without that cell);
    the table is read with every warning dropped, in memory and with
    --dask."""
    import warnings

    if dask:
        pytest.importorskip("dask.dataframe")
    rng = np.random.default_rng(0)
    # wide, so that pandas' chunk is 2048 lines and the cell lies past it
    header = ",".join(["a", "b", "c", *(f"z{i}" for i in range(256)), "note"])
    zeros = ",0" * 256
    lines = [header] + [f"{x:.4f},{y:.4f},{z:.4f}{zeros},0"
                        for x, y, z in rng.normal(size=(3000, 3))]
    lines[2901] = lines[2901][:-1] + "HIV+"
    path = _write(tmp_path, "mixed.csv", "\n".join(lines) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc, _, err = run(capsys, "fit", path, "--columns", "a,b,c", "-k", 1,
                         "--epsilon", 1, "--delta", 1e-6, "--data-norm", 5, "-q",
                         "-o", tmp_path / "m.json", *dask)
    assert rc == 0, err
    assert "note" not in err and "mixed types" not in err, err
    shown = [str(w.message) for w in caught]
    assert not any("note" in m or "mixed types" in m for m in shown), shown


def test_a_memory_refusal_names_flags_that_admit_the_fit(tmp_path, capsys):
    """The refusal advised path='noisy_power' and a memory_limit in bytes,
    which dppca had no flag for (left open by review 69 F3): it now names
    --path and --memory-limit in GiB, and following it fits."""
    data = tmp_path / "wide.csv"
    rng = np.random.default_rng(0)
    pd.DataFrame(rng.normal(size=(40, 1000)) * 0.02,
                 columns=[f"c{i}" for i in range(1000)]).to_csv(data, index=False)
    fit = ["fit", data, "-k", 2, "--epsilon", 1, "--delta", 1e-6, "--data-norm", 2,
           "-q", "-o", tmp_path / "m.json", "--force"]
    rc, _, err = run(capsys, *fit, "--path", "dense", "--memory-limit", 0.01)
    assert rc == 2 and "more than --memory-limit (0.01 GiB)" in err, err
    assert_one_error_line(err)
    assert "memory_limit" not in err and "path=" not in err, err
    offered = re.findall(r"--path (\w+) [^(]*\((?:[^;)]*; )?--memory-limit (\S+) "
                         r"admits it", err)
    assert ("noisy_power" in dict(offered)), err
    for path, limit in offered:
        rc, _, err = run(capsys, *fit, "--path", path, "--memory-limit", limit)
        assert rc == 0, (path, limit, err)
    rc, _, err = run(capsys, *fit, "--estimator", "coherent", "--path", "matrix_free")
    assert rc == 2 and "--path matrix_free does not apply to --estimator " \
        "coherent (its: auto, dense, noisy_power)" in err, err
    # review 83 F4, F6: --path auto is the default (no solver forced), a
    # fraction of the variance needs every eigenvalue, GiB stay finite
    fraction = [*fit[:3], "0.5", *fit[4:]]
    assert run(capsys, *fraction, "--path", "auto")[0] == 0
    rc, _, err = run(capsys, *fraction, "--path", "matrix_free")
    assert rc == 2 and "--path matrix_free needs an integer --n-components" in err
    # review 90 F2: a fraction's refusal names the paths at an integer k, in
    # flags, and following one fits within the limit it names
    rc, _, err = run(capsys, *fraction, "--memory-limit", 0.01)
    assert rc == 2 and "An integer --n-components opens" in err, err
    k, path, limit = re.findall(r"-k (\d+) --path (\w+) [^(]*\((?:[^;)]*; )?"
                                r"--memory-limit (\S+) admits it", err)[-1]
    rc, _, err = run(capsys, *fit[:2], "-k", k, *fit[4:], "--path", path,
                     "--memory-limit", limit)
    assert rc == 0, (k, path, limit, err)
    rc, _, err = run(capsys, *fit, "--memory-limit", "1e300")
    assert rc == 2 and "a number of GiB in (0, 2**40)" in err, err
    assert in_flags("path='noisy_power' needs n_components + n_oversamples = 15") \
        == "--path noisy_power needs --n-components + 10 (oversampling) = 15"
    assert "(--bounds clips them)" in in_flags(
        "needs 1 GiB for copies of the rows (bounds and non_finite='clip' map them)")


def test_an_output_name_the_folder_cannot_hold_is_refused_before_the_charge(
        data, tmp_path, capsys):
    """A 300-byte -o name failed at the rename after the charge, naming the
    temporary file (review 97 F4)."""
    ledger = tmp_path / "ledger.db"
    run(capsys, "ledger", "init", ledger, "--epsilon", 10, "--delta", 1e-5)
    rc, _, err = run(capsys, *fit_args(data, tmp_path / ("m" * 300 + ".json"),
                                       "--ledger", ledger))
    assert rc == 2 and "the file name is longer than" in err, err
    assert_one_error_line(err)
    assert BudgetAccountant(path=ledger).n_charges == 0


def test_a_model_not_written_after_the_charge_says_that_it_stays(
        data, tmp_path, capsys, monkeypatch):
    """A closed standard output (`fit -o - | head -c 0`) ended with status 1
    and no message, a full disk with the temporary file's name (review 97
    F4, M2): one error line naming what failed, and that the charge stays."""
    import sklearn_dppca.__main__ as cli
    from sklearn_dppca import _cli_model

    monkeypatch.setattr(cli, "_silence_stdout", lambda: None)  # capsys's stdout
    for error, output, named in (
            (BrokenPipeError(32, "Broken pipe"), "-", "standard output was closed"),
            (OSError(28, "No space left on device", "/x/.dppca-1.tmp"),
             str(tmp_path / "m.json"), "m.json: cannot write the model: No space")):
        def fail(*args, error=error, **kwargs):
            raise error
        monkeypatch.setattr(_cli_model, "save_model", fail)
        rc, _, err = run(capsys, *fit_args(data, output, "--force"))
        assert rc == 2, err
        assert_one_error_line(err)
        assert named in err and "that charge stays" in err, err
        assert ".dppca-1.tmp" not in err


def test_quiet_silences_coherent_progress_and_stdin_is_read_once(
        data, tmp_path, capsys, monkeypatch):
    """-q silenced every -v line but CoherentPowerPCA's own; DATA and
    --bounds both '-' read standard input twice, refused as an empty file
    (review 97 M3, M4)."""
    rc, _, err = run(capsys, *fit_args(data, tmp_path / "c.json", "--estimator",
                                       "coherent", "-v", "-q"))
    assert rc == 0 and "[CoherentPowerPCA]" not in err, err
    monkeypatch.setattr(sys, "stdin", io.StringIO(data.read_text()))
    rc, _, err = run(capsys, "fit", "-", "--bounds", "-", "-k", 1, "--epsilon", 1,
                     "--delta", 1e-6, "-o", tmp_path / "s.json")
    assert rc == 2 and "both read standard input" in err, err


def test_an_in_memory_memory_refusal_says_the_table_was_read(tmp_path, capsys):
    """pandas reads the table before the estimator's plan: the refusal no
    longer says the data was not read (review 97 M1)."""
    rows = np.random.default_rng(0).uniform(0, 1, (30, 400))
    path = tmp_path / "wide.csv"
    pd.DataFrame(rows).add_prefix("c").to_csv(path, index=False)
    rc, _, err = run(capsys, "fit", path, "-k", 2, "--epsilon", 1, "--delta", 1e-6,
                     "--data-norm", 3, "--memory-limit", 1e-6,
                     "-o", tmp_path / "m.json")
    assert rc == 2 and "before spending any budget (the table was read" in err, err
