"""Atomic file writes: a killed process never leaves a half-written output behind. Temporaries are named
`.<name>.<pid>.<random>[suffix].tmp` next to their target, so the next start can remove the ones whose
process is gone (clean_stale_temps); outputs get the usual umask permissions (not mkstemp's 0600)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

_UMASK: int | None = None
_TMP_RE = re.compile(r"^\.(?P<name>.+?)\.(?P<pid>\d+)\.[A-Za-z0-9_]{8}(\.[^/]*)?\.tmp$")
LEGACY_TMP_AGE_S = 600  # temporaries without a pid (older versions) are removed once this old


def umask() -> int:
    global _UMASK
    if _UMASK is None:
        _UMASK = os.umask(0)
        os.umask(_UMASK)
    return _UMASK


def _honour_umask(path, is_dir: bool = False) -> None:
    os.chmod(path, (0o777 if is_dir else 0o666) & ~umask())


def honour_umask_tree(folder) -> None:
    """Files written by libraries (safetensors, peft) into one of our temporaries get the umask's permissions,
    like every other output (some libraries create theirs 0600)."""
    for path in Path(folder).rglob("*"):
        if not path.is_symlink():
            _honour_umask(path, is_dir=path.is_dir())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale_temps(*folders, legacy_age: float = 0) -> list[Path]:
    """Remove temporaries (files or folders `.<name>.<pid>.*.tmp`) left in `folders` by killed processes:
    those whose pid is not alive, and pid-less ones (older versions) older than `legacy_age` seconds
    (LEGACY_TMP_AGE_S for folders that several projects share, like the model cache)."""
    removed = []
    for folder in folders:
        folder = Path(folder)
        if not folder.is_dir():
            continue
        for entry in folder.iterdir():
            name = entry.name
            if not (name.startswith(".") and name.endswith(".tmp")):
                continue
            m = _TMP_RE.match(name)
            if m:
                if _alive(int(m.group("pid"))):
                    continue
            else:
                try:
                    if time.time() - entry.lstat().st_mtime < legacy_age:
                        continue
                except FileNotFoundError:
                    continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    entry.unlink()
            removed.append(entry)
    return removed


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = ""):
    """Yield a temporary path next to `path`; rename it onto `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=suffix + ".tmp", dir=path.parent)
    os.close(fd)
    _honour_umask(tmp)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike):
    """Yield a temporary directory; it replaces `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # a killed earlier attempt's temporary folder (its process is gone); pid-less names are never touched here:
    # the parent may be the project root, where a user's own `.x.tmp` can live
    clean_stale_temps(path.parent, legacy_age=math.inf)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent))
    _honour_umask(tmp, is_dir=True)
    try:
        yield tmp
        if path.exists():  # swap: the old folder is removed only after the new one is in place
            old = path.parent / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.old.tmp"
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_text(path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def append_lines(path, lines: list[str]) -> None:
    """Append whole lines (a kill mid-append leaves at most one partial last line, which is dropped here
    before the next append and skipped by read_jsonl_tolerant)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    with os.fdopen(fd, "r+b") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if size:
            f.seek(max(0, size - 1))
            if f.read(1) != b"\n":  # partial line from a killed writer: cut back to the last newline
                f.seek(0)
                data = f.read()
                f.truncate(data.rfind(b"\n") + 1)
                f.seek(0, os.SEEK_END)
        f.write("".join(line.rstrip("\n") + "\n" for line in lines).encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())


def read_jsonl_tolerant(path) -> list[dict]:
    """JSON objects of a JSONL file this tool appends to; unparsable lines (a killed writer's) are skipped."""
    out = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(obj, dict):
                    out.append(obj)
    except FileNotFoundError:
        pass
    return out


def write_json(path, obj, indent: int = 2) -> None:
    write_text(path, json.dumps(obj, indent=indent, sort_keys=False, default=str) + "\n")


def write_jsonl(path, rows) -> None:
    write_text(path, "".join(json.dumps(r, default=str) + "\n" for r in rows))


def read_jsonl(path) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def sha256_file(path, chunk: int = 1 << 20) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def iter_json_objects(path, shown: str | None = None, prefix: str = ""):
    """(line number, object) for each non-blank line of a JSONL file; a line that is not a JSON object is a
    UserError naming `shown:line` (shown defaults to the path)."""
    from oodcorr.core.errors import UserError

    shown = shown or str(path)
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise UserError(
                    f"{shown}:{lineno}: {prefix}not UTF-8 (byte {raw[e.start]:#04x} at column {e.start + 1})"
                ) from None
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise UserError(f"{shown}:{lineno}: {prefix}invalid JSON ({e.msg})") from None
            if not isinstance(obj, dict):
                raise UserError(f"{shown}:{lineno}: {prefix}expected a JSON object, got {type(obj).__name__}")
            yield lineno, obj


_NO_SPACE = {28, 122, 27}  # ENOSPC, EDQUOT, EFBIG (a file-size limit: no room for the file either)
_NO_WRITE = {13, 1, 30}  # EACCES, EPERM, EROFS


def os_error_line(e: BaseException) -> str | None:
    """One line for an OSError a user can fix (disk full, read-only or unwritable folder, a file where a folder
    is expected), naming the path; None for anything else. Outputs are written atomically, so nothing
    partial is left behind when such an error stops a stage."""
    if not isinstance(e, OSError):
        return None
    code = e.errno
    text = str(e)
    if code is None:  # pyarrow and others put the errno in the text only
        lowered = text.lower()
        code = (
            28
            if "no space left" in lowered or "disk quota" in lowered
            else 13
            if "permission denied" in lowered
            else 30
            if "read-only file system" in lowered
            else None
        )
    where = e.filename if e.filename is not None else None
    shown = f"{where}: " if where else ""
    if code in _NO_SPACE:
        return (
            f"{shown}no space left to write ({e.strerror or text}); free some space (or raise the quota) "
            "and rerun: finished work is kept, nothing half-written was left"
        )
    if code in _NO_WRITE:
        return (
            f"{shown}cannot write here ({e.strerror or text}); make the folder writable for this user "
            "(or choose another location) and rerun"
        )
    if code == 36:  # ENAMETOOLONG
        return f"{str(where)[:120] + '...: ' if where else ''}name too long for the file system; use a shorter name"
    if code in (20, 21):  # ENOTDIR, EISDIR
        return f"{shown}{e.strerror or text}: a file stands where a folder is expected (or the reverse); move it away"
    return None
