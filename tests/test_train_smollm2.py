"""Real-model smoke test: a few LoRA steps of SmolLM2-135M on CPU lower the verbaliser loss."""

import pytest

from test_train_helpers import adapter, make_project


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_smollm2_few_steps(tmp_path, mlflow_uri, monkeypatch):
    import mlflow
    import torch

    from oodcorr.settings.config import load_params
    from oodcorr.train.stage import train_run

    p = make_project(
        tmp_path,
        {
            "s": {
                "model": "smollm2-135m",
                "shots": 8,
                "max_steps": 4,
                "lr": 1e-3,
                "max_length": 64,
                "checkpoints": {"every": 4},
            }
        },
    )
    rec = train_run(load_params(p), "s")
    assert rec["checkpoint_steps"] == [0, 4] and rec["model_info"]["model_type"] == "llama"
    a0, a4 = adapter(tmp_path / "runs" / "s", 0), adapter(tmp_path / "runs" / "s", 4)
    assert all(not torch.equal(a0[k], a4[k]) for k in a0 if "lora_B" in k)
    mlflow.set_tracking_uri(mlflow_uri)
    hist = sorted(mlflow.MlflowClient().get_metric_history(rec["mlflow_run_id"], "train/loss"), key=lambda m: m.step)
    assert [m.step for m in hist] == [1, 2, 3, 4] and hist[-1].value < hist[0].value
