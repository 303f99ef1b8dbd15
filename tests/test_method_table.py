"""One table (oodcorr.stats.methods.METHODS) decides, per method, which interval it gets, which columns it fills
and which method is primary: no code outside it branches on a method's name."""

from __future__ import annotations

import ast
from pathlib import Path

from oodcorr.stats.methods import METHODS, REFERENCES, drawn_smooth, primary

SRC = Path(__file__).resolve().parents[1] / "src" / "oodcorr"
TABLE = {SRC / "stats" / "methods.py"}


def name_branches(path: Path) -> list[int]:
    """Lines comparing against a method's name: `x == "linear"`, `"gam" in methods`, `m in ("linear", "rank")`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            consts = [e for s in sides for e in (s.elts if isinstance(s, (ast.Tuple, ast.List, ast.Set)) else [s])]
            if any(isinstance(c, ast.Constant) and c.value in METHODS for c in consts):
                out.append(node.lineno)
    return out


def test_no_module_outside_the_table_branches_on_a_method_name():
    found = [
        f"{p.relative_to(SRC.parent)}:{n}"
        for p in sorted(SRC.rglob("*.py"))
        if p not in TABLE
        for n in name_branches(p)
    ]
    assert not found, f"method-name branches outside the method table: {found}"


def test_the_checker_sees_a_branch(tmp_path):
    f = tmp_path / "x.py"
    f.write_text('def f(m, methods):\n    return m == "gam" or "rank" in methods or m in ("linear",) or m == "x"\n')
    assert name_branches(f) == [2, 2, 2]


def test_every_method_fills_the_columns_its_row_says():
    for name, spec in METHODS.items():
        assert spec.noise == (spec.interval is not None)
        assert spec.controls == (spec.operator is not None), name  # a residual operator iff ID is regressed out
        if spec.ci2boot:
            assert spec.operator in ("ols", "ranked_ols"), name  # the two-level bootstrap re-residualises resamples
    assert REFERENCES == ("raw",)


def test_the_primary_method_is_the_first_requested_that_controls_for_id():
    assert primary(["linear", "rank", "gam"]) == "linear"
    assert primary(["raw", "gam", "linear"]) == "gam"
    assert primary(["raw"]) is None
    assert drawn_smooth(["linear", "gam"]) == "gam" and drawn_smooth(["rank", "linear"]) == "rank"
