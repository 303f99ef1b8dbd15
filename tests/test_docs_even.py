"""docs/statistics-reference.md's tables of the even-weight estimate are the ones bench/stats/even_resample.py makes
from the committed results, its all-items reference is the committed study's own row, and the pages' r_even numbers for
studies/twofamily are those in its tables."""

import importlib.util
import json
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "studies" / "twofamily" / "results"
MODELS = {"gemma3-270m": "Gemma", "smollm2-135m": "SmolLM2"}


def _bench():
    spec = importlib.util.spec_from_file_location("even_resample", REPO / "bench" / "stats" / "even_resample.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _block(tag: str) -> str:
    text = (REPO / "docs" / "statistics-reference.md").read_text()
    return text.split(f"<!-- {tag}:begin -->\n")[1].split(f"<!-- {tag}:end -->")[0]


def test_the_tables_are_the_committed_results():
    bench = _bench()
    assert _block("even_grid") == bench.grid_markdown()
    assert _block("even_resample") == bench.resample_markdown()
    assert len(_block("even_grid").splitlines()) >= 8  # a header and at least six groups of cells


def _cell(r) -> str:
    return f"{r.r_even:+.2f} [{r.ci2even_low:+.2f}, {r.ci2even_high:+.2f}]".replace("-", "−")


def test_the_reference_and_the_pages_are_the_committed_study():
    res = json.loads((REPO / "bench" / "stats" / "results" / "even_resample.json").read_text())
    pooled = pd.read_csv(RESULTS / "pooled_seeds.csv").query(
        "method == 'linear' and testset_a == 'scitail_real' and testset_b == 'snli_real'"
    )
    studies = (REPO / "docs/studies.md").read_text()
    for r in pooled.itertuples(index=False):
        ref = res["families"][MODELS[r.model]]["all_items"]
        assert ref["even"][0] == pytest.approx(r.r_even, abs=1e-9)
        assert ref["likelihood"][0] == pytest.approx(r.r_disattenuated, abs=1e-9)
        cell = f"{MODELS[r.model]} {_cell(r)}"
        assert cell in " ".join(studies.split()), cell
        assert r.ci2even_low > 0  # "positive again in both families"
    runs = pd.read_csv(RESULTS / "partial_correlations.csv").query(
        "method == 'linear' and testset_a == 'scitail_real' and testset_b == 'snli_real'"
    )
    alone = {(MODELS[r.model], int(r.seed)) for r in runs.itertuples(index=False) if r.ci2even_low > 0}
    assert alone == {("Gemma", 0), ("Gemma", 3), ("SmolLM2", 1)}
    g1 = runs[(runs["model"] == "gemma3-270m") & (runs["seed"] == 1)].iloc[0]
    assert f"seed 1 reads {_cell(g1)}" in " ".join(studies.split())


def test_on_real_items_the_even_estimate_holds_where_the_likelihood_drifts():
    """The statements beside the table: with half the OOD items, r_even's median stays within 0.05 of its
    all-items value in both families and its interval holds it in every draw."""
    res = json.loads((REPO / "bench" / "stats" / "results" / "even_resample.json").read_text())
    for name, fam in res["families"].items():
        d = fam["designs"]["SciTail, SNLI halved"]["summary"]
        assert abs(d["even"]["median_r"] - fam["all_items"]["even"][0]) < 0.05, name
        assert d["even"]["holds"] == d["even"]["defined"] == res["draws"], name


def test_on_the_grid_the_even_interval_is_valid_and_wider_as_the_page_says():
    bench = _bench()
    new, even = bench._rows(bench.GRID, "new"), bench._rows(bench.GRID_EVEN, "even")
    assert len(even) >= 40
    for key, row in even.items():
        e = row["even"]
        se = (0.95 * 0.05 / e["defined"]) ** 0.5
        assert e["defined_share"] == 1.0, key  # computed from the data in every replicate
        assert e["coverage"] >= 0.93 - 2 * se, key
        if row["rho"] == 0:
            assert e["false_distinguishable"] <= 0.05 + 2 * se, key
    cov = [r["even"]["coverage"] for r in even.values()]
    fd = max(r["even"]["false_distinguishable"] for r in even.values() if r["rho"] == 0)
    dw = [even[k]["even"]["median_width"] - new[k]["new"]["median_width"] for k in even if even[k]["rho"] == 0.5]
    dp = max(new[k]["new"]["power"] - even[k]["even"]["power"] for k in even if even[k]["rho"] == 0.5)
    page = " ".join((REPO / "docs" / "statistics-reference.md").read_text().split())
    assert f"covers {min(cov):.2f}–{max(cov):.2f} in every cell" in page
    assert f"in at most {round(100 * fd)} % of replicates" in page
    assert f"It is {min(dw):.2f}–{max(dw):.2f} wider" in page and f"up to {dp:.2f} lower" in page
