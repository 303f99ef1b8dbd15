"""The synthetic shift suite: deterministic, balanced, short, and each shift really present."""

import pytest

from oodcorr.data.prepare import build
from oodcorr.data.synthetic import (
    NEGATIONS,
    OOD_PEOPLE,
    OOD_PLACES,
    OOD_VERBS,
    PEOPLE,
    PLACES,
    VERBS,
    content_words,
    generate,
)
from oodcorr.settings.registry import SYNTHETIC

SUITE = ["synth_train", "synth_id", "synth_overlap", "synth_negation", "synth_vocab", "synth_embedded"]


@pytest.fixture(scope="module")
def suite():
    return {name: build({}, name)[0] for name in SUITE}


def _words(text):
    return [w.strip(".,").lower() for w in text.split()]


def test_names_and_labelled_synthetic():
    assert list(SYNTHETIC) == SUITE
    for name in SUITE:
        _, entry = build({}, name)
        assert entry["source"].startswith("synthetic:") and "SYNTHETIC" in entry["description"]


def test_deterministic_balanced_short(suite):
    for name, rows in suite.items():
        again = build({}, name)[0]
        assert rows == again, name
        n_ent = sum(r["label"] == "entailment" for r in rows)
        assert n_ent * 2 == len(rows), name
        assert max(len(r["premise"].split()) + len(r["hypothesis"].split()) for r in rows) < 25
        assert len({(r["premise"], r["hypothesis"]) for r in rows}) == len(rows)
    assert build({"data": {"seed": 1}}, "synth_id")[0] != suite["synth_id"]


def test_id_disjoint_from_train(suite):
    train = {(r["premise"], r["hypothesis"]) for r in suite["synth_train"]}
    assert not train & {(r["premise"], r["hypothesis"]) for r in suite["synth_id"]}


def test_overlap_shift(suite):
    for r in suite["synth_overlap"]:
        assert set(_words(r["hypothesis"])) <= set(_words(r["premise"])), r
    assert sum(r["label"] == "non_entailment" for r in suite["synth_overlap"]) == 200
    # in the ID training data, full overlap goes with entailment: that is the heuristic the shift breaks
    for r in suite["synth_train"]:
        if r["label"] == "non_entailment":
            assert not set(_words(r["hypothesis"])) <= set(_words(r["premise"]))


def test_negation_shift(suite):
    for r in suite["synth_negation"]:
        assert NEGATIONS & set(_words(r["premise"] + " " + r["hypothesis"])), r
    for r in suite["synth_train"] + suite["synth_id"]:
        assert not NEGATIONS & set(_words(r["premise"] + " " + r["hypothesis"]))


def test_vocab_shift(suite):
    train_vocab = set()
    for r in suite["synth_train"]:
        train_vocab |= content_words(r["premise"]) | content_words(r["hypothesis"])
    assert train_vocab <= set(PEOPLE) | set(PLACES) | {v for pair in VERBS for v in pair}
    for r in suite["synth_vocab"]:
        assert not (content_words(r["premise"]) | content_words(r["hypothesis"])) & train_vocab, r
    ood = set(OOD_PEOPLE) | set(OOD_PLACES) | {v for pair in OOD_VERBS for v in pair}
    assert not ood & train_vocab


def test_embedded_shift(suite):
    def mean_len(rows):
        return sum(len(r["premise"].split()) for r in rows) / len(rows)

    for r in suite["synth_embedded"]:
        assert {"that", "who"} & set(_words(r["premise"])), r
    assert mean_len(suite["synth_embedded"]) > mean_len(suite["synth_id"]) + 3


def test_generate_is_pure():
    assert generate("overlap", 10, 3) == generate("overlap", 10, 3)
    with pytest.raises(ValueError):
        generate("nope", 1)
