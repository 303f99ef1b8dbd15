"""The study a plan is for: its params.yaml (the project's, or --params FILE) read once, and what the plan takes
from it: the analysis settings that decide its verdicts (AnalyzeSettings.from_params: alpha, the reliability
gate reliability_min, the equivalence margin), its models, the dtype it scores in, its training steps per run and
its testsets' sizes. Without a params.yaml, AnalyzeSettings' own defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from oodcorr.core.errors import UserError
from oodcorr.settings.analyze import AnalyzeSettings


@dataclass(frozen=True)
class Study:
    root: Path
    params: dict = field(default_factory=dict)
    settings: AnalyzeSettings = field(default_factory=AnalyzeSettings)
    path: str = ""  # the params file read ("" when none)

    @property
    def models(self) -> list[str]:
        return sorted({str(r.get("model")) for r in (self.params.get("runs") or {}).values() if isinstance(r, dict)})

    @property
    def dtype(self) -> str | None:
        """The dtype the study scores in: evaluate.dtype, else the runs' training dtype (None: auto)."""
        ev, tr = self.params.get("evaluate") or {}, self.params.get("train") or {}
        return ev.get("dtype") or tr.get("dtype") or None

    @property
    def train_steps(self) -> int | None:
        steps = (self.params.get("train") or {}).get("max_steps")
        return int(steps) if isinstance(steps, int) and steps > 0 else None

    @property
    def ood_testsets(self) -> int | None:
        """How many OOD testsets the study scores (evaluate.testsets less its runs' ID testsets), None without one."""
        names = (self.params.get("evaluate") or {}).get("testsets") or []
        ids = {r.get("id_testset") for r in (self.params.get("runs") or {}).values() if isinstance(r, dict)}
        ood = [t for t in names if t not in ids]
        return len(ood) if isinstance(names, list) and ood else None

    def available(self, name: str, default: int) -> int:
        """Rows of a testset's local file (the items a study can score), else `default`."""
        from oodcorr.settings.registry import resolve

        try:
            spec = resolve(self.params, name)
            path = self.root / spec["path"] if spec.get("kind") == "local" else None
            return sum(1 for line in path.open() if line.strip()) if path and path.is_file() else default
        except (UserError, OSError, KeyError, TypeError):
            return default


def load_study(params_file: str | None = None) -> Study:
    """The study of `params_file` (--params), else of the project's params.yaml, else no study (defaults). A
    params file that does not load is its one-line error: a plan for a broken study would plan with the wrong
    settings."""
    from oodcorr.settings.config import PARAMS_FILE, find_project_root, load_params

    if params_file:
        path = Path(params_file)
        if not path.is_file():
            raise UserError(f"plan: --params {params_file}: no such file")
        root = path.resolve().parent
    else:
        root = find_project_root()
        path = root / PARAMS_FILE
        if not path.is_file():
            return Study(root)
    params = load_params(path)
    return Study(root, params, AnalyzeSettings.from_params(params), str(path))
