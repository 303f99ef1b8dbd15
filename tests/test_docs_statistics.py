"""docs/statistics-reference.md's coverage summary is the one in bench/stats/results/noise_simulation.json
(interval_grid)."""

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STATS = REPO / "bench" / "stats" / "results"
DOC = REPO / "docs" / "statistics-reference.md"
SCENARIOS = ["independent", "smooth", "independent_small_id", "smooth_small_id", "smooth_small_id_answer_bias"]


def test_coverage_summary_matches_the_results_file():
    grid = json.loads((STATS / "noise_simulation.json").read_text())["interval_grid"]
    text = DOC.read_text().split("### Measured: coverage over the design grid")[1]
    rows = re.findall(r"^\| [^|]+ \| ([\d.–/ ]+) \| (\d+) / (\d+) \| (0\.\d+) \|$", text, re.M)[:5]
    assert len(rows) == 5 and f"--reps {grid['replicates']}" in text
    in_band = 0
    for scen, (ranges, inb, total, fd) in zip(SCENARIOS, rows):
        cells = [c for c in grid["cells"] if c["scenario"] == scen and c["defined"] >= 30]
        for rho, rng in zip((0.0, 0.5, 0.8), ranges.split(" / ")):
            cov = [c["coverage"] for c in cells if c["rho"] == rho]
            assert rng == f"{min(cov):.3f}–{max(cov):.3f}"
        n_in = sum(0.93 <= c["coverage"] <= 0.97 for c in cells)
        assert (int(inb), int(total)) == (n_in, len(cells))
        assert fd == f"{max(c['rejects_zero'] for c in cells if c['rho'] == 0):.3f}"
        in_band += n_in
    assert f"{in_band} of the {len(grid['cells'])} cells are in 0.93–0.97" in text


def test_interval_variants_table_matches_its_results_file():
    res = json.loads((STATS / "interval_variants.json").read_text())
    text = DOC.read_text().split("Counts over the same 240 cells:")[1]
    rows = re.findall(
        r"^\| [^|]+ \| (\d+) of (\d+) \| (\d+) / (\d+) \| "
        r"(\d+) \| (\d+) \| (\d+) \| (0\.\d+) \|$",
        text,
        re.M,
    )
    assert len(rows) == 3
    for name, row in zip(("current", "pivot_variant", "plugin_variant"), rows):
        j = res[name]
        assert row == tuple(
            str(j[k])
            for k in (
                "in_band",
                "cells",
                "above",
                "below",
                "above_by_2se",
                "below_by_2se",
                "false_distinguishable_over_5pct_by_2se",
            )
        ) + (f"{j['lowest']:.3f}",)
    # the current interval's row is the committed grid's
    grid = json.loads((STATS / "noise_simulation.json").read_text())["interval_grid"]
    assert res["current"]["in_band"] == sum(bool(c["in_target"]) for c in grid["cells"])
    checks = res["small_sample_check"]
    indep = [c for c in checks if c["phi"] == 0]
    assert indep and all(abs(c["sd_interval"] / c["sd_empirical"] - 1) < 0.01 for c in indep)
    over = [c["sd_interval"] / c["sd_empirical"] - 1 for c in checks if c["phi"] > 0]
    assert f"is {round(100 * min(over))}–{round(100 * max(over))} % above the" in " ".join(
        (REPO / "docs" / "statistics-reference.md").read_text().split()
    )


def test_interval_cell_diagnosis_table_matches_its_results_file():
    results = json.loads((STATS / "interval_variants.json").read_text())
    res = results["cell_diagnosis"]
    doc = (REPO / "docs" / "statistics-reference.md").read_text()
    text = doc.split("| misses below / above |")[1].split("\n\n")[0]
    num = r"([+-]?[\d.]+)"
    rows = re.findall(
        rf"^\| (\w+) \| (\d+) \| (\d+) \| {num} \| {num} \| {num} \| {num} \({num}\) \| {num} / {num} "
        rf"\| {num} \| {num} \| {num} % / {num} % \|$",
        text,
        re.M,
    )
    assert len(rows) == len(res) > 0
    for row, c in zip(rows, res):
        assert row == (
            c["scenario"],
            str(c["checkpoints"]),
            str(c["items"]),
            str(c["rho"]),
            f"{c['median_se_z']:.3f}",
            f"{c['median_se_z_true_phi']:.3f}",
            f"{c['se_z_at_truth']:.3f}",
            f"{c['se_z_at_truth_without_small_sample_term']:.3f}",
            f"{c['sd_atanh_r_obs_all']:.3f}",
            f"{c['sd_atanh_r_obs_defined']:.3f}",
            f"{c['sd_pivot']:.3f}",
            f"{c['mean_pivot']:+.3f}",
            f"{100 * c['miss_low']:.1f}",
            f"{100 * c['miss_high']:.1f}",
        )
    # the diagnosis draws are the grid's: its misses are the committed grid cell's coverage
    grid = {
        (c["scenario"], c["checkpoints"], c["items"], c["rho"]): c
        for c in json.loads((STATS / "noise_simulation.json").read_text())["interval_grid"]["cells"]
    }
    for c in res:
        g = grid[(c["scenario"], c["checkpoints"], c["items"], c["rho"])]
        assert abs(1 - c["miss_low"] - c["miss_high"] - g["coverage"]) < 1e-9 and c["defined"] == g["defined"]
    # the prose: the defined replicates' spread at r = 0.8 against r = 0 (64 items), and the standard error at the
    # true parameters against the spread over all replicates (the smooth cells)
    d = {(c["scenario"], c["items"], c["rho"]): c for c in res}
    drop = 1 - d[("smooth", 64, 0.8)]["sd_atanh_r_obs_defined"] / d[("smooth", 64, 0.0)]["sd_atanh_r_obs_defined"]
    over = [c["se_z_at_truth"] / c["sd_atanh_r_obs_all"] - 1 for c in res if c["scenario"] == "smooth"]
    words = " ".join(doc.split())
    assert f"{round(100 * drop)} % smaller at r = 0.8 than at r = 0" in words
    assert f"the standard error is {round(100 * min(over))}–{round(100 * max(over))} % above the spread" in words
    share = d[("smooth", 64, 0.8)]["defined"] / results["reps"]
    assert f"reach 0.5 ({round(100 * share)} % of these replicates)" in words
