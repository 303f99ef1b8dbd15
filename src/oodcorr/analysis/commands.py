"""`oodcorr analyze`: click wrapper around stage.run_analysis. Only click/config are imported at module
level so `oodcorr --help` / `oodcorr analyze --help` stay fast."""

from __future__ import annotations

import glob
from pathlib import Path

import click


def _tracking(params: dict | None, root: Path) -> tuple[str, str]:
    """(tracking_uri, experiment) of the study, with the experiment created where training would."""
    from oodcorr import tracking

    params = params or {"_root": str(root)}
    tracking.setup(params)
    return tracking.tracking_uri(params), tracking.experiment_name(params)


@click.command("analyze")
@click.option("--metrics", "metrics", multiple=True, type=click.Path(dir_okay=False),
              help="metrics.jsonl file(s); default: runs/<run>/eval/metrics.jsonl of every run in params.yaml "
                   "(else runs/*/eval/metrics.jsonl).")
@click.option("--params", "params_file", type=click.Path(dir_okay=False), default=None,
              help="params.yaml (its `analyze` section); default: the project's params.yaml if present.")
@click.option("--out", "out", type=click.Path(file_okay=False), default=None,
              help="Output folder (default: params analyze.out, else results).")
@click.option("--bootstrap", type=int, default=None, help="Bootstrap resamples over checkpoints (0 = off).")
@click.option("--method", "methods", multiple=True, type=click.Choice(["raw", "linear", "rank", "gam"]),
              help="Correlation method(s) (default: params analyze.methods, else linear rank gam).")
@click.option("--alpha", type=float, default=None, help="Significance level (default 0.05).")
@click.option("--slices/--no-slices", default=None, help="Also analyse testset slices as extra series.")
@click.option("--mlflow/--no-mlflow", "use_mlflow", default=None,
              help="Log the analysis as one MLflow run (default: params analyze.mlflow, else on).")
@click.option("--no-plots", is_flag=True, help="Skip figures (tables, summary and report only).")
def analyze_cmd(metrics, params_file, out, bootstrap, methods, alpha, slices, use_mlflow, no_plots):
    """Partial correlations between OOD testsets across checkpoints (ID accuracy regressed out),
    pooled over seeds and compared across models; writes CSVs, figures, summary.json, report.html."""
    from oodcorr.config import PARAMS_FILE, find_project_root, load_params, project_path

    if params_file:
        params = load_params(params_file)
        root = Path(params["_root"])
    else:
        root = find_project_root()
        params = load_params(root / PARAMS_FILE) if (root / PARAMS_FILE).exists() else None
    cfg = (params or {}).get("analyze") or {}
    runs = (params or {}).get("runs")
    if metrics:
        files = list(metrics)
    elif runs:  # the study's runs only: stale run folders from older params are not analysed
        files = [str(root / "runs" / key / "eval" / "metrics.jsonl") for key in runs]
    else:
        files = sorted(glob.glob(str(root / "runs" / "*" / "eval" / "metrics.jsonl")))
    out_dir = Path(out) if out else (project_path(params, cfg["out"]) if params and cfg.get("out") else root / "results")
    tracking_uri, experiment = _tracking(params, root)
    use_mlflow = use_mlflow if use_mlflow is not None else cfg.get("mlflow", True)

    from oodcorr.analysis.stage import run_analysis

    summary = run_analysis(
        files, out_dir,
        methods=tuple(methods) or tuple(cfg.get("methods") or ("linear", "rank", "gam")),
        bootstrap=bootstrap if bootstrap is not None else int(cfg.get("bootstrap", 0)),
        alpha=alpha if alpha is not None else float(cfg.get("alpha", 0.05)),
        slices=slices if slices is not None else bool(cfg.get("slices", False)),
        seed=int(cfg.get("seed", 0)), scatter_pair=cfg.get("scatter_pair"), plots=not no_plots,
        mlflow=use_mlflow, tracking_uri=tracking_uri, experiment=experiment)
    click.echo(f"analysed {summary['n_runs']} runs, {summary['n_models']} models, {summary['n_pairs']} OOD pairs "
               f"-> {out_dir}")
    for method, s in summary["methods"].items():
        counts = ", ".join(f"{k}={v}" for k, v in s["verdicts"].items() if v)
        click.echo(f"  {method:6s} mean|r|={s['mean_abs_r'] if s['mean_abs_r'] is None else round(s['mean_abs_r'], 3)}"
                   f"  {counts or 'no verdicts'}")
    if summary.get("mlflow_run_id"):
        click.echo(f"  mlflow run {summary['mlflow_run_id']} ({experiment})")
