"""The model being trained: cheap checks before any weights load, then the base model wrapped for
LoRA / QLoRA (or made fully trainable), with its tokenizer and prompter."""

from __future__ import annotations

from oodcorr.train.plan import seed_all


def preflight(cfg: dict) -> None:
    """Fail in seconds, before loading weights: model reachable, verbaliser one token, LoRA targets exist."""
    from oodcorr.model_loading import load_tokenizer, lora_targets
    from oodcorr.models import check_available
    from oodcorr.prompts import Prompter
    from oodcorr.train.sizing import meta_model

    path = check_available(cfg["model"], cfg["revision"])
    Prompter(load_tokenizer(cfg["model"], cfg["revision"]), cfg["pattern"], cfg["verbalizer"], cfg["max_length"])
    if cfg["finetune"] == "lora":
        lora_targets(meta_model(path, cfg["revision"]), cfg["lora"]["target_modules"])


def prepare_model(cfg: dict, device: str | None = None):
    """Base model + tokenizer + prompter, wrapped for LoRA/QLoRA or made fully trainable."""
    import torch

    from oodcorr.model_loading import add_lora, load_base_model
    from oodcorr.prompts import Prompter
    from oodcorr.run_settings import resolve_gradient_checkpointing

    seed_all(cfg["seed"])
    quant = "none" if cfg["finetune"] == "full" and cfg["quantization"] == "auto" else cfg["quantization"]
    model, tok, info = load_base_model(cfg["model"], cfg["revision"], quant, cfg["dtype"], device=device)
    prompter = Prompter(tok, cfg["pattern"], cfg["verbalizer"], cfg["max_length"])
    checkpointing = resolve_gradient_checkpointing(cfg["gradient_checkpointing"], info["device"])
    info["gradient_checkpointing"] = checkpointing
    torch.manual_seed(cfg["seed"])  # LoRA A init depends only on the seed, not on how the base was loaded
    if cfg["finetune"] == "lora":
        model = add_lora(model, cfg["lora"], quantized=info["quantization"] == "nf4",
                         gradient_checkpointing=checkpointing)
    else:
        for p in model.parameters():
            p.requires_grad_(True)
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model, tok, prompter, info
