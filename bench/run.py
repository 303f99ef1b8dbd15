"""Run one group of benchmarks: every script in bench/GROUP/ with a main, each with its default arguments, one
after the other (each writes its results into bench/GROUP/results/; the group's README.md says what it measures).

    python bench/run.py GROUP            # stats, bad_inputs, speed, planner, gpu, studies
    python bench/run.py GROUP --list     # the scripts it would run
    python bench/run.py GROUP --only NAME [--only NAME ...]

Scripts that need arguments (a module-level NEEDS_ARGS says which) are skipped unless named with --only, where
they fail with their own usage line. Several take hours at their defaults (the interval grid, the bad-input bench)
and the GPU group needs a GPU; the README of each group and docs/benchmarks.md give the arguments each result was
measured with."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GROUPS = ("stats", "bad_inputs", "speed", "planner", "gpu", "studies")


def needs_args(script: Path) -> bool:
    """A script that cannot run on defaults says so with a module-level NEEDS_ARGS (what it needs)."""
    return "\nNEEDS_ARGS = " in script.read_text()


def scripts(group: str) -> list[Path]:
    """The group's runnable scripts: those with a `__main__` block (helper modules have none)."""
    return [p for p in sorted((HERE / group).glob("*.py")) if '__name__ == "__main__"' in p.read_text()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("group", choices=GROUPS)
    ap.add_argument("--list", action="store_true", help="name the scripts and stop")
    ap.add_argument("--only", action="append", default=[], help="run only this script (name without .py)")
    a = ap.parse_args(argv)
    todo = scripts(a.group)
    unknown = sorted(set(a.only) - {p.stem for p in todo})
    if unknown:
        print(f"--only: no script {', '.join(unknown)} in bench/{a.group}/", file=sys.stderr)
        return 2
    todo = [p for p in todo if not a.only or p.stem in a.only]
    if a.list:
        print("\n".join(str(p.relative_to(HERE.parent)) for p in todo))
        return 0
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent / "src"), os.environ.get("PYTHONPATH")])),
    }
    failed = []
    for p in todo:
        if needs_args(p) and p.stem not in a.only:
            print(f"== {p.relative_to(HERE.parent)}: skipped, it needs arguments (run it with --only {p.stem})")
            continue
        print(f"== {p.relative_to(HERE.parent)}", flush=True)
        if subprocess.run([sys.executable, str(p)], cwd=HERE.parent, env=env).returncode:
            failed.append(p.stem)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
