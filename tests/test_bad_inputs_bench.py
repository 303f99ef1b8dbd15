"""bench/bad_inputs/bad_inputs.py's cases as tests: the cases marked `fast` (one per finding of the fault campaign) run
against one finished tiny project; each must end in one clean error line (or the correct behaviour) with
nothing else changed. The whole bench (~300 cases): `python bench/bad_inputs/bad_inputs.py`."""

from __future__ import annotations

import pytest

from study_helpers import REPO, load_script

pytestmark = pytest.mark.slow
bench = load_script(REPO / "bench" / "bad_inputs" / "bad_inputs.py")
FAST = [c for c in bench.CASES if c.fast]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return bench.build_base(tmp_path_factory.mktemp("bad-inputs") / "base")


def test_the_bench_has_enough_cases_and_one_per_finding():
    assert len(bench.CASES) >= 150 and len({c.id for c in bench.CASES}) == len(bench.CASES)
    assert len(FAST) >= 15


@pytest.mark.parametrize("case", FAST, ids=[c.id for c in FAST])
def test_case(base, tmp_path, case):
    r = bench.run_case(case, base, tmp_path / "work")
    assert r["outcome"] == ("clean_error" if case.expect == "error" else "correct"), r
    assert not r["data_changed"], r
