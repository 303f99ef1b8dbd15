"""What DVC prints for the quickstart fits a terminal: `dvc metrics show` and the README's `dvc exp show`
stay within 200 characters, with the same key names per run and for the study. The metrics files are
written by the functions the stages use (evaluate's and analyze's headline), for the quickstart's run keys."""

from __future__ import annotations

import json
import re
import shutil

import pandas as pd
import pytest
import yaml

from study_helpers import REPO, quickstart_text, sh


def quickstart_metrics(root, id_acc: float, ood_acc: float, reliability: float) -> None:
    from oodcorr.analysis.headline import headline as study_headline
    from oodcorr.evaluate.outputs import run_summary as run_headline

    params = yaml.safe_load((root / "params.yaml").read_text())
    testsets = params["evaluate"]["testsets"]
    curves = []
    for run, cfg in params["runs"].items():
        rows = [
            {"step": s, "testset": t, "accuracy": id_acc if t == cfg["id_testset"] else ood_acc + 0.01 * s}
            for s in (0, 2, 4, 6, 8)
            for t in testsets
        ]
        ev = root / "runs" / run / "eval"
        ev.mkdir(parents=True, exist_ok=True)
        (ev / "summary.json").write_text(json.dumps(run_headline(rows, cfg["id_testset"])))
        (ev / "accuracy.csv").write_text(
            "step,testset,accuracy\n" + "".join(f"{r['step']},{r['testset']},{r['accuracy']}\n" for r in rows)
        )
        curves += [{**r, "run": run, "role": "id" if r["testset"] == cfg["id_testset"] else "ood"} for r in rows]
    summary = {
        "n_runs": len(params["runs"]),
        "methods": {"linear": {"share_significant_bh": 0.1667, "share_model_dependent": 0.3333}},
        "noise": {"methods": {"linear": {"share_distinguishable": 0.0833, "median_reliability": reliability}}},
    }
    (root / "results").mkdir(exist_ok=True)
    (root / "results" / "metrics.json").write_text(json.dumps(study_headline(summary, pd.DataFrame(curves), "linear")))


def test_metrics_and_exp_show_fit_200_columns_with_one_name_per_number(tmp_path):
    root = tmp_path / "qs"
    root.mkdir()
    shutil.copy(REPO / "dvc.yaml", root / "dvc.yaml")
    (root / "params.yaml").write_text(quickstart_text())
    sh(["git", "init", "-q"], root)
    sh(["dvc", "init", "-q"], root)
    quickstart_metrics(root, 0.5833, 0.5938, -0.4)
    sh(["git", "add", "-A"], root)
    sh(["git", "commit", "-qm", "one"], root)
    shown = sh(["dvc", "metrics", "show"], root).stdout
    lines = shown.splitlines()
    assert max(map(len, lines)) <= 200, shown
    head = lines[0].split()
    assert head[0] == "Path" and head.count("id_accuracy") == 1 and head.count("ood_accuracy") == 1, head
    assert len(lines) == 1 + 3  # two runs and the study, each in the same columns
    study = json.loads((root / "results" / "metrics.json").read_text())
    assert study["reliability"] is None  # the report's "none" (no signal above testset noise): missing, not 0.0
    assert "reliability" not in head  # DVC leaves a null out: no number rather than a wrong one
    # a second experiment: other numbers and a changed param; the README's exp show options
    quickstart_metrics(root, 0.7083, 0.55, 0.35)
    (root / "params.yaml").write_text((root / "params.yaml").read_text().replace("max_steps: 8", "max_steps: 16"))
    sh(["git", "commit", "-qam", "two"], root)
    cmd = re.search(r"^dvc exp show (?:.*\\\n)*.*$", (REPO / "README.md").read_text(), re.M).group(0)
    cmd = cmd.replace("\\\n", " ")
    res = sh(["bash", "-c", cmd + " -n 2 --no-pager"], root, COLUMNS="400")
    table = res.stdout.splitlines()
    assert max(map(len, table)) <= 200, res.stdout
    assert "id_accuracy" in res.stdout and "train.max_steps" in res.stdout and "0.7083" in res.stdout
    assert "0.1667" in res.stdout and "significant" in res.stdout  # a study number equal in both: still shown
    assert "runs/" not in res.stdout and "src/" not in res.stdout  # no per-run or dependency columns
    first = [line for line in table if line.strip() and not line.strip().startswith("─")][-1]
    assert first.split()[-2:] == ["-", "8"], res.stdout  # the first commit's reliability (none) shows as missing


@pytest.mark.parametrize("median, shown", [(-0.4, None), (0.0, None), (None, None), (float("nan"), None), (0.35, 0.35)])
def test_headline_reliability_is_missing_where_the_report_says_none(median, shown):
    """results/metrics.json's reliability is the median reliability where there is signal, and null (DVC prints
    "-") where the report says none (at or below 0) or it is undefined; never a 0.0 that reads as measured."""
    from oodcorr.analysis.figure_parts import reliability_label
    from oodcorr.analysis.headline import headline

    summary = {
        "n_runs": 2,
        "noise": {"methods": {"linear": {"share_distinguishable": 0.0, "median_reliability": median}}},
    }
    out = headline(summary, None, "linear")
    assert out["reliability"] == shown
    assert (reliability_label(median) in ("none", "–")) == (shown is None)
