"""The analysis' MLflow record: one run per analysis (summary metrics, every output as an artifact, tags
linking the training runs it analysed; written by oodcorr.tracking.analysis_run, which `oodcorr sync` also
uses). Best effort: the results folder is the truth, MLflow a mirror."""

from __future__ import annotations

from pathlib import Path

import click

from oodcorr.core.errors import UserError
from oodcorr.settings.project import Project
from oodcorr.tracking.analysis_run import inputs_key, log_to_mlflow


def log_analysis(
    out_dir: Path,
    summary: dict,
    runs: dict,
    metrics_files,
    tracking_uri: str | None,
    experiment: str | None,
    training_run_ids: list[str] | None = None,
) -> None:
    """Log the finished analysis (its run id into summary["mlflow_run_id"]); an unreachable store warns."""
    from oodcorr.records.run_tables import training_run_ids as find_ids

    ids = training_run_ids if training_run_ids is not None else sorted(set(find_ids(runs).values()))
    uri = tracking_uri or f"sqlite:///{Path('mlruns').resolve()}/mlflow.db"
    try:  # best effort: the results folder is the truth, MLflow a mirror
        from oodcorr.tracking import store as tracking

        tracking.bound_http_waits()
        tracking.ensure_store(uri)
        summary["mlflow_run_id"] = log_to_mlflow(
            out_dir, summary, ids, experiment or "oodcorr", uri, inputs_key=inputs_key(metrics_files, summary)
        )
    except UserError:
        raise
    except Exception as e:
        from oodcorr.core.credentials import mask_secrets

        detail = " ".join(str(e).split("\n")[0].split())[:160]
        click.echo(
            mask_secrets(
                f"warning: MLflow at {uri} unreachable ({type(e).__name__}: {detail}); the analysis "
                f"is in {out_dir}, rerun `oodcorr analyze` to log it"
            ),
            err=True,
        )


def study_tracking(project: Project) -> tuple[str, str]:
    """(tracking_uri, experiment) of the study, with the experiment created where training would."""
    from oodcorr.tracking import mirror
    from oodcorr.tracking import store as tracking

    tracking.check_store(project)  # a locked, damaged or read-only local store: one line before any work
    mirror.sync_pending(project)  # records an earlier stage could not mirror (store was down)
    try:
        tracking.setup(project)
    except UserError:  # a locked or damaged local store: one line before any work, never written over
        raise
    except Exception:  # store down: warned once when the analysis run is logged
        pass
    return tracking.tracking_uri(project), tracking.experiment_name(project)
