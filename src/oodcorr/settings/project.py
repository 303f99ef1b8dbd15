"""The project a stage works in: the params file's folder, the `study` section and where prepared data lives,
resolved once from params. The core helpers that find or track things take this, not the whole params dict:
rundir (run folders), prepared (data/prepared), tracking and mirror (the MLflow store and experiment) and
threads (study.threads). A stage resolves it once (`Project.from_params`) and passes it down; `Project.of`
lets the helpers still be handed params by callers that hold nothing else (scripts, tests)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from oodcorr.core.credentials import MLFLOW_CREDENTIAL_VARS, has_credentials, mask_secrets
from oodcorr.core.errors import UserError

TRACKING = ("mlflow", "none")  # study.tracking: none = local outputs only, MLflow never imported


@dataclass(frozen=True)
class Project:
    root: Path = Path(".")  # the params file's folder: relative paths in params resolve against it
    name: str = "default"  # study.name: the MLflow experiment is oodcorr/<name> unless study.experiment
    tracking: str = TRACKING[0]
    tracking_uri: str | None = None  # None: $MLFLOW_TRACKING_URI, else <root>/mlruns/mlflow.db (tracking.py)
    experiment: str | None = None
    threads: int | str | None = None  # study.threads (OODCORR_THREADS wins; threads.resolve); None = auto
    data_out: str = "data/prepared"  # data.out: the prepared testsets (oodcorr.records.prepared)

    def __post_init__(self):
        if self.tracking not in TRACKING:
            raise UserError(f"params: study.tracking: expected mlflow or none, got {self.tracking!r}")
        if isinstance(self.tracking_uri, str) and has_credentials(self.tracking_uri):  # params go into dvc.lock
            raise UserError(
                f"params: study.tracking_uri: {mask_secrets(self.tracking_uri)} holds credentials, which "
                f"DVC would record (dvc.lock, run cache); remove them and set {MLFLOW_CREDENTIAL_VARS}"
            )

    @classmethod
    def from_params(cls, params: dict | None) -> Project:
        params = params or {}
        study = params.get("study") or {}
        return cls(
            root=Path(params.get("_root") or cls.root),
            name=study.get("name", cls.name),
            tracking=study.get("tracking") or cls.tracking,
            tracking_uri=study.get("tracking_uri"),
            experiment=study.get("experiment"),
            threads=study.get("threads"),
            data_out=(params.get("data") or {}).get("out") or cls.data_out,
        )

    @classmethod
    def of(cls, source: Project | dict | None) -> Project:
        return source if isinstance(source, cls) else cls.from_params(source)

    def path(self, rel: str | os.PathLike) -> Path:
        """A path from params resolved against the project folder."""
        p = Path(rel)
        return p if p.is_absolute() else self.root / p

    @property
    def resolved_root(self) -> Path:
        return self.root.resolve()

    @property
    def tracking_enabled(self) -> bool:
        return self.tracking == "mlflow"


def scored_testsets(params: dict | None) -> tuple[str, ...]:
    """params `evaluate.testsets`, checked: what every checkpoint is scored on besides its run's ID testset,
    so what the data stage prepares and the evaluate stage reads (EvaluateSettings.testsets)."""
    listed = ((params or {}).get("evaluate") or {}).get("testsets")
    if listed is not None and not listed:
        raise UserError(
            "params: evaluate.testsets: empty; list the testsets every checkpoint is scored on "
            "(the run's ID testset is added)"
        )
    for i, name in enumerate(listed or ()):
        if not isinstance(name, str):
            raise UserError(f"params: evaluate.testsets[{i}]: expected a testset name, got {name!r}")
    return tuple(listed or ())
