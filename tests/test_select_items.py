"""`oodcorr select-items` and the prepare stage reading its choice (data/items.json).

The pilot is written in the evaluate stage's own formats (metrics.jsonl, predictions/step-<N>/<testset>.parquet)
with planted items: a few whose log-odds follow a common trajectory that ID progress does not explain (the signal
a study correlates), many that move as much but each on its own (noise), and, in the answer-bias testset, items
whose margin swings with the share of "Yes" answers (entailment items up, non-entailment items down by the same
amount: a balanced metric cancels it). The criterion must keep the planted signal items, and the raw-variance
criterion must be shown to pick the bias and noise items instead (what the issue warns of)."""

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from oodcorr.cli import cli
from oodcorr.core.errors import UserError
from oodcorr.data.prepare import prepare
from oodcorr.select.choose import choose, item_scores, quotas, random_subset

NOISE = list(range(7, 120, 10))  # non-entailment items whose scores jump around on their own
STEPS = list(range(0, 68, 4))  # 17 checkpoints, as a study's
N_ITEMS, SIGNAL = 120, list(range(0, 120, 5))  # 24 planted signal items, 12 of each gold class


def _trajectories(seed: int):
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, len(STEPS))
    x = t + 0.01 * rng.standard_normal(len(t))  # ID progress
    signal = np.sin(6 * t) * 2.0  # what the testset's residual trajectory carries beyond ID
    bias = np.cos(9 * t) * 4.0  # an answer-bias swing
    return rng, t, x, signal, bias


def _pilot(root: Path, family: str, seed: int) -> None:
    run = f"{family}_mnli_real_1024_s{seed}"
    ev = root / "runs" / run / "eval"
    rng, t, x, signal, bias = _trajectories(seed)
    gold = np.array([i % 2 == 0 for i in range(N_ITEMS)])  # alternate labels: entailment on even ids
    rows = []
    for k, step in enumerate(STEPS):
        for name in ("mnli_real", "ood_a"):
            m = rng.standard_normal(N_ITEMS) * 0.5 + 3 * t[k]  # every item improves with ID progress
            if name == "mnli_real":
                m += 10 * x[k]
            else:
                m[SIGNAL] += np.where(gold[SIGNAL], 1, -1) * signal[k]  # moves toward gold with the signal
                m[NOISE] += 2 * rng.standard_normal(len(NOISE))  # loud items: more spread than the signal, no coherence
                m[gold] += bias[k]  # the answer bias: every entailment item up ...
                m[~gold] += bias[k]  # ... and (log-odds, not margin) every non-entailment item too
            margin = np.where(gold, m, -m)  # m is the log-odds of " Yes"
            d = ev / "predictions" / f"step-{step}"
            d.mkdir(parents=True, exist_ok=True)
            labels = np.where(gold, "entailment", "non_entailment")
            pq.write_table(
                pa.table(
                    {
                        "id": [f"i{j:03d}" for j in range(N_ITEMS)],
                        "label": labels,
                        "prediction": np.where(m > 0, "entailment", "non_entailment"),
                        "logp_entailment": m / 2,
                        "logp_non_entailment": -m / 2,
                        "slice": [None] * N_ITEMS,
                    }
                ),
                d / f"{name}.parquet",
            )
            rows.append(
                {
                    "run": run,
                    "model": family,
                    "train_set": "mnli_real_train",
                    "id_testset": "mnli_real",
                    "shots": 1024,
                    "seed": seed,
                    "data_seed": seed,
                    "step": step,
                    "testset": name,
                    "slice": None,
                    "accuracy": float((margin > 0).mean()),
                    "n": N_ITEMS,
                }
            )
    (ev / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture
def pilot(tmp_path):
    root = tmp_path / "pilot"
    _pilot(root, "fam-a", 0)
    _pilot(root, "fam-b", 1)
    return root


def test_select_items_keeps_the_items_that_carry_the_signal(pilot, tmp_path):
    out = tmp_path / "items.json"
    res = CliRunner().invoke(cli, ["select-items", "--pilot", str(pilot), "--per-testset", "24", "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    entry = doc["testsets"]["ood_a"]
    assert set(doc["testsets"]) == {"ood_a"}  # never the ID testset
    assert entry["pool"] == N_ITEMS and entry["kept"] == 24 and len(entry["pilot_runs"]) == 2
    assert sorted(entry["ids"]) == [f"i{j:03d}" for j in SIGNAL]
    for all_items, chosen in entry["in_sample_reliability"].values():
        assert chosen > 0.9 and (all_items is None or chosen > all_items)
    assert "ood_a" in res.output and "24 of 120 items" in res.output


def test_raw_variance_picks_the_loud_items_instead(pilot):
    from oodcorr.select.command import pilot_items

    runs = pilot_items([pilot], "balanced_margin")["ood_a"]
    _, _, items, x, gold = runs[0]
    by_variance = set(choose(item_scores(items, x, gold, "variance"), gold, 24))
    by_coherence = set(choose(item_scores(items, x, gold, "coherence"), gold, 24))
    assert len(by_coherence & set(SIGNAL)) >= 22  # one run alone: nearly all of them
    assert len(by_variance & set(SIGNAL)) <= 12 and len(by_variance & set(NOISE)) >= 2  # misses half the signal


def test_quotas_keep_label_shares_and_random_is_seeded():
    gold = np.array([True] * 30 + [False] * 70)
    assert quotas(gold, 10) == {True: 3, False: 7}
    assert quotas(gold, 15) == {True: 5, False: 10} or quotas(gold, 15) == {True: 4, False: 11}
    a = random_subset(gold, 20, np.random.default_rng(3))
    assert len(a) == 20 and gold[a].sum() == 6 and (a == random_subset(gold, 20, np.random.default_rng(3))).all()


def _project(tmp_path: Path, items: dict | None) -> dict:
    root = tmp_path / "proj"
    (root / "data").mkdir(parents=True)
    rows = [
        {
            "id": f"r{j}",
            "premise": f"p {j}",
            "hypothesis": f"h {j}",
            "label": "entailment" if j % 3 else "contradiction",
        }
        for j in range(60)
    ]
    (root / "data" / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if items is not None:
        (root / "data" / "items.json").write_text(json.dumps(items))
    return {
        "_root": str(root),
        "_path": None,
        "data": {
            "max_examples": 20,
            "seed": 0,
            "testsets": {
                "t": {
                    "path": "data/t.jsonl",
                    "premise": "premise",
                    "hypothesis": "hypothesis",
                    "label": "label",
                    "id": "id",
                    "label_map": {"entailment": "entailment", "contradiction": "non_entailment"},
                },
                "u": {
                    "path": "data/t.jsonl",
                    "premise": "premise",
                    "hypothesis": "hypothesis",
                    "label": "label",
                    "id": "id",
                    "label_map": {"entailment": "entailment", "contradiction": "non_entailment"},
                },
            },
        },
    }


def test_prepare_scores_exactly_the_chosen_items(tmp_path):
    params = _project(tmp_path, {"testsets": {"t": {"ids": ["r5", "r1", "r30"]}}})
    manifest = prepare(params, tmp_path / "out", ["t", "u"])
    got = [json.loads(x)["id"] for x in (tmp_path / "out" / "t.jsonl").read_text().splitlines()]
    assert got == ["r1", "r5", "r30"]  # the file's row order, only the chosen ones, max_examples not applied
    assert "3 of 60 items chosen from a pilot (data/items.json)" in manifest["testsets"]["t"]["description"]
    assert manifest["testsets"]["u"]["rows"] == 20  # a testset the file does not name: sampled as before


def test_no_items_file_and_an_empty_one_choose_nothing(tmp_path):
    for items in (None, {"testsets": {}}):
        params = _project(tmp_path / str(items is None), items)
        assert prepare(params, tmp_path / "o", ["t"])["testsets"]["t"]["rows"] == 20


@pytest.mark.parametrize(
    "items, message",
    [
        (
            {"testsets": {"t": {"ids": ["r1", "nope"]}}},
            r"testsets\.t: 1 chosen item\(s\) are not in the testset \(e\.g\. 'nope'\)",
        ),
        ({"testsets": {"t": {"ids": []}}}, r"testsets\.t\.ids: expected a non-empty list"),
        ({"testsets": {"t": {"ids": ["r1", "r1"]}}}, r"listed twice"),
        ({"testsets": ["t"]}, r"data/items\.json: testsets: expected a mapping"),
    ],
)
def test_a_bad_items_file_is_one_line_and_writes_nothing(tmp_path, items, message):
    params = _project(tmp_path, items)
    with pytest.raises(UserError, match=message):
        prepare(params, tmp_path / "out", ["t"])
    assert not (tmp_path / "out").exists()


def test_items_file_not_json_names_the_line(tmp_path):
    params = _project(tmp_path, None)
    (Path(params["_root"]) / "data" / "items.json").write_text('{\n  "testsets": {,\n}')
    with pytest.raises(UserError, match=r"data/items\.json:2: not JSON"):
        prepare(params, tmp_path / "out", ["t"])


def test_select_items_bad_pilot_is_one_line(tmp_path):
    res = CliRunner().invoke(
        cli, ["select-items", "--pilot", str(tmp_path), "--per-testset", "10", "--out", str(tmp_path / "x.json")]
    )
    assert res.exit_code == 2 and res.output.count("\n") == 1 and "no evaluated run" in res.output
    assert "Traceback" not in res.output and not (tmp_path / "x.json").exists()


def test_select_items_unknown_testset_is_one_line(pilot, tmp_path):
    out = tmp_path / "items.json"
    args = ["select-items", "--pilot", str(pilot), "--per-testset", "10", "--out", str(out), "--testsets", "nope"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 2 and "no pilot run scored it; pilot testsets: ood_a" in res.output
    assert not out.exists()


def test_prepare_says_which_testsets_are_chosen_subsets(tmp_path):
    from oodcorr.cli import cli

    params = _project(tmp_path, {"testsets": {"t": {"ids": ["r5", "r1", "r30"]}}})
    root = Path(params["_root"])
    params = {k: v for k, v in params.items() if not k.startswith("_")} | {"evaluate": {"testsets": ["t", "u"]}}
    (root / "params.yaml").write_text(json.dumps(params))
    res = CliRunner().invoke(cli, ["data", "prepare", "--params", str(root / "params.yaml")])
    assert res.exit_code == 0, res.output
    lines = {ln.split()[0]: ln for ln in res.output.splitlines() if ln.startswith(("t ", "u "))}
    assert "3 rows" in lines["t"] and lines["t"].endswith("[items chosen from a pilot: data/items.json]")
    assert "20 rows" in lines["u"] and "chosen" not in lines["u"]
