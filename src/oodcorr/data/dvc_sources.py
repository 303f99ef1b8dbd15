"""A rejected input leaves the files git tracks as they were. Under `dvc repro` (or `dvc exp run`) DVC saves a
changed data source before the stages that read it run: an edited file under data/raw rewrites data.dvc to the
new content's hash before `check` or `prepare` can reject that content. When one of those stages rejects its
input, `put_back` restores each .dvc file that this DVC command rewrote to its content in git's HEAD, so the
project keeps pointing at the data it was last committed with (the edited file itself is left as it is)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

STAGES = ("check", "prepare")  # the dvc.yaml stages that reject input before anything reads it


def _dvc_started() -> float | None:
    """When the `dvc` process running this stage started (seconds since the epoch), from /proc; None elsewhere."""
    try:
        boot = next(float(x.split()[1]) for x in Path("/proc/stat").read_text().splitlines() if x.startswith("btime "))
        pid = os.getppid()
        for _ in range(8):  # dvc -> (shell) -> oodcorr
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if any(Path(a.decode(errors="replace")).name == "dvc" for a in args[:3]):
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                return boot + int(stat[19]) / os.sysconf("SC_CLK_TCK")
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            if pid <= 1:
                return None
    except (OSError, ValueError, StopIteration, IndexError):
        return None
    return None


def put_back(root: str | os.PathLike) -> list[str]:
    """The .dvc files (at the project's top and under data/) that the running `dvc` command rewrote, restored to
    git HEAD's content; returns their names. Does nothing outside a DVC check/prepare stage or a git work tree."""
    if os.environ.get("DVC_STAGE") not in STAGES:
        return []
    started = _dvc_started()
    if started is None:
        return []
    root = Path(root)
    restored = []
    for path in sorted({*root.glob("*.dvc"), *root.glob("data/**/*.dvc")}):
        try:
            if not path.is_file() or path.stat().st_mtime < started:  # `*.dvc` also matches the .dvc folder
                continue
            rel = path.relative_to(root).as_posix()
            head = subprocess.run(["git", "show", f"HEAD:./{rel}"], cwd=root, capture_output=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            continue
        if head.returncode != 0 or head.stdout == path.read_bytes():
            continue
        from oodcorr.core.io import write_text

        write_text(path, head.stdout.decode("utf-8", errors="replace"))
        restored.append(rel)
    return restored


def note(root: str | os.PathLike) -> str:
    """'; <files> put back as committed ...' for the error line, or '' when nothing was restored."""
    restored = put_back(root)
    if not restored:
        return ""
    return (
        f"; {', '.join(restored)} put back as committed (DVC had recorded the rejected data; fix the file, "
        "then `dvc repro` again)"
    )
