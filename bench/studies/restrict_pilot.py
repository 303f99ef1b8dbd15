"""A copy of a pilot restricted to the items data/items.json chose, so `oodcorr plan --pilot COPY` plans the study
that scores only those items (in-sample: the items were chosen on these very runs, so the copy overstates their
reliability on new runs; bench/studies/item_selection.py measures by how much).

  python bench/studies/restrict_pilot.py studies/pilot studies/breadth/items.json OUT

Each run's eval/predictions/step-*/<testset>.parquet of a chosen testset keeps the chosen rows only, and its
metrics.jsonl rows for that testset are recomputed from them (oodcorr.stats.metrics.table_metrics, as the evaluate
stage computes them); run.json and the other testsets are copied as they are."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

NEEDS_ARGS = "PILOT ITEMS OUT"  # bench/run.py runs it only with --only

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))


def restrict(pilot: Path, items: Path, out: Path) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from oodcorr.stats.metrics import table_metrics

    chosen = {k: set(v["ids"]) for k, v in json.loads(items.read_text())["testsets"].items()}
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(pilot / "runs", out / "runs", ignore=shutil.ignore_patterns("*.dvc"))
    for run in sorted(p for p in (out / "runs").iterdir() if p.is_dir()):
        metrics = {}
        for f in sorted((run / "eval" / "predictions").glob("step-*/*.parquet")):
            t = pq.read_table(f)
            if f.stem in chosen:
                t = t.filter(pc.is_in(t.column("id").cast(pa.string()), value_set=pa.array(sorted(chosen[f.stem]))))
                pq.write_table(t, f)
                cols = {c: t.column(c).to_numpy(zero_copy_only=False) for c in t.column_names}
                metrics[(int(f.parent.name.split("-")[1]), f.stem)] = {**table_metrics(cols), "n": t.num_rows}
        lines = []
        for ln in (run / "eval" / "metrics.jsonl").read_text().splitlines():
            row = json.loads(ln)
            key = (row["step"], row["testset"])
            if key in metrics and row.get("slice") is None:
                row.update({k: v for k, v in metrics[key].items() if k in row or k == "n"})
            lines.append(json.dumps(row))
        (run / "eval" / "metrics.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: python bench/studies/restrict_pilot.py PILOT ITEMS_JSON OUT")
    restrict(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
