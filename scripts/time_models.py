"""Per-step LoRA training time and conversion/load time of the embedded models on CPU.

    OMP_NUM_THREADS=1 python scripts/time_models.py --threads 1 2 --batch 8 --steps 4

Real MNLI training prompts (../shared/data/nli or data/raw/real), the default pattern, LoRA r=8 on the
attention projections (`auto`) and on all linear layers (`all`), loss full_vocab and verbalizer.
Prints one line per (model, threads, targets, loss): seconds per optimizer step (median of `--steps`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def prompts(n: int):
    here = Path(__file__).resolve().parents[1]
    for p in [
        here / "data/raw/real/mnli_train.jsonl",
        here.parent / "shared/data/nli/mnli/mnli_train_subset_10k.jsonl",
        Path("/work/shared/data/nli/mnli/mnli_train_subset_10k.jsonl"),
    ]:
        if p.exists():
            rows = [json.loads(line) for line in p.open()][:n]
            return [r["premise"] for r in rows], [r["hypothesis"] for r in rows]
    raise SystemExit("no MNLI training file found")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="+", default=["smollm2-135m", "gemma3-270m"])
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--targets", nargs="+", default=["auto", "all"])
    ap.add_argument("--losses", nargs="+", default=["full_vocab", "verbalizer"])
    a = ap.parse_args()
    import torch

    from oodcorr.modeling import model_loading, models
    from oodcorr.modeling.prompts import Prompter
    from oodcorr.train.loop import batch_loss

    prem, hyp = prompts(a.batch * (a.steps + 1))
    for name in a.models:
        t0 = time.time()
        models.model_path(name)
        t1 = time.time()
        for threads in a.threads:
            torch.set_num_threads(threads)
            for targets in a.targets:
                for loss in a.losses:
                    base, tok, _ = model_loading.load_base_model(name, quantization="none")
                    t_load = time.time() - t1
                    tm = "auto" if targets == "auto" else ALL_LINEAR
                    model = model_loading.add_lora(base, {"target_modules": tm})
                    model.train()
                    pr = Prompter(tok, max_length=a.max_length)
                    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
                    times = []
                    for s in range(a.steps + 1):
                        sl = slice(s * a.batch, (s + 1) * a.batch)
                        seqs = pr.encode(prem[sl], hyp[sl])
                        labels = [i % 2 for i in range(len(seqs))]
                        t = time.time()
                        out = batch_loss(model, pr, seqs, labels, tok.pad_token_id, loss)
                        out.backward()
                        opt.step()
                        opt.zero_grad()
                        times.append(time.time() - t)
                    ntok = sum(len(x) for x in seqs)
                    print(
                        json.dumps(
                            {
                                "model": name,
                                "threads": threads,
                                "targets": targets,
                                "loss": loss,
                                "batch": a.batch,
                                "s_per_step": round(statistics.median(times[1:]), 3),
                                "tokens_last_batch": ntok,
                                "convert_or_cached_s": round(t1 - t0, 1),
                                "load_s": round(t_load, 1),
                            }
                        ),
                        flush=True,
                    )
                    t1 = time.time()
                    del model, base, opt


if __name__ == "__main__":
    main()
