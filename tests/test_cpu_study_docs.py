"""The committed cpu study (studies/cpu): its tables regenerate from its CSVs, its params are the `cpu`
preset's, and the numbers docs/cpu-study.md states are the ones in those CSVs."""

import json
from pathlib import Path

import pandas as pd
import yaml

from study_helpers import load_script

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "studies" / "cpu"


def test_tables_regenerate_from_the_committed_csvs():
    assert load_script(REPO / "scripts" / "export_study.py").tables(DOC) == (DOC / "TABLES.md").read_text()


def test_params_are_the_cpu_preset():
    from oodcorr.study import load_preset

    assert yaml.safe_load((DOC / "params.yaml").read_text()) == load_preset("cpu")


def test_docs_state_the_committed_numbers():
    """Every count the page states (ID accuracy first -> last, pairs distinguishable per family under the
    bias-free metric and under accuracy, the verdicts under both, the answer_bias flags) is recomputed from the
    committed CSVs, and so is the table of distinguishable pairs that the page embeds (the README quotes its R²)."""
    export = load_script(REPO / "scripts" / "export_study.py")
    page = (REPO / "docs" / "cpu-study.md").read_text().split("## What it shows")[1]
    for fact in export.facts(DOC):
        assert fact in page, fact
    table = export.findings(DOC)
    assert table.count("\n") >= 3  # a header, a rule and at least one pair
    assert table in page
    ids = [
        json.loads((DOC / "runs" / r / "eval" / "summary.json").read_text())["id_accuracy"]
        for r in yaml.safe_load((DOC / "params.yaml").read_text())["runs"]
    ]
    assert f"{min(ids):.3f}–{max(ids):.3f}" in page
    # the answer-bias sentence: R² of the Gemma runs' PAWS-QQP and SciTail residuals on the "Yes" share, both
    # metrics (the analysis' results/answer_bias.csv), and accuracy vs "Yes" share on PAWS-QQP (answer_bias.csv)
    ab = pd.read_csv(DOC / "results" / "answer_bias.csv")
    g = ab[ab["run"].str.startswith("gemma") & ab["testset"].isin(["paws_qqp_real", "scitail_real"])]
    for col in ("r2_accuracy", "r2_bias_free"):
        assert (
            f"R² {g[col].min():.2f}–{g[col].max():.2f}" in page
            or f"against {g[col].min():.2f}–{g[col].max():.2f}" in page
        ), col
    assert f"R² {g['r2_accuracy'].min():.2f}–{g['r2_accuracy'].max():.2f}" in (REPO / "README.md").read_text()
    paws = pd.read_csv(DOC / "answer_bias.csv").query("testset == 'paws_qqp_real'")["r_accuracy_vs_answers"]
    assert len(paws) == 4 and f"r = {paws.max():.2f} to {paws.min():.2f}".replace("-", "−") in page
    # the reliabilities the page quotes (median over seeds, Gemma / SmolLM2, balanced_margin)
    rel = pd.read_csv(DOC / "results" / "reliability.csv").query("method == 'linear' and metric == 'balanced_margin'")
    med = rel.groupby(["testset", "model"])["reliability"].median()
    names = {
        "scitail_real": "SciTail",
        "snli_real": "SNLI",
        "rte_real": "RTE",
        "wnli_real": "WNLI",
        "hans_real": "HANS",
        "anli_r1_real": "ANLI",
        "paws_qqp_real": "PAWS-QQP",
    }
    flat = " ".join(page.split()).replace("−", "-")
    for ts, name in names.items():
        quoted = f"{name} {med[(ts, 'gemma3-270m')]:+.2f} / {med[(ts, 'smollm2-135m')]:+.2f}"
        assert quoted in flat, quoted


def test_findings_recompute_from_the_per_run_correlations():
    """The page's per-family counts are seed-pooled; check that pooling against the per-run CSV: a model whose
    pooled ci2 excludes 0 for a pair (under the bias-free metric or under accuracy) has that pair's r of the same
    sign in at least one of its runs. The committed study has such a pair (under accuracy), so this checks one."""
    pooled = pd.read_csv(DOC / "results" / "pooled_seeds.csv")
    part = pd.read_csv(DOC / "results" / "partial_correlations.csv")
    pooled, part = (d[d["method"] == "linear"] for d in (pooled, part))
    checked = 0
    for suf in ("", "_accuracy"):
        for _, row in pooled.iterrows():
            if row["ci2_low" + suf] > 0 or row["ci2_high" + suf] < 0:
                runs = part[
                    (part["model"] == row["model"])
                    & (part["testset_a"] == row["testset_a"])
                    & (part["testset_b"] == row["testset_b"])
                ]
                assert (runs["r" + suf] * row["r" + suf] > 0).any(), (row["model"], row["testset_a"], suf)
                checked += 1
    assert checked >= 1


def test_sizing_table_is_the_plans_power_mode():
    """The 'what it would take' table: checkpoints per run for 80 % power and this study's power, from
    bench/stats/superseded.py (the AR(1) approximation kept for comparison), and the preset's 9 checkpoints."""
    import re

    superseded = load_script(REPO / "bench" / "stats" / "superseded.py")
    checkpoints_for_power, power = superseded.checkpoints_for_power, superseded.power
    from oodcorr.study import load_preset

    text = (REPO / "docs" / "cpu-study.md").read_text().split("## What it would take to settle a sign")[1]
    text = text.split("\n## ")[0]
    rows = re.findall(r"^\| (0\.\d)[^|]*\| (\d+) \| (0\.\d\d) \|", text, re.M)
    assert len(rows) == 2
    preset = load_preset("cpu")["train"]
    n_now = len(range(0, preset["max_steps"], preset["checkpoints"]["every"])) + 1  # 0, every, ..., final
    assert n_now == 9
    rel = 0.7**0.5
    for phi, need, now in rows:
        assert checkpoints_for_power(0.5, rel, 0.8, float(phi), 2) == int(need)
        assert round(power(n_now, 0.5, rel, float(phi), 2), 2) == float(now)
