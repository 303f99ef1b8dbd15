#!/usr/bin/env python3
"""Build the small real-NLI subsets shipped in the demo DVC remote (data/raw/real/).

    python scripts/make_real_subsets.py [--src ../shared/data/nli] [--out data/raw/real] [--max-rows 2000] [--seed 0]

Reads the read-only source files described in <src>/SOURCES.md and writes, per testset, a JSONL file with
`id`, `premise`, `hypothesis`, `label` (the source's own label spelling; label maps are in the `real` preset)
and, for HANS, `heuristic`. A file with more than --max-rows rows is subsampled **stratified** by label
(HANS: by heuristic x label) with proportional allocation (largest remainder) and a seeded draw per
stratum (random.Random(f"{seed}:{name}:{stratum}")); rows keep their source order. Files with at most
--max-rows rows are copied whole. The output is byte-for-byte reproducible (stdlib only, sorted keys,
"\n" line ends); tests/test_data_real_subsets.py checks that against the committed files.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# name -> (source file under src, format, premise col, hypothesis col, label col, id col or None,
#          stratify-by columns, role, what, licence)
SUBSETS = {
    "mnli_real": (
        "mnli/mnli_dev_matched.tsv",
        "tsv",
        "premise",
        "hypothesis",
        "gold_label",
        "index",
        ["gold_label"],
        "ID testset",
        "MNLI dev-matched (gold labels; 3-way)",
        "MNLI: OANC-derived, mostly open / CC BY-SA 3.0 parts (see the MNLI paper); copy via tommccoy1/hans (MIT)",
    ),
    "snli_real": (
        "snli/snli_test_esnli_tokenized.tsv",
        "tsv",
        "premise",
        "hypothesis",
        "label",
        None,
        ["label"],
        "OOD testset",
        "SNLI test (e-SNLI copy, PTB-style tokenised text; 3-way)",
        "SNLI: CC BY-SA 4.0; copy via OanaMariaCamburu/e-SNLI (MIT)",
    ),
    "scitail_real": (
        "scitail/scitail_test.csv",
        "csv",
        "premise",
        "hypothesis",
        "label",
        None,
        ["label"],
        "OOD testset",
        "SciTail test (entailment / not_entailment)",
        "SciTail: AI2 release (Apache-2.0 per AI2); copy via felipessalvatore/NLI_datasets (MIT)",
    ),
    "rte_real": (
        "rte/rte_dev.csv",
        "csv",
        "premise",
        "hypothesis",
        "label",
        None,
        ["label"],
        "OOD testset",
        "GLUE RTE dev, all 277 rows (entailment / not_entailment)",
        "RTE: GLUE terms (research use; see the RTE challenge sources); copy via felipessalvatore/NLI_datasets (MIT)",
    ),
    "hans_real": (
        "hans/hans_evaluation.tsv",
        "tsv",
        "premise",
        "hypothesis",
        "label",
        None,
        ["heuristic", "label"],
        "OOD testset",
        "HANS evaluation set (stratified by heuristic x label; 2-way)",
        "HANS: MIT (tommccoy1/hans); copy via nikotang/RD-UU-MPLT (HF datasets dump)",
    ),
    "anli_r1_real": (
        "anli/anli_r1_dev.jsonl",
        "jsonl",
        "premise",
        "hypothesis",
        "label",
        "uid",
        ["label"],
        "OOD testset",
        "ANLI round 1 dev, all 1,000 rows (3-way)",
        "ANLI: **CC BY-NC 4.0 (non-commercial use only)**; copy via facebookresearch/anli",
    ),
    "wnli_real": (
        "wnli/wnli_train.csv",
        "csv",
        "premise",
        "hypothesis",
        "label",
        None,
        ["label"],
        "OOD testset",
        "GLUE WNLI **train**, all 635 rows (WNLI dev has only 71 rows, too few to measure "
        "anything; the paper also uses WNLI train as a testset, since nothing is trained on it)",
        "WNLI: GLUE terms (Winograd Schema Challenge data, CC BY 4.0); copy via felipessalvatore/NLI_datasets (MIT)",
    ),
    "paws_qqp_real": (
        "paws/paws_qqp_dev_and_test.tsv",
        "tsv",
        "sentence1",
        "sentence2",
        "label",
        "id",
        ["label"],
        "OOD testset",
        "PAWS-QQP dev_and_test, all 677 rows (1 = paraphrase = entailment; PAWS-Wiki is not available offline)",
        "PAWS: free use with attribution to Google; QQP text: Quora terms; copy via uds-lsv/llmft",
    ),
    "mnli_real_train": (
        "mnli/mnli_train_subset_10k.jsonl",
        "jsonl",
        "premise",
        "hypothesis",
        "label",
        ("src_file", "src_id"),
        ["label"],
        "training pool",
        "MNLI train (from a 10k sample of MNLI train; 0 overlap with dev-matched)",
        "MNLI: as above; copy via ZhengxiangShi/PowerfulPromptFT (MIT)",
    ),
    "snli_real_train": (
        "snli/snli_train_subset_10k.jsonl",
        "jsonl",
        "premise",
        "hypothesis",
        "label",
        ("src_file", "src_id"),
        ["label"],
        "training pool",
        "SNLI train (from a 10k sample)",
        "SNLI: CC BY-SA 4.0; copy via ZhengxiangShi/PowerfulPromptFT (MIT)",
    ),
}
# Origin commits (from <src>/SOURCES.md), repeated here so SOURCES.md in the output is self-contained.
ORIGIN = {
    "mnli_real": (
        "tommccoy1/hans@7299f6f657089ce06a0f98e7e81f8d0f5b7741ce "
        "berts_of_a_feather/mnli_development_set_number_of_correct_responses.txt"
    ),
    "snli_real": "OanaMariaCamburu/e-SNLI@7b585a3f077fdea899780eb0473940522ae44a2e dataset/eSNLI/{s1,s2,labels}.test",
    "scitail_real": (
        "felipessalvatore/NLI_datasets@9551b739a830fafb2ec4b98d49a9ecd4bf3dcbd0 "
        "nli_datasets/scitail/dev.csv (= SciTail test)"
    ),
    "rte_real": "felipessalvatore/NLI_datasets@9551b739a830fafb2ec4b98d49a9ecd4bf3dcbd0 nli_datasets/rte/dev.csv",
    "hans_real": (
        "nikotang/RD-UU-MPLT@fa1dfcc482579e8823dfc35f7b2ec384a4e14688 "
        "hans.zip (validation+test = the HANS evaluation set)"
    ),
    "anli_r1_real": (
        "facebookresearch/anli@b5ce27af54a53bd495af7260fdc485000eed15f8 "
        "anlizinganli/anli_annot_v0.2/ANLI_analysis_r1_dev.csv"
    ),
    "wnli_real": "felipessalvatore/NLI_datasets@9551b739a830fafb2ec4b98d49a9ecd4bf3dcbd0 nli_datasets/wnli/train.csv",
    "paws_qqp_real": "uds-lsv/llmft@3acc3894fa4111d9155190a98a147e3e664ff3da data/paws_qqp/dev_and_test.tsv",
    "mnli_real_train": (
        "ZhengxiangShi/PowerfulPromptFT@b4ecdea060847115e9909b442ab4eb15bcb2a2c4 "
        "data/glue_pretrain/MNLI/{train,dev}.json"
    ),
    "snli_real_train": (
        "ZhengxiangShi/PowerfulPromptFT@b4ecdea060847115e9909b442ab4eb15bcb2a2c4 "
        "data/glue_pretrain/SNLI/{train,dev}.json"
    ),
}


def read_rows(path: Path, fmt: str) -> list[dict]:
    if fmt == "jsonl":
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    csv.field_size_limit(sys.maxsize)
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if fmt == "tsv" else csv.DictReader(f)
        return [dict(r) for r in reader]


def allocate(sizes: dict, n: int) -> dict:
    """Proportional allocation of n over strata (largest remainder; ties broken by stratum key)."""
    total = sum(sizes.values())
    exact = {k: n * v / total for k, v in sizes.items()}
    alloc = {k: int(x) for k, x in exact.items()}
    rest = n - sum(alloc.values())
    for k in sorted(sizes, key=lambda k: (-(exact[k] - alloc[k]), k))[:rest]:
        alloc[k] += 1
    return alloc


def subset(name: str, rows: list[dict], strat: list[str], max_rows: int, seed: int) -> list[int]:
    """Indices (in source order) of the rows kept."""
    if len(rows) <= max_rows:
        return list(range(len(rows)))
    groups = defaultdict(list)
    for i, r in enumerate(rows):
        groups["|".join(str(r[c]) for c in strat)].append(i)
    alloc = allocate({k: len(v) for k, v in groups.items()}, max_rows)
    keep = []
    for k in sorted(groups):
        keep += random.Random(f"{seed}:{name}:{k}").sample(groups[k], alloc[k])
    return sorted(keep)


def build(src: Path, out: Path, max_rows: int = 2000, seed: int = 0, names=None) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    summary = {}
    for name, (rel, fmt, pcol, hcol, lcol, idcol, strat, role, what, lic) in SUBSETS.items():
        if names and name not in names:
            continue
        source = src / rel
        rows = read_rows(source, fmt)
        keep = subset(name, rows, strat, max_rows, seed)
        lines = []
        for i in keep:
            r = rows[i]
            if isinstance(idcol, tuple):  # ids unique only within a source file
                rid = ":".join(str(r[c]) for c in idcol)
            else:
                rid = str(r[idcol]) if idcol else f"{Path(rel).name}:{i + 1}"
            rec = {"id": rid, "premise": r[pcol], "hypothesis": r[hcol], "label": str(r[lcol])}
            if "heuristic" in strat:
                rec["heuristic"] = r["heuristic"]
            lines.append(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
        data = "".join(lines).encode("utf-8")
        (out / f"{name}.jsonl").write_bytes(data)
        counts = Counter("|".join(str(rows[i][c]) for c in strat) for i in keep)
        summary[name] = {
            "file": f"{name}.jsonl",
            "source": rel,
            "source_rows": len(rows),
            "rows": len(keep),
            "strata": dict(sorted(counts.items())),
            "sha256": hashlib.sha256(data).hexdigest(),
            "source_sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
        }
    if not names:
        (out / "SOURCES.md").write_text(sources_md(summary, max_rows, seed), encoding="utf-8")
    return summary


def sources_md(summary: dict, max_rows: int, seed: int) -> str:
    lines = [
        "# Real NLI subsets (data/raw/real): origin and licence",
        "",
        f"Built by `python scripts/make_real_subsets.py --max-rows {max_rows} --seed {seed}` "
        "from the read-only copies in",
        "`../shared/data/nli` (see its SOURCES.md), which were taken from the public GitHub repositories and commits",
        "named below. Files with more rows than the cap are subsampled stratified by label (HANS: heuristic x label),",
        "proportional allocation, seeded; rows keep their source order. `label` keeps the source's spelling; the",
        "`real` preset maps it to entailment / non_entailment (3-way sets: neutral dropped unless `neutral: merge`).",
        "Re-running the script reproduces these files byte for byte (tests/test_data_real_subsets.py).",
        "",
        "**Licences differ per file. ANLI is CC BY-NC 4.0 (non-commercial only); SICK (not included here) is",
        "CC BY-NC-SA 3.0.** These subsets are for research and testing; check each licence before other uses.",
        "",
        "| file | role | what | rows (of source) | strata kept | origin (repo@commit path) | licence | sha256 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, s in summary.items():
        _, _, _, _, _, _, _, role, what, lic = SUBSETS[name]
        strata = ", ".join(f"{k}: {v}" for k, v in s["strata"].items())
        lines.append(
            f"| {s['file']} | {role} | {what} | {s['rows']:,} ({s['source_rows']:,}) | {strata} | "
            f"{ORIGIN[name]} | {lic} | `{s['sha256'][:16]}` |"
        )
    lines += ["", "Source files (sha256 of the copy read):", ""]
    lines += [f"- `{s['source']}`: `{s['source_sha256']}`" for s in summary.values()]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", type=Path, default=REPO.parent / "shared" / "data" / "nli")
    ap.add_argument("--out", type=Path, default=REPO / "data" / "raw" / "real")
    ap.add_argument("--max-rows", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if not (a.src / "SOURCES.md").exists():
        raise SystemExit(f"error: no NLI source folder at {a.src} (expected SOURCES.md there); pass --src")
    for name, s in build(a.src, a.out, a.max_rows, a.seed).items():
        print(f"{name}: {s['rows']} of {s['source_rows']} rows -> {a.out / s['file']}")


if __name__ == "__main__":
    main()
