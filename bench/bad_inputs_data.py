"""Bad-input cases: data files (prepared testsets, local CSV testsets, a relabelled testset). A new one is one
Case in cases()."""

from __future__ import annotations

import json

import yaml

from bad_inputs_runner import BASE, E, T, Case, corrupt


def _relabel(root):
    path = root / "data" / "prepared" / "synth_overlap.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    for r in rows:
        r["label"] = "entailment" if r["label"] == "non_entailment" else "non_entailment"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _relabel_rescored(root, res):
    after = [json.loads(x) for x in (root / "runs" / "a" / "eval" / "metrics.jsonl").read_text().splitlines()]
    before = [json.loads(x) for x in (BASE[0] / "runs" / "a" / "eval" / "metrics.jsonl").read_text().splitlines()]
    acc = lambda rows: {(r["step"], r["testset"]): r["accuracy"] for r in rows if r["slice"] is None}  # noqa: E731
    a, b = acc(after), acc(before)
    flipped = [k for k in b if k[1] == "synth_overlap" and abs(a[k] - (1 - b[k])) > 1e-9]
    return f"cached scores of the relabelled testset reused: {flipped[:2]}" if flipped else None


def _local_csv(content: bytes):
    def mutate(root):
        (root / "mine.csv").write_bytes(content)
        p = yaml.safe_load((root / "params.yaml").read_text())
        p["data"]["testsets"]["mine"] = {"path": "mine.csv", "premise": "p", "hypothesis": "h", "label": "y",
                                         "label_map": {"yes": "entailment", "no": "non_entailment"}}
        p["data"]["prepare"] = ["mine"]
        (root / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    return mutate


CSV_ROWS = "p,h,y\n" + "".join(f"Ann went {i}.,Ann moved.,{'yes' if i % 2 else 'no'}\n" for i in range(30))


def _prepared_mine(root, res):
    f = root / "data" / "prepared" / "mine.jsonl"
    return None if f.exists() and len(f.read_text().splitlines()) == 24 else "mine not prepared"


def cases() -> list[Case]:
    return [
        Case("file:prepared-bad-json", T, corrupt("data/prepared/synth_train.jsonl", "truncate"),
             must=r"synth_train\.jsonl:\d+"),
        Case("file:prepared-not-utf8", E, lambda r: (r / "data/prepared/synth_overlap.jsonl").write_bytes(
            b'{"id": "\xff"}\n'), must=r"synth_overlap\.jsonl:1"),
        Case("file:relabelled-testset", E, _relabel, expect="ok", check=_relabel_rescored,
             allowed=("runs/a/eval/**",), item="relabelled testset reuses cached scores"),
        Case("file:csv-not-utf8", ["data", "prepare"], _local_csv(CSV_ROWS.encode().replace(b"Ann went 3",
             b"Ann w\xe9nt 3")), must=r"mine\.csv:\d+", item="traceback: non-UTF-8 CSV", fast=True),
        Case("file:csv-bom", ["data", "prepare"], _local_csv(b"\xef\xbb\xbf" + CSV_ROWS.encode()), expect="ok",
             check=_prepared_mine, allowed=("data/prepared/**",), item="CSV with a UTF-8 BOM refused"),
        Case("file:csv-malformed", ["data", "prepare"], _local_csv((CSV_ROWS + "x,y\n").encode()),
             must=r"mine\.csv:\d+"),
    ]
