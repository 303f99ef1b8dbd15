"""MLflow wiring shared by every stage: one store per project (sqlite under <project>/mlruns, resolved to an
absolute path so `dvc exp run --temp/--queue` copies log to the same place), one experiment per study,
one MLflow run per training run (train and evaluate log into the same run)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

MAX_PARAM_LEN = 6000  # MLflow 3 limit for a param value is 6000 chars
# A classic ML experiment: MLflow 3's UI then opens it on the runs table and its charts, not the GenAI
# (traces) view it infers for an untagged experiment (mlflow/server/js: ExperimentKind).
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}


def enabled(params: dict | None) -> bool:
    """study.tracking: mlflow (default) or none (no MLflow at all: train, evaluate and analyze write their
    local outputs only, and mlflow need not be installed)."""
    from oodcorr.errors import UserError

    value = ((params or {}).get("study") or {}).get("tracking") or "mlflow"
    if value not in ("mlflow", "none"):
        raise UserError(f"params: study.tracking: expected mlflow or none, got {value!r}")
    return value == "mlflow"


def project_root(params: dict) -> Path:
    return Path(params.get("_root") or os.getcwd()).resolve()


def tracking_uri(params: dict) -> str:
    """$MLFLOW_TRACKING_URI, else study.tracking_uri (a relative sqlite path resolved against the project),
    else sqlite:///<project>/mlruns/mlflow.db."""
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    root = _store_root(params)
    uri = (params.get("study") or {}).get("tracking_uri")
    if uri:
        if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
            return "sqlite:///" + str((root / uri[len("sqlite:///"):]).resolve())
        return uri
    (root / "mlruns").mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{root / 'mlruns' / 'mlflow.db'}"


def _store_root(params: dict) -> Path:
    """The project folder that owns the store. Inside a `dvc exp run --temp/--queue` workspace (a copy
    under .dvc/tmp/exps/...), that is the original project, not the temporary copy."""
    root = project_root(params)
    parts = root.parts
    if ".dvc" in parts:
        i = parts.index(".dvc")
        if parts[i + 1: i + 3] == ("tmp", "exps"):
            return Path(*parts[:i])
    return root


def artifact_root(params: dict) -> str:
    return (_store_root(params) / "mlruns" / "artifacts").as_uri()


def experiment_name(params: dict) -> str:
    study = params.get("study") or {}
    return study.get("experiment") or f"oodcorr/{study.get('name', 'default')}"


def setup(params: dict) -> str:
    """Point mlflow at the project's store and experiment; return the experiment id."""
    import mlflow

    mlflow.set_tracking_uri(tracking_uri(params))
    name = experiment_name(params)
    client = mlflow.MlflowClient()
    exp = client.get_experiment_by_name(name)
    if exp is None:
        uri = tracking_uri(params)
        location = artifact_root(params) if uri.startswith("sqlite:") or uri.startswith("file:") else None
        try:
            exp_id = client.create_experiment(name, artifact_location=location, tags=EXPERIMENT_TAGS)
        except Exception:  # created concurrently by another process
            exp_id = client.get_experiment_by_name(name).experiment_id
    else:
        exp_id = exp.experiment_id
        for key, value in EXPERIMENT_TAGS.items():  # stores made before the tag existed
            if exp.tags.get(key) != value:
                client.set_experiment_tag(exp_id, key, value)
    mlflow.set_experiment(experiment_id=exp_id)
    return exp_id


def find_run(params: dict, run_key: str, run_id: str | None = None, kind: str = "train") -> str | None:
    """An existing MLflow run for `run_key` (by recorded id, else by tag) so reruns never duplicate it."""
    import mlflow

    client = mlflow.MlflowClient()
    if run_id:
        try:
            run = client.get_run(run_id)
            if run.info.lifecycle_stage == "active":
                return run_id
        except Exception:
            pass
    exp_id = setup(params)
    found = client.search_runs([exp_id], filter_string=f"tags.`oodcorr.run_key` = '{run_key}' "
                               f"and tags.`oodcorr.kind` = '{kind}'", max_results=1,
                               order_by=["attributes.start_time DESC"])
    return found[0].info.run_id if found else None


def flatten(d: dict, prefix: str = "") -> dict[str, str]:
    """Nested params -> {'a.b': 'value'} with values cut to MLflow's length limit."""
    out = {}
    for key, value in d.items():
        if str(key).startswith("_"):
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            text = str(value)
            out[name] = text if len(text) <= MAX_PARAM_LEN else text[: MAX_PARAM_LEN - 3] + "..."
    return out


def git_commit(root: Path) -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def dvc_data_hashes(root: Path) -> dict[str, str]:
    """md5s of the DVC-tracked data (*.dvc files) for the run's tags."""
    import yaml

    tags = {}
    for f in sorted(root.glob("*.dvc")):
        try:
            outs = (yaml.safe_load(f.read_text()) or {}).get("outs") or []
        except Exception:
            continue
        for out in outs:
            if out.get("md5"):
                tags[f"dvc.{out.get('path', f.stem)}"] = out["md5"]
    return tags
