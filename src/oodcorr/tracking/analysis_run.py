"""The analysis' MLflow run: one per analysis (summary metrics, every output file as an artifact, tags linking
the training runs it analysed). `log_to_mlflow` is what `oodcorr analyze` logs; `sync_analysis` logs it again
from the results folder for `oodcorr sync` (a clone after `dvc pull` has results/ but no MLflow records), once:
an analysis run of the same inputs (`inputs_key`) already in the store is kept."""

from __future__ import annotations

import json
from pathlib import Path

from oodcorr.settings.project import Project


def inputs_key(metrics_files, summary: dict) -> str:
    """Hash of what the analysis read and how: rerunning it on the same inputs replaces its MLflow run."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(str(f) for f in metrics_files):
        h.update(Path(f).read_bytes())
    h.update(
        json.dumps(
            {k: summary.get(k) for k in ("alpha", "bootstrap", "methods_requested", "noise")}, sort_keys=True
        ).encode()
    )
    return h.hexdigest()[:16]


def _log_summary(client, rid: str, summary: dict) -> None:
    """The summary's numbers as metrics (batches of 500), its settings as params, the models as a tag."""
    from mlflow.entities import Metric, Param, RunTag

    from oodcorr.tracking.store import metric_leaves

    metrics = [
        Metric(key.replace("[", "(").replace("]", ")"), value, 0, 0) for key, value in metric_leaves(summary).items()
    ]
    params = [
        Param("alpha", str(summary.get("alpha"))),
        Param("bootstrap", str(summary.get("bootstrap"))),
        Param("methods", ",".join(summary.get("methods_requested", []))),
        Param("metric", str(summary.get("metric"))),
    ]
    for i in range(0, len(metrics), 500):
        client.log_batch(
            rid,
            metrics=metrics[i : i + 500],
            params=params if i == 0 else [],
            tags=[RunTag("oodcorr.models", ",".join(summary.get("models", [])))] if i == 0 else [],
        )
    if not metrics:
        client.log_batch(rid, params=params)


def log_to_mlflow(
    out_dir,
    summary: dict,
    training_run_ids: list[str],
    experiment: str,
    tracking_uri: str,
    inputs_key: str | None = None,
    rebuilt: bool = False,
) -> str:
    """Log the analysis as ONE MLflow run in `experiment`: summary metrics, every output file as an
    artifact, and tags linking the training runs it analysed. Returns the new run id.

    Uses MlflowClient (not the fluent API) so no global active-run state leaks into the caller."""
    from mlflow.tracking import MlflowClient

    from oodcorr.tracking import experiments
    from oodcorr.tracking.store import ANALYSIS_KIND, KIND_TAG

    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    exp_id = exp.experiment_id if exp else client.create_experiment(experiment)
    name = analysis_name(experiment)
    tags = {
        KIND_TAG: ANALYSIS_KIND,
        "oodcorr.training_runs": ",".join(training_run_ids),
        "mlflow.runName": name,
        experiments.COLOR_TAG: experiments.ANALYSIS_COLOR,
        experiments.STUDY_TAG: experiment.split("/")[-1],
        **experiments.dvc_experiment(Path("params.yaml")),
    }  # a stage runs in its project folder
    tags["mlflow.runName"] = name = name + experiments.exp_suffix(tags)
    if rebuilt:
        tags["oodcorr.rebuilt"] = "from the results folder (oodcorr sync)"
    if inputs_key:  # the same inputs analysed again (e.g. a forced rerun): replace, don't duplicate
        tags["oodcorr.analysis_inputs"] = inputs_key
        for old in client.search_runs([exp_id], f"tags.`oodcorr.analysis_inputs` = '{inputs_key}'"):
            client.delete_run(old.info.run_id)
    tags.update({f"oodcorr.training_run.{i}": rid for i, rid in enumerate(training_run_ids)})
    run = client.create_run(exp_id, run_name=name, tags=tags)
    rid = run.info.run_id
    try:
        client.set_tag(rid, "mlflow.note.content", report_note(rid, exp_id))
        _log_summary(client, rid, summary)
        client.log_artifacts(rid, str(out_dir))
        client.set_terminated(rid, "FINISHED")
    except BaseException:
        client.set_terminated(rid, "FAILED")
        raise
    return rid


def analysis_name(experiment: str) -> str:
    """ "analysis <study>" (the study: the experiment's last part, oodcorr/<study>); inside a DVC experiment the
    caller appends " · <experiment>"."""
    return f"analysis {experiment.split('/')[-1]}"


def report_link(run_id: str, exp_id: str) -> str:
    """The report in the run's Artifacts view, relative to the page (the UI routes on the URL's fragment): MLflow
    shows an .html artifact there as a page, while its download endpoint (get-artifact) always sends a file to
    save, never one to show."""
    return f"#/experiments/{exp_id}/runs/{run_id}/artifacts/report.html"


def report_note(run_id: str, exp_id: str) -> str:
    """The analysis run's description (markdown, shown on its Overview tab): a link that opens its report."""
    return (
        f"**[Open the report]({report_link(run_id, exp_id)})** — partial correlations, cross-model verdicts "
        "and figures; tables and figures are under Artifacts."
    )


def sync_analysis(params: dict) -> str | None:
    """The study's analysis run from its results folder (analyze.out, default results/: summary.json and every
    output), after its training runs are synced; its id, or None when there is no finished analysis. An
    analysis run of the same inputs already in the store is kept (no duplicate)."""
    from mlflow.tracking import MlflowClient

    from oodcorr.core import io
    from oodcorr.records.rundir import metrics_file, run_dir, runs_root
    from oodcorr.tracking import mirror, store

    project = Project.from_params(params)
    results = project.path((params.get("analyze") or {}).get("out") or "results")
    keys = list(params.get("runs") or {})  # what `oodcorr analyze` reads by default (run_tables)
    files = (
        [metrics_file(run_dir(project, key)) for key in keys]
        if keys
        else sorted(runs_root(project).glob(f"*/{metrics_file(Path())}"))
    )
    try:
        summary = json.loads((results / "summary.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(summary, dict) or not files or not all(f.is_file() for f in files):
        return None
    key = inputs_key(files, summary)
    # the experiment its training runs were recorded in (a preset switch since may have renamed the study)
    recorded = {
        (io.read_jsonl_tolerant(mirror.record_dir(project, f.parent.parent.name) / "train.jsonl") or [{}])[0].get(
            "experiment"
        )
        for f in files
    }
    experiment = recorded.pop() if len(recorded) == 1 and None not in recorded else store.experiment_name(project)
    exp_id = store.setup(project, experiment)
    client = MlflowClient(store.tracking_uri(project))
    # a FINISHED one only: a sync cut off mid-upload left its run FAILED, and log_to_mlflow replaces that
    finished = f"tags.`oodcorr.analysis_inputs` = '{key}' and attributes.status = 'FINISHED'"
    found = client.search_runs([exp_id], finished, max_results=1)
    if found:
        return found[0].info.run_id
    ids = sorted({rid for rid in (mirror.mlflow_run_id(project, f.parent.parent.name) for f in files) if rid})
    return log_to_mlflow(results, summary, ids, experiment, store.tracking_uri(project), inputs_key=key, rebuilt=True)
