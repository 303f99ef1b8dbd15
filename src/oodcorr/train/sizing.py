"""Sizing a run before it runs (`oodcorr train --dry-run`): parameter counts on the meta device and a
peak GPU-memory estimate for QLoRA / LoRA / full fine-tuning, from the model config only."""

from __future__ import annotations

from oodcorr.modeling.model_loading import meta_model  # noqa: F401  (re-exported: preflight and the tests size models with it)
from oodcorr.settings.run_settings import OPTIMIZERS, RunSettings
from oodcorr.train.plan import checkpoint_schedule, plan_steps

GB = 1024**3

# Bytes per parameter / per activation element, documented rule of thumb for the estimate:
NF4_BYTES = 0.55  # 4-bit NF4 weights + double-quantised absmax/scales (bitsandbytes)
BF16_BYTES = 2.0  # frozen weights in bf16 (embeddings / lm_head are never quantised by bitsandbytes)
# QLoRA: peft's prepare_model_for_kbit_training casts every non-4-bit parameter (embeddings, norms, lm_head)
# to fp32, and LoRA weights are kept in fp32 on a 16-bit base (peft autocast_adapter_dtype).
QLORA_OTHER_BYTES = 4.0
LORA_BYTES = 4 + 4 + 8  # trainable LoRA params: fp32 weights + grads + AdamW moments (fp32 m, v)
LORA_BYTES_8BIT = 4 + 4 + 2  # the same with 8-bit AdamW moments (optim: paged_adamw_8bit)
FULL_BYTES = 16  # full fine-tuning with AdamW: bf16 weights 2 + grads 2 + fp32 master 4 + moments 8
ACT_BYTES = 34  # activations per token x hidden x layer in bf16 (Korthikanti et al., 2022, flash attention)
CKPT_ACT_BYTES = 2  # with gradient checkpointing: one bf16 hidden state kept per layer (+ one layer recomputed)
OVERHEAD = 1.0 * GB  # CUDA context, allocator fragmentation, kernels' workspace


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


def estimate_memory(
    config,
    batch_size: int,
    seq_len: int,
    lora_r: int = 8,
    lora_params: int | None = None,
    n_params: int | None = None,
    linear_params: int | None = None,
    gradient_checkpointing: bool | str = False,
    budget_gb: float = 24.0,
    optim: str = OPTIMIZERS[0],
) -> dict:
    """Peak GPU memory (GiB) for QLoRA (nf4), LoRA (bf16) and full fine-tuning (AdamW).

    Rule: weights (nf4 0.55 B/param for Linear layers, fp32 4 B for the rest under QLoRA; bf16 2 B for LoRA;
    full FT 16 B/param) + LoRA params x 16 B (10 B with 8-bit AdamW) + activations batch x seq x hidden x
    layers x 34 B (2 B with gradient checkpointing, plus one layer's full activations) + last-position
    logits (+ for QLoRA a bf16 copy of the output layer and of the largest 4-bit weight) + 1 GiB overhead.
    gradient_checkpointing "auto" sizes the GPU run, where it is on. `config` is a
    transformers config (or any object with hidden_size, num_hidden_layers, vocab_size). Parameter counts
    default to a dense-transformer formula."""
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
    if gradient_checkpointing == "auto":
        gradient_checkpointing = True  # the default on CUDA (run_settings.resolve_gradient_checkpointing)
    lora_bytes = LORA_BYTES_8BIT if optim == "paged_adamw_8bit" else LORA_BYTES
    per_token = layers * CKPT_ACT_BYTES + ACT_BYTES if gradient_checkpointing else layers * ACT_BYTES
    act = tokens * hidden * per_token
    act += batch_size * vocab * 4 * 3  # fp32 logits at the scored position, their softmax and grad
    # QLoRA transients: autocast's bf16 copy of the (fp32, see QLORA_OTHER_BYTES) output layer for its matmul,
    # and bitsandbytes' bf16 dequantisation of the largest 4-bit weight
    qlora_transient = (vocab * hidden + inter * hidden) * BF16_BYTES
    parts = {
        "qlora": linear_params * NF4_BYTES
        + other * QLORA_OTHER_BYTES
        + lora_params * lora_bytes
        + act
        + qlora_transient,
        "lora": n_params * BF16_BYTES + lora_params * lora_bytes + act,
        "full": n_params * FULL_BYTES + act,
    }
    out = {name: round((v + OVERHEAD) / GB, 2) for name, v in parts.items()}
    out.update(fits={name: out[name] <= budget_gb for name in parts}, budget_gb=budget_gb)
    out.update(activations_gb=round(act / GB, 2), n_params=int(n_params), lora_params=int(lora_params))
    return out


def model_estimate(
    model,
    targets: list[str],
    lora_r: int,
    batch_size: int,
    seq_len: int,
    gradient_checkpointing: bool | str = "auto",
    optim: str = OPTIMIZERS[0],
) -> tuple[dict, dict]:
    """(parameter counts, memory estimate) of a (meta-device) model: what `--dry-run` prints, and what
    bench/gpu/gpu_check.py compares with the measured peak."""
    counts = param_counts(model, targets, lora_r)
    mem = estimate_memory(
        model.config,
        batch_size,
        seq_len,
        lora_r,
        counts["lora"],
        counts["total"],
        counts["linear"],
        gradient_checkpointing,
        optim=optim,
    )
    return counts, mem


def dry_run_info(run: RunSettings) -> dict:
    """Sizes, steps, checkpoint steps and a peak-memory estimate, from the run's settings only (meta device)."""
    from oodcorr.modeling.model_loading import lora_targets
    from oodcorr.modeling.models import model_config

    model = meta_model(model_config(run.model, run.revision))
    targets = lora_targets(model, run.lora.target_modules)
    steps = len(plan_steps(run.shots, run.batch_size, run.grad_accum, run.epochs, run.max_steps, 0))
    counts, mem = model_estimate(
        model, targets, run.lora.r, run.batch_size, run.max_length, run.gradient_checkpointing, run.optimizer
    )
    trainable = counts["lora"] if run.finetune == "lora" else counts["total"]
    return {
        "run": run.run,
        "model": run.model,
        "params_total": counts["total"],
        "params_trainable": trainable,
        "lora_targets": targets,
        "steps": steps,
        "optim": run.optimizer,
        "gradient_checkpointing": run.gradient_checkpointing in (True, "auto"),  # auto: on for CUDA
        "checkpoint_steps": checkpoint_schedule(steps, run.checkpoints.every, run.checkpoints.log_spaced),
        "memory": mem,
    }


def print_dry_run(d: dict) -> None:
    import click

    m = d["memory"]
    click.echo(f"run {d['run']}: model {d['model']}")
    click.echo(
        f"  parameters: {d['params_total']:,} total, {d['params_trainable']:,} trainable "
        f"(LoRA on {', '.join(d['lora_targets'])})"
    )
    click.echo(f"  optimizer steps: {d['steps']}; checkpoints at {d['checkpoint_steps']}")
    click.echo(
        f"  estimated peak GPU memory (activations {m['activations_gb']} GiB, gradient checkpointing "
        f"{'on' if d.get('gradient_checkpointing') else 'off'}, {d.get('optim', 'adamw')}):"
    )
    for key, label in (("qlora", "QLoRA (nf4)"), ("lora", "LoRA (bf16)"), ("full", "full FT (AdamW)")):
        click.echo(
            f"    {label:16s} {m[key]:8.2f} GiB  fits in {m['budget_gb']:g} GB: {'yes' if m['fits'][key] else 'no'}"
        )
