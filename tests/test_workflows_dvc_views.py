"""What DVC prints for the quickstart fits a terminal: `dvc metrics show` and the README's `dvc exp show`
stay within 200 characters, with the same key names per run and for the study. The metrics files are
written by the functions the stages use (evaluate's and analyze's headline), for the quickstart's run keys."""

from __future__ import annotations

import json
import re
import shutil

import pandas as pd
import yaml

from study_helpers import REPO, sh


def quickstart_metrics(root, id_acc: float, ood_acc: float, reliability: float) -> None:
    from oodcorr.analysis.headline import headline as study_headline
    from oodcorr.evaluate.outputs import run_summary as run_headline

    params = yaml.safe_load((root / "params.yaml").read_text())
    testsets = params["evaluate"]["testsets"]
    curves = []
    for run, cfg in params["runs"].items():
        rows = [{"step": s, "testset": t, "accuracy": id_acc if t == cfg["id_testset"] else ood_acc + 0.01 * s}
                for s in (0, 2, 4, 6, 8) for t in testsets]
        ev = root / "runs" / run / "eval"
        ev.mkdir(parents=True, exist_ok=True)
        (ev / "summary.json").write_text(json.dumps(run_headline(rows, cfg["id_testset"])))
        (ev / "accuracy.csv").write_text("step,testset,accuracy\n" + "".join(
            f"{r['step']},{r['testset']},{r['accuracy']}\n" for r in rows))
        curves += [{**r, "run": run, "role": "id" if r["testset"] == cfg["id_testset"] else "ood"} for r in rows]
    summary = {"n_runs": len(params["runs"]), "methods": {"linear": {
        "share_significant_bh": 0.1667, "share_model_dependent": 0.3333}},
        "noise": {"methods": {"linear": {"share_distinguishable": 0.0833, "median_reliability": reliability}}}}
    (root / "results").mkdir(exist_ok=True)
    (root / "results" / "metrics.json").write_text(json.dumps(study_headline(summary, pd.DataFrame(curves), "linear")))


def test_metrics_and_exp_show_fit_200_columns_with_one_name_per_number(tmp_path):
    root = tmp_path / "qs"
    root.mkdir()
    for f in ("dvc.yaml", "params.yaml"):
        shutil.copy(REPO / f, root / f)
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
    assert study["reliability"] == 0.0  # its own scale: below 0 is none
    # a second experiment: other numbers and a changed param; the README's exp show options
    quickstart_metrics(root, 0.7083, 0.55, 0.35)
    (root / "params.yaml").write_text((root / "params.yaml").read_text().replace("max_steps: 8", "max_steps: 16"))
    sh(["git", "commit", "-qam", "two"], root)
    cmd = re.search(r"^(dvc exp show [^#\n]*?)\s+#", (REPO / "README.md").read_text(), re.M).group(1)
    res = sh(["bash", "-c", cmd + " -n 2 --no-pager"], root, COLUMNS="400")
    table = res.stdout.splitlines()
    assert max(map(len, table)) <= 200, res.stdout
    assert "id_accuracy" in res.stdout and "train.max_steps" in res.stdout and "0.7083" in res.stdout
