"""`oodcorr analyze` (the real command, a subprocess as a user runs it) on run folders as the evaluate stage writes
them (per-example predictions and metrics.jsonl, oodcorr.records.simulated_runs), made degenerate: any number of
checkpoints, one OOD testset, a testset linear in ID written with accuracy alone, a testset never scored. Each
gives rows with a reason in words and exit 0, never a traceback; a damaged metrics row is one line naming
file:line."""

from __future__ import annotations

import json
import math
import sys

import numpy as np
import pandas as pd
import pytest

from oodcorr.core.io import write_json
from oodcorr.records.simulated_runs import write_bias_study
from oodcorr.stats.simulate import answer_bias_study
from study_helpers import REPO, sh

NAMES = ["mnli", "hans", "anli", "wnli"]


def study(root, n_ckpt: int, names=NAMES, models=("m1", "m2"), bootstrap: int = 50):
    """Two runs (one per model family) of `n_ckpt` checkpoints, 60 items per testset, names[0] the ID testset."""
    for i, model in enumerate(models):
        run = f"{model}-s0"
        st = answer_bias_study(n_ckpt, 60, [0.5] * (len(names) - 1), 0.3, rng=np.random.default_rng(i))
        write_bias_study(root / "runs" / run / "eval", st, run, model, 0, list(range(0, 2 * n_ckpt, 2)), names)
        write_json(root / "runs" / run / "run.json", {"run": run})
    (root / "params.yaml").write_text(
        "study: {name: demo}\nanalyze: {out: results, methods: [linear, rank, gam], "
        f"bootstrap: {bootstrap}, mlflow: false}}\n"
    )
    return root


def analyze(root, *args):
    res = sh([sys.executable, "-m", "oodcorr", "analyze", *args], root, check=False, PYTHONPATH=REPO / "src")
    out = res.stdout + res.stderr
    assert "Traceback" not in out, out[-3000:]
    return res, out


def metrics_file(root, run="m1-s0"):
    return root / "runs" / run / "eval" / "metrics.jsonl"


def rows_of(root, run="m1-s0"):
    return [json.loads(x) for x in metrics_file(root, run).read_text().splitlines() if x.strip()]


def write_rows(root, rows, run="m1-s0"):
    metrics_file(root, run).write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize("n_ckpt", [1, 2, 3])
def test_any_number_of_checkpoints_gives_rows_with_a_reason(tmp_path, n_ckpt):
    # 2 checkpoints with the bootstrap on ended in KeyError ['boot_ci_low', 'boot_ci_high']: the columns were
    # added only where a resample could be drawn
    res, out = analyze(study(tmp_path, n_ckpt), "--no-plots")
    assert res.returncode == 0, out[-2000:]
    assert f"no pair has a partial r: too few checkpoints (n={n_ckpt} < 4)" in out
    p = pd.read_csv(tmp_path / "results" / "partial_correlations.csv")
    assert {"boot_ci_low", "boot_ci_high"} <= set(p.columns) and len(p) == 2 * 4 * 3  # 2 runs, 4 methods, 3 pairs
    partial = p[p["method"] != "raw"]  # raw (no control) has an r from 3 checkpoints on
    assert partial["flag"].str.startswith("too_few_checkpoints").all() and partial["r"].isna().all()
    raw = p[p["method"] == "raw"]
    assert raw["r"].notna().all() if n_ckpt >= 3 else raw["flag"].str.startswith("too_few_checkpoints").all()
    assert "too few checkpoints" in (tmp_path / "results" / "report.html").read_text()


def test_no_checkpoint_scored_is_one_line_naming_the_file(tmp_path):
    study(tmp_path, 6)
    metrics_file(tmp_path, "m1-s0").write_text("")
    res, out = analyze(tmp_path, "--no-plots")  # the other run alone is never analysed without it
    assert res.returncode == 2 and "error: " in out and "m1-s0/eval/metrics.jsonl: no metrics rows" in out, out
    assert not (tmp_path / "results").exists()


def test_one_ood_testset_says_there_is_no_pair(tmp_path):
    # with the noise pass on, an empty reliability mask selected columns: KeyError 'metric'
    res, out = analyze(study(tmp_path, 6, names=NAMES[:2]), "--no-plots")
    assert res.returncode == 0, out[-2000:]
    assert "no run has two OOD testsets with a score, so there is no pair to correlate" in out


def test_a_testset_linear_in_id_written_with_accuracy_alone_says_what_is_wrong(tmp_path):
    # flagged one_class before: the analysed metric was missing from its rows, and one gold class was assumed
    study(tmp_path, 8)
    (tmp_path / "params.yaml").write_text(
        "study: {name: demo}\nanalyze: {out: results, methods: [linear], mlflow: false, noise: false}\n"
    )
    for run in ("m1-s0", "m2-s0"):
        rows = rows_of(tmp_path, run)
        ids = [r for r in rows if r["testset"] == "mnli"]
        extra = [
            {
                **{k: r[k] for k in ("run", "model", "train_set", "id_testset", "shots", "seed", "step", "n")},
                "testset": "lin",
                "accuracy": 0.5 * r["accuracy"] + 0.2,
            }
            for r in ids
        ]
        write_rows(tmp_path, rows + extra, run)
    res, out = analyze(tmp_path, "--no-plots")
    assert res.returncode == 0, out[-2000:]
    p = pd.read_csv(tmp_path / "results" / "partial_correlations.csv")
    lin = p[(p["testset_a"] == "lin") | (p["testset_b"] == "lin")]
    assert len(lin) and lin["r"].isna().all() and not p["flag"].fillna("").str.contains("one_class").any()
    assert lin["flag"].str.contains("no_metric:lin").all()
    partial = lin[lin["method"] != "raw"]  # raw does not remove ID: nothing to be collinear with
    assert len(partial) and partial["flag_accuracy"].str.contains("collinear_with_id:lin").all()
    html = (tmp_path / "results" / "report.html").read_text()
    assert "lin&#39;s rows in the metrics file lack balanced_margin" in html  # the template's escaping of '
    assert "lin moves in step with ID" in html


def test_a_testset_never_scored_is_flagged_no_score(tmp_path):
    study(tmp_path, 8)
    (tmp_path / "params.yaml").write_text(
        "study: {name: demo}\nanalyze: {out: results, methods: [linear], mlflow: false, noise: false}\n"
    )
    for run in ("m1-s0", "m2-s0"):
        write_rows(
            tmp_path,
            [
                dict(r, accuracy=math.nan, balanced_margin=math.nan) if r["testset"] == "hans" else r
                for r in rows_of(tmp_path, run)
            ],
            run,
        )
    res, out = analyze(tmp_path, "--no-plots")
    assert res.returncode == 0, out[-2000:]
    p = pd.read_csv(tmp_path / "results" / "partial_correlations.csv")
    hans = p[(p["testset_a"] == "hans") | (p["testset_b"] == "hans")]
    assert hans["flag"].str.contains("no_score:hans").all() and not p["flag"].fillna("").str.contains("one_class").any()


@pytest.mark.parametrize(
    "field, value, said",
    [
        ("step", "2", "step must be an integer >= 0, got '2'"),  # as text, '10' sorted before '2'
        ("step", 0.5, "step must be an integer >= 0"),
        ("accuracy", 7.5, "accuracy must be a number in [0, 1]"),
        ("accuracy", math.inf, "accuracy must be a number in [0, 1]"),
        ("testset", 5, "testset must be a non-empty text, got 5"),  # AttributeError before
        ("shots", [16], "shots must be an integer >= 0, got [16]"),  # TypeError: unhashable type: 'list' before
        ("run", 7, "run must be a non-empty text"),
        ("balanced_margin", "high", "balanced_margin must be a number"),
    ],
)
def test_a_damaged_metrics_row_is_one_line_naming_file_and_line(tmp_path, field, value, said):
    study(tmp_path, 6)
    rows = rows_of(tmp_path)
    rows[2][field] = value
    write_rows(tmp_path, rows)
    res, out = analyze(tmp_path, "--no-plots")
    errors = [x for x in out.splitlines() if x.startswith("error: ")]
    assert res.returncode == 2 and len(errors) == 1, out
    assert f"m1-s0/eval/metrics.jsonl:3: {said}" in errors[0]
