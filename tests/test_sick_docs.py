"""docs/studies.md's and the README's account of the SICK study are its committed tables and plan outputs: the
first pass's table is what bench/studies/study_table.py prints from its tables, its reliabilities fall short as the page
says, the re-plan's numbers are those in bench/planner/results, and the study's findings are what its tables say."""

from pathlib import Path

import pandas as pd
import yaml

from study_helpers import leave_one_seed_out, load_script

REPO = Path(__file__).resolve().parents[1]
FIRST = REPO / "studies" / "sick-first-pass"
STUDY = REPO / "studies" / "sick"


def _mod():
    return load_script(REPO / "bench" / "studies" / "study_table.py")


def _table(name: str) -> str:
    return _mod().table(name)


def _page(name: str) -> str:
    return (REPO / name).read_text()


def test_the_first_pass_table_and_its_shortfall_are_its_tables():
    page = _page("docs/studies.md")
    assert "\n".join("  " + line for line in _table("sick-first-pass").splitlines()) in page
    pooled = pd.read_csv(FIRST / "results" / "pooled_seeds.csv").query("method == 'linear'")
    low = pooled[(pooled[["rel_a", "rel_b"]].min(axis=1) < 0.5)]
    assert len(pooled) == 6 and set(pooled["n_seeds"]) == {2}
    flat = " ".join(page.split())
    assert f"in {len(low)} of the 6 pooled rows one reliability is below 0.5" in flat
    verdicts = pd.read_csv(FIRST / "results" / "consistency.csv").query("method == 'linear'")["verdict"]
    assert set(verdicts) == {"unreliable"}
    assert len(list((FIRST / "runs").glob("*.dvc"))) == 4


def test_the_replan_is_the_committed_plan_output():
    flat = " ".join(_page("docs/studies.md").split())
    plan = (REPO / "bench" / "planner" / "results" / "sick_replan.txt").read_text()
    r05 = (REPO / "bench" / "planner" / "results" / "sick_replan_r05.txt").read_text()
    assert "--pilot studies/sick-first-pass" in plan and "--trained-seeds 2" in plan
    assert (
        "design: 4 seeds x 17 checkpoints, 1024 ID items, 512 items per OOD testset, 2 run(s) per seed: 11.0 h"
    ) in plan
    assert (
        "expected power 0.92 at |r| = 0.8 (median reliable pair: scitail_real on both sides, reliability 0.56)"
    ) in plan
    assert "expected power 0.48 at |r| = 0.5" in r05 and "needs a budget of 25.8 h (9 seeds" in r05
    assert (
        "1,024 MNLI dev items and 512 per OOD testset: 11.0 h, predicted power 0.92 at |r| = 0.8 (median pair "
        "reliability 0.56) and 0.48 at |r| = 0.5"
    ) in flat
    now = (REPO / "bench" / "planner" / "results" / "sick_replan_now.txt").read_text()
    assert "--pilot studies/sick-first-pass" in now and "--trained-seeds 2" in now
    assert (
        "design: 3 seeds x 17 checkpoints, 2000 ID items, 512 items per OOD testset, 2 run(s) per seed: 10.9 h"
    ) in now
    assert "0.99 at |r| = 0.8" in now and "least reliable kept testset in any family: snli_real 0.51" in now
    page = " ".join(_page("docs/studies.md").split())
    assert (
        "chooses 3 seeds × 17 checkpoints, 2,000 MNLI dev items and 512 per OOD testset: 10.9 h, 0.99 at |r| = "
        "0.8, SNLI the least reliable testset at 0.51 in one family"
    ) in page
    frag = yaml.safe_load((REPO / "bench" / "planner" / "results" / "sick_replan.yaml").read_text())
    assert frag["data"]["max_examples"] == 512 and frag["data"]["testsets"]["mnli_real"]["max_examples"] == 1024


def test_the_readme_names_the_probes_that_chose_sick():
    readme = " ".join(_page("README.md").split())
    probes = {}
    for name in ("sickprobe", "sickprobe-gemma"):
        rel = pd.read_csv(REPO / "studies" / name / "results" / "reliability.csv")
        rel = rel.query("metric == 'balanced_margin' and method == 'linear' and testset == 'sick'")
        probes[name] = f"{rel['reliability'].iloc[0]:.2f}"
    assert (
        f"split-half reliability {probes['sickprobe']} and {probes['sickprobe-gemma']} in a probe run of each family"
    ) in readme


def test_the_pages_state_the_sick_study_as_far_as_its_intervals_go():
    """All 8 runs are in: the README's and docs/studies.md's tables are what bench/studies/study_table.py prints from
    the committed tables, the reliabilities, the rank version and how often the interval was defined are stated as
    they are, and nothing says the study is still running."""
    mod = _mod()
    readme, studies = _page("README.md"), _page("docs/studies.md")
    flat = " ".join(studies.split())
    planned = len(yaml.safe_load((STUDY / "params.yaml").read_text())["runs"])
    assert len(list((STUDY / "runs").glob("*.dvc"))) == planned == 8
    assert mod.findings(["twofamily", "sick"]) in readme  # the README's one table: across()'s rows, study named
    assert all(f"| sick {row}" in readme for row in mod.across("sick").splitlines()[2:])
    assert "\n".join("  " + line for line in mod.table("sick").splitlines()) in studies
    for page in (readme, studies):
        assert "Until all" not in " ".join(page.split()) and "**in progress**" not in page
    rows = pd.read_csv(STUDY / "results" / "partial_correlations.csv").query("method == 'linear'")
    pooled = pd.read_csv(STUDY / "results" / "pooled_seeds.csv")
    lin = pooled.query("method == 'linear'")
    per_run, both = (pd.concat([x["rel_a"], x["rel_b"]]) for x in (rows, lin))
    assert (
        f"fitted reliabilities {per_run.min():.2f}–{per_run.max():.2f} per run and {both.min():.2f}–"
        f"{both.max():.2f} in the seeds-pooled rows"
    ) in flat
    n, of = mod.defined("sick")["linear"]
    assert (
        n == of and (f"all {of} per-run linear rows whose reliabilities are both ≥ 0.5 have a defined interval") in flat
    )
    rank = pooled.query("method == 'rank' and testset_a == 'sick' and testset_b == 'snli_real'").sort_values("model")
    cells = [mod._cell(r) for r in rank.itertuples()]
    assert f"rank Gemma {cells[0]}, SmolLM2 {cells[1]}" in flat
    cons = pd.read_csv(STUDY / "results" / "consistency.csv").query("method == 'linear'")
    settled = int(cons["verdict"].isin(["consistent_positive", "consistent_negative", "model_dependent"]).sum())
    assert f"**{settled} of its 3 pairs are settled**" in _page("docs/benchmarks.md")
    assert set(cons["verdict"]) - {"consistent_positive", "consistent_negative", "model_dependent"} <= {
        "insufficient_evidence"
    }  # no pair is "unreliable": every testset carries signal in both families


def test_the_leave_one_seed_out_counts_are_its_results_and_the_full_row_is_the_committed_table():
    """The pages' "holds in 8 / 7 / 6" are bench/studies/leave_one_seed_out.py's CSV; its every-run rows are the
    study's committed verdicts (so the CSV was built from these tables), and each leave-out dropped one run."""
    df, runs = leave_one_seed_out(REPO, "sick")
    for key in runs:  # the family the run belongs to has one seed fewer there, the other family all of its own
        family = key.split("_")[0]
        rows = df[(df["left_out"] == key) & (df["method"] == "linear")]
        assert (rows[f"{family}:n_seeds"] == 3).all()
    linear = df[(df["method"] == "linear") & (df["left_out"] != "")]
    ref = df[(df["method"] == "linear") & (df["left_out"] == "")].set_index(["testset_a", "testset_b"])["verdict"]
    held = {pair: int((g["verdict"] == ref[pair]).sum()) for pair, g in linear.groupby(["testset_a", "testset_b"])}
    assert held == {("sick", "snli_real"): 8, ("scitail_real", "sick"): 7, ("scitail_real", "snli_real"): 6}
    text = " ".join(_page("docs/studies.md").split())
    assert "SICK ~ SNLI stays consistent negative in all 8. SciTail ~ SICK holds in 7" in text
    assert "SciTail ~ SNLI holds in 6" in text
    readme = " ".join(_page("README.md").split())
    assert "SICK ~ SNLI holds every time, SciTail ~ SICK 7 times, SciTail ~ SNLI 6" in readme
