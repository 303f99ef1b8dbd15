"""Launch records (<folder>/<stamp>/launch.json): where they live, reading them, each run's state, and
marking runs superseded; the one-line outcome of a collect."""

from __future__ import annotations

import json
from pathlib import Path

from oodcorr.config import LAUNCH_DEFAULTS
from oodcorr.errors import UserError
from oodcorr.io import write_json
from oodcorr.launch.executors import executor

ACTIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "PREEMPTED",
          "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD"}



def launch_folder(root: Path, cfg: dict) -> Path:
    folder = Path(cfg.get("folder") or LAUNCH_DEFAULTS["folder"])
    return folder if folder.is_absolute() else root / folder


def records(root: Path, cfg: dict) -> list[Path]:
    """Every launch record under the launch folder, oldest first."""
    base = launch_folder(root, cfg)
    return sorted(base.glob("*/launch.json")) if base.is_dir() else []


def latest_record(root: Path, cfg: dict) -> Path:
    found = records(root, cfg)
    if not found:
        raise UserError(f"no launch recorded under {launch_folder(root, cfg)} (run `oodcorr study launch` first)")
    return found[-1]


def read_record(path: Path) -> dict:
    return json.loads(path.read_text())


def _pickle_outcome(path: Path):
    """("success", result) | ("error", message) | None from a submitit result pickle."""
    if not path.exists():
        return None
    try:
        from submitit.core.utils import pickle_load

        outcome, value = pickle_load(path)
    except Exception as e:  # noqa: BLE001 - a truncated pickle while the job is writing it
        return ("error", f"unreadable result {path.name}: {e}")
    if outcome == "success":
        return ("success", value)
    lines = [line for line in str(value).splitlines() if line.strip()]
    return ("error", lines[-1].strip() if lines else "failed")


def run_states(record: dict, queue: dict | None = None) -> dict[str, dict]:
    """{run key: {"state", "detail"}} where state is COMMITTED, STALE (not committed: deps changed since
    launch), SUPERSEDED (relaunched), DONE (finished, not collected), FAILED, LOST (ended without a result),
    or the scheduler's state (PENDING, RUNNING, ...). A job still in the queue is judged by the queue, not by
    a result file: a requeued (preempted) job leaves its interrupted attempt's result behind."""
    out = {}
    ex = executor(record["executor"])
    if queue is None:
        queue = ex.queue()
    for key, run in record["runs"].items():
        if run.get("state") in ("committed", "stale", "superseded"):
            out[key] = {"state": run["state"].upper(), "detail": run.get("detail", "")}
            continue
        if "job_id" not in run:
            out[key] = {"state": "LOST", "detail": "never submitted (the launch was interrupted)"}
            continue
        if queue is None:
            out[key] = {"state": "UNKNOWN", "detail": "squeue failed"}
            continue
        state = ex.state(run, queue)
        if state is not None:
            out[key] = {"state": state, "detail": ""}
            continue
        outcome = _pickle_outcome(Path(run["result"]))
        if outcome is None:
            out[key] = {"state": "LOST", "detail": "the job ended without a result (cancelled, killed, timed "
                        "out or its node failed); relaunch to resume it"}
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
        if any(run.get("state") not in ("committed", "stale", "superseded") for run in record["runs"].values()):
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
    text = "; ".join(parts)
    if outcome["failed"] or outcome["stale"]:
        text += "; `oodcorr study launch` again resumes them"
    elif outcome["committed"] and not outcome["active"]:
        text += "; `dvc repro` now runs only what is left (the analysis)"
    return text
