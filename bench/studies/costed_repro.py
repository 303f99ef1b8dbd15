"""Run a study's DVC stages one run at a time and record what each cost in CPU-hours (cost.json).

  python bench/studies/costed_repro.py PROJECT [--pilot-cpu-hours H --pilot NAME] [--runs KEY,...]

In PROJECT (a clone with the study's params.yaml and data/items.json), `dvc repro prepare`, then per run (in the
params' order, or --runs) `dvc repro train@KEY` and `dvc repro evaluate@KEY`, each a child process whose CPU time
(user + system, from getrusage of the children) and wall time are added to PROJECT/cost.json after every stage, so
a run that finished is recorded even when a later one is cut short. A stage DVC finds up to date costs ~0 and is
recorded as such. Work done and then discarded (a stage redone after a code change, a scoring killed before
its pairs were cached) is kept under `superseded` and counted in the total; a stage stopped part-way (rc != 0: kill
the stage's own process, not this script, so its CPU time is recorded) is kept as a stopped attempt of its run and
counted too, while the rerun resumes from what it cached. The pilot's cost (measured when it ran) is stated on
the command line and kept beside the runs; `total_cpu_hours` sums the pilot and every stage recorded, and
`unrecorded` work at its stated estimate. Runs made in a parallel clone of the project (one per core, sharing
the DVC cache: `dvc cache dir --local ...`) are costed there and added with `--merge CLONE/cost.json`. Run it
under `nice -n 15` with OODCORR_THREADS=1 on a shared machine."""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

NEEDS_ARGS = "a study PROJECT and --pilot-cpu-hours"  # bench/run.py runs it only with --only


def cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def stage(project: Path, target: str, log) -> dict:
    c0, t0 = cpu_children(), time.time()
    proc = subprocess.run(["dvc", "repro", target], cwd=project, stdout=log, stderr=subprocess.STDOUT)
    return {
        "cpu_hours": round((cpu_children() - c0) / 3600, 4),
        "wall_s": round(time.time() - t0, 1),
        "rc": proc.returncode,
        "ended": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def run_cpu_hours(stages: dict) -> float:
    """A run's CPU-hours: every stage recorded for it, stopped attempts (lists of entries) included."""
    return sum(e.get("cpu_hours", 0) for s in stages.values() for e in (s if isinstance(s, list) else [s]))


def save(path: Path, cost: dict) -> None:
    cost["runs_cpu_hours"] = round(sum(run_cpu_hours(r) for r in cost["runs"].values()), 3)
    # stages whose outputs were discarded (e.g. retrained after a code change) still cost what they cost, and
    # work whose CPU time was not measured counts at its estimate (each entry says how it was estimated)
    superseded = sum(s.get("cpu_hours", 0) for s in cost.get("superseded", {}).values())
    unrecorded = sum(s.get("estimated_cpu_hours", 0) for s in cost.get("unrecorded", {}).values())
    cost["total_cpu_hours"] = round(
        cost["pilot"]["cpu_hours"]
        + cost["prepare"].get("cpu_hours", 0)
        + cost["runs_cpu_hours"]
        + superseded
        + unrecorded,
        3,
    )
    if cost.get("lost"):  # work whose outputs were lost before they were saved (a clone gone with its session)
        cost["lost_cpu_hours"] = round(sum(e["cpu_hours"] for e in cost["lost"].values()), 3)
        cost["spent_cpu_hours"] = round(cost["total_cpu_hours"] + cost["lost_cpu_hours"], 3)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(cost, indent=2) + "\n")
    tmp.replace(path)


def merge(path: Path, other: Path) -> int:
    """The other clone's runs and superseded work added to `path` (a run in both is refused: costed twice);
    its pilot and prepare are not (the pilot counts once; its prepare re-checked what this one made)."""
    cost, theirs = json.loads(path.read_text()), json.loads(other.read_text())
    both = sorted(set(cost["runs"]) & {k for k, v in theirs["runs"].items() if v})
    if both:
        print(f"{other}: runs {', '.join(both)} are costed here already; nothing merged", file=sys.stderr)
        return 2
    runs = {k: v for k, v in theirs["runs"].items() if v}
    cost["runs"].update(runs)
    cost.setdefault("superseded", {}).update(theirs.get("superseded", {}))
    cost.setdefault("merged_from", []).append(
        {"clone": str(other.parent), "runs": sorted(runs), "its_prepare": theirs.get("prepare")}
    )
    save(path, cost)
    print(f"merged {len(runs)} run(s) from {other}: total {cost['total_cpu_hours']} CPU-hours")
    return 0


def lose(path: Path, other: Path, keys: list[str], why: str) -> int:
    """The named runs of another clone's cost.json kept under `lost` in `path` (their outputs will not reach the
    study: the clone goes before they finished and were saved); their CPU time still counts in `spent_cpu_hours`,
    not in `total_cpu_hours` (the study as it was made)."""
    cost, theirs = json.loads(path.read_text()), json.loads(other.read_text())
    missing = [k for k in keys if k not in theirs["runs"]]
    if missing:
        print(f"{other}: no run {missing[0]}", file=sys.stderr)
        return 2
    for key in keys:
        stages = theirs["runs"][key]
        cost.setdefault("lost", {})[f"{key} ({why})"] = {"cpu_hours": round(run_cpu_hours(stages), 4), "stages": stages}
    save(path, cost)
    print(f"kept {len(keys)} run(s) of {other} as lost: spent {cost['spent_cpu_hours']} CPU-hours")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("project", type=Path)
    ap.add_argument("--pilot", default="studies/pilot")
    ap.add_argument("--pilot-cpu-hours", type=float, required=True)
    ap.add_argument("--pilot-source", default="")
    ap.add_argument("--runs", default=None, help="comma-separated run keys (default: every run of params.yaml)")
    ap.add_argument(
        "--merge",
        type=Path,
        default=None,
        help="add the runs (and superseded work) of another clone's cost.json to this project's, then exit: "
        "runs made in parallel clones (one per core, one DVC cache) are costed where they ran",
    )
    ap.add_argument(
        "--lose",
        type=Path,
        default=None,
        help="with --runs and --why: keep those runs of another clone's cost.json as lost work (its clone goes "
        "before they were saved), counted in spent_cpu_hours; then exit",
    )
    ap.add_argument("--why", default="lost with its clone")
    a = ap.parse_args()
    import yaml

    if a.merge:
        return merge(a.project / "cost.json", a.merge)
    if a.lose:
        return lose(a.project / "cost.json", a.lose, a.runs.split(",") if a.runs else [], a.why)

    params = yaml.safe_load((a.project / "params.yaml").read_text())
    keys = a.runs.split(",") if a.runs else list(params["runs"])
    path = a.project / "cost.json"
    cost = json.loads(path.read_text()) if path.exists() else {"runs": {}, "prepare": {}}
    cost["pilot"] = {"study": a.pilot, "cpu_hours": a.pilot_cpu_hours, "source": a.pilot_source}
    cost["cpu"] = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        "",
    )
    cost["threads"] = os.environ.get("OODCORR_THREADS", "")
    with open(a.project / "costed_repro.log", "a") as log:
        if not cost["prepare"]:
            cost["prepare"] = stage(a.project, "prepare", log)
            save(path, cost)
        for key in keys:
            done = cost["runs"].setdefault(key, {})
            for kind, target in (("train", f"train@{key}"), ("score", f"evaluate@{key}")):
                if done.get(kind, {}).get("rc") == 0:
                    continue
                if kind in done:  # an earlier attempt that stopped part-way: its CPU time still counts
                    done.setdefault(f"{kind} (stopped attempts)", []).append(done.pop(kind))
                done[kind] = stage(a.project, target, log)
                save(path, cost)
                print(f"{key} {kind}: {done[kind]}", flush=True)
                if done[kind]["rc"] != 0:
                    return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
