"""Guard rails: degenerate inputs give NaN + a reason in `flag` (never a crash); bad files give UserError."""

import json
import math

import numpy as np
import pytest

from oodcorr.core.errors import UserError
from oodcorr.core.io import write_jsonl
from oodcorr.records.run_tables import build_runs, load_metrics
from oodcorr.stats.partial import GAM_MIN_N, analyse_matrix, analyse_run
from oodcorr.stats.simulate import metrics_rows


def test_too_few_checkpoints():
    x, Y = np.array([0.5, 0.6, 0.7]), np.array([[0.5, 0.4], [0.55, 0.5], [0.52, 0.45]])
    row = analyse_matrix(x, Y, ["a", "b"], "linear", n_boot=50)[0]
    assert math.isnan(row["r"]) and math.isnan(row["p"]) and "too_few_checkpoints" in row["flag"]
    rng = np.random.default_rng(0)
    x = np.linspace(0.5, 0.9, GAM_MIN_N - 1) + rng.normal(0, 0.01, GAM_MIN_N - 1)
    Y = rng.normal(0.5, 0.05, (GAM_MIN_N - 1, 2))
    gam = analyse_matrix(x, Y, ["a", "b"], "gam")[0]
    assert math.isnan(gam["r"]) and f"<{GAM_MIN_N}" in gam["flag"]
    assert np.isfinite(analyse_matrix(x, Y, ["a", "b"], "linear")[0]["r"])


def test_constant_series_and_constant_id():
    rng = np.random.default_rng(1)
    x = np.linspace(0.5, 0.9, 20)
    Y = np.column_stack([np.full(20, 0.5), rng.normal(0.6, 0.02, 20), rng.normal(0.6, 0.02, 20)])
    rows = {(r["testset_a"], r["testset_b"]): r for r in analyse_matrix(x, Y, ["stuck", "b", "c"], "gam", n_boot=20)}
    assert math.isnan(rows["stuck", "b"]["r"]) and "constant:stuck" in rows["stuck", "b"]["flag"]
    assert np.isfinite(rows["b", "c"]["r"]) and rows["b", "c"]["flag"] == ""
    flat = analyse_matrix(np.full(20, 0.7), Y[:, 1:], ["b", "c"], "linear")[0]
    assert math.isnan(flat["r"]) and "constant:id" in flat["flag"]


def test_series_that_moves_at_one_checkpoint_is_flagged_not_reported_as_r_0():
    # the real-data case behind "ANLI r = 0.000, p = 1.000": a model answering one class on ANLI at every
    # checkpoint but one; b sits exactly at its mean at that checkpoint, so raw r is 0 to machine precision
    x = np.array([0.50, 0.55, 0.60, 0.62, 0.66])
    anli = np.array([0.50, 0.50, 0.51, 0.50, 0.50])
    b = np.array([0.40, 0.60, 0.50, 0.45, 0.55])
    c = np.array([0.30, 0.35, 0.45, 0.40, 0.50])
    assert abs(np.corrcoef(anli, b)[0, 1]) < 1e-12  # what an unguarded analysis reports: r = 0, p = 1
    for method in ("raw", "linear", "rank"):
        rows = {
            (r["testset_a"], r["testset_b"]): r
            for r in analyse_matrix(x, np.column_stack([anli, b, c]), ["anli", "b", "c"], method)
        }
        for pair in (("anli", "b"), ("anli", "c")):
            assert math.isnan(rows[pair]["r"]) and math.isnan(rows[pair]["p"]), (method, rows[pair])
            assert "one_change:anli" in rows[pair]["flag"]
        assert np.isfinite(rows["b", "c"]["r"]) and "one_change" not in rows["b", "c"]["flag"]
    # two checkpoints away from the mode is a (weak) series, not a degenerate one
    two = np.array([0.50, 0.52, 0.51, 0.50, 0.50])
    assert "one_change" not in analyse_matrix(x, np.column_stack([two, c]), ["two", "c"], "linear")[0]["flag"]


def test_collinear_with_id_is_flagged_and_exact_collinearity_is_nan():
    rng = np.random.default_rng(2)
    x = np.linspace(0.5, 0.9, 30)
    near = x + rng.normal(0, 0.002, 30)
    exact = 2 * x + 0.1
    other = rng.normal(0.6, 0.02, 30)
    rows = analyse_matrix(x, np.column_stack([near, exact, other]), ["near", "exact", "other"], "linear")
    by = {(r["testset_a"], r["testset_b"]): r for r in rows}
    assert "collinear_with_id:near" in by["near", "other"]["flag"] and np.isfinite(by["near", "other"]["r"])
    assert math.isnan(by["exact", "other"]["r"]) and "collinear_with_id:exact" in by["exact", "other"]["flag"]


def test_missing_cells_use_complete_checkpoints():
    rng = np.random.default_rng(3)
    x = np.linspace(0.5, 0.9, 25)
    Y = rng.normal(0.6, 0.02, (25, 3))
    Y[[3, 7], 0] = np.nan
    by = {(r["testset_a"], r["testset_b"]): r for r in analyse_run(x, Y, ["a", "b", "c"], "linear")}
    assert by["a", "b"]["n"] == 23 and "missing_checkpoints:2" in by["a", "b"]["flag"]
    assert by["b", "c"]["n"] == 25 and by["b", "c"]["flag"] == ""


def test_bad_metrics_files(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"run": "r"}\n')
    with pytest.raises(UserError, match=r"bad.jsonl:1: missing field\(s\) model"):
        load_metrics([bad])
    bad.write_text("\n{nope\n")
    with pytest.raises(UserError, match=r"bad.jsonl:2: invalid JSON"):
        load_metrics([bad])
    with pytest.raises(UserError, match="not found"):
        load_metrics([tmp_path / "missing.jsonl"])
    with pytest.raises(UserError, match="no metrics"):
        load_metrics([])


def test_id_testset_fallback_and_errors(tmp_path):
    rows = metrics_rows("m", 0, 10, 0.0, ["a", "b"], train_set="mnli_train", id_testset="mnli")
    for r in rows:
        del r["id_testset"]
    path = tmp_path / "m.jsonl"
    write_jsonl(path, rows)
    run = next(iter(build_runs(load_metrics([path])).values()))
    assert run["meta"]["id_testset"] == "mnli" and list(run["Y"].columns) == ["a", "b"]
    write_jsonl(path, [dict(r, train_set="snli_train") for r in rows])
    with pytest.raises(UserError, match="no id_testset field"):
        build_runs(load_metrics([path]))
    write_jsonl(path, [dict(r, id_testset="mnly") for r in rows])
    with pytest.raises(UserError, match="did you mean 'mnli'"):
        build_runs(load_metrics([path]))


def test_slices_become_extra_series_only_when_asked(tmp_path):
    rows = metrics_rows("m", 0, 12, 0.0, ["hans", "b"])
    rows += [dict(r, slice="lexical_overlap", accuracy=r["accuracy"] * 0.9) for r in rows if r["testset"] == "hans"]
    rows.append(json.loads(json.dumps(rows[0])))  # duplicate line: last wins, no error
    path = tmp_path / "m.jsonl"
    write_jsonl(path, rows)
    plain = next(iter(build_runs(load_metrics([path])).values()))
    sliced = next(iter(build_runs(load_metrics([path], slices=True)).values()))
    assert list(plain["Y"].columns) == ["b", "hans"]
    assert "hans[lexical_overlap]" in sliced["Y"].columns
