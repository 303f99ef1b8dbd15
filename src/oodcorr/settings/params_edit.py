"""Switching presets without losing the user's work (`oodcorr study use`).

The new params.yaml is the preset's own text read as round-trip YAML (ruamel.yaml, which DVC itself depends
on), so the preset's comments stay, with its `grid` expanded into `runs` in place. The user's own work in the
old file carries over: every testset declared under `data.testsets` that no preset declares (with the comments
written inside it), and those testsets' places in `evaluate.testsets`. Everything else comes from the preset;
the old file is kept as a backup (`params.yaml.<timestamp>.bak`) and `restore` brings the newest back.
"""

from __future__ import annotations

import datetime as _dt
import io as _io
import shutil
from pathlib import Path

import yaml

from oodcorr.settings.config import read_yaml
from oodcorr.errors import UserError


def backup_name(target: Path) -> Path:
    """params.yaml -> params.yaml.<UTC timestamp>.bak (never overwrites an earlier backup)."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    path, n = target.with_name(f"{target.name}.{stamp}.bak"), 1
    while path.exists():
        n += 1
        path = target.with_name(f"{target.name}.{stamp}-{n}.bak")
    return path


def backups(target: Path) -> list[Path]:
    """The backups of `target`, oldest first (by the timestamp in the name, then the counter)."""
    def key(p: Path):
        stamp = p.name[len(target.name) + 1:-len(".bak")]
        base, _, n = stamp.partition("-")
        return base, int(n) if n.isdigit() else 1

    return sorted(target.parent.glob(f"{target.name}.*.bak"), key=key)


def _rt():
    from ruamel.yaml import YAML

    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 4096  # never re-wrap a line the preset or the user wrote
    y.indent(mapping=2, sequence=4, offset=2)
    y.representer.add_representer(type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null"))
    return y


def _dump(doc) -> str:
    buf = _io.StringIO()
    _rt().dump(doc, buf)
    return buf.getvalue()


def _plain(node):
    """A ruamel node as plain Python (dicts, lists, scalars) for comparison and validation."""
    return read_yaml(_dump(node)) if node is not None else None


def user_testsets(old: dict | None, preset_testsets: list[dict]) -> list[str]:
    """Names under the old file's data.testsets that are the user's: an entry no preset declares as written."""
    declared = ((old or {}).get("data") or {}).get("testsets") or {}
    return [name for name, spec in declared.items()
            if not any(name in p and p[name] == spec for p in preset_testsets)]


def switch(old_text: str, preset_text: str, tree: dict, preset_testsets: list[dict], keep: bool = True
           ) -> tuple[str, dict, list[str]]:
    """(new params.yaml text, its plain tree, the user testsets carried over).

    `preset_text` is the preset file, `tree` the preset as load_preset() returns it (grid expanded, overrides
    applied); `preset_testsets` every preset's data.testsets (to tell the user's entries from a preset's)."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    doc = _rt().load(preset_text)
    if "grid" in doc:  # the expanded runs take the grid's place, one flow-style line per run
        runs = CommentedMap()
        for key, run in tree["runs"].items():
            runs[key] = CommentedMap(run)
            runs[key].fa.set_flow_style()
        doc.insert(list(doc).index("grid"), "runs", runs)
        del doc["grid"]
    if _plain(doc) != tree:  # the preset as load_preset() sees it must be what we write
        text = yaml.safe_dump(tree, sort_keys=False, width=110)
        doc = _rt().load(text)
    old = _rt().load(old_text) if old_text.strip() else None
    mine = user_testsets(_plain(old) if old is not None else None, preset_testsets) if keep else []
    if mine:
        data = doc.setdefault("data", CommentedMap())
        if data.get("testsets") is None:
            data["testsets"] = CommentedMap()
        for name in mine:
            data["testsets"][name] = old["data"]["testsets"][name]
        old_eval = [str(n) for n in ((old.get("evaluate") or {}).get("testsets") or [])]
        evaluate = doc.setdefault("evaluate", CommentedMap())
        names = evaluate.get("testsets")
        if names is None:
            names = evaluate["testsets"] = CommentedSeq()
        for name in mine:
            if name in old_eval and name not in names:
                names.append(name)
    text = _dump(doc)
    return text, read_yaml(text), mine


def restore(target: Path) -> tuple[Path, Path | None]:
    """Bring the newest backup of `target` back; the current file becomes a backup first (when it differs).
    Returns (the backup restored, the new backup of the current file or None)."""
    found = backups(target)
    if not found:
        raise UserError(f"{target}: no backup to restore (no {target.name}.<timestamp>.bak next to it)")
    newest = found[-1]
    saved = None
    if target.exists() and target.read_bytes() != newest.read_bytes():
        saved = backup_name(target)
        shutil.copyfile(target, saved)
    from oodcorr.io import write_text

    write_text(target, newest.read_text())
    return newest, saved
