"""Scoring checkpoints: one base model per process, LoRA adapters swapped per checkpoint, each testset
tokenized once; each (checkpoint, testset) pair is scored in its own longest-first stream and cached as
soon as it is done."""

from __future__ import annotations

from oodcorr.evaluate.cache import write_cache
from oodcorr.evaluate.checkpoints import Checkpoint
from oodcorr.modeling import distributed


class Adapters:
    """A base model with one LoRA adapter active at a time: load new, activate, drop old. With `merge` (an
    unquantized base, on CPU or GPU: see cache.resolve_settings) the active adapter is merged into the base
    weights, so scoring runs the plain model without LoRA's extra products per layer; before the next adapter
    is merged the original weights are copied back from a CPU copy taken once, so no rounding error
    accumulates over checkpoints."""

    def __init__(self, base, merge: bool = False):
        self.base, self.merge = base, merge
        self.model, self.active, self._pristine = None, None, None

    def activate(self, path, name: str):
        from peft import PeftModel

        if self.model is None:
            self.model = PeftModel.from_pretrained(self.base, str(path), adapter_name=name)
            if self.merge:
                self._pristine = _lora_base_weights(self.model)
        else:
            if self.merge:
                self.model.unmerge_adapter()  # peft's bookkeeping; the weights themselves are restored exactly:
                _restore_weights(self.model, self._pristine)
            self.model.load_adapter(str(path), adapter_name=name)
            self.model.set_adapter(name)
            if self.active and self.active != name:
                self.model.delete_adapter(self.active)
        self.active = name
        if self.merge:
            self.model.merge_adapter()
        self.model.eval()
        return self.model

    def unmerge(self) -> None:
        """Back to the base weights, bit for bit, with the adapter applied unmerged (peft's LoRA forward)."""
        if self.merge and self.model is not None:
            self.model.unmerge_adapter()
            _restore_weights(self.model, self._pristine)


def _lora_layers(model):
    from peft.tuners.lora import LoraLayer

    return {n: m for n, m in model.named_modules() if isinstance(m, LoraLayer)}


def _lora_base_weights(model) -> dict:
    """CPU copies of the weights LoRA adapters merge into (pinned when on CUDA: fast copies back)."""
    saved = {}
    for name, layer in _lora_layers(model).items():
        w = layer.get_base_layer().weight.detach()
        copy = w.to("cpu", copy=True)
        saved[name] = copy.pin_memory() if w.is_cuda else copy
    return saved


def _restore_weights(model, saved: dict) -> None:
    import torch

    with torch.no_grad():
        for name, layer in _lora_layers(model).items():
            layer.get_base_layer().weight.copy_(saved[name], non_blocking=True)
    if torch.cuda.is_available():
        torch.cuda.synchronize()


class _Scorer:
    """One base model per process; adapters swapped per checkpoint (Adapters: merged unless the base is 4-bit)."""

    def __init__(self, settings: dict, device: str | None):
        from oodcorr.modeling.model_loading import load_base_model
        from oodcorr.modeling.prompts import Prompter

        self.settings, self.device = settings, device
        self.base, self.tok, self.info = load_base_model(
            settings["model"], settings["_revision"], settings["quantization"], settings["dtype"], device
        )
        self.prompter = Prompter(self.tok, settings["pattern"], settings["verbalizer"], settings["max_length"])
        self.adapters = Adapters(self.base, merge=bool(settings.get("lora_merge")))
        self.model, self.encoded = None, {}

    def activate(self, ck: Checkpoint) -> None:
        self.model = self.adapters.activate(ck.path, f"step{ck.step}")

    def encode(self, name: str, rows: list[dict]) -> list[list[int]]:
        if name not in self.encoded:  # each testset is tokenized once per process
            self.encoded[name] = self.prompter.encode([r["premise"] for r in rows], [r["hypothesis"] for r in rows])
        return self.encoded[name]

    def score(self, seqs, on_batch=None):
        from oodcorr.evaluate.scoring import score

        return score(
            self.model,
            seqs,
            self.prompter.verbalizer_ids,
            self.tok.pad_token_id,
            self.settings["_batch_size"],
            on_batch,
        )


def score_pairs(todo, checkpoints, rows_of, settings, cache_dir, rank, quiet) -> tuple[list, list]:
    """Score this process's (step, testset, key) pairs grouped by checkpoint -> (scored, failures)."""
    import torch
    from tqdm.auto import tqdm

    device = distributed.device_for_rank()
    if device:
        torch.cuda.set_device(device)
    scorer = _Scorer(settings, device)
    by_step = {ck.step: ck for ck in checkpoints}
    scored, failures = [], []
    total = sum(len(rows_of(t)) for _, t, _ in todo)
    bar = tqdm(total=total, unit="ex", disable=quiet or rank != 0, desc="evaluate", dynamic_ncols=True)
    for step in sorted({s for s, _, _ in todo}):
        ck = by_step[step]
        pairs = [(t, k) for s, t, k in todo if s == step]
        bar.set_description(f"{ck.name} x {len(pairs)} testset(s) ({len(scored)}/{len(todo)} pairs done)")
        try:
            scorer.activate(ck)
        except Exception as e:
            failures.append(
                f"{ck.name} (could not load the adapter: {type(e).__name__}: {str(e).splitlines()[0][:100]})"
            )
            bar.update(sum(len(rows_of(t)) for t, _ in pairs))
            continue
        # one stream per (checkpoint, testset) pair, cached as soon as it is scored: a kill loses at most
        # the pair in progress
        for testset, key in pairs:
            rows = rows_of(testset)
            logp, preds = scorer.score(scorer.encode(testset, rows), bar.update)
            write_cache(
                cache_dir / f"{key}.parquet",
                rows,
                logp,
                preds,
                {
                    "step": step,
                    "testset": testset,
                    "checkpoint_sha256": ck.sha256,
                    **{k: v for k, v in settings.items() if not k.startswith("_")},
                },
            )
            scored.append((step, testset))
    bar.close()
    return scored, failures
