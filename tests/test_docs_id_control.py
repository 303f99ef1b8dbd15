"""docs/statistics-reference.md's ID-control table is the one bench/stats/id_control.py prints from its committed
results, and that results file says what the docs claim: the smoothed control removes the observed control's bias on the
`curve` simulator."""

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench" / "stats"))

import id_control  # noqa: E402


def test_docs_table_is_the_results_file():
    rows = json.loads(id_control.OUT.read_text())["rows"]
    text = (REPO / "docs" / "statistics-reference.md").read_text()
    inside = text.split(id_control.MARKERS[0], 1)[1].split(id_control.MARKERS[1], 1)[0]
    assert inside == id_control.table(rows)


def test_the_smoothed_control_removes_the_observed_controls_bias_where_there_is_one():
    rows = json.loads(id_control.OUT.read_text())["rows"]
    at0 = {
        (r["generator"] if "generator" in r else "grid", r["id_control"], r["cell"]): r for r in rows if r["rho"] == 0.0
    }
    key = "base|gp0.2|id128|S3|n20|rho0.0"
    assert at0[("curve", "observed", key)]["mean_r_hat"] > 0.1
    assert abs(at0[("curve", "latent", key)]["mean_r_hat"]) < 0.1
    assert all(
        r["excludes_0"] <= 0.05 + 2 * max(r["coverage_mc_se"], 0.028)
        for r in at0.values()
        if r["id_control"] == "latent"
    )
