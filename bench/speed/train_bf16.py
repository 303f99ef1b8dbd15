#!/usr/bin/env python3
"""CPU training in float32 vs bfloat16 (a run's `dtype`): step time, loss curve and ID accuracy, side by side.

Each seed trains the cpu preset's recipe (`oodcorr study use cpu`: batch 16, lr 2e-3, LoRA on 7 modules) for one
model once per dtype, in a fresh copy of the project, through the real stages (`dvc repro evaluate@<run>`), order
alternating between seeds; every checkpoint is scored on the ID testset in float32 in both, so only training
differs. Same seed = same batches, so the per-step loss difference is the dtype's effect; the seed-to-seed spread of
the float32 runs and the binomial SE of the ID accuracy are the noise it is judged against.

    PATH=.venv/bin:$PATH python bench/speed/train_bf16.py [--steps 64] [--seeds 0,1] [--model smollm2-135m]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from quickstart_time import fresh_copy  # noqa: E402

ID_TESTSET = "mnli_real"  # the cpu preset's ID testset
ID_ITEMS = 128  # its data.max_examples


def configure(root: Path, model: str, seed: int, dtype: str, steps: int) -> str:
    import yaml

    subprocess.run(["oodcorr", "study", "use", "cpu"], cwd=root, check=True, capture_output=True)
    params = yaml.safe_load((root / "params.yaml").read_text())
    key = next(k for k, r in params["runs"].items() if r["model"] == model and r["seed"] == seed)
    params["runs"] = {key: params["runs"][key]}
    params["train"].update(dtype=dtype, max_steps=steps, checkpoints={"every": max(1, steps // 8), "log_spaced": None})
    params["evaluate"].update(testsets=[ID_TESTSET], dtype="float32")
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return key


def read_run(root: Path, key: str) -> dict:
    import pandas as pd

    losses = {}
    for line in (root / "runs" / key / "tracking" / "train.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec.get("key") == "train/loss":
            losses[rec["step"]] = (rec["value"], rec["timestamp"] / 1000)
    steps = sorted(losses)
    gaps = [losses[b][1] - losses[a][1] for a, b in zip(steps, steps[1:])]
    acc = pd.read_csv(root / "runs" / key / "eval" / "accuracy.csv")
    acc = acc[acc["testset"] == ID_TESTSET]
    return {
        "steps": steps,
        "loss": [losses[s][0] for s in steps],
        "median_step_s": statistics.median(gaps),
        "id_accuracy": dict(zip(acc["step"].astype(int).tolist(), acc["accuracy"].round(6).tolist())),
    }


def final_acc(run: dict) -> float:
    return run["id_accuracy"][max(run["id_accuracy"])]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--out", default=str(HERE / "results" / "train_bf16.json"))
    a = ap.parse_args()
    from oodcorr.modeling.precision import native_bf16_cpu

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "DVC_NO_ANALYTICS": "1"}
    env.pop("OODCORR_THREADS", None)
    env.pop("OMP_NUM_THREADS", None)
    dtypes = ["float32", "bfloat16"]
    seeds = [int(s) for s in a.seeds.split(",")]
    runs = {}
    for i, seed in enumerate(seeds):
        for dtype in dtypes if i % 2 == 0 else dtypes[::-1]:
            with tempfile.TemporaryDirectory(prefix="oodcorr-train-") as d:
                root = fresh_copy(Path(d))
                key = configure(root, a.model, seed, dtype, a.steps)
                t0 = time.time()
                res = subprocess.run(
                    ["dvc", "repro", f"evaluate@{key}"], cwd=root, env=env, capture_output=True, text=True
                )
                if res.returncode != 0:
                    raise SystemExit(f"dvc repro failed:\n{res.stderr[-3000:]}")
                r = runs[f"{dtype}_s{seed}"] = {**read_run(root, key), "wall_s": round(time.time() - t0, 1)}
                print(
                    f"seed {seed} {dtype}: step {r['median_step_s']:.2f} s, final loss {r['loss'][-1]:.3f}, "
                    f"ID accuracy {final_acc(r):.3f}",
                    flush=True,
                )
    window = max(2, a.steps // 4)  # the last quarter of training
    cmp = {}
    for s in seeds:
        f, b = runs[f"float32_s{s}"], runs[f"bfloat16_s{s}"]
        diff = [y - x for x, y in zip(f["loss"], b["loss"])]
        accs = [final_acc(f), final_acc(b)]
        cmp[s] = {
            "step_speedup": f["median_step_s"] / b["median_step_s"],
            "loss_diff_median_abs": statistics.median(abs(x) for x in diff),
            "loss_diff_max_abs": max(abs(x) for x in diff),
            "loss_last_quarter_mean": {
                "float32": statistics.mean(f["loss"][-window:]),
                "bfloat16": statistics.mean(b["loss"][-window:]),
            },
            "loss_last_quarter_se": statistics.stdev(f["loss"][-window:]) / math.sqrt(window),
            "final_id_accuracy": {"float32": accs[0], "bfloat16": accs[1]},
            "final_id_accuracy_se_of_difference": math.sqrt(sum(p * (1 - p) for p in accs) / ID_ITEMS),
        }
    out = {
        "model": a.model,
        "steps": a.steps,
        "native_bf16": native_bf16_cpu(),
        "cores": os.cpu_count(),
        "bf16_vs_float32": cmp,
    }
    if len(seeds) > 1:
        f0, f1 = runs[f"float32_s{seeds[0]}"], runs[f"float32_s{seeds[1]}"]
        out["float32_seed_spread"] = {
            "final_id_accuracy_diff": final_acc(f1) - final_acc(f0),
            "loss_last_quarter_mean_diff": (
                statistics.mean(f1["loss"][-window:]) - statistics.mean(f0["loss"][-window:])
            ),
        }
    out["runs"] = runs
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}, indent=1))
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
