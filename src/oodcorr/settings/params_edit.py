"""Switching presets without losing the user's work (`oodcorr study use`).

The new params.yaml is the preset's own text read as round-trip YAML (ruamel.yaml, which DVC itself depends
on), so the preset's comments stay, with its `grid` expanded into `runs` in place. The user's own work in the
old file carries over: every testset declared under `data.testsets` that no preset declares (with the comments
written inside it), those testsets' places in `evaluate.testsets`, and the user's comments anywhere else (a
comment no preset file holds) beside the same key, where the new file has that key. Everything else comes from
the preset; the old file is kept as one backup (`params.yaml.bak`, replaced by the next switch) and `restore`
swaps it back.
"""

from __future__ import annotations

import io as _io
import re
import shutil
from pathlib import Path

import yaml

from oodcorr.core.errors import UserError
from oodcorr.settings.yaml_dialect import read_yaml


def backup_path(target: Path) -> Path:
    """params.yaml -> params.yaml.bak: the one backup, the file the last switch replaced."""
    return target.with_name(f"{target.name}.bak")


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
    return [name for name, spec in declared.items() if not any(name in p and p[name] == spec for p in preset_testsets)]


def switch(
    old_text: str, preset_text: str, tree: dict, preset_testsets: list[dict], keep: bool = True
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
    old = _rt().load(old_text) if keep and old_text.strip() else None  # --force: the old file is not read
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


def restore(target: Path) -> tuple[Path, bool]:
    """Swap `target` and its backup: the backup comes back, the file it replaces becomes the backup (so a second
    restore undoes the first). Returns (the backup path, whether the replaced file was kept in it)."""
    back = backup_path(target)
    if not back.exists():
        raise UserError(f"{target}: no backup to restore (no {back.name} next to it; `oodcorr study use` writes one)")
    text = back.read_text()
    kept = target.exists() and target.read_bytes() != back.read_bytes()
    if kept:
        shutil.copyfile(target, back)
    from oodcorr.core.io import write_text

    write_text(target, text)
    return back, kept


# The user's comments outside the carried testsets: found by line in the old text (a comment line no preset file
# holds), put back beside the same key path in the new text.
_KEY = re.compile(r"""^(\s*)(?:- )?(?:"([^"]+)"|'([^']+)'|([^\s#'"{[][^:#]*?)):(?:\s|$)""")


def _paths(lines: list[str]) -> list[str | None]:
    """The key path of each line of block-style YAML (`data.testsets.my_set`), None for a line with no key."""
    stack: list[tuple[int, str]] = []
    out = []
    for line in lines:
        m = _KEY.match(line)
        if not m or line.lstrip().startswith("#"):
            out.append(None)
            continue
        indent, key = len(m.group(1)), next(g for g in m.groups()[1:] if g is not None).strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, key))
        out.append(".".join(k for _, k in stack))
    return out


def _comment_of(line: str) -> str | None:
    """The end-of-line comment of a YAML line (`# ...`), outside quotes; None if it has none."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[i:].rstrip() if line[:i].strip() else None
    return None


def _code(line: str) -> str:
    """The line without its end-of-line comment."""
    comment = _comment_of(line)
    return line[: line.index(comment)].rstrip() if comment else line.rstrip()


def keep_comments(old_text: str, new_text: str, preset_texts: list[str]) -> tuple[str, int]:
    """`new_text` with the user's comments of `old_text` put back: full-line comments before the key they preceded,
    end-of-line comments on the key's line where its value is unchanged. A comment any preset file holds is the
    preset's (the new text has its own); one the new text already holds (inside a carried testset) is not repeated.
    Returns (the text, the number of the user's comments that had no place: their key is gone or its value
    changed; the backup keeps them)."""
    presets = {
        part.strip() for text in preset_texts for line in text.splitlines() for part in (line, _comment_of(line) or "")
    }
    old, new = old_text.splitlines(), new_text.splitlines()
    have = {line.strip() for line in new} | {c.strip() for c in map(_comment_of, new) if c}
    old_paths, new_paths = _paths(old), _paths(new)
    where = {p: i for i, p in enumerate(new_paths) if p is not None}
    before: dict[int, list[str]] = {}
    eol: dict[int, str] = {}  # line -> the spacing and the comment
    block, lost = [], 0
    for line, path in zip(old, old_paths):
        text = line.strip()
        if text.startswith("#"):
            if text not in presets and text not in have:
                block.append(text)
            continue
        if path is None:
            continue
        i = where.get(path, -1)
        if block:
            if i >= 0:
                before.setdefault(i, []).extend(block)
            else:
                lost += len(block)
            block = []
        comment = _comment_of(line)
        if comment and comment.strip() not in presets and comment.strip() not in have:
            value = line[: line.index(comment)].rstrip()
            if i >= 0 and _code(new[i]) == value:
                eol[i] = line[len(value) : line.index(comment)] + comment
            else:
                lost += 1
    out = []
    for i, line in enumerate(new):
        indent = line[: len(line) - len(line.lstrip())]
        out += [indent + c for c in before.get(i, [])]
        out.append(_code(line) + eol[i] if i in eol else line)  # the user's comment beside their value
    out += block  # comments after the last key stay at the end
    return "\n".join(out) + ("\n" if new_text.endswith("\n") else ""), lost
