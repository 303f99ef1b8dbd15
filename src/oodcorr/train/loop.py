"""The optimisation loop: the verbaliser-token loss, data-parallel gradient sums, checkpoints on the
schedule, and an exact resume from the newest checkpoint's training state."""

from __future__ import annotations

import contextlib
import math
import os

from oodcorr.records.rundir import checkpoint_dirs
from oodcorr.settings import environment
from oodcorr.settings.project import Project
from oodcorr.settings.run_settings import RunSettings
from oodcorr.train.checkpoints import has_state, load_state, load_weights, save_checkpoint
from oodcorr.train.mlflow_log import MetricLog
from oodcorr.train.plan import rng_state, set_rng_state

KILL_ENV = environment.KILL_ENV  # tests: hard-exit after this step (simulates a kill)


def batch_loss(model, prompter, seqs, labels, pad_id: int, loss: str = "full_vocab"):
    """Summed cross-entropy of the verbaliser token at each prompt's last non-pad position (over the full
    vocabulary, or over the two verbaliser logits with loss=verbalizer)."""
    import torch
    import torch.nn.functional as F

    from oodcorr.modeling.prompts import pad_batch

    device = next(p for p in model.parameters() if p.device.type != "meta").device
    ids, mask, last = pad_batch(seqs, pad_id)
    out = model(
        input_ids=ids.to(device), attention_mask=mask.to(device), logits_to_keep=last.unsqueeze(1).to(device)
    )  # only the scored position reaches lm_head
    logits = out.logits[:, 0, :].float()
    vids = torch.tensor(prompter.verbalizer_ids, device=device)
    target = torch.tensor(labels, device=device)
    if loss == "verbalizer":
        return F.cross_entropy(logits[:, vids], target, reduction="sum")
    return F.cross_entropy(logits, vids[target], reduction="sum")


def make_optimizer(params, run: RunSettings, device: str | None):
    """AdamW (torch), or with `optim: paged_adamw_8bit` bitsandbytes' paged 8-bit AdamW (CUDA only: 8-bit
    moments, optimizer state paged to CPU memory under pressure instead of running out of memory)."""
    import torch

    if run.optimizer == "paged_adamw_8bit":
        from oodcorr.core.errors import UserError

        if not str(device or "").startswith("cuda"):
            raise UserError(f"params: runs.{run.run}.optim: paged_adamw_8bit needs a CUDA GPU; use adamw")
        try:
            import bitsandbytes as bnb
        except ImportError:
            raise UserError(
                f"params: runs.{run.run}.optim: paged_adamw_8bit needs bitsandbytes (pip install bitsandbytes)"
            ) from None
        return bnb.optim.PagedAdamW8bit(params, lr=run.lr, weight_decay=run.weight_decay)
    return torch.optim.AdamW(params, lr=run.lr, weight_decay=run.weight_decay)


def autocast_for(device: str | None):
    """bf16 autocast on a CUDA device that supports it (any index, e.g. cuda:1), else nothing."""
    import torch

    if str(device or "").startswith("cuda") and torch.cuda.is_bf16_supported():
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _resume(model, ckpt_dir, opt, sched, run: RunSettings, meta: dict, rank: int) -> int:
    """The step to go on from: the newest checkpoint with a training state (its weights, optimizer, scheduler and
    RNG state restored), else 0 (process 0 saves checkpoint 0 first)."""
    resumable = {s: d for s, d in checkpoint_dirs(ckpt_dir).items() if has_state(d)}
    if resumable:
        start, ckpt = max(resumable.items())
        state = load_state(ckpt)
        load_weights(model, ckpt, run.finetune)
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        set_rng_state(state["rng"])
        return start
    if rank == 0:
        save_checkpoint(model, ckpt_dir, 0, meta, _state(opt, sched, 0), run)
    return 0


def _gradients(model, prompter, pad_id, run: RunSettings, data: tuple, micro, autocast, rank: int, world: int) -> float:
    """One step's gradients, accumulated over its micro-batches (this process's share of each: every world-th
    example), each loss divided by the step's example count; returns the step's loss (this process's part)."""
    seqs, labels = data
    n = sum(len(mb) for mb in micro)
    step_loss = 0.0
    for mb in micro:
        shard = mb[rank::world]
        if not shard:
            continue
        with autocast:
            loss = batch_loss(model, prompter, [seqs[i] for i in shard], [labels[i] for i in shard], pad_id, run.loss)
            loss = loss / n
        loss.backward()
        step_loss += loss.item()
    return step_loss


def _sum_over_processes(trainable, step_loss: float) -> float:
    """Gradients (zeros where a process had none) and the step's loss summed over the processes."""
    import torch

    from oodcorr.modeling import distributed

    for p in trainable:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    summed = torch.tensor([step_loss], dtype=torch.float64)
    distributed.all_reduce_sum([p.grad for p in trainable] + [summed])
    return summed.item()


def _record(metrics, since: list, entry: tuple, checkpoint: bool, kill: bool, save) -> list:
    """Process 0's bookkeeping after a step: the metric log, the loss history since the last checkpoint (saved
    with the next one, `save(step, history)`), the kill switch of the crash tests. Returns the new history."""
    step, step_loss, lr = entry
    metrics.log(step, loss=step_loss, lr=lr)
    since.append([step, step_loss, lr])
    if checkpoint:
        metrics.flush()
        save(step, since)
        since = []
    if kill:
        metrics.flush()
        os._exit(137)
    return since


def _clip_or_stop(trainable, run: RunSettings, step: int, lr: float, step_loss: float) -> None:
    """Stop with one line where the loss or the gradient norm is not finite; clip the gradients to
    run.max_grad_norm (where set)."""
    import torch

    if not math.isfinite(step_loss):
        _diverged(run, step, lr, f"loss is {step_loss}")
    if run.max_grad_norm:
        norm = float(torch.nn.utils.clip_grad_norm_(trainable, run.max_grad_norm))
        if not math.isfinite(norm):
            _diverged(run, step, lr, f"gradient norm is {norm}")


def train_loop(
    model,
    tok,
    prompter,
    info,
    run: RunSettings,
    examples,
    plan,
    schedule,
    ckpt_dir,
    project: Project,
    quiet,
    rank: int = 0,
    world: int = 1,
    stop_at: int | None = None,
) -> None:
    """The optimisation loop, from the newest checkpoint with a training state (else step 0) to `stop_at`
    (default: the last step). With `world` > 1 each process takes every world-th example of a micro-batch
    and gradients are summed over processes, so a step equals the single-process step."""
    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    total = len(plan)
    seqs = prompter.encode([e["premise"] for e in examples], [e["hypothesis"] for e in examples])
    labels = prompter.label_ids([e["label"] for e in examples])
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(trainable, run, info["device"])
    sched = get_linear_schedule_with_warmup(opt, round(run.warmup_ratio * total), total)
    meta = {"run": run.run, "model": run.model, "model_path": run.model, "revision": info["revision"]}
    meta.update(base_model_type=info["model_type"], finetune=run.finetune, quantization=info["quantization"])
    start = _resume(model, ckpt_dir, opt, sched, run, meta, rank)
    autocast = autocast_for(info["device"])
    metrics = MetricLog(project, run.run) if rank == 0 else None
    since: list[list] = []  # [step, loss, lr] since the last checkpoint: kept in the next checkpoint's metadata
    kill_at = environment.read(KILL_ENV, -1)
    # the loss history travels with the checkpoint (DVC), so a clone can rebuild its MLflow run
    save = lambda step, log: save_checkpoint(  # noqa: E731
        model, ckpt_dir, step, {**meta, "train_log": log}, _state(opt, sched, step), run
    )
    bar = tqdm(total=total, initial=start, disable=quiet, desc=f"train {run.run}", unit="step")
    model.train()
    for step in range(start + 1, (total if stop_at is None else stop_at) + 1):
        opt.zero_grad(set_to_none=True)
        data, micro = (seqs, labels), plan[step - 1]
        step_loss = _gradients(model, prompter, tok.pad_token_id, run, data, micro, autocast, rank, world)
        if world > 1:
            step_loss = _sum_over_processes(trainable, step_loss)
        lr = sched.get_last_lr()[0]
        _clip_or_stop(trainable, run, step, lr, step_loss)  # before the step: no non-finite weights reach a checkpoint
        opt.step()
        sched.step()
        bar.update(1)
        bar.set_postfix(loss=f"{step_loss:.4f}")
        if rank == 0:
            since = _record(metrics, since, (step, step_loss, lr), step in schedule, step == kill_at, save)
    bar.close()
    if rank == 0:
        metrics.flush()


def _diverged(run: RunSettings, step: int, lr: float, what: str) -> None:
    from oodcorr.core.errors import UserError

    raise UserError(
        f"run {run.run}: training diverged at step {step} (lr {lr:.3g}): {what}; lower the "
        f"learning rate (runs.{run.run}.lr or train.lr) and rerun"
    )


def _state(opt, sched, step: int) -> dict:
    """What a resume needs besides the weights. The data order is a pure function of the seed
    (plan.plan_steps), so no loader/generator state is stored."""
    return {"step": step, "optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "rng": rng_state()}
