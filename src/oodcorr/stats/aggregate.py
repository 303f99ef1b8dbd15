"""A testset's value from its items' scores, and item halves that keep the gold-label shares.

How the items of a testset (or of a slice, or of one half of a split) combine into one number:
  mean      the plain mean (accuracy, mean_margin, mean_logp_gold, yes_rate);
  balanced  the mean of the two gold classes' means (balanced_accuracy, balanced_margin): a model that says
            "Yes" more often gains on one class what it loses on the other, so a testset's label share no
            longer turns an answer bias into a score change; NaN where one gold class is absent;
  auc       P(log-odds of a gold-entailment item > that of a gold-non-entailment item), ties 1/2: scipy's
            Mann-Whitney U / (n1 n0); threshold-free, so any additive shift of every item's log-odds (an
            answer bias) leaves it unchanged; NaN where one gold class is absent.
The same function serves a whole testset and every half of the reliability splits, so the balanced metrics
are computed within each half. Halves are drawn within each gold class (stratified_halves), so both halves
keep the testset's label shares: with random halves a model swinging between all-"Yes" and all-"No" makes
the halves of a balanced testset anti-correlated.
"""

from __future__ import annotations

import numpy as np

AGGREGATES = ("mean", "balanced", "auc")


def gold_entailment(table) -> np.ndarray:
    """Boolean (items,): the gold label is entailment (the verbaliser's " Yes")."""
    return np.asarray(table["label"]).astype(str) == "entailment"


def log_odds(table) -> np.ndarray:
    """Per item m = log p(" Yes") - log p(" No") (the stored logp_entailment - logp_non_entailment)."""
    return np.asarray(table["logp_entailment"], float) - np.asarray(table["logp_non_entailment"], float)


def one_class(gold) -> bool:
    """True where a set of items holds only one gold class (balanced metrics and AUC are undefined)."""
    gold = np.asarray(gold, bool)
    return bool(gold.all() or not gold.any())


def _as_masks(gold, masks) -> np.ndarray:
    return np.ones((1, len(gold)), bool) if masks is None else np.atleast_2d(np.asarray(masks, bool))


def weights(kind: str, gold, masks=None) -> np.ndarray:
    """(S, I) averaging weights of `masks` (item subsets, bool or non-negative counts; None: all items) for a
    linear aggregate: mean (1 / items in the subset) or balanced (1 / (2 x items of the class in the subset));
    a row whose subset lacks a class is NaN for `balanced`."""
    gold = np.asarray(gold, bool)
    M = _as_masks(gold, masks).astype(float)
    if kind == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            return M / M.sum(axis=1, keepdims=True)
    if kind != "balanced":
        raise ValueError(f"no linear weights for aggregate {kind!r}")
    pos, neg = M * gold, M * ~gold
    with np.errstate(invalid="ignore", divide="ignore"):
        W = 0.5 * pos / pos.sum(axis=1, keepdims=True) + 0.5 * neg / neg.sum(axis=1, keepdims=True)
    bad = (pos.sum(axis=1) == 0) | (neg.sum(axis=1) == 0)
    W[bad] = np.nan
    return W


def values(kind: str, scores, gold, masks=None) -> np.ndarray:
    """The testset value per checkpoint: scores (n, I) per-item scores, gold (I,) bool -> (n,) when `masks`
    is None, else (n, S) for the S item subsets in `masks` (S, I) bool."""
    scores = np.asarray(scores, float)
    gold = np.asarray(gold, bool)
    M = _as_masks(gold, masks)
    if kind == "auc":
        out = _auc(scores, gold, M)
    else:
        W = weights(kind, gold, M)
        out = scores @ np.nan_to_num(W).T
        out[:, ~np.isfinite(W).all(axis=1)] = np.nan
    return out[:, 0] if masks is None else out


def _auc(scores: np.ndarray, gold: np.ndarray, M: np.ndarray) -> np.ndarray:
    """(n, S) Mann-Whitney AUC of `scores` (n, I) on each item subset of M (S, I): subsets with equal class
    counts (stratified halves, the whole testset) are gathered into one vectorised scipy call."""
    from scipy.stats import mannwhitneyu

    n, S = scores.shape[0], M.shape[0]
    out = np.full((n, S), np.nan)
    pos, neg = M & gold, M & ~gold
    n1, n0 = pos.sum(axis=1), neg.sum(axis=1)
    for a, b in sorted(set(zip(n1.tolist(), n0.tolist()))):
        if a == 0 or b == 0:
            continue
        rows = np.flatnonzero((n1 == a) & (n0 == b))
        pi = np.nonzero(pos[rows])[1].reshape(len(rows), a)  # row-major: each row's items in order
        ni = np.nonzero(neg[rows])[1].reshape(len(rows), b)
        u = mannwhitneyu(scores[:, pi], scores[:, ni], axis=-1, method="asymptotic").statistic  # (n, rows)
        out[:, rows] = u / (a * b)
    return out


def stratified_halves(gold, n_splits: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Two (n_splits, I) bool masks: disjoint random halves with floor(k_c / 2) items of each gold class c in
    each half (an odd item of a class is left out), so both halves keep the testset's label shares."""
    gold = np.asarray(gold, bool)
    A = np.zeros((n_splits, len(gold)), bool)
    B = np.zeros_like(A)
    rows = np.arange(n_splits)[:, None]
    for cls in (True, False):
        idx = np.flatnonzero(gold == cls)
        h = len(idx) // 2
        if h == 0:
            continue
        order = idx[np.argsort(rng.random((n_splits, len(idx))), axis=1)]
        A[rows, order[:, :h]] = True
        B[rows, order[:, h : 2 * h]] = True
    return A, B
