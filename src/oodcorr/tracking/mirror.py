"""Local tracking records and their best-effort mirror into MLflow (`oodcorr sync`).

The run folder is the truth: every param, tag, metric, artifact and status of a training run is first
appended to `runs/<run>/tracking/{train,eval}.jsonl`; MLflow only mirrors it. Mirroring is idempotent
(the MLflow run is found by run key + identity before one is created, params/metric steps/artifacts already
in the store are skipped, orphaned duplicates are closed), so it can be replayed at any time:

  - during a stage, after each checkpoint / at the end (short HTTP timeouts, tracking.HTTP_DEFAULTS);
  - when the store cannot be reached, one warning is printed, the run is marked pending
    (`runs/<run>/tracking/PENDING`) and the stage goes on with its local outputs;
  - at the start of the next stage (sync_pending) or by `oodcorr sync [--run KEY]`.

`runs/*/tracking/` is listed in .dvcignore: these records (timestamps, MLflow run ids) never enter a DVC
hash, so dvc.lock is the same on every machine.

Record lines: {"type": "run", "identity", "run_name", "tags", "params"} (first line of train.jsonl),
{"type": "metric", "key", "value", "step", "timestamp"}, {"type": "artifact", "path", "artifact_path"},
{"type": "status", "status"}.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from oodcorr.core import io
from oodcorr.core.credentials import mask_secrets
from oodcorr.records import rundir
from oodcorr.settings.project import Project
from oodcorr.tracking import store as tracking
from oodcorr.tracking.experiments import COLOR_TAG, EXP_TAG

TRACK_DIR = rundir.TRACKING
PENDING = "PENDING"
MLFLOW_JSON = "mlflow.json"  # {"run_id", "tracking_uri"} of the last successful mirror (not DVC-tracked)
_DOWN: dict[str, str] = {}  # tracking URI -> the error that made it unreachable in this process


def record_dir(project: Project | dict, run: str) -> Path:
    return rundir.tracking_dir(rundir.run_dir(project, run))


def _line(obj: dict) -> str:
    return json.dumps(obj, default=str, allow_nan=True)


# ---------------------------------------------------------------- local records (always written)


def start_train(
    project: Project | dict, run: str, identity: str, tags: dict, flat_params: dict, name: str | None = None
) -> None:
    """Begin (or, for the same identity, continue) the training record of `run` (MLflow run name `name`, default
    the key)."""
    path = record_dir(project, run) / "train.jsonl"
    header = next(iter(io.read_jsonl_tolerant(path)), None)
    if header and header.get("type") == "run" and header.get("identity") == identity:
        return
    io.write_text(
        path,
        _line(
            {
                "type": "run",
                "identity": identity,
                "run_name": name or run,
                "tags": tags,
                "params": flat_params,
                "experiment": tracking.experiment_name(project),
            }
        )
        + "\n",
    )
    (record_dir(project, run) / "eval.jsonl").unlink(missing_ok=True)


def append(project: Project | dict, run: str, rows: list[dict], name: str = "train.jsonl") -> None:
    if rows:
        io.append_lines(record_dir(project, run) / name, [_line(r) for r in rows])


def metric_rows(values: dict, step: int, prefix: str = "train/") -> list[dict]:
    ts = int(time.time() * 1000)
    return [
        {"type": "metric", "key": f"{prefix}{k}", "value": float(v), "step": int(step), "timestamp": ts}
        for k, v in values.items()
    ]


def write_eval(project: Project | dict, run: str, rows: list[dict]) -> None:
    """The evaluation record of `run` (replaced as a whole: evaluate recomputes every row from its cache)."""
    io.write_text(record_dir(project, run) / "eval.jsonl", "".join(_line(r) + "\n" for r in rows))


def mlflow_run_id(project: Project | dict, run: str) -> str | None:
    try:
        return json.loads((record_dir(project, run) / MLFLOW_JSON).read_text()).get("run_id")
    except (OSError, json.JSONDecodeError):
        return None


# ---------------------------------------------------------------- mirroring


def down_reason(uri: str) -> str | None:
    """The error that made `uri` unreachable in this process, if it was."""
    return _DOWN.get(uri)


def _warn(uri: str, err: BaseException, run: str | None) -> None:
    where = f"runs/{run}/{TRACK_DIR}" if run else "runs/*/tracking"
    detail = str(err).splitlines()[0][:160] if str(err) else ""
    print(
        mask_secrets(
            f"warning: MLflow at {uri} unreachable ({type(err).__name__}: {detail}); "
            f"local records kept in {where}, replayed by the next stage or `oodcorr sync`"
        ),
        file=sys.stderr,
        flush=True,
    )


def _mark_pending(project: Project | dict, run: str) -> None:
    d = record_dir(project, run)
    d.mkdir(parents=True, exist_ok=True)
    (d / PENDING).touch()


def _uri(project: Project | dict) -> str:
    """The store's URI; with study.tracking: none nothing is resolved (no mlruns/ is created)."""
    return tracking.tracking_uri(project) if tracking.enabled(project) else "none"


class Mirror:
    """Idempotent replay of one run's local records into MLflow; push() again sends only what is new."""

    def __init__(self, project: Project | dict, run: str):
        self.project, self.run = Project.of(project), run
        self.uri = _uri(self.project)
        self.client = self.run_id = None
        self.sent: set[tuple[str, int]] = set()
        self.params_done = self.finished_done = False
        self.artifacts_done: set[str] = set()
        self.history_keys: set[str] = set()

    def push(self, quiet_failure: bool = False) -> str | None:
        """Mirror the records now; on failure one warning, the run is marked pending, None is returned.
        With study.tracking: none nothing is sent (the local records stay; `oodcorr sync` can send them later)."""
        if not tracking.enabled(self.project):
            return None
        if self.uri in _DOWN:
            _mark_pending(self.project, self.run)
            return None
        from oodcorr.core.errors import UserError

        try:
            self._push()
        except UserError:  # a locked or damaged local store: the user must act (tracking.store_state)
            raise
        except Exception as e:  # any store/network failure: the local records stay the truth
            _DOWN[self.uri] = repr(e)
            _mark_pending(self.project, self.run)
            if not quiet_failure:
                _warn(self.uri, e, self.run)
            return None
        (record_dir(self.project, self.run) / PENDING).unlink(missing_ok=True)
        return self.run_id

    def _push(self) -> None:
        from mlflow.entities import Metric, Param

        d = record_dir(self.project, self.run)
        train = io.read_jsonl_tolerant(d / "train.jsonl")
        evals = io.read_jsonl_tolerant(d / "eval.jsonl")
        if not train and not evals:
            return
        header = (
            train[0]
            if train and train[0].get("type") == "run"
            else {"identity": None, "run_name": self.run, "tags": {}, "params": {}}
        )
        if header.get("identity") != getattr(self, "identity", False):  # a fresh start of the run: new MLflow run
            self.client = self.run_id = None
            self.sent, self.params_done, self.finished_done = set(), False, False
            self.artifacts_done, self.history_keys = set(), set()
            self.identity = header.get("identity")
        if self.client is None:
            import mlflow

            exp_id = tracking.setup(self.project, header.get("experiment"))  # the study it was recorded in
            self.client = mlflow.MlflowClient()
            self.run_id = self._find_or_create(exp_id, header)
            io.write_json(d / MLFLOW_JSON, {"run_id": self.run_id, "tracking_uri": mask_secrets(self.uri)})
        client, rid = self.client, self.run_id
        if not self.params_done:
            have = client.get_run(rid).data.params
            todo = [Param(k, str(v)) for k, v in header.get("params", {}).items() if k not in have]
            for i in range(0, len(todo), 100):
                client.log_batch(rid, params=todo[i : i + 100])
            self.params_done = True
        metrics, status, artifacts, end_time = [], None, [], None
        for rec in train + evals:
            kind = rec.get("type")
            if kind == "metric":
                key, step = rec["key"], int(rec["step"])
                if key not in self.history_keys:
                    self.history_keys.add(key)
                    self.sent |= {(key, m.step) for m in client.get_metric_history(rid, key)}
                value = rec["value"]
                if (key, step) in self.sent or value != value:  # already there / NaN (empty slice)
                    continue
                self.sent.add((key, step))
                metrics.append(Metric(key, float(value), int(rec.get("timestamp") or time.time() * 1000), step))
            elif kind == "status":
                status, end_time = rec["status"], rec.get("end_time")
            elif kind == "artifact":
                artifacts.append(rec)
        for i in range(0, len(metrics), 1000):  # MLflow's per-batch limit
            client.log_batch(rid, metrics=metrics[i : i + 1000])
        for rec in artifacts:
            self._artifact(rec)
        if status and not self.finished_done:
            if client.get_run(rid).info.status != status:
                client.set_terminated(rid, status, end_time=end_time)
            self.finished_done = True

    def _find_or_create(self, exp_id: str, header: dict) -> str:
        """The run of this run key + identity (never a second one); orphans of it are closed, runs of an
        older identity (superseded config) re-tagged and closed."""
        client, run = self.client, self.run
        found = client.search_runs(
            [exp_id],
            filter_string=f"tags.`oodcorr.run_key` = '{run}'",
            max_results=200,
            order_by=["attributes.start_time ASC"],
        )
        identity = header.get("identity")
        mine = [
            r
            for r in found
            if r.data.tags.get(tracking.KIND_TAG) == tracking.TRAIN_KIND
            and (identity is None or r.data.tags.get("oodcorr.identity") in (identity, None))
        ]
        if identity:  # prefer an exact identity match over an untagged (older version) run
            exact = [r for r in mine if r.data.tags.get("oodcorr.identity") == identity]
            mine = exact or mine
        exp = header.get("tags", {}).get(EXP_TAG)
        for r in found:  # another DVC experiment's run of this key is a run to compare with, not superseded
            tags = r.data.tags
            if tags.get(tracking.KIND_TAG) == tracking.TRAIN_KIND and r not in mine and tags.get(EXP_TAG) == exp:
                client.set_tag(r.info.run_id, tracking.KIND_TAG, f"{tracking.TRAIN_KIND}-superseded")
                if r.info.status == "RUNNING":
                    client.set_terminated(r.info.run_id, "KILLED")
        if mine:
            keep = mine[0]
            for r in mine[1:]:  # duplicates from an older version's kill between create_run and run.json
                client.set_tag(r.info.run_id, tracking.KIND_TAG, f"{tracking.TRAIN_KIND}-duplicate")
                if r.info.status == "RUNNING":
                    client.set_terminated(r.info.run_id, "KILLED")
            color = header.get("tags", {}).get(COLOR_TAG)
            if color and keep.data.tags.get(COLOR_TAG) != color:  # a run logged before runs had colours
                client.set_tag(keep.info.run_id, COLOR_TAG, color)
            return keep.info.run_id
        tags = {**header.get("tags", {}), "oodcorr.run_key": run, tracking.KIND_TAG: tracking.TRAIN_KIND}
        if identity:
            tags["oodcorr.identity"] = identity
        name = header.get("run_name") or run
        return client.create_run(exp_id, run_name=name, tags=tags, start_time=header.get("start_time")).info.run_id

    def _artifact(self, rec: dict) -> None:
        import tarfile
        import tempfile

        key = f"{rec.get('artifact_path') or ''}/{rec.get('archive') or Path(rec['path']).name}"
        if key in self.artifacts_done:
            return
        rdir = record_dir(self.project, self.run).parent
        src = rdir / rec["path"]
        if not src.exists():
            return
        digest = rec.get("sha256")
        listed = {a.path for a in self.client.list_artifacts(self.run_id, rec.get("artifact_path"))}
        name = key.lstrip("/")
        if name in listed and not digest:
            self.artifacts_done.add(key)
            return
        tag = f"oodcorr.artifact.{name}"
        if name in listed and self.client.get_run(self.run_id).data.tags.get(tag) == digest:
            self.artifacts_done.add(key)
            return
        if rec.get("archive"):
            with tempfile.TemporaryDirectory() as tmp:  # one compressed file, not one per checkpoint x testset
                archive = Path(tmp) / rec["archive"]
                with tarfile.open(archive, "w:gz") as tar:
                    tar.add(src, arcname=src.name)
                self.client.log_artifact(self.run_id, str(archive), rec.get("artifact_path"))
        else:
            self.client.log_artifact(self.run_id, str(src), rec.get("artifact_path"))
        if digest:
            self.client.set_tag(self.run_id, tag, digest)
        self.artifacts_done.add(key)


_MIRRORS: dict[tuple[str, str], Mirror] = {}


def mirror(project: Project | dict, run: str) -> Mirror:
    key = (str(record_dir(project, run)), _uri(project))
    if key not in _MIRRORS:
        _MIRRORS[key] = Mirror(project, run)
    return _MIRRORS[key]


def push(project: Project | dict, run: str) -> str | None:
    return mirror(project, run).push()


def pending_runs(project: Project | dict) -> list[str]:
    root = rundir.runs_root(project)
    return sorted(p.parent.parent.name for p in root.glob(f"*/{TRACK_DIR}/{PENDING}")) if root.is_dir() else []


def sync_pending(project: Project | dict, quiet: bool = False) -> list[str]:
    """Replay runs marked pending (an earlier stage could not reach the store); called at stage start.
    A store that is still down costs one warning for the whole process (later pushes are skipped)."""
    project, done = Project.of(project), []
    for run in pending_runs(project):
        if mirror(project, run).push(quiet_failure=quiet):
            done.append(run)
        elif _uri(project) in _DOWN:
            break
    return done


def sync(project: Project | dict, runs: list[str] | None = None) -> dict[str, str | None]:
    from oodcorr.tracking.writable import refuse_dvc_tracked

    root = rundir.runs_root(project)
    keys = runs or sorted(p.parent.name for p in root.glob(f"*/{TRACK_DIR}") if p.is_dir())
    for run in keys:  # mirroring writes mlflow.json and PENDING beside the records
        refuse_dvc_tracked(rundir.run_dir(project, run))
    return {run: mirror(project, run).push() for run in keys}
