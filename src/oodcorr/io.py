"""Atomic file writes: a killed process never leaves a half-written output behind."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = ""):
    """Yield a temporary path next to `path`; rename it onto `path` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix + ".tmp", dir=path.parent)
    os.close(fd)
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
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_text(path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


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
    from oodcorr.errors import UserError

    shown = shown or str(path)
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise UserError(f"{shown}:{lineno}: {prefix}invalid JSON ({e.msg})") from None
            if not isinstance(obj, dict):
                raise UserError(f"{shown}:{lineno}: {prefix}expected a JSON object, got {type(obj).__name__}")
            yield lineno, obj
