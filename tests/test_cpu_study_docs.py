"""The committed cpu study (docs/cpu-study): its tables regenerate from its CSVs, its params are the `cpu`
preset's, and the numbers docs/cpu-study.md states are the ones in those CSVs."""

import json
from pathlib import Path

import pandas as pd
import yaml

from study_helpers import load_script

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "cpu-study"


def test_tables_regenerate_from_the_committed_csvs():
    assert load_script(REPO / "scripts" / "export_study.py").tables(DOC) == (DOC / "TABLES.md").read_text()


def test_params_are_the_cpu_preset():
    from oodcorr.study import load_preset

    assert yaml.safe_load((DOC / "params.yaml").read_text()) == load_preset("cpu")


def test_docs_state_the_committed_numbers():
    readme = (REPO / "docs" / "cpu-study.md").read_text().split("## What it shows")[1]
    pooled = pd.read_csv(DOC / "results" / "pooled_seeds.csv")
    lin = pooled[pooled["method"] == "linear"].set_index(["model", "testset_a", "testset_b"])
    g = lin.loc[("gemma3-270m", "paws_qqp_real", "scitail_real")]
    s = lin.loc[("smollm2-135m", "paws_qqp_real", "scitail_real")]
    assert f"Gemma r = {g['r']:+.2f} [{g['ci_low']:+.2f}, {g['ci_high']:+.2f}], ci2 [{g['ci2_low']:+.2f}, " \
           f"{g['ci2_high']:+.2f}]" in readme
    assert f"SmolLM2 r = {s['r']:+.2f}".replace("-", "−") in readme.replace("-", "−")
    cons = pd.read_csv(DOC / "results" / "consistency.csv")
    verdicts = cons[cons["method"] == "linear"]["verdict"].value_counts().to_dict()
    assert verdicts == {"unreliable": 20, "insufficient_evidence": 1}  # "20 of the 21 OOD pairs are unreliable"
    assert "20 of the 21 OOD pairs" in readme
    part = pd.read_csv(DOC / "results" / "partial_correlations.csv")
    lin_runs = part[part["method"] == "linear"]
    assert f"{int(lin_runs['distinguishable'].sum())} of {len(lin_runs)} pairs are distinguishable" in readme
    ids = [json.loads((DOC / "runs" / r / "eval" / "summary.json").read_text())["id_accuracy"]
           for r in yaml.safe_load((DOC / "params.yaml").read_text())["runs"]]
    assert f"{min(ids):.3f}–{max(ids):.3f}" in readme
    bias = pd.read_csv(DOC / "answer_bias.csv")
    paws = bias[bias["testset"] == "paws_qqp_real"]["r_accuracy_vs_answers"]
    assert len(paws) == 4 and paws.max() <= -0.95  # "r = −0.95 to −1.00 for PAWS-QQP in all four runs"



def test_sizing_table_is_the_plans_power_mode():
    """The 'what it would take' table: checkpoints per run for 80 % power and this study's power, from
    oodcorr.analysis.power (the code `oodcorr plan --detect-r` runs), and the preset's 9 checkpoints."""
    import re

    from oodcorr.analysis.power import checkpoints_for_power, power
    from oodcorr.study import load_preset

    text = (REPO / "docs" / "cpu-study.md").read_text().split("## What it would take to settle a sign")[1]
    text = text.split("\n## ")[0]
    rows = re.findall(r"^\| (0\.\d)[^|]*\| (\d+) \| (0\.\d\d) \|", text, re.M)
    assert len(rows) == 2
    preset = load_preset("cpu")["train"]
    n_now = len(range(0, preset["max_steps"], preset["checkpoints"]["every"])) + 1  # 0, every, ..., final
    assert n_now == 9
    rel = 0.7 ** 0.5
    for phi, need, now in rows:
        assert checkpoints_for_power(0.5, rel, 0.8, float(phi), 2) == int(need)
        assert round(power(n_now, 0.5, rel, float(phi), 2), 2) == float(now)
