"""Names that become file or folder names, DVC stage names and command-line arguments: run keys (runs/<key>,
train@<key>, `--run <key>`), testsets (data/prepared/<name>.jsonl, predictions/<name>.parquet), presets and
hub model ids. Every such name passes `check_name` before anything uses it, and every path built from one
passes `inside` (resolved, contained in its folder), so no name can leave the project folder or reach a shell
as anything but one plain word."""

from __future__ import annotations

import os
import re
from pathlib import Path

from oodcorr.core.errors import UserError

NAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
NAME_MAX = 128  # characters: well under a file system's 255 bytes per name, with room for suffixes
HUB_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")


def check_name(name, kind: str, where: str) -> str:
    """A name that becomes a file or folder name (`kind`: run key, testset, preset, ...): letters, digits, `.`,
    `_` and `-` only, starting with a letter, digit or `_`, at most NAME_MAX characters; else one line naming
    `where` and what is wrong with it."""
    if isinstance(name, (int, float)) and not isinstance(name, bool):
        raise UserError(
            f"{where}: {kind} {name!r} is read as a number, not a name; quote it ('{name}') or start it with a letter"
        )
    if not isinstance(name, str):
        raise UserError(f"{where}: {kind} must be a name, got {type(name).__name__} {name!r:.80}")
    shown = f"{name[:80]!r}{'...' if len(name) > 80 else ''}"
    if len(name) > NAME_MAX:
        raise UserError(
            f"{where}: {kind} {shown} is {len(name)} characters long; at most {NAME_MAX} (it names a file or folder)"
        )
    if not NAME_RE.fullmatch(name):
        raise UserError(
            f"{where}: {kind} {shown} is not allowed: use only letters, digits, '.', '_' and '-', "
            "starting with a letter, digit or '_' (it names a file or folder)"
        )
    return name


def check_run_key(key, where: str = "params: runs") -> str:
    """A run key names a folder (runs/<key>), a DVC stage (train@<key>) and a command-line argument."""
    return check_name(key, "run key", where)


def inside(folder: str | os.PathLike, name: str, suffix: str = "") -> Path:
    """`folder`/<name><suffix>, refused unless it is a plain entry of `folder` (no separator, no `..`): what
    the tool writes (atomically: a rename replaces a link, never its target) or removes (a link itself, never
    its target) stays in that folder."""
    path = Path(folder) / f"{name}{suffix}"
    if os.path.dirname(os.path.normpath(path)) != os.path.normpath(folder) or name in ("", ".", ".."):
        raise UserError(f"{path}: leads outside {folder}; a name must be one plain word")
    return path


def check_inside_project(value: str, where: str) -> None:
    """A folder given in params (relative to the project) that stays inside it: no absolute path, no `..`."""
    norm = os.path.normpath(value)
    if not value.strip() or os.path.isabs(value) or norm == ".." or norm.startswith(".." + os.sep) or norm == ".":
        raise UserError(
            f"{where}: {value[:120]!r} must be a folder inside the project (a relative path such as "
            "results, without '..')"
        )
