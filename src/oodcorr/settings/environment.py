"""Every OODCORR_* environment variable a stage reads (and the launcher's WORLD_SIZE, RANK, LOCAL_RANK that
`accelerate launch` / torchrun set for train and evaluate), each with its one parser: the stages read a value through
`read`, and `check` (run wherever params.yaml is loaded and validated: every stage and `oodcorr study check`)
parses them all, so a bad value is one line naming the variable before any stage does work, never a refusal
half-way through `dvc repro`."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

from oodcorr.core.choices import THREADS_ENV, parse_threads
from oodcorr.core.errors import UserError

BUSY_TIMEOUT_ENV = "OODCORR_STORE_BUSY_TIMEOUT_S"  # how long a store locked by another process is waited for
BUSY_TIMEOUT_DEFAULT_S = 30.0
CACHE_ENV = "OODCORR_CACHE"  # the converted models' cache (default: $XDG_CACHE_HOME/oodcorr, ~/.cache/oodcorr)
KILL_ENV = "OODCORR_TEST_KILL_AT_STEP"  # tests: training hard-exits after this step (simulates a kill)
MEASURE_ENV = "OODCORR_MEASURE_S"  # `oodcorr plan`: seconds per rate measurement (a quick, rougher one)


def _seconds(name: str, above_zero: bool) -> Callable[[str], float]:
    """A parser of a finite number of seconds, >= 0 (or > 0 where `above_zero`), naming `name` when it is not."""
    want = "seconds > 0" if above_zero else "a number of seconds >= 0"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and (value > 0 if above_zero else value >= 0)):
            raise UserError(f"{name}: expected {want}, got {text[:80]!r}")
        return value

    return parse


def _threads(text: str) -> int | None:
    return parse_threads(text, THREADS_ENV)


def _folder(text: str) -> Path:
    path = Path(text).expanduser()
    if not text.strip() or path.exists() and not path.is_dir():
        raise UserError(
            f"{CACHE_ENV}: expected a folder for the converted models, got {text[:200]!r}"
            + (" (a file)" if text.strip() else "")
        )
    return path


def _step(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UserError(f"{KILL_ENV}: expected an integer step, got {text[:80]!r}") from None


def _count(name: str, minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise UserError(
                f"{name}: expected an integer >= {minimum} (set by `accelerate launch` / torchrun), got {text[:80]!r}"
            )
        return value

    return parse


# name -> parser of its text (raises UserError naming the variable); an unset or empty variable is not read
PARSERS: dict[str, Callable[[str], object]] = {
    THREADS_ENV: _threads,
    BUSY_TIMEOUT_ENV: _seconds(BUSY_TIMEOUT_ENV, above_zero=False),
    CACHE_ENV: _folder,
    KILL_ENV: _step,
    MEASURE_ENV: _seconds(MEASURE_ENV, above_zero=True),
    "WORLD_SIZE": _count("WORLD_SIZE", 1),
    "RANK": _count("RANK", 0),
    "LOCAL_RANK": _count("LOCAL_RANK", 0),
}


def read(name: str, default=None, environ=None):
    """The parsed value of `name` (one of PARSERS), or `default` when it is unset or empty."""
    text = (os.environ if environ is None else environ).get(name)
    if text is None or text == "":
        return default
    return PARSERS[name](text)


def check(environ=None) -> None:
    """Parse every variable of PARSERS that is set: one line naming the first bad one."""
    for name in PARSERS:
        read(name, environ=environ)
