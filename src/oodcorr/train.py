"""Train stage: pattern-based few-shot (Q)LoRA fine-tuning of a causal LM, with checkpoints on a schedule
(step 0 = the untouched base), resumable after a kill (bit-identical on CPU), tracked in one MLflow run.

Layout: runs/<run>/run.json and runs/<run>/checkpoints/checkpoint-<step>/ (adapter + oodcorr_checkpoint.json;
the newest one also holds training_state.pt so a rerun continues from it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from pathlib import Path

import click

from oodcorr.errors import UserError
from oodcorr.memory import examples_digest, rng_state, sample_shots, seed_all, set_rng_state
from oodcorr.prompts import DEFAULT_PATTERN, DEFAULT_VERBALIZER

# Paper-like defaults (few-shot PBFT, Mosbach et al. 2023, with LoRA): 40 epochs over the shots with
# 10% warmup; lr 1e-4 is the usual LoRA rate (their full fine-tuning used 1e-5). Log-spaced checkpoints
# resolve the early training dynamics that the ID/OOD correlation analysis needs.
DEFAULTS = {
    "revision": None, "pattern": DEFAULT_PATTERN, "verbalizer": DEFAULT_VERBALIZER,
    "loss": "full_vocab", "sampling": "balanced",
    "lora": {"r": 8, "alpha": 32, "dropout": 0.1, "target_modules": "auto"}, "finetune": "lora",
    "quantization": "auto", "dtype": "auto", "gradient_checkpointing": False, "lr": 1e-4, "weight_decay": 0.0,
    "warmup_ratio": 0.1, "max_grad_norm": 1.0, "batch_size": 8, "grad_accum": 1, "epochs": 40, "max_steps": None,
    "max_length": 256, "checkpoints": {"every": None, "log_spaced": 10}, "quiet": False,
}
CHOICES = {"loss": ("full_vocab", "verbalizer"), "sampling": ("balanced", "uniform"), "finetune": ("lora", "full"),
           "quantization": ("auto", "nf4", "none"), "dtype": ("auto", "float32", "bfloat16", "float16")}
NOT_IDENTITY = ("quiet",)  # keys that do not change the result: editing them does not restart a run
STATE_FILE = "training_state.pt"
META_FILE = "oodcorr_checkpoint.json"
KILL_ENV = "OODCORR_TEST_KILL_AT_STEP"  # tests: hard-exit after this step (simulates a kill)


def resolve_config(params: dict, run_key: str) -> dict:
    """`runs.<key>` over `train` over DEFAULTS, with value checks (types are checked by config.validate)."""
    from oodcorr.config import deep_merge, resolve_run

    cfg = deep_merge(DEFAULTS, resolve_run(params, run_key))
    where = f"params: runs.{run_key}"
    for key, allowed in CHOICES.items():
        if cfg[key] not in allowed:
            raise UserError(f"{where}.{key}: expected one of {', '.join(allowed)}, got {cfg[key]!r}")
    for key in ("shots", "batch_size", "grad_accum", "max_length"):
        if cfg[key] < 1:
            raise UserError(f"{where}.{key}: must be >= 1, got {cfg[key]}")
    for key, value in (("lr", cfg["lr"]), ("epochs", cfg["epochs"]), ("lora.r", cfg["lora"]["r"])):
        if value <= 0:
            raise UserError(f"{where}.{key}: must be > 0, got {value}")
    if not 0 <= cfg["warmup_ratio"] < 1:
        raise UserError(f"{where}.warmup_ratio: must be in [0, 1), got {cfg['warmup_ratio']}")
    if cfg["max_steps"] is not None and cfg["max_steps"] < 1:
        raise UserError(f"{where}.max_steps: must be >= 1 or null, got {cfg['max_steps']}")
    ck = cfg["checkpoints"]
    if (ck.get("every") is not None and ck["every"] < 1) or (ck.get("log_spaced") is not None and ck["log_spaced"] < 2):
        raise UserError(f"{where}.checkpoints: every must be >= 1 and log_spaced >= 2, got {ck}")
    if cfg["finetune"] == "full" and cfg["quantization"] == "nf4":
        raise UserError(f"{where}: finetune: full cannot train a 4-bit (nf4) model; use quantization: none")
    if cfg["sampling"] == "balanced" and cfg["shots"] % 2:
        raise UserError(f"{where}.shots: balanced sampling needs an even number of shots, got {cfg['shots']}")
    return cfg


def identity(cfg: dict | None) -> dict | None:
    return None if cfg is None else {k: v for k, v in cfg.items() if k not in NOT_IDENTITY}


def load_pool(params: dict, name: str) -> list[dict]:
    from oodcorr.config import project_path

    from oodcorr.data.prepare import load_prepared  # lazy: the data package imports its loaders

    return load_prepared(project_path(params, (params.get("data") or {}).get("out") or "data/prepared"), name)


def checkpoint_dirs(ckpt_dir: Path) -> dict[int, Path]:
    """Complete checkpoints by step (atomic_dir temporaries start with '.' and are skipped)."""
    out = {}
    for d in ckpt_dir.glob("checkpoint-*") if ckpt_dir.is_dir() else []:
        if (d / META_FILE).exists() and d.name.split("-", 1)[1].isdigit():
            out[int(d.name.split("-", 1)[1])] = d
    return dict(sorted(out.items()))


def save_checkpoint(model, ckpt_dir: Path, step: int, meta: dict, state: dict | None) -> Path:
    """Atomically write checkpoint-<step>; the training state lives only in the newest checkpoint."""
    import torch

    from oodcorr.io import atomic_dir, write_json

    target = ckpt_dir / f"checkpoint-{step}"
    with atomic_dir(target) as tmp:
        model.save_pretrained(tmp, safe_serialization=True)
        if state is not None:
            torch.save(state, tmp / STATE_FILE)
        write_json(tmp / META_FILE, {**meta, "step": step})
    if state is not None:
        for s, d in checkpoint_dirs(ckpt_dir).items():
            if s != step and (d / STATE_FILE).exists():
                (d / STATE_FILE).unlink()
    return target


def _load_weights(model, ckpt: Path, finetune: str) -> None:
    from safetensors.torch import load_file

    if finetune == "lora":
        from peft import set_peft_model_state_dict

        set_peft_model_state_dict(model, load_file(ckpt / "adapter_model.safetensors"))
    else:
        state = {}
        for f in sorted(ckpt.glob("*.safetensors")):
            state.update(load_file(f))
        model.load_state_dict(state, strict=False)


def preflight(cfg: dict) -> None:
    """Fail in seconds, before loading weights: model reachable, verbaliser one token, LoRA targets exist."""
    from oodcorr.memory import meta_model
    from oodcorr.models import check_available, load_tokenizer, lora_targets
    from oodcorr.prompts import Prompter

    path = check_available(cfg["model"], cfg["revision"])
    Prompter(load_tokenizer(cfg["model"], cfg["revision"]), cfg["pattern"], cfg["verbalizer"], cfg["max_length"])
    if cfg["finetune"] == "lora":
        lora_targets(meta_model(path, cfg["revision"]), cfg["lora"]["target_modules"])


def prepare_model(cfg: dict, device: str | None = None):
    """Base model + tokenizer + prompter, wrapped for LoRA/QLoRA or made fully trainable."""
    import torch

    from oodcorr.models import add_lora, load_base_model
    from oodcorr.prompts import Prompter

    seed_all(cfg["seed"])
    quant = "none" if cfg["finetune"] == "full" and cfg["quantization"] == "auto" else cfg["quantization"]
    model, tok, info = load_base_model(cfg["model"], cfg["revision"], quant, cfg["dtype"], device=device)
    prompter = Prompter(tok, cfg["pattern"], cfg["verbalizer"], cfg["max_length"])
    torch.manual_seed(cfg["seed"])  # LoRA A init depends only on the seed, not on how the base was loaded
    if cfg["finetune"] == "lora":
        model = add_lora(model, cfg["lora"], quantized=info["quantization"] == "nf4",
                         gradient_checkpointing=cfg["gradient_checkpointing"])
    else:
        for p in model.parameters():
            p.requires_grad_(True)
        if cfg["gradient_checkpointing"]:
            model.gradient_checkpointing_enable()
    return model, tok, prompter, info


def batch_loss(model, prompter, seqs, labels, pad_id: int, loss: str = "full_vocab"):
    """Summed cross-entropy of the verbaliser token at each prompt's last non-pad position (over the full
    vocabulary, or over the two verbaliser logits with loss=verbalizer)."""
    import torch
    import torch.nn.functional as F

    from oodcorr.prompts import pad_batch

    device = next(p for p in model.parameters() if p.device.type != "meta").device
    ids, mask, last = pad_batch(seqs, pad_id)
    out = model(input_ids=ids.to(device), attention_mask=mask.to(device),
                logits_to_keep=last.unsqueeze(1).to(device))  # only the scored position reaches lm_head
    logits = out.logits[:, 0, :].float()
    vids = torch.tensor(prompter.verbalizer_ids, device=device)
    target = torch.tensor(labels, device=device)
    if loss == "verbalizer":
        return F.cross_entropy(logits[:, vids], target, reduction="sum")
    return F.cross_entropy(logits, vids[target], reduction="sum")


class MetricLog:
    """Buffered train/* metrics; steps already in the store (an earlier attempt of this run) are skipped."""

    def __init__(self, client, run_id: str):
        self.client, self.run_id, self.buf, self.t = client, run_id, [], time.time()
        hist = client.get_metric_history(run_id, "train/loss")
        self.done = max((m.step for m in hist), default=-1)

    def log(self, step: int, **values) -> None:
        from mlflow.entities import Metric

        if step <= self.done:
            return
        ts = int(time.time() * 1000)
        self.buf += [Metric(f"train/{k}", float(v), ts, step) for k, v in values.items()]
        if len(self.buf) >= 500 or time.time() - self.t > 10:
            self.flush()

    def flush(self) -> None:
        if self.buf:
            self.client.log_batch(self.run_id, metrics=self.buf)
        self.buf, self.t = [], time.time()


def mlflow_run(params: dict, cfg: dict, info: dict, previous: dict | None, fresh: bool) -> str:
    """The MLflow run of this training run: the recorded one when resuming; else a new one (tags and
    the flattened resolved config logged once). A superseded run (config changed) is re-tagged."""
    import mlflow
    from mlflow.entities import Param

    from oodcorr import tracking

    exp_id = tracking.setup(params)
    client = mlflow.MlflowClient()
    run_key = cfg["run"]
    old_id = (previous or {}).get("mlflow_run_id")
    if not fresh:
        found = tracking.find_run(params, run_key, old_id, kind="train")
        if found:
            return found
    elif old_id:
        with contextlib.suppress(Exception):  # the old run may be gone from the store
            client.set_tag(old_id, "oodcorr.kind", "train-superseded")
    root = tracking.project_root(params)
    tags = {"oodcorr.run_key": run_key, "oodcorr.kind": "train", "oodcorr.model": cfg["model"],
            "oodcorr.model_revision": str(info.get("revision")), **tracking.dvc_data_hashes(root)}
    commit = tracking.git_commit(root)
    if commit:
        tags["mlflow.source.git.commit"] = commit
    run = client.create_run(exp_id, run_name=run_key, tags=tags)
    flat = tracking.flatten(cfg)
    items = [Param(k, v) for k, v in flat.items()]
    for i in range(0, len(items), 100):
        client.log_batch(run.info.run_id, params=items[i: i + 100])
    return run.info.run_id


def train_run(params: dict, run_key: str, quiet: bool | None = None) -> dict:
    """Train (or resume, or skip when finished) one run; returns its run.json content."""
    from oodcorr import distributed
    from oodcorr.config import project_path
    from oodcorr.io import write_json
    from oodcorr.memory import checkpoint_schedule, plan_steps
    from oodcorr.prompts import check_pattern

    cfg = resolve_config(params, run_key)
    quiet = cfg["quiet"] if quiet is None else quiet
    run_dir = project_path(params, "runs") / run_key
    ckpt_dir = run_dir / "checkpoints"
    previous = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").exists() else None
    check_pattern(cfg["pattern"])
    examples = sample_shots(load_pool(params, cfg["train_set"]), cfg["shots"], cfg["sampling"], cfg["data_seed"])
    digest = examples_digest(examples)
    same = (previous is not None and identity(previous.get("config")) == identity(cfg)
            and previous.get("examples_sha256") == digest)  # re-prepared data with other rows -> fresh run
    if same and previous.get("finished") and previous["total_steps"] in checkpoint_dirs(ckpt_dir):
        click.echo(f"train {run_key}: finished ({previous['total_steps']} steps); nothing to do", err=True)
        return previous

    # Everything a user can get wrong is checked before anything is written.
    preflight(cfg)
    if quiet:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    rank, world = distributed.init()  # >1 under `accelerate launch`: data parallel, rank 0 writes
    model, tok, prompter, info = prepare_model(cfg, device=distributed.device_for_rank())
    plan = plan_steps(len(examples), cfg["batch_size"], cfg["grad_accum"], cfg["epochs"], cfg["max_steps"],
                      cfg["seed"])
    total = len(plan)
    schedule = checkpoint_schedule(total, cfg["checkpoints"].get("every"), cfg["checkpoints"].get("log_spaced"))

    run_id = record = None
    if rank == 0:
        if not same and ckpt_dir.exists():
            shutil.rmtree(ckpt_dir)
        for stale in ckpt_dir.glob(".checkpoint-*.tmp"):  # a kill during a checkpoint write leaves these
            shutil.rmtree(stale, ignore_errors=True)
        run_id = mlflow_run(params, cfg, info, previous, fresh=not same)
        record = {"run": run_key, "config": cfg, "model_info": info, "mlflow_run_id": run_id,
                  "example_ids": [e["id"] for e in examples], "examples_sha256": digest,
                  "checkpoint_steps": schedule, "total_steps": total, "finished": False}
        write_json(run_dir / "run.json", record)
    distributed.barrier()
    _loop(model, tok, prompter, info, cfg, examples, plan, schedule, ckpt_dir, run_id, quiet or rank > 0,
          rank, world)
    distributed.barrier()
    if rank > 0:
        return json.loads((run_dir / "run.json").read_text())
    record["finished"] = True
    write_json(run_dir / "run.json", record)
    (ckpt_dir / f"checkpoint-{total}" / STATE_FILE).unlink(missing_ok=True)  # finished: nothing to resume
    import mlflow

    client = mlflow.MlflowClient()
    client.log_artifact(run_id, str(run_dir / "run.json"))
    client.set_terminated(run_id, "FINISHED")
    return record


def _loop(model, tok, prompter, info, cfg, examples, plan, schedule, ckpt_dir, run_id, quiet,
          rank: int = 0, world: int = 1) -> None:
    """The optimisation loop. With `world` > 1 each process takes every world-th example of a micro-batch
    and gradients are summed over processes, so a step equals the single-process step."""
    import mlflow
    import torch

    from oodcorr import distributed

    from tqdm.auto import tqdm
    from transformers import get_linear_schedule_with_warmup

    total = len(plan)
    seqs = prompter.encode([e["premise"] for e in examples], [e["hypothesis"] for e in examples])
    labels = prompter.label_ids([e["label"] for e in examples])
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    sched = get_linear_schedule_with_warmup(opt, round(cfg["warmup_ratio"] * total), total)
    meta = {"run": cfg["run"], "model": cfg["model"], "model_path": info["path"], "revision": info["revision"],
            "base_model_type": info["model_type"], "finetune": cfg["finetune"],
            "quantization": info["quantization"]}
    resumable = {s: d for s, d in checkpoint_dirs(ckpt_dir).items() if (d / STATE_FILE).exists()}
    start = 0
    if resumable:
        start, ckpt = max(resumable.items())
        state = torch.load(ckpt / STATE_FILE, weights_only=False, map_location="cpu")
        _load_weights(model, ckpt, cfg["finetune"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        set_rng_state(state["rng"])
    elif rank == 0:
        save_checkpoint(model, ckpt_dir, 0, meta, _state(opt, sched, 0))
    device = info["device"]
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if device == "cuda" and torch.cuda.is_bf16_supported()
                else contextlib.nullcontext())
    metrics = MetricLog(mlflow.MlflowClient(), run_id) if rank == 0 else None
    kill_at = int(os.environ.get(KILL_ENV, "-1"))
    bar = tqdm(total=total, initial=start, disable=quiet, desc=f"train {cfg['run']}", unit="step")
    model.train()
    for step in range(start + 1, total + 1):
        opt.zero_grad(set_to_none=True)
        micro = plan[step - 1]
        n = sum(len(mb) for mb in micro)
        step_loss = 0.0
        for mb in micro:
            shard = mb[rank::world]
            if not shard:
                continue
            with autocast:
                loss = batch_loss(model, prompter, [seqs[i] for i in shard], [labels[i] for i in shard],
                                  tok.pad_token_id, cfg["loss"]) / n
            loss.backward()
            step_loss += loss.item()
        if world > 1:
            for p in trainable:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            summed = torch.tensor([step_loss], dtype=torch.float64)
            distributed.all_reduce_sum([p.grad for p in trainable] + [summed])
            step_loss = summed.item()
        if cfg["max_grad_norm"]:
            torch.nn.utils.clip_grad_norm_(trainable, cfg["max_grad_norm"])
        lr = sched.get_last_lr()[0]
        opt.step()
        sched.step()
        bar.update(1)
        bar.set_postfix(loss=f"{step_loss:.4f}")
        if rank == 0:
            metrics.log(step, loss=step_loss, lr=lr)
            if step in schedule:
                metrics.flush()
                save_checkpoint(model, ckpt_dir, step, meta, _state(opt, sched, step))
            if step == kill_at:
                metrics.flush()
                os._exit(137)
    bar.close()
    if rank == 0:
        metrics.flush()


def _state(opt, sched, step: int) -> dict:
    """What a resume needs besides the weights. The data order is a pure function of the seed
    (memory.plan_steps), so no loader/generator state is stored."""
    return {"step": step, "optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "rng": rng_state()}


@click.command("train")
@click.option("--run", "run_key", required=True, help="Run key under `runs:` in params.yaml.")
@click.option("--params", "params_file", type=click.Path(dir_okay=False), default=None,
              help="params.yaml (default: the project's).")
@click.option("--dry-run", is_flag=True, help="Print sizes, steps and a memory estimate; write nothing.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def train_cmd(run_key, params_file, dry_run, quiet):
    """Few-shot (Q)LoRA training of one run; resumes after a kill, no-op when finished."""
    from oodcorr.config import load_params

    params = load_params(params_file)
    if dry_run:
        from oodcorr.memory import dry_run_info, print_dry_run

        print_dry_run(dry_run_info(params, run_key))
        return
    record = train_run(params, run_key, quiet=True if quiet else None)
    click.echo(f"train {run_key}: {record['total_steps']} steps, checkpoints {record['checkpoint_steps']}, "
               f"mlflow run {record['mlflow_run_id']}", err=True)
