"""dvc.yaml's code dependencies are the files each stage imports, no more and no less (scripts/stage_deps.py
reads them from the imports; `python scripts/stage_deps.py --write` rewrites dvc.yaml)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("stage_deps", ROOT / "scripts" / "stage_deps.py")
stage_deps = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stage_deps)


@pytest.mark.parametrize("stage", list(stage_deps.STAGES))
def test_each_stage_depends_on_exactly_the_source_files_it_imports(stage):
    listed = stage_deps.listed_in_dvc_yaml((ROOT / "dvc.yaml").read_text(), stage)
    want = stage_deps.deps_of(stage_deps.STAGES[stage])
    assert listed == want, (
        f"dvc.yaml stage {stage}: lists {sorted(set(listed) - set(want))} it does not import, "
        f"misses {sorted(set(want) - set(listed))}; run `python scripts/stage_deps.py --write`"
    )


def test_prepare_depends_on_the_label_maps_and_analyze_not_on_the_planner():
    prepare = stage_deps.deps_of(stage_deps.STAGES["prepare"])
    assert "src/oodcorr/settings/registry.py" in prepare
    analyze = stage_deps.deps_of(stage_deps.STAGES["analyze"])
    assert "src/oodcorr/analysis" in analyze and any(p.startswith("src/oodcorr/stats") for p in analyze)
    assert not any(p.startswith("src/oodcorr/planner") for p in analyze)


def test_the_reader_sees_a_new_lazy_import(tmp_path, monkeypatch):
    """A module that the stage reaches only through a lazy import inside a function still counts."""
    before = stage_deps.closure(stage_deps.STAGES["prepare"])
    assert "oodcorr.stats.simulate" not in before
    real = stage_deps.imports_of
    monkeypatch.setattr(
        stage_deps,
        "imports_of",
        lambda m: real(m) | ({"oodcorr.stats.simulate"} if m == "oodcorr.data.stage" else set()),
    )
    assert "src/oodcorr/stats/simulate.py" in stage_deps.deps_of(stage_deps.STAGES["prepare"])
