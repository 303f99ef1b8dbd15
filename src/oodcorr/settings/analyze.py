"""The analyze stage's settings: params.yaml `analyze` (plus command-line overrides) resolved once, with
every default and value check in this one place. The pipeline and its modules receive this object."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from oodcorr.core.choices import check_seed
from oodcorr.core.errors import UserError, closest
from oodcorr.stats.defaults import ALPHA, EQUIVALENCE, MAX_RESAMPLES, RELIABILITY_MIN, RELIABILITY_SPLITS
from oodcorr.stats.metrics import DEFAULT_METRIC, check_metric
from oodcorr.stats.partial import METHODS

NOISE_CHOICES = (True, False, "auto", "true", "false", "on", "off")


@dataclass(frozen=True)
class AnalyzeSettings:
    out: str | None = None  # output folder (None: <project>/results)
    methods: tuple[str, ...] = ("linear", "rank", "gam")  # see partial.METHODS; raw is always added
    bootstrap: int = 0  # resamples over checkpoints (0: off)
    alpha: float = ALPHA
    slices: bool = False  # testset slices as extra series
    seed: int = 0
    scatter_pair: tuple[str, str] | None = None  # the residual scatter grid's pair (None: the strongest)
    mlflow: bool = True  # log the analysis as one MLflow run (when tracking is on)
    noise: bool | str = "auto"  # auto | true | false: reliability / noise-corrected CIs from predictions
    metric: str = DEFAULT_METRIC  # see oodcorr.stats.metrics.METRICS
    reliability_min: float = RELIABILITY_MIN  # below: disattenuated r is NaN and the pair is `unreliable`
    reliability_splits: int = RELIABILITY_SPLITS  # random item halves per reliability
    equivalence: float = EQUIVALENCE  # consistent_null: every reliable model's noise-corrected CI inside +/- this
    pool_models: bool = False  # also one likelihood over all models' seeds per pair (consistency.csv *_shared)

    def __post_init__(self):
        methods = tuple(dict.fromkeys(self.methods))
        object.__setattr__(self, "methods", methods)
        if not methods:
            raise UserError(f"analyze.methods: empty (choose from {', '.join(METHODS)})")
        for m in methods:
            if m not in METHODS:
                raise UserError(
                    f"analyze.methods: unknown method {m!r}{closest(m, METHODS)}; known: {', '.join(METHODS)}"
                )
        if not 0 <= self.bootstrap <= MAX_RESAMPLES:
            raise UserError(f"analyze.bootstrap: must be in [0, {MAX_RESAMPLES}], got {self.bootstrap}")
        check_seed(self.seed, "analyze.seed")
        if not 0 < self.alpha < 1:
            raise UserError(f"analyze.alpha: must be in (0, 1), got {self.alpha}")
        if not 0 <= self.reliability_min <= 1:
            raise UserError(f"analyze.reliability_min: must be in [0, 1], got {self.reliability_min}")
        if not 1 <= self.reliability_splits <= MAX_RESAMPLES:
            raise UserError(
                f"analyze.reliability_splits: must be in [1, {MAX_RESAMPLES}], got {self.reliability_splits}"
            )
        if (
            isinstance(self.equivalence, bool)
            or not isinstance(self.equivalence, (int, float))
            or not 0 < self.equivalence < 1
        ):
            raise UserError(f"analyze.equivalence: must be a number in (0, 1), got {self.equivalence!r}")
        if self.scatter_pair is not None:
            check_scatter_pair(self.scatter_pair, None)
        check_metric(self.metric)
        if self.noise not in NOISE_CHOICES:
            raise UserError(f"analyze.noise: expected auto, true or false, got {self.noise!r}")

    @property
    def noise_off(self) -> bool:
        return self.noise in (False, "false", "off")

    @property
    def noise_required(self) -> bool:
        return self.noise in (True, "true", "on")

    def check_against(self, params: dict | None) -> AnalyzeSettings:
        """What can be checked against the study itself before any stage runs: the scatter pair names OOD
        testsets of the study's runs (`oodcorr study check`; the analysis checks it again on the loaded runs)."""
        if self.scatter_pair is not None and (params or {}).get("runs"):
            check_scatter_pair(self.scatter_pair, study_ood_testsets(params))
        return self

    @classmethod
    def from_params(cls, params: dict | None, **overrides) -> AnalyzeSettings:
        """The `analyze` section of `params` (None: no params.yaml), with the non-None `overrides` on top."""
        cfg = dict((params or {}).get("analyze") or {})
        if not cfg.get("methods"):  # an empty list means the default
            cfg.pop("methods", None)
        cast = {
            "methods": tuple,
            "bootstrap": int,
            "alpha": float,
            "slices": bool,
            "seed": int,
            "pool_models": bool,
            "reliability_min": float,
            "reliability_splits": int,
        }
        known = {f.name for f in fields(cls)}
        values = {k: cast.get(k, lambda v: v)(v) for k, v in cfg.items() if k in known}
        values.update({k: v for k, v in overrides.items() if v is not None and v != ()})
        return cls(**values)

    def but(self, **changes) -> AnalyzeSettings:
        return replace(self, **changes)


def study_ood_testsets(params: dict) -> list[str]:
    """Every testset some run of the study is scored on besides its own ID testset (the analysis' OOD series)."""
    from oodcorr.settings.project import scored_testsets

    scored = scored_testsets(params)
    ids = [(run or {}).get("id_testset") for run in (params.get("runs") or {}).values()]
    return sorted({t for i in ids for t in (*scored, i) if t and t != i})


def check_scatter_pair(pair, names) -> None:
    """analyze.scatter_pair: two names, each an OOD testset of the study (`names`; None: not known yet)."""
    if len(pair) != 2:
        raise UserError(f"analyze.scatter_pair: expected two testset names, got {list(pair)!r}")
    for name in pair if names is not None else ():
        if name not in names:
            raise UserError(
                f"analyze.scatter_pair: unknown OOD testset {name!r}{closest(str(name), names)}; the "
                f"study's OOD testsets: {', '.join(names)}"
            )
