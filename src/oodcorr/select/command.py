"""`oodcorr select-items`: read a pilot's stored per-item predictions (every run, every checkpoint), choose per
testset the items whose ID-residual trajectory moves with the rest of the testset's (oodcorr.select.choose), and
write the choice to data/items.json, which the prepare stage reads (a dvc.yaml dependency), so a study scores
only those items."""

from __future__ import annotations

from pathlib import Path

import click
import numpy as np

from oodcorr.core.errors import UserError
from oodcorr.select import ITEMS_FILE
from oodcorr.select.choose import CRITERIA, DEFAULT_CRITERION, choose, pooled_scores

SPLITS = 200  # split-half draws of the in-sample reliabilities the command prints


def pilot_metrics_files(paths) -> list[Path]:
    """metrics.jsonl of every run under each pilot: a project or saved study (runs/*/eval) or one run folder."""
    files = []
    for p in map(Path, paths):
        found = sorted(p.glob("runs/*/eval/metrics.jsonl")) or sorted(p.glob("eval/metrics.jsonl"))
        if not found:
            raise UserError(
                f"select-items --pilot {p}: no evaluated run (runs/<run>/eval/metrics.jsonl) there; give a project "
                "or saved study whose runs were scored (`dvc --cd studies pull -R -r studies NAME/runs` for a saved "
                "one)"
            )
        files += found
    return files


def _ids(eval_dir: Path, step: int, testset: str) -> np.ndarray:
    """The item ids of one scored testset, in the order load_run_items returns its items (sorted as text)."""
    import pyarrow.parquet as pq

    ids = pq.read_table(eval_dir / "predictions" / f"step-{step}" / f"{testset}.parquet", columns=["id"])
    ids = ids.column("id").to_numpy(zero_copy_only=False).astype(str)
    return ids[np.argsort(ids, kind="stable")]


def pilot_items(paths, metric: str) -> dict:
    """{testset: [(run, ids, items (checkpoints, items), x (checkpoints,), gold (items,))]} of every OOD testset the
    pilot runs scored; x is the run's ID series of `metric`."""
    from oodcorr.records.predictions import GOLD, load_run_items
    from oodcorr.records.run_tables import build_runs, load_metrics
    from oodcorr.stats.aggregate import values
    from oodcorr.stats.metrics import METRICS

    files = pilot_metrics_files(paths)
    runs = build_runs(load_metrics([str(f) for f in files]))
    out: dict = {}
    for run, d in runs.items():
        eval_dir = next(f.parent for f in files if f.parent.parent.name == run)
        id_name = d["meta"]["id_testset"]
        names = [id_name, *d["Y"].columns]
        got = load_run_items(run, eval_dir, d["steps"], names, (metric,))
        x = values(METRICS[metric].aggregate, got[metric][id_name], got[GOLD][id_name])
        for name in d["Y"].columns:
            ids = _ids(eval_dir, int(d["steps"][0]), name)
            out.setdefault(name, []).append((run, ids, got[metric][name], x, got[GOLD][name]))
    return out


def select(pilot: dict, per_testset: int, criterion: str, testsets=None) -> dict:
    """{testset: entry} of data/items.json: the chosen ids and how they were chosen. A testset's pool is the items
    the first pilot run scoring it scored; runs that scored another set of its items are left out of it."""
    out = {}
    for name in testsets or sorted(pilot):
        if name not in pilot:
            raise UserError(
                f"select-items --testsets {name}: no pilot run scored it; pilot testsets: {', '.join(sorted(pilot))}"
            )
        first = pilot[name][0][1]
        used = [r for r in pilot[name] if len(r[1]) == len(first) and (r[1] == first).all()]
        scores = pooled_scores([(items, x, gold) for _, _, items, x, gold in used], criterion)
        gold = used[0][4]
        idx = choose(scores, gold, per_testset)
        out[name] = {
            "ids": [str(i) for i in first[idx]],
            "kept": len(idx),
            "pool": len(first),
            "pilot_runs": [r[0] for r in used],
            "in_sample_reliability": _reliabilities(used, idx),
        }
    return out


def _reliabilities(used, idx) -> dict:
    """{run: [all items, chosen items]}: split-half reliability on the pilot runs the choice was made on (in-sample:
    new runs read lower, bench/studies/item_selection.py measures by how much)."""
    from oodcorr.stats.noise import reliability

    out = {}
    for run, _, items, x, gold in used:
        rel = []
        for sel in (np.arange(items.shape[1]), idx):
            r, _ = reliability(
                items[:, sel], x, "linear", SPLITS, np.random.default_rng(0), gold=gold[sel], aggregate="balanced"
            )
            rel.append(None if not np.isfinite(r) else round(float(r), 3))
        out[run] = rel
    return out


@click.command("select-items")
@click.option(
    "--pilot",
    "pilots",
    multiple=True,
    required=True,
    type=click.Path(file_okay=False),
    help="a project or saved study whose runs were scored (repeatable): every run, every checkpoint",
)
@click.option("--per-testset", type=click.IntRange(min=8), required=True, help="items kept per testset")
@click.option(
    "--out",
    default=ITEMS_FILE,
    show_default=True,
    type=click.Path(dir_okay=False),
    help="the choice (prepare reads data/items.json of the project)",
)
@click.option(
    "--testsets",
    default=None,
    help="comma-separated testsets to choose for (default: every OOD testset "
    "the pilot scored; the ID testset is never chosen from)",
)
@click.option(
    "--criterion",
    type=click.Choice(CRITERIA),
    default=DEFAULT_CRITERION,
    show_default=True,
    help="coherence: covariance of the item's ID-residual with the rest of the testset's",
)
@click.option("--metric", default="balanced_margin", show_default=True, help="per-item score the choice reads")
def select_items_cmd(pilots, per_testset, out, testsets, criterion, metric):
    """Choose per testset the items that tell a run's checkpoints apart, from a pilot's stored predictions."""
    from oodcorr.core import io
    from oodcorr.stats.metrics import check_metric

    check_metric(metric, "select-items --metric")
    if criterion == "random":
        raise UserError("select-items --criterion random: a random subset needs no pilot; set data.max_examples")
    names = [n.strip() for n in testsets.split(",") if n.strip()] if testsets else None
    chosen = select(pilot_items(pilots, metric), per_testset, criterion, names)
    doc = {
        "chosen_by": "oodcorr select-items",
        "pilot": [str(p) for p in pilots],
        "criterion": criterion,
        "metric": metric,
        "per_testset": per_testset,
        "testsets": chosen,
    }
    io.write_json(Path(out), doc)
    for name, e in chosen.items():
        rel = "; ".join(f"{run}: {a} -> {b}" for run, (a, b) in e["in_sample_reliability"].items())
        click.echo(f"{name:<16} {e['kept']:>4} of {e['pool']} items  (in-sample reliability, all -> chosen: {rel})")
    click.echo(f"wrote {out}")
