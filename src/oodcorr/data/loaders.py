"""Loading testsets from local files, the Hugging Face hub and the synthetic generators.

Every source ends in the same function, `to_binary`, which applies an entry's fields, filter,
label_map and slice. Hub rows and local rows therefore cannot drift apart in how they are mapped.
"""

from __future__ import annotations

import csv
import io
import os
import random
import socket
import sys
from collections import Counter, defaultdict
from pathlib import Path

from oodcorr.core.errors import UserError
from oodcorr.core.hub import offline
from oodcorr.data.settings import PrepareSettings
from oodcorr.settings.project import Project
from oodcorr.settings.registry import ENT, NON

FORMATS = {".tsv": "tsv", ".txt": "tsv", ".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl"}


# ---------------------------------------------------------------- local files
def read_local(spec: dict, project: Project) -> tuple[list[dict], list[int], str]:
    """Rows (dicts keyed by column), their 1-based file line numbers, and the file path as text.

    TSV is read without quote handling (MNLI/SNLI text contains bare quotes); CSV with it.
    """
    path = project.path(spec["path"])
    shown = str(spec["path"])
    check_readable(path, f"testset {spec['name']}")
    fmt = spec.get("format") or FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise UserError(f"testset {spec['name']}: cannot tell the format of {shown}; set format: tsv|csv|jsonl")
    if fmt == "jsonl":
        return (*_read_jsonl(path, shown), shown)
    csv.field_size_limit(sys.maxsize)
    rows, lines = [], []
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")  # a leading byte-order mark (spreadsheet exports) is not part of the header
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise UserError(f"{shown}:{line}: not UTF-8 (byte {raw[e.start]:#04x}); save the file as UTF-8") from None
    with io.StringIO(text, newline="") as f:
        if fmt == "tsv":
            reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        else:
            reader = csv.reader(f)
        header = spec.get("columns")
        if not header:
            header = next(reader, None)
            if header is None:
                raise UserError(f"{shown}: empty file")
        header = [str(h) for h in header]
        for rec in reader:
            if not rec or (len(rec) == 1 and not rec[0].strip()):
                continue
            if len(rec) != len(header):
                raise UserError(
                    f"{shown}:{reader.line_num}: malformed row: {len(rec)} fields, expected {len(header)} ({fmt})"
                )
            rows.append(dict(zip(header, rec)))
            lines.append(reader.line_num)
    return rows, lines, shown


def path_kind(path: Path) -> str | None:
    """What stands at `path` when it is not a regular file ('a folder', 'a named pipe (FIFO)', ...), with the
    symlink it is, if any; None for a regular file (or a symlink to one)."""
    import stat

    link = f"a symlink to {os.readlink(path)}, which is " if path.is_symlink() else ""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return f"{link}missing" if link else None
    except OSError as e:
        return f"{link}not readable ({e.strerror})"
    if stat.S_ISREG(mode):
        return None
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return link + next((what for test, what in kinds if test(mode)), "not a regular file")


def check_readable(path: Path, what: str) -> None:
    """One line saying what `path` is when it cannot be read as a data file (missing, a folder, a FIFO, a
    device, unreadable), never anything of its content."""
    if not path.exists() and not path.is_symlink():
        raise UserError(f"{what}: file not found: {path}")
    kind = path_kind(path)
    if kind is not None:
        raise UserError(f"{what}: {path} is {kind}, not a data file; give the path of a tsv, csv or jsonl file")
    if not os.access(path, os.R_OK):
        raise UserError(f"{what}: {path}: not readable by this user (permission denied)")


def _read_jsonl(path: Path, shown: str) -> tuple[list[dict], list[int]]:
    from oodcorr.core.io import iter_json_objects

    rows, lines = [], []
    for lineno, obj in iter_json_objects(path, shown, prefix="malformed row: "):
        rows.append(obj)
        lines.append(lineno)
    return rows, lines


# ---------------------------------------------------------------- hub
def _local_hint(spec: dict) -> str:
    return (
        f"download it once, or declare a local copy: data.testsets.{spec['name']}: "
        f"{{path: FILE, premise: ..., hypothesis: ..., label: ...}} (see `oodcorr testsets`)"
    )


def load_hub(spec: dict):
    """`datasets.load_dataset` with the registry's config/revision/split; fails in seconds when offline.

    The offline env vars are checked first (no attempt at all); otherwise a short TCP probe of the hub
    and short HF timeouts keep an unreachable hub from hanging the pipeline.
    """
    what = f"{spec['hub']}" + (f"/{spec['config']}" if spec.get("config") else "") + f" split {spec.get('split')}"
    if offline(datasets=True):
        raise UserError(
            f"testset {spec['name']}: the hub is offline (HF_HUB_OFFLINE/HF_DATASETS_OFFLINE) "
            f"and {what} must be downloaded; {_local_hint(spec)}"
        )
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").split("://")[-1].split("/")[0]
    host, _, port = endpoint.partition(":")
    if not (os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")):
        try:
            socket.create_connection((host, int(port or 443)), timeout=3).close()
        except OSError as e:
            raise UserError(f"testset {spec['name']}: hub unreachable ({host}: {e}); {_local_hint(spec)}") from None
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "10")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "30")
    import datasets

    try:
        return datasets.load_dataset(
            spec["hub"], spec.get("config"), revision=spec.get("revision"), split=spec.get("split")
        )
    except Exception as e:  # noqa: BLE001 - any hub failure is the user's environment, say so in one line
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(
            f"testset {spec['name']}: could not load {what} from the hub: {msg}; {_local_hint(spec)}"
        ) from None


# ---------------------------------------------------------------- the one mapping function
def _records(table) -> list[dict]:
    """datasets.Dataset, pandas.DataFrame or a list of dicts -> list of dicts."""
    if isinstance(table, list):
        return table
    if hasattr(table, "to_list") and hasattr(table, "features"):  # datasets.Dataset
        return table.to_list()
    if hasattr(table, "to_dict"):  # pandas.DataFrame
        return table.to_dict("records")
    return list(table)


def _raw(value) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).strip() if value is not None else ""


def _label_fix(spec: dict, raw: str) -> str:
    """What to do about a label outside the map: where to map it, and to what."""
    key = f"data.testsets.{spec['name']}.label_map"
    own = "label_map" in spec.get("user_keys", ["label_map"])
    where = (
        f"add each value to {key} in params.yaml"
        if own
        else f"give {key} in params.yaml with every value of the file (it replaces the built-in map)"
    )
    return f"Fix: {where}, mapped to {ENT}, {NON}, neutral or drop (e.g. {raw!r}: drop)"


def to_binary(table, spec: dict, origin: str = "", lines: list[int] | None = None) -> list[dict]:
    """Map source rows onto `{id, premise, hypothesis, label, original_label, slice}` rows.

    Applies, in order: `filter` (keep rows whose field equals one of the values), `label_map`
    (string keys; `neutral` resolved by spec['neutral']; `drop` removes the row), `id` column (else the
    source row index, so ids stay stable under filtering and subsampling) and `slice` (a field, or a list
    of fields joined by '/'; '@label' means the mapped binary label).
    """
    name = spec["name"]
    origin = origin or name
    rows = _records(table)

    def where(i):
        return f"{origin}:{lines[i]}" if lines else f"{origin} row {i}"

    slices = spec.get("slice") or []
    slices = [slices] if isinstance(slices, str) else list(slices)
    if rows:
        _check_columns(set(rows[0]), spec, slices, f"{origin}: testset {name}")
    filt = {k: {_raw(x) for x in (v if isinstance(v, list) else [v])} for k, v in (spec.get("filter") or {}).items()}
    lmap = dict(spec["label_map"])
    neutral = NON if spec.get("neutral") == "merge" else "drop"
    unknown: Counter = Counter()
    first_unknown = None  # where the first row with a label outside the map is
    out = []
    for i, row in enumerate(rows):
        if any(_raw(row.get(k)) not in vals for k, vals in filt.items()):
            continue
        raw = _raw(row.get(spec["label"]))
        target = lmap.get(raw)
        if target is None:
            unknown[raw] += 1
            first_unknown = first_unknown or (where(i), raw)
            continue
        target = neutral if target == "neutral" else target
        if target != "drop":
            out.append(_binary_row(row, i, spec, slices, target, raw, where))
    if unknown:
        seen = ", ".join(f"{k!r} ({n})" for k, n in unknown.most_common(8))
        raise UserError(
            f"{first_unknown[0]}: testset {name}: label {first_unknown[1]!r} not in label_map "
            f"(values outside it: {seen}); label_map keys: {', '.join(map(repr, lmap))}. "
            + _label_fix(spec, first_unknown[1])
        )
    if not out:
        raise UserError(f"{origin}: testset {name}: empty after filtering / label mapping ({len(rows)} source rows)")
    ids = Counter(r["id"] for r in out)
    dup = [k for k, n in ids.items() if n > 1]
    if dup:
        raise UserError(f"{origin}: testset {name}: id column {spec.get('id')!r} is not unique (e.g. {dup[0]!r})")
    return out


def _check_columns(cols: set, spec: dict, slices: list, what: str) -> None:
    """Every column the spec names (premise, hypothesis, label, filter, slice, id) is in the file."""
    fields = [spec["premise"], spec["hypothesis"], spec["label"], *(spec.get("filter") or {})]
    fields += [s for s in slices if s != "@label"] + ([spec["id"]] if spec.get("id") else [])
    missing = [c for c in fields if c not in cols]
    if missing:
        raise UserError(
            f"{what}: no column {', '.join(map(repr, missing))} (the file "
            f"has {len(cols)} column{'s' * (len(cols) != 1)}); set premise, hypothesis, label "
            "(and slice, id, filter) to column names of the file"
        )


def _binary_row(row: dict, i: int, spec: dict, slices: list, target: str, raw: str, where) -> dict:
    """One source row as {id, premise, hypothesis, label, original_label, slice}; an empty text is an error."""
    premise, hyp = row.get(spec["premise"]), row.get(spec["hypothesis"])
    for field, text in (("premise", premise), ("hypothesis", hyp)):
        if not isinstance(text, str) or not text.strip():
            raise UserError(f"{where(i)}: malformed row: empty {field} (column {spec[field]!r})")
    sl = "/".join(target if s == "@label" else _raw(row.get(s)) for s in slices) if slices else None
    rid = _raw(row.get(spec["id"])) if spec.get("id") else str(i)
    return {
        "id": rid,
        "premise": premise.strip(),
        "hypothesis": hyp.strip(),
        "label": target,
        "original_label": raw,
        "slice": sl,
    }


# ---------------------------------------------------------------- subsampling
def subsample(rows: list[dict], n: int | None, seed: int, name: str) -> list[dict]:
    """Seeded stratified sample of `n` rows (strata = slice x label), in the original order.

    Each stratum keeps its share of `n` (largest remainder), so label balance and slice mix survive.
    The RNG is keyed by (seed, testset name): another testset's size never changes this one's sample.
    """
    if n is None or n >= len(rows):
        return rows
    if n <= 0:
        raise UserError(f"testset {name}: max_examples must be positive, got {n}")
    strata: dict = defaultdict(list)
    for i, r in enumerate(rows):
        strata[(r.get("slice") or "", r["label"])].append(i)
    keys = sorted(strata)
    quotas = {k: n * len(strata[k]) / len(rows) for k in keys}
    take = {k: int(q) for k, q in quotas.items()}
    for k in sorted(keys, key=lambda k: (take[k] - quotas[k], k))[: n - sum(take.values())]:
        take[k] += 1
    rng = random.Random(f"{seed}:{name}")
    chosen = sorted(i for k in keys for i in rng.sample(strata[k], take[k]))
    return [rows[i] for i in chosen]


def label_counts(rows: list[dict]) -> dict[str, int]:
    c = Counter(r["label"] for r in rows)
    return {ENT: c.get(ENT, 0), NON: c.get(NON, 0)}


# ---------------------------------------------------------------- one testset, any source
def load_testset(spec: dict, project: Project, settings: PrepareSettings) -> list[dict]:
    """Rows of one resolved registry entry (before subsampling), through `to_binary`: local paths resolve
    against `project`, synthetic rows use `settings.seed`."""
    if spec["kind"] == "local":
        paths = spec["path"] if isinstance(spec["path"], list) else [spec["path"]]
        out = []
        for path in paths:  # several files are one testset: ids prefixed by their file's stem stay unique
            one = {**spec, "path": path}
            rows, lines, shown = read_local(one, project)
            mapped = to_binary(rows, one, origin=shown, lines=lines)
            if len(paths) > 1:
                mapped = [{**r, "id": f"{Path(path).stem}:{r['id']}"} for r in mapped]
            out += mapped
        return out
    if spec["kind"] == "synthetic":
        from oodcorr.data.synthetic import generate

        return to_binary(
            generate(spec["synthetic"], spec.get("size") or 400, settings.seed),
            spec,
            origin=f"synthetic:{spec['synthetic']}",
        )
    return to_binary(load_hub(spec), spec, origin=f"hub:{spec['hub']}")
