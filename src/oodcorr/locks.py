"""One process at a time for work that must not run twice at once (training one run, evaluating one run, the
project's analysis): an exclusive, non-blocking fcntl.flock on a file under <project>/.oodcorr/locks/. The
second process gets one line naming the holder's pid and exits non-zero without touching anything. The
kernel drops the lock when its holder exits or is killed, so a kill never leaves a stale lock: the file
stays, but the file is not the lock, and a rerun resumes as usual."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from oodcorr.errors import UserError

LOCKS = Path(".oodcorr") / "locks"


def lock_path(root, name: str) -> Path:
    """<project root>/.oodcorr/locks/<name>.lock"""
    return Path(root) / LOCKS / f"{name}.lock"


@contextlib.contextmanager
def exclusive(path: Path, busy: str):
    """Hold `path` locked for the with-block; UserError(`busy` + " (pid N)") when another process holds it."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            raise UserError(f"{busy} (pid {holder if holder.isdigit() else 'unknown'}); wait for it to finish "
                            f"or stop it, then rerun (lock: {path})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def for_rank0(path: Path, busy: str):
    """exclusive() in the process that writes (rank 0 under `accelerate launch`); the other ranks of the same
    launch share its work and take no lock."""
    return exclusive(path, busy) if os.environ.get("RANK", "0") == "0" else contextlib.nullcontext()
