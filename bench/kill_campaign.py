"""Kill campaign: a tiny study (two tiny models) run with `dvc repro` in throw-away projects, SIGKILLed at
random moments (over all stages), rerun each time until it completes; the final outputs are compared
byte-for-byte with an uninterrupted reference, and the MLflow store is checked for duplicate runs and runs
left RUNNING. Writes bench/results/kill_campaign.json.

    PYTHONPATH=src .venv/bin/python bench/kill_campaign.py --studies 2 --kills 16
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
sys.path.insert(0, str(HERE.parent / "tests"))

from study_helpers import env, make_project, tiny_params  # noqa: E402

COMPARED = ["runs/{run}/eval/metrics.jsonl", "runs/{run}/eval/accuracy.csv", "runs/{run}/eval/summary.json",
            "runs/{run}/run.json", "runs/{run}/checkpoints/checkpoint-8/adapter_config.json",
    "runs/{run}/checkpoints/checkpoint-8/adapter_model.safetensors", "results/partial_correlations.csv", "results/pooled_seeds.csv",
            "results/consistency.csv", "results/plots/accuracy_vs_step.csv", "dvc.lock"]


def params() -> dict:
    p = tiny_params(None)
    p["train"].update({"max_steps": 8, "checkpoints": {"log_spaced": 5}})
    p["analyze"]["bootstrap"] = 10
    return p


def repro(root: Path, kill_after: float | None) -> tuple[int | None, float]:
    """`dvc repro`; SIGKILL its whole process group after `kill_after` s -> (returncode or None if killed, s)."""
    t0 = time.time()
    proc = subprocess.Popen(["dvc", "repro", "-q"], cwd=root, env=env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        proc.wait(timeout=kill_after)
        return proc.returncode, time.time() - t0
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None, time.time() - t0


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
        for rel in ([pattern.format(run=r) for r in runs] if "{run}" in pattern else [pattern]):
            f = root / rel
            out[rel] = f.read_bytes() if f.exists() else None
    return out


def mlflow_counts(root: Path, runs: list[str]) -> dict:
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{root / 'mlruns' / 'mlflow.db'}")
    exp = client.get_experiment_by_name("oodcorr/tiny")
    found = client.search_runs([exp.experiment_id], max_results=1000) if exp else []
    train = [r for r in found if r.data.tags.get("oodcorr.kind") == "train"]
    return {"train_runs": len(train), "expected_train_runs": len(runs),
            "duplicate_train_runs": len(train) - len({r.data.tags.get("oodcorr.run_key") for r in train}),
            "running": sum(r.info.status == "RUNNING" for r in found if r.data.tags.get("oodcorr.kind") == "train"),
            "running_any_kind": sum(r.info.status == "RUNNING" for r in found),
            "train_metric_steps_ok": all(
                sorted(m.step for m in client.get_metric_history(r.info.run_id, "train/loss")) == list(range(1, 9))
                for r in train)}


def temps(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*.tmp") if ".dvc" not in p.parts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--studies", type=int, default=4, help="at most this many studies")
    ap.add_argument("--kills", type=int, default=15, help="SIGKILLs per study")
    ap.add_argument("--total", type=int, default=30, help="stop once this many SIGKILLs were sent")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    p = params()
    runs = list(p["runs"])
    work = Path(tempfile.mkdtemp(prefix="oodcorr-kills-"))
    t0 = time.time()
    ref = make_project(work / "ref", p)
    code, t_ref = repro(ref, None)
    assert code == 0, "reference run failed"
    want = outputs(ref, runs)
    print(f"reference: {t_ref:.0f} s", flush=True)
    studies = []
    for i in range(args.studies):
        if sum(s["kills"] for s in studies) >= args.total:
            break
        root = make_project(work / f"s{i}", p)
        kills, attempts = [], 0
        while len(kills) < args.kills:
            delay = rng.uniform(1.0, max(2.0, t_ref / 8))
            stage = stage_now(root, runs)
            code, took = repro(root, delay)
            attempts += 1
            if code is None:
                kills.append({"after_s": round(delay, 1), "stage_before": stage,
                              "stage_at_kill": stage_now(root, runs)})
            elif code != 0:
                kills.append({"error_exit": code})
                break
            else:  # finished before the kill: start over from scratch so later kills hit early stages too
                break
        code, _ = repro(root, None)  # to completion
        got = outputs(root, runs)
        differing = sorted(k for k in want if want[k] != got[k])
        studies.append({"study": i, "kills": len(kills), "attempts": attempts, "completed": code == 0,
                        "identical": not differing, "differing": differing,
                        "kill_stages": {s: sum(k.get("stage_at_kill") == s for k in kills)
                                        for s in ("prepare", "train", "evaluate", "analyze")},
                        "leftover_temps": temps(root), **mlflow_counts(root, runs), "kill_log": kills})
        print(json.dumps({k: v for k, v in studies[-1].items() if k != "kill_log"}), flush=True)
        write(studies, t_ref, t0)


def write(studies, t_ref, t0) -> None:
    total = sum(s["kills"] for s in studies)
    summary = {"studies": len(studies), "sigkills": total,
               "resumed": sum(s["completed"] for s in studies), "identical": sum(s["identical"] for s in studies),
               "duplicate_train_runs": sum(s["duplicate_train_runs"] for s in studies),
               "train_runs_left_running": sum(s["running"] for s in studies),
               "runs_left_running_any_kind": sum(s["running_any_kind"] for s in studies),
               "leftover_temps": sum(len(s["leftover_temps"]) for s in studies),
               "kills_by_stage": {st: sum(s["kill_stages"][st] for s in studies)
                                  for st in ("prepare", "train", "evaluate", "analyze")},
               "reference_s": round(t_ref, 1), "total_s": round(time.time() - t0, 1),
               "loadavg_end": os.getloadavg()}
    print(json.dumps(summary, indent=2))
    out = HERE / "results" / "kill_campaign.json"
    out.write_text(json.dumps({"summary": summary, "studies": studies}, indent=2) + "\n")
    print(f"-> {out}")


if __name__ == "__main__":
    main()
