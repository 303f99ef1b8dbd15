"""CPU thread policy: evaluation throughput (SmolLM2-135M, examples/s) with torch's default threads vs the
same with one core kept busy by another process, vs 1 thread and vs oodcorr's policy (oodcorr.modeling.threads).
Ratios are against the default on an idle machine, all in one process; writes bench/speed/results/threads.json.

    PYTHONPATH=src .venv/bin/python bench/speed/threads.py [--n 32] [--model smollm2-135m]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.pop("OMP_NUM_THREADS", None)  # measure torch's real default (one thread per core)
HERE = Path(__file__).resolve().parent
WORDS = "the a doctor lawyer artist saw helped park station never not who thinks quickly red big".split()


def busy_loop(core: int) -> subprocess.Popen:
    code = f"import os; os.sched_setaffinity(0, {{{core}}})\nwhile True: pass"
    return subprocess.Popen([sys.executable, "-c", code])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()

    import torch

    from oodcorr.evaluate.scoring import score
    from oodcorr.modeling import threads
    from oodcorr.modeling.model_loading import load_base_model
    from oodcorr.modeling.prompts import DEFAULT_PATTERN, DEFAULT_VERBALIZER, Prompter

    default_threads = torch.get_num_threads()
    model, tok, _ = load_base_model(args.model, quantization="none", dtype="float32", device="cpu")
    model.eval()
    prompter = Prompter(tok, DEFAULT_PATTERN, DEFAULT_VERBALIZER, 96)
    rng = random.Random(0)
    prem = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 40))) for _ in range(args.n)]
    hyp = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 10))) for _ in range(args.n)]
    seqs = prompter.encode(prem, hyp)

    def rate(n_threads: int) -> float:
        torch.set_num_threads(n_threads)
        best = 0.0
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            with torch.inference_mode():
                score(model, seqs, prompter.verbalizer_ids, tok.pad_token_id, 8)
            best = max(best, args.n / (time.perf_counter() - t0))
        print(f"  {n_threads} thread(s): {best:.2f} ex/s", flush=True)
        return best

    print("warm-up", flush=True)
    rate(1)  # warm-up
    res = {
        "cores": os.cpu_count(),
        "default_threads": default_threads,
        "n": args.n,
        "model": args.model,
        "loadavg_start": os.getloadavg(),
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    res["idle_policy_threads"] = threads.auto_threads()
    res["idle_default"] = rate(default_threads)
    res["idle_1_thread"] = rate(1)
    proc = busy_loop(0)
    try:
        time.sleep(1.0)
        res["busy_policy_threads"] = threads.auto_threads()
        res["busy_default"] = rate(default_threads)
        res["busy_1_thread"] = rate(1)
        res["busy_policy"] = rate(res["busy_policy_threads"])
    finally:
        proc.kill()
        proc.wait()
    res["loadavg_end"] = os.getloadavg()
    base = res["idle_default"]
    res["ratios_vs_idle_default"] = {
        k: round(res[k] / base, 3)
        for k in ("idle_default", "idle_1_thread", "busy_default", "busy_1_thread", "busy_policy")
    }
    res["slowdown_busy_default"] = round(base / res["busy_default"], 2)
    res["slowdown_busy_policy"] = round(base / res["busy_policy"], 2)
    for k in ("idle_default", "idle_1_thread", "busy_default", "busy_1_thread", "busy_policy"):
        print(f"{k:15s} {res[k]:7.2f} ex/s  x{res['ratios_vs_idle_default'][k]:.2f}")
    print(
        f"policy threads: idle {res['idle_policy_threads']}, one core busy {res['busy_policy_threads']}; "
        f"busy core costs {res['slowdown_busy_default']}x with default threads, "
        f"{res['slowdown_busy_policy']}x with the policy"
    )
    out = HERE / "results" / "threads.json"
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"-> {out}")


if __name__ == "__main__":
    main()
