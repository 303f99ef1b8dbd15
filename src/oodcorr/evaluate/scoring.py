"""Batched verbaliser scoring and NLI metrics, shared by `evaluate` and the benchmark.

Why a custom forward: the label is read at one position per example, so running the backbone and then the
output layer on those rows only (one [B, H] x [H, V] product) skips the [B, L, V] logits that dominate
memory and much of the compute of a plain `model(**batch).logits` for short NLI prompts.
"""

from __future__ import annotations

import math

from oodcorr.modeling.prompts import LABELS

POSITIVE = "non_entailment"  # the positive class of f1_non_entailment (the paper's OOD failure mode)
# Tokens per batch with batch_size "auto" on CPU: small enough that a layer's activations stay in cache
# (measured on a 2-core EPYC: ~1k tokens ran 2-3x faster than 8k, GEMMs are already efficient at ~1k rows).
CPU_TOKEN_BUDGET = 1024
GPU_TOKEN_BUDGET = 1 << 17  # the most tokens per batch on GPU; halved on out-of-memory
GPU_FREE_FRACTION = 0.7  # share of the free GPU memory a batch's activations may take
# Test seam: a batch with more tokens (rows x padded length) than this raises torch.cuda.OutOfMemoryError,
# as the GPU would, so the back-off path runs on CPU (bench/gpu/gpu_check.py --cpu-smoke, tests). None = off.
SIMULATED_OOM_TOKENS: int | None = None


def activation_bytes_per_token(config, dtype_bytes: int = 2) -> int:
    """Peak bytes one token of a batch needs in an inference forward: the residual stream and a layer's
    attention (q, k, v, output; SDPA/flash keep no L x L matrix) and MLP intermediates (gate, up, act),
    with a factor 2 for the allocator's transient copies."""
    hidden = config.hidden_size
    inter = getattr(config, "intermediate_size", None) or getattr(config, "ffn_dim", None) or 4 * hidden
    return 2 * dtype_bytes * (6 * hidden + 3 * inter)


def gpu_token_budget(config, free_bytes: int, dtype_bytes: int = 2) -> int:
    """Tokens per batch from the free GPU memory (GPU_FREE_FRACTION of it), capped at GPU_TOKEN_BUDGET."""
    per_token = activation_bytes_per_token(config, dtype_bytes)
    return int(max(256, min(GPU_TOKEN_BUDGET, GPU_FREE_FRACTION * free_bytes // per_token)))


def initial_token_budget(model, device) -> int:
    """CPU: CPU_TOKEN_BUDGET. CUDA: sized from torch.cuda.mem_get_info's free memory (gpu_token_budget)."""
    import torch

    if device.type != "cuda":
        return CPU_TOKEN_BUDGET
    free, _ = torch.cuda.mem_get_info(device)
    dtype_bytes = 4 if next(model.parameters()).dtype == torch.float32 else 2
    return gpu_token_budget(split_causal_lm(model)[2].config, free, dtype_bytes)


def split_causal_lm(model):
    """(backbone, output layer, causal LM) of a plain or peft-wrapped causal LM (Llama/OLMo2/OPT/...).
    `getattr(lm, lm.base_model_prefix)` is the module whose last hidden state feeds the output layer
    (for OPT that includes the decoder's final layer norm and projection)."""
    lm = model.get_base_model() if hasattr(model, "get_base_model") else model
    backbone = getattr(lm, lm.base_model_prefix)
    return backbone, lm.get_output_embeddings(), lm


def _finish_logits(lm, logits):
    """Model-specific logit transforms that live in the CausalLM forward (Cohere scale, Gemma2 soft cap)."""
    import torch

    cfg = lm.config
    if getattr(cfg, "logit_scale", None) not in (None, 1.0) and cfg.model_type.startswith("cohere"):
        logits = logits * cfg.logit_scale
    cap = getattr(cfg, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


def last_position_logprobs(model, input_ids, attention_mask, last):
    """Log-softmax over the full vocabulary at each row's last real token -> float32 [B, V]."""
    import torch

    backbone, head, lm = split_causal_lm(model)
    hidden = backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
    rows = hidden[torch.arange(hidden.shape[0], device=hidden.device), last]  # [B, H]
    logits = _finish_logits(lm, head(rows))
    return torch.log_softmax(logits.float(), dim=-1)


def batches(lengths: list[int], batch_size: int | None, token_budget: int):
    """Index batches, longest first, so padding is minimal and the first batch is the largest in memory."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    i = 0
    while i < len(order):
        n = batch_size or max(1, token_budget // max(1, lengths[order[i]]))
        yield order[i : i + n]
        i += n


def score(
    model,
    seqs: list[list[int]],
    verbalizer_ids: list[int],
    pad_id: int,
    batch_size="auto",
    on_batch=None,
    token_budget: int | None = None,
    stats: dict | None = None,
):
    """-> (logp [n, 2] float32 numpy in LABELS order, predictions [n] int: argmax over the two tokens).
    `batch_size` "auto" = a token budget per batch (`token_budget`, default initial_token_budget: sized from
    the free GPU memory); on CUDA out-of-memory the budget (or batch size) is halved and the batch retried.
    `on_batch(n_examples)` is called after each batch (progress); `stats`, when given, receives the
    starting and final budget, the batches run and the out-of-memory retries."""
    import numpy as np
    import torch

    device = next(model.parameters()).device
    fixed = None if batch_size in (None, "auto") else int(batch_size)
    budget = token_budget or initial_token_budget(model, device)
    info = {"initial_budget": budget, "batches": 0, "oom_retries": 0, "max_batch_tokens": 0}
    lengths = [len(s) for s in seqs]
    out = np.zeros((len(seqs), len(LABELS)), dtype=np.float32)
    vocab_ids = torch.tensor(verbalizer_ids, device=device)
    model.eval()
    pending = list(range(len(seqs)))
    with torch.inference_mode():
        while pending:
            done: list[int] = []
            try:
                for idx in batches([lengths[i] for i in pending], fixed, budget):
                    rows = [pending[j] for j in idx]
                    _score_batch(model, [seqs[r] for r in rows], pad_id, device, vocab_ids, out, rows, info)
                    done.extend(rows)
                    if on_batch:
                        on_batch(len(rows))
            except torch.cuda.OutOfMemoryError:
                oom = True
            else:
                oom = False
            if oom:  # outside the except block, so the failed batch's tensors are freed before retrying
                fixed, budget = _halved(fixed, budget, info)
            finished = set(done)
            pending = [i for i in pending if i not in finished]
    if stats is not None:
        stats.update(info, final_budget=budget, final_batch_size=fixed)
    # argmax of log-probs over two tokens == argmax of their logits (ties -> the first label, like torch.argmax)
    preds = (out[:, 1] > out[:, 0]).astype(np.int64)
    return out, preds


def _score_batch(model, batch: list[list[int]], pad_id: int, device, vocab_ids, out, rows: list[int], info: dict):
    """One padded batch's log-probs of the verbaliser tokens into out[rows]; `info` counts it."""
    import torch

    from oodcorr.modeling.prompts import pad_batch

    ids, mask, last = pad_batch(batch, pad_id)
    if SIMULATED_OOM_TOKENS is not None and ids.numel() > SIMULATED_OOM_TOKENS:
        raise torch.cuda.OutOfMemoryError(f"simulated: {ids.numel()} tokens > {SIMULATED_OOM_TOKENS}")
    logp = last_position_logprobs(model, ids.to(device), mask.to(device), last.to(device))
    out[rows] = logp[:, vocab_ids].cpu().numpy()
    info["batches"] += 1
    info["max_batch_tokens"] = max(info["max_batch_tokens"], int(ids.numel()))


def _halved(fixed: int | None, budget: int, info: dict) -> tuple[int | None, int]:
    """After an out-of-memory error: (batch size, token budget) with the one in use halved; at 1, re-raised."""
    import torch

    info["oom_retries"] += 1
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    if fixed is not None:
        if fixed == 1:
            raise torch.cuda.OutOfMemoryError("out of memory with batch size 1")
        return max(1, fixed // 2), budget
    if budget <= 1:
        raise torch.cuda.OutOfMemoryError("out of memory with a token budget of 1")
    return fixed, budget // 2


def metrics(labels, preds) -> dict:
    """accuracy, F1 of non_entailment, macro-F1 over both labels, n (labels/preds: LABELS indices or names).
    F1 of a class with no true and no predicted examples is 0 (sklearn's zero_division=0)."""
    lab = [LABELS.index(x) if isinstance(x, str) else int(x) for x in labels]
    pre = [LABELS.index(x) if isinstance(x, str) else int(x) for x in preds]
    n = len(lab)
    if n == 0:
        return {"accuracy": math.nan, "f1_non_entailment": math.nan, "macro_f1": math.nan, "n": 0}
    f1 = []
    for c in range(len(LABELS)):
        tp = sum(1 for a, b in zip(lab, pre) if a == c and b == c)
        fp = sum(1 for a, b in zip(lab, pre) if a != c and b == c)
        fn = sum(1 for a, b in zip(lab, pre) if a == c and b != c)
        f1.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    acc = sum(1 for a, b in zip(lab, pre) if a == b) / n
    return {"accuracy": acc, "f1_non_entailment": f1[LABELS.index(POSITIVE)], "macro_f1": sum(f1) / len(f1), "n": n}


def metrics_by_slice(labels, preds, slices) -> list[tuple[str | None, dict]]:
    """[(None, whole testset), (slice, metrics) for each slice in sorted order]."""
    out = [(None, metrics(labels, preds))]
    names = sorted({s for s in slices if s not in (None, "")}, key=str)
    for name in names:
        keep = [i for i, s in enumerate(slices) if s == name]
        out.append((str(name), metrics([labels[i] for i in keep], [preds[i] for i in keep])))
    return out
