"""`oodcorr sync` for a collaborator: after `dvc pull` the results folder is there but the MLflow store is not;
sync logs the analysis run again from results/ (summary metrics, report, tables), once: a second sync, and an
`oodcorr analyze` of the same inputs, leave one analysis run."""

from __future__ import annotations

import shutil

import yaml
from click.testing import CliRunner

from oodcorr.cli import cli
from oodcorr.core.io import write_jsonl
from oodcorr.stats.simulate import metrics_rows


def _analysis_runs(root):
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("oodcorr/demo")
    return client, client.search_runs([exp.experiment_id], "tags.`oodcorr.kind` = 'analysis'")


def test_sync_rebuilds_the_analysis_run_once(tmp_path, monkeypatch):
    owner, clone = tmp_path / "owner", tmp_path / "clone"
    for model, rho in {"m1": 0.7, "m2": 0.6}.items():
        write_jsonl(
            owner / "runs" / f"{model}-s0" / "eval" / "metrics.jsonl",
            metrics_rows(model, 0, 12, rho, ["hans", "anli", "wnli"], run=f"{model}-s0"),
        )
    (owner / "params.yaml").write_text(
        yaml.safe_dump({"study": {"name": "demo"}, "analyze": {"methods": ["linear"], "bootstrap": 0, "mlflow": True}})
    )
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "unset")  # restored at teardown; the project's own store is used
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    monkeypatch.chdir(owner)
    res = CliRunner().invoke(cli, ["analyze", "--no-plots"])
    assert res.exit_code == 0, res.output
    _, (logged,) = _analysis_runs(owner)

    # a clone after `dvc pull`: run folders and results/, no MLflow store
    shutil.copytree(owner, clone, ignore=shutil.ignore_patterns("mlruns"))
    monkeypatch.chdir(clone)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # mlflow.set_tracking_uri exported the owner's
    res = CliRunner().invoke(cli, ["sync"])
    assert res.exit_code == 0 and "analysis: mlflow run" in res.output, res.output
    client, (run,) = _analysis_runs(clone)
    assert run.info.status == "FINISHED" and run.data.tags["oodcorr.rebuilt"]
    assert run.data.metrics == logged.data.metrics and run.data.params == logged.data.params
    assert {"report.html", "summary.json", "partial_correlations.csv"} <= {
        a.path for a in client.list_artifacts(run.info.run_id)
    }

    assert CliRunner().invoke(cli, ["sync"]).exit_code == 0
    assert [r.info.run_id for r in _analysis_runs(clone)[1]] == [run.info.run_id]  # kept, not duplicated
    assert CliRunner().invoke(cli, ["analyze", "--no-plots"]).exit_code == 0  # the same inputs: replaced
    assert len(_analysis_runs(clone)[1]) == 1
