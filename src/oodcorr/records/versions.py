"""The package versions an analysis ran with (`versions.json` beside its tables), and the check `oodcorr study
reanalyze` makes against a saved study's record before it analyses anything.

The tables' numbers pass through numpy, scipy, pandas and pyarrow. Within one major version of each, a
re-analysis on another machine agrees with the committed tables within `--check`'s tolerances (docs/studies.md),
so a minor version apart is a one-line note; another major version can change defaults and algorithms (numpy 1 ->
2 changed type promotion, pandas 2 -> 3 copy-on-write and string dtypes), so it is refused with one line saying
which versions the study needs. In the pipeline the file is machine-local (git-ignored, not a DVC output, like the
thread count): it never enters dvc.lock, so a clone with other package versions still reads "up to date"."""

from __future__ import annotations

import json
import platform
from importlib import metadata
from pathlib import Path

from oodcorr.core.errors import UserError

FILE = "versions.json"
PACKAGES = ("numpy", "scipy", "pandas", "pyarrow")  # what the tables' numbers pass through


def installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def current() -> dict:
    """{"python": X.Y.Z, "oodcorr": ..., and each of PACKAGES: its installed version}."""
    return {"python": platform.python_version(), "oodcorr": installed("oodcorr") or "unknown"} | {
        p: installed(p) or "not installed" for p in PACKAGES
    }


def needs(version: str) -> str:
    """The range a study analysed with `version` needs: the same major version ('2.4.6' -> '>=2,<3')."""
    major = _major(version)
    return f">={major},<{major + 1}" if major is not None else f"=={version}"


def document() -> str:
    """versions.json: what this analysis ran with, and the ranges a re-analysis needs."""
    now = current()
    doc = {"analysed_with": now, "needs": {p: needs(now[p]) for p in PACKAGES if _major(now[p]) is not None}}
    return json.dumps(doc, indent=1, sort_keys=True) + "\n"


def _major(version: str) -> int | None:
    head = str(version).split(".", 1)[0]
    return int(head) if head.isdigit() else None


def _minor(version: str) -> str:
    return ".".join(str(version).split(".")[:2])


def check(path: Path) -> str | None:
    """None when `path` (a saved study's versions.json) is absent or matches this machine to the minor version; a
    one-line note when a package is a minor version apart; a UserError naming the file, the package, both versions
    and the range to install when one is another major version (or missing here)."""
    if not path.is_file():
        return None  # saved before versions were recorded
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))["analysed_with"]
        if not isinstance(recorded, dict):
            raise TypeError
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise UserError(
            f"{path}: not a versions record (JSON with an `analysed_with` mapping); restore it from git"
        ) from None
    notes = []
    for pkg in PACKAGES:
        then, now = recorded.get(pkg), installed(pkg)
        if not isinstance(then, str) or _major(then) is None:
            continue
        if now is None or _major(now) != _major(then):
            raise UserError(
                f"{path}: the study was analysed with {pkg} {then}, this machine has {pkg} {now or 'none'}: "
                f"it needs {pkg}{needs(then)} (pip install '{pkg}{needs(then)}'), another major version can "
                "change the numbers"
            )
        if _minor(now) != _minor(then):
            notes.append(f"{pkg} {now} (analysed with {then})")
    if not notes:
        return None
    return (
        f"note: {path}: {', '.join(notes)}: a minor version apart; the comparison's tolerances (docs/studies.md) apply"
    )
