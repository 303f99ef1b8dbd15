"""Each DVC stage's source dependencies, read from its imports: the files the stage's entry module imports,
directly or through other oodcorr modules (lazy imports inside functions included), listed as whole package
folders where the stage imports every module of one.

  python scripts/stage_deps.py           print each stage's list
  python scripts/stage_deps.py --write   rewrite the src/ entries of dvc.yaml's stages with them

tests/test_stage_deps.py fails when dvc.yaml's list differs from the imports, so a stage never misses a file
it runs (a label-map fix re-prepares the data) and never depends on one it does not (a planner change leaves
`analyze` up to date)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PKG = SRC / "oodcorr"
# dvc.yaml stage -> the module its command runs (`oodcorr <cmd>` dispatches to it through cli.py)
STAGES = {
    "prepare": "oodcorr.data.stage",
    "train": "oodcorr.train.stage",
    "evaluate": "oodcorr.evaluate.stage",
    "analyze": "oodcorr.analysis.stage",
}
# modules every command passes through on its way to the stage, which never change a stage's output
DISPATCH = {"oodcorr", "oodcorr.cli", "oodcorr.__main__"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def imports_of(name: str, parents: bool = True) -> set[str]:
    """oodcorr modules that `name` imports anywhere in its source (lazy imports inside functions included);
    parents: also the packages whose __init__ such an import runs (a.b.c runs a/__init__ and a/b/__init__)."""
    tree = ast.parse(MODULES[name].read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "oodcorr"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "oodcorr":
            for a in node.names:  # `from oodcorr import io` imports the module oodcorr.core.io
                sub = f"{node.module}.{a.name}"
                out.add(sub if sub in MODULES else node.module)
    if not parents:
        return {m for m in out if m in MODULES} - {name}
    found = set()
    for m in out:  # importing a.b.c runs a/__init__ and a/b/__init__ too
        parts = m.split(".")
        found |= {".".join(parts[:i]) for i in range(2, len(parts) + 1)}
    return {m for m in found if m in MODULES} - {name}


def closure(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += imports_of(m)
    return seen - DISPATCH


def deps_of(start: str) -> list[str]:
    """The closure as dvc.yaml paths: a package folder where every module in it is imported, else files."""
    mods = closure(start)
    files = {MODULES[m].relative_to(ROOT).as_posix() for m in mods}
    out = set(files)
    for pkg in sorted({m for m in MODULES if MODULES[m].name == "__init__.py" and m != "oodcorr"}):
        folder = MODULES[pkg].parent.relative_to(ROOT).as_posix()
        inside = {
            MODULES[m].relative_to(ROOT).as_posix()
            for m in MODULES
            if MODULES[m].relative_to(ROOT).as_posix().startswith(folder + "/")
        }
        if inside <= files:
            out = {f for f in out if not f.startswith(folder + "/")} | {folder}
    # a folder inside a listed folder is covered by it
    return sorted(p for p in out if not any(p != q and p.startswith(q + "/") for q in out))


def _deps_block(lines: list[str], stage: str) -> tuple[int, int]:
    """[first, end) line indices of the `deps:` items of `stage` (foreach stages: their `do:` block)."""
    start = lines.index(f"  {stage}:")
    d = next(i for i in range(start + 1, len(lines)) if lines[i].strip() == "deps:")
    end = d + 1
    while end < len(lines) and lines[end].strip().startswith("- "):
        end += 1
    return d + 1, end


def listed_in_dvc_yaml(text: str, stage: str) -> list[str]:
    """The src/ deps dvc.yaml lists for `stage`."""
    lines = text.split("\n")
    a, b = _deps_block(lines, stage)
    return [ln.strip()[2:] for ln in lines[a:b] if ln.strip().startswith("- src/")]


def write(text: str) -> str:
    lines = text.split("\n")
    for stage, module in STAGES.items():
        a, b = _deps_block(lines, stage)
        block = lines[a:b]
        first = next(i for i, ln in enumerate(block) if ln.strip().startswith("- src/"))
        indent = block[first][: len(block[first]) - len(block[first].lstrip())]
        rest = [ln for ln in block if not ln.strip().startswith("- src/")]
        block = rest[:first] + [f"{indent}- {dep}" for dep in deps_of(module)] + rest[first:]
        lines[a:b] = block
    return "\n".join(lines)


if __name__ == "__main__":
    path = ROOT / "dvc.yaml"
    if "--write" in sys.argv[1:]:
        path.write_text(write(path.read_text()))
    for stage, module in STAGES.items():
        print(f"{stage}: {', '.join(deps_of(module))}")
