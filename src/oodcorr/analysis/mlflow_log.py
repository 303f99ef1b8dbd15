"""The analysis' MLflow record: one run per analysis (summary metrics, every output as an artifact, tags
linking the training runs it analysed). Best effort: the results folder is the truth, MLflow a mirror."""

from __future__ import annotations

import json
from pathlib import Path

import click

from oodcorr.errors import UserError
from oodcorr.settings.project import Project


def log_analysis(out_dir: Path, summary: dict, runs: dict, metrics_files, tracking_uri: str | None,
                 experiment: str | None, training_run_ids: list[str] | None = None) -> None:
    """Log the finished analysis (its run id into summary["mlflow_run_id"]); an unreachable store warns."""
    from oodcorr.analysis.loading import training_run_ids as find_ids

    ids = training_run_ids if training_run_ids is not None else sorted(set(find_ids(runs).values()))
    uri = tracking_uri or f"sqlite:///{Path('mlruns').resolve()}/mlflow.db"
    try:  # best effort: the results folder is the truth, MLflow a mirror
        from oodcorr.tracking import store as tracking

        tracking.bound_http_waits()
        tracking.ensure_store(uri)
        summary["mlflow_run_id"] = log_to_mlflow(out_dir, summary, ids, experiment or "oodcorr", uri,
                                                 inputs_key=inputs_key(metrics_files, summary))
    except UserError:
        raise
    except Exception as e:
        from oodcorr.tracking.store import mask_secrets

        detail = " ".join(str(e).split("\n")[0].split())[:160]
        click.echo(mask_secrets(f"warning: MLflow at {uri} unreachable ({type(e).__name__}: {detail}); the analysis "
                                f"is in {out_dir}, rerun `oodcorr analyze` to log it"), err=True)


def inputs_key(metrics_files, summary: dict) -> str:
    """Hash of what the analysis read and how: rerunning it on the same inputs replaces its MLflow run."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(str(f) for f in metrics_files):
        h.update(Path(f).read_bytes())
    h.update(json.dumps({k: summary.get(k) for k in ("alpha", "bootstrap", "methods_requested", "noise")},
                        sort_keys=True).encode())
    return h.hexdigest()[:16]


def log_to_mlflow(out_dir, summary: dict, training_run_ids: list[str], experiment: str, tracking_uri: str,
                  inputs_key: str | None = None) -> str:
    """Log the analysis as ONE MLflow run in `experiment`: summary metrics, every output file as an
    artifact, and tags linking the training runs it analysed. Returns the new run id.

    Uses MlflowClient (not the fluent API) so no global active-run state leaks into the caller."""
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    from oodcorr.tracking.store import metric_leaves

    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp else client.create_experiment(experiment)
    tags = {"oodcorr.kind": "analysis", "oodcorr.training_runs": ",".join(training_run_ids),
            "mlflow.runName": "analysis"}
    if inputs_key:  # the same inputs analysed again (e.g. a forced rerun): replace, don't duplicate
        tags["oodcorr.analysis_inputs"] = inputs_key
        for old in client.search_runs([exp_id], f"tags.`oodcorr.analysis_inputs` = '{inputs_key}'"):
            client.delete_run(old.info.run_id)
    tags.update({f"oodcorr.training_run.{i}": rid for i, rid in enumerate(training_run_ids)})
    run = client.create_run(exp_id, run_name="analysis", tags=tags)
    rid = run.info.run_id
    try:
        client.set_tag(rid, "mlflow.note.content", report_note(rid))
        metrics = [Metric(key.replace("[", "(").replace("]", ")"), value, 0, 0)
                   for key, value in metric_leaves(summary).items()]
        params = [Param("alpha", str(summary.get("alpha"))), Param("bootstrap", str(summary.get("bootstrap"))),
                  Param("methods", ",".join(summary.get("methods_requested", []))),
                  Param("metric", str(summary.get("metric")))]
        for i in range(0, len(metrics), 500):
            client.log_batch(rid, metrics=metrics[i:i + 500], params=params if i == 0 else [],
                             tags=[RunTag("oodcorr.models", ",".join(summary.get("models", [])))] if i == 0 else [])
        if not metrics:
            client.log_batch(rid, params=params)
        client.log_artifacts(rid, str(out_dir))
        client.set_terminated(rid, "FINISHED")
    except BaseException:
        client.set_terminated(rid, "FAILED")
        raise
    return rid


def report_note(run_id: str) -> str:
    """The analysis run's description (markdown, shown on its Overview tab): a link to its report."""
    return (f"**[Open the report (report.html)](get-artifact?path=report.html&run_uuid={run_id})** — partial "
            "correlations, cross-model verdicts and figures; tables and figures are under Artifacts.")


def study_tracking(project: Project) -> tuple[str, str]:
    """(tracking_uri, experiment) of the study, with the experiment created where training would."""
    from oodcorr.tracking import mirror, store as tracking

    mirror.sync_pending(project)  # records an earlier stage could not mirror (store was down)
    try:
        tracking.setup(project)
    except UserError:  # a locked or damaged local store: one line before any work, never written over
        raise
    except Exception:  # store down: warned once when the analysis run is logged
        pass
    return tracking.tracking_uri(project), tracking.experiment_name(project)
