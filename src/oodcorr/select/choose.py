"""Which items of a testset move with the testset's residual trajectory across one run's checkpoints.

An item's score in one pilot run is the covariance of its ID-residual trajectory (its per-checkpoint score with the
ID series regressed out, as the analysis residualises) with the residual trajectory of the rest of the testset
(class-balanced, so an answer-bias swing, which moves one gold class up and the other down, cancels), divided by
that rest's variance. Summed over the items of a half, these covariances are the signal that split-half
reliability measures; an item that does not move, or moves on its own (noise), scores near 0. Scores of several
pilot runs (seeds, families) are averaged. `choose` keeps the top items within each gold class, in the testset's
label shares, so the chosen subset keeps the label balance the balanced metrics need.

`CRITERIA` also offers the alternatives the bench compares (bench/studies/item_selection.py): `variance` (the
spread of the item's raw score across checkpoints: what the issue found moves with answer bias), `residual` (the
spread of its ID-residual), and `random`."""

from __future__ import annotations

import numpy as np

CRITERIA = ("coherence", "correlation", "residual", "variance", "random")
DEFAULT_CRITERION = "coherence"


def _residualise(x: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Columns of Y with OLS on [1, x] taken out (the analysis' linear ID control)."""
    Z = np.column_stack([np.ones(len(x)), np.asarray(x, float)])
    return Y - Z @ np.linalg.lstsq(Z, Y, rcond=None)[0]


def item_scores(items: np.ndarray, x: np.ndarray, gold: np.ndarray, criterion: str = DEFAULT_CRITERION) -> np.ndarray:
    """(items,) selection score of one pilot run: items (checkpoints, items) per-item scores, x (checkpoints,) the
    ID series, gold (items,) bool gold-entailment labels. Higher = more worth scoring."""
    items = np.asarray(items, float)
    gold = np.asarray(gold, bool)
    if criterion == "variance":
        return items.var(axis=0)
    R = _residualise(x, items)
    if criterion == "residual":
        return R.var(axis=0)
    if criterion not in ("coherence", "correlation"):
        raise ValueError(f"unknown criterion {criterion!r}")
    out = np.zeros(items.shape[1])
    n_pos, n_neg = gold.sum(), (~gold).sum()
    if n_pos < 2 or n_neg < 2:
        return out
    sums = {True: R[:, gold].sum(axis=1), False: R[:, ~gold].sum(axis=1)}
    counts = {True: n_pos, False: n_neg}
    for j in range(items.shape[1]):  # leave the item out of its own class's mean
        own = bool(gold[j])
        rest = 0.5 * (sums[own] - R[:, j]) / (counts[own] - 1) + 0.5 * sums[not own] / counts[not own]
        rest = rest - rest.mean()
        var, own_r = float(rest @ rest), R[:, j] - R[:, j].mean()
        scale = var if criterion == "coherence" else np.sqrt(var * float(own_r @ own_r))
        out[j] = float(own_r @ rest) / scale if scale > 0 else 0.0
    return out


def pooled_scores(runs: list[tuple[np.ndarray, np.ndarray, np.ndarray]], criterion: str = DEFAULT_CRITERION):
    """Mean over pilot runs of each run's item scores, each run's scores divided by their SD first (so a family
    whose scores move more does not decide alone). runs: [(items, x, gold)] with the same items in the same order."""
    total = None
    for items, x, gold in runs:
        s = item_scores(items, x, gold, criterion)
        sd = s.std()
        s = s / sd if sd > 0 else s
        total = s if total is None else total + s
    return total / len(runs)


def quotas(gold: np.ndarray, k: int) -> dict[bool, int]:
    """Items per gold class for a subset of k that keeps the label shares (largest remainder)."""
    gold = np.asarray(gold, bool)
    n = len(gold)
    share = {c: k * int((gold == c).sum()) / n for c in (True, False)}
    take = {c: int(q) for c, q in share.items()}
    for c in sorted(share, key=lambda c: take[c] - share[c])[: k - sum(take.values())]:
        take[c] += 1
    return take


def choose(scores: np.ndarray, gold: np.ndarray, k: int) -> np.ndarray:
    """Sorted indices of the k items with the highest scores, taken within each gold class in its share (ties:
    the lower index first)."""
    gold = np.asarray(gold, bool)
    if k >= len(gold):
        return np.arange(len(gold))
    picked = []
    for cls, n in quotas(gold, k).items():
        idx = np.flatnonzero(gold == cls)
        order = idx[np.lexsort((idx, -np.asarray(scores)[idx]))]
        picked.append(order[:n])
    return np.sort(np.concatenate(picked))


def random_subset(gold: np.ndarray, k: int, rng) -> np.ndarray:
    """Sorted indices of k random items in the label shares of `choose` (the comparison every selection gets)."""
    gold = np.asarray(gold, bool)
    if k >= len(gold):
        return np.arange(len(gold))
    picked = [rng.choice(np.flatnonzero(gold == c), n, replace=False) for c, n in quotas(gold, k).items()]
    return np.sort(np.concatenate(picked))
