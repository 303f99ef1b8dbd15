"""bench/stats/interval_grid.py: its generator's rho is the noise-free partial correlation, --quick runs, and the tables
in docs/statistics-reference.md are what --markdown prints from the committed results file."""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
START, END = "<!-- interval_grid:start -->", "<!-- interval_grid:end -->"


@pytest.fixture(scope="module")
def grid():
    spec = importlib.util.spec_from_file_location("interval_grid", REPO / "bench" / "stats" / "interval_grid.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["interval_grid"] = mod
    spec.loader.exec_module(mod)
    return mod


def _resid(x, y):
    xc, yc = x - x.mean(-1, keepdims=True), y - y.mean(-1, keepdims=True)
    return yc - ((xc * yc).sum(-1) / (xc * xc).sum(-1))[..., None] * xc


@pytest.mark.parametrize("dependence", ["gp0.1", "gp0.2", "ar0.5", "ar0.8", "iid"])
def test_generator_rho_is_the_partial_correlation_of_the_noise_free_trajectories(grid, dependence):
    """Without item noise, across checkpoints, the partial correlation of the OOD abilities given the ID ability is
    rho: the ratio estimator sum(e_a e_b) / sqrt(sum e_a^2 sum e_b^2) over many seeds is consistent for any
    dependence (E[u'Mv] = rho E[u'Mu] for the ICM construction); with many checkpoints of a short-memory process
    the mean sample partial r is rho as well."""
    for rho in (0.0, 0.5, 0.8):
        cell = dict(variant="base", dependence=dependence, id_items=16, seeds=5, checkpoints=40, rho=rho)
        d = grid.simulate(cell, 400, np.random.default_rng(7), items=False)
        ea, eb = (_resid(d["truth"]["x"], d["truth"][j]) for j in "ab")
        blocks = [
            (ea[i::20] * eb[i::20]).sum() / np.sqrt((ea[i::20] ** 2).sum() * (eb[i::20] ** 2).sum()) for i in range(20)
        ]
        ratio = (ea * eb).sum() / np.sqrt((ea**2).sum() * (eb**2).sum())
        se = np.std(blocks, ddof=1) / np.sqrt(len(blocks))
        assert abs(ratio - rho) < 4 * se + 0.005, (dependence, rho, ratio, se)
        if dependence in ("iid", "ar0.5"):
            cell.update(checkpoints=200, seeds=2)
            d = grid.simulate(cell, 100, np.random.default_rng(8), items=False)
            r = grid.partial_corr(d["truth"]["x"], d["truth"]["a"], d["truth"]["b"])
            se = r.std(ddof=1) / np.sqrt(r.size)
            assert abs(r.mean() - rho) < 4 * se + 0.01, (dependence, rho, r.mean(), se)


def test_rough_id_keeps_rho_and_makes_the_id_series_rough(grid):
    """The rough-ID variant: the noise-free ID ability carries an AR(1) part (its checkpoint-to-checkpoint
    steps several times the smooth base curve's), and rho is still the partial correlation."""
    cell = dict(variant="rough_id", dependence="ar0.8", id_items=16, seeds=5, checkpoints=40, rho=0.5)
    d = grid.simulate(cell, 400, np.random.default_rng(7), items=False)
    base = grid.simulate({**cell, "variant": "base"}, 400, np.random.default_rng(7), items=False)
    rough = [np.diff(v["x"], axis=-1).std(-1).mean() for v in (d["truth"], base["truth"])]
    assert rough[0] > 3 * rough[1]
    ea, eb = (_resid(d["truth"]["x"], d["truth"][j]) for j in "ab")
    ratio = (ea * eb).sum() / np.sqrt((ea**2).sum() * (eb**2).sum())
    assert abs(ratio - 0.5) < 0.03


def test_balanced_margin_removes_the_answer_bias_exactly(grid):
    """tau = 0: every testset's balanced margin is a positive multiple of its ability plus a constant, whatever the
    shared answer bias and label imbalance, so its partial r equals the noise-free one."""
    cell = dict(variant="answer_bias", dependence="gp0.2", id_items=64, seeds=2, checkpoints=20, rho=0.5)
    d = grid.simulate(cell, 5, np.random.default_rng(3), tau=0.0, ood_items=40)
    assert np.std(d["bias"]) > 0.5 and (d["labels"]["a"] > 0).mean() == 0.3 and (d["labels"]["b"] > 0).mean() == 0.4
    r_obs = grid.partial_corr(d["series"]["x"], d["series"]["a"], d["series"]["b"])
    r_true = grid.partial_corr(d["truth"]["x"], d["truth"]["a"], d["truth"]["b"])
    np.testing.assert_allclose(r_obs, r_true, atol=1e-9)


def test_cell_draws_are_fixed_by_the_cell_key(grid):
    cell = grid.parse_key("base|ar0.8|id128|S3|n9|rho0.5")
    assert grid.cell_key(cell) == "base|ar0.8|id128|S3|n9|rho0.5"
    k = grid.CHUNK  # whole chunks are shared by any --reps that covers them
    first = [grid.simulate(cell, size, rng)["series"]["a"] for size, rng in grid.cell_rngs(grid.cell_key(cell), 2 * k)]
    again = [grid.simulate(cell, size, rng)["series"]["a"] for size, rng in grid.cell_rngs(grid.cell_key(cell), 3 * k)]
    np.testing.assert_array_equal(np.concatenate(first), np.concatenate(again)[: 2 * k])
    assert len(grid.all_cells()) == 262 and len({grid.cell_key(c) for c in grid.all_cells()}) == 262


def test_quick_runs_and_writes_its_files(grid, tmp_path):
    out = tmp_path / "grid.jsonl"
    assert grid.main(["--quick", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["key"] for r in rows) == sorted(grid.QUICK["cells"])
    for r in rows:
        assert r["replicates"] == grid.QUICK["reps"] and "earlier" in r["methods"]
        for m in r["methods"]:
            s = r[m]
            assert 0 <= s["defined_share"] <= 1 and s["replicates"] == r["replicates"]
            assert s["coverage"] is None or 0 <= s["coverage"] <= 1
    summary = json.loads(out.with_suffix(".json").read_text())
    assert len(summary["cells"]) == len(rows) and summary["generator"]["tau"] == grid.TAU
    # --resume: nothing left to run, nothing appended
    assert grid.main(["--quick", "--out", str(out), "--resume"]) == 0
    assert len(out.read_text().splitlines()) == len(rows)


def test_docs_tables_are_the_committed_results(grid):
    doc = (REPO / "docs" / "statistics-reference.md").read_text()
    assert doc.count(START) == 1 and doc.count(END) == 1
    block = doc.split(START)[1].split(END)[0]
    assert block.strip() == grid.markdown(grid.OUT).strip()


def test_a_later_run_of_one_interval_keeps_the_other_intervals_results(grid, tmp_path):
    path = tmp_path / "rows.jsonl"
    key = "base|gp0.2|id128|S1|n40|rho0.0"
    first = {
        "key": key,
        **grid.parse_key(key),
        "replicates": 200,
        "methods": ["earlier", "new"],
        "sources": {"earlier": "e1", "new": "n1"},
        "earlier": {"replicates": 200},
        "new": {"replicates": 200},
    }
    later = {
        "key": key,
        **grid.parse_key(key),
        "replicates": 60,
        "methods": ["new"],
        "sources": {"new": "n2"},
        "new": {"replicates": 60},
    }
    path.write_text(json.dumps(first) + "\n" + json.dumps(later) + "\n")
    row = grid.read_rows(path)[key]
    assert row["methods"] == ["earlier", "new"] and row["sources"] == {"new": "n2", "earlier": "e1"}
    assert row["earlier"]["replicates"] == 200 and row["new"]["replicates"] == 60
