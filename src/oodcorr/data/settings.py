"""The prepare stage's settings: params.yaml `data` resolved once, with its defaults in this one place.
(`data.out` is read through oodcorr.records.prepared, `data.testsets` / `data.neutral` through
oodcorr.settings.registry: the core modules the other stages share.)"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PrepareSettings:
    seed: int = 0  # subsampling and synthetic generation
    max_examples: int | None = None  # per testset, unless its registry entry sets max_examples
    prepare: tuple[str, ...] = ()  # testsets prepared though no run or evaluate.testsets names them

    @classmethod
    def from_params(cls, params: dict | None) -> PrepareSettings:
        data = (params or {}).get("data") or {}
        return cls(
            seed=int(data.get("seed", cls.seed) or cls.seed),
            max_examples=data.get("max_examples"),
            prepare=tuple(str(n) for n in data.get("prepare") or ()),
        )
