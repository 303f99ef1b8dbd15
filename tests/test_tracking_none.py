"""study.tracking: none switches MLflow off entirely: train and evaluate write their local outputs
(checkpoints, run.json, metrics.jsonl) and never import mlflow."""

from __future__ import annotations

import sys

import pytest
import yaml

from test_train_helpers import make_project


@pytest.mark.slow
def test_train_and_evaluate_without_mlflow(tmp_path, monkeypatch):
    from oodcorr.evaluate.stage import evaluate_run
    from oodcorr.settings.config import load_params
    from oodcorr.train.stage import train_run

    path = make_project(tmp_path, {"x": {"max_steps": 2, "checkpoints": {"every": 2}}})
    params = yaml.safe_load(path.read_text())
    params["study"]["tracking"] = "none"
    path.write_text(yaml.safe_dump(params, sort_keys=False))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    for name in [m for m in sys.modules if m == "mlflow" or m.startswith("mlflow.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mlflow", None)  # any `import mlflow` now raises ImportError
    params = load_params(path)
    record = train_run(params, "x", quiet=True)
    assert record["finished"] and record["mlflow_run_id"] is None
    out = evaluate_run(params, "x", quiet=True)
    assert out["mlflow_run_id"] is None and out["rows"]
    assert (tmp_path / "runs" / "x" / "eval" / "metrics.jsonl").exists()
    assert not (tmp_path / "mlruns").exists()


def test_tracking_value_checked():
    from oodcorr.core.errors import UserError
    from oodcorr.settings.config import validate
    from oodcorr.tracking import store as tracking

    assert tracking.enabled({}) and tracking.enabled({"study": {"tracking": "mlflow"}})
    assert not tracking.enabled({"study": {"name": "s", "tracking": "none"}})
    validate({"study": {"name": "s", "tracking": "none"}})
    with pytest.raises(UserError, match="study.tracking"):
        tracking.enabled({"study": {"tracking": "wandb"}})
