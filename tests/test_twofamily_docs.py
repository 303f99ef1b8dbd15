"""The numbers README.md and docs/studies.md state for studies/twofamily are the ones in its committed tables:
each pair's noise-free r and 95 % interval per family, the reliabilities, and the verdicts."""

import pandas as pd

from study_helpers import REPO, load_script

RESULTS = REPO / "studies" / "twofamily" / "results"
MODELS = {"gemma3-270m": "Gemma", "smollm2-135m": "SmolLM2"}
_cell = load_script(REPO / "bench" / "studies" / "study_table.py")._cell  # a row's r and interval, as pages quote them


def test_the_pages_state_the_committed_intervals_and_verdicts():
    pooled = pd.read_csv(RESULTS / "pooled_seeds.csv").query("method == 'linear'")
    cons = pd.read_csv(RESULTS / "consistency.csv").query("method == 'linear'").set_index(["testset_a", "testset_b"])
    readme, studies = ((REPO / p).read_text() for p in ("README.md", "docs/studies.md"))
    assert len(pooled) == 6 and set(pooled["n_seeds"]) == {4}
    for row in pooled.itertuples(index=False):
        cell = _cell(row)
        assert cell in readme and cell in studies, (row.model, row.testset_a, row.testset_b, cell)
        rel = f"reliability {row.rel_a:.2f} / {row.rel_b:.2f}"
        assert rel in studies, rel
    verdicts = {"consistent_positive": "consistent positive", "unreliable": "unreliable"}
    for (a, b), v in cons["verdict"].items():
        name = {"hans_real": "HANS", "scitail_real": "SciTail", "snli_real": "SNLI"}
        line = next(x for x in studies.splitlines() if x.startswith(f"  | {name[a]} ~ {name[b]} |"))
        assert line.rstrip().endswith(f"| {verdicts[v]} |"), line
    assert cons.loc[("scitail_real", "snli_real"), "verdict"] == "consistent_positive"
    assert "**same sign, positive**" in readme
    table = load_script(REPO / "bench" / "studies" / "study_table.py")
    findings = table.findings(["twofamily", "sick"])  # the README's one table of the saved studies' findings
    assert findings in readme
    assert all(f"| twofamily {row}" in findings for row in table.across("twofamily").splitlines()[2:])


def test_the_pages_state_the_rank_and_gam_agreement_and_the_seeds_that_settle_it_alone():
    """ "The rank and GAM versions agree", the rank intervals quoted, and which seeds exclude 0 on their own."""
    cons = pd.read_csv(RESULTS / "consistency.csv").set_index(["method", "testset_a", "testset_b"])
    pooled = pd.read_csv(RESULTS / "pooled_seeds.csv")
    runs = pd.read_csv(RESULTS / "partial_correlations.csv")
    readme, studies = ((REPO / p).read_text() for p in ("README.md", "docs/studies.md"))
    for method in ("rank", "gam"):
        assert cons.loc[(method, "scitail_real", "snli_real"), "verdict"] == "consistent_positive"
    for row in pooled.query("method == 'rank' and testset_a == 'scitail_real'").itertuples(index=False):
        assert f"{MODELS[row.model]} {_cell(row)}" in studies
    pair = runs.query("method == 'linear' and testset_a == 'scitail_real' and testset_b == 'snli_real'")
    alone = {(MODELS[r.model], int(r.seed)) for r in pair.itertuples(index=False) if r.ci2_low > 0 or r.ci2_high < 0}
    assert alone == {("Gemma", 0), ("Gemma", 2), ("Gemma", 3)}
    assert "Gemma's seeds 0, 2 and 3 exclude 0 on their own" in studies
    assert "three of Gemma's four seeds and none of SmolLM2's settle it alone" in " ".join(readme.split())
    for r in pair.itertuples(index=False):
        if MODELS[r.model] == "Gemma":
            assert _cell(r) in studies, (r.seed, _cell(r))
