"""One-shot GPU check: QLoRA training memory/speed vs `--dry-run`, evaluation throughput, OOM back-off.

Runs offline (no hub, no downloads): the paper's OLMo2-7B, OLMo2-13B and OPT-6.7B architectures (oodcorr's
built-in configs, models.HUB_CONFIGS) with random weights, built on the meta device and materialised layer by
layer directly on the GPU (nf4-quantised as it goes, so a 13B model never exists in 16 bits). For each shape:

  (a) QLoRA nf4 train steps at the paper's batch 8 x length 128, LoRA r=8 on q/k/v/o, through oodcorr's own
      add_lora / make_optimizer / autocast_for / batch_loss: peak GPU memory and seconds per step, against
      the `oodcorr train --dry-run` estimate (train.sizing.model_estimate);
  (b) checkpoint evaluation throughput of the adapter trained in (a): oodcorr's evaluator
      (evaluate.scoring.score, token budget from free memory) with the LoRA merged into bf16 weights
      (evaluate.scorer.Adapters), the same unmerged on the nf4 base, and a plain HF `model(**batch).logits`
      baseline padded to 128 (paper style); examples/s and % of the bf16 matmul rate measured here;
  (c) the out-of-memory back-off: a token budget forced far too high under a capped allocator
      (torch.cuda.set_per_process_memory_fraction) must halve until it fits and give the same predictions.

Writes one JSON (every number, the GPU's name, versions) and prints a table. Needs torch, transformers,
peft, accelerate and bitsandbytes only (no mlflow, dvc, pandas: checked and recorded in the JSON).

    python bench/gpu/gpu_check.py --out bench/gpu/results/gpu_check_<gpu>.json     # on the GPU, <= 8 minutes
    python bench/gpu/gpu_check.py --cpu-smoke --out /tmp/gpu_check_smoke.json  # same code, tiny shapes, CPU
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))  # runs from a bare checkout too

GIB = 1024**3
SHAPES = ("olmo2-7b", "olmo2-13b", "opt-6.7b")
# packages a bare GPU machine lacks: the check must not load them
NOT_ON_BARE_GPU = ("mlflow", "dvc", "pandas", "pyarrow", "click", "pingouin", "statsmodels", "matplotlib")
SMOKE = dict(
    hidden_size=64,
    intermediate_size=128,
    ffn_dim=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
    word_embed_proj_dim=64,
    vocab_size=512,
    max_position_embeddings=256,
)
TARGETS = {
    "qlora_peak_gib_max": 24.0,
    "dry_run_rel_error_max": 0.15,
    "eval_speedup_min": 3.0,
    "eval_matmul_fraction_min": 0.40,
}
MARGIN = 0.1  # log-prob margin above which bf16 rounding cannot flip a prediction
VERBALIZER = [101, 202]  # two token ids standing in for " Yes" / " No" (random weights: any ids will do)


def shape_config(name: str, smoke: bool):
    from transformers import AutoConfig

    from oodcorr.modeling.models import HUB_CONFIGS

    spec = dict(HUB_CONFIGS[name])
    model_type = spec.pop("model_type")
    if smoke:
        keep = {"opt": ("ffn_dim", "word_embed_proj_dim"), "olmo2": ("intermediate_size", "num_key_value_heads")}
        for key in (
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "vocab_size",
            "max_position_embeddings",
            *keep[model_type],
        ):
            spec[key] = SMOKE[key]
    return AutoConfig.for_model(model_type, pad_token_id=1, bos_token_id=2, eos_token_id=2, **spec)


def random_model(config, device: str, dtype, nf4: bool, seed: int = 0):
    """The architecture with N(0, 0.02) weights (norms 1, biases 0), built on the meta device and
    materialised module by module on `device`; with `nf4` every Linear but the output layer becomes a
    bitsandbytes Linear4bit with load_base_model's settings (model_loading.nf4_config: NF4, double quantisation),
    quantised as soon as its 16-bit weight exists. The same seed gives the same weights before quantisation."""
    import torch
    import torch.nn as nn
    from transformers import AutoModelForCausalLM

    from oodcorr.modeling.model_loading import attention_implementation, disable_cpu_repack

    attn = attention_implementation(device, dtype)
    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(
                config, dtype=dtype, **({"attn_implementation": attn} if attn else {})
            )
    except (ImportError, ValueError):  # flash-attn installed but unusable: SDPA, as load_base_model falls back
        if attn != "flash_attention_2":
            raise
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation="sdpa")
    gen = torch.Generator(device=device).manual_seed(seed)
    head = model.get_output_embeddings()
    tied = getattr(config, "tie_word_embeddings", False)
    for parent in list(model.modules()):
        for cname, child in list(parent.named_children()):
            if "Rotary" in type(child).__name__:  # buffers computed in __init__: rebuild on the device
                with torch.device(device):
                    setattr(parent, cname, type(child)(config=config))
            elif isinstance(child, nn.Linear) and child is not head:
                w = torch.empty(child.out_features, child.in_features, dtype=dtype, device=device)
                w.normal_(0.0, 0.02, generator=gen)
                bias = (
                    None
                    if child.bias is None
                    else nn.Parameter(torch.zeros(child.out_features, dtype=dtype, device=device), requires_grad=False)
                )
                if nf4:
                    import bitsandbytes as bnb

                    q = bnb.nn.Linear4bit(
                        child.in_features,
                        child.out_features,
                        bias=bias is not None,
                        compute_dtype=dtype,
                        compress_statistics=True,
                        quant_type="nf4",
                        device="meta",
                    )
                    q.weight = bnb.nn.Params4bit(
                        w, requires_grad=False, compress_statistics=True, quant_type="nf4", module=q
                    ).to(device)  # quantises
                    q.bias = bias
                    setattr(parent, cname, q)
                else:
                    child.weight = nn.Parameter(w, requires_grad=False)
                    child.bias = bias
                del w
    for module in model.modules():
        is_norm = "norm" in type(module).__name__.lower()
        for pname, p in list(module._parameters.items()):
            if p is None or not p.is_meta:
                continue
            if tied and module is head:
                continue  # tied to the input embeddings below
            t = torch.empty(p.shape, dtype=dtype, device=device)
            if is_norm and pname == "weight":
                t.fill_(1.0)
            elif pname == "bias":
                t.zero_()
            else:
                t.normal_(0.0, 0.02, generator=gen)
            module._parameters[pname] = nn.Parameter(t, requires_grad=False)
    if tied:
        model.tie_weights()
    left = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if left:
        raise RuntimeError(f"not materialised: {left[:5]}")
    if nf4:
        disable_cpu_repack(model)
        model.is_loaded_in_4bit = True  # what peft's prepare_model_for_kbit_training checks, as from_pretrained sets it
    model.config.pad_token_id = config.pad_token_id
    return model.eval()


def sync(device):
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def free_memory():
    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def matmul_tflops(device, dtype, size: int, reps: int = 10) -> float:
    import torch

    a = torch.randn(size, size, dtype=dtype, device=device)
    b = torch.randn(size, size, dtype=dtype, device=device)
    for _ in range(3):
        a @ b
    sync(device)
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync(device)
    return 2 * size**3 * reps / (time.perf_counter() - t) / 1e12


def eval_lengths(n: int, max_len: int, seed: int) -> list[int]:
    """NLI-like prompt lengths: mostly 30-80 tokens with a tail to max_len (the real testsets average ~54)."""
    rng = random.Random(seed)
    return [max(8, min(max_len, int(rng.gauss(0.42 * max_len, 0.18 * max_len)))) for _ in range(n)]


def random_seqs(lengths, vocab: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(n)] for n in lengths]


def train_check(config, device, dtype, args, ckpt_dir: Path) -> dict:
    """(a) QLoRA nf4 train steps through oodcorr's training functions; saves the adapter for (b)."""
    import torch

    from oodcorr.modeling.model_loading import add_lora, lora_targets, meta_model
    from oodcorr.settings.run_settings import RunSettings, resolve_gradient_checkpointing
    from oodcorr.train.loop import autocast_for, batch_loss, make_optimizer
    from oodcorr.train.sizing import model_estimate

    cuda = device.startswith("cuda")
    checkpointing = resolve_gradient_checkpointing("auto", device)
    meta = meta_model(config)
    targets = lora_targets(meta, "auto")
    counts, estimate = model_estimate(meta, targets, args.r, args.batch, args.length, checkpointing, args.optim)
    del meta
    free_memory()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    model = random_model(config, device, dtype, nf4=True, seed=args.seed)
    torch.manual_seed(args.seed)
    model = add_lora(
        model, {"r": args.r, "alpha": 32, "dropout": 0.1}, quantized=True, gradient_checkpointing=checkpointing
    )
    build_s = time.perf_counter() - t
    trainable = [p for p in model.parameters() if p.requires_grad]
    optim = args.optim if cuda else "adamw"
    run = RunSettings(
        run="gpu_check",
        model=str(config.model_type),
        train_set="random",
        id_testset="random",
        shots=2,
        lr=1e-4,
        weight_decay=0.0,
        optim=optim,
    )
    opt = make_optimizer(trainable, run, device)
    prompter = type("P", (), {"verbalizer_ids": VERBALIZER})()
    seqs = random_seqs([args.length] * args.batch, config.vocab_size, args.seed)
    labels = [i % 2 for i in range(args.batch)]
    model.train()
    times, losses = [], []
    for _ in range(args.steps):
        sync(device)
        t = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast_for(device):
            loss = batch_loss(model, prompter, seqs, labels, config.pad_token_id, "full_vocab") / len(seqs)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        sync(device)
        times.append(time.perf_counter() - t)
        losses.append(loss.item())
    model.save_pretrained(ckpt_dir)
    out = {
        "batch_size": args.batch,
        "seq_len": args.length,
        "lora_r": args.r,
        "optim": optim,
        "gradient_checkpointing": checkpointing,
        "lora_targets": targets,
        "params_total": counts["total"],
        "params_trainable": sum(p.numel() for p in trainable),
        "params_trainable_estimated": counts["lora"],
        "build_s": round(build_s, 2),
        "steps": args.steps,
        "seconds_per_step": round(min(times[1:] or times), 4),
        "seconds_first_step": round(times[0], 3),
        "losses": [round(x, 4) for x in losses],
        "dry_run_estimate_gib": estimate["qlora"],
        "dry_run_activations_gib": estimate["activations_gb"],
    }
    if cuda:
        peak_alloc = torch.cuda.max_memory_allocated() / GIB
        peak_reserved = torch.cuda.max_memory_reserved() / GIB
        measured = peak_reserved + args.context_gib  # what nvidia-smi would show at the peak
        out.update(
            {
                "peak_allocated_gib": round(peak_alloc, 2),
                "peak_reserved_gib": round(peak_reserved, 2),
                "cuda_context_gib": round(args.context_gib, 2),
                "peak_measured_gib": round(measured, 2),
                "dry_run_rel_error": round(estimate["qlora"] / measured - 1, 3),
            }
        )
    else:
        out.update(
            {
                "peak_allocated_gib": None,
                "peak_reserved_gib": None,
                "cuda_context_gib": None,
                "peak_measured_gib": None,
                "dry_run_rel_error": None,
            }
        )
    del model, opt, trainable
    free_memory()
    return out


def timed_score(model, seqs, device, **kw):
    """oodcorr's evaluator on `seqs` -> (logp, preds, seconds, stats); warmed up on a few sequences first."""
    from oodcorr.evaluate import scoring

    scoring.score(model, seqs[:8], VERBALIZER, kw.get("pad_id", 1))
    sync(device)
    stats = {}
    t = time.perf_counter()
    logp, preds = scoring.score(
        model, seqs, VERBALIZER, kw.get("pad_id", 1), stats=stats, token_budget=kw.get("token_budget")
    )
    sync(device)
    return logp, preds, time.perf_counter() - t, stats


def baseline_score(model, seqs, device, pad_id: int, pad_to: int, batch: int):
    """Paper style: every prompt padded to `pad_to`, full logits at every position, batch 8."""
    import torch

    out = []
    sync(device)
    t = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(seqs), batch):
            chunk = seqs[i : i + batch]
            ids = torch.full((len(chunk), pad_to), pad_id, dtype=torch.long)
            mask = torch.zeros((len(chunk), pad_to), dtype=torch.long)
            for j, s in enumerate(chunk):
                ids[j, : len(s)] = torch.tensor(s)
                mask[j, : len(s)] = 1
            logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits  # [B, L, V]
            last = mask.sum(1) - 1
            logp = torch.log_softmax(logits[torch.arange(len(chunk)), last.to(device)].float(), -1)
            out.append(logp[:, VERBALIZER].cpu())
    sync(device)
    logp = torch.cat(out).numpy()
    return logp, (logp[:, 1] > logp[:, 0]).astype("int64"), time.perf_counter() - t


def flops(n_params: int, head_params: int, real_tokens: int, n_examples: int) -> tuple[float, float]:
    """(conventional 2 x params x tokens, executed: the output layer at one row per example)."""
    return 2 * n_params * real_tokens, 2 * (n_params - head_params) * real_tokens + 2 * head_params * n_examples


def eval_entry(seconds, n, real_tokens, n_params, head_params, rate_tflops, stats=None) -> dict:
    conv, executed = flops(n_params, head_params, real_tokens, n)
    return {
        "examples": n,
        "seconds": round(seconds, 3),
        "examples_per_s": round(n / seconds, 2),
        "tflops_conventional": round(conv / seconds / 1e12, 3),
        "matmul_fraction_conventional": round(conv / seconds / 1e12 / rate_tflops, 3),
        "matmul_fraction_executed": round(executed / seconds / 1e12 / rate_tflops, 3),
        **({"token_budget": stats.get("initial_budget"), "batches": stats.get("batches")} if stats else {}),
    }


def oom_check(model, seqs, device, pad_id: int, ref_logp, args) -> dict:
    """(c) A token budget far too high: on CUDA under an allocator cap of the weights + `oom_headroom_gib`
    (a real torch.cuda.OutOfMemoryError), on CPU through scoring.SIMULATED_OOM_TOKENS; must back off and
    predict the same (other batch shapes round differently in bf16: compared where the reference margin
    between the two labels exceeds MARGIN; random weights put many examples near a tie)."""
    import numpy as np
    import torch

    from oodcorr.evaluate import scoring

    forced = 1 << 22
    cuda = device.startswith("cuda")
    free_memory()
    if cuda:
        index = torch.cuda.current_device()
        total = torch.cuda.get_device_properties(index).total_memory
        held = max(torch.cuda.memory_reserved(index), torch.cuda.memory_allocated(index))  # the cap is on reserved
        cap = (held + args.oom_headroom_gib * GIB) / total
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap), index)
        how = f"allocator capped at weights + {args.oom_headroom_gib} GiB ({cap:.3f} of the card)"
    else:
        scoring.SIMULATED_OOM_TOKENS = 4 * max(len(s) for s in seqs)
        how = f"simulated (scoring.SIMULATED_OOM_TOKENS={scoring.SIMULATED_OOM_TOKENS})"
    stats = {}
    try:
        t = time.perf_counter()
        logp, preds = scoring.score(model, seqs, VERBALIZER, pad_id, token_budget=forced, stats=stats)
        seconds = time.perf_counter() - t
        error = None
    except Exception as e:  # recorded, not raised: the rest of the check still runs
        logp = preds = seconds = None
        error = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    finally:
        if cuda:
            torch.cuda.set_per_process_memory_fraction(1.0, torch.cuda.current_device())
        scoring.SIMULATED_OOM_TOKENS = None
        free_memory()
    agree = clear_agree = max_diff = None
    if preds is not None:
        ref_preds = (ref_logp[:, 1] > ref_logp[:, 0]).astype("int64")
        clear = np.abs(ref_logp[:, 1] - ref_logp[:, 0]) > MARGIN
        agree = float(np.mean(preds == ref_preds))
        clear_agree = float(np.mean(preds[clear] == ref_preds[clear])) if clear.any() else 1.0
        max_diff = float(np.max(np.abs(logp - ref_logp)))
    return {
        "how": how,
        "forced_budget": forced,
        "oom_retries": stats.get("oom_retries"),
        "final_budget": stats.get("final_budget"),
        "batches": stats.get("batches"),
        "error": error,
        "seconds": None if seconds is None else round(seconds, 3),
        "prediction_agreement": agree,
        "prediction_agreement_clear_margin": clear_agree,
        "max_abs_logp_diff": max_diff,
        "works": error is None and (stats.get("oom_retries") or 0) > 0 and clear_agree == 1.0,
    }


def eval_check(config, device, dtype, args, ckpt_dir: Path, rate_tflops: float) -> dict:
    """(b) merged bf16 / unmerged nf4 / paper-style baseline, and (c) on the bf16 (else nf4) model."""
    import numpy as np
    import torch

    from oodcorr.evaluate.scorer import Adapters
    from oodcorr.modeling.model_loading import BF16_FIT_FRACTION, meta_model

    cuda = device.startswith("cuda")
    meta = meta_model(config)
    n_params = sum(p.numel() for p in meta.parameters())
    head_params = meta.get_output_embeddings().weight.numel()
    del meta
    pad = config.pad_token_id
    lengths = eval_lengths(args.eval_n, args.length, args.seed + 1)
    seqs = random_seqs(lengths, config.vocab_size, args.seed + 2)
    tokens = sum(lengths)
    base_seqs = seqs[: args.baseline_n]
    base_tokens = sum(len(s) for s in base_seqs)
    out = {
        "examples": len(seqs),
        "real_tokens": tokens,
        "mean_length": round(tokens / len(seqs), 1),
        "n_params": n_params,
    }
    fits = (not cuda) or 2 * n_params <= BF16_FIT_FRACTION * torch.cuda.get_device_properties(device).total_memory
    out["bf16_fits"] = bool(fits)
    merged_preds = oom = None
    if fits:
        base = random_model(config, device, dtype, nf4=False, seed=args.seed)
        adapters = Adapters(base, merge=True)
        t = time.perf_counter()
        model = adapters.activate(ckpt_dir, "trained")
        sync(device)
        merge_s = time.perf_counter() - t
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        merged_logp, merged_preds, secs, stats = timed_score(model, seqs, device, pad_id=pad)
        out["merged_bf16"] = {
            **eval_entry(secs, len(seqs), tokens, n_params, head_params, rate_tflops, stats),
            "activate_and_merge_s": round(merge_s, 3),
            "peak_allocated_gib": round(torch.cuda.max_memory_allocated() / GIB, 2) if cuda else None,
        }
        oom = oom_check(model, seqs[: args.oom_n], device, pad, merged_logp[: args.oom_n], args)
        adapters.unmerge()  # the paper-style baseline runs the same weights with the adapter unmerged
        b_logp, b_preds, b_secs = baseline_score(model, base_seqs, device, pad, args.length, 8)
        out["baseline_hf_padded"] = {
            **eval_entry(b_secs, len(base_seqs), base_tokens, n_params, head_params, rate_tflops),
            "model": "bf16 + unmerged LoRA (peft)",
            "pad_to": args.length,
            "batch_size": 8,
            "prediction_agreement_with_merged": float(np.mean(b_preds == merged_preds[: len(base_seqs)])),
            "max_abs_logp_diff_vs_merged": float(np.max(np.abs(b_logp - merged_logp[: len(base_seqs)]))),
        }
        del model, adapters, base
        free_memory()
    else:
        out["merged_bf16"] = {"skipped": "bf16 weights exceed model_loading.BF16_FIT_FRACTION of the card"}
    base = random_model(config, device, dtype, nf4=True, seed=args.seed)
    model = Adapters(base, merge=False).activate(ckpt_dir, "trained")
    nf4_logp, nf4_preds, secs, stats = timed_score(model, seqs, device, pad_id=pad)
    out["unmerged_nf4"] = {
        **eval_entry(secs, len(seqs), tokens, n_params, head_params, rate_tflops, stats),
        "prediction_agreement_with_merged": None if merged_preds is None else float(np.mean(nf4_preds == merged_preds)),
    }
    if not fits:
        oom = oom_check(model, seqs[: args.oom_n], device, pad, nf4_logp[: args.oom_n], args)
        b_logp, b_preds, b_secs = baseline_score(model, base_seqs, device, pad, args.length, 8)
        out["baseline_hf_padded"] = {
            **eval_entry(b_secs, len(base_seqs), base_tokens, n_params, head_params, rate_tflops),
            "model": "nf4 + unmerged LoRA (peft)",
            "pad_to": args.length,
            "batch_size": 8,
        }
    del model, base
    free_memory()
    best = out["merged_bf16"] if fits else out["unmerged_nf4"]
    out["speedup_vs_baseline"] = round(best["examples_per_s"] / out["baseline_hf_padded"]["examples_per_s"], 2)
    out["oom_backoff"] = oom
    return out


def loaded_forbidden() -> list[str]:
    return sorted({m.split(".")[0] for m in sys.modules} & set(NOT_ON_BARE_GPU))


def verdicts(shapes: dict) -> dict:
    """Each of the issue's targets, per shape where it applies (None where not measurable, e.g. on CPU)."""
    out = {}
    for name, r in shapes.items():
        tr, ev = r["train"], r["eval"]
        err = tr["dry_run_rel_error"]
        merged = ev["merged_bf16"].get("matmul_fraction_conventional")
        out[name] = {
            "qlora_fits_24gb": None
            if tr["peak_measured_gib"] is None
            else tr["peak_measured_gib"] <= TARGETS["qlora_peak_gib_max"],
            "dry_run_within_15pct": None if err is None else abs(err) <= TARGETS["dry_run_rel_error_max"],
            "eval_3x_baseline": ev["speedup_vs_baseline"] >= TARGETS["eval_speedup_min"],
            "eval_40pct_matmul": None if merged is None else merged >= TARGETS["eval_matmul_fraction_min"],
            "oom_backoff_works": ev["oom_backoff"]["works"],
        }
    return out


def print_table(res: dict) -> None:
    print(
        f"device: {res['device_name']} | bf16 matmul {res['matmul_tflops_bf16']:.3g} TFLOP/s | "
        f"torch {res['versions']['torch']} | {'CPU SMOKE (tiny shapes)' if res['cpu_smoke'] else 'full shapes'}"
    )
    head = (
        f"{'shape':10s} {'peak GiB':>9s} {'dry-run':>8s} {'err':>6s} {'s/step':>7s} | {'merged ex/s':>11s} "
        f"{'%mm':>5s} {'nf4 ex/s':>9s} {'base ex/s':>9s} {'x base':>6s} | {'OOM back-off':>14s}"
    )
    print(head)
    print("-" * len(head))

    def f(v, spec):
        return "-" if v is None else format(v, spec)

    for name, r in res["shapes"].items():
        tr, ev = r["train"], r["eval"]
        m = ev["merged_bf16"]
        oom = ev["oom_backoff"]
        print(
            f"{name:10s} {f(tr['peak_measured_gib'], '9.2f')} {tr['dry_run_estimate_gib']:8.2f} "
            f"{f(tr['dry_run_rel_error'], '+6.1%')} {tr['seconds_per_step']:7.3f} | "
            f"{f(m.get('examples_per_s'), '11.1f')} {f(m.get('matmul_fraction_conventional'), '5.0%')} "
            f"{ev['unmerged_nf4']['examples_per_s']:9.1f} {ev['baseline_hf_padded']['examples_per_s']:9.1f} "
            f"{ev['speedup_vs_baseline']:6.2f} | "
            f"{('ok, ' + str(oom['oom_retries']) + ' halvings') if oom['works'] else 'FAILED':>14s}"
        )
    for name, v in res["targets_met"].items():
        print(f"  {name}: " + ", ".join(f"{k}={'-' if x is None else ('yes' if x else 'NO')}" for k, x in v.items()))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="JSON file (default bench/gpu/results/gpu_check_<gpu>.json)")
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny shapes on the CPU (the test suite runs this)")
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--r", type=int, default=8)
    ap.add_argument("--optim", default="adamw", choices=["adamw", "paged_adamw_8bit"])
    ap.add_argument("--steps", type=int, default=4, help="train steps (the first is not timed)")
    ap.add_argument("--eval-n", type=int, default=2048, help="evaluation examples per mode")
    ap.add_argument("--baseline-n", type=int, default=256, help="examples for the (slow) baseline")
    ap.add_argument("--oom-n", type=int, default=512, help="examples for the OOM back-off check")
    ap.add_argument("--oom-headroom-gib", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    import torch

    if args.cpu_smoke:
        device = "cpu"
        args.length = min(args.length, 32)
        args.eval_n, args.baseline_n, args.oom_n = min(args.eval_n, 48), min(args.baseline_n, 16), min(args.oom_n, 24)
        args.steps = min(args.steps, 2)
        torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    else:
        if not torch.cuda.is_available():
            sys.exit("no CUDA GPU: run with --cpu-smoke for the CPU version")
        device = "cuda"
        torch.cuda.init()
        free, total = torch.cuda.mem_get_info()
        args.context_gib = (total - free - torch.cuda.memory_reserved()) / GIB  # context + other processes
    import peft
    import transformers

    from oodcorr.modeling.precision import resolve_dtype

    dtype = resolve_dtype("auto") if not args.cpu_smoke else torch.float32
    name = torch.cuda.get_device_name() if device == "cuda" else f"CPU ({platform.processor() or platform.machine()})"
    try:
        import bitsandbytes as bnb

        bnb_version = bnb.__version__
    except ImportError:
        sys.exit("bitsandbytes is not installed: see README 'GPU check' (install from a wheel file offline)")
    rate = matmul_tflops(device, torch.bfloat16 if device == "cuda" else dtype, 8192 if device == "cuda" else 256)
    res = {
        "device": device,
        "device_name": name,
        "cpu_smoke": args.cpu_smoke,
        "dtype": str(dtype).replace("torch.", ""),
        "versions": {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "transformers": transformers.__version__,
            "peft": peft.__version__,
            "bitsandbytes": bnb_version,
            "python": platform.python_version(),
        },
        "matmul_tflops_bf16": rate,
        "settings": {k: v for k, v in vars(args).items() if k != "out"},
        "targets": TARGETS,
        "shapes": {},
    }
    if device == "cuda":
        res["gpu_total_gib"] = round(torch.cuda.get_device_properties(0).total_memory / GIB, 1)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for shape in [s.strip() for s in args.shapes.split(",") if s.strip()]:
            config = shape_config(shape, args.cpu_smoke)
            ckpt = Path(tmp) / shape
            t = time.perf_counter()
            train = train_check(config, device, dtype, args, ckpt)
            ev = eval_check(config, device, dtype, args, ckpt, rate)
            res["shapes"][shape] = {"train": train, "eval": ev, "seconds": round(time.perf_counter() - t, 1)}
            print(f"{shape}: done in {res['shapes'][shape]['seconds']} s", file=sys.stderr)
    res["seconds_total"] = round(time.perf_counter() - t0, 1)
    res["targets_met"] = verdicts(res["shapes"])
    res["loaded_packages_absent_on_bare_gpu"] = loaded_forbidden()
    slug = "".join(c if c.isalnum() else "_" for c in name.lower()).strip("_")
    out = Path(args.out or Path(__file__).resolve().parent / "results" / f"gpu_check_{slug}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = out.with_suffix(".json.tmp")
    tmp_out.write_text(json.dumps(res, indent=2) + "\n")
    os.replace(tmp_out, out)  # atomic, without importing oodcorr.core.io's extras
    print_table(res)
    print(f"-> {out}")
    return res


if __name__ == "__main__":
    main()
