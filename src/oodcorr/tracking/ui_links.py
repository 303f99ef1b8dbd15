"""Direct links into the MLflow UI for a study: its runs table and its chart view.

MLflow 3's UI opens an experiment on the GenAI overview unless told otherwise. The links name the runs tab,
the classic ("machine_learning") workflow and the compare mode (TABLE: the runs table; CHART: every metric
drawn per run, one chart per metric), so a fresh browser lands on the runs. The chart view is filtered to
the training runs (tag oodcorr.kind): the analysis run has no checkpoint metrics, yet it would take the first
line of every chart's legend."""

from __future__ import annotations

from urllib.parse import quote

from oodcorr.tracking.store import KIND_TAG, TRAIN_KIND

VIEWS = {"runs table": "TABLE", "chart view": "CHART"}
FILTERS = {"chart view": f"tags.`{KIND_TAG}` = '{TRAIN_KIND}'"}  # the UI's search box, filled in by the link


def experiment_id(uri: str, name: str) -> str | None:
    """The id of experiment `name` in a sqlite store, read with sqlite3 (no MLflow import); None if absent."""
    import sqlite3

    from oodcorr.tracking.store import sqlite_file

    db = sqlite_file(uri)
    if db is None or not db.exists():
        return None
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            row = con.execute(
                "SELECT experiment_id FROM experiments WHERE name = ? AND lifecycle_stage = 'active'", (name,)
            ).fetchone()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


def links(base: str, exp_id: str, table_view: str | None = None) -> dict[str, str]:
    """{view name: URL} for experiment `exp_id` on the UI at `base` (e.g. http://127.0.0.1:5000); `table_view`:
    the shared view (save_table_view) the runs table opens with."""
    shared = {"runs table": f"&viewStateShareKey={table_view}"} if table_view else {}
    return {
        view: f"{base}/#/experiments/{exp_id}/runs?workflowType=machine_learning&compareRunsMode={mode}"
        + (f"&searchFilter={quote(FILTERS[view], safe='')}" if view in FILTERS else "")
        + shared.get(view, "")
        for view, mode in VIEWS.items()
    }


# MLflow's UI opens a view saved as an experiment tag mlflow.sharedViewState.<key> when the URL names the key
# (viewStateShareKey); its columns are "<type>.`<name>`" (metrics, params, tags, attributes).
TABLE_VIEW = "oodcorr-table"
HEADLINE = ("acc/%", "methods.linear.mean_abs_r")  # each testset's accuracy (the last checkpoint's), the analysis'


def save_table_view(uri: str, exp_id: str) -> str | None:
    """Store the runs table's view in a sqlite store: the headline metric columns the runs hold (MLflow shows
    none by default) and the DVC experiment's name and changed params, newest first; its key, or None when the
    store cannot take it (e.g. read-only)."""
    import json
    import sqlite3

    from oodcorr.tracking.experiments import EXP_PARAMS_TAG, EXP_TAG
    from oodcorr.tracking.store import sqlite_file

    db = sqlite_file(uri)
    if db is None or not db.exists():
        return None
    try:
        with sqlite3.connect(db, timeout=5) as con:
            keys = [
                r[0]
                for r in con.execute(
                    "SELECT DISTINCT m.key FROM latest_metrics m JOIN runs r ON r.run_uuid = m.run_uuid WHERE "
                    "r.experiment_id = ? AND r.lifecycle_stage = 'active' AND (m.key LIKE ? OR m.key = ?) "
                    "ORDER BY m.key",
                    (int(exp_id), *HEADLINE),
                )
            ]
            view = {
                "selectedColumns": [f"tags.`{EXP_TAG}`", f"tags.`{EXP_PARAMS_TAG}`", *(f"metrics.`{k}`" for k in keys)],
                "orderByKey": "attributes.start_time",
                "orderByAsc": False,
            }
            con.execute(
                "INSERT OR REPLACE INTO experiment_tags (key, value, experiment_id) VALUES (?, ?, ?)",
                (f"mlflow.sharedViewState.{TABLE_VIEW}", json.dumps(view), int(exp_id)),
            )
    except (sqlite3.Error, ValueError):
        return None
    return TABLE_VIEW


def report_url(base: str, uri: str, exp_id: str) -> str | None:
    """The newest analysis run's report, opened in MLflow's Artifacts view (analysis_run.report_link), for a
    sqlite store; None when it holds no analysis run."""
    import sqlite3

    from oodcorr.tracking.analysis_run import report_link
    from oodcorr.tracking.store import ANALYSIS_KIND, sqlite_file

    db = sqlite_file(uri)
    if db is None or not db.exists():
        return None
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            row = con.execute(
                "SELECT r.run_uuid FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid WHERE "
                "r.experiment_id = ? AND r.lifecycle_stage = 'active' AND t.key = ? AND t.value = ? "
                "ORDER BY r.start_time DESC LIMIT 1",
                (int(exp_id), KIND_TAG, ANALYSIS_KIND),
            ).fetchone()
    except (sqlite3.Error, ValueError):
        return None
    return f"{base}/{report_link(row[0], exp_id)}" if row else None
