"""The evaluate stage's per-example predictions, read back: runs/<run>/eval/predictions/step-<N>/<testset>.parquet
as checkpoints x items score matrices per metric (the analysis' noise pass and the planner's pilot read them)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from oodcorr.core.errors import UserError
from oodcorr.records.rundir import PREDICTIONS
from oodcorr.stats.aggregate import gold_entailment
from oodcorr.stats.metrics import METRICS, item_scores


def _base(name: str) -> tuple[str, str | None]:
    """'hans[lexical_overlap]' -> ('hans', 'lexical_overlap'); 'hans' -> ('hans', None)."""
    if name.endswith("]") and "[" in name:
        base, sl = name[:-1].split("[", 1)
        return base, sl
    return name, None


COLUMNS = ["id", "label", "prediction", "logp_entailment", "logp_non_entailment", "slice"]
TEXT, NUMBER = ("label", "prediction"), ("logp_entailment", "logp_non_entailment")
STEP_DIR = re.compile(r"step-(0|[1-9][0-9]*)")


# the predictions files' schema this reader knows: COLUMNS, no schema metadata. A later version that changes the
# files records its number under SCHEMA_KEY in the parquet schema metadata (absent: version 1), so this reader
# can tell a file it cannot read from a damaged one.
SCHEMA_VERSION = 1
SCHEMA_KEY = b"oodcorr.predictions_schema"
UPGRADE = "upgrade oodcorr (git pull, or pip install -U oodcorr) to the version that wrote it"


class BadPredictions(ValueError):
    """A predictions file that reads but breaks the evaluate stage's schema (the message names what)."""


class NewerPredictions(BadPredictions):
    """A predictions file of a newer schema than this reader's: upgrade, do not rescore."""


def _check_version(schema) -> None:
    """A file written by a newer oodcorr (a higher schema version, a column this reader does not know): what
    to upgrade, not a damaged file."""
    raw = (schema.metadata or {}).get(SCHEMA_KEY)
    if raw is not None:
        try:
            version = int(raw.decode())
        except (UnicodeDecodeError, ValueError):
            raise BadPredictions(f"schema version {raw[:20]!r} is not a number") from None
        if version > SCHEMA_VERSION:
            raise NewerPredictions(
                f"predictions schema version {version}, newer than this oodcorr reads ({SCHEMA_VERSION}); {UPGRADE}"
            )
    unknown = [c for c in schema.names if c not in COLUMNS]
    if unknown:
        raise NewerPredictions(
            f"column {unknown[0]!r} is not one this oodcorr knows ({', '.join(COLUMNS)}): written by a newer "
            f"version? {UPGRADE}"
        )


def _check_table(t) -> None:
    """The evaluate stage's schema: its columns, text labels, numeric finite log-probs, one row per item id."""
    import pyarrow as pa
    import pyarrow.compute as pc

    _check_version(t.schema)
    missing = [c for c in COLUMNS if c not in t.column_names]
    if missing:
        raise KeyError(missing[0])
    for c in TEXT:
        if not (pa.types.is_string(t.schema.field(c).type) or pa.types.is_large_string(t.schema.field(c).type)):
            raise BadPredictions(f"column {c} holds {t.schema.field(c).type}, not text")
    for c in NUMBER:
        kind = t.schema.field(c).type
        if not (pa.types.is_floating(kind) or pa.types.is_integer(kind)):
            raise BadPredictions(f"column {c} holds {kind}, not numbers (log-probabilities)")
        bad = (
            t.num_rows - pc.sum(pc.is_finite(t.column(c).cast(pa.float64())).cast(pa.int64())).as_py()
            if t.num_rows
            else 0
        )
        if bad:
            raise BadPredictions(f"column {c} has {bad} value(s) that are not finite numbers (NaN, inf or empty)")
    ids = t.column("id").cast(pa.string())
    if ids.null_count:
        raise BadPredictions(f"column id has {ids.null_count} empty value(s)")
    if pc.count_distinct(ids).as_py() != t.num_rows:
        counts = pc.value_counts(ids)
        dup = next(v["values"] for v in counts.to_pylist() if v["counts"] > 1)
        raise BadPredictions(f"id {dup!r} appears more than once; one row per item")


def _read_predictions(path: Path) -> dict:
    """One parquet file as {column: numpy array}, rows sorted by id (pyarrow only: no pandas per file), after
    _check_table."""
    import pyarrow.parquet as pq

    t = pq.read_table(path, use_threads=False)
    _check_table(t)
    cols = {c: t.column(c).to_numpy(zero_copy_only=False) for c in COLUMNS}
    order = np.argsort(cols["id"].astype(str), kind="stable")
    return {c: v[order] for c, v in cols.items()}


def check_step_dirs(run: str, pred_dir: Path, hint: str) -> None:
    """Every entry of predictions/ is a step-<N> folder (a link, a file or another name is named, not skipped)."""
    for entry in sorted(pred_dir.iterdir()):
        if entry.is_symlink() or not entry.is_dir() or not STEP_DIR.fullmatch(entry.name):
            raise UserError(
                f"run {run!r}: {entry}: not a step-<N> folder (predictions/ holds one step-<checkpoint "
                f"step> folder per checkpoint, nothing else); remove it or {hint}"
            )


GOLD = "_gold"  # load_run_items' key of {testset: (items,) bool gold-entailment labels}


def load_run_items(run: str, eval_dir: Path, steps, testsets, metrics=METRICS) -> dict:
    """{metric: {testset: (checkpoints x items) float array}, GOLD: {testset: (items,) bool}} from the stored
    predictions of one run.

    Items are aligned by `id` across checkpoints; a missing file or a different item set at some step is a
    UserError naming the run, the file and the command that writes predictions."""
    pred_dir = Path(eval_dir) / "predictions"
    hint = f"run `oodcorr evaluate --run {run}` to write them"
    if not pred_dir.is_dir():
        raise UserError(
            f"run {run!r}: no per-example predictions ({pred_dir} missing); {hint} (or set analyze.noise: false)"
        )
    check_step_dirs(run, pred_dir, hint)
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
                    raise UserError(
                        f"run {run!r}: {path} has no column {e.args[0]} (written by an older version); {hint}"
                    ) from None
                except NewerPredictions as e:
                    raise UserError(f"run {run!r}: {path}: {e}") from None
                except BadPredictions as e:
                    raise UserError(f"run {run!r}: {path}: {e}; {hint}") from None
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
                raise UserError(
                    f"run {run!r}: {path} holds different examples than step {int(steps[0])} of {name}; {hint}"
                )
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
