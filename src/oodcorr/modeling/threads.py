"""CPU thread policy for the stages. torch's default (one intra-op thread per core) collapses when another
process keeps a core busy: every parallel region waits for the thread that shares the busy core (measured by
bench/speed/threads.py: evaluation ~15x slower on a 2-core machine). The policy counts the cores that are free
right now and uses that many threads.

  OODCORR_THREADS=<n>|auto   (environment; wins)
  study.threads: <n>|auto    (params.yaml)
  default: auto = max(1, min(usable cores, cores idle over a 0.3 s sample at stage start))
"""

from __future__ import annotations

import os
import time

from oodcorr.core import numerics
from oodcorr.core.choices import MAX_THREADS  # noqa: F401
from oodcorr.core.choices import THREADS_ENV as ENV
from oodcorr.core.choices import parse_threads as parse
from oodcorr.settings.project import Project


def _cpu_times() -> tuple[int, int] | None:
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields), idle


def busy_cores(sample_s: float = 0.3) -> float:
    """Cores kept busy by all processes over a short sample (this process is idle meanwhile)."""
    a = _cpu_times()
    time.sleep(sample_s)
    b = _cpu_times()
    if a is None or b is None or b[0] <= a[0]:
        return 0.0
    total, idle = b[0] - a[0], b[1] - a[1]
    return (1 - idle / total) * (os.cpu_count() or 1)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def auto_threads(busy: float | None = None) -> int:
    n = usable_cores()
    busy = busy_cores() if busy is None else busy
    free = (os.cpu_count() or n) - busy
    return max(1, min(n, int(free + 0.5)))


def resolve(project: Project | dict | None, kept: int | None = None) -> tuple[int, str]:
    """(threads, where the choice came from). `kept`: the count a run was trained with; `auto` keeps it when the
    run resumes or rebuilds a checkpoint, since sums over another thread count differ in the last bits and the
    rebuilt checkpoint would no longer match dvc.lock."""
    value, source = os.environ.get(ENV) or None, ENV  # settings.environment: an empty variable is unset
    if value is None:
        value, source = Project.of(project).threads, "study.threads"
    n = parse(value, ENV if source == ENV else "params: study.threads")
    if n is None and kept:
        return int(kept), "auto: the count this run was trained with"
    if n is None:
        return auto_threads(), f"auto ({source if value is not None else 'default'})"
    return n, source


KEPT = "resume/threads.json"  # in a run folder: machine-local (git- and DVC-ignored, beside the training states)


def keep(run_dir, n: int) -> None:
    """Record the count a run trains with outside run.json (a DVC output, identical whatever the count), so a
    resume or a checkpoint rebuild on this machine uses it again."""
    import json
    from pathlib import Path

    from oodcorr.core.io import write_text

    path = Path(run_dir) / KEPT
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, json.dumps({"threads": int(n)}) + "\n")


def kept(run_dir) -> int | None:
    """The count keep() recorded for this run on this machine (None: none recorded, or unreadable)."""
    import json
    from pathlib import Path

    try:
        n = json.loads((Path(run_dir) / KEPT).read_text())["threads"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return n if isinstance(n, int) and n > 0 else None


def apply(project: Project | dict | None, kept: int | None = None) -> int:
    """Set torch's intra-op threads by the policy (CUDA runs are unaffected: the GPU does the work). Outputs do
    not depend on the count where MKL's strict reproducible mode is on (core/numerics.py: pinned when oodcorr is
    imported, before torch loads MKL)."""
    numerics.pin()
    import torch

    n, _ = resolve(project, kept)
    torch.set_num_threads(n)
    return n
