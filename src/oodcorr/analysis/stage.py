"""Analyze stage entry (dvc.yaml `analyze`, `oodcorr analyze`): metrics.jsonl files -> partial correlations,
seed pooling, cross-model verdicts, figures, report.html, summary.json and, optionally, one MLflow run.
The work is in pipeline.py (run_analysis); its settings in settings.py (AnalyzeSettings)."""

from __future__ import annotations

from pathlib import Path

import click

from oodcorr.stats.metrics import ANALYSABLE, DEFAULT_METRIC
from oodcorr.stats.partial import METHODS


@click.command("analyze")
@click.option(
    "--metrics",
    "metrics",
    multiple=True,
    type=click.Path(dir_okay=False),
    help="metrics.jsonl file(s); default: runs/<run>/eval/metrics.jsonl of every run in params.yaml "
    "(else runs/*/eval/metrics.jsonl).",
)
@click.option(
    "--params",
    "params_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="params.yaml (its `analyze` section); default: the project's params.yaml if present.",
)
@click.option(
    "--out", "out", type=click.Path(), default=None, help="Output folder (default: params analyze.out, else results)."
)
@click.option("--bootstrap", type=int, default=None, help="Bootstrap resamples over checkpoints (0 = off).")
@click.option(
    "--method",
    "methods",
    multiple=True,
    type=click.Choice(list(METHODS)),
    help="Correlation method(s) (default: params analyze.methods, else linear rank gam).",
)
@click.option("--alpha", type=float, default=None, help="Significance level (default 0.05).")
@click.option("--slices/--no-slices", default=None, help="Also analyse testset slices as extra series.")
@click.option(
    "--mlflow/--no-mlflow",
    "use_mlflow",
    default=None,
    help="Log the analysis as one MLflow run (default: params analyze.mlflow, else on).",
)
@click.option("--no-plots", is_flag=True, help="Skip figures (tables, summary and report only).")
@click.option(
    "--metric",
    default=None,
    type=click.Choice(list(ANALYSABLE)),
    help="Per-checkpoint metric to correlate (default: params analyze.metric, else "
    f"{DEFAULT_METRIC}); accuracy is always reported beside it.",
)
def analyze_cmd(metrics, params_file, out, bootstrap, methods, alpha, slices, use_mlflow, no_plots, metric):
    """Partial correlations between OOD testsets across checkpoints (ID accuracy regressed out),
    pooled over seeds and compared across models; writes CSVs, figures, summary.json, report.html."""
    from oodcorr.analysis.mlflow_log import study_tracking
    from oodcorr.analysis.pipeline import run_analysis
    from oodcorr.core import locks
    from oodcorr.records.run_tables import metrics_files
    from oodcorr.settings.analyze import AnalyzeSettings
    from oodcorr.settings.config import PARAMS_FILE, find_project_root, load_params
    from oodcorr.settings.project import Project

    if params_file:
        params = load_params(params_file)
        root = Path(params["_root"])
    else:
        root = find_project_root()
        params = load_params(root / PARAMS_FILE) if (root / PARAMS_FILE).exists() else None
    settings = AnalyzeSettings.from_params(
        params, methods=tuple(methods), bootstrap=bootstrap, alpha=alpha, slices=slices, metric=metric
    )
    project = Project.from_params(params) if params else Project(root=root)
    files = list(metrics) or metrics_files(params, project)
    out_dir = Path(out) if out else (project.path(settings.out) if params and settings.out else root / "results")
    use_mlflow = use_mlflow if use_mlflow is not None else settings.mlflow and project.tracking_enabled
    with locks.exclusive(locks.lock_path(root, "analyze"), f"an analysis of {root} is running in another process"):
        tracking_uri, experiment = study_tracking(project) if use_mlflow else (None, None)
        with _one_blas_thread():  # as `study reanalyze`: the sums do not follow the machine's core count
            summary = run_analysis(
                files,
                out_dir,
                settings,
                plots=not no_plots,
                mlflow=use_mlflow,
                tracking_uri=tracking_uri,
                experiment=experiment,
            )
    click.echo(
        f"analysed {summary['n_runs']} runs, {summary['n_models']} models, {summary['n_pairs']} OOD pairs -> {out_dir}"
    )
    if summary.get("mlflow_run_id"):
        click.echo(f"  mlflow run {summary['mlflow_run_id']} ({experiment})")
    from oodcorr.analysis.overview import terminal_summary

    report = out_dir / "report.html"
    if report.resolve().is_relative_to(Path.cwd().resolve()):
        report = report.resolve().relative_to(Path.cwd().resolve())
    for line in terminal_summary(
        summary, _read_csv(out_dir / "consistency.csv"), report, _read_csv(out_dir / "partial_correlations.csv")
    ):
        click.echo(line)


def _one_blas_thread():
    """BLAS on one thread (threadpoolctl, where installed): OpenBLAS takes some sums in another order on two threads."""
    import contextlib

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(1)


def _read_csv(path: Path):
    import pandas as pd

    try:
        return pd.read_csv(path)
    except (OSError, ValueError):
        return None
