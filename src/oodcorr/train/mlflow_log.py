"""The training run's MLflow record: one run per training run (found again by run key on a resume),
params logged once, train/loss and train/lr per step without duplicate steps."""

from __future__ import annotations

import contextlib
import time


class MetricLog:
    """Buffered train/* metrics; steps already in the store (an earlier attempt of this run) are skipped."""

    def __init__(self, client, run_id: str):
        self.client, self.run_id, self.buf, self.t = client, run_id, [], time.time()
        hist = client.get_metric_history(run_id, "train/loss")
        self.done = max((m.step for m in hist), default=-1)

    def log(self, step: int, **values) -> None:
        from mlflow.entities import Metric

        if step <= self.done:
            return
        ts = int(time.time() * 1000)
        self.buf += [Metric(f"train/{k}", float(v), ts, step) for k, v in values.items()]
        if len(self.buf) >= 500 or time.time() - self.t > 10:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.client.log_batch(self.run_id, metrics=self.buf)
        self.buf, self.t = [], time.time()


def mlflow_run(params: dict, cfg: dict, info: dict, previous: dict | None, fresh: bool) -> str:
    """The MLflow run of this training run: the recorded one when resuming; else a new one (tags and
    the flattened resolved config logged once). A superseded run (config changed) is re-tagged."""
    import mlflow
    from mlflow.entities import Param

    from oodcorr import tracking

    exp_id = tracking.setup(params)
    client = mlflow.MlflowClient()
    run_key = cfg["run"]
    old_id = (previous or {}).get("mlflow_run_id")
    if not fresh:
        found = tracking.find_run(params, run_key, old_id, kind="train")
        if found:
            return found
    elif old_id:
        with contextlib.suppress(Exception):  # the old run may be gone from the store
            client.set_tag(old_id, "oodcorr.kind", "train-superseded")
    root = tracking.project_root(params)
    tags = {"oodcorr.run_key": run_key, "oodcorr.kind": "train", "oodcorr.model": cfg["model"],
            "oodcorr.model_revision": str(info.get("revision")), **tracking.dvc_data_hashes(root)}
    commit = tracking.git_commit(root)
    if commit:
        tags["mlflow.source.git.commit"] = commit
    run = client.create_run(exp_id, run_name=run_key, tags=tags)
    flat = tracking.flatten(cfg)
    items = [Param(k, v) for k, v in flat.items()]
    for i in range(0, len(items), 100):
        client.log_batch(run.info.run_id, params=items[i: i + 100])
    return run.info.run_id
