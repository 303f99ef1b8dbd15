"""MLflow experiments are classic ML experiments (the UI lands on the runs table, not the GenAI view), also
for a store made before the tag existed; the analysis run's description links its report."""

import mlflow

from oodcorr import tracking
from oodcorr.analysis.mlflow_log import report_note


def test_experiment_is_created_and_retagged_as_custom_model_development(tmp_path, mlflow_uri):
    params = {"study": {"name": "kind"}, "_root": str(tmp_path)}
    exp_id = tracking.setup(params)
    client = mlflow.MlflowClient(mlflow_uri)
    assert client.get_experiment(exp_id).tags["mlflow.experimentKind"] == "custom_model_development"
    old = client.create_experiment("oodcorr/old")  # an untagged experiment from an earlier version
    assert "mlflow.experimentKind" not in client.get_experiment(old).tags
    tracking.setup({"study": {"name": "old"}, "_root": str(tmp_path)})
    assert client.get_experiment(old).tags["mlflow.experimentKind"] == "custom_model_development"


def test_analysis_note_links_the_report():
    note = report_note("abc123")
    assert "get-artifact?path=report.html&run_uuid=abc123" in note
