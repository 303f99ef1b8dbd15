"""The package layout mirrors dvc.yaml: stage packages over a thin core, imports pointing one way.

Every import is read from the source (lazy imports inside functions included), so a new edge that
makes the core depend on a stage, on launch/, the planner or an entry point, one stage depend on another or on
launch/ or the planner, launch/ or the planner depend on a stage, two packages (or flat modules) depend on each
other, the statistics read a file, or any circle fails here. No module grows past MAX_LINES unless
LONG_MODULES names it with the one cohesive job that justifies it."""

from __future__ import annotations

import ast
import importlib.util
import random
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PKG = SRC / "oodcorr"
STAGES = ("data", "train", "evaluate", "analysis")
ENTRY = ("oodcorr.cli", "oodcorr.study", "oodcorr.__main__")
LAUNCH = "launch"  # the study launcher: used by study.py, uses only the core (stages run through their CLI)
PLANNER = "planner"  # `oodcorr plan`: used by cli.py, uses only the core (the statistics included), never a stage
# the core's packages (no flat module is left at the top: TOP_LEVEL); each __init__ says what it owns and
# what it must not import: CORE_RULES
CORE_PACKAGES = ("core", "records", "settings", "modeling", "tracking", "stats")
CORE_RULES = {
    "core": ("records", "settings", "modeling", "tracking", "stats"),  # the thin core stands on nothing else
    "records": ("modeling", "tracking"),
    "settings": ("tracking", "modeling"),
    "modeling": ("tracking",),
    "tracking": ("modeling",),
    "stats": ("settings", "modeling", "tracking"),
}
# the statistics are pure functions of arrays: no core module that reads or writes files or runs
STATS_MAY_IMPORT = {"oodcorr.core.errors", "oodcorr.stats.metrics", "oodcorr.stats.aggregate"}
MAX_LINES = 350
# the only modules at the top of the package: the entry points
TOP_LEVEL = {"__init__", "__main__", "cli", "study"}
# module -> the one cohesive job that makes it longer than MAX_LINES (none today)
LONG_MODULES: dict[str, str] = {}
MAX_FUNCTION_LINES = 60
# module:function -> its length when listed: functions still over MAX_FUNCTION_LINES (none left: the last three,
# evaluate.stage:_evaluate_run, evaluate.scoring:score and data.loaders:to_binary, were split); the list only shrinks
LONG_FUNCTIONS: dict[str, int] = {}


# the module table and the import reader are scripts/stage_deps.py's (which also generates dvc.yaml's deps)
_spec = importlib.util.spec_from_file_location("stage_deps", SRC.parent / "scripts" / "stage_deps.py")
stage_deps = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stage_deps)
MODULES = stage_deps.MODULES


def imports_of(name: str) -> set[str]:
    """oodcorr modules that `name` imports anywhere in its source."""
    return stage_deps.imports_of(name, parents=False)


GRAPH = {name: imports_of(name) for name in MODULES}


def stage_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in STAGES else None


def is_launch(name: str) -> bool:
    parts = name.split(".")
    return len(parts) > 1 and parts[1] == LAUNCH


def is_planner(name: str) -> bool:
    parts = name.split(".")
    return len(parts) > 1 and parts[1] == PLANNER


def is_core(name: str) -> bool:
    return (
        stage_of(name) is None
        and not is_launch(name)
        and not is_planner(name)
        and name not in ENTRY
        and name != "oodcorr"
    )


def unit_of(name: str) -> str:
    """The package (oodcorr.<pkg>) or flat module a module belongs to: the units whose ties are checked."""
    return ".".join(name.split(".")[:2])


def test_the_tree_map_lists_every_package_folder():
    """docs/development.md's map of the tree: one line per folder under src/oodcorr, no more, no less."""
    import re

    doc = (SRC.parent / "docs" / "development.md").read_text()
    section = doc.split("## Map of the tree", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^- `src/oodcorr/([A-Za-z0-9_]+)/`", section, re.M))
    folders = {p.name for p in PKG.iterdir() if p.is_dir() and p.name != "__pycache__" and not p.name.startswith(".")}
    assert listed == folders, (
        f"map lists {sorted(listed - folders)} (no such folder), misses {sorted(folders - listed)}"
    )


def test_no_loose_module_at_the_top():
    """Every module lives in a room that says what it is (core, records, a stage, ...); only the entry points
    sit at the top of the package."""
    loose = sorted(p.stem for p in PKG.glob("*.py") if p.stem not in TOP_LEVEL)
    assert not loose, f"modules at the top of src/oodcorr (put each in a room): {loose}"


def test_every_stage_package_has_a_stage_entry():
    for stage in STAGES:
        assert f"oodcorr.{stage}.stage" in MODULES, f"src/oodcorr/{stage}/stage.py missing"


def test_core_imports_no_stage_and_no_entry_point():
    bad = [(m, d) for m, deps in GRAPH.items() if is_core(m) for d in deps if not is_core(d) and d != "oodcorr"]
    assert not bad, f"core modules must not import stages, launch/ or cli/study: {bad}"


def core_package_of(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in CORE_PACKAGES else None


def test_core_packages_are_core_with_a_docstring():
    for pkg in CORE_PACKAGES:
        assert is_core(f"oodcorr.{pkg}") and f"oodcorr.{pkg}" in MODULES, f"src/oodcorr/{pkg}/__init__.py missing"
        assert ast.get_docstring(ast.parse(MODULES[f"oodcorr.{pkg}"].read_text())), f"{pkg}/__init__.py: docstring"


def test_core_packages_keep_their_rules():
    bad = [
        (m, d)
        for m, deps in GRAPH.items()
        if core_package_of(m)
        for d in deps
        if core_package_of(d) in CORE_RULES[core_package_of(m)]
    ]
    assert not bad, f"a core package imports one its __init__ rules out: {bad}"


def test_stages_import_only_the_core_and_themselves():
    bad = [
        (m, d)
        for m, deps in GRAPH.items()
        if stage_of(m)
        for d in deps
        if d in ENTRY or is_launch(d) or is_planner(d) or (stage_of(d) and stage_of(d) != stage_of(m))
    ]
    assert not bad, f"a stage imports another stage, launch/, the planner or an entry point: {bad}"


def test_the_planner_imports_only_the_core_and_itself():
    bad = [
        (m, d) for m, deps in GRAPH.items() if is_planner(m) for d in deps if d in ENTRY or stage_of(d) or is_launch(d)
    ]
    assert not bad, f"the planner imports a stage, launch/ or an entry point: {bad}"


def test_the_statistics_import_no_file_or_tracking_code():
    bad = [
        (m, d)
        for m, deps in GRAPH.items()
        if m.startswith("oodcorr.stats")
        for d in deps
        if not d.startswith("oodcorr.stats") and d not in STATS_MAY_IMPORT
    ]
    assert not bad, f"oodcorr.stats imports beyond numbers and scores: {bad}"
    for m, path in MODULES.items():
        if m.startswith("oodcorr.stats"):
            src = path.read_text()
            assert not any(w in src for w in ("open(", "read_text", "write_text", "parquet", "mlflow")), (
                f"{m} reads or writes files"
            )


def test_no_two_packages_depend_on_each_other():
    """Package level: settings -> modeling and modeling -> settings is a tie even when no module circle exists."""
    edges = {(unit_of(m), unit_of(d)) for m, deps in GRAPH.items() for d in deps if unit_of(m) != unit_of(d)}
    ties = sorted((a, b) for a, b in edges if (b, a) in edges and a < b and "oodcorr" not in (a, b))
    assert not ties, f"packages that import each other: {ties}"


def test_launch_imports_only_the_core_and_itself():
    bad = [(m, d) for m, deps in GRAPH.items() if is_launch(m) for d in deps if d in ENTRY or stage_of(d)]
    assert not bad, f"launch/ imports a stage or an entry point (stages run through their CLI): {bad}"


def oversized(limit: int = MAX_LINES, allowed=None) -> list[str]:
    allowed = LONG_MODULES if allowed is None else allowed
    return [
        f"{m} ({n} lines)"
        for m, path in MODULES.items()
        if (n := len(path.read_text().splitlines())) > limit and m not in allowed
    ]


def test_no_module_over_the_size_limit_unless_listed():
    assert all(reason.strip() for reason in LONG_MODULES.values()), "every LONG_MODULES entry needs its reason"
    assert not set(LONG_MODULES) - set(MODULES), "LONG_MODULES names a module that no longer exists"
    bad = oversized()
    assert not bad, (
        f"modules over {MAX_LINES} lines: {bad}; split them by job, or list one in LONG_MODULES "
        "with the one cohesive job that justifies it"
    )


def long_functions(limit: int = MAX_FUNCTION_LINES, modules=None) -> dict[str, int]:
    """module:function (nested ones too) -> its length in lines, for every function longer than `limit`."""
    out = {}
    for m, path in (MODULES if modules is None else modules).items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    out[f"{m}:{node.name}"] = n
    return out


def test_no_function_over_the_size_limit_unless_listed():
    long = long_functions()
    new = {f: n for f, n in long.items() if f not in LONG_FUNCTIONS}
    assert not new, f"functions over {MAX_FUNCTION_LINES} lines: {new}; split them (LONG_FUNCTIONS only shrinks)"
    grown = {f: (LONG_FUNCTIONS[f], n) for f, n in long.items() if f in LONG_FUNCTIONS and n > LONG_FUNCTIONS[f]}
    assert not grown, f"listed functions grew (listed, now): {grown}"
    gone = sorted(set(LONG_FUNCTIONS) - set(long))
    assert not gone, f"now within {MAX_FUNCTION_LINES} lines: take {gone} off LONG_FUNCTIONS"
    packages = {f.split(":")[0].split(".")[1] for f in LONG_FUNCTIONS}
    assert packages <= {"planner", "launch", "data", "evaluate"}, packages


def test_the_checker_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "long.py").write_text(f"def short():\n    return 1\n\n\ndef long():\n{body}\n    return x0\n")
    assert long_functions(modules={"oodcorr.long": tmp_path / "long.py"}) == {
        "oodcorr.long:long": MAX_FUNCTION_LINES + 2
    }


def test_no_import_circles():
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(GRAPH[m]):
            if state.get(d) == 1:
                raise AssertionError("import circle: " + " -> ".join(stack[stack.index(d) :] + [d]))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)


def _add_edges(monkeypatch, *edges) -> None:
    """GRAPH with extra import edges (src, dst), for checking the checkers."""
    fake = dict(GRAPH)
    for src, dst in edges:
        assert dst in MODULES
        fake[src] = fake[src] | {dst}
    monkeypatch.setattr(sys.modules[__name__], "GRAPH", fake)


def test_the_checker_sees_a_new_circle(tmp_path, monkeypatch):
    """The checker itself: a lazy import from config back into a stage is reported."""
    _add_edges(monkeypatch, ("oodcorr.settings.config", "oodcorr.train.stage"))
    with pytest.raises(AssertionError, match="core modules must not import"):
        test_core_imports_no_stage_and_no_entry_point()
    with pytest.raises(AssertionError, match="import circle"):
        test_no_import_circles()


@pytest.mark.parametrize(
    "edge",
    [
        ("oodcorr.settings.config", "oodcorr.launch.core"),  # core -> launch (the old schema edge)
        ("oodcorr.records.rundir", "oodcorr.analysis.pipeline"),  # core -> stage
        ("oodcorr.tracking.store", "oodcorr.study"),
    ],
)  # core -> entry point
def test_the_checker_sees_an_arrow_up_from_the_core(edge, monkeypatch):
    _add_edges(monkeypatch, edge)
    with pytest.raises(AssertionError, match="core modules must not import"):
        test_core_imports_no_stage_and_no_entry_point()


def test_the_checker_sees_a_core_package_breaking_its_rules(monkeypatch):
    _add_edges(monkeypatch, ("oodcorr.settings.config", "oodcorr.tracking.store"))
    with pytest.raises(AssertionError, match="a core package imports"):
        test_core_packages_keep_their_rules()


def test_the_checker_sees_a_two_way_tie_between_packages(monkeypatch):
    _add_edges(monkeypatch, ("oodcorr.settings.config", "oodcorr.modeling.threads"))
    with pytest.raises(AssertionError, match="packages that import each other"):
        test_no_two_packages_depend_on_each_other()


def test_the_checker_sees_the_planner_reaching_into_the_stage_and_the_stage_into_the_planner(monkeypatch):
    _add_edges(
        monkeypatch,
        ("oodcorr.planner.pilot", "oodcorr.analysis.noise_tables"),
        ("oodcorr.analysis.pipeline", "oodcorr.planner.budget"),
    )
    with pytest.raises(AssertionError, match="the planner imports a stage"):
        test_the_planner_imports_only_the_core_and_itself()
    with pytest.raises(AssertionError, match="a stage imports"):
        test_stages_import_only_the_core_and_themselves()


def test_the_checker_sees_statistics_reaching_for_settings(monkeypatch):
    _add_edges(monkeypatch, ("oodcorr.stats.consistency", "oodcorr.settings.analyze"))
    with pytest.raises(AssertionError, match="oodcorr.stats imports"):
        test_the_statistics_import_no_file_or_tracking_code()


def test_the_checker_sees_stage_and_launch_edges(monkeypatch):
    _add_edges(
        monkeypatch,
        ("oodcorr.train.stage", "oodcorr.launch.records"),
        ("oodcorr.launch.core", "oodcorr.evaluate.stage"),
    )
    with pytest.raises(AssertionError, match="a stage imports"):
        test_stages_import_only_the_core_and_themselves()
    with pytest.raises(AssertionError, match="launch/ imports a stage"):
        test_launch_imports_only_the_core_and_itself()


def test_the_checker_sees_a_long_module():
    lines = {m: len(p.read_text().splitlines()) for m, p in MODULES.items()}
    n = max(lines.values())
    longest = [m for m, k in lines.items() if k == n]  # two modules may tie
    assert all(any(m in b for b in oversized(limit=n - 1, allowed={})) for m in longest)
    assert not oversized(limit=n - 1, allowed={m: "one job" for m in longest})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_module_imports_in_any_order(seed):
    names = [m for m in MODULES if m != "oodcorr.__main__"]
    random.Random(seed).shuffle(names)
    code = "import importlib, sys\nfor n in sys.argv[1:]:\n    importlib.import_module(n)\n"
    res = subprocess.run(
        [sys.executable, "-c", code, *names],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": str(SRC)},
    )
    assert res.returncode == 0, res.stderr[-2000:]


def test_help_imports_no_torch():
    code = (
        "import sys; from oodcorr.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print('torch' in sys.modules, 'transformers' in sys.modules)"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "PYTHONPATH": str(SRC)},
    )
    assert res.stdout.strip().splitlines()[-1] == "False False", res.stdout + res.stderr
