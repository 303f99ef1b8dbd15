"""docs/statistics-reference.md's ID-smoother table is the one bench/id_smoother.py prints from its committed
results, and those results say what the docs claim of them."""

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import id_smoother  # noqa: E402


def _rows():
    rows = {}
    for line in id_smoother.OUT.read_text().splitlines():
        r = json.loads(line)
        old = rows.get((r["key"], r["id_kernel"]))
        if old is None or r["replicates"] >= old["replicates"]:
            rows[(r["key"], r["id_kernel"])] = r
    return rows


def test_docs_table_is_the_results_file():
    text = (REPO / "docs" / "statistics-reference.md").read_text()
    inside = text.split(id_smoother.MARKERS[0], 1)[1].split(id_smoother.MARKERS[1], 1)[0]
    assert inside == id_smoother.table()


def test_the_squared_exponential_holds_on_smooth_id_and_runs_high_on_rough_id():
    rows = _rows()
    smooth = rows[("base|ar0.8|id128|S5|n40|rho0.0", "se")]
    assert abs(smooth["bias"]) <= 0.02 and smooth["excludes_0"] <= 0.05 + 2 * smooth["excludes_0_se"]
    rough = {k: r for (key, k), r in rows.items() if key == "rough_id|ar0.8|id128|S5|n40|rho0.0"}
    assert rough["se"]["bias"] > 0.08 and rough["se"]["excludes_0"] > 0.15
    # every other smoother cuts the bias; the rough kernel, right here, runs low on smooth ID curves
    assert all(r["bias"] < rough["se"]["bias"] for k, r in rough.items() if k != "se")
    assert abs(rough["exp"]["bias"]) <= 0.02 and rough["exp"]["excludes_0"] <= 0.05 + 2 * rough["exp"]["excludes_0_se"]
    assert rows[("base|ar0.8|id128|S5|n40|rho0.0", "exp")]["bias"] < -0.03
