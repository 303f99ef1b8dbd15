"""docs/statistics-reference.md's ID-smoother table is the one bench/stats/id_smoother.py prints from its committed
results, and those results say what the docs claim of them."""

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench" / "stats"))

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


def _holds(r):
    return abs(r["bias"]) <= 0.02 and r["excludes_0"] <= 0.05 + 2 * r["excludes_0_se"]


def test_the_shared_smoother_holds_on_smooth_and_rough_id_where_each_fixed_kernel_fails_on_one():
    rows = _rows()
    smooth = {k: r for (key, k), r in rows.items() if key == "base|ar0.8|id128|S5|n40|rho0.0"}
    rough = {k: r for (key, k), r in rows.items() if key == "rough_id|ar0.8|id128|S5|n40|rho0.0"}
    assert _holds(smooth["shared"]) and _holds(rough["shared"])  # the package's smoother, on both kinds of ID
    assert smooth["shared"]["replicates"] >= 200 and rough["shared"]["replicates"] >= 200
    # the squared exponential runs high on rough ID, the exponential low on smooth ID
    assert _holds(smooth["se"]) and rough["se"]["bias"] > 0.08 and rough["se"]["excludes_0"] > 0.15
    assert rough["exp"]["bias"] < 0.03 and smooth["exp"]["bias"] < -0.03
    # the price: width within 5 % of the squared exponential's where that one is right
    assert smooth["shared"]["median_width"] <= 1.05 * smooth["se"]["median_width"]


def test_elsewhere_in_the_grid_the_docs_table_and_its_claims_are_the_results_file():
    change = json.loads(id_smoother.GRID_OUT.read_text())
    text = (REPO / "docs" / "statistics-reference.md").read_text()
    inside = text.split("<!-- id_smoother_grid:start -->\n", 1)[1].split("<!-- id_smoother_grid:end -->", 1)[0]
    assert inside == id_smoother.grid_change_table(change)
    cells = change["cells"]
    smooth = [c for c in cells if not c["key"].startswith("rough_id")]
    assert len(cells) == 203 and len(smooth) == 201
    assert sum(c["width_ratio"] <= 1.05 for c in smooth) == 199
    assert max(c["width_ratio"] for c in smooth) < 1.07
    # no cell fell below the coverage band that was inside it before
    assert not [c for c in cells if c["coverage"][1] < 0.93 - 2 * c["coverage_se"] <= c["coverage"][0]]


def test_the_two_cells_past_five_percent_of_width_at_60_replicates_are_within_it_at_200():
    rows = _rows()
    for key in ("base|gp0.2|id128|S5|n40|rho0.8", "base|ar0.8|id512|S3|n9|rho0.8"):
        shared, se = rows[(key, "shared")], rows[(key, "se")]
        assert shared["replicates"] == se["replicates"] == 200
        assert shared["median_width"] <= 1.05 * se["median_width"], key
