"""A degenerate accuracy series (issue #13: ANLI pairs reported as r = 0.000, p = 1.000): a model that predicts
one label for every ANLI item scores exactly the label share at every checkpoint; on a stratified, balanced
subsample that is 0.5 throughout. Such a series has no variance to correlate: every pair involving it must be
NaN with a `constant:` flag, for every method, also after pooling over seeds, never r = 0 / p = 1."""

import math

import numpy as np
import pandas as pd
import pytest

from oodcorr.stats.consistency import pool_seeds
from oodcorr.stats.partial import analyse_run


@pytest.mark.parametrize("method", ["raw", "linear", "rank", "gam"])
def test_constant_anli_series_is_nan_and_flagged(method):
    rng = np.random.default_rng(0)
    n = 12
    x = np.linspace(0.5, 0.8, n) + rng.normal(0, 0.01, n)
    Y = np.column_stack(
        [
            0.4 + 0.5 * (x - 0.5) + rng.normal(0, 0.02, n),  # hans
            np.full(n, 0.5),  # anli: one label predicted always
            0.6 - 0.3 * (x - 0.5) + rng.normal(0, 0.02, n),
        ]
    )  # paws
    rows = analyse_run(x, Y, ["hans", "anli", "paws"], method, n_boot=20, rng=np.random.default_rng(1))
    by_pair = {(r["testset_a"], r["testset_b"]): r for r in rows}
    for pair, row in by_pair.items():
        if "anli" in pair:
            assert math.isnan(row["r"]) and math.isnan(row["p"]), row
            assert "constant:anli" in row["flag"], row
        else:
            assert math.isfinite(row["r"]) and row["r"] != 0.0
    frame = pd.DataFrame(
        [
            {
                **r,
                "model": "smollm2-135m",
                "train_set": "mnli_train",
                "shots": 16,
                "id_testset": "mnli",
                "seed": s,
                "run": f"r{s}",
                "method": method,
            }
            for s in (0, 1)
            for r in rows
        ]
    )
    pooled = pool_seeds(frame)
    anli = pooled[(pooled["testset_a"] == "anli") | (pooled["testset_b"] == "anli")]
    assert len(anli) and anli["r"].isna().all(), anli[["testset_a", "testset_b", "r", "p"]]
    assert not (anli["p"] == 1.0).any()
