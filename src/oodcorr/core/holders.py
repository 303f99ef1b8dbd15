"""Which process holds a file open, or listens on a local TCP port (Linux /proc; elsewhere nothing is found), so
an error about a locked MLflow store or a busy port names the holder and how to stop it: a server left running by
an `oodcorr ui` whose terminal was killed, a second `oodcorr ui`, a stage still writing."""

from __future__ import annotations

import os
from pathlib import Path


def _pids():
    try:
        names = os.listdir("/proc")
    except OSError:
        return
    for d in names:
        if d.isdigit() and int(d) != os.getpid():
            yield int(d)


def _fd_targets(pid: int):
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # gone, or another user's process
        return
    for fd in fds:
        try:
            yield os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue


def file_holders(path: str | os.PathLike) -> list[int]:
    """The processes (besides this one) that hold `path` open."""
    target = str(Path(path).resolve())
    return [pid for pid in _pids() if any(t == target for t in _fd_targets(pid))]


def port_holders(port: int) -> list[int]:
    """The processes (besides this one) listening on TCP `port` (IPv4 or IPv6)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(f"socket:[{f[9]}]")
    if not inodes:
        return []
    return [pid for pid in _pids() if any(t in inodes for t in _fd_targets(pid))]


def command_of(pid: int, width: int = 100) -> str:
    """The command line of `pid`, shortened to `width` characters ("" when it cannot be read)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    text = " ".join(raw.decode(errors="replace").replace("\0", " ").split())  # one line, whatever the arguments hold
    return text if len(text) <= width else text[: width - 3] + "..."


def describe(pids: list[int]) -> str:
    """' (held by process 123: `mlflow server ...`; stop it with `kill 123`)' for the first holder, or ''."""
    if not pids:
        return ""
    pid = pids[0]
    cmd = command_of(pid)
    what = f": `{cmd}`" if cmd else ""
    more = f" and {len(pids) - 1} other(s)" if len(pids) > 1 else ""
    ui = "; an MLflow server an earlier `oodcorr ui` left running" if "mlflow" in cmd and "server" in cmd else ""
    return f" (held by process {pid}{what}{more}{ui}; stop it with `kill {pid}`)"
