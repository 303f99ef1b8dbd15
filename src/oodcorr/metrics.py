"""The per-item metrics a study can correlate (analyze.metric): one table, shared by the stages.

METRICS maps a name to a Metric: its per-item score function over a predictions table (dict of numpy
columns or a DataFrame with `label`, `prediction`, `logp_entailment`, `logp_non_entailment`), the
prediction columns it needs, whether a constant shift of the log-odds (an answer bias) leaves it
unchanged, whether higher is better, and the metrics.jsonl field that already holds it per checkpoint (None:
computed from the stored predictions). A testset's metric value is the mean of its items' scores.
The click choice of `oodcorr analyze --metric`, the params check of `analyze.metric`, the reliability
table and MLflow names all come from this table: adding a metric is one entry plus its function."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from oodcorr.errors import UserError, closest

LOGP = ("logp_entailment", "logp_non_entailment")


@dataclass(frozen=True)
class Metric:
    score: Callable  # predictions table -> (items,) float array
    needs: tuple[str, ...]  # prediction columns read besides `label`
    bias_invariant: bool  # unchanged by a constant shift of log p(entailment) - log p(non_entailment)
    higher_is_better: bool = True
    column: str | None = None  # the metrics.jsonl field holding it per checkpoint; None: from the predictions

    @property
    def needs_predictions(self) -> bool:
        return self.column is None


def _gold_entailment(table) -> np.ndarray:
    return np.asarray(table["label"]).astype(str) == "entailment"


def accuracy(table) -> np.ndarray:
    """1 where the prediction is the gold label."""
    label = np.asarray(table["label"]).astype(str)
    return (np.asarray(table["prediction"]).astype(str) == label).astype(float)


def margin(table) -> np.ndarray:
    """log p(gold) - log p(other)."""
    lpe, lpn = (np.asarray(table[c], float) for c in LOGP)
    return np.where(_gold_entailment(table), lpe - lpn, lpn - lpe)


def logp_gold(table) -> np.ndarray:
    """log p(gold)."""
    lpe, lpn = (np.asarray(table[c], float) for c in LOGP)
    return np.where(_gold_entailment(table), lpe, lpn)


METRICS: dict[str, Metric] = {
    "accuracy": Metric(accuracy, ("prediction",), bias_invariant=False, column="accuracy"),
    "mean_margin": Metric(margin, LOGP, bias_invariant=False),
    "mean_logp_gold": Metric(logp_gold, LOGP, bias_invariant=False),
}
DEFAULT_METRIC = "accuracy"  # the metric metrics.jsonl holds per checkpoint: the others need predictions


def check_metric(name: str, where: str = "analyze.metric") -> str:
    """`name` if it is a known metric, else a UserError naming `where` and the known ones."""
    if name not in METRICS:
        raise UserError(f"{where}: unknown metric {name!r}{closest(name, METRICS)}; known: {', '.join(METRICS)}")
    return name


def item_scores(table, metric: str) -> np.ndarray:
    """Per-item score of one predictions table for `metric` (a name check_metric accepted)."""
    return METRICS[metric].score(table)
