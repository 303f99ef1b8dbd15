"""Experiments side by side in MLflow: inside `dvc exp run` (DVC names the experiment in $DVC_EXP_NAME and its
baseline commit in $DVC_EXP_BASELINE_REV) a training run is named with the experiment and tagged with the params
it changed; the baseline's run of the same key stays a training run (shown beside it, not retagged superseded);
analysis runs are named by study and experiment; each model family has its own colour."""

from __future__ import annotations

import re

import mlflow
import yaml

from oodcorr.tracking import experiments, mirror
from oodcorr.tracking import store as tracking
from oodcorr.tracking.analysis_run import log_to_mlflow
from oodcorr.train.mlflow_log import run_label
from study_helpers import sh

KEY = "smollm2-135m_mnli_real_64_s0"
CFG = {"model": "smollm2-135m", "train_set": "mnli_real_train", "shots": 64, "seed": 0}
RUNS = {
    KEY: CFG,
    "smollm2-135m_mnli_real_64_s1": {**CFG, "seed": 1},
    "gemma3-270m_mnli_real_64_s0": {**CFG, "model": "gemma3-270m"},
}


def hue(color: str) -> float:
    import colorsys

    r, g, b = (int(color[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return colorsys.rgb_to_hls(r, g, b)[0] * 360


def test_families_get_clearly_distinct_hues_and_seeds_shades_of_their_family():
    a, a1, b = (experiments.run_color(cfg, RUNS) for cfg in RUNS.values())
    assert all(re.fullmatch(r"#[0-9A-F]{6}", c) for c in (a, a1, b))
    assert abs(hue(a) - hue(b)) > 60  # blue and orange, not two shades of pink
    assert a1 != a and abs(hue(a1) - hue(a)) < 15  # another seed: a shade of its family's hue


def test_a_run_inside_a_dvc_experiment_carries_its_name_and_changed_params(tmp_path, monkeypatch):
    sh(["git", "init", "-q"], tmp_path)
    params = {"study": {"name": "q"}, "train": {"lr": 0.002}, "runs": RUNS}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    sh(["git", "add", "-A"], tmp_path)
    sh(["git", "commit", "-qm", "baseline"], tmp_path)
    base = sh(["git", "rev-parse", "HEAD"], tmp_path).stdout.strip()
    params["train"]["lr"] = 0.001  # what `dvc exp run -S train.lr=1e-3` writes before it runs the stages
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    full = {**params, "_path": str(tmp_path / "params.yaml")}
    assert run_label(full, KEY, CFG)[0] == "smollm2-135m s0"  # plain `dvc repro`: no experiment
    monkeypatch.setenv("DVC_EXP_NAME", "brisk-oven")
    monkeypatch.setenv("DVC_EXP_BASELINE_REV", base)
    name, tags = run_label(full, KEY, CFG)
    assert name == "smollm2-135m s0 · brisk-oven"
    assert tags[experiments.EXP_TAG] == "brisk-oven" and tags[experiments.EXP_PARAMS_TAG] == "train.lr=0.001"
    assert tags[experiments.COLOR_TAG] == experiments.run_color(CFG, RUNS)


def test_the_baseline_run_stays_beside_the_experiments_run(tmp_path, mlflow_uri, monkeypatch):
    project = {"study": {"name": "side"}, "_root": str(tmp_path)}
    base_tags = {"oodcorr.run_key": KEY, tracking.KIND_TAG: tracking.TRAIN_KIND}
    mirror.start_train(project, KEY, "id-baseline", base_tags, {"lr": "0.002"}, "smollm2-135m s0")
    first = mirror.push(project, KEY)
    exp_tags = {**base_tags, experiments.EXP_TAG: "brisk-oven"}
    mirror.start_train(project, KEY, "id-lr", exp_tags, {"lr": "0.001"}, "smollm2-135m s0 · brisk-oven")
    second = mirror.push(project, KEY)
    client = mlflow.MlflowClient(mlflow_uri)
    assert first and second and first != second
    assert client.get_run(first).data.tags[tracking.KIND_TAG] == tracking.TRAIN_KIND  # not superseded
    assert client.get_run(second).info.run_name == "smollm2-135m s0 · brisk-oven"
    # a third attempt in the workspace (no experiment) with yet other params does supersede the baseline's
    mirror.start_train(project, KEY, "id-other", base_tags, {"lr": "0.003"}, "smollm2-135m s0")
    mirror.push(project, KEY)
    assert client.get_run(first).data.tags[tracking.KIND_TAG] == f"{tracking.TRAIN_KIND}-superseded"
    assert client.get_run(second).data.tags[tracking.KIND_TAG] == tracking.TRAIN_KIND


def test_analysis_runs_are_named_by_study_and_experiment(tmp_path, mlflow_uri, monkeypatch):
    out = tmp_path / "results"
    out.mkdir()
    (out / "report.html").write_text("<html></html>")
    monkeypatch.chdir(tmp_path)
    plain = log_to_mlflow(out, {"alpha": 0.05}, [], "oodcorr/quickstart", mlflow_uri)
    monkeypatch.setenv("DVC_EXP_NAME", "brisk-oven")
    in_exp = log_to_mlflow(out, {"alpha": 0.05}, [], "oodcorr/quickstart", mlflow_uri)
    client = mlflow.MlflowClient(mlflow_uri)
    assert client.get_run(plain).info.run_name == "analysis quickstart"
    assert client.get_run(in_exp).info.run_name == "analysis quickstart · brisk-oven"
    assert client.get_run(in_exp).data.tags[experiments.EXP_TAG] == "brisk-oven"
