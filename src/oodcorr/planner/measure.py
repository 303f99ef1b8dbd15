"""This machine's rates for a model at a dtype, measured when a plan first needs them (rates.py keeps them).

Scoring: the stages' forward for a label (the backbone, then the output layer at each prompt's last token only) on
NLI-length prompts (MEASURE_TOKENS tokens, the typical premise + hypothesis + question), batches of about the
CPU's token budget, for about SCORING_S seconds after one warm-up batch. Training: LoRA on the same prompts,
forward, backward and an AdamW step at the default batch size, for about TRAINING_S seconds. Both run on the
device the stages would use, with the model loaded exactly as they load it (modeling.model_loading).
"""

from __future__ import annotations

import time

from oodcorr.settings import environment

SCORING_S = 45.0
TRAINING_S = 30.0
SECONDS_ENV = environment.MEASURE_ENV  # seconds per measurement instead (a quick, rougher one)
MEASURE_TOKENS = 54  # real tokens per NLI prompt, the median of the bench's 648 (bench/speed/eval_throughput.py)
BATCH_TOKENS = 1024  # tokens per scoring batch on CPU, as the evaluate stage batches them
WORDS = (
    "the a man woman dog child is are was on in at with playing running sitting near a park street field "
    "because while after before several people some music ball water food"
).split()


def _seconds(default: float) -> float:
    return environment.read(SECONDS_ENV, default)  # parsed where `study check` parses it too


def _prompts(n: int, seed: int = 0) -> list[str]:
    import random

    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS) for _ in range(MEASURE_TOKENS - 8)) + " Question: is it true? Yes or No?"
        for _ in range(n)
    ]


def _load(model_name: str, dtype: str):
    from transformers.utils import logging as hf_logging

    from oodcorr.modeling.model_loading import load_base_model

    hf_logging.disable_progress_bar()  # the plan's own line says what is being measured
    model, tok, info = load_base_model(model_name, quantization="none", dtype=dtype)
    return model, tok, info


def _batch(tok, texts, device):
    enc = tok(texts, return_tensors="pt", padding=True, truncation=True, max_length=2 * MEASURE_TOKENS)
    return enc["input_ids"].to(device), enc["attention_mask"].to(device)


def measure_scoring(model_name: str, dtype: str, seconds: float | None = None) -> tuple[float, str]:
    """(examples/s, a line saying how it was measured)."""
    import torch

    seconds = seconds or _seconds(SCORING_S)
    model, tok, info = _load(model_name, dtype)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"  # the last token is every row's last position
    device = next(model.parameters()).device
    per_batch = max(1, BATCH_TOKENS // MEASURE_TOKENS) if device.type == "cpu" else 256
    backbone = getattr(model, model.base_model_prefix)
    head = model.get_output_embeddings()
    model.eval()
    done, spent, first = 0, 0.0, True
    with torch.inference_mode():
        while spent < seconds or done < 2 * per_batch:
            ids, mask = _batch(tok, _prompts(per_batch, done), device)
            t0 = time.perf_counter()
            hidden = backbone(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
            head(hidden[:, -1]).float().log_softmax(-1)
            if device.type == "cuda":
                torch.cuda.synchronize()
            if first:  # warm-up: not counted
                first = False
                continue
            spent += time.perf_counter() - t0
            done += per_batch
    eps = done / spent
    return eps, (
        f"measured {time.strftime('%Y-%m-%d')}: {done} prompts of ~{MEASURE_TOKENS} tokens in "
        f"{spent:.0f} s ({info['device']}, {info['dtype']})"
    )


def measure_training(model_name: str, dtype: str, seconds: float | None = None) -> tuple[float, str]:
    """(seconds per training step at the default batch size, a line saying how it was measured)."""
    import torch

    from oodcorr.modeling.model_loading import add_lora
    from oodcorr.settings.run_settings import RunSettings

    seconds = seconds or _seconds(TRAINING_S)
    model, tok, info = _load(model_name, dtype)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = add_lora(model)
    model.train()
    device = next(model.parameters()).device
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=RunSettings.lr)
    bs = RunSettings.batch_size
    steps, spent, first = 0, 0.0, True
    while spent < seconds or steps < 2:
        ids, mask = _batch(tok, _prompts(bs, steps), device)
        t0 = time.perf_counter()
        loss = model(input_ids=ids, attention_mask=mask, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        if first:
            first = False
            continue
        spent += time.perf_counter() - t0
        steps += 1
    return spent / steps, (
        f"measured {time.strftime('%Y-%m-%d')}: {steps} LoRA steps of {bs} prompts in "
        f"{spent:.0f} s ({info['device']}, {info['dtype']})"
    )
