#!/usr/bin/env python3
"""MKL's strict reproducible mode (core/numerics.py: MKL_CBWR=AVX2,STRICT, oodcorr's default on AVX2 CPUs) vs MKL's
default: the speed of a LoRA training step and of a scoring forward pass on SmolLM2-135M, and whether one and two
threads give the same bits in each mode.

Each (mode, threads) cell runs in a fresh process (MKL reads MKL_CBWR once), cells in alternating order, `--reps`
rounds. A cell: the recipe's LoRA (r 8, alpha 32, 7 modules, dropout 0) on the converted model, a fixed batch of
8 x 128 random tokens, 2 AdamW steps (forward, backward, clipping, step), then 2 no-grad forwards of 16 x 128 tokens; it
reports the seconds of each and a sha256 of the LoRA weights after training and of the scoring logits.

    PATH=.venv/bin:$PATH python bench/speed/mkl_strict.py [--reps 2]
    PATH=.venv/bin:$PATH nice -n -10 python bench/speed/mkl_strict.py --score-only --reps 3   # scoring, 1 thread

--score-only times the scoring forwards alone (3 of 16 x 128 tokens after a warm-up, one thread, no LoRA) and writes
results/mkl_strict_score.json: on a loaded machine, run it at a higher priority than the other jobs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "mkl_strict.json"
MODES = {"default": "", "strict": "AVX2,STRICT"}  # MKL_CBWR="" keeps MKL's default (oodcorr leaves a set value)

CELL = r"""
import hashlib, json, sys, time
import oodcorr, torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM
from oodcorr.modeling.models import model_path
torch.set_num_threads(int(sys.argv[1]))
torch.manual_seed(0)
model = AutoModelForCausalLM.from_pretrained(model_path("smollm2-135m"), torch_dtype=torch.float32)
mods = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
model = get_peft_model(model, LoraConfig(r=8, lora_alpha=32, lora_dropout=0.0, target_modules=mods))
for n, p in model.named_parameters():
    if "lora_B" in n:
        torch.nn.init.normal_(p, std=0.02)  # nonzero B: every LoRA product enters the step
g = torch.Generator().manual_seed(1)
ids = torch.randint(0, 49152, (8, 128), generator=g)
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-3)
t0 = time.perf_counter()
for _ in range(2):
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
    opt.step()
    opt.zero_grad()
train_s = time.perf_counter() - t0
h = hashlib.sha256()
for n, p in sorted(model.named_parameters()):
    if p.requires_grad:
        h.update(p.detach().numpy().tobytes())
ids = torch.randint(0, 49152, (16, 128), generator=g)
t0 = time.perf_counter()
with torch.no_grad():
    logits = [model(input_ids=ids).logits for _ in range(2)]
score_s = time.perf_counter() - t0
print(json.dumps({"train_s": train_s, "score_s": score_s, "lora_sha": h.hexdigest()[:16],
                  "logits_sha": hashlib.sha256(logits[-1].numpy().tobytes()).hexdigest()[:16]}))
"""


SCORE_CELL = r"""
import hashlib, json, sys, time
import oodcorr, torch
from transformers import AutoModelForCausalLM
from oodcorr.modeling.models import model_path
torch.set_num_threads(int(sys.argv[1]))
model = AutoModelForCausalLM.from_pretrained(model_path("smollm2-135m"), dtype=torch.float32)
ids = torch.randint(0, 49152, (16, 128), generator=torch.Generator().manual_seed(1))
with torch.no_grad():
    model(input_ids=ids[:2])
    t0 = time.perf_counter()
    for _ in range(3):
        logits = model(input_ids=ids).logits
    score_s = time.perf_counter() - t0
print(json.dumps({"score_s": score_s, "logits_sha": hashlib.sha256(logits.numpy().tobytes()).hexdigest()[:16]}))
"""


def cell(mode: str, threads: int, code: str = CELL) -> dict:
    env = dict(os.environ, MKL_CBWR=MODES[mode], OMP_NUM_THREADS=str(threads), HF_HUB_OFFLINE="1")
    res = subprocess.run([sys.executable, "-c", code, str(threads)], env=env, capture_output=True, text=True)
    if res.returncode:
        sys.exit(f"cell {mode}/{threads} failed: {res.stderr.strip().splitlines()[-1:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--score-only", action="store_true", help="time the scoring forwards alone, one thread")
    a = ap.parse_args()
    if a.score_only:
        return score_only(a.reps)
    cells = [(m, t) for t in (1, 2) for m in MODES]
    got: dict[str, list[dict]] = {f"{m}/{t}": [] for m, t in cells}
    for r in range(a.reps):
        for m, t in cells if r % 2 == 0 else cells[::-1]:
            got[f"{m}/{t}"].append(cell(m, t))
            print(m, t, got[f"{m}/{t}"][-1], flush=True)
    med = {k: {s: statistics.median(x[s] for x in v) for s in ("train_s", "score_s")} for k, v in got.items()}
    same = {
        m: {s: len({x[s] for t in (1, 2) for x in got[f"{m}/{t}"]}) == 1 for s in ("lora_sha", "logits_sha")}
        for m in MODES
    }
    ratios = {
        f"strict/default {t} thread(s) {s}": round(med[f"strict/{t}"][s] / med[f"default/{t}"][s], 3)
        for t in (1, 2)
        for s in ("train_s", "score_s")
    }
    load = os.getloadavg()
    out = {
        "cells": got,
        "median_s": med,
        "ratios": ratios,
        "one_and_two_threads_same_bits": same,
        "cpu": next(
            (
                ln.split(":", 1)[1].strip()
                for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")
            ),
            "",
        ),
        "loadavg_at_end": load,
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    for k, v in ratios.items():
        print(f"{k}: {v}")
    print("same bits under 1 and 2 threads:", same)
    print(f"wrote {OUT}")
    return 0


def score_only(reps: int) -> int:
    got: dict[str, list[dict]] = {m: [] for m in MODES}
    for r in range(reps):
        for m in MODES if r % 2 == 0 else list(MODES)[::-1]:
            got[m].append(cell(m, 1, SCORE_CELL))
            print(m, got[m][-1], flush=True)
    med = {m: statistics.median(x["score_s"] for x in v) for m, v in got.items()}
    out = {
        "cells": got,
        "median_s": med,
        "ratio_strict_over_default": round(med["strict"] / med["default"], 3),
        "same_bits": len({x["logits_sha"] for v in got.values() for x in v}) == 1,
        "loadavg_at_end": os.getloadavg(),
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    path = OUT.with_name("mkl_strict_score.json")
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"scoring, strict/default: {out['ratio_strict_over_default']} (same bits: {out['same_bits']}); wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
