"""Plan, submit, watch and collect the study's runs as jobs.

plan:    `dvc status` -> the runs whose train@K / evaluate@K stages are out of date (prepare is run here first).
submit:  one job per run (its out-of-date stages, in order) through submitit: a SLURM job array, or processes on
         this machine (`local`), recorded in <folder>/<stamp>/launch.json.
status:  result pickles (written by submitit when a job ends), else `squeue` (SLURM) / the process (local).
collect: `dvc commit -f` of the finished runs' stages, once their dependencies are checked unchanged since
         launch; failed runs are reported with their run key and log path and stay out of date.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from oodcorr.errors import UserError
from oodcorr.io import write_json, write_text
from oodcorr.launch.schema import DEFAULTS

STAGE_KINDS = ("train", "evaluate")
ACTIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "PREEMPTED",
          "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD"}


def echo(msg: str = "", err: bool = False) -> None:
    print(msg, file=sys.stderr if err else sys.stdout, flush=True)


# ---------------------------------------------------------------------------------------------- settings

def settings(params: dict, **overrides) -> dict:
    """DEFAULTS <- params `study.launch` <- command-line options (those given)."""
    out = dict(DEFAULTS)
    out.update({k: v for k, v in ((params.get("study") or {}).get("launch") or {}).items()})
    out.update({k: v for k, v in overrides.items() if v is not None})
    if out["executor"] not in ("local", "slurm"):
        raise UserError(f"params: study.launch.executor: expected local or slurm, got {out['executor']!r}")
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


# ------------------------------------------------------------------------------------------------- DVC

def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("DVC_NO_ANALYTICS", "1")
    return env


def dvc(args: list[str], root: Path, capture: bool = True) -> subprocess.CompletedProcess:
    exe = shutil.which("dvc", path=_env()["PATH"])
    if exe is None:
        raise UserError("dvc not found next to this Python or on PATH (activate the project's environment)")
    res = subprocess.run([exe, *args], cwd=root, env=_env(), text=True,
                         capture_output=capture)
    if res.returncode != 0:
        lines = [line.strip() for line in ((res.stderr or "") + (res.stdout or "")).splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("ERROR")] or lines[:1]
        raise UserError(f"`dvc {' '.join(args)}` failed: {errors[0] if errors else f'exit {res.returncode}'}")
    return res


def dvc_status(root: Path) -> dict:
    out = dvc(["status", "--json"], root).stdout.strip()
    return json.loads(out) if out else {}


def stale_runs(status: dict, runs: dict) -> dict[str, list[str]]:
    """{run key: [stage names to run, in order]} for runs whose train or evaluate stage is out of date
    (a stale train stage means its evaluation reruns too, as `dvc repro` would)."""
    out = {}
    for key in runs:
        train, evaluate = f"train@{key}", f"evaluate@{key}"
        if train in status:
            out[key] = [train, evaluate]
        elif evaluate in status:
            out[key] = [evaluate]
    return out


def _hash_path(path: Path) -> str:
    h = hashlib.sha256()
    if path.is_dir():
        for f in sorted(p for p in path.rglob("*") if p.is_file()):
            h.update(str(f.relative_to(path)).encode() + b"\0")
            h.update(hashlib.sha256(f.read_bytes()).digest())
    elif path.is_file():
        h.update(path.read_bytes())
    else:
        return "missing"
    return h.hexdigest()


def _lookup(tree, dotted: str):
    for part in dotted.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return None
        tree = tree[part]
    return tree


def stage_specs(root: Path, names: list[str], prepare_outputs: bool) -> dict[str, dict]:
    """For each stage: its command (from dvc.yaml), and a fingerprint of its dependencies that the launched
    stages do not produce themselves (code, data, params values), checked again before `dvc commit`.
    With prepare_outputs, the stage's outputs are readied as `dvc repro` does before running it
    (non-persistent outputs removed, persistent ones unprotected)."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    from oodcorr.config import read_yaml

    specs = {}
    with Repo(str(root)) as repo, (repo.lock if prepare_outputs else contextlib.nullcontext()):
        try:
            dvc_yaml = str(root / "dvc.yaml")  # not relative to the current folder
            stages = {name: repo.stage.collect(f"{dvc_yaml}:{name}")[0] for name in names}
        except DvcException as e:
            raise UserError(f"dvc.yaml: {e}") from None
        produced = {o.def_path for s in stages.values() for o in s.outs}
        for name, stage in stages.items():
            fingerprint = {}
            for dep in stage.deps:
                if getattr(dep, "params", None) is not None:
                    tree = read_yaml((root / dep.def_path).read_text()) or {}
                    keys = dep.params if isinstance(dep.params, list) else list(dep.params)
                    value = {k: _lookup(tree, k) for k in keys}
                    fingerprint[f"params:{dep.def_path}"] = hashlib.sha256(
                        json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()
                elif dep.def_path not in produced:
                    fingerprint[dep.def_path] = _hash_path(root / dep.def_path)
            if prepare_outputs:
                stage.remove_outs(ignore_remove=False, force=False)
            specs[name] = {"cmd": stage.cmd, "fingerprint": fingerprint, "outs": [o.def_path for o in stage.outs]}
    return specs


def changed_deps(root: Path, names: list[str], recorded: dict[str, dict]) -> list[str]:
    """Dependencies whose fingerprint differs from the one recorded at launch."""
    now = stage_specs(root, names, prepare_outputs=False)
    changed = []
    for name in names:
        old, new = recorded.get(name) or {}, now[name]["fingerprint"]
        changed += [f"{dep}" for dep in sorted(set(old) | set(new)) if old.get(dep) != new.get(dep)]
    return sorted(set(changed))


# ----------------------------------------------------------------------------------------------- SLURM

def check_slurm(partition: str | None) -> None:
    """One line saying why no SLURM cluster is reachable, as a UserError."""
    hint = "(run on the cluster's login node, set SLURM_CONF, or use --executor local)"
    for tool in ("sbatch", "squeue", "sinfo"):
        if shutil.which(tool) is None:
            raise UserError(f"no SLURM cluster reachable: `{tool}` not found on PATH {hint}")
    conf = os.environ.get("SLURM_CONF")
    if conf and not Path(conf).is_file():
        raise UserError(f"no SLURM cluster reachable: SLURM_CONF={conf} does not exist {hint}")
    try:
        res = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        raise UserError(f"no SLURM cluster reachable: `sinfo` did not answer within 30 s {hint}") from None
    if res.returncode != 0:
        last = [line.removeprefix("sinfo: ") for line in res.stderr.splitlines() if line.strip()]
        raise UserError(f"no SLURM cluster reachable: sinfo: {last[-1] if last else f'exit {res.returncode}'} {hint}")
    partitions = sorted({p.rstrip("*") for p in res.stdout.split()})
    if partition and partition not in partitions:
        from oodcorr.errors import closest

        raise UserError(f"SLURM partition {partition!r} not found{closest(partition, partitions)}; "
                        f"partitions: {', '.join(partitions) or 'none'}")


def squeue_states() -> dict[str, str] | None:
    """{job id (array tasks as A_i): state} of this user's queued/running jobs; None if squeue fails."""
    try:
        res = subprocess.run(["squeue", "--me", "-h", "-r", "-o", "%i|%T"], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if res.returncode != 0:
        return None
    out = {}
    for line in res.stdout.splitlines():
        if "|" in line:
            job, state = line.strip().split("|", 1)
            out[job] = state
    return out


# ---------------------------------------------------------------------------------------------- records

def launch_folder(root: Path, cfg: dict) -> Path:
    folder = Path(cfg.get("folder") or DEFAULTS["folder"])
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


def _pid_alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
        return True
    except (OSError, ValueError):
        return False


def run_states(record: dict, queue: dict | None = None) -> dict[str, dict]:
    """{run key: {"state", "detail"}} where state is COMMITTED, STALE (not committed: deps changed since
    launch), SUPERSEDED (relaunched), DONE (finished, not collected), FAILED, LOST (ended without a result),
    or the scheduler's state (PENDING, RUNNING, ...). A job still in the queue is judged by the queue, not by
    a result file: a requeued (preempted) job leaves its interrupted attempt's result behind."""
    out = {}
    slurm = record["executor"] == "slurm"
    if slurm and queue is None:
        queue = squeue_states()
    for key, run in record["runs"].items():
        if run.get("state") in ("committed", "stale", "superseded"):
            out[key] = {"state": run["state"].upper(), "detail": run.get("detail", "")}
            continue
        if "job_id" not in run:
            out[key] = {"state": "LOST", "detail": "never submitted (the launch was interrupted)"}
            continue
        if slurm:
            if queue is None:
                out[key] = {"state": "UNKNOWN", "detail": "squeue failed"}
                continue
            state = queue.get(run["job_id"])
        else:  # local: no scheduler requeues it, and its pid may be reused once it has ended
            done = Path(run["result"]).exists()
            state = "RUNNING" if not done and _pid_alive(run["job_id"]) else None
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


# -------------------------------------------------------------------------------------------------- plan

def plan(params: dict, cfg: dict, only: list[str] | None, prepare: bool = True) -> tuple[dict, dict]:
    """(stale runs {key: [stages]}, dvc status) after running `prepare` here if it is out of date."""
    root = Path(params["_root"])
    runs = params.get("runs") or {}
    if only:
        unknown = [k for k in only if k not in runs]
        if unknown:
            from oodcorr.errors import closest

            raise UserError(f"unknown run {unknown[0]!r}{closest(unknown[0], runs)}")
    if not (root / "dvc.yaml").exists():
        raise UserError(f"{root}: no dvc.yaml (run `oodcorr study launch` in the project folder)")
    status = dvc_status(root)
    if "prepare" in status:
        if not prepare:
            echo("prepare is out of date: `dvc repro prepare` would run here first", err=True)
            return stale_runs(status, runs) if not only else \
                {k: v for k, v in stale_runs(status, runs).items() if k in only}, status
        echo("prepare is out of date: running `dvc repro prepare` here first", err=True)
        dvc(["repro", "prepare"], root, capture=False)
        status = dvc_status(root)
    stale = stale_runs(status, runs)
    if only:
        stale = {k: v for k, v in stale.items() if k in only}
    return stale, status


# ------------------------------------------------------------------------------------------------ submit

def _visible_gpus() -> list[int]:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [int(x) for x in env.split(",") if x.strip().isdigit()]
    try:
        res = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        return list(range(sum(1 for line in res.stdout.splitlines() if line.startswith("GPU "))))
    except (OSError, subprocess.SubprocessError):
        return []


def _slurm_executor(folder: Path, cfg: dict, n_jobs: int):
    import submitit

    ex = submitit.SlurmExecutor(folder=folder, max_num_timeout=int(cfg["max_requeue"]))
    gpus = cfg["gpus_per_run"] if cfg["gpus_per_run"] is not None else 1
    kw = {"time": cfg["time_min"], "job_name": "oodcorr", "nodes": 1, "ntasks_per_node": 1,
          "setup": list(cfg.get("setup") or [])}
    if gpus:
        kw["gpus_per_node"] = gpus
    for key, name in (("partition", "partition"), ("cpus_per_run", "cpus_per_task"), ("account", "account"),
                      ("qos", "qos"), ("constraint", "constraint")):
        if cfg.get(key) is not None:
            kw[name] = cfg[key]
    if cfg.get("mem_gb") is not None:
        kw["mem"] = f"{int(round(float(cfg['mem_gb']) * 1024))}M"
    if cfg.get("max_parallel"):
        kw["array_parallelism"] = min(int(cfg["max_parallel"]), max(n_jobs, 1))
    if cfg.get("sbatch"):
        kw["additional_parameters"] = {str(k).replace("-", "_"): v for k, v in cfg["sbatch"].items()}
    ex.update_parameters(**kw)
    return ex


def submit(params: dict, cfg: dict, stale: dict[str, list[str]]) -> Path:
    """Submit one job per run; returns the launch record's path. Local jobs are started (and throttled) by
    `_run_local`, which returns when they have all ended."""
    from oodcorr.launch.job import RunJob

    root = Path(params["_root"])
    names = [name for stages in stale.values() for name in stages]
    specs = stage_specs(root, names, prepare_outputs=True)
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    folder = launch_folder(root, cfg) / stamp
    folder.mkdir(parents=True, exist_ok=True)
    ignore = launch_folder(root, cfg) / ".gitignore"
    if not ignore.exists():
        write_text(ignore, "# job pickles and logs of `oodcorr study launch`\n*\n")
    base_env = {"OODCORR_LAUNCH": stamp}
    jobs_spec = [{"key": key, "root": str(root), "env": dict(base_env),
                  "stages": [{"name": n, "cmd": specs[n]["cmd"]} for n in stages]}
                 for key, stages in stale.items()]
    record = {"created": _dt.datetime.now().isoformat(timespec="seconds"), "executor": cfg["executor"],
              "root": str(root), "folder": str(folder),
              "settings": {k: v for k, v in cfg.items() if k != "folder"}, "runs": {}}
    for spec in jobs_spec:
        record["runs"][spec["key"]] = {"stages": [s["name"] for s in spec["stages"]],
                                       "outs": [o for s in spec["stages"] for o in specs[s["name"]]["outs"]],
                                       "fingerprint": {s["name"]: specs[s["name"]]["fingerprint"]
                                                       for s in spec["stages"]}}
    path = folder / "launch.json"
    if cfg["executor"] == "slurm":
        ex = _slurm_executor(folder, cfg, len(jobs_spec))
        try:
            jobs = ex.map_array(RunJob(), jobs_spec)
        except Exception as e:  # noqa: BLE001 - sbatch refused (partition, account, limits): one line
            lines = [line.strip() for line in str(e).splitlines() if line.strip()]
            errors = [line for line in lines if "error" in line.lower()] or lines[-1:]
            raise UserError(f"sbatch refused the job array: {errors[0] if errors else type(e).__name__} "
                            f"(settings: study.launch / command-line options)") from None
        for spec, job in zip(jobs_spec, jobs):
            record["runs"][spec["key"]].update(_job_fields(job))
        write_json(path, record)
        write_text(launch_folder(root, cfg) / "latest", stamp + "\n")
        first = jobs[0].job_id.split("_")[0] if jobs else "?"
        echo(f"submitted {len(jobs)} run(s) as SLURM job array {first} "
             f"({', '.join(stale)}); logs in {folder}")
    else:
        write_json(path, record)
        write_text(launch_folder(root, cfg) / "latest", stamp + "\n")
        _run_local(path, record, jobs_spec, cfg)
    return path


def _job_fields(job) -> dict:
    return {"job_id": str(job.job_id), "stdout": str(job.paths.stdout), "stderr": str(job.paths.stderr),
            "result": str(job.paths.result_pickle)}


def _run_local(path: Path, record: dict, jobs_spec: list[dict], cfg: dict) -> None:
    """Processes on this machine through submitit's LocalExecutor, at most max_parallel at once (default 1);
    with gpus_per_run, each process gets its own GPUs (CUDA_VISIBLE_DEVICES)."""
    import submitit

    from oodcorr.launch.job import RunJob

    gpus = cfg.get("gpus_per_run")
    parallel = int(cfg.get("max_parallel") or 1)
    slots: list[list[int] | None] = [None] * parallel
    if gpus:
        visible = _visible_gpus()
        if len(visible) < gpus:
            raise UserError(f"--gpus-per-run {gpus}: this machine shows {len(visible)} GPU(s)")
        parallel = min(parallel, len(visible) // gpus)
        slots = [visible[i * gpus:(i + 1) * gpus] for i in range(parallel)]
    ex = submitit.LocalExecutor(folder=Path(record["folder"]), max_num_timeout=int(cfg["max_requeue"]))
    ex.update_parameters(timeout_min=cfg["time_min"])
    original_cuda = os.environ.get("CUDA_VISIBLE_DEVICES")
    pending = list(jobs_spec)
    active: dict[int, tuple[str, object]] = {}
    try:
        while pending or active:
            for slot in range(parallel):
                if slot in active or not pending:
                    continue
                spec = pending.pop(0)
                if gpus is None:  # leave the GPUs as this process sees them
                    spec["env"]["CUDA_VISIBLE_DEVICES"] = original_cuda
                    ex.update_parameters(gpus_per_node=0, visible_gpus=())
                else:
                    ex.update_parameters(gpus_per_node=gpus, visible_gpus=tuple(slots[slot] or ()))
                job = ex.submit(RunJob(), spec)
                record["runs"][spec["key"]].update(_job_fields(job))
                write_json(path, record)
                active[slot] = (spec["key"], job)
                echo(f"started {spec['key']} (local process {job.job_id}); log {job.paths.stderr}", err=True)
            for slot, (key, job) in list(active.items()):
                if job.done():
                    del active[slot]
            time.sleep(0.5)
    except KeyboardInterrupt:
        for _, job in active.values():
            job.cancel(check=False)
        raise


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
                raise UserError("squeue has not answered for 10 minutes; the jobs may still be running: "
                                "`oodcorr study status` / `oodcorr study collect` later")
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
    their dependencies did not change since launch. Returns {"committed", "failed", "active", "stale"}."""
    root = Path(params["_root"])
    outcome: dict[str, list[str]] = {"committed": [], "failed": [], "active": [], "stale": []}
    todo: list[tuple[Path, dict, str]] = []
    for path in paths:
        record = read_record(path)
        states = run_states(record)
        for key, st in states.items():
            run = record["runs"][key]
            if st["state"] == "DONE":
                todo.append((path, record, key))
            elif st["state"] in ("FAILED", "LOST"):
                outcome["failed"].append(key)
                if not quiet:
                    echo(f"FAILED {key} (job {run.get('job_id')}): {st['detail']}; log: {run.get('stderr')}",
                         err=True)
            elif st["state"] in ACTIVE or st["state"] == "UNKNOWN":
                outcome["active"].append(key)
    current = params.get("runs") or {}
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
        _stage_gitignores(root, [o for _, record, key in commit for o in record["runs"][key].get("outs", [])])
    if not quiet:
        echo(summary(outcome))
    return outcome


def _stage_gitignores(root: Path, outs: list[str]) -> None:
    """The .gitignore files DVC writes next to the committed outputs: `git add` them when the project sets
    core.autostage (as `dvc repro` does), else say so."""
    files = sorted({str(Path(o).parent / ".gitignore") for o in outs if (root / Path(o).parent / ".gitignore").is_file()})
    if not (root / ".git").exists():
        return
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        autostage = bool(repo.config["core"].get("autostage", False))
    files = ["dvc.lock", *files]
    if autostage:
        subprocess.run(["git", "add", "--", *files], cwd=root, capture_output=True)
    else:
        echo("To track the changes with git, run:\n\n\tgit add " + " ".join(files), err=True)


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
