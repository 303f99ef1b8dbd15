"""The evaluate stage's per-example predictions, read back: runs/<run>/eval/predictions/step-<N>/<testset>.parquet
as checkpoints x items score matrices per metric (the analysis' noise pass and the planner's pilot read them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from oodcorr.aggregate import gold_entailment
from oodcorr.errors import UserError
from oodcorr.metrics import METRICS, item_scores
from oodcorr.rundir import PREDICTIONS


def _base(name: str) -> tuple[str, str | None]:
    """'hans[lexical_overlap]' -> ('hans', 'lexical_overlap'); 'hans' -> ('hans', None)."""
    if name.endswith("]") and "[" in name:
        base, sl = name[:-1].split("[", 1)
        return base, sl
    return name, None


COLUMNS = ["id", "label", "prediction", "logp_entailment", "logp_non_entailment", "slice"]


def _read_predictions(path: Path) -> dict:
    """One parquet file as {column: numpy array}, rows sorted by id (pyarrow only: no pandas per file)."""
    import pyarrow.parquet as pq

    t = pq.read_table(path, use_threads=False)
    missing = [c for c in COLUMNS if c not in t.column_names]
    if missing:
        raise KeyError(missing[0])
    cols = {c: t.column(c).to_numpy(zero_copy_only=False) for c in COLUMNS}
    order = np.argsort(cols["id"].astype(str), kind="stable")
    return {c: v[order] for c, v in cols.items()}


GOLD = "_gold"  # load_run_items' key of {testset: (items,) bool gold-entailment labels}


def load_run_items(run: str, eval_dir: Path, steps, testsets, metrics=METRICS) -> dict:
    """{metric: {testset: (checkpoints x items) float array}, GOLD: {testset: (items,) bool}} from the stored
    predictions of one run.

    Items are aligned by `id` across checkpoints; a missing file or a different item set at some step is a
    UserError naming the run, the file and the command that writes predictions."""
    pred_dir = Path(eval_dir) / "predictions"
    hint = f"run `oodcorr evaluate --run {run}` to write them"
    if not pred_dir.is_dir():
        raise UserError(f"run {run!r}: no per-example predictions ({pred_dir} missing); {hint} "
                        "(or set analyze.noise: false)")
    out = {m: {} for m in metrics}
    out[GOLD] = {}
    cache = {}
    for name in testsets:
        base, sl = _base(name)
        mats = {m: [] for m in metrics}
        ids0 = None
        for step in steps:
            path = pred_dir / f"step-{int(step)}" / f"{base}.parquet"
            if path not in cache:
                if not path.is_file():
                    raise UserError(f"run {run!r}: predictions missing: {path}; {hint}")
                try:
                    cache[path] = _read_predictions(path)
                except KeyError as e:
                    raise UserError(f"run {run!r}: {path} has no column {e.args[0]} (written by an older version); "
                                    f"{hint}") from None
                except Exception as e:  # pyarrow raises several types for bad files/missing columns
                    raise UserError(f"run {run!r}: cannot read {path}: {str(e).splitlines()[0]}") from None
            cols = cache[path]
            if sl is not None:
                keep = cols["slice"].astype(str) == sl
                cols = {c: v[keep] for c, v in cols.items()}
            ids = cols["id"]
            if ids0 is None:
                ids0 = ids
            elif len(ids) != len(ids0) or (ids != ids0).any():
                raise UserError(f"run {run!r}: {path} holds different examples than step {int(steps[0])} "
                                f"of {name}; {hint}")
            for m in metrics:
                mats[m].append(item_scores(cols, m))
            out[GOLD][name] = gold_entailment(cols)
        for m in metrics:
            out[m][name] = np.vstack(mats[m]) if mats[m] else np.zeros((0, 0))
    return out


def predictions_dir(data: dict) -> Path:
    """The predictions folder of one loaded run (run_tables.build_runs' entry)."""
    return Path(data["sources"][0]).parent / PREDICTIONS


def load_items(runs: dict) -> dict:
    """{run: {metric: {testset: (checkpoints x items)}, GOLD: {testset: (items,) bool}}} for every metric in
    METRICS, from the stored predictions."""
    items = {}
    for run, d in runs.items():
        names = [d["meta"]["id_testset"], *d["Y"].columns]
        items[run] = load_run_items(run, predictions_dir(d).parent, d["steps"], names, METRICS)
    return items
