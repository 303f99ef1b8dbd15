"""docs/statistics-reference.md's table of the interval on the study's own items is the one bench/stats/item_resample.py
makes from its committed results, and the statements beside it follow from those results."""

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("item_resample", REPO / "bench" / "stats" / "item_resample.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_table_is_the_committed_results():
    bench = _bench()
    text = (REPO / "docs" / "statistics-reference.md").read_text()
    block = text.split("<!-- item_resample:begin -->\n")[1].split("<!-- item_resample:end -->")[0]
    assert block.strip().splitlines()[2:] == bench.markdown().splitlines()


def test_the_sign_held_in_every_gated_draw_and_the_all_items_reference_is_the_committed_study():
    import pandas as pd

    bench = _bench()
    rows = pd.read_csv(REPO / "studies" / "twofamily" / "results" / "pooled_seeds.csv").query(
        "method == 'linear' and testset_a == 'scitail_real' and testset_b == 'snli_real'"
    )
    pooled = {r.model: (r.r_disattenuated, r.ci2_low, r.ci2_high) for r in rows.itertuples(index=False)}
    for path in bench.TABLED:
        res = json.loads(Path(path).read_text())
        for model, s in res["summary"].items():
            ref = s["reference"]
            assert abs(ref["r"] - pooled[model][0]) < 1e-9 and abs(ref["ci_low"] - pooled[model][1]) < 1e-9
            d = bench.draw_rows(res, model)
            assert d["sig"] == d["positive"] > 0  # every gated draw that excluded 0 was positive
    gemma = [bench.draw_rows(json.loads(Path(p).read_text()), "gemma3-270m")["holds"] for p in bench.TABLED]
    text = " ".join((REPO / "docs" / "statistics-reference.md").read_text().split())
    lo, hi = round(100 * (1 - max(gemma))), round(100 * (1 - min(gemma)))
    assert f"missed the all-items value in {lo}–{hi} % of draws" in text


def test_readme_and_the_study_page_quote_the_half_item_draws():
    bench = _bench()
    res = json.loads(Path(bench.TABLED[1]).read_text())
    assert res["sizes"] == {"scitail_real": 256, "snli_real": 256} and res["draws"] == 40
    gemma, smol = (bench.draw_rows(res, m) for m in ("gemma3-270m", "smollm2-135m"))
    rise = [bench.draw_rows(res, m)["median"] - res["summary"][m]["reference"]["r"] for m in res["summary"]]
    assert all(abs(x - 0.12) < 0.015 for x in rise)
    assert gemma["sig"] == gemma["positive"] == smol["sig"] == smol["positive"] == 40
    miss = f"missed the all-items value in {round(100 * (1 - gemma['holds']))} % of draws"
    for page in ("README.md", "docs/studies.md"):
        text = " ".join((REPO / page).read_text().split())
        assert miss in text, page
    assert "the estimates rose by about 0.12 with fewer items" in " ".join((REPO / "README.md").read_text().split())
    studies = " ".join((REPO / "docs/studies.md").read_text().split())
    assert f"(median {gemma['median']:+.2f} for Gemma, {smol['median']:+.2f} for SmolLM2)" in studies


def test_the_why_bullets_are_the_noise_check_results():
    res = json.loads((REPO / "bench" / "stats" / "results" / "real_noise_check.json").read_text())
    text = " ".join((REPO / "docs" / "statistics-reference.md").read_text().split())
    lo, hi = res["split_half_range"]
    assert f"difference is {lo:.2f}–{hi:.2f} of what the analysis estimates" in text
    med = [s["median_r"] for s in res["own_model"]]
    cov = [s["coverage"] for s in res["own_model"]]
    assert f"the median estimate is {min(med):.2f}–{max(med):.2f}" in text
    assert f"coverage {min(cov):.3f}–{max(cov):.3f}" in text
    g, s = res["bands"]["gemma3-270m"], res["bands"]["smollm2-135m"]
    f = "{:+.2f}".format
    assert (
        f"SmolLM2 {f(s['slow']['r'])} against {f(s['fast']['r'])}, Gemma {f(g['slow']['r'])} against "
        f"{f(g['fast']['r'])}" in text
    )
    share = [round(100 * b["slow"][k] / b["all"][k]) for b in (g, s) for k in ("signal_var_a", "signal_var_b")]
    assert "SciTail {} % and SNLI {} % in Gemma, {} % and {} % in SmolLM2".format(*share) in text
    assert f"moment estimate is {f(g['all']['r'])} (Gemma) and {f(s['all']['r'])} (SmolLM2)" in text
    assert f"against the likelihood's {f(g['likelihood_r'])} and {f(s['likelihood_r'])}" in text
    for b in (g, s):
        assert b["slow"]["r"] > 0 and b["fast"]["r"] > 0 and b["all"]["r"] > 0


def test_the_drift_is_there_seed_by_seed():
    res = json.loads((REPO / "bench" / "stats" / "results" / "item_resample_id512.json").read_text())
    rise = [res["per_seed_median_r"][k] - v[0] for k, v in res["reference_per_seed"].items()]
    text = " ".join((REPO / "docs" / "statistics-reference.md").read_text().split())
    assert (
        f"rises in {sum(x > 0 for x in rise)} of {len(rise)} seeds (by {min(rise):+.2f} to {max(rise):+.2f};".replace(
            "-", "−"
        )
        in text
    )


def test_the_misses_at_the_first_pass_sizes_come_with_a_shorter_length_scale():
    import numpy as np

    res = json.loads((REPO / "bench" / "stats" / "results" / "item_resample.json").read_text())
    ref = res["summary"]["gemma3-270m"]["reference"]["r"]
    rows = np.array([d["gemma3-270m"] for d in res["per_draw"]], float)
    held = (rows[:, 1] <= ref) & (ref <= rows[:, 2])
    miss, hold = np.median(rows[~held, 6]), np.median(rows[held, 6])
    assert miss < hold
    text = " ".join((REPO / "docs" / "statistics-reference.md").read_text().split())
    assert f"median {miss:.3f} against {hold:.3f} for the draws that held" in text
