"""Plan, submit, watch and collect the study's runs as jobs.

plan:    `dvc status` -> the runs whose train@K / evaluate@K stages are out of date (prepare is run here first).
submit:  one job per run (its out-of-date stages, in order) through an executor (executors.EXECUTORS: a SLURM
         job array, or processes on this machine), recorded in <folder>/<stamp>/launch.json (records.py).
status:  the JSON result each job writes when it ends (never a pickle), else the executor's queue
         (records.run_states).
collect: `dvc commit -f` of the finished runs' stages, once their dependencies are checked unchanged since
         launch; failed runs are reported with their run key and log path and stay out of date.
"""

from __future__ import annotations

import datetime as _dt
import time
from pathlib import Path

from oodcorr.core.errors import UserError
from oodcorr.core.io import write_json, write_text
from oodcorr.launch.common import echo
from oodcorr.launch.dvc_plumbing import changed_deps, dvc, dvc_status, stage_gitignores, stage_specs, stale_runs
from oodcorr.launch.executors import EXECUTORS, executor
from oodcorr.launch.records import ACTIVE, launch_folder, private_folder, read_record, run_states, summary
from oodcorr.settings.config import LAUNCH_DEFAULTS

__all__ = ["settings", "parse_time", "plan", "submit", "wait", "collect", "stale_runs", "run_states"]


# ---------------------------------------------------------------------------------------------- settings


def settings(params: dict, **overrides) -> dict:
    """DEFAULTS <- params `study.launch` <- command-line options (those given)."""
    out = dict(LAUNCH_DEFAULTS)
    out.update({k: v for k, v in ((params.get("study") or {}).get("launch") or {}).items()})
    out.update({k: v for k, v in overrides.items() if v is not None})
    if out["executor"] not in EXECUTORS:
        raise UserError(f"params: study.launch.executor: expected {' or '.join(EXECUTORS)}, got {out['executor']!r}")
    out["time_min"] = parse_time(out["time"])
    for key in ("max_parallel", "cpus_per_run", "max_requeue"):
        if out.get(key) is not None and out[key] < (0 if key == "max_requeue" else 1):
            raise UserError(f"study.launch.{key}: expected a positive number, got {out[key]}")
    if out.get("gpus_per_run") is not None and out["gpus_per_run"] < 0:
        raise UserError(f"study.launch.gpus_per_run: expected 0 or more, got {out['gpus_per_run']}")
    return out


def parse_time(value) -> int:
    """Minutes (rounded up) from sbatch's --time formats: minutes, minutes:seconds, hours:minutes:seconds,
    days-hours, days-hours:minutes, days-hours:minutes:seconds (an int is minutes)."""
    if isinstance(value, int) and not isinstance(value, bool):
        minutes = value
    else:
        text = str(value).strip()
        try:
            days, sep, rest = text.partition("-") if "-" in text else ("0", "", text)
            parts = [int(p) for p in rest.split(":")]
            if len(parts) > 3 or any(p < 0 for p in parts):
                raise ValueError
            if sep:  # days-hours[:minutes[:seconds]]
                h, m, s = (parts + [0, 0])[:3]
            else:  # minutes | minutes:seconds | hours:minutes:seconds
                h, m, s = {1: (0, parts[0], 0), 2: (0, *parts), 3: tuple(parts)}[len(parts)]
            minutes = int(days) * 1440 + h * 60 + m + (1 if s else 0)
        except (ValueError, KeyError, TypeError):
            raise UserError(f"study.launch.time: expected minutes or sbatch's [D-]HH:MM:SS, got {value!r}") from None
    if minutes < 1:
        raise UserError(f"study.launch.time: expected at least 1 minute, got {value!r}")
    return minutes


# -------------------------------------------------------------------------------------------------- plan


def plan(params: dict, cfg: dict, only: list[str] | None, prepare: bool = True) -> tuple[dict, dict]:
    """(stale runs {key: [stages]}, dvc status) after running `check` (params.yaml vetted) and `prepare` here if
    they are out of date."""
    root = Path(params["_root"])
    runs = params.get("runs") or {}
    if only:
        unknown = [k for k in only if k not in runs]
        if unknown:
            from oodcorr.core.errors import closest

            raise UserError(f"unknown run {unknown[0]!r}{closest(unknown[0], runs)}")
    if not (root / "dvc.yaml").exists():
        raise UserError(f"{root}: no dvc.yaml (run `oodcorr study launch` in the project folder)")
    status = dvc_status(root)
    if "check" in status:  # params.yaml changed: dvc.yaml's check stage vets it before any job is planned
        dvc(["repro", "check"], root, capture=True)
        status = dvc_status(root)
    if "prepare" in status:
        if not prepare:
            echo("prepare is out of date: `dvc repro prepare` would run here first", err=True)
            return stale_runs(status, runs) if not only else {
                k: v for k, v in stale_runs(status, runs).items() if k in only
            }, status
        echo("prepare is out of date: running `dvc repro prepare` here first", err=True)
        dvc(["repro", "prepare"], root, capture=False)
        status = dvc_status(root)
    stale = stale_runs(status, runs)
    if only:
        stale = {k: v for k, v in stale.items() if k in only}
    return stale, status


# ------------------------------------------------------------------------------------------------ submit


def submit(params: dict, cfg: dict, stale: dict[str, list[str]]) -> Path:
    """Submit one job per run; returns the launch record's path. The local executor starts (and throttles)
    the processes and returns when they have all ended."""
    root = Path(params["_root"])
    names = [name for stages in stale.values() for name in stages]
    specs = stage_specs(root, names, prepare_outputs=True)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    private_folder(launch_folder(root, cfg), create=True)
    folder = private_folder(launch_folder(root, cfg) / stamp, create=True)
    ignore = launch_folder(root, cfg) / ".gitignore"
    if not ignore.exists():
        write_text(ignore, "# job pickles and logs of `oodcorr study launch`\n*\n")
    base_env = {"OODCORR_LAUNCH": stamp}
    jobs_spec = [
        {
            "key": key,
            "root": str(root),
            "env": dict(base_env),
            "result": str(folder / f"{key}.result.json"),
            "stages": [{"name": n, "cmd": specs[n]["cmd"]} for n in stages],
        }
        for key, stages in stale.items()
    ]
    record = {
        "created": _dt.datetime.now().isoformat(timespec="seconds"),
        "executor": cfg["executor"],
        "root": str(root),
        "folder": str(folder),
        "settings": {k: v for k, v in cfg.items() if k != "folder"},
        "runs": {},
    }
    for spec in jobs_spec:
        record["runs"][spec["key"]] = {
            "stages": [s["name"] for s in spec["stages"]],
            "result": spec["result"],
            "outs": [o for s in spec["stages"] for o in specs[s["name"]]["outs"]],
            "fingerprint": {s["name"]: specs[s["name"]]["fingerprint"] for s in spec["stages"]},
        }
    path = folder / "launch.json"

    def publish():
        write_json(path, record)
        write_text(launch_folder(root, cfg) / "latest", stamp + "\n")

    executor(cfg["executor"]).submit(path, record, jobs_spec, cfg, publish)
    return path


# ------------------------------------------------------------------------------------------------- watch


def wait(path: Path, poll_s: float = 5.0) -> None:
    """Block until no run of the launch is queued or running; print each state change."""
    seen: dict[str, str] = {}
    unknown_since = None
    while True:
        record = read_record(path)
        states = run_states(record)
        if any(st["state"] == "UNKNOWN" for st in states.values()):
            unknown_since = unknown_since or time.time()
            if time.time() - unknown_since > 600:
                raise UserError(
                    "squeue has not answered for 10 minutes; the jobs may still be running: "
                    "`oodcorr study status` / `oodcorr study collect` later"
                )
        else:
            unknown_since = None
        for key, st in states.items():
            if seen.get(key) != st["state"]:
                seen[key] = st["state"]
                echo(f"{key}: {st['state']}", err=True)
        if not any(st["state"] in ACTIVE or st["state"] == "UNKNOWN" for st in states.values()):
            return
        time.sleep(poll_s)


# ----------------------------------------------------------------------------------------------- collect


def collect(params: dict, cfg: dict, paths: list[Path], quiet: bool = False) -> dict[str, list[str]]:
    """Commit the finished runs of these launches (`dvc commit -f` of their stages) after checking that
    their dependencies did not change since launch. Failed or lost runs since removed from params.yaml runs are
    marked dropped and not reported again. Returns {"committed", "failed", "active", "stale", "dropped"}."""
    root = Path(params["_root"])
    outcome: dict[str, list[str]] = {"committed": [], "failed": [], "active": [], "stale": [], "dropped": []}
    current = params.get("runs") or {}
    todo: list[tuple[Path, dict, str]] = []
    for path in paths:
        record = read_record(path)
        states = run_states(record)
        for key, st in states.items():
            run = record["runs"][key]
            if st["state"] == "DONE":
                todo.append((path, record, key))
            elif st["state"] in ("FAILED", "LOST") and key not in current:  # the study no longer wants it
                run["state"], run["detail"] = "dropped", f"{st['detail']}; no longer in params.yaml runs"
                outcome["dropped"].append(key)
                write_json(path, record)
            elif st["state"] in ("FAILED", "LOST"):
                outcome["failed"].append(key)
                if not quiet:
                    echo(f"FAILED {key} (job {run.get('job_id')}): {st['detail']}; log: {run.get('stderr')}", err=True)
            elif st["state"] in ACTIVE or st["state"] == "UNKNOWN":
                outcome["active"].append(key)
    commit: list[tuple[Path, dict, str]] = []
    for path, record, key in todo:
        run = record["runs"][key]
        if key not in current:
            reason = "no longer in params.yaml runs"
        else:
            changed = changed_deps(root, run["stages"], run["fingerprint"])
            reason = f"changed since launch: {', '.join(changed)}" if changed else ""
        if reason:
            run["state"], run["detail"] = "stale", reason
            outcome["stale"].append(key)
            echo(f"not committed {key}: {reason}; relaunch it", err=True)
            write_json(path, record)
        else:
            commit.append((path, record, key))
    if commit:
        stages = [s for _, record, key in commit for s in record["runs"][key]["stages"]]
        dvc(["commit", "-f", "-q", *stages], root)
        for path, record, key in commit:
            record["runs"][key]["state"] = "committed"
            write_json(path, record)
            outcome["committed"].append(key)
        stage_gitignores(root, [o for _, record, key in commit for o in record["runs"][key].get("outs", [])])
    if not quiet:
        echo(summary(outcome))
    return outcome
