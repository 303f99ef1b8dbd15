"""The training plan, from the config alone: the few-shot draw, the step plan (which examples each
optimizer step sees), the checkpoint schedule, and the RNG state a resume restores.

The step plan is a pure function of (n_examples, batch sizes, epochs, seed), so a resumed run replays the
exact same batches without having to restore a data loader.
"""

from __future__ import annotations

import math
import random

from oodcorr.core.errors import UserError


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
            raise UserError(
                f"params: shots={shots} (balanced) needs {shots // 2} {label} examples, the pool has {len(rows)}"
            )
        picked += rng.sample(rows, shots // 2)
    rng.shuffle(picked)
    return picked


def examples_digest(examples: list[dict]) -> str:
    """Content hash of the drawn shots: re-prepared data with other rows must not reuse old checkpoints."""
    import hashlib
    import json

    rows = [[e["id"], e["premise"], e["hypothesis"], e["label"]] for e in examples]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def plan_steps(
    n_examples: int, batch_size: int, grad_accum: int, epochs: float, max_steps: int | None, seed: int
) -> list[list[list[int]]]:
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
        micro = [perm[i : i + batch_size] for i in range(0, n_examples, batch_size)]
        steps += [micro[i : i + grad_accum] for i in range(0, len(micro), grad_accum)]
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
