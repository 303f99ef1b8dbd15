"""`oodcorr analyze` end to end (CliRunner on oodcorr.cli:cli) and MLflow logging to a sqlite store."""

import json
import re

import pandas as pd
import pytest
from click.testing import CliRunner

from oodcorr.cli import cli
from oodcorr.core.io import write_json, write_jsonl
from oodcorr.stats.simulate import metrics_rows

MODELS = {"m1": 0.7, "m2": 0.6}
OOD = ["hans", "anli", "wnli"]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder with runs/<run>/eval/metrics.jsonl and runs/<run>/run.json, as evaluate leaves it."""
    for i, (model, rho) in enumerate(MODELS.items()):
        run = f"{model}-s0"
        write_jsonl(tmp_path / "runs" / run / "eval" / "metrics.jsonl", metrics_rows(model, 0, 20, rho, OOD, run=run))
        write_json(tmp_path / "runs" / run / "run.json", {"run": run, "mlflow_run_id": f"train{i}"})
    (tmp_path / "params.yaml").write_text(
        "study: {name: demo}\nanalyze: {out: results, methods: [linear, gam], bootstrap: 50, alpha: 0.05,"
        " scatter_pair: [hans, anli], mlflow: false}\n"
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_analyze_writes_all_outputs(project):
    res = CliRunner().invoke(cli, ["analyze"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "analysed 2 runs, 2 models, 3 OOD pairs" in res.output
    out = project / "results"
    for name in (
        "partial_correlations.csv",
        "pooled_seeds.csv",
        "consistency.csv",
        "summary.json",
        "report.html",
        "plots/accuracy_vs_step.csv",
        "figures/heatmap_m1_linear.png",
        "figures/heatmap_m2_gam.png",
        "figures/scatter_hans_anli.png",
        "figures/curves_m1-s0.png",
        "figures/curves_m2-s0.png",
    ):
        assert (out / name).is_file(), name
    partials = pd.read_csv(out / "partial_correlations.csv")
    required = {
        "run",
        "model",
        "train_set",
        "shots",
        "seed",
        "method",
        "testset_a",
        "testset_b",
        "r",
        "n",
        "k",
        "df",
        "p",
        "p_holm",
        "p_bh",
        "ci_low",
        "ci_high",
        "flag",
        "boot_ci_low",
        "boot_ci_high",
    }
    assert required <= set(partials.columns)
    assert set(partials["method"]) == {"linear", "gam", "raw"} and len(partials) == 2 * 3 * 3
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_models"] == 2 and summary["bootstrap"] == 50
    curves = pd.read_csv(out / "plots/accuracy_vs_step.csv")
    assert {"run", "step", "testset", "accuracy"} <= set(curves.columns) and len(curves) == 2 * 20 * 4
    html = (out / "report.html").read_text()
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(images) == len(summary["figures"]) >= 6
    assert "consistent_positive" in html and "model_dependent" in html  # criteria explained
    assert "src=\"http" not in html and "<script" not in html  # self-contained


def test_analyze_options_override_params_and_user_errors(project):
    runner = CliRunner()
    res = runner.invoke(
        cli,
        [
            "analyze",
            "--metrics",
            "runs/m1-s0/eval/metrics.jsonl",
            "--out",
            "o2",
            "--method",
            "linear",
            "--bootstrap",
            "0",
            "--no-plots",
            "--no-mlflow",
        ],
    )
    assert res.exit_code == 0, res.output
    partials = pd.read_csv(project / "o2" / "partial_correlations.csv")
    assert set(partials["method"]) == {"linear", "raw"} and "boot_ci_low" not in partials
    assert not list((project / "o2").glob("**/*.png"))
    res = runner.invoke(cli, ["analyze", "--metrics", "nope.jsonl", "--no-mlflow"])
    assert res.exit_code == 2 and "error: metrics file not found" in res.output
    (project / "params.yaml").write_text("analyze: {methds: [linear]}\n")
    res = runner.invoke(cli, ["analyze", "--no-mlflow"])
    assert res.exit_code == 2 and "did you mean 'methods'" in res.output


def test_mlflow_logs_one_analysis_run(project):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{project}/mlflow.db"
    from oodcorr.analysis.pipeline import run_analysis

    files = sorted(project.glob("runs/*/eval/metrics.jsonl"))
    summary = run_analysis(
        files, project / "res", methods=("linear",), mlflow=True, tracking_uri=uri, experiment="demo"
    )
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("demo")
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1 and runs[0].info.run_id == summary["mlflow_run_id"]
    run = runs[0]
    assert run.data.tags["oodcorr.training_runs"] == "train0,train1"
    assert run.data.tags["oodcorr.training_run.1"] == "train1" and run.data.tags["oodcorr.kind"] == "analysis"
    assert run.data.metrics["n_models"] == 2 and "methods.linear.mean_abs_r" in run.data.metrics
    # the analysed metric (default balanced_margin) with accuracy's numbers beside it
    assert run.data.params["metric"] == "balanced_margin" and "accuracy.linear.mean_abs_r" in run.data.metrics
    assert "methods.linear.verdicts.consistent_null" in run.data.metrics and run.data.metrics["equivalence"] == 0.3
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"report.html", "summary.json", "partial_correlations.csv", "figures", "plots"} <= artifacts
    assert run.info.status == "FINISHED"


def test_help_is_fast_and_lazy():
    import subprocess
    import sys

    code = (
        "import sys; from click.testing import CliRunner; from oodcorr.cli import cli;"
        "r = CliRunner().invoke(cli, ['analyze', '--help']); assert r.exit_code == 0, r.output;"
        "heavy = [m for m in ('pandas', 'scipy', 'statsmodels', 'matplotlib', 'mlflow', 'torch') "
        "if m in sys.modules];"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_out_with_foreign_files_is_refused_and_left_intact(project):
    raw = project / "data" / "raw"
    raw.mkdir(parents=True)
    (raw / "mine.csv").write_text("a,b\n1,2\n")
    (raw / "notes").mkdir()
    (raw / "notes" / "x.txt").write_text("keep")
    before = sorted((p.relative_to(raw), p.read_bytes() if p.is_file() else None) for p in raw.rglob("*"))
    res = CliRunner().invoke(cli, ["analyze", "--out", "data/raw"])
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
    assert res.output.startswith("error: --out data/raw: holds files oodcorr did not write (mine.csv, notes)")
    assert sorted((p.relative_to(raw), p.read_bytes() if p.is_file() else None) for p in raw.rglob("*")) == before
    # its own earlier output is replaced fine
    assert CliRunner().invoke(cli, ["analyze", "--out", "res2"]).exit_code == 0
    assert CliRunner().invoke(cli, ["analyze", "--out", "res2"]).exit_code == 0


def test_out_that_is_a_file_or_unwritable_is_one_line(project):
    import os

    (project / "afile").write_text("x")
    res = CliRunner().invoke(cli, ["analyze", "--out", "afile"])
    assert res.exit_code == 2 and "is a file" in res.output and (project / "afile").read_text() == "x"
    if os.geteuid() != 0:
        ro = project / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        try:
            res = CliRunner().invoke(cli, ["analyze", "--out", "ro/results"])
            assert res.exit_code == 2 and res.output.startswith("error: --out ro/results: not writable"), res.output
        finally:
            ro.chmod(0o755)


def test_unknown_metric_in_params_or_on_the_command_line_lists_the_metrics(project):
    from oodcorr.stats.metrics import ANALYSABLE

    params = (project / "params.yaml").read_text().replace("mlflow: false", "mlflow: false, metric: balanced_margn")
    (project / "params.yaml").write_text(params)
    res = CliRunner().invoke(cli, ["analyze"])
    line = res.output.strip()
    assert res.exit_code != 0 and "\n" not in line and not (project / "results").exists()
    assert "analyze.metric: unknown metric 'balanced_margn'" in line and all(m in line for m in ANALYSABLE)
    res = CliRunner().invoke(cli, ["analyze", "--metric", "f1"])
    assert res.exit_code == 2 and all(m in res.output for m in ANALYSABLE)
