"""Training plan helpers that need no weights: the few-shot draw, the step plan (which examples each
optimizer step sees), the checkpoint schedule, the RNG state a resume restores, and a GPU-memory estimate
from the model config (for `oodcorr train --dry-run`).

The step plan is a pure function of (n_examples, batch sizes, epochs, seed), so a resumed run replays the
exact same batches without having to restore a data loader.
"""

from __future__ import annotations

import math
import random

from oodcorr.errors import UserError

GB = 1024**3

# Bytes per parameter / per activation element, documented rule of thumb for the estimate:
NF4_BYTES = 0.55  # 4-bit NF4 weights + double-quantised absmax/scales (bitsandbytes)
BF16_BYTES = 2.0  # frozen weights in bf16 (embeddings / lm_head are never quantised by bitsandbytes)
LORA_BYTES = 2 + 2 + 8  # trainable LoRA params: weights + grads (bf16) + AdamW moments (fp32 m, v)
FULL_BYTES = 16  # full fine-tuning with AdamW: bf16 weights 2 + grads 2 + fp32 master 4 + moments 8
ACT_BYTES = 34  # activations per token x hidden x layer in bf16 (Korthikanti et al., 2022, flash attention)
CKPT_ACT_BYTES = 2  # with gradient checkpointing: one bf16 hidden state kept per layer (+ one layer recomputed)
OVERHEAD = 1.0 * GB  # CUDA context, allocator fragmentation, kernels' workspace


def sample_shots(pool: list[dict], shots: int, sampling: str, data_seed: int) -> list[dict]:
    """`shots` rows drawn with `data_seed`: balanced = shots/2 per label, uniform = any label mix."""
    rng = random.Random(data_seed)
    if shots > len(pool):
        raise UserError(f"params: shots={shots} but the training pool has only {len(pool)} examples")
    if sampling == "uniform":
        return rng.sample(pool, shots)
    picked = []
    for label in ("entailment", "non_entailment"):
        rows = [r for r in pool if r["label"] == label]
        if len(rows) < shots // 2:
            raise UserError(f"params: shots={shots} (balanced) needs {shots // 2} {label} examples, "
                        f"the pool has {len(rows)}")
        picked += rng.sample(rows, shots // 2)
    rng.shuffle(picked)
    return picked


def examples_digest(examples: list[dict]) -> str:
    """Content hash of the drawn shots: re-prepared data with other rows must not reuse old checkpoints."""
    import hashlib
    import json

    rows = [[e["id"], e["premise"], e["hypothesis"], e["label"]] for e in examples]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def plan_steps(n_examples: int, batch_size: int, grad_accum: int, epochs: float, max_steps: int | None,
               seed: int) -> list[list[list[int]]]:
    """steps[k] = the micro-batches (lists of example indices) of optimizer step k+1. Each epoch is a
    seeded permutation; the last micro-batch / step of an epoch may be smaller. `max_steps` (when set)
    replaces `epochs`, cycling through further epochs as needed."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    per_epoch = math.ceil(math.ceil(n_examples / batch_size) / grad_accum)
    total = max_steps if max_steps else max(1, math.ceil(epochs * per_epoch))
    steps: list[list[list[int]]] = []
    while len(steps) < total:
        perm = torch.randperm(n_examples, generator=gen).tolist()
        micro = [perm[i: i + batch_size] for i in range(0, n_examples, batch_size)]
        steps += [micro[i: i + grad_accum] for i in range(0, len(micro), grad_accum)]
    return steps[:total]


def checkpoint_schedule(total_steps: int, every: int | None = None, log_spaced: int | None = None) -> list[int]:
    """Sorted unique steps to checkpoint: always 0 (the untouched base) and the final step; `every: N`
    adds N, 2N, ...; otherwise `log_spaced: K` adds K geometrically spaced steps in [1, total]."""
    steps = {0, total_steps}
    if every:
        steps.update(range(every, total_steps, every))
    elif log_spaced and log_spaced > 1 and total_steps > 1:
        ratio = total_steps ** (1 / (log_spaced - 1))
        steps.update(min(total_steps, max(1, round(ratio**i))) for i in range(log_spaced))
    return sorted(steps)


# RNG state of every generator training touches (dropout, LoRA init), saved with the newest checkpoint.
def rng_state() -> dict:
    import numpy as np
    import torch

    state = {"torch": torch.get_rng_state(), "python": random.getstate(), "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    import numpy as np
    import torch

    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_all(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def meta_model(model_path, revision: str | None = None):
    """The architecture on the meta device (no weights read, no memory used); `model_path` may be a config."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig

    config = model_path if isinstance(model_path, PretrainedConfig) else AutoConfig.from_pretrained(
        model_path, revision=revision)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return model


def param_counts(model, lora_targets: list[str], lora_r: int) -> dict:
    """Total parameters, those inside quantisable Linear layers (not lm_head), and the LoRA parameters
    that r-rank adapters on `lora_targets` would add."""
    import torch.nn as nn

    total = sum(p.numel() for p in model.parameters())
    linear = lora = 0
    head = model.get_output_embeddings()
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and module is not head:
            linear += module.weight.numel()
            if name.rsplit(".", 1)[-1] in lora_targets:
                lora += lora_r * (module.in_features + module.out_features)
    # GPT-2 style Conv1D projections count as linear too
    for name, module in model.named_modules():
        if module.__class__.__name__ == "Conv1D":
            linear += module.weight.numel()
            if name.rsplit(".", 1)[-1] in lora_targets:
                lora += lora_r * sum(module.weight.shape)
    return {"total": total, "linear": linear, "lora": lora}


def estimate_memory(config, batch_size: int, seq_len: int, lora_r: int = 8, lora_params: int | None = None,
                    n_params: int | None = None, linear_params: int | None = None,
                    gradient_checkpointing: bool = False, budget_gb: float = 24.0) -> dict:
    """Peak GPU memory (GiB) for QLoRA (nf4), LoRA (bf16) and full fine-tuning (AdamW).

    Rule: weights (nf4 0.55 B/param for Linear layers, bf16 2 B for the rest; bf16 2 B for LoRA;
    full FT 16 B/param) + LoRA params x 12 B + activations batch x seq x hidden x layers x 34 B
    (2 B with gradient checkpointing, plus one layer's full activations) + last-position logits
    + 1 GiB overhead. `config` is a transformers config (or any object with hidden_size,
    num_hidden_layers, vocab_size). Parameter counts default to a dense-transformer formula."""
    hidden = config.hidden_size
    layers = config.num_hidden_layers
    vocab = config.vocab_size
    inter = getattr(config, "intermediate_size", None) or getattr(config, "ffn_dim", None) or 4 * hidden
    if linear_params is None:
        linear_params = layers * (4 * hidden * hidden + 3 * inter * hidden)
    if n_params is None:
        tied = getattr(config, "tie_word_embeddings", False)
        n_params = linear_params + vocab * hidden * (1 if tied else 2) + layers * 2 * hidden
    if lora_params is None:
        lora_params = layers * 4 * lora_r * 2 * hidden  # q, k, v, o projections
    other = n_params - linear_params
    tokens = batch_size * seq_len
    if gradient_checkpointing:
        act = tokens * hidden * (layers * CKPT_ACT_BYTES + ACT_BYTES)
    else:
        act = tokens * hidden * layers * ACT_BYTES
    act += batch_size * vocab * 4 * 3  # fp32 logits at the scored position, their softmax and grad
    parts = {
        "qlora": linear_params * NF4_BYTES + other * BF16_BYTES + lora_params * LORA_BYTES + act,
        "lora": n_params * BF16_BYTES + lora_params * LORA_BYTES + act,
        "full": n_params * FULL_BYTES + act,
    }
    out = {name: round((v + OVERHEAD) / GB, 2) for name, v in parts.items()}
    out.update({
        "fits": {name: out[name] <= budget_gb for name in parts}, "budget_gb": budget_gb,
        "activations_gb": round(act / GB, 2), "n_params": int(n_params), "lora_params": int(lora_params),
    })
    return out


def dry_run_info(params: dict, run_key: str) -> dict:
    """Sizes, steps, checkpoint steps and a peak-memory estimate, from the config only (meta device)."""
    from oodcorr.models import lora_targets, model_config
    from oodcorr.train import resolve_config

    cfg = resolve_config(params, run_key)
    model = meta_model(model_config(cfg["model"], cfg["revision"]))
    targets = lora_targets(model, cfg["lora"]["target_modules"])
    counts = param_counts(model, targets, cfg["lora"]["r"])
    steps = len(plan_steps(cfg["shots"], cfg["batch_size"], cfg["grad_accum"], cfg["epochs"], cfg["max_steps"], 0))
    mem = estimate_memory(model.config, cfg["batch_size"], cfg["max_length"], cfg["lora"]["r"], counts["lora"],
                          counts["total"], counts["linear"], cfg["gradient_checkpointing"])
    trainable = counts["lora"] if cfg["finetune"] == "lora" else counts["total"]
    return {"run": run_key, "model": cfg["model"], "params_total": counts["total"], "params_trainable": trainable,
            "lora_targets": targets, "steps": steps, "checkpoint_steps": checkpoint_schedule(
                steps, cfg["checkpoints"].get("every"), cfg["checkpoints"].get("log_spaced")), "memory": mem}


def print_dry_run(d: dict) -> None:
    import click

    m = d["memory"]
    click.echo(f"run {d['run']}: model {d['model']}")
    click.echo(f"  parameters: {d['params_total']:,} total, {d['params_trainable']:,} trainable "
               f"(LoRA on {', '.join(d['lora_targets'])})")
    click.echo(f"  optimizer steps: {d['steps']}; checkpoints at {d['checkpoint_steps']}")
    click.echo(f"  estimated peak GPU memory (activations {m['activations_gb']} GiB):")
    for key, label in (("qlora", "QLoRA (nf4)"), ("lora", "LoRA (bf16)"), ("full", "full FT (AdamW)")):
        click.echo(f"    {label:16s} {m[key]:8.2f} GiB  fits in {m['budget_gb']:g} GB: "
                   f"{'yes' if m['fits'][key] else 'no'}")
