"""docs/studies.md's, docs/benchmarks.md's and the README's account of the breadth study (issue 61) are its committed
tables, cost.json and leave-one-seed-out CSV: the table is what bench/studies/study_table.py prints, the settled and
readable counts and the cost per settled pair are computed from the files, and nothing says it is still running."""

import json
from pathlib import Path

import yaml

from study_helpers import leave_one_seed_out, load_script

REPO = Path(__file__).resolve().parents[1]
STUDY = REPO / "studies" / "breadth"


def _mod():
    return load_script(REPO / "bench" / "studies" / "study_table.py")


def _flat(name: str) -> str:
    return " ".join((REPO / name).read_text().split())


def test_every_planned_run_is_saved_and_the_pages_show_its_table():
    mod = _mod()
    planned = yaml.safe_load((STUDY / "params.yaml").read_text())["runs"]
    assert sorted(p.name[: -len(".dvc")] for p in (STUDY / "runs").glob("*.dvc")) == sorted(planned)
    assert len(planned) == 8
    studies, readme = (REPO / "docs" / "studies.md").read_text(), (REPO / "README.md").read_text()
    assert "\n".join("  " + line for line in mod.table("breadth").splitlines()) in studies
    assert mod.findings(["twofamily", "sick", "breadth"], settled_only=("breadth",)) in readme
    section = studies[studies.index("- `studies/breadth`") :]
    assert "in progress" not in section and "so far" not in section.split("\n")[0]


def test_the_counts_and_the_cost_per_settled_pair_are_the_files():
    mod = _mod()
    n, readable, pairs = mod.settled("breadth")
    cost = json.loads((STUDY / "cost.json").read_text())
    total, spent = cost["total_cpu_hours"], cost["spent_cpu_hours"]
    assert pairs == 28 and cost["runs_cpu_hours"] > 0 and len(cost["runs"]) == 8
    studies, bench = _flat("docs/studies.md"), _flat("docs/benchmarks.md")
    assert f"**{n} of its {pairs} pairs are settled**" in studies
    assert f"{readable} of the {pairs} pairs are readable in both families" in studies
    per, per_spent = total / n, spent / n
    for page in (studies, bench):
        assert f"{total:.2f} CPU-hours, {per:.2f} per settled pair" in page
        assert f"{spent:.2f} counting the lost first attempt ({per_spent:.2f} per settled pair)" in page
    rel = mod.readable("breadth")
    both = sorted(t for t, by in rel.items() if min(by.values()) >= 0.5)
    assert f"{len(both)} of its 8 OOD testsets read at 0.5 or more in both families" in studies


def test_the_leave_one_seed_out_counts_are_its_results():
    df, runs = leave_one_seed_out(REPO, "breadth")
    assert len(runs) == 8
    mod = _mod()
    linear = df[df["method"] == "linear"]
    ref = linear[linear["left_out"] == ""].set_index(["testset_a", "testset_b"])["verdict"]
    settled = [pair for pair, v in ref.items() if v in mod.ACROSS]  # the verdicts study_table counts as settled
    text = _flat("docs/studies.md")
    for a, b in settled:
        rows = linear[(linear["left_out"] != "") & (linear["testset_a"] == a) & (linear["testset_b"] == b)]
        held = int((rows["verdict"] == ref[(a, b)]).sum())
        assert f"{mod.NAMES[a]} ~ {mod.NAMES[b]} holds in {held} of 8" in text
