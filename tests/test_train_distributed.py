"""`accelerate launch --num_processes 2 -m oodcorr train` on CPU: data parallel over 2 gloo processes gives the
same adapter (up to float summation order) and the same logged losses as one process."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from test_train_helpers import adapter, make_project

ACCELERATE = Path(sys.executable).parent / "accelerate"


def _run(cmd, root, uri):
    # accelerate's `--cpu` launcher is single-process; CPU multi-process = `--multi_gpu` (torchrun) with CUDA
    # hidden, and the processes join a gloo group.
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    res = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stderr


@pytest.mark.slow
def test_two_process_training_equals_one_process(tmp_path):
    runs = {"d": {"max_steps": 6, "checkpoints": {"every": 3}, "lora": {"dropout": 0.0}}}
    roots = {}
    for name, launcher in (
        ("one", [sys.executable, "-m", "oodcorr"]),
        (
            "two",
            [
                str(ACCELERATE),
                "launch",
                "--num_processes",
                "2",
                "--multi_gpu",
                "--num_machines",
                "1",
                "--mixed_precision",
                "no",
                "--dynamo_backend",
                "no",
                "-m",
                "oodcorr",
            ],
        ),
    ):
        root = tmp_path / name
        params = make_project(root, runs)
        err = _run(
            [*launcher, "train", "--run", "d", "--params", str(params), "--quiet"],
            root,
            f"sqlite:///{root / 'mlflow.db'}",
        )
        assert err.count("train d: 6 steps") == (2 if name == "two" else 1), err  # one line per process
        roots[name] = root
    one, two = (adapter(roots[n] / "runs" / "d", 6) for n in ("one", "two"))
    assert one.keys() == two.keys()
    changed = adapter(roots["one"] / "runs" / "d", 0)
    for k in one:
        torch.testing.assert_close(two[k], one[k], rtol=1e-4, atol=1e-5)
        assert not torch.equal(one[k], changed[k]) or "lora_A" in k  # training moved the adapter
    recs = [json.loads((roots[n] / "runs" / "d" / "run.json").read_text()) for n in ("one", "two")]
    assert recs[0]["checkpoint_steps"] == recs[1]["checkpoint_steps"] and recs[1]["finished"]
    import mlflow

    losses = []
    for n in ("one", "two"):
        client = mlflow.MlflowClient(f"sqlite:///{roots[n] / 'mlflow.db'}")
        run_id = json.loads((roots[n] / "runs" / "d" / "tracking" / "mlflow.json").read_text())["run_id"]
        losses.append([m.value for m in sorted(client.get_metric_history(run_id, "train/loss"), key=lambda m: m.step)])
    assert len(losses[0]) == 6
    torch.testing.assert_close(torch.tensor(losses[1]), torch.tensor(losses[0]), rtol=1e-4, atol=1e-5)
