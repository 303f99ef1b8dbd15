"""The model being trained: cheap checks before any weights load, then the base model wrapped for
LoRA / QLoRA (or made fully trainable), with its tokenizer and prompter."""

from __future__ import annotations

from oodcorr.settings.run_settings import RunSettings
from oodcorr.train.plan import seed_all


def preflight(run: RunSettings) -> None:
    """Fail in seconds, before loading weights: model reachable, verbaliser one token, LoRA targets exist."""
    from oodcorr.modeling.model_loading import load_tokenizer, lora_targets
    from oodcorr.modeling.models import check_available
    from oodcorr.modeling.prompts import Prompter
    from oodcorr.train.sizing import meta_model

    path = check_available(run.model, run.revision)
    Prompter(load_tokenizer(run.model, run.revision), run.pattern, run.verbalizer, run.max_length)
    if run.finetune == "lora":
        lora_targets(meta_model(path, run.revision), run.lora.target_modules)


def prepare_model(run: RunSettings, device: str | None = None):
    """Base model + tokenizer + prompter, wrapped for LoRA/QLoRA or made fully trainable."""
    import torch

    from oodcorr.modeling.model_loading import add_lora, load_base_model
    from oodcorr.modeling.prompts import Prompter
    from oodcorr.settings.run_settings import resolve_gradient_checkpointing

    seed_all(run.seed)
    quant = "none" if run.finetune == "full" and run.quantization == "auto" else run.quantization
    model, tok, info = load_base_model(run.model, run.revision, quant, run.dtype, device=device)
    prompter = Prompter(tok, run.pattern, run.verbalizer, run.max_length)
    checkpointing = resolve_gradient_checkpointing(run.gradient_checkpointing, info["device"])
    info["gradient_checkpointing"] = checkpointing
    torch.manual_seed(run.seed)  # LoRA A init depends only on the seed, not on how the base was loaded
    if run.finetune == "lora":
        model = add_lora(model, run.lora, quantized=info["quantization"] == "nf4", gradient_checkpointing=checkpointing)
    else:
        for p in model.parameters():
            p.requires_grad_(True)
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model, tok, prompter, info
