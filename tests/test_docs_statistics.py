"""docs/statistics.md's coverage summary is the one in bench/results/noise_simulation.json (interval_grid)."""

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = ["independent", "smooth", "independent_small_id", "smooth_small_id", "smooth_small_id_answer_bias"]


def test_coverage_summary_matches_the_results_file():
    grid = json.loads((REPO / "bench" / "results" / "noise_simulation.json").read_text())["interval_grid"]
    text = (REPO / "docs" / "statistics.md").read_text().split("### Measured: coverage over the design grid")[1]
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
