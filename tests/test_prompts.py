"""Prompter / pad_batch: the verbaliser token is read at the last non-pad position of right-padded rows."""

import pytest

from oodcorr.core.errors import UserError


@pytest.fixture(scope="module")
def tok():
    from oodcorr.modeling.model_loading import load_tokenizer

    return load_tokenizer("tiny-olmo2")


def test_encode_and_pad(tok):
    from oodcorr.modeling.prompts import Prompter, pad_batch

    pr = Prompter(tok)
    assert tok.padding_side == "right" and tok.pad_token_id is not None
    seqs = pr.encode(["A cat sat.", "A very long premise about a dog that ran far away."], ["A cat sat.", "A dog ran."])
    ids, mask, last = pad_batch(seqs, tok.pad_token_id)
    assert ids.shape == (2, max(map(len, seqs))) and last.tolist() == [len(s) - 1 for s in seqs]
    assert [ids[i, last[i]].item() for i in range(2)] == [s[-1] for s in seqs]
    assert tok.decode(seqs[0]).endswith("Yes or No?")
    assert pr.label_ids(["non_entailment", "entailment"]) == [1, 0]
    assert len(set(pr.verbalizer_ids)) == 2


def test_truncation_keeps_the_question(tok):
    from oodcorr.modeling.prompts import Prompter

    pr = Prompter(tok, max_length=12)
    (seq,) = pr.encode(["word " * 50], ["short"])
    assert len(seq) == 12 and tok.decode(seq).endswith("Yes or No?")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"pattern": "{premise} only"}, "no {hypothesis} placeholder"),
        ({"pattern": "{premise} {hypothesis} {other}"}, "not a valid format string"),
        (
            {"verbalizer": {"entailment": " Antidisestablishmentarianism", "non_entailment": " No"}},
            "must be exactly one",
        ),
        ({"verbalizer": {"entailment": " Yes", "non_entailment": " Yes"}}, "same token"),
        ({"verbalizer": {"entailment": " Yes"}}, "missing non_entailment"),
    ],
)
def test_bad_prompts(tok, kwargs, message):
    from oodcorr.modeling.prompts import Prompter

    with pytest.raises(UserError, match=message.replace("{", r"\{").replace("}", r"\}")):
        Prompter(tok, **kwargs)
