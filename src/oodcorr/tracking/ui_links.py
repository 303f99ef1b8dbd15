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
            row = con.execute("SELECT experiment_id FROM experiments WHERE name = ? AND lifecycle_stage = 'active'",
                              (name,)).fetchone()
    except sqlite3.Error:
        return None
    return str(row[0]) if row else None


def links(base: str, exp_id: str) -> dict[str, str]:
    """{view name: URL} for experiment `exp_id` on the UI at `base` (e.g. http://127.0.0.1:5000)."""
    return {view: f"{base}/#/experiments/{exp_id}/runs?workflowType=machine_learning&compareRunsMode={mode}"
                  + (f"&searchFilter={quote(FILTERS[view], safe='')}" if view in FILTERS else "")
            for view, mode in VIEWS.items()}


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
            row = con.execute("SELECT r.run_uuid FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid WHERE "
                              "r.experiment_id = ? AND r.lifecycle_stage = 'active' AND t.key = ? AND t.value = ? "
                              "ORDER BY r.start_time DESC LIMIT 1", (int(exp_id), KIND_TAG, ANALYSIS_KIND)).fetchone()
    except (sqlite3.Error, ValueError):
        return None
    return f"{base}/{report_link(row[0], exp_id)}" if row else None
