"""docs/studies.md's account of studies/sick (a study saved run by run) is its committed tables: the findings
table is what bench/study_table.py prints from them, and the count of saved runs is the count of runs/*.dvc."""

import importlib.util
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
STUDY = REPO / "studies" / "sick"


def _table(name: str) -> str:
    spec = importlib.util.spec_from_file_location("study_table", REPO / "bench" / "study_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.table(name)


def test_the_page_shows_the_saved_runs_table_and_count():
    page = (REPO / "docs" / "studies.md").read_text()
    table = _table("sick")
    assert "\n".join("  " + line for line in table.splitlines()) in page
    saved = len(list((STUDY / "runs").glob("*.dvc")))
    planned = len(yaml.safe_load((STUDY / "params.yaml").read_text())["runs"])
    flat = " ".join(page.split())
    if saved < planned:
        assert f"**in progress** (saved run by run; {saved} of its {planned} runs so far)" in flat
    # every saved run is a run of the study's params, and the table counts each family's seeds
    seeds = {m: sum(1 for p in (STUDY / "runs").glob(f"{m}_*.dvc")) for m in ("gemma3-270m", "smollm2-135m")}
    for family, label in (("gemma3-270m", "Gemma-3-270M"), ("smollm2-135m", "SmolLM2-135M")):
        n = seeds[family]
        assert f"{label} ({n} seed{'s' * (n > 1)})" in table


def test_the_readme_says_the_sick_study_settles_nothing_until_its_runs_are_in():
    import pandas as pd

    readme = " ".join((REPO / "README.md").read_text().split())
    probes = {}
    for name in ("sickprobe", "sickprobe-gemma"):
        rel = pd.read_csv(REPO / "studies" / name / "results" / "reliability.csv")
        rel = rel.query("metric == 'balanced_margin' and method == 'linear' and testset == 'sick'")
        probes[name] = f"{rel['reliability'].iloc[0]:.2f}"
    assert (f"split-half reliability {probes['sickprobe']} and {probes['sickprobe-gemma']} in a probe run of each "
            "family") in readme
    saved = len(list((STUDY / "runs").glob("*.dvc")))
    planned = len(yaml.safe_load((STUDY / "params.yaml").read_text())["runs"])
    if saved < planned:
        assert "Until all its runs are in, its tables settle nothing" in readme
