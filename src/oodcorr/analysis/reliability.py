"""One run's split-half reliability rows: per metric, method and testset, from its per-item score matrices."""

from __future__ import annotations

from oodcorr.stats.methods import METHODS
from oodcorr.stats.metrics import METRICS


def analyse_run_noise(
    x, Y, names, methods, n_splits: int, rng, rel_items: dict, gold: dict | None = None, id_name: str | None = None
):
    """Reliability rows of one run (metric, method, testset, n_items, n, reliability, flag).

    x, Y: the analysed series (n,), (n, T); rel_items: {metric: {testset: (n, I)}} item matrices.
    gold: {testset: (I,) bool gold-entailment}: halves stratified by gold label and each metric aggregated
    as its table entry says (oodcorr.stats.metrics.METRICS) within each half; id_name: the ID testset, whose
    matrices in rel_items give each metric its own ID series to residualise on (else `x` for all).
    r_disattenuated, ci2_low/high and `distinguishable` are added by noise_tables.noise_columns."""
    import numpy as np

    from oodcorr.stats.aggregate import stratified_halves, values
    from oodcorr.stats.noise import MIN_ITEMS, gam_operators, linear_operator, reliabilities, split_masks

    x, Y = np.asarray(x, float), np.asarray(Y, float)
    T = len(names)
    rel_rows = []
    complete = np.isfinite(x) & np.isfinite(Y).all(axis=1) if Y.size else np.isfinite(x)
    masks = {}  # the same random halves for every metric and method of a testset
    for metric, mats in rel_items.items():
        kind = METRICS[metric].aggregate if metric in METRICS else "mean"

        def series(name):
            g = gold[name] if gold is not None else np.ones(mats[name].shape[1], bool)
            return values(kind, mats[name], g)

        xm = series(id_name) if id_name is not None and id_name in mats else x
        ok = complete & np.isfinite(xm)
        xc = xm[ok]
        lin = linear_operator(xc) if ok.sum() >= 2 else None
        ood = np.column_stack([series(nm)[ok] for nm in names]) if T else np.zeros((int(ok.sum()), 0))
        smooth = any(METHODS[m].operator == "smooth" for m in methods)
        gam = gam_operators(xc, ood) if smooth and T and np.isfinite(ood).all() else [None] * T
        for j, name in enumerate(names):
            items = mats[name][ok]
            g = gold.get(name) if gold is not None else None
            if items.shape[1] >= MIN_ITEMS and name not in masks:
                masks[name] = (
                    stratified_halves(g, n_splits, rng) if g is not None else split_masks(items.shape[1], n_splits, rng)
                )
            ops = {m: {"smooth": gam[j], "ols": lin}.get(METHODS[m].operator) for m in methods}
            for method, (rel, flag) in reliabilities(items, xc, ops, n_splits, rng, masks.get(name), g, kind).items():
                rel_rows.append(
                    {
                        "metric": metric,
                        "method": method,
                        "testset": name,
                        "n_items": items.shape[1],
                        "n": int(items.shape[0]),
                        "reliability": rel,
                        "flag": flag,
                    }
                )
    return rel_rows
