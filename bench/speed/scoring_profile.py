#!/usr/bin/env python3
"""Where scoring time goes on this CPU, per dtype, and what two levers would buy (not a test):

  - torch.profiler over oodcorr's scoring function: each op's share of the time (matrix products vs attention
    vs elementwise);
  - the token budget per batch (evaluate's CPU_TOKEN_BUDGET) scanned, same process;
  - torch.compile(dynamic=True) of the backbone: compile seconds, then the steady-state ratio on the same pairs and
    on another testset (new shapes), and the largest log-prob difference it causes.

SmolLM2-135M base, MNLI / SNLI pairs from ../shared/data/nli, `--threads` torch threads.

    PATH=.venv/bin:$PATH python bench/speed/scoring_profile.py [--n 192] [--threads 1] [--dtypes float32,bfloat16]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from eval_throughput import load_testsets  # noqa: E402

BUDGETS = (512, 1024, 2048, 4096)


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=192)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--out", default=str(HERE / "results" / "scoring_profile.json"))
    a = ap.parse_args()
    import numpy as np
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.set_num_threads(a.threads)
    from oodcorr.evaluate.scoring import CPU_TOKEN_BUDGET, score
    from oodcorr.modeling.model_loading import load_base_model
    from oodcorr.modeling.models import SMOLLM2
    from oodcorr.modeling.precision import native_bf16_cpu
    from oodcorr.modeling.prompts import Prompter

    data = load_testsets(a.n, 0)
    out = {"native_bf16": native_bf16_cpu(), "threads": a.threads, "n": a.n, "evaluate_token_budget": CPU_TOKEN_BUDGET}
    for dtype in a.dtypes.split(","):
        model, tok, _ = load_base_model(SMOLLM2, quantization="none", dtype=dtype)
        prompter = Prompter(tok, max_length=256)
        enc = {
            t: prompter.encode([r["premise"] for r in data[t]], [r["hypothesis"] for r in data[t]])
            for t in ("mnli", "snli")
        }

        def run(seqs, budget=CPU_TOKEN_BUDGET, m=model):
            return score(m, seqs, prompter.verbalizer_ids, tok.pad_token_id, token_budget=budget)

        run(enc["mnli"][:32])  # warm-up
        res = out[dtype] = {"tokens": sum(map(len, enc["mnli"]))}
        res["budget_s"] = {b: round(timed(lambda b=b: run(enc["mnli"], b))[0], 3) for b in BUDGETS}
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            run(enc["mnli"])
        ops = {e.key: e.self_cpu_time_total for e in prof.key_averages()}
        total = sum(ops.values())
        res["op_share"] = {k: round(v / total, 4) for k, v in sorted(ops.items(), key=lambda kv: -kv[1])[:12]}
        if a.no_compile:
            continue
        eager_s, (lp0, _) = timed(lambda: run(enc["mnli"]))
        eager_other, _ = timed(lambda: run(enc["snli"]))
        backbone = getattr(model, model.base_model_prefix)
        backbone.compile(dynamic=True)
        first_s, _ = timed(lambda: run(enc["mnli"]))
        again_s, (lp1, _) = timed(lambda: run(enc["mnli"]))
        other_s, _ = timed(lambda: run(enc["snli"]))
        res["compile"] = {
            "eager_s": eager_s,
            "first_call_s": first_s,
            "compiled_s": again_s,
            "speedup_same_pairs": eager_s / again_s,
            "speedup_other_testset": eager_other / other_s,
            "compile_overhead_s": first_s - again_s,
            "max_abs_logp_diff_vs_eager": float(np.abs(lp0 - lp1).max()),
        }
        print(dtype, json.dumps(res), flush=True)
        del model, backbone
        torch._dynamo.reset()
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"-> {a.out}")


if __name__ == "__main__":
    main()
