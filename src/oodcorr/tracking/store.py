"""MLflow wiring shared by every stage: one store per project (sqlite under <project>/mlruns, resolved to an
absolute path so `dvc exp run --temp/--queue` copies log to the same place), one experiment per study,
one MLflow run per training run (train and evaluate log into the same run)."""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path

from oodcorr.settings import environment
from oodcorr.settings.project import Project

MAX_PARAM_LEN = 6000  # MLflow 3 limit for a param value is 6000 chars
# A classic ML experiment: MLflow 3's UI then opens it on the runs table and its charts, not the GenAI
# (traces) view it infers for an untagged experiment (mlflow/server/js: ExperimentKind).
EXPERIMENT_TAGS = {"mlflow.experimentKind": "custom_model_development"}
# The tag that tells a study's MLflow runs apart, and its values: one run per training run, one analysis run.
KIND_TAG, TRAIN_KIND, ANALYSIS_KIND = "oodcorr.kind", "train", "analysis"


def enabled(project: Project | dict | None) -> bool:
    """study.tracking: mlflow (default) or none (no MLflow at all: train, evaluate and analyze write their
    local outputs only, and mlflow need not be installed)."""
    return Project.of(project).tracking_enabled


# A tracking server that is down must cost seconds, not MLflow's default ~260 s of retries: these bound
# every HTTP call (the user's own values win). Tracking is a mirror; the local records are the truth.
HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "5",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0",
}


def bound_http_waits() -> None:
    """Before any call to a tracking server: bounded waits, and log records (urllib3's retries name the request
    with its query) masked (oodcorr.core.credentials)."""
    from oodcorr.core.credentials import mask_logging

    mask_logging()
    for key, value in HTTP_DEFAULTS.items():
        os.environ.setdefault(key, value)


def sqlite_file(uri: str) -> Path | None:
    if uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///") :])
    return None


# how long a store locked by another process is waited for before it is an error
BUSY_ENV = environment.BUSY_TIMEOUT_ENV
BUSY_TIMEOUT_S: float | None = None  # None: $OODCORR_STORE_BUSY_TIMEOUT_S, else 30 s (busy_timeout_s)
# sqlite's full integrity check (every index against its table; ~0.1 s per MB on a busy CPU) runs when a stage
# opens a store up to this size, and always at `oodcorr sync`; a larger store gets the page check (quick_check)
FULL_CHECK_MAX_BYTES = 16 << 20


def busy_timeout_s() -> float:
    """BUSY_TIMEOUT_S, else $OODCORR_STORE_BUSY_TIMEOUT_S (seconds >= 0), else 30; read when a store is opened,
    so a bad value is one line naming the variable, not an error at import (settings.environment parses it,
    as `oodcorr study check` does)."""
    if BUSY_TIMEOUT_S is not None:
        return BUSY_TIMEOUT_S
    return environment.read(BUSY_ENV, environment.BUSY_TIMEOUT_DEFAULT_S)


class StoreState:
    READY, EMPTY, HALF_CREATED = "ready", "empty", "half-created"


def ensure_store(uri: str) -> None:
    """Create a sqlite store crash-safely: under a lock, the schema is built (all migrations) in a temporary
    file that is renamed onto mlflow.db only when complete, so a kill never leaves a half-migrated store.
    A store is moved aside and rebuilt only when it is provably empty and half-created (it opens, passes
    sqlite's integrity check, holds no runs and no experiment besides the default, and its schema is
    incomplete). A store that is locked by another process, damaged, or holds data in an older schema is a
    UserError naming the file and what to do; it is never moved or rebuilt."""
    db = sqlite_file(uri)
    if db is None or str(db) in _READY:
        return
    import fcntl

    from oodcorr.core import io

    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.parent / f".{db.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for stale in db.parent.glob(f".{db.name}.*.tmp-journal"):
            if not stale.with_name(stale.name[: -len("-journal")]).exists():
                stale.unlink(missing_ok=True)
        io.clean_stale_temps(db.parent)
        state = store_state(db) if db.exists() and db.stat().st_size > 0 else StoreState.EMPTY
        if state == StoreState.HALF_CREATED:
            import time

            aside = db.with_name(f"{db.name}.broken-{int(time.time())}")
            os.replace(db, aside)
            import warnings

            warnings.warn(
                f"{db} was half-created by a killed process (schema incomplete, no runs, no "
                f"experiments); moved to {aside.name} and rebuilt",
                stacklevel=2,
            )
            state = StoreState.EMPTY
        if state == StoreState.EMPTY:
            with io.atomic_path(db) as tmp:
                _build_schema(tmp)
        else:  # a project copied or moved with its store: its artifacts go into its own folder from now on
            from oodcorr.tracking.store_relocation import relocate

            relocate(db, busy_timeout_s())
        _READY.add(str(db))


_READY: set[str] = set()


def _build_schema(path: Path) -> None:
    import logging

    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    for name in ("mlflow.store.db.utils", "alembic"):  # "Creating initial MLflow database tables..." noise
        logging.getLogger(name).setLevel(logging.WARNING)
    store = SqlAlchemyStore(f"sqlite:///{path}", (path.parent / "artifacts").as_uri())
    store.engine.dispose()


def store_state(db: Path, full: bool | None = None) -> str:
    """READY (complete schema at MLflow's head revision) or HALF_CREATED (provably empty: no runs, only the
    default experiment, schema incomplete); anything else raises UserError naming `db`. `full`: sqlite's full
    integrity check, not only the page check (default: for a store up to FULL_CHECK_MAX_BYTES)."""
    import sqlite3

    from oodcorr.core import holders
    from oodcorr.core.errors import UserError

    what = (
        "restore it from a backup, or move it away (mv {db} {db}.old) and run `oodcorr sync` to rebuild its "
        "runs in a new store from runs/ and results/"
    )
    full = db.stat().st_size <= FULL_CHECK_MAX_BYTES if full is None else full
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=busy_timeout_s())) as con:
            con.execute("begin")  # a shared lock: waits (timeout) while another process writes
            tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
            # quick_check: page-level damage (linear, fast); integrity_check also each index against its table
            check = con.execute("pragma integrity_check(1)" if full else "pragma quick_check(1)").fetchone()
            if not check or check[0] != "ok":
                found = " ".join(str(check[0] if check else "no answer").split())[:120]
                raise sqlite3.DatabaseError(f"integrity check: {found}")
            complete = not any(t.startswith("_alembic_tmp") for t in tables) and "alembic_version" in tables
            version = con.execute("select version_num from alembic_version").fetchone() if complete else None
            if complete and version is not None and version[0] == _head_revision():
                return StoreState.READY
            runs = int(con.execute("select count(*) from runs").fetchone()[0]) if "runs" in tables else 0
            experiments = (
                int(con.execute("select count(*) from experiments where experiment_id != 0").fetchone()[0])
                if "experiments" in tables
                else 0
            )
    except sqlite3.OperationalError as e:
        if "locked" in str(e) or "busy" in str(e):
            raise UserError(
                f"{db}: the MLflow store is locked by another process (waited {busy_timeout_s():g} s)"
                f"{holders.describe(holders.file_holders(db))}; wait for it to finish (or stop it) and rerun"
            ) from None
        if db.with_name(f"{db.name}-journal").exists() and ("readonly" in str(e) or "I/O" in str(e)):
            raise UserError(
                f"{db}: an interrupted write (its -journal file) must be rolled back and cannot be "
                f"({e}); free disk space or make {db.parent} writable, then rerun"
            ) from None
        raise UserError(f"{db}: the MLflow store cannot be read ({e}); " + what.format(db=db)) from None
    except sqlite3.DatabaseError as e:
        raise UserError(f"{db}: the MLflow store is damaged ({e}); " + what.format(db=db)) from None
    if complete and runs + experiments:
        raise UserError(
            f"{db}: the MLflow store holds {runs} run(s) in an older schema; back it up and run "
            f"`mlflow db upgrade sqlite:///{db}`, or point study.tracking_uri elsewhere"
        )
    if runs or experiments:
        raise UserError(
            f"{db}: the MLflow store's schema is incomplete but it holds {runs} run(s) and "
            f"{experiments} experiment(s); " + what.format(db=db)
        )
    return StoreState.HALF_CREATED


def _head_revision() -> str:
    from alembic.script import ScriptDirectory
    from mlflow.store.db.utils import _get_alembic_config

    cfg = _get_alembic_config("sqlite://")
    return ScriptDirectory.from_config(cfg).get_current_head()


def check_store(project: Project | dict | None, full: bool | None = None) -> None:
    """At a stage's start, before it writes anything: a local sqlite store that is locked or damaged is a
    UserError now (never moved aside or rebuilt; see store_state), not a surprise mid-run. Reads only: a
    missing store is created later, by the first record mirrored into it. `full`: see store_state."""
    if project is None or not enabled(project):
        return
    db = sqlite_file(tracking_uri(project, create=False))
    if db is not None and db.is_file():
        from oodcorr.tracking.writable import check_writable

        check_writable(db)  # a read-only store: one line saying so and what to do, never "unreachable"
    if db is not None and (full or str(db) not in _READY) and db.is_file() and db.stat().st_size > 0:
        store_state(db, full)


def tracking_uri(project: Project | dict, create: bool = True) -> str:
    """$MLFLOW_TRACKING_URI, else study.tracking_uri (a relative sqlite path resolved against the project),
    else sqlite:///<project>/mlruns/mlflow.db (mlruns/ made unless `create` is false)."""
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    project = Project.of(project)
    root = _store_root(project)
    uri = project.tracking_uri
    if uri:
        if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
            return "sqlite:///" + str((root / uri[len("sqlite:///") :]).resolve())
        return uri
    if create:
        (root / "mlruns").mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{root / 'mlruns' / 'mlflow.db'}"


def uri_source(project: Project | dict) -> str:
    """Where the tracking URI comes from, as a user names it in a message."""
    return "MLFLOW_TRACKING_URI" if os.environ.get("MLFLOW_TRACKING_URI") else "study.tracking_uri"


def is_server(uri: str) -> bool:
    """A tracking server (http/https, Databricks), not a store that `mlflow server` can serve."""
    return uri.split(":", 1)[0].lower() in ("http", "https", "databricks")


def _store_root(project: Project | dict) -> Path:
    """The project folder that owns the store. Inside a `dvc exp run --temp/--queue` workspace (a copy
    under .dvc/tmp/exps/...), that is the original project, not the temporary copy."""
    root = Project.of(project).resolved_root
    parts = root.parts
    if ".dvc" in parts:
        i = parts.index(".dvc")
        if parts[i + 1 : i + 3] == ("tmp", "exps"):
            return Path(*parts[:i])
    return root


def artifact_root(project: Project | dict) -> str:
    """Where the experiments of a local store keep artifacts: next to the sqlite file (<store folder>/artifacts),
    so the store and its artifacts move together (see store_relocation)."""
    db = sqlite_file(tracking_uri(project, create=False))
    return ((db.parent if db is not None else _store_root(project) / "mlruns") / "artifacts").as_uri()


def experiment_name(project: Project | dict) -> str:
    project = Project.of(project)
    return project.experiment or f"oodcorr/{project.name}"


def setup(project: Project | dict, experiment: str | None = None) -> str:
    """Point mlflow at the project's store and experiment (default: the study's); return the experiment id."""
    import mlflow

    project = Project.of(project)
    bound_http_waits()
    ensure_store(tracking_uri(project))
    mlflow.set_tracking_uri(tracking_uri(project))
    name = experiment or experiment_name(project)
    client = mlflow.MlflowClient()
    exp = client.get_experiment_by_name(name)
    if exp is None:
        uri = tracking_uri(project)
        location = artifact_root(project) if uri.startswith("sqlite:") or uri.startswith("file:") else None
        try:
            exp_id = client.create_experiment(name, artifact_location=location, tags=EXPERIMENT_TAGS)
        except Exception:  # created concurrently by another process
            exp_id = client.get_experiment_by_name(name).experiment_id
    else:
        exp_id = exp.experiment_id
        for key, value in EXPERIMENT_TAGS.items():  # stores made before the tag existed
            if exp.tags.get(key) != value:
                client.set_experiment_tag(exp_id, key, value)
    mlflow.set_experiment(experiment_id=exp_id)
    return exp_id


def run_name(run: str, cfg: dict, runs: dict | None = None) -> str:
    """The MLflow run name of a training run: its key with the model and seed first, then the training set and
    shots where the study's `runs` (params' runs:) differ in them: "smollm2-135m s0" when every run trains on the
    same set and shots, "smollm2-135m s0 · mnli_real 1024" otherwise (and when `runs` is not given), so the UI's
    narrow run column (about 20 characters) tells the runs apart. A key of another form is kept as it is; the key
    itself is the tag oodcorr.run_key."""
    train_set, shots, seed = cfg.get("train_set"), cfg.get("shots"), cfg.get("seed")
    if not train_set or shots is None or seed is None:
        return run
    ts = str(train_set).removesuffix("_train")
    tail = f"_{ts}_{shots}_s{seed}"
    if not run.endswith(tail) or len(run) == len(tail):
        return run
    others = [r for r in (runs or {}).values() if isinstance(r, dict)]
    parts = [
        ts if not others or any(r.get("train_set") != train_set for r in others) else "",
        str(shots) if not others or any(r.get("shots") != shots for r in others) else "",
    ]
    rest = " ".join(p for p in parts if p)
    return f"{run[: -len(tail)]} s{seed}" + (f" · {rest}" if rest else "")


def flatten(d: dict, prefix: str = "", skip_private: bool = False) -> dict:
    """Nested dict -> {"a.b": leaf} (keys starting with "_" left out when `skip_private`)."""
    out = {}
    for key, value in d.items():
        if skip_private and str(key).startswith("_"):
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + ".", skip_private))
        else:
            out[name] = value
    return out


def param_values(d: dict) -> dict[str, str]:
    """Nested params -> {'a.b': 'value'} with values cut to MLflow's length limit (private keys left out)."""
    out = {}
    for name, value in flatten(d, skip_private=True).items():
        text = str(value)
        out[name] = text if len(text) <= MAX_PARAM_LEN else text[: MAX_PARAM_LEN - 3] + "..."
    return out


def metric_leaves(d: dict) -> dict[str, float]:
    """Numeric finite leaves as {"methods.linear.mean_abs_r": 0.3, ...} (MLflow metric names)."""
    return {
        name: float(value)
        for name, value in flatten(d).items()
        if isinstance(value, (bool, int, float)) and value is not None and math.isfinite(float(value))
    }
