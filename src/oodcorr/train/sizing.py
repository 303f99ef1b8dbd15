"""Sizing a run before it runs (`oodcorr train --dry-run`): parameter counts on the meta device and a
peak GPU-memory estimate for QLoRA / LoRA / full fine-tuning, from the model config only."""

from __future__ import annotations

from oodcorr.run_settings import resolve_config
from oodcorr.train.plan import checkpoint_schedule, plan_steps

GB = 1024**3

# Bytes per parameter / per activation element, documented rule of thumb for the estimate:
NF4_BYTES = 0.55  # 4-bit NF4 weights + double-quantised absmax/scales (bitsandbytes)
BF16_BYTES = 2.0  # frozen weights in bf16 (embeddings / lm_head are never quantised by bitsandbytes)
LORA_BYTES = 2 + 2 + 8  # trainable LoRA params: weights + grads (bf16) + AdamW moments (fp32 m, v)
FULL_BYTES = 16  # full fine-tuning with AdamW: bf16 weights 2 + grads 2 + fp32 master 4 + moments 8
ACT_BYTES = 34  # activations per token x hidden x layer in bf16 (Korthikanti et al., 2022, flash attention)
CKPT_ACT_BYTES = 2  # with gradient checkpointing: one bf16 hidden state kept per layer (+ one layer recomputed)
OVERHEAD = 1.0 * GB  # CUDA context, allocator fragmentation, kernels' workspace


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
