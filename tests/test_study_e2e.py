"""End to end: `dvc repro` of a tiny study in a fresh git repo (tiny models, synthetic suite), a no-op rerun,
per-run invalidation, push/clone/pull through a local DVC remote, and a killed study that resumes."""

import json
import signal
import subprocess
import time

import pandas as pd
import pytest

from study_helpers import env, make_project, mlflow_runs, sh, tiny_params

pytestmark = [pytest.mark.slow, pytest.mark.heavy]
RUNS = ["tiny-olmo2_synth_16_s0", "tiny-opt_synth_16_s0"]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("e2e") / "study", tiny_params(None))
    sh(["dvc", "repro"], root)
    return root


def test_repro_produces_the_whole_study(study):
    for run in RUNS:
        steps = sorted(int(p.name.split("-")[1]) for p in (study / "runs" / run / "checkpoints").glob("checkpoint-*"))
        assert steps[0] == 0 and steps[-1] == 16 and len(steps) >= 8
        rows = [json.loads(line) for line in (study / "runs" / run / "eval" / "metrics.jsonl").read_text().splitlines()]
        whole = [r for r in rows if r["slice"] is None]
        assert {r["step"] for r in whole} == set(steps)
        assert {r["testset"] for r in whole} == {
            "synth_id",
            "synth_overlap",
            "synth_negation",
            "synth_vocab",
            "synth_embedded",
        }
    pc = pd.read_csv(study / "results" / "partial_correlations.csv")
    assert set(pc["run"]) == set(RUNS) and {"linear", "rank", "gam"} <= set(pc["method"])
    summary = json.loads((study / "results" / "summary.json").read_text())
    assert summary
    assert (study / "results" / "report.html").stat().st_size > 10_000
    assert list((study / "results" / "figures").glob("*.png"))
    # DVC sees a finished pipeline: metrics and plots are declared
    assert "Data and pipelines are up to date" in sh(["dvc", "status"], study).stdout
    metrics = sh(["dvc", "metrics", "show", "--json"], study).stdout
    assert "summary.json" in metrics
    plots = sh(["dvc", "plots", "show", "--json"], study).stdout
    assert "accuracy.csv" in plots and '"testset"' in plots


def test_mlflow_holds_one_run_per_training_run_and_an_analysis_run(study):
    client, runs = mlflow_runs(study)
    train = [r for r in runs if r.data.tags.get("oodcorr.kind") == "train"]
    assert sorted(r.data.tags["oodcorr.run_key"] for r in train) == sorted(RUNS)
    assert sorted(r.info.run_name for r in train) == ["tiny-olmo2 s0", "tiny-opt s0"]
    for r in train:
        hist = client.get_metric_history(r.info.run_id, "acc/synth_overlap")
        steps = [m.step for m in hist]
        assert len(steps) == len(set(steps)) >= 8
    analysis = [r for r in runs if r.data.tags.get("oodcorr.kind") == "analysis"]
    assert len(analysis) == 1
    linked = json.dumps(analysis[0].data.tags)
    assert all(r.info.run_id in linked for r in train)


def test_rerun_is_a_noop_and_one_run_change_reruns_only_that_run(study):
    out = sh(["dvc", "repro"], study).stdout
    assert "Running stage" not in out
    params = (study / "params.yaml").read_text()
    try:
        edited = params.replace("shots: 16, data_seed: 0, seed: 0}", "shots: 16, data_seed: 0, seed: 0, lr: 0.002}", 1)
        if edited == params:  # block style yaml
            import yaml

            tree = yaml.safe_load(params)
            tree["runs"]["tiny-opt_synth_16_s0"]["lr"] = 0.002
            edited = yaml.safe_dump(tree, sort_keys=False)
        (study / "params.yaml").write_text(edited)
        status = sh(["dvc", "status"], study).stdout
        changed = {line.rstrip(":") for line in status.splitlines() if line and not line.startswith(("\t", " "))}
        # analyze follows through its `runs` dependency once the new evaluation is written
        # prepare follows `runs` (what is prepared is what runs use); its output is unchanged, so no other run follows
        # check depends on every params value; its stamp is constant, so it re-runs nothing else
        assert changed == {"check", "prepare", "train@tiny-opt_synth_16_s0", "evaluate@tiny-opt_synth_16_s0"}, status
    finally:
        (study / "params.yaml").write_text(params)


def test_push_clone_pull_then_repro_is_a_noop(study, tmp_path):
    remote = tmp_path / "remote"
    sh(["dvc", "remote", "add", "-f", "-d", "shared", str(remote)], study)
    sh(["dvc", "push", "-q"], study)
    sh(["git", "add", "-A"], study)
    sh(["git", "commit", "-qm", "study results"], study)
    clone = tmp_path / "clone"
    sh(["git", "clone", "-q", str(study), str(clone)], tmp_path)
    sh(["dvc", "pull", "-q"], clone)
    assert (clone / "results" / "report.html").exists()
    assert list((clone / "runs" / RUNS[0] / "checkpoints").glob("checkpoint-*"))
    assert "Data and pipelines are up to date" in sh(["dvc", "status"], clone).stdout
    assert "Running stage" not in sh(["dvc", "repro"], clone).stdout


def test_killed_study_resumes_to_the_same_results(study, tmp_path):
    """Kill `dvc repro` during training (hard exit mid-run) and during evaluation (SIGKILL of the whole
    process group once some pairs are cached); reruns finish with results equal to the uninterrupted study."""
    root = make_project(tmp_path / "killed", tiny_params(None))
    res = sh(["dvc", "repro"], root, check=False, OODCORR_TEST_KILL_AT_STEP=6)
    assert res.returncode != 0
    ckpts = list((root / "runs" / RUNS[0] / "checkpoints").glob("checkpoint-*"))
    assert ckpts and not (root / "runs" / RUNS[0] / "checkpoints" / "checkpoint-16").exists()
    # second attempt: killed during evaluation
    proc = subprocess.Popen(
        ["dvc", "repro"],
        cwd=root,
        env=env(),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 600
    cache = root / "runs" / RUNS[0] / "eval" / "cache"
    while time.time() < deadline and proc.poll() is None:
        if cache.exists() and len(list(cache.iterdir())) >= 3:
            break
        time.sleep(0.05)
    if proc.poll() is None:
        import os

        os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait() == -signal.SIGKILL, "the study finished before it could be killed during evaluation"
    sh(["dvc", "repro"], root)
    for run in RUNS:
        a = (study / "runs" / run / "eval" / "metrics.jsonl").read_text()
        b = (root / "runs" / run / "eval" / "metrics.jsonl").read_text()
        assert a == b
    pd.testing.assert_frame_equal(
        pd.read_csv(study / "results" / "partial_correlations.csv"),
        pd.read_csv(root / "results" / "partial_correlations.csv"),
    )
    client, runs = mlflow_runs(root)
    train = [r for r in runs if r.data.tags.get("oodcorr.kind") == "train"]
    assert sorted(r.data.tags["oodcorr.run_key"] for r in train) == sorted(RUNS)
    for r in train:
        steps = [m.step for m in client.get_metric_history(r.info.run_id, "train/loss")]
        assert steps == sorted(set(steps)) and steps[-1] == 16


def test_temp_experiment_logs_to_the_project_store(study):
    """`dvc exp run --temp -S ...` runs in a copy under .dvc/tmp/exps and still logs to the project's MLflow
    store; `dvc exp show` lists the experiment with its metrics."""
    _, before = mlflow_runs(study)
    res = sh(["dvc", "exp", "run", "--temp", "-n", "lr-sweep", "-S", "train.lr=0.002"], study)
    assert "Ran experiment" in res.stdout + res.stderr
    _, after = mlflow_runs(study)
    new = {r.info.run_id for r in after} - {r.info.run_id for r in before}
    kinds = sorted(r.data.tags.get("oodcorr.kind") for r in after if r.info.run_id in new)
    assert kinds == ["analysis", "train", "train"], kinds
    lrs = {
        r.data.params.get("lr") for r in after if r.info.run_id in new and r.data.tags.get("oodcorr.kind") == "train"
    }
    assert lrs == {"0.002"}
    # the experiment's runs carry its name and changed params; the baseline's runs stay beside them (not superseded)
    for r in (r for r in after if r.info.run_id in new):
        assert r.info.run_name.endswith(" · lr-sweep") and r.data.tags["oodcorr.dvc_exp"] == "lr-sweep", r.info
        if r.data.tags.get("oodcorr.kind") == "train":
            assert "train.lr=0.002" in r.data.tags["oodcorr.dvc_exp_params"], r.data.tags
    assert next(
        r for r in after if r.info.run_id in new and r.data.tags["oodcorr.kind"] == "analysis"
    ).info.run_name.startswith("analysis ")
    old_train = [r for r in after if r.info.run_id not in new and r.data.tags.get("oodcorr.run_key")]
    assert old_train and all(r.data.tags.get("oodcorr.kind") == "train" for r in old_train), old_train
    assert not list((study / ".dvc" / "tmp").glob("**/mlflow.db"))  # nothing logged into the temporary copy
    analysis = next(r for r in after if r.info.run_id in new and r.data.tags.get("oodcorr.kind") == "analysis")
    assert (study / "mlruns" / "artifacts" / analysis.info.run_id / "artifacts" / "summary.json").is_file()
    show = sh(["dvc", "exp", "show", "--json"], study).stdout
    assert "lr-sweep" in show and "summary.json" in show
