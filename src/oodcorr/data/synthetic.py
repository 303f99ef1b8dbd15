"""A small SYNTHETIC shift suite: an in-domain NLI task plus four controlled distribution shifts.

Why: the pipeline (train -> evaluate -> partial correlations) must run on a CPU with a 135M model and
no hub access. Template sentences with tiny vocabularies give a task such a model can learn in minutes,
and each OOD set changes exactly one thing, so the shift is known by construction:

  train / id  subset-style entailments vs. substituted-word non-entailments (overlap ~ entailment)
  overlap     HANS-style: every hypothesis word occurs in the premise, half are non-entailments
  negation    every pair contains a negation (`not` / `never`), which the ID data never has
  vocab       same templates, but people/verbs/places disjoint from the ID vocabulary
  embedded    longer premises with embedded (`knows that` / `thinks that`) or relative (`who`) clauses

Everything is deterministic given (kind, size, seed); labels are exactly balanced; sentences are short
(premise + hypothesis < 25 words). Rows: premise, hypothesis, label (binary), template.
"""

from __future__ import annotations

import random

from oodcorr.settings.registry import SYNTHETIC, SYNTHETIC_KINDS

ENT, NON = "entailment", "non_entailment"

PEOPLE = [
    "doctor",
    "lawyer",
    "teacher",
    "artist",
    "student",
    "farmer",
    "singer",
    "pilot",
    "manager",
    "author",
    "actor",
    "banker",
]
VERBS = [
    ("saw", "see"),
    ("helped", "help"),
    ("called", "call"),
    ("paid", "pay"),
    ("met", "meet"),
    ("thanked", "thank"),
    ("followed", "follow"),
    ("visited", "visit"),
]
PLACES = ["park", "station", "library", "museum", "office", "garden"]

# Disjoint vocabulary for the `vocab` shift.
OOD_PEOPLE = [
    "astronaut",
    "sailor",
    "baker",
    "surgeon",
    "plumber",
    "poet",
    "judge",
    "nurse",
    "dentist",
    "tailor",
    "chef",
    "senator",
]
OOD_VERBS = [
    ("admired", "admire"),
    ("greeted", "greet"),
    ("avoided", "avoid"),
    ("warned", "warn"),
    ("praised", "praise"),
    ("recognized", "recognize"),
    ("supported", "support"),
    ("trusted", "trust"),
]
OOD_PLACES = ["harbor", "temple", "stadium", "bakery", "castle", "forest"]

FUNCTION_WORDS = {"the", "a", "and", "in", "that", "who", "did", "not", "never", "knows", "thinks"}
NEGATIONS = {"not", "never"}


def _pick(rng: random.Random, seq, k: int = 1):
    return rng.sample(seq, k)


def _id_templates(people, verbs, places):
    """In-domain templates: entailments drop material; non-entailments substitute a new word."""

    def e_drop_place(r):
        a, b = _pick(r, people, 2)
        v, p = r.choice(verbs)[0], r.choice(places)
        return f"The {a} {v} the {b} in the {p}.", f"The {a} {v} the {b}."

    def e_drop_conjunct(r):
        a, c, b = _pick(r, people, 3)
        v = r.choice(verbs)[0]
        return f"The {a} and the {c} {v} the {b}.", f"The {c} {v} the {b}."

    def n_new_object(r):
        a, b, d = _pick(r, people, 3)
        v, p = r.choice(verbs)[0], r.choice(places)
        return f"The {a} {v} the {b} in the {p}.", f"The {a} {v} the {d}."

    def n_new_verb(r):
        a, b = _pick(r, people, 2)
        (v, _), (w, _) = _pick(r, verbs, 2)
        return f"The {a} {v} the {b}.", f"The {a} {w} the {b}."

    def n_new_subject(r):
        a, b, c = _pick(r, people, 3)
        v = r.choice(verbs)[0]
        return f"The {a} {v} the {b}.", f"The {c} {v} the {b}."

    return (
        [("drop_place", e_drop_place), ("drop_conjunct", e_drop_conjunct)],
        [("new_object", n_new_object), ("new_verb", n_new_verb), ("new_subject", n_new_subject)],
    )


def _overlap_templates():
    """HANS lexical-overlap / subsequence style: the hypothesis only reuses premise words."""

    def e_subset(r):
        a, b = _pick(r, PEOPLE, 2)
        v, p = r.choice(VERBS)[0], r.choice(PLACES)
        return f"The {a} {v} the {b} in the {p}.", f"The {a} {v} the {b}."

    def e_conjunct(r):
        a, b, c = _pick(r, PEOPLE, 3)
        v = r.choice(VERBS)[0]
        return f"The {a} {v} the {b} and the {c}.", f"The {a} {v} the {c}."

    def n_swap(r):
        a, b = _pick(r, PEOPLE, 2)
        v = r.choice(VERBS)[0]
        return f"The {a} {v} the {b}.", f"The {b} {v} the {a}."

    def n_subsequence(r):
        a, b, c = _pick(r, PEOPLE, 3)
        v = r.choice(VERBS)[0]
        return f"The {a} {v} the {b} and the {c}.", f"The {b} {v} the {a}."

    return [("subset", e_subset), ("conjunct", e_conjunct)], [("swap", n_swap), ("swap_conjunct", n_subsequence)]


def _negation_templates():
    def e_never(r):
        a, b = _pick(r, PEOPLE, 2)
        v, base = r.choice(VERBS)
        return f"The {a} never {v} the {b}.", f"The {a} did not {base} the {b}."

    def e_not_other(r):
        a, b, c = _pick(r, PEOPLE, 3)
        v, base = r.choice(VERBS)
        return f"The {a} {v} the {b} and not the {c}.", f"The {a} did not {base} the {c}."

    def n_negated_hyp(r):
        a, b = _pick(r, PEOPLE, 2)
        v, base = r.choice(VERBS)
        return f"The {a} {v} the {b}.", f"The {a} did not {base} the {b}."

    def n_negated_premise(r):
        a, b = _pick(r, PEOPLE, 2)
        v, base = r.choice(VERBS)
        return f"The {a} did not {base} the {b}.", f"The {a} {v} the {b}."

    return (
        [("never", e_never), ("not_other", e_not_other)],
        [("negated_hypothesis", n_negated_hyp), ("negated_premise", n_negated_premise)],
    )


def _embedded_templates():
    def e_factive(r):
        a, b, c = _pick(r, PEOPLE, 3)
        v, p = r.choice(VERBS)[0], r.choice(PLACES)
        return f"The {a} knows that the {b} {v} the {c} in the {p}.", f"The {b} {v} the {c}."

    def n_nonfactive(r):
        a, b, c = _pick(r, PEOPLE, 3)
        v, p = r.choice(VERBS)[0], r.choice(PLACES)
        return f"The {a} thinks that the {b} {v} the {c} in the {p}.", f"The {b} {v} the {c}."

    def e_relative_main(r):
        a, b, c = _pick(r, PEOPLE, 3)
        (v, _), (w, _) = _pick(r, VERBS, 2)
        p = r.choice(PLACES)
        return f"The {a} who {v} the {b} {w} the {c} in the {p}.", f"The {a} {w} the {c}."

    def n_relative_wrong(r):
        a, b, c = _pick(r, PEOPLE, 3)
        (v, _), (w, _) = _pick(r, VERBS, 2)
        p = r.choice(PLACES)
        return f"The {a} who {v} the {b} {w} the {c} in the {p}.", f"The {b} {w} the {c}."

    return (
        [("factive", e_factive), ("relative_main", e_relative_main)],
        [("nonfactive", n_nonfactive), ("relative_object", n_relative_wrong)],
    )


def _templates(kind: str):
    if kind in ("train", "id"):
        return _id_templates(PEOPLE, VERBS, PLACES)
    if kind == "vocab":
        return _id_templates(OOD_PEOPLE, OOD_VERBS, OOD_PLACES)
    return {"overlap": _overlap_templates, "negation": _negation_templates, "embedded": _embedded_templates}[kind]()


KINDS = SYNTHETIC_KINDS  # the registry names them; this module generates them


def _draw(kind: str, size: int, seed: int, exclude: set | None = None) -> list[dict]:
    ents, nons = _templates(kind)
    rng = random.Random(f"oodcorr-synthetic:{kind}:{seed}")
    seen = set(exclude or ())
    rows: list[dict] = []
    attempts = 0
    while len(rows) < size:
        attempts += 1
        if attempts > 50 * size + 1000:
            raise RuntimeError(f"synthetic {kind}: could not draw {size} distinct pairs")
        label = ENT if len(rows) % 2 == 0 else NON  # alternate: exactly balanced
        tname, make = rng.choice(ents if label == ENT else nons)
        premise, hypothesis = make(rng)
        if (premise, hypothesis) in seen:
            continue
        seen.add((premise, hypothesis))
        rows.append({"premise": premise, "hypothesis": hypothesis, "label": label, "template": f"{tname}/{label}"})
    return rows


def generate(kind: str, size: int, seed: int = 0) -> list[dict]:
    """`size` distinct synthetic pairs of one kind; `id` pairs never repeat a `train` pair (same seed)."""
    if kind not in KINDS:
        raise ValueError(f"unknown synthetic kind {kind!r}")
    exclude = None
    if kind == "id":
        train_size = SYNTHETIC["synth_train"][1]
        exclude = {(r["premise"], r["hypothesis"]) for r in _draw("train", train_size, seed)}
    return _draw(kind, size, seed, exclude)


def content_words(text: str) -> set[str]:
    """Lower-cased words minus the shared function words (used by tests of the vocab shift)."""
    return {w.strip(".,").lower() for w in text.split()} - FUNCTION_WORDS - {""}
