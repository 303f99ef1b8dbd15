"""The testset registry: plain data, not a plugin system.

Each entry says where the rows come from (a Hugging Face hub dataset, a local file, or one of the
built-in synthetic generators), which fields hold premise / hypothesis / label / slice, and how raw
labels map onto the two labels every stage uses: `entailment` / `non_entailment` (or `drop`).

A label can also map to `neutral`: that one is resolved per testset by the `neutral` option
(`drop`, the default, or `merge` = non_entailment), so 3-way sets share one map.

Label maps list both the hub's integer codes and the usual string spellings, so a built-in name can be
pointed at a local copy (`data.testsets.mnli: {path: ..., label: gold_label}`) without restating it.
Keys are compared as strings (YAML and parquet may give ints).

Hub sources were checked against datasets 5.x (no loading scripts); see docs/hub-sources.md.
"""

from __future__ import annotations

import copy

from oodcorr.core.errors import UserError, closest

ENT, NON = "entailment", "non_entailment"
TARGETS = (ENT, NON, "drop", "neutral")

# MNLI / SNLI / ANLI on the hub: ClassLabel 0=entailment, 1=neutral, 2=contradiction, -1 = no gold label.
THREE_WAY = {
    "0": ENT,
    "1": "neutral",
    "2": NON,
    "-1": "drop",
    "entailment": ENT,
    "neutral": "neutral",
    "contradiction": NON,
    "-": "drop",
    "e": ENT,
    "n": "neutral",
    "c": NON,
    "ENTAILMENT": ENT,
    "NEUTRAL": "neutral",
    "CONTRADICTION": NON,
}
# Binary sets: the hub's ints plus the GLUE / HANS string spellings.
ENT0 = {"0": ENT, "1": NON, ENT: ENT, "not_entailment": NON, "non-entailment": NON, NON: NON}
ENT1 = {"1": ENT, "0": NON, ENT: ENT, "not_entailment": NON, "non-entailment": NON, NON: NON}
IDENTITY = {ENT: ENT, NON: NON}

_GLUE = {"hub": "nyu-mll/glue", "revision": None, "premise": "premise", "hypothesis": "hypothesis", "label": "label"}

BUILTINS: dict[str, dict] = {
    "mnli": {
        **_GLUE,
        "config": "mnli",
        "split": "validation_matched",
        "label_map": THREE_WAY,
        "description": "MNLI dev-matched (in-domain control); neutral dropped unless neutral: merge",
    },
    "mnli_mm": {
        **_GLUE,
        "config": "mnli",
        "split": "validation_mismatched",
        "label_map": THREE_WAY,
        "description": "MNLI dev-mismatched (other genres)",
    },
    "mnli_train": {
        **_GLUE,
        "config": "mnli",
        "split": "train",
        "label_map": THREE_WAY,
        "description": "MNLI train (training pool)",
    },
    "snli": {
        "hub": "stanfordnlp/snli",
        "config": "plain_text",
        "revision": None,
        "split": "test",
        "premise": "premise",
        "hypothesis": "hypothesis",
        "label": "label",
        "label_map": THREE_WAY,
        "description": "SNLI test (image captions)",
    },
    "snli_train": {
        "hub": "stanfordnlp/snli",
        "config": "plain_text",
        "revision": None,
        "split": "train",
        "premise": "premise",
        "hypothesis": "hypothesis",
        "label": "label",
        "label_map": THREE_WAY,
        "description": "SNLI train (training pool)",
    },
    "scitail": {
        "hub": "allenai/scitail",
        "config": "dgem_format",
        "revision": None,
        "split": "test",
        "premise": "premise",
        "hypothesis": "hypothesis",
        "label": "label",
        "label_map": {"entails": ENT, "neutral": NON, ENT: ENT, "not_entailment": NON},
        "description": "SciTail test (science exam questions)",
    },
    "rte": {
        **_GLUE,
        "config": "rte",
        "premise": "sentence1",
        "hypothesis": "sentence2",
        "split": "train",
        "label_map": ENT0,
        "description": "GLUE RTE train (used as an OOD testset)",
    },
    "wnli": {
        **_GLUE,
        "config": "wnli",
        "premise": "sentence1",
        "hypothesis": "sentence2",
        "split": "train",
        "label_map": ENT1,
        "description": "GLUE WNLI train (Winograd schemas; used as an OOD testset)",
    },
    "hans": {
        "hub": "jhu-cogsci/hans",
        "config": "plain_text",
        "revision": "refs/convert/parquet",
        "split": "validation",
        "premise": "premise",
        "hypothesis": "hypothesis",
        "label": "label",
        "label_map": ENT0,
        "slice": ["heuristic", "@label"],
        "description": "HANS evaluation set; slices = heuristic/label",
    },
    "anli": {
        "hub": "facebook/anli",
        "config": "plain_text",
        "revision": None,
        "split": "test_r3",
        "premise": "premise",
        "hypothesis": "hypothesis",
        "label": "label",
        "label_map": THREE_WAY,
        "description": "ANLI round 3 test (adversarial)",
    },
    "anli_r1": {
        "hub": "facebook/anli",
        "config": "plain_text",
        "revision": None,
        "split": "test_r1",
        "premise": "premise",
        "hypothesis": "hypothesis",
        "label": "label",
        "label_map": THREE_WAY,
        "description": "ANLI round 1 test (adversarial)",
    },
    "anli_r2": {
        "hub": "facebook/anli",
        "config": "plain_text",
        "revision": None,
        "split": "test_r2",
        "premise": "premise",
        "hypothesis": "hypothesis",
        "label": "label",
        "label_map": THREE_WAY,
        "description": "ANLI round 2 test (adversarial)",
    },
    "paws": {
        "hub": "google-research-datasets/paws",
        "config": "labeled_final",
        "revision": None,
        "split": "test",
        "premise": "sentence1",
        "hypothesis": "sentence2",
        "label": "label",
        "label_map": ENT1,
        "description": "PAWS-Wiki test (paraphrase = entailment)",
    },
    "sick": {
        "premise": "sentence_A",
        "hypothesis": "sentence_B",
        "label": "entailment_label",
        "id": "pair_ID",
        "label_map": THREE_WAY,
        "filter": {"SemEval_set": "TEST"},
        "format": "tsv",
        "description": "SICK test (local only: set data.testsets.sick.path to SICK.txt)",
    },
}

# The synthetic shift suite (oodcorr.data.synthetic): CPU quickstart without the hub.
_SYN = {"premise": "premise", "hypothesis": "hypothesis", "label": "label", "label_map": IDENTITY, "slice": "template"}
# The generators of data/synthetic.py (its KINDS) and the built-in testsets drawn from them.
SYNTHETIC_KINDS = ("train", "id", "overlap", "negation", "vocab", "embedded")
SYNTHETIC = {
    "synth_train": ("train", 2000, "SYNTHETIC in-domain training pool (templated, small vocabulary)"),
    "synth_id": ("id", 400, "SYNTHETIC in-domain test (same templates/vocabulary as synth_train)"),
    "synth_overlap": ("overlap", 400, "SYNTHETIC OOD: HANS-style full lexical overlap, incl. non-entailments"),
    "synth_negation": ("negation", 400, "SYNTHETIC OOD: every pair contains a negation"),
    "synth_vocab": ("vocab", 400, "SYNTHETIC OOD: unseen vocabulary (no content word shared with synth_train)"),
    "synth_embedded": ("embedded", 400, "SYNTHETIC OOD: longer premises with embedded / relative clauses"),
}
for _name, (_kind, _size, _desc) in SYNTHETIC.items():
    BUILTINS[_name] = {**_SYN, "synthetic": _kind, "size": _size, "description": _desc}


# Small stratified, seeded subsets of the real testsets, shipped by the demo DVC remote (data.dvc -> data/raw/real;
# built from ../shared/data/nli by scripts/make_real_subsets.py; origin and licences in data/raw/real/SOURCES.md).
# Built-in local files: every real-data preset (quickstart, cpu, real) names them without restating fields.
_REAL = {"premise": "premise", "hypothesis": "hypothesis", "label": "label", "id": "id"}
REAL = {
    "mnli_real": (THREE_WAY, "MNLI dev-matched, 2,000-row stratified subset (ID testset)"),
    "snli_real": (THREE_WAY, "SNLI test, 2,000-row stratified subset"),
    "scitail_real": (ENT0, "SciTail test, 2,000-row stratified subset"),
    "rte_real": (ENT0, "GLUE RTE dev (277 rows)"),
    "hans_real": (ENT0, "HANS evaluation set, 2,000 rows stratified by heuristic x label"),
    "anli_r1_real": (THREE_WAY, "ANLI R1 dev (1,000 rows; CC BY-NC 4.0)"),
    "wnli_real": (ENT1, "GLUE WNLI train (635 rows; WNLI dev has only 71)"),
    "paws_qqp_real": (ENT1, "PAWS-QQP dev+test (677 rows; paraphrase = entailment)"),
    "mnli_real_train": (THREE_WAY, "MNLI train pool, 2,000-row stratified subset"),
    "snli_real_train": (THREE_WAY, "SNLI train pool, 2,000-row stratified subset"),
}
for _name, (_map, _desc) in REAL.items():
    BUILTINS[_name] = {**_REAL, "path": f"data/raw/real/{_name}.jsonl", "label_map": _map, "description": _desc}
    if _name.endswith("_train"):
        BUILTINS[_name]["max_examples"] = None  # a training pool keeps all its rows
BUILTINS["hans_real"]["slice"] = ["heuristic", "@label"]

# The larger official splits, read in place from ../shared/data/nli (paths relative to the project root; a project
# cloned beside the main one finds it there): what the paper's code scored, where it is public under 4 MiB
# (../shared/data/nli/SOURCES.md). A list of paths is one testset read file by file (ids prefixed by file stem).
_NLI = "../shared/data/nli/"
NLI_SPLITS = {
    "rte_full": (
        [f"{_NLI}rte/rte_train.csv", f"{_NLI}rte/rte_dev.csv"],
        ENT0,
        None,
        "GLUE RTE train + dev (2,767 rows)",
    ),
    "wnli_full": (
        [f"{_NLI}wnli/wnli_train.csv", f"{_NLI}wnli/wnli_dev.csv"],
        ENT1,
        None,
        "GLUE WNLI train + dev (706 rows)",
    ),
    "anli_dev": (
        [f"{_NLI}anli/anli_r{r}_dev.jsonl" for r in (1, 2, 3)],
        THREE_WAY,
        "uid",
        "ANLI R1-R3 dev (3,198 rows; CC BY-NC 4.0)",
    ),
    "paws_qqp_full": (f"{_NLI}paws/paws_qqp_dev_and_test.tsv", ENT1, "id", "PAWS-QQP dev+test (677 rows)"),
    "sick_full": (f"{_NLI}sick/SICK.txt", THREE_WAY, "pair_ID", "SICK, all SemEval sets (9,840 rows)"),
    "mnli_mm_gold": (
        f"{_NLI}mnli/mnli_dev_mismatched_gold_999.csv",
        THREE_WAY,
        None,
        "MNLI dev-mismatched, the 999 rows with gold labels",
    ),
}
for _name, (_path, _map, _id, _desc) in NLI_SPLITS.items():
    BUILTINS[_name] = {**_REAL, "path": _path, "label_map": _map, "id": _id, "description": _desc}
BUILTINS["paws_qqp_full"].update(premise="sentence1", hypothesis="sentence2")
BUILTINS["sick_full"].update(premise="sentence_A", hypothesis="sentence_B", label="entailment_label", format="tsv")


def known_names(params: dict | None = None) -> list[str]:
    """Built-in names followed by names declared only in params (data.testsets)."""
    declared = ((params or {}).get("data") or {}).get("testsets") or {}
    return list(BUILTINS) + [n for n in declared if n not in BUILTINS]


def resolve(params: dict | None, name: str) -> dict:
    """The effective entry for `name`: the built-in merged with data.testsets.<name> (params win).

    Adds `name`, `kind` (hub | local | synthetic) and `user_keys` (keys set in params), and checks
    the entry is complete, so errors surface before anything is loaded or written.
    """
    declared = ((params or {}).get("data") or {}).get("testsets") or {}
    if name not in BUILTINS and name not in declared:
        raise UserError(
            f"unknown testset {name!r}{closest(name, known_names(params))}; "
            "see `oodcorr testsets` or declare it under data.testsets"
        )
    user = dict(declared.get(name) or {})
    spec = copy.deepcopy(BUILTINS.get(name, {}))
    spec.update(copy.deepcopy(user))
    spec["name"], spec["user_keys"] = name, sorted(user)
    where = f"params: data.testsets.{name}" if name in declared else f"testset {name}"
    if user.get("path") or (spec.get("path") and not spec.get("hub")):  # a local file, declared or built in
        spec["kind"] = "local"
    elif spec.get("synthetic"):
        spec["kind"] = "synthetic"
    elif spec.get("hub"):
        spec["kind"] = "hub"
    else:
        raise UserError(f"{where}: no source; give `path` (a tsv/csv/jsonl file) or `hub`")
    for key in ("premise", "hypothesis", "label"):
        if not spec.get(key):
            raise UserError(f"{where}.{key}: missing (the column holding the {key})")
    lm = spec.get("label_map")
    if not isinstance(lm, dict) or not lm:
        raise UserError(f"{where}.label_map: missing (map raw labels to entailment / non_entailment / drop)")
    spec["label_map"] = {str(k): v for k, v in lm.items()}
    for raw, target in spec["label_map"].items():
        if target not in TARGETS:
            raise UserError(f"{where}.label_map.{raw}: {target!r} is not one of {', '.join(TARGETS)}")
    neutral = spec.get("neutral") or ((params or {}).get("data") or {}).get("neutral") or "drop"
    if neutral not in ("drop", "merge"):
        raise UserError(f"{where}.neutral: {neutral!r} is not 'drop' or 'merge'")
    spec["neutral"] = neutral
    paths = spec.get("path")
    if (
        spec["kind"] == "local"
        and isinstance(paths, list)
        and not (paths and all(isinstance(p, str) and p for p in paths))
    ):
        raise UserError(f"{where}.path: a file, or a list of files read as one testset; got {paths!r}")
    if spec["kind"] == "hub" and not spec.get("split"):
        raise UserError(f"{where}.split: missing (which split of {spec['hub']} to load)")
    fmt = spec.get("format")
    if spec["kind"] == "local" and fmt not in (None, "tsv", "csv", "jsonl"):
        raise UserError(f"{where}.format: {fmt!r} is not tsv, csv or jsonl")
    if spec["kind"] == "synthetic":
        if spec["synthetic"] not in SYNTHETIC_KINDS:
            raise UserError(
                f"{where}.synthetic: unknown generator {spec['synthetic']!r}"
                f"{closest(spec['synthetic'], SYNTHETIC_KINDS)}; known: {', '.join(SYNTHETIC_KINDS)}"
            )
    return spec


def describe_source(spec: dict) -> str:
    """One string naming where the rows come from (recorded in the manifest)."""
    if spec["kind"] == "local":
        paths = spec["path"] if isinstance(spec["path"], list) else [spec["path"]]
        return "file:" + " + ".join(map(str, paths))
    if spec["kind"] == "synthetic":
        return f"synthetic:{spec['synthetic']} (oodcorr generator, size {spec.get('size')})"
    rev = f"@{spec['revision']}" if spec.get("revision") else ""
    cfg = f"/{spec['config']}" if spec.get("config") else ""
    return f"hub:{spec['hub']}{cfg}{rev}"


def label_scheme(spec: dict) -> str:
    """Short description of the label mapping, e.g. '3-way, neutral dropped'."""
    targets = set(spec["label_map"].values())
    if "neutral" in targets:
        return "3-way, neutral " + ("merged" if spec.get("neutral") == "merge" else "dropped")
    return "binary"
