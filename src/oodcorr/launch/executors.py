"""The executors `oodcorr study launch` can submit to (study.launch.executor, --executor): name -> class.
Adding one is an entry here plus its module (see common.Executor)."""

from __future__ import annotations

from oodcorr.launch.local import Local
from oodcorr.launch.slurm import Slurm

EXECUTORS = {cls.name: cls for cls in (Local, Slurm)}


def executor(name: str):
    return EXECUTORS[name]()
