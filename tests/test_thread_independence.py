"""The evaluate stage's aggregates do not depend on the thread count: metrics.jsonl's rows are computed from the
stored per-item predictions alone, so the same predictions give the same bytes under one or two torch threads
and one or two BLAS threads (what `auto` picks on an idle 2-core machine), and a fresh clone's `dvc repro` with
the default threads leaves the committed outputs as they are (the whole pipeline: test_faults_dvc.py and
test_quickstart.py)."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from oodcorr.evaluate.outputs import metric_rows
from oodcorr.records.simulated_runs import write_predictions
from oodcorr.stats.simulate import irt_study

STEPS, OOD = [0, 10, 20, 30], ["hans", "anli", "wnli"]


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """Per (step, testset) predictions as the evaluate stage reads them from its cache; 2,000 items per testset,
    and hans with two slices, so the sums are long enough for a threaded reduction to split them."""
    rng = np.random.default_rng(3)
    corr = np.array([[1, 0.5, 0.2], [0.5, 1, 0.3], [0.2, 0.3, 1]])
    st = irt_study(len(STEPS), [2000, 2000, 2000], corr, tau=0.04, n_id_items=2000, rng=rng)
    d = tmp_path_factory.mktemp("eval")
    write_predictions(d, st, STEPS, "mnli", OOD)
    out = {}
    for step in STEPS:
        for name in ["mnli", *OOD]:
            t = pq.read_table(d / "predictions" / f"step-{step}" / f"{name}.parquet")
            if name == "hans":
                sl = ["lexical_overlap" if i % 3 else "subsequence" for i in range(t.num_rows)]
                t = t.set_column(t.column_names.index("slice"), "slice", pa.array(sl))
            out[(step, name)] = t
    return out


def _rows_under(tables, n: int) -> str:
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(n):
            return json.dumps(metric_rows({"run": "r"}, tables))
    finally:
        torch.set_num_threads(before)


def test_the_aggregates_are_the_same_bits_under_one_and_two_threads(tables):
    one, two = _rows_under(tables, 1), _rows_under(tables, 2)
    assert one == two
    rows = json.loads(one)
    assert len(rows) == len(STEPS) * (len(OOD) + 1 + 2)  # hans' two slices
    # and they are the numbers: accuracy and mean margin against an exactly rounded sum of the items
    for row in rows:
        t = tables[(row["step"], row["testset"])]
        col = t.to_pydict()
        keep = [i for i, s in enumerate(col["slice"]) if row["slice"] is None or s == row["slice"]]
        hits = [col["label"][i] == col["prediction"][i] for i in keep]
        assert row["accuracy"] == pytest.approx(math.fsum(hits) / len(keep), abs=1e-12)
        gold = np.asarray(col["label"])[keep] == "entailment"
        lpe = np.asarray(col["logp_entailment"], float)[keep]
        lpn = np.asarray(col["logp_non_entailment"], float)[keep]
        margin = np.where(gold, lpe - lpn, lpn - lpe)
        assert row["mean_margin"] == pytest.approx(math.fsum(margin) / len(keep), abs=1e-12)


def test_the_rows_do_not_depend_on_the_order_the_pairs_were_scored_in(tables):
    """The evaluate stage scores pairs in whatever order its batches finish; the rows come out sorted."""
    shuffled = dict(reversed(list(tables.items())))
    assert json.dumps(metric_rows({"run": "r"}, shuffled)) == json.dumps(metric_rows({"run": "r"}, tables))
