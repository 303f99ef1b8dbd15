"""Launch records (<folder>/<stamp>/launch.json): where they live, reading them, each run's state, and
marking runs superseded; the one-line outcome of a collect."""

from __future__ import annotations

import json
import os
from pathlib import Path

from oodcorr.core.errors import UserError
from oodcorr.core.io import write_json
from oodcorr.launch.executors import executor
from oodcorr.settings.config import LAUNCH_DEFAULTS
from oodcorr.settings.names import check_run_key

ACTIVE = {
    "PENDING",
    "RUNNING",
    "CONFIGURING",
    "COMPLETING",
    "REQUEUED",
    "RESIZING",
    "SUSPENDED",
    "PREEMPTED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "SIGNALING",
    "STAGE_OUT",
    "RESV_DEL_HOLD",
}


def launch_folder(root: Path, cfg: dict) -> Path:
    folder = Path(cfg.get("folder") or LAUNCH_DEFAULTS["folder"])
    return folder if folder.is_absolute() else root / folder


def private_folder(folder: Path, create: bool = False) -> Path:
    """The launch folder (or one launch's subfolder), created 0700; an existing one must belong to this user
    and be writable by no one else: its records decide what `oodcorr study collect` commits, and submitit's job
    pickles there are loaded by the jobs."""
    if create and not folder.exists():
        folder.mkdir(parents=True, mode=0o700, exist_ok=True)
        os.chmod(folder, 0o700)  # mkdir's mode is cut by the umask, never widened
    st = folder.stat()
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        who = (
            f"owned by uid {st.st_uid}"
            if st.st_uid != os.getuid()
            else f"writable by others (mode {st.st_mode & 0o777:o})"
        )
        raise UserError(
            f"{folder}: the launch folder is {who}; only you may write there (`chmod 700 {folder}`, or "
            "set study.launch.folder to a folder of your own)"
        )
    return folder


def records(root: Path, cfg: dict) -> list[Path]:
    """Every launch record under the launch folder, oldest first."""
    base = launch_folder(root, cfg)
    return sorted(private_folder(base).glob("*/launch.json")) if base.is_dir() else []


def latest_record(root: Path, cfg: dict) -> Path:
    found = records(root, cfg)
    if not found:
        raise UserError(f"no launch recorded under {launch_folder(root, cfg)} (run `oodcorr study launch` first)")
    return found[-1]


def read_record(path: Path) -> dict:
    """A launch record, checked: JSON, safe run keys, and only that run's train/evaluate stages."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        runs = record["runs"]
        record["executor"]
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as e:
        raise UserError(f"{path}: not a launch record ({type(e).__name__}: {e})") from None
    for key, run in runs.items():
        check_run_key(key, str(path))
        if any(stage not in (f"train@{key}", f"evaluate@{key}") for stage in run.get("stages") or ()):
            raise UserError(f"{path}: run {key} lists stages other than train@{key} / evaluate@{key}")
    return record


def _outcome(path: Path):
    """("success", result) | ("error", message) | None from the JSON result a job writes when it ends. A
    result pickle of an older version is never read (unpickling runs code): its run counts as lost."""
    if path.suffix != ".json":
        return ("error", f"{path.name}: a result pickle of an older version (not read); relaunch the run")
    if not path.exists():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return ("error", f"unreadable result {path.name}: {e}")
    if doc.get("outcome") == "success":
        return ("success", doc)
    return ("error", str(doc.get("message") or "failed"))


SETTLED = ("committed", "stale", "superseded", "dropped")  # record states collect never looks at again


def run_states(record: dict, queue: dict | None = None) -> dict[str, dict]:
    """{run key: {"state", "detail"}} where state is COMMITTED, STALE (not committed: deps changed since
    launch), SUPERSEDED (relaunched), DROPPED (failed or lost, and since removed from params.yaml runs), DONE
    (finished, not collected), FAILED, LOST (ended without a result), or the scheduler's state (PENDING, RUNNING,
    ...). A job still in the queue is judged by the queue, not by a result file: a requeued (preempted) job leaves
    its interrupted attempt's result behind."""
    out = {}
    ex = executor(record["executor"])
    if queue is None:
        queue = ex.queue()
    for key, run in record["runs"].items():
        if run.get("state") in SETTLED:
            out[key] = {"state": run["state"].upper(), "detail": run.get("detail", "")}
            continue
        if "job_id" not in run:
            waiting = ex.queued(record)
            out[key] = (
                {"state": "PENDING", "detail": waiting}
                if waiting
                else {"state": "LOST", "detail": "never submitted (the launch was interrupted)"}
            )
            continue
        if queue is None:
            out[key] = {"state": "UNKNOWN", "detail": "squeue failed"}
            continue
        state = ex.state(run, queue)
        if state is not None:
            out[key] = {"state": state, "detail": ""}
            continue
        outcome = _outcome(Path(run["result"]))
        if outcome is None:
            out[key] = {
                "state": "LOST",
                "detail": "the job ended without a result (cancelled, killed, timed "
                "out or its node failed); relaunch to resume it",
            }
        elif outcome[0] == "success":
            out[key] = {"state": "DONE", "detail": ""}
        else:
            out[key] = {"state": "FAILED", "detail": outcome[1]}
    return out


def open_records(root: Path, cfg: dict) -> list[Path]:
    """Launch records with runs not yet committed or superseded."""
    out = []
    for path in records(root, cfg):
        record = read_record(path)
        if any(run.get("state") not in SETTLED for run in record["runs"].values()):
            out.append(path)
    return out


def supersede(paths: list[Path], keys: set[str]) -> None:
    for path in paths:
        record = read_record(path)
        hit = [k for k in keys if k in record["runs"] and record["runs"][k].get("state") not in ("committed",)]
        for k in hit:
            record["runs"][k]["state"] = "superseded"
        if hit:
            write_json(path, record)


def summary(outcome: dict) -> str:
    parts = [f"{len(outcome['committed'])} run(s) committed to dvc.lock"]
    if outcome["failed"]:
        parts.append(f"{len(outcome['failed'])} failed ({', '.join(outcome['failed'])})")
    if outcome["stale"]:
        parts.append(f"{len(outcome['stale'])} not committed ({', '.join(outcome['stale'])})")
    if outcome["active"]:
        parts.append(f"{len(outcome['active'])} still queued or running")
    if outcome["dropped"]:
        parts.append(
            f"{len(outcome['dropped'])} failed earlier and no longer in params.yaml runs, left out "
            f"({', '.join(outcome['dropped'])})"
        )
    text = "; ".join(parts)
    if outcome["failed"] or outcome["stale"]:
        text += "; `oodcorr study launch` again resumes them"
    elif outcome["committed"] and not outcome["active"]:
        text += "; `dvc repro` now runs only what is left (the analysis)"
    return text
