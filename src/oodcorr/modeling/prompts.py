"""Pattern-based prompts: `{premise} Question: {hypothesis} Yes or No?` -> token ids, and the one-token
verbaliser (` Yes` = entailment, ` No` = non_entailment) that training and evaluation both score."""

from __future__ import annotations

from dataclasses import dataclass

from oodcorr.core.choices import DEFAULT_PATTERN, DEFAULT_VERBALIZER, LABELS, check_pattern  # noqa: F401
from oodcorr.core.errors import UserError


@dataclass
class Prompter:
    """Formats and tokenizes NLI pairs; `verbalizer_ids[i]` is the token of LABELS[i]."""

    tokenizer: object
    pattern: str = DEFAULT_PATTERN
    verbalizer: dict | None = None
    max_length: int = 256

    def __post_init__(self):
        check_pattern(self.pattern)
        self.verbalizer = dict(self.verbalizer or DEFAULT_VERBALIZER)
        missing = [lab for lab in LABELS if lab not in self.verbalizer]
        if missing:
            raise UserError(f"params: verbalizer: missing {', '.join(missing)}")
        ids = []
        for label in LABELS:
            word = self.verbalizer[label]
            toks = self.tokenizer.encode(word, add_special_tokens=False)
            if len(toks) != 1:
                raise UserError(
                    f"params: verbalizer.{label}: {word!r} is {len(toks)} tokens for this tokenizer "
                    f"({self.tokenizer.convert_ids_to_tokens(toks)}); it must be exactly one"
                )
            ids.append(toks[0])
        if ids[0] == ids[1]:
            raise UserError("params: verbalizer: both labels map to the same token")
        self.verbalizer_ids = ids

    def format(self, premise: str, hypothesis: str) -> str:
        return self.pattern.format(premise=premise.strip(), hypothesis=hypothesis.strip())

    def encode(self, premises, hypotheses) -> list[list[int]]:
        """Token ids per pair, unpadded. Over-long prompts keep their end (the question), as the label
        is read at the last position; a leading BOS token is kept."""
        texts = [self.format(p, h) for p, h in zip(premises, hypotheses)]
        enc = self.tokenizer(texts, add_special_tokens=True)["input_ids"]
        bos = self.tokenizer.bos_token_id
        out = []
        for ids in enc:
            if len(ids) > self.max_length:
                head = [ids[0]] if bos is not None and ids[0] == bos else []
                ids = head + ids[len(ids) - (self.max_length - len(head)) :]
            out.append(ids)
        return out

    def label_ids(self, labels) -> list[int]:
        """Index into LABELS (0 = entailment, 1 = non_entailment) for each label string."""
        return [LABELS.index(lab) for lab in labels]


def pad_batch(seqs: list[list[int]], pad_id: int):
    """Right-pad to the longest sequence -> (input_ids, attention_mask, last_index) tensors."""
    import torch

    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    last = mask.sum(1) - 1
    return ids, mask, last
