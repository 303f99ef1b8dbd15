"""The per-item metrics a study can correlate (analyze.metric): one table, shared by the stages.

METRICS maps a name to a Metric: its per-item score function over a predictions table (dict of numpy
columns or a DataFrame with `label`, `prediction`, `logp_entailment`, `logp_non_entailment`), the
prediction columns it needs, whether a constant shift of the log-odds (an answer bias) leaves it
unchanged, whether higher is better, and how a testset's value comes from its items' scores
(oodcorr.stats.aggregate: mean, class-balanced mean, or AUC). Diagnostic metrics (yes_rate) are written and
plotted but not offered as `analyze.metric`.
The click choice of `oodcorr analyze --metric`, the params check of `analyze.metric`, the reliability
table and the MLflow metric names (`short`) all come from this table: adding a metric is one entry plus
its function."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from oodcorr.core.errors import UserError, closest
from oodcorr.stats.aggregate import gold_entailment as _gold_entailment
from oodcorr.stats.aggregate import log_odds, values

LOGP = ("logp_entailment", "logp_non_entailment")


@dataclass(frozen=True)
class Metric:
    score: Callable  # predictions table -> (items,) float array
    needs: tuple[str, ...]  # prediction columns read besides `label`
    bias_invariant: bool  # unchanged by a constant shift of log p(entailment) - log p(non_entailment)
    short: str  # its name in MLflow metric keys (`<short>/<testset>`): short enough for a chart title
    higher_is_better: bool = True
    aggregate: str = "mean"  # oodcorr.stats.aggregate.AGGREGATES: mean | balanced | auc
    diagnostic: bool = False  # written, logged and plotted; not a choice of analyze.metric


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


def says_yes(table) -> np.ndarray:
    """1 where the prediction is entailment (the verbaliser's " Yes")."""
    return (np.asarray(table["prediction"]).astype(str) == "entailment").astype(float)


METRICS: dict[str, Metric] = {
    "accuracy": Metric(accuracy, ("prediction",), bias_invariant=False, short="acc"),
    "balanced_margin": Metric(margin, LOGP, bias_invariant=True, short="bm", aggregate="balanced"),
    "balanced_accuracy": Metric(accuracy, ("prediction",), bias_invariant=False, short="bacc", aggregate="balanced"),
    "auc": Metric(log_odds, LOGP, bias_invariant=True, short="auc", aggregate="auc"),
    "mean_margin": Metric(margin, LOGP, bias_invariant=False, short="margin"),
    "mean_logp_gold": Metric(logp_gold, LOGP, bias_invariant=False, short="logp"),
    "yes_rate": Metric(
        says_yes, ("prediction",), bias_invariant=False, short="yes", higher_is_better=False, diagnostic=True
    ),
}
ANALYSABLE = tuple(m for m, spec in METRICS.items() if not spec.diagnostic)  # analyze.metric's choices
DEFAULT_METRIC = "balanced_margin"  # verdicts and the headline; accuracy is reported beside it
BASELINE_METRIC = "accuracy"  # the paper's metric, always reported beside the analysed one
BIAS_FREE_METRIC = "balanced_margin"  # what accuracy is compared with for the answer_bias flag
DIAGNOSTIC_METRIC = "yes_rate"  # the answer-bias diagnostic


def check_metric(name: str, where: str = "analyze.metric") -> str:
    """`name` if it is an analysable metric, else a UserError naming `where` and the known ones."""
    if name not in ANALYSABLE:
        raise UserError(f"{where}: unknown metric {name!r}{closest(name, ANALYSABLE)}; known: {', '.join(ANALYSABLE)}")
    return name


def item_scores(table, metric: str) -> np.ndarray:
    """Per-item score of one predictions table for `metric` (its testset value: value_of)."""
    if metric not in METRICS:
        check_metric(metric)
    return METRICS[metric].score(table)


def value_of(table, metric: str) -> float:
    """`metric` of one set of items (a testset, a slice): NaN for a balanced metric or AUC on one gold class."""
    spec = METRICS[metric]
    return float(values(spec.aggregate, spec.score(table)[None, :], _gold_entailment(table))[0])


def table_metrics(table, names=None) -> dict:
    """{metric: value} for every metric in `names` (default: all whose columns `table` has) of one item set;
    and n_entailment, the gold-entailment items (0 or all of them: the balanced metrics and AUC are NaN)."""
    cols = set(table.keys() if hasattr(table, "keys") else table.columns)
    names = [m for m in (names or METRICS) if set(METRICS[m].needs) <= cols]
    out = {m: value_of(table, m) if len(table["label"]) else float("nan") for m in names}
    out["n_entailment"] = int(_gold_entailment(table).sum())
    return out
