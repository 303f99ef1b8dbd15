#!/usr/bin/env python3
"""What `dtype: auto` scores in on this CPU, and what bf16 scoring costs and changes here, in one process.

SmolLM2-135M-Instruct (the base model: what every run's step 0 scores), N real MNLI dev items from data/raw/real,
scored with the evaluator's own scoring function (oodcorr.evaluate.scoring.score) in float32 and in bfloat16,
interleaved over --reps repetitions, one thread. Reports the CPU's native bf16 instructions (None: bf16 is
emulated), the dtype the evaluate stage's `auto` resolves to (resolve_scoring_dtype), the bf16 / float32 time ratio
(median over repetitions), the agreement of the predictions and the correlation of the per-item log-odds. On a CPU
without native bf16 it measures emulated bf16: slower, and not the bits a native CPU computes (so a saved study names
its dtype: float32 in every one so far). Writes bench/speed/bf16_scoring_policy.json.

    python bench/speed/bf16_scoring_policy.py [--n 64] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".json")))
    a = ap.parse_args()
    import numpy as np
    import torch

    torch.set_num_threads(1)
    from oodcorr.core import io
    from oodcorr.evaluate.scoring import score
    from oodcorr.modeling.model_loading import load_base_model
    from oodcorr.modeling.precision import emulated_bf16_slowdown, native_bf16_cpu, resolve_scoring_dtype
    from oodcorr.modeling.prompts import Prompter

    rows = io.read_jsonl(ROOT / "data" / "raw" / "real" / "mnli_real.jsonl")[: a.n]
    models, prompter = {}, None
    for dtype in ("float32", "bfloat16"):
        base, tok, _ = load_base_model("smollm2-135m", None, "none", dtype)
        models[dtype] = base.eval()
        prompter = prompter or Prompter(
            tok, "{premise} Question: {hypothesis} Yes or No?", {"entailment": " Yes", "non_entailment": " No"}, 128
        )
    seqs = prompter.encode([r["premise"] for r in rows], [r["hypothesis"] for r in rows])
    seconds = {"float32": [], "bfloat16": []}
    res = {}
    for _ in range(a.reps):
        for dtype, model in models.items():
            t0 = time.perf_counter()
            with torch.no_grad():
                res[dtype] = score(model, seqs, prompter.verbalizer_ids, tok.pad_token_id)
            seconds[dtype].append(time.perf_counter() - t0)
    (lp32, p32), (lp16, p16) = res["float32"], res["bfloat16"]
    m32, m16 = lp32[:, 0] - lp32[:, 1], lp16[:, 0] - lp16[:, 1]
    ratio = statistics.median(seconds["bfloat16"]) / statistics.median(seconds["float32"])
    out = {
        "cpu": next(
            (
                ln.split(":", 1)[1].strip()
                for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")
            ),
            platform.processor(),
        ),
        "native_bf16": native_bf16_cpu(),
        "auto_scores_in": str(resolve_scoring_dtype("auto")).replace("torch.", ""),
        "items": len(rows),
        "reps": a.reps,
        "threads": 1,
        "seconds": seconds,
        "bf16_over_float32_time": round(ratio, 3),
        "matmul_256_bf16_over_float32": round(emulated_bf16_slowdown(), 2),
        "prediction_agreement": float((p32 == p16).mean()),
        "logodds_correlation": float(np.corrcoef(m32, m16)[0, 1]),
        "max_abs_logodds_diff": float(np.abs(m32 - m16).max()),
        "load_average": os.getloadavg(),
    }
    print(json.dumps(out, indent=1))
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
