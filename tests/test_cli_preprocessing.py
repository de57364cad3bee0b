"""``dppca fit --scale`` and ``--fill-missing`` (issue 25): public maps of
the rows before the fit, stored in the model and applied by ``transform``."""

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.pipeline import make_pipeline

from sklearn_dppca import BudgetAccountant, PrivacyLeakWarning, PrivatePCA
from sklearn_dppca.preprocessing import PublicScaler

from .test_cli import assert_one_error_line, run

COLUMNS = ["income", "age", "score"]
LOWER, UPPER = [0.0, 18.0, 1.0], [500_000.0, 90.0, 5.0]


def make_table(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    age = rng.uniform(18, 90, n).round()
    income = np.clip(rng.lognormal(10.5, 0.7, n) + 300 * (age - 18), 0, 500_000)
    score = np.clip(np.round(3 + rng.normal(size=n)), 1, 5)
    return pd.DataFrame(np.column_stack([income, age, score]), columns=COLUMNS)


@pytest.fixture
def files(tmp_path):
    table, ranges = tmp_path / "survey.csv", tmp_path / "ranges.csv"
    make_table().to_csv(table, index=False)
    pd.DataFrame([LOWER, UPPER], columns=COLUMNS).to_csv(ranges, index=False)
    return table, ranges


def fit(table, model, *extra, epsilon=2.0):
    return ["fit", table, "-k", 2, "--epsilon", epsilon, "--delta", 1e-6,
            "-o", model, *extra]


def test_scale_maps_each_column_by_its_bounds_and_transform_applies_it(
        files, tmp_path, capsys):
    table, ranges = files
    model, out = tmp_path / "model.json", tmp_path / "out.csv"
    rc, _, err = run(capsys, *fit(table, model, "--bounds", ranges, "--scale",
                                  "--seed", 3))
    assert rc == 0, err
    assert "each column scaled from its --bounds to [0, 1]" in err
    saved = json.loads(model.read_text())
    assert saved["format_version"] == 2
    assert saved["preprocessing"] == {"scale": {"lower": LOWER, "upper": UPPER}}
    X = make_table().to_numpy()
    pipe = make_pipeline(PublicScaler((LOWER, UPPER)),
                         PrivatePCA(2, epsilon=2.0, delta=1e-6, bounds=(0.0, 1.0),
                                    random_state=3, accountant=BudgetAccountant()))
    with pytest.warns(PrivacyLeakWarning):  # the fixed seed
        pipe.fit(X)
    np.testing.assert_array_equal(saved["attributes"]["components_"],
                                  pipe[-1].components_)
    mean = np.array(saved["attributes"]["mean_"])
    assert ((0 <= mean) & (mean <= 1)).all()  # in the scaled box
    rc, _, err = run(capsys, "transform", model, table, "-o", out)
    assert rc == 0, err
    np.testing.assert_allclose(pd.read_csv(out).to_numpy(), pipe.transform(X),
                               rtol=1e-12, atol=1e-12)


def test_scale_needs_bounds_and_says_so_before_reading(tmp_path, capsys):
    rc, out, err = run(capsys, *fit(tmp_path / "never-read.csv", tmp_path / "m.json",
                                    "--data-norm", 1, "--scale"))
    assert rc == 2 and out == ""
    assert_one_error_line(err)
    assert "--scale maps each column" in err and "--bounds FILE" in err


def test_scale_refuses_an_empty_range(files, tmp_path, capsys):
    table, _ = files
    ranges = tmp_path / "flat.csv"
    pd.DataFrame([LOWER, [500_000.0, 18.0, 5.0]], columns=COLUMNS).to_csv(
        ranges, index=False)
    rc, _, err = run(capsys, *fit(table, tmp_path / "m.json", "--bounds", ranges,
                                  "--scale"))
    assert rc == 2 and "the bound(s) of 'age' make an empty range" in err


def test_missing_values_say_what_to_do_and_fill_missing_fills_them(
        files, tmp_path, capsys):
    table, ranges = files
    frame = make_table()
    frame.iloc[::10, 2] = np.nan
    holes = tmp_path / "holes.csv"
    frame.to_csv(holes, index=False)
    model = tmp_path / "m.json"
    rc, _, err = run(capsys, *fit(holes, model, "--bounds", ranges))
    assert rc == 2
    assert_one_error_line(err)
    assert "missing values (NaN or empty cells) in column(s) 'score'" in err
    assert "--fill-missing VALUE" in err and "--fill-missing mid with --bounds" in err
    assert not model.exists()
    rc, _, err = run(capsys, *fit(holes, model, "--bounds", ranges, "--scale",
                                  "--fill-missing", 3, "--seed", 1))
    assert rc == 0, err
    saved = json.loads(model.read_text())
    assert saved["preprocessing"]["fill_missing"] == 3.0
    filled = frame.fillna(3.0).to_numpy()
    pipe = make_pipeline(PublicScaler((LOWER, UPPER)),
                         PrivatePCA(2, epsilon=2.0, bounds=(0.0, 1.0), random_state=1,
                                    accountant=BudgetAccountant()))
    with pytest.warns(PrivacyLeakWarning):
        pipe.fit(filled)
    np.testing.assert_array_equal(saved["attributes"]["components_"],
                                  pipe[-1].components_)
    out = tmp_path / "out.csv"
    rc, _, err = run(capsys, "transform", model, holes, "-o", out)  # filled too
    assert rc == 0, err
    np.testing.assert_allclose(pd.read_csv(out).to_numpy(), pipe.transform(filled),
                               rtol=1e-12, atol=1e-12)
    # a model fitted without --fill-missing does not fill
    plain = tmp_path / "plain.json"
    assert run(capsys, *fit(table, plain, "--bounds", ranges))[0] == 0
    assert json.loads(plain.read_text())["format_version"] == 1
    rc, _, err = run(capsys, "transform", plain, holes, "-o", out)
    assert rc == 2 and "fitted without --fill-missing" in err


def test_a_dominating_column_is_warned_in_the_flags_words(tmp_path, capsys):
    """The FeatureScaleWarning from the released variances, with the column's
    name and the CLI's way out (--scale with --bounds FILE)."""
    table = tmp_path / "t.csv"
    make_table(n=20_000).to_csv(table, index=False)
    model = tmp_path / "m.json"
    # a fixed seed: the component-2 warning below depends on the noise
    rc, _, err = run(capsys, *fit(table, model, "--data-norm", "auto",
                                  "--seed", 1))
    assert rc == 0, err
    warning = [line for line in err.splitlines() if "warning:" in line
               and "dominates" in line]
    assert len(warning) == 1
    assert "the released variance of 'income'" in warning[0]
    assert "--scale and --bounds FILE" in warning[0]
    assert "sklearn_dppca.preprocessing" not in warning[0]
    # kept with the model, beside the noise's (component 2 is noise here)
    saved = json.loads(model.read_text())["release_warnings"]
    assert any("dominates" in w for w in saved)
    assert any("not stand out of the noise" in w for w in saved)


def test_a_damaged_scale_is_refused(files, tmp_path, capsys):
    table, ranges = files
    model = tmp_path / "m.json"
    assert run(capsys, *fit(table, model, "--bounds", ranges, "--scale"))[0] == 0
    saved = json.loads(model.read_text())
    saved["preprocessing"]["scale"]["upper"] = [1.0, 1.0]
    model.write_text(json.dumps(saved))
    rc, _, err = run(capsys, "transform", model, table, "-o", tmp_path / "o.csv")
    assert rc == 2 and "damaged model" in err


def test_fill_missing_mid_fills_the_middle_of_each_public_range(
        files, tmp_path, capsys):
    table, ranges = files
    frame = make_table(n=500)
    frame.iloc[::5, 0] = np.nan
    frame.iloc[1::5, 1] = np.nan
    holes = tmp_path / "holes.csv"
    frame.to_csv(holes, index=False)
    model = tmp_path / "m.json"
    rc, _, err = run(capsys, *fit(holes, model, "--fill-missing", "mid",
                                  "--data-norm", 1))
    assert rc == 2 and "--fill-missing mid fills the middle" in err
    rc, _, err = run(capsys, *fit(holes, model, "--bounds", ranges, "--scale",
                                  "--fill-missing", "mid", "--seed", 2))
    assert rc == 0, err
    middle = [(lo + hi) / 2 for lo, hi in zip(LOWER, UPPER)]
    assert json.loads(model.read_text())["preprocessing"]["fill_missing"] == middle
    filled = frame.fillna(dict(zip(COLUMNS, middle))).to_numpy()
    pipe = make_pipeline(PublicScaler((LOWER, UPPER)),
                         PrivatePCA(2, epsilon=2.0, bounds=(0.0, 1.0), random_state=2,
                                    accountant=BudgetAccountant()))
    with pytest.warns(PrivacyLeakWarning):
        pipe.fit(filled)
    out = tmp_path / "out.csv"
    assert run(capsys, "transform", model, holes, "-o", out)[0] == 0
    np.testing.assert_allclose(pd.read_csv(out).to_numpy(), pipe.transform(filled),
                               rtol=1e-12, atol=1e-12)


def test_the_model_keeps_the_box_and_the_mean_in_original_units(files, tmp_path,
                                                                 capsys):
    """Issue 32: with --bounds the model keeps the box its rows were clipped
    into; with --scale also the mean mapped back to each column's range."""
    table, ranges = files
    plain, scaled = tmp_path / "plain.json", tmp_path / "scaled.json"
    assert run(capsys, *fit(table, plain, "--bounds", ranges))[0] == 0
    saved = json.loads(plain.read_text())
    assert saved["bounds"] == {"lower": list(LOWER), "upper": list(UPPER)}
    assert "in_original_units" not in saved
    assert run(capsys, *fit(table, scaled, "--bounds", ranges, "--scale"))[0] == 0
    saved = json.loads(scaled.read_text())
    assert saved["bounds"] == {"lower": [0.0] * 3, "upper": [1.0] * 3}
    mean = np.asarray(saved["attributes"]["mean_"])
    original = np.asarray(saved["in_original_units"]["mean_"])
    np.testing.assert_allclose(
        original, np.asarray(LOWER) + mean * (np.asarray(UPPER) - LOWER))
    assert (np.asarray(LOWER) <= original).all() and (original <= UPPER).all()


def test_a_bounds_file_missing_a_column_points_to_columns(files, tmp_path,
                                                          capsys):
    table, ranges = files
    frame = make_table()
    frame["vote"] = 1.0
    frame.to_csv(table, index=False)
    rc, _, err = run(capsys, *fit(table, tmp_path / "m.json", "--bounds", ranges))
    assert rc == 2
    assert "no bounds for the columns 'vote'" in err and "--columns" in err


def test_a_scaled_fit_is_not_advised_to_scale(files, tmp_path, capsys):
    """A review's fit with --scale was told to put the features on a common
    scale with --scale: the noisy-release warning drops that advice there."""
    table, ranges = files
    rc, _, err = run(capsys, *fit(table, tmp_path / "m.json", "--bounds", ranges,
                                  "--scale", "-k", 3, epsilon=0.05))
    assert rc == 0, err
    assert "do not stand out of the noise" in err or "does not stand out" in err
    assert "common scale" not in err
    rc, _, err = run(capsys, *fit(table, tmp_path / "u.json", "--data-norm", 1e6,
                                  "-k", 3, epsilon=0.05))
    assert rc == 0 and "common scale by their public ranges with --scale" in err, err
