"""Bad-input cases: data files (prepared testsets, local CSV testsets, a relabelled testset). A new one is one
Case in cases()."""

from __future__ import annotations

import json
import os
from pathlib import Path

import yaml
from bad_inputs_runner import BASE, Case, E, T, corrupt


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


def _local_csv(content: bytes | None, make=None, **extra):
    """mine.csv declared as a testset (and prepared): `content`, else what `make(path)` puts there."""

    def mutate(root):
        if content is None:
            make(root / "mine.csv")
        else:
            (root / "mine.csv").write_bytes(content)
        p = yaml.safe_load((root / "params.yaml").read_text())
        p["data"]["testsets"]["mine"] = {
            "path": "mine.csv",
            "premise": "p",
            "hypothesis": "h",
            "label": "y",
            "label_map": {"yes": "entailment", "no": "non_entailment"},
            **extra,
        }
        p["data"]["prepare"] = ["mine"]
        (root / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))

    return mutate


CSV_ROWS = "p,h,y\n" + "".join(f"Ann went {i}.,Ann moved.,{'yes' if i % 2 else 'no'}\n" for i in range(30))


def _prepared_mine(root, res):
    f = root / "data" / "prepared" / "mine.jsonl"
    return None if f.exists() and len(f.read_text().splitlines()) == 24 else "mine not prepared"


def _secret_link(path):
    """mine.csv: a symlink to a file outside the project that only its owner may read (a system secret)."""
    secret = path.parent.parent / "secret"
    secret.write_text("root:SECRETLINE:20228:0:99999:7:::\nbin:*:20228:0:99999:7:::\n")
    secret.chmod(0o600)
    path.symlink_to(secret)


def _planted_manifest_key(root):
    """A key in data/prepared/manifest.json that leads to the user's notes.jsonl at the project's top."""
    (root / "notes.jsonl").write_text("my notes\n")
    path = root / "data" / "prepared" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["testsets"]["../../notes"] = manifest["testsets"]["synth_id"]
    path.write_text(json.dumps(manifest))


def _stale_edited(root):
    """synth_vocab no longer used (stale) and its prepared file edited by the user since prepare wrote it."""
    (root / "data" / "prepared" / "synth_vocab.jsonl").write_text('{"mine": true}\n')
    p = yaml.safe_load((root / "params.yaml").read_text())
    p["evaluate"]["testsets"].remove("synth_vocab")
    (root / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))


def _stale_kept(root, res):
    f = root / "data" / "prepared" / "synth_vocab.jsonl"
    if not f.exists() or f.read_text() != '{"mine": true}\n':
        return "the user's edited file was deleted or changed"
    return (
        "still listed in the manifest" if "synth_vocab" in (root / "data/prepared/manifest.json").read_text() else None
    )


PREPARE = ["data", "prepare"]
CHECK = ["study", "check"]


def cases() -> list[Case]:
    return [
        Case(
            "file:prepared-bad-json",
            T,
            corrupt("data/prepared/synth_train.jsonl", "truncate"),
            must=r"synth_train\.jsonl:\d+",
        ),
        Case(
            "file:prepared-not-utf8",
            E,
            lambda r: (r / "data/prepared/synth_overlap.jsonl").write_bytes(b'{"id": "\xff"}\n'),
            must=r"synth_overlap\.jsonl:1",
        ),
        Case(
            "file:relabelled-testset",
            E,
            _relabel,
            expect="ok",
            check=_relabel_rescored,
            allowed=("runs/a/eval/**",),
            item="relabelled testset reuses cached scores",
        ),
        Case(
            "file:csv-not-utf8",
            ["data", "prepare"],
            _local_csv(CSV_ROWS.encode().replace(b"Ann went 3", b"Ann w\xe9nt 3")),
            must=r"mine\.csv:\d+",
            item="traceback: non-UTF-8 CSV",
            fast=True,
        ),
        Case(
            "file:csv-bom",
            ["data", "prepare"],
            _local_csv(b"\xef\xbb\xbf" + CSV_ROWS.encode()),
            expect="ok",
            check=_prepared_mine,
            allowed=("data/prepared/**",),
            item="CSV with a UTF-8 BOM refused",
        ),
        Case(
            "file:csv-malformed", ["data", "prepare"], _local_csv((CSV_ROWS + "x,y\n").encode()), must=r"mine\.csv:\d+"
        ),
        # what the file at a testset's path is, never what it holds
        *(
            Case(
                f"file:testset-fifo:{args[-1]}",
                args,
                _local_csv(None, os.mkfifo),
                must=r"mine\.csv is a named pipe",
                item="a FIFO given as a testset file reported as file not found",
                fast=args is PREPARE,
            )
            for args in (CHECK, PREPARE)
        ),
        *(
            Case(
                f"file:testset-folder:{args[-1]}",
                args,
                _local_csv(None, Path.mkdir),
                must=r"mine\.csv is a folder",
                item="a folder given as a testset file reported as file not found",
            )
            for args in (CHECK, PREPARE)
        ),
        *(
            Case(
                f"file:testset-symlink-secret:{args[-1]}",
                args,
                _local_csv(None, _secret_link),
                must=r"^(?!.*SECRETLINE).*mine\.csv",
                item="a symlinked secret's first line printed in the error",
                fast=args is PREPARE,
            )
            for args in (CHECK, PREPARE)
        ),
        # study check reads the local testsets as prepare does
        Case(
            "file:csv-slice-column-missing:check",
            CHECK,
            _local_csv(CSV_ROWS.encode(), slice="genre"),
            must=r"mine\.csv: testset mine: no column 'genre'",
            item="README's slice: genre passed study check, then broke the run",
            fast=True,
        ),
        Case(
            "file:csv-label-outside-map:check",
            CHECK,
            _local_csv(CSV_ROWS.replace(",yes\n", ",maybe\n").encode()),
            must=r"mine\.csv:\d+: testset mine: label 'maybe'",
        ),
        # prepare's cleanup removes only what it recorded
        Case(
            "file:manifest-planted-key",
            PREPARE,
            _planted_manifest_key,
            must=r"manifest\.json: testsets",
            item="a key planted in manifest.json made prepare delete the user's file",
            fast=True,
        ),
        Case(
            "file:prepared-stale-edited",
            PREPARE,
            _stale_edited,
            expect="ok",
            check=_stale_kept,
            allowed=("data/prepared/manifest.json",),
            item="prepare's cleanup deleted a file it had not written",
            fast=True,
        ),
    ]
