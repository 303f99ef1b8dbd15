#!/usr/bin/env python3
"""bf16 vs float32 scoring on a finished study's own checkpoints: prediction agreement and the float32 label margin
of every flip (the trade `dtype: auto` makes on a CPU with native bf16), in one process.

For each run of the study at PROJECT, the checkpoints at `--steps` (default: the last) are scored on every prepared
testset the run was evaluated on, once in float32 and once in bfloat16, with the evaluator's own scoring function
(merged adapters, the same prompts). Writes bench/speed/results/bf16_agreement.json.

    PATH=.venv/bin:$PATH python bench/speed/bf16_agreement.py PROJECT [--steps last] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

NEEDS_ARGS = "a study project (PROJECT) and a CPU with native bf16"  # bench/run.py runs it only with --only

HERE = Path(__file__).resolve().parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("project")
    ap.add_argument("--steps", default="last", help="comma-separated checkpoint steps, or 'last'")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=str(HERE / "results" / "bf16_agreement.json"))
    a = ap.parse_args()
    import numpy as np
    import torch
    import yaml

    torch.set_num_threads(a.threads)
    from oodcorr.core import io
    from oodcorr.evaluate.scorer import Adapters
    from oodcorr.evaluate.scoring import score
    from oodcorr.modeling.model_loading import load_base_model
    from oodcorr.modeling.precision import native_bf16_cpu
    from oodcorr.modeling.prompts import Prompter
    from oodcorr.settings.run_settings import RunSettings

    root = Path(a.project).resolve()
    params = yaml.safe_load((root / "params.yaml").read_text())
    testsets = list(dict.fromkeys(params["evaluate"]["testsets"]))
    per_run, all_flips, total = {}, [], 0
    seconds = {"float32": 0.0, "bfloat16": 0.0}
    for key in params["runs"]:
        run = RunSettings.from_params(params, key)
        ckdir = root / "runs" / key / "checkpoints"
        steps = sorted(int(p.name.split("-")[1]) for p in ckdir.glob("checkpoint-*"))
        chosen = [steps[-1]] if a.steps == "last" else [int(s) for s in a.steps.split(",")]
        models = {}
        for dtype in ("float32", "bfloat16"):
            base, tok, _ = load_base_model(run.model, run.revision, "none", dtype)
            models[dtype] = Adapters(base, merge=True)
        prompter = Prompter(tok, run.pattern, run.verbalizer, params["evaluate"].get("max_length", run.max_length))
        rows = {t: io.read_jsonl(root / params["data"]["out"] / f"{t}.jsonl") for t in testsets}
        seqs = {t: prompter.encode([r["premise"] for r in rs], [r["hypothesis"] for r in rs]) for t, rs in rows.items()}
        per_run[key] = {}
        for step in chosen:
            res = {}
            for dtype, ad in models.items():
                model = ad.activate(ckdir / f"checkpoint-{step}", f"s{step}")
                t0 = time.perf_counter()
                res[dtype] = {t: score(model, s, prompter.verbalizer_ids, tok.pad_token_id) for t, s in seqs.items()}
                seconds[dtype] += time.perf_counter() - t0
            for t in testsets:
                (lp32, p32), (_, p16) = res["float32"][t], res["bfloat16"][t]
                flips = np.nonzero(p32 != p16)[0]
                margins = np.abs(lp32[:, 0] - lp32[:, 1])
                per_run[key][f"{step}/{t}"] = {"n": len(p32), "flips": int(len(flips))}
                all_flips += [float(margins[i]) for i in flips]
                total += len(p32)
            print(f"{key} step {step}: {sum(v['flips'] for v in per_run[key].values())} flips so far", flush=True)
    out = {
        "project": str(root),
        "native_bf16": native_bf16_cpu(),
        "threads": a.threads,
        "scored": total,
        "flips": len(all_flips),
        "agreement": 1 - len(all_flips) / total,
        "flip_fp32_margins": sorted(all_flips),
        "max_flip_margin": max(all_flips, default=None),
        "seconds": seconds,
        "bf16_speedup": seconds["float32"] / seconds["bfloat16"],
        "per_run": per_run,
    }
    print(json.dumps({k: v for k, v in out.items() if k != "per_run"}, indent=1))
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
