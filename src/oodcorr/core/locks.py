"""One process at a time for work that must not run twice at once (training one run, evaluating one run, the
project's analysis): an exclusive, non-blocking fcntl.flock on a file under <project>/.oodcorr/locks/. The
second process gets one line naming the holder's pid and exits non-zero without touching anything. The
kernel drops the lock when its holder exits or is killed, so a kill never leaves a stale lock (a killed
holder's file stays, but the file is not the lock) and a rerun resumes as usual."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from oodcorr.core.errors import UserError

LOCKS = Path(".oodcorr") / "locks"


def lock_path(root, name: str) -> Path:
    """<project root>/.oodcorr/locks/<name>.lock"""
    return Path(root) / LOCKS / f"{name}.lock"


@contextlib.contextmanager
def exclusive(path: Path, busy: str):
    """Hold `path` locked for the with-block; UserError(`busy` + " (pid N)") when another process holds it.
    The lock file (and the folders made for it) is removed on release, so a finished or refused command
    leaves the project as it found it; a killed holder leaves an unlocked file that the next one reuses."""
    path = Path(path)
    made = [d for d in (path.parent, path.parent.parent) if not d.exists()]
    fd = _open_locked(path, busy)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):  # unlinked while still held: a waiter re-checks the inode
            path.unlink()
        os.close(fd)
        for d in made:
            with contextlib.suppress(OSError):
                d.rmdir()  # only when empty


def _open_locked(path: Path, busy: str) -> int:
    """An fd holding the lock on the file now at `path` (a file unlinked by its releasing holder between our
    open and our lock is not the lock any more: open again)."""
    import fcntl

    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except FileNotFoundError:  # the folder was removed by a releasing holder meanwhile
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            os.close(fd)
            raise UserError(
                f"{busy} (pid {holder if holder.isdigit() else 'unknown'}); wait for it to finish "
                f"or stop it, then rerun (lock: {path})"
            ) from None
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)


def for_rank0(path: Path, busy: str):
    """exclusive() in the process that writes (rank 0 under `accelerate launch`); the other ranks of the same
    launch share its work and take no lock."""
    return exclusive(path, busy) if os.environ.get("RANK", "0") == "0" else contextlib.nullcontext()
