"""Scoring checkpoints: one base model per process, LoRA adapters swapped per checkpoint, each testset
tokenized once; each (checkpoint, testset) pair is scored in its own longest-first stream and cached as
soon as it is done."""

from __future__ import annotations

from oodcorr import distributed
from oodcorr.evaluate.cache import write_cache
from oodcorr.evaluate.checkpoints import Checkpoint


class _Scorer:
    """One base model per process; adapters swapped per checkpoint (load new, activate, drop old)."""

    def __init__(self, settings: dict, device: str | None):
        from oodcorr.models import load_base_model
        from oodcorr.prompts import Prompter

        self.settings, self.device = settings, device
        self.base, self.tok, self.info = load_base_model(
            settings["model"], settings["_revision"], settings["quantization"], settings["dtype"], device)
        self.prompter = Prompter(self.tok, settings["pattern"], settings["verbalizer"], settings["max_length"])
        self.model, self.active, self.encoded = None, None, {}

    def activate(self, ck: Checkpoint) -> None:
        from peft import PeftModel

        name = f"step{ck.step}"
        if self.model is None:
            self.model = PeftModel.from_pretrained(self.base, str(ck.path), adapter_name=name)
        else:
            self.model.load_adapter(str(ck.path), adapter_name=name)
            self.model.set_adapter(name)
            if self.active:
                self.model.delete_adapter(self.active)
        self.active = name
        self.model.eval()

    def encode(self, name: str, rows: list[dict]) -> list[list[int]]:
        if name not in self.encoded:  # each testset is tokenized once per process
            self.encoded[name] = self.prompter.encode([r["premise"] for r in rows], [r["hypothesis"] for r in rows])
        return self.encoded[name]

    def score(self, seqs, on_batch=None):
        from oodcorr.evaluate.scoring import score

        return score(self.model, seqs, self.prompter.verbalizer_ids, self.tok.pad_token_id,
                     self.settings["_batch_size"], on_batch)


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
            failures.append(f"{ck.name} (could not load the adapter: {type(e).__name__}: {str(e).splitlines()[0][:100]})")
            bar.update(sum(len(rows_of(t)) for t, _ in pairs))
            continue
        # one stream per (checkpoint, testset) pair, cached as soon as it is scored: a kill loses at most
        # the pair in progress
        for testset, key in pairs:
            rows = rows_of(testset)
            logp, preds = scorer.score(scorer.encode(testset, rows), bar.update)
            write_cache(cache_dir / f"{key}.parquet", rows, logp, preds,
                        {"step": step, "testset": testset, "checkpoint_sha256": ck.sha256,
                         **{k: v for k, v in settings.items() if not k.startswith("_")}})
            scored.append((step, testset))
    bar.close()
    return scored, failures
