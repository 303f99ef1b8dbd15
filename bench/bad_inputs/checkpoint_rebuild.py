#!/usr/bin/env python3
"""Rebuilding one deleted checkpoint of a finished run: `oodcorr train` resumes from the nearest earlier
checkpoint's kept training state (runs/<run>/resume/) and stops at the deleted one, against the old behaviour,
which trained the whole run again from step 0 (the cost of training the run from scratch). Both as the real
command (a subprocess), alternating, `--repeat` times each, in copies of one finished tiny project; every
rebuilt checkpoint file is compared with the original. The command's fixed cost (start-up, model load) is
measured by rebuilding checkpoint-0 (no step trained) and taken off both for the net ratio: with a tiny model
it dominates, with a real one the steps do. Each command's CPU time (user + system, its own and its children's)
is measured beside the wall time: on a shared machine other processes stretch the wall time, not the CPU time,
so the ratios are taken from the CPU time. Also the disk the kept states take.

    PYTHONPATH=src .venv/bin/python bench/bad_inputs/checkpoint_rebuild.py [--steps 480] [--every 40] [--repeat 3]

writes bench/bad_inputs/results/checkpoint_rebuild.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def params(steps: int, every: int) -> dict:
    return {
        "study": {"name": "bench", "tracking": "none"},
        "data": {
            "out": "data/prepared",
            "max_examples": 24,
            "seed": 0,
            "neutral": "drop",
            "prepare": [],
            "testsets": {"synth_train": {"max_examples": 64}},
        },
        "train": {
            "lr": 0.005,
            "batch_size": 8,
            "max_steps": steps,
            "warmup_ratio": 0.0,
            "quiet": True,
            "checkpoints": {"every": every},
            "max_length": 64,
            "lora": {"dropout": 0.1},
        },
        "runs": {
            "a": {
                "model": "tiny-olmo2",
                "train_set": "synth_train",
                "id_testset": "synth_id",
                "shots": 16,
                "data_seed": 0,
                "seed": 0,
            }
        },
        "evaluate": {"testsets": ["synth_id"], "batch_size": 16, "max_length": 64, "quiet": True},
        "analyze": {"out": "results", "methods": ["linear"], "bootstrap": 0, "mlflow": False, "noise": False},
    }


def oodcorr(args, cwd: Path) -> tuple[tuple[float, float], subprocess.CompletedProcess]:
    """(wall s, CPU s), the result."""
    import resource

    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "DVC_NO_ANALYTICS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "OODCORR_THREADS": os.environ.get("OODCORR_THREADS", "1"),
        "PYTHONPATH": str(REPO / "src"),
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    res = subprocess.run([sys.executable, "-m", "oodcorr", *args], cwd=cwd, env=env, capture_output=True, text=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    took = (time.perf_counter() - t0, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    if res.returncode != 0:
        raise SystemExit(f"oodcorr {' '.join(args)} failed:\n{res.stderr[-3000:]}")
    return took, res


def files(folder: Path) -> dict[str, bytes]:
    return {str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()}


def size(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=480)
    ap.add_argument("--every", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "checkpoint_rebuild.json")
    a = ap.parse_args(argv)
    deleted = a.steps - 2 * a.every  # a checkpoint in the second half: the old behaviour's cost is the whole run
    with tempfile.TemporaryDirectory(prefix="oodcorr-rebuild-") as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        (base / "params.yaml").write_text(yaml.safe_dump(params(a.steps, a.every), sort_keys=False))
        oodcorr(["data", "prepare"], base)
        oodcorr(["train", "--run", "a"], base)
        ck = base / "runs" / "a" / "checkpoints"
        original = files(ck)
        times = {"resume_from_nearest": [], "from_step_0": [], "no_step": []}
        cpu = {k: [] for k in times}
        same, message = True, ""
        for i in range(a.repeat):
            for how in times:
                work = Path(tmp) / f"{how}-{i}"
                shutil.copytree(base, work)
                if how != "from_step_0":
                    gone = deleted if how == "resume_from_nearest" else 0
                    shutil.rmtree(work / "runs" / "a" / "checkpoints" / f"checkpoint-{gone}")
                else:  # the old behaviour: every step again, every checkpoint rewritten (= a fresh run's work)
                    shutil.rmtree(work / "runs" / "a")
                took, res = oodcorr(["train", "--run", "a"], work)
                times[how].append(round(took[0], 2))
                cpu[how].append(round(took[1], 2))
                same = same and files(work / "runs" / "a" / "checkpoints") == original
                if how == "resume_from_nearest":
                    message = next((x for x in res.stderr.splitlines() if "missing or incomplete" in x), "")
                shutil.rmtree(work)
        med = {k: statistics.median(v) for k, v in times.items()}
        med_cpu = {k: statistics.median(v) for k, v in cpu.items()}
        fixed = med_cpu["no_step"]
        result = {
            "model": "tiny-olmo2 (LoRA)",
            "steps": a.steps,
            "checkpoint_every": a.every,
            "deleted": f"checkpoint-{deleted}",
            "repeat": a.repeat,
            "steps_trained": {"resume_from_nearest": a.every, "from_step_0": a.steps, "no_step": 0},
            "wall_s": times,
            "median_wall_s": med,
            "cpu_s": cpu,
            "median_cpu_s": med_cpu,
            "cpu_ratio_from_step_0_over_resume": round(med_cpu["from_step_0"] / med_cpu["resume_from_nearest"], 2),
            "net_cpu_ratio_without_fixed_cost": round(
                (med_cpu["from_step_0"] - fixed) / max(med_cpu["resume_from_nearest"] - fixed, 1e-9), 2
            ),
            "wall_ratio_from_step_0_over_resume": round(med["from_step_0"] / med["resume_from_nearest"], 2),
            "rebuilt_files_identical": same,
            "message": message,
            "disk": {"checkpoints_bytes": size(ck), "kept_states_bytes": size(base / "runs" / "a" / "resume")},
            "cpu": os.cpu_count(),
            "threads": os.environ.get("OODCORR_THREADS", "1"),
        }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    print(
        json.dumps(
            {
                k: result[k]
                for k in (
                    "median_cpu_s",
                    "cpu_ratio_from_step_0_over_resume",
                    "net_cpu_ratio_without_fixed_cost",
                    "median_wall_s",
                    "steps_trained",
                    "rebuilt_files_identical",
                    "disk",
                )
            },
            indent=1,
        )
    )
    return result


if __name__ == "__main__":
    main()
