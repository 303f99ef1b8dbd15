"""bench/studies/costed_repro.py's accounting of a study's cost (studies/<name>/cost.json): runs costed in parallel
clones add up once, and work lost with a clone counts in what was spent but not in what the study cost."""

from __future__ import annotations

import json

from study_helpers import REPO, load_script

costed = load_script(REPO / "bench" / "studies" / "costed_repro.py")


def stage(h, rc=0):
    return {"cpu_hours": h, "wall_s": h * 3600, "rc": rc, "ended": "2026-12-07T00:00:00Z"}


def test_clones_merge_once_and_lost_work_counts_only_as_spent(tmp_path):
    study, a, b = (tmp_path / n for n in ("study.json", "a.json", "b.json"))
    costed.save(study, {"runs": {}, "prepare": {}, "pilot": {"cpu_hours": 4.5}})
    a.write_text(json.dumps({"runs": {"s1": {"train": stage(0.25), "score": stage(1.0)}}, "prepare": stage(0.001)}))
    b.write_text(
        json.dumps(
            {
                "runs": {
                    "g1": {"train": stage(0.3), "score (stopped attempts)": [stage(0.1, 255)], "score": stage(0.9)}
                },
                "superseded": {"g1 score, discarded": {"cpu_hours": 0.05}},
                "prepare": stage(0.001),
            }
        )
    )
    assert costed.merge(study, a) == 0 and costed.merge(study, b) == 0
    cost = json.loads(study.read_text())
    assert cost["runs_cpu_hours"] == 2.55 and cost["total_cpu_hours"] == round(4.5 + 2.55 + 0.05, 3)
    assert costed.merge(study, a) == 2  # a run costed twice is refused, the file unchanged
    assert json.loads(study.read_text()) == cost
    assert "spent_cpu_hours" not in cost  # nothing lost yet

    c = tmp_path / "c.json"  # a clone whose second run was cut by the session's end: its outputs never saved
    c.write_text(json.dumps({"runs": {"s2": {"train": stage(0.3), "score": stage(0.4, 255)}}, "prepare": {}}))
    assert costed.lose(study, c, ["s2"], "lost with its clone") == 0
    cost = json.loads(study.read_text())
    assert cost["total_cpu_hours"] == round(4.5 + 2.55 + 0.05, 3)  # the study as it was made
    assert cost["lost_cpu_hours"] == 0.7 and cost["spent_cpu_hours"] == round(cost["total_cpu_hours"] + 0.7, 3)
    assert "s2" not in cost["runs"] and costed.lose(study, c, ["s9"], "x") == 2
