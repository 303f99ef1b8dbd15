"""Kill campaign: a tiny study (two tiny models) run with `dvc repro` in throw-away projects, SIGKILLed at
random moments inside each stage, rerun each time until it completes; the final outputs are compared
byte-for-byte with an uninterrupted reference, and the MLflow store is checked for duplicate runs and runs
left RUNNING. Writes bench/bad_inputs/results/kill_campaign.json.

Kills are stage-targeted: every study walks a kill plan (by default 3 in prepare, 5 in train, 4 in evaluate,
3 in analyze). For each planned kill, `dvc repro` is started, the stage processes of its session are watched
in /proc (`oodcorr data prepare`, `oodcorr train`, `oodcorr evaluate`, `oodcorr analyze`), and once the target
stage's process is running the whole session is SIGKILLed after a delay drawn uniformly from [0, that stage's
duration in the reference run] (so the kill can land during start-up, mid-stage or while outputs are written).
The stage whose process was seen at the moment of the kill is recorded.

    PYTHONPATH=src .venv/bin/python bench/bad_inputs/kill_campaign.py --studies 2
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests"))

from study_helpers import env, make_project, tiny_params  # noqa: E402

COMPARED = [
    "runs/{run}/eval/metrics.jsonl",
    "runs/{run}/eval/accuracy.csv",
    "runs/{run}/eval/summary.json",
    "runs/{run}/run.json",
    "runs/{run}/checkpoints/checkpoint-8/adapter_config.json",
    "runs/{run}/checkpoints/checkpoint-8/adapter_model.safetensors",
    "results/partial_correlations.csv",
    "results/pooled_seeds.csv",
    "results/consistency.csv",
    "results/plots/accuracy_vs_step.csv",
    "dvc.lock",
]


def params() -> dict:
    p = tiny_params(None)
    p["train"].update({"max_steps": 8, "checkpoints": {"log_spaced": 5}})
    p["analyze"]["bootstrap"] = 10
    return p


STAGES = ("prepare", "train", "evaluate", "analyze")


def running_stage(pgid: int) -> str | None:
    """The oodcorr stage whose process runs in session `pgid` right now (from /proc cmdlines), else None."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if os.getpgid(int(d.name)) != pgid:
                continue
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except (OSError, ProcessLookupError):
            continue
        words = [Path(a.decode(errors="replace")).name for a in argv if a]
        if "oodcorr" in words:
            rest = words[words.index("oodcorr") + 1 :]
            for stage in STAGES:
                if stage in rest[:2]:
                    return stage
    return None


def repro(root: Path, target: str | None = None, stage_s: dict | None = None, rng=None):
    """`dvc repro`, to completion (target None) or SIGKILLed at a random moment inside stage `target`.

    -> (returncode, or None if killed; seconds; stage seen at the kill; seconds each stage was seen running)."""
    t0 = time.time()
    proc = subprocess.Popen(
        ["dvc", "repro", "-q"],
        cwd=root,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    seen = {s: 0.0 for s in STAGES}
    kill_at, last = None, time.time()
    while proc.poll() is None:
        time.sleep(0.02)
        now, stage = time.time(), running_stage(proc.pid)
        if stage:
            seen[stage] += now - last
        last = now
        if target and kill_at is None and stage and STAGES.index(stage) > STAGES.index(target):
            target = stage  # the target stage is already done (an earlier kill landed after it): kill here
        if target and kill_at is None and stage == target:
            kill_at = now + rng.uniform(0, max(0.2, stage_s[target]))
        if kill_at is not None and now >= kill_at:
            at = running_stage(proc.pid)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None, time.time() - t0, at, seen
    return proc.returncode, time.time() - t0, None, seen


def stage_now(root: Path, runs: list[str]) -> str:
    if not (root / "data" / "prepared" / "manifest.json").exists():
        return "prepare"
    for r in runs:
        try:
            if not json.loads((root / "runs" / r / "run.json").read_text()).get("finished"):
                return "train"
        except (OSError, json.JSONDecodeError):
            return "train"
    if not all((root / "runs" / r / "eval" / "summary.json").exists() for r in runs):
        return "evaluate"
    return "analyze"


def outputs(root: Path, runs: list[str]) -> dict[str, bytes | None]:
    out = {}
    for pattern in COMPARED:
        for rel in [pattern.format(run=r) for r in runs] if "{run}" in pattern else [pattern]:
            f = root / rel
            out[rel] = f.read_bytes() if f.exists() else None
    return out


def mlflow_counts(root: Path, runs: list[str]) -> dict:
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("oodcorr/tiny")
    found = client.search_runs([exp.experiment_id], max_results=1000) if exp else []
    train = [r for r in found if r.data.tags.get("oodcorr.kind") == "train"]
    return {
        "train_runs": len(train),
        "expected_train_runs": len(runs),
        "duplicate_train_runs": len(train) - len({r.data.tags.get("oodcorr.run_key") for r in train}),
        "running": sum(r.info.status == "RUNNING" for r in found if r.data.tags.get("oodcorr.kind") == "train"),
        "running_any_kind": sum(r.info.status == "RUNNING" for r in found),
        "train_metric_steps_ok": all(
            sorted(m.step for m in client.get_metric_history(r.info.run_id, "train/loss")) == list(range(1, 9))
            for r in train
        ),
    }


def temps(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*.tmp") if ".dvc" not in p.parts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--studies", type=int, default=2)
    ap.add_argument(
        "--plan",
        default="prepare=3,train=5,evaluate=4,analyze=3",
        help="kills per stage in each study, in pipeline order",
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    plan = [st for part in args.plan.split(",") for st in [part.split("=")[0]] * int(part.split("=")[1])]
    rng = random.Random(args.seed)
    p = params()
    runs = list(p["runs"])
    work = Path(tempfile.mkdtemp(prefix="oodcorr-kills-"))
    t0 = time.time()
    ref = make_project(work / "ref", p)
    code, t_ref, _, stage_s = repro(ref)
    assert code == 0, "reference run failed"
    want = outputs(ref, runs)
    print(
        f"reference: {t_ref:.0f} s; seconds per stage: {json.dumps({k: round(v, 1) for k, v in stage_s.items()})}",
        flush=True,
    )
    studies = []
    for i in range(args.studies):
        root = make_project(work / f"s{i}", p)
        kills, attempts = [], 0
        for target in plan:
            code, took, at, _ = repro(root, target, stage_s, rng)
            attempts += 1
            if code is None:
                kills.append(
                    {
                        "target": target,
                        "after_s": round(took, 1),
                        "stage_at_kill": at,
                        "outputs_state": stage_now(root, runs),
                    }
                )
            elif code != 0:
                kills.append({"target": target, "error_exit": code})
                break
            else:  # the pipeline finished before the target stage ran again: nothing left to kill
                kills.append({"target": target, "missed": True})
                break
        code, _, _, _ = repro(root)  # to completion
        kills_sent = [k for k in kills if "after_s" in k]
        got = outputs(root, runs)
        differing = sorted(k for k in want if want[k] != got[k])
        studies.append(
            {
                "study": i,
                "kills": len(kills_sent),
                "attempts": attempts,
                "completed": code == 0,
                "identical": not differing,
                "differing": differing,
                "error_exits": sum("error_exit" in k for k in kills),
                "kill_stages": {s: sum(k.get("stage_at_kill") == s for k in kills_sent) for s in STAGES},
                "leftover_temps": temps(root),
                **mlflow_counts(root, runs),
                "kill_log": kills,
            }
        )
        print(json.dumps({k: v for k, v in studies[-1].items() if k != "kill_log"}), flush=True)
        write(studies, t_ref, stage_s, t0)


def write(studies, t_ref, stage_s, t0) -> None:
    total = sum(s["kills"] for s in studies)
    summary = {
        "studies": len(studies),
        "sigkills": total,
        "resumed": sum(s["completed"] for s in studies),
        "identical": sum(s["identical"] for s in studies),
        "error_exits": sum(s["error_exits"] for s in studies),
        "duplicate_train_runs": sum(s["duplicate_train_runs"] for s in studies),
        "train_runs_left_running": sum(s["running"] for s in studies),
        "runs_left_running_any_kind": sum(s["running_any_kind"] for s in studies),
        "leftover_temps": sum(len(s["leftover_temps"]) for s in studies),
        "kills_by_stage": {st: sum(s["kill_stages"][st] for s in studies) for st in STAGES},
        "reference_s": round(t_ref, 1),
        "reference_stage_s": {k: round(v, 1) for k, v in stage_s.items()},
        "total_s": round(time.time() - t0, 1),
        "loadavg_end": os.getloadavg(),
    }
    print(json.dumps(summary, indent=2))
    out = HERE / "results" / "kill_campaign.json"
    out.write_text(json.dumps({"summary": summary, "studies": studies}, indent=2) + "\n")
    print(f"-> {out}")


if __name__ == "__main__":
    main()
