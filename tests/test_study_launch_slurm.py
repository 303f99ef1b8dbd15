"""A real SLURM cluster (Debian's slurm-wlm: munged + slurmctld + slurmd on 127.0.0.1, started by
.ci/slurm-up.sh): a tiny study launched with `--executor slurm` as a job array, one job preempted
(`scontrol requeue`) mid-training, collected into dvc.lock; `dvc repro` afterwards runs only the analysis and
the results equal a plain `dvc repro` of the same params. Skipped, with the helper's reason, where the cluster
cannot start."""

import json
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file

from study_helpers import REPO, make_project, mlflow_runs, sh
from test_study_launch import small_params

pytestmark = [pytest.mark.slow, pytest.mark.heavy]
RUNS = ["tiny-olmo2_synth_16_s0", "tiny-opt_synth_16_s0"]


@pytest.fixture(scope="module")
def slurm_conf():
    try:
        res = subprocess.run(["bash", str(REPO / ".ci" / "slurm-up.sh")], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"slurm unavailable: .ci/slurm-up.sh: {e}")
    lines = [line for line in res.stdout.splitlines() if line.strip()]
    if res.returncode != 0 or not lines or not lines[-1].startswith("SLURM_CONF="):
        pytest.skip(lines[-1] if lines else f"slurm unavailable: .ci/slurm-up.sh exited {res.returncode}")
    return lines[-1].split("=", 1)[1]


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    root = make_project(tmp_path_factory.mktemp("plain") / "study", small_params())
    sh(["dvc", "repro"], root)
    return root


def changed_stages(root):
    status = sh(["dvc", "status"], root).stdout
    return {line.rstrip(":") for line in status.splitlines() if line and not line.startswith(("\t", " "))}


def test_slurm_launch_collect_then_repro_runs_only_the_analysis(slurm_conf, plain, tmp_path):
    t0 = time.time()
    root = make_project(tmp_path / "study", small_params())
    launch = [
        "oodcorr",
        "study",
        "launch",
        "--executor",
        "slurm",
        "--gpus-per-run",
        "0",
        "--time",
        "20",
        "--max-parallel",
        "2",
    ]
    res = sh(launch + ["--no-wait"], root, SLURM_CONF=slurm_conf)
    assert "submitted 2 run(s) as SLURM job array" in res.stdout, res.stdout + res.stderr
    record = json.loads(sorted((root / ".oodcorr" / "launch").glob("*/launch.json"))[-1].read_text())
    jobs = {k: record["runs"][k]["job_id"] for k in RUNS}
    status = sh(["oodcorr", "study", "status"], root, SLURM_CONF=slurm_conf).stdout
    assert all(f"job {jobs[k]}" in status for k in RUNS), status

    # preempt the first run mid-training: SLURM kills and requeues it; it resumes from its newest checkpoint
    ckpt = root / "runs" / RUNS[0] / "checkpoints"
    deadline = time.time() + 600
    while time.time() < deadline and not (ckpt / "checkpoint-4").exists():
        time.sleep(0.2)
    preempted = not (ckpt / "checkpoint-8").exists()
    if preempted:
        sh(["scontrol", "requeue", jobs[RUNS[0]]], root, SLURM_CONF=slurm_conf)

    res = sh(["oodcorr", "study", "collect", "--wait"], root, SLURM_CONF=slurm_conf)
    assert "2 run(s) committed to dvc.lock" in res.stdout, res.stdout + res.stderr
    launched_s = time.time() - t0
    if preempted:
        out = Path(record["runs"][RUNS[0]]["stdout"]).read_text()
        assert out.count(f"[oodcorr launch] {RUNS[0]}: train@") == 2, out  # the job ran again after requeue

    assert changed_stages(root) == {"analyze"}
    repro = sh(["dvc", "repro"], root).stdout
    ran = [line for line in repro.splitlines() if line.startswith("Running stage")]
    assert ran == ["Running stage 'analyze':"], repro
    assert "Data and pipelines are up to date" in sh(["dvc", "status"], root).stdout
    assert "nothing to launch" in sh(launch, root, SLURM_CONF=slurm_conf).stdout

    # the same results as a plain `dvc repro` of the same params
    for run in RUNS:
        assert (root / "runs" / run / "eval" / "metrics.jsonl").read_text() == (
            plain / "runs" / run / "eval" / "metrics.jsonl"
        ).read_text()
        # same weights up to float rounding: the thread policy picks threads by the load at stage start, and
        # a different thread count changes the order of float sums (CI saw 1-ulp differences at step 2)
        adapters = sorted((plain / "runs" / run / "checkpoints").glob("checkpoint-*/adapter_model.safetensors"))
        assert adapters
        for a in adapters:
            b = root / a.relative_to(plain)
            ta, tb = load_file(a), load_file(b)
            assert ta.keys() == tb.keys(), b
            for k in ta:
                torch.testing.assert_close(tb[k], ta[k], rtol=1e-4, atol=1e-6, msg=f"{b}: {k}")
    for name in ("partial_correlations.csv", "pooled_seeds.csv", "consistency.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(root / "results" / name), pd.read_csv(plain / "results" / name))

    # one MLflow run per training run, each step logged once, although one job ran twice
    client, runs = mlflow_runs(root)
    train = [r for r in runs if r.data.tags.get("oodcorr.kind") == "train"]
    assert sorted(r.data.tags["oodcorr.run_key"] for r in train) == sorted(RUNS)
    for r in train:
        assert [m.step for m in client.get_metric_history(r.info.run_id, "train/loss")] == list(range(1, 9))
    print(f"\nslurm launch + requeue + collect: {launched_s:.0f} s (preempted: {preempted})")
