"""Prediction files as the analysis reads them (oodcorr.records.predictions, the one reader): the evaluate
stage's schema, one row per item, finite log-probs, step-<N> folders only; anything else is one UserError naming
the file."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from oodcorr.core.errors import UserError
from oodcorr.records.predictions import load_run_items
from oodcorr.records.simulated_runs import write_predictions
from oodcorr.stats.simulate import irt_study

STEPS, OOD = [0, 10, 20], ["hans", "anli"]


@pytest.fixture
def eval_dir(tmp_path):
    st = irt_study(3, [30, 30], np.array([[1, 0.5], [0.5, 1]]), tau=0.04, n_id_items=40, rng=np.random.default_rng(0))
    write_predictions(tmp_path / "eval", st, STEPS, "mnli", OOD)
    return tmp_path / "eval"


def load(eval_dir):
    return load_run_items("a-s0", eval_dir, STEPS, ["mnli", *OOD])


def edit(path, fn):
    pq.write_table(fn(pq.read_table(path)), path)


def test_good_files_load(eval_dir):
    items = load(eval_dir)
    assert items["balanced_margin"]["hans"].shape == (3, 30)


def test_duplicated_item_rows_are_refused(eval_dir):
    f = eval_dir / "predictions" / "step-10" / "hans.parquet"
    edit(f, lambda t: pa.concat_tables([t, t.slice(0, 1)]))
    with pytest.raises(UserError, match=r"step-10/hans\.parquet: id 'hans-00000' appears more than once"):
        load(eval_dir)


def test_nan_log_probs_are_refused_before_any_statistics(eval_dir):
    f = eval_dir / "predictions" / "step-0" / "anli.parquet"

    def nan(t):
        lp = t.column("logp_non_entailment").to_numpy().copy()
        lp[3] = np.nan
        return t.set_column(t.column_names.index("logp_non_entailment"), "logp_non_entailment", pa.array(lp))

    edit(f, nan)
    with pytest.raises(
        UserError,
        match=r"step-0/anli\.parquet: column logp_non_entailment has 1 value\(s\) that "
        r"are not finite",
    ):
        load(eval_dir)


def test_log_probs_stored_as_text_are_refused(eval_dir):
    f = eval_dir / "predictions" / "step-20" / "mnli.parquet"
    edit(
        f,
        lambda t: t.set_column(
            t.column_names.index("logp_entailment"), "logp_entailment", t.column("logp_entailment").cast(pa.string())
        ),
    )
    with pytest.raises(UserError, match=r"step-20/mnli\.parquet: column logp_entailment holds string, not numbers"):
        load(eval_dir)


@pytest.mark.parametrize("name", ["step-abc", "step-01", "notes.txt"])
def test_a_folder_that_is_not_a_step_is_named(eval_dir, name):
    (eval_dir / "predictions" / name).mkdir()
    with pytest.raises(UserError, match=rf"predictions/{name}: not a step-<N> folder"):
        load(eval_dir)


def test_a_file_of_a_newer_schema_version_says_what_to_upgrade(eval_dir):
    f = eval_dir / "predictions" / "step-20" / "mnli.parquet"
    edit(f, lambda t: t.replace_schema_metadata({"oodcorr.predictions_schema": "2"}))
    with pytest.raises(UserError) as e:
        load(eval_dir)
    msg = str(e.value)
    assert "step-20/mnli.parquet" in msg and "schema version 2" in msg and "upgrade oodcorr" in msg
    assert "oodcorr evaluate" not in msg  # a newer file is read by a newer oodcorr, not rescored
    edit(f, lambda t: t.replace_schema_metadata({"oodcorr.predictions_schema": "1"}))  # this version: read
    assert load(eval_dir)["accuracy"]["mnli"].shape[0] == 3


def test_a_column_this_reader_does_not_know_says_what_to_upgrade(eval_dir):
    f = eval_dir / "predictions" / "step-0" / "hans.parquet"
    edit(f, lambda t: t.append_column("logp_neutral", pa.array(np.zeros(t.num_rows))))
    with pytest.raises(UserError, match=r"step-0/hans\.parquet: column 'logp_neutral' is not one .*upgrade oodcorr"):
        load(eval_dir)
