"""An independent simulation grid for the noise-corrected interval (ci2) of the noise-free partial correlation.

Independent of `oodcorr.stats.simulate` (its generator is not used or copied here) and not built around
AR(1) trajectories: the residual trajectories are Gaussian processes, AR(1) or independent, the noise is an item
response model on the log-odds scale and the testset value is the class-balanced mean margin.

Generator (one replicate = one study of one model; S seeds = S training runs of it)
-----------------------------------------------------------------------------------
- Checkpoints t_k = k / (n - 1), k = 0..n-1 (training progress in [0, 1]).
- ID ability, per seed: theta_x(t) = P (1 - exp(-t / lam)) + w sin(2 pi f t + psi), with P = 1.5 exp(N(0, 0.1^2)),
  lam = 0.3 exp(N(0, 0.2^2)), wiggle amplitude w = 0.08, f ~ U(0.5, 1.5), psi ~ U(0, 2 pi): a smooth rising
  learning curve with a small smooth wiggle, its own for every seed.
- OOD abilities: theta_a = beta_a theta_x + u, theta_b = beta_b theta_x + v, beta_a, beta_b ~ U(0.5, 1) per
  replicate (shared by its seeds). (u, v) is a bivariate stationary process with the same correlation over
  checkpoints K for both and cross-correlation rho at lag 0, by the intrinsic coregionalisation construction
      u = sd L1 w1,   v = sd (rho L1 w1 + sqrt(1 - rho^2) L1 w2),   L1 = chol(K),  w1, w2 ~ N(0, I_n),
  so cov(u, v') = rho sd^2 K: across checkpoints, E[u'Mv] / sqrt(E[u'Mu] E[v'Mv]) = rho for ANY residual maker M,
  i.e. rho is exactly the population partial correlation of the noise-free trajectories given noise-free ID
  (theta_a, theta_b are linear in theta_x plus (u, v)). That rho is the estimand. Dependence (K):
  "gp0.1", "gp0.2": squared-exponential kernel exp(-(t_k - t_l)^2 / (2 l^2)), length-scale l = 0.1 / 0.2 of the
  training span (+ 1e-6 on the diagonal for the Cholesky; with the ICM construction that keeps rho exact);
  "ar0.5", "ar0.8": phi^|k - l| (AR(1) per checkpoint step); "iid": K = I. Each seed draws its own w1, w2.
- Signal SD sd of u and v: SIGNAL_SD[dependence] (logits), calibrated (`--calibrate`) so that the split-half
  reliability of a 128-item OOD testset's residual trajectory (stratified halves, Spearman-Brown, residuals on
  the observed 512-item ID series) is about 0.7 at 20 checkpoints. Smoother kernels need a larger SD because
  residualising on the learning curve removes more of a smooth trajectory.
- Items: a testset has I items (OOD 128; ID 128 or 512), gold labels y_i = +-1 (50/50 unless stated), a fixed
  difficulty c_i ~ N(0, 1) and discrimination s_i ~ N(1, 0.3^2), drawn once per replicate and scored at every
  checkpoint of every seed (the same testset across seeds, as in a real study). Per-item margin (log p(Yes) -
  log p(No)) m_ik = b_k + y_i (s_i theta(t_k) - c_i) + e_ik, e_ik ~ N(0, TAU^2) iid over items, checkpoints
  and seeds; b_k the answer bias (0 by default). The testset's series is balanced_margin,
  1/2 [mean m over y = +1 - mean m over y = -1], from the items; its item-noise covariance over checkpoints is
  oodcorr.stats.item_cov.noise_cov of the per-item scores y_i m_ik with labels y and coef {+1: 1/2, -1: 1/2}
  (the estimator under test, not part of the generator; the new interval gets it with shrink=True, the
  cross-validated pull towards a scaled identity the analysis uses, the earlier one without). The population
  value of balanced_margin is E[s] theta - E[c] = theta + const (b_k cancels), so the estimand is unchanged by the
  item model.
- Rough-ID variant ("rough_id"): the ID ability gets a rough component of its own per seed, theta_x + sd L1 w0
  (w0 ~ N(0, I_n): the same correlation K and signal SD as (u, v)), so the ID series is as rough as the OOD
  residuals; the OOD abilities carry beta times it, and rho is unchanged (u, v do not involve w0).
- Answer-bias variant ("answer_bias"): b_k a per-checkpoint shift shared by all testsets of a seed, SD 1 logit
  (half its variance a squared-exponential GP with l = 0.2, half independent per checkpoint), and the OOD testsets
  label-imbalanced (30 % and 40 % gold Yes; ID balanced). balanced_margin is immune to b_k by construction; the
  cell checks nothing leaks through the noise estimate.

Grid
----
dependence (5) x ID items (128, 512) x seeds (1, 3) x checkpoints (9, 20, 40) x rho (0, 0.5, 0.8) = 180 cells, plus
the answer-bias variant for gp0.2 with 128 ID items (18 cells), plus 5 seeds for gp0.2 at 40 checkpoints (6 cells), 5
seeds for ar0.5 and ar0.8 at 40 checkpoints (12 cells) and the rough-ID variant for ar0.8 with 128 ID items, 3 and 5
seeds at 40 checkpoints (6 cells), plus the ID-control cells at rho 0 not already among them (smooth and rough ID,
ar0.5, ar0.8, gp0.2 and iid, 128 and 512 ID items, 3 and 5 seeds, 20 and 40 checkpoints: 40 of 64): 262 cells.
Per cell `--reps` replicates (default 200); every replicate gets the new
interval (oodcorr.stats.gp_interval.gp_interval, all seeds at once) and the earlier one (interval.partial_interval per
seed; several seeds pooled by inverse variance on Fisher's z of the attenuated r, the interval divided by the weighted
mean attenuation, as noise_pooling._pool_noise does). Per cell and interval: coverage of rho among the replicates where
the interval is defined (and its Monte Carlo SE), the share excluding 0 among the defined (at rho = 0: the
false-"distinguishable" rate) and among all replicates (at rho > 0: the power; an undefined interval detects nothing),
the defined share overall and among the replicates whose estimated reliabilities (the method's rel_a, rel_b; for the
earlier interval with several seeds their mean over seeds) are both >= 0.5, median width and median n_eff (defined
replicates), reasons for undefined intervals, runtime.

Seeding: a cell's key (e.g. "base|gp0.2|id128|S1|n40|rho0.5") -> crc32 -> numpy SeedSequence([BASE_SEED, crc32,
chunk]) for each chunk of CHUNK replicates, so a cell's draws do not depend on the order cells run in, on
--workers, or on --reps beyond the whole chunks it covers (--reps 100 gives the first 100 replicates of --reps 200).

Output: one JSON line per finished cell appended to bench/stats/results/interval_grid.jsonl (`--resume` skips cells
already there with the same replicates and intervals, computed by the same version of the interval modules
(sha1 of src/oodcorr/stats/gp_interval.py / interval.py in each row); per cell and interval the last line with
that interval wins, so `--methods new` keeps the earlier interval's results of a cell), and a summary
bench/stats/results/interval_grid.json rewritten after every run from all lines. `--markdown` prints the tables of
docs/statistics-reference.md ("Measured: the interval on smooth trajectories") from the .jsonl file.

Usage:
    python bench/stats/interval_grid.py                                   # the whole grid, 200 replicates per cell
    python bench/stats/interval_grid.py --dependence gp0.2 --checkpoints 40 --seeds 1 --reps 200 --resume
    python bench/stats/interval_grid.py --methods earlier --dependence gp0.2 iid   # only the earlier interval
    python bench/stats/interval_grid.py --cells 'base|gp0.2|id128|S1|n40|*'       # glob on cell keys
    python bench/stats/interval_grid.py --quick                           # CI-sized subset (< 60 s), in the temp dir
    python bench/stats/interval_grid.py --markdown                        # the docs tables from the results file
    python bench/stats/interval_grid.py --update-docs                   # ... written into docs/statistics-reference.md
    python bench/stats/interval_grid.py --calibrate                       # reliabilities at 128 items per dependence
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import sys
import tempfile
import time
import warnings
import zlib
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
OUT = RESULTS / "interval_grid.jsonl"
QUICK_OUT = Path(tempfile.gettempdir()) / "oodcorr_interval_grid_quick.jsonl"  # not a committed result
BASE_SEED = 20261203
CHUNK = 25  # replicates drawn together (the unit of the seeding)

DEPENDENCE = ("gp0.1", "gp0.2", "ar0.5", "ar0.8", "iid")
ID_ITEMS = (128, 512)
SEEDS = (1, 3)
CHECKPOINTS = (9, 20, 40)
RHOS = (0.0, 0.5, 0.8)
OOD_ITEMS = 128
TAU = 1.5  # SD of the per-item, per-checkpoint margin noise e_ik (logits)
DISCRIMINATION_SD = 0.3
CURVE = {"plateau": 1.5, "plateau_sd": 0.1, "rate": 0.3, "rate_sd": 0.2, "wiggle": 0.08}
BETA = (0.5, 1.0)
# calibrated with --calibrate: split-half reliability of a 128-item OOD residual trajectory about 0.7 at 20
# checkpoints (see the module notes and docs/statistics-reference.md)
SIGNAL_SD = {"gp0.1": 0.28, "gp0.2": 0.46, "ar0.5": 0.25, "ar0.8": 0.31, "iid": 0.20}
ANSWER_BIAS = {"sd": 1.0, "smooth_share": 0.5, "length_scale": 0.2, "gold_yes": (0.5, 0.3, 0.4)}
RELIABILITY_MIN = 0.5
VARIANT_NAMES = {"answer_bias": "answer bias", "rough_id": "rough ID"}  # variants beside "base", as tables name them
ALPHA = 0.05
TARGET = (0.93, 0.97)
QUICK = dict(
    cells=[
        "base|gp0.2|id128|S1|n20|rho0.0",
        "base|gp0.2|id128|S3|n9|rho0.5",
        "base|iid|id512|S1|n9|rho0.8",
        "answer_bias|gp0.2|id128|S1|n9|rho0.0",
    ],
    reps=10,
)
SOURCES = {
    "new": ("gp_interval.py", "gp_model.py", "gp_smooth.py", "interval.py"),
    "earlier": ("interval.py",),
    "even": ("gp_even.py", "gp_interval.py", "gp_model.py", "gp_smooth.py", "interval.py"),
}  # hashed into each row
# (src/oodcorr/analysis/): every module an interval's numbers come from


# ----------------------------------------------------------------------------- cells


def cell_key(c: dict) -> str:
    return f"{c['variant']}|{c['dependence']}|id{c['id_items']}|S{c['seeds']}|n{c['checkpoints']}|rho{c['rho']:.1f}"


def parse_key(key: str) -> dict:
    variant, dep, idi, s, n, rho = key.split("|")
    return {
        "variant": variant,
        "dependence": dep,
        "id_items": int(idi[2:]),
        "seeds": int(s[1:]),
        "checkpoints": int(n[1:]),
        "rho": float(rho[3:]),
    }


TARGET_DEPENDENCE = ("ar0.5", "ar0.8", "gp0.2", "iid")  # the ID-control cells' curves


def all_cells() -> list[dict]:
    cells = []
    for dep in DEPENDENCE:
        for idi in ID_ITEMS:
            for s in SEEDS:
                for n in CHECKPOINTS:
                    for rho in RHOS:
                        cells.append(
                            dict(variant="base", dependence=dep, id_items=idi, seeds=s, checkpoints=n, rho=rho)
                        )
    for s in SEEDS:  # answer bias: gp0.2, 128 ID items
        for n in CHECKPOINTS:
            for rho in RHOS:
                cells.append(
                    dict(variant="answer_bias", dependence="gp0.2", id_items=128, seeds=s, checkpoints=n, rho=rho)
                )
    for idi in ID_ITEMS:  # 5 seeds: gp0.2 at 40 checkpoints
        for rho in RHOS:
            cells.append(dict(variant="base", dependence="gp0.2", id_items=idi, seeds=5, checkpoints=40, rho=rho))
    for dep in ("ar0.5", "ar0.8"):  # 5 seeds of rough (AR(1)) trajectories at 40 checkpoints
        for idi in ID_ITEMS:
            for rho in RHOS:
                cells.append(dict(variant="base", dependence=dep, id_items=idi, seeds=5, checkpoints=40, rho=rho))
    for s in (3, 5):  # rough ID: the ID ability AR(1) 0.8 as well, 128 ID items, 40 checkpoints
        for rho in RHOS:
            cells.append(dict(variant="rough_id", dependence="ar0.8", id_items=128, seeds=s, checkpoints=40, rho=rho))
    have = {cell_key(c) for c in cells}
    for variant in ("rough_id", "base"):  # the ID control at a true 0, pooled seeds: rough and smooth ID
        for dep in TARGET_DEPENDENCE:
            for idi in ID_ITEMS:
                for s in (3, 5):
                    for n in (20, 40):
                        c = dict(variant=variant, dependence=dep, id_items=idi, seeds=s, checkpoints=n, rho=0.0)
                        if cell_key(c) not in have:
                            cells.append(c)
    return cells


def cell_rngs(key: str, reps: int):
    """(chunk size, Generator) per chunk of CHUNK replicates of a cell: the cell key fixes the draws."""
    crc = zlib.crc32(key.encode())
    for i, start in enumerate(range(0, reps, CHUNK)):
        yield min(CHUNK, reps - start), np.random.default_rng(np.random.SeedSequence([BASE_SEED, crc, i]))


# ----------------------------------------------------------------------------- generator


def correlation(dependence: str, t: np.ndarray) -> np.ndarray:
    """(n, n) correlation over checkpoints of the residual process (u, v) (module notes)."""
    n = len(t)
    if dependence == "iid":
        return np.eye(n)
    if dependence.startswith("gp"):
        ls = float(dependence[2:])
        return np.exp(-(np.subtract.outer(t, t) ** 2) / (2 * ls**2))
    if dependence.startswith("ar"):
        phi = float(dependence[2:])
        return phi ** np.abs(np.subtract.outer(np.arange(n), np.arange(n))).astype(float)
    raise ValueError(f"unknown dependence {dependence!r}")


def chol(K: np.ndarray) -> np.ndarray:
    return np.linalg.cholesky(K + 1e-6 * np.eye(len(K)))


def learning_curves(rng, shape, t) -> np.ndarray:
    """(*shape, n) noise-free ID abilities, one smooth rising curve per (replicate, seed)."""
    P = CURVE["plateau"] * np.exp(rng.normal(0, CURVE["plateau_sd"], shape))[..., None]
    lam = CURVE["rate"] * np.exp(rng.normal(0, CURVE["rate_sd"], shape))[..., None]
    f = rng.uniform(0.5, 1.5, shape)[..., None]
    psi = rng.uniform(0, 2 * np.pi, shape)[..., None]
    return P * (1 - np.exp(-t / lam)) + CURVE["wiggle"] * np.sin(2 * np.pi * f * t + psi)


def testset_items(rng, reps: int, n_items: int, gold_yes: float = 0.5):
    """labels (I,) (+1 first), difficulties c (reps, I), discriminations s (reps, I)."""
    n_yes = int(round(gold_yes * n_items))
    y = np.r_[np.ones(n_yes), -np.ones(n_items - n_yes)]
    return y, rng.normal(0, 1, (reps, n_items)), rng.normal(1, DISCRIMINATION_SD, (reps, n_items))


def balanced_margin(scores: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(..., n) class-balanced mean margin from per-item scores y_i m_ik (..., n, I)."""
    return 0.5 * (scores[..., y > 0].mean(-1) + scores[..., y < 0].mean(-1))


def replicate_seeds(d: dict, r: int, V: str = "Vs") -> list[dict]:
    """Replicate r of a simulated chunk (simulate) as gp_interval's seed inputs; V: "Vs" (shrunk) or "V"."""
    return [
        {
            "x": d["series"]["x"][r, s],
            "ya": d["series"]["a"][r, s],
            "yb": d["series"]["b"][r, s],
            "Vx": d[V]["x"][r, s],
            "Va": d[V]["a"][r, s],
            "Vb": d[V]["b"][r, s],
            "t": d["t"],
        }
        for s in range(d["series"]["x"].shape[1])
    ]


def simulate(
    cell: dict,
    reps: int,
    rng,
    signal_sd: float | None = None,
    tau: float = TAU,
    ood_items: int = OOD_ITEMS,
    keep_scores: bool = False,
    items: bool = True,
) -> dict:
    """One chunk of a cell: `reps` replicates x cell['seeds'] seeds x n checkpoints.

    Returns t (n,), truth {"x", "a", "b"} (reps, S, n) noise-free abilities, series {"x", "a", "b"} (reps, S, n)
    balanced margins from the items, V {"x", "a", "b"} (reps, S, n, n) their noise_cov estimates (Vs: shrunk), labels,
    and with keep_scores the per-item scores (reps, S, n, I); items=False: the noise-free part only (t, truth,
    bias)."""
    from oodcorr.stats.item_cov import noise_cov

    S, n, rho = cell["seeds"], cell["checkpoints"], float(cell["rho"])
    sd = SIGNAL_SD[cell["dependence"]] if signal_sd is None else signal_sd
    t = np.linspace(0.0, 1.0, n)
    L1 = chol(correlation(cell["dependence"], t))
    theta_x = learning_curves(rng, (reps, S), t)
    beta = rng.uniform(*BETA, (2, reps, 1, 1))
    w1, w2 = rng.standard_normal((2, reps, S, n))
    u = sd * (w1 @ L1.T)
    v = sd * ((rho * w1 + math.sqrt(1 - rho**2) * w2) @ L1.T)
    if cell["variant"] == "rough_id":  # the ID ability as rough as the OOD residuals (module notes)
        theta_x = theta_x + sd * (rng.standard_normal((reps, S, n)) @ L1.T)
    truth = {"x": theta_x, "a": beta[0] * theta_x + u, "b": beta[1] * theta_x + v}
    bias = np.zeros((reps, S, n))
    gold = (0.5, 0.5, 0.5)
    if cell["variant"] == "answer_bias":
        ab = ANSWER_BIAS
        Lb = chol(correlation(f"gp{ab['length_scale']}", t))
        smooth = rng.standard_normal((reps, S, n)) @ Lb.T
        bias = ab["sd"] * (
            math.sqrt(ab["smooth_share"]) * smooth
            + math.sqrt(1 - ab["smooth_share"]) * rng.standard_normal((reps, S, n))
        )
        gold = ab["gold_yes"]
    out = {"t": t, "truth": truth, "series": {}, "V": {}, "Vs": {}, "labels": {}, "bias": bias}
    if not items:
        return out
    if keep_scores:
        out["scores"] = {}
    coef = {1.0: 0.5, -1.0: 0.5}
    for j, n_items, g in zip("xab", (cell["id_items"], ood_items, ood_items), gold):
        y, c, s = testset_items(rng, reps, n_items, g)
        e = rng.standard_normal((reps, S, n, n_items))
        e *= tau
        # m = b + y (s theta - c) + e; per-item score y m
        m = bias[..., None] + y * (s[:, None, None, :] * truth[j][..., None] - c[:, None, None, :]) + e
        scores = y * m
        out["series"][j] = balanced_margin(scores, y)
        out["V"][j] = noise_cov(scores, y, coef)
        out["Vs"][j] = noise_cov(scores, y, coef, shrink=True)
        out["labels"][j] = y
        if keep_scores:
            out["scores"][j] = scores
    return out


def partial_corr(x, a, b) -> np.ndarray:
    """(...) sample partial correlation of a, b given x (OLS on [1, x]) over the last axis."""

    def resid(y):
        xc, yc = x - x.mean(-1, keepdims=True), y - y.mean(-1, keepdims=True)
        return yc - ((xc * yc).sum(-1) / (xc * xc).sum(-1))[..., None] * xc

    ea, eb = resid(a), resid(b)
    return (ea * eb).sum(-1) / np.sqrt((ea * ea).sum(-1) * (eb * eb).sum(-1))


def split_half(scores: np.ndarray, y: np.ndarray, x: np.ndarray, rng, splits: int = 20) -> np.ndarray:
    """(...) stratified split-half (Spearman-Brown) reliability of the residual (on x) balanced-margin
    trajectory from per-item scores (..., n, I); mean correlation over `splits` random halves."""
    rs = []
    for _ in range(splits):
        h1, h2 = [], []
        for cls in (1.0, -1.0):
            idx = rng.permutation(np.flatnonzero(y == cls))
            h = len(idx) // 2
            h1.append(idx[:h]), h2.append(idx[h : 2 * h])
        halves = []
        for hs in (h1, h2):
            halves.append(0.5 * (scores[..., hs[0]].mean(-1) + scores[..., hs[1]].mean(-1)))
        rs.append(partial_corr(x, *halves))
    r = np.mean(rs, axis=0)
    return 2 * r / (1 + r)


# ----------------------------------------------------------------------------- intervals


def new_interval_available() -> bool:
    try:
        from oodcorr.stats.gp_interval import gp_interval  # noqa: F401
    except ImportError:
        return False
    return True


def run_new(d: dict, even: bool = False) -> dict:
    """gp_interval per replicate (all its seeds at once) -> arrays (reps,); even: the even-weight estimate and its
    bootstrap interval (gp_even) from the same fit, with the fit's reliabilities and effective checkpoints."""
    from oodcorr.stats.gp_even import even_interval
    from oodcorr.stats.gp_interval import gp_interval

    R, S, _ = d["series"]["x"].shape
    keys = ("r_hat", "ci_low", "ci_high", "rel_a", "rel_b", "n_eff")
    out = {k: np.full(R, np.nan) for k in keys}
    out["reason"] = np.full(R, "", dtype=object)
    for r in range(R):
        seeds = replicate_seeds(d, r, "Vs")
        res = gp_interval(seeds, alpha=ALPHA)
        if even:
            ev = even_interval(res["terms"], res, alpha=ALPHA, seed=r) if not res["reason"] else {}
            res = {
                **res,
                "r_hat": ev.get("r", math.nan),
                "ci_low": ev.get("ci_low", math.nan),
                "ci_high": ev.get("ci_high", math.nan),
                "reason": res["reason"] or ev.get("reason", ""),
            }
        for k in keys:
            v = res.get(k, math.nan)
            out[k][r] = math.nan if v is None else float(v)
        out["reason"][r] = str(res.get("reason", "") or "")
    return out


def run_earlier(d: dict) -> dict:
    """interval.partial_interval per seed; several seeds pooled by inverse variance on Fisher's z of the
    attenuated r, divided by the weighted mean attenuation (noise_pooling._pool_noise) -> arrays (reps,)."""
    from oodcorr.stats.interval import disattenuated_bounds, partial_interval

    s, V = d["series"], d["V"]
    res = partial_interval(s["x"], s["a"], s["b"], V["x"], V["a"], V["b"], alpha=ALPHA, reliability_min=RELIABILITY_MIN)
    ok = res["reason"] == ""  # (R, S)
    S = ok.shape[1]
    if S == 1:
        lo, hi = res["ci_low"][:, 0], res["ci_high"][:, 0]
        r_hat = res["r_hat"][:, 0]
        n_eff = np.where(ok[:, 0], res["n_eff"][:, 0], np.nan)
        reason = res["reason"][:, 0]
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            w = np.where(ok, 1 / res["se_z"] ** 2, 0.0)
            W = w.sum(1)
            zr = np.arctanh(np.clip(np.nan_to_num(res["r_hat"] * res["A"]), -0.995, 0.995))
            z = (w * zr).sum(1) / W
            a = (w * np.nan_to_num(res["A"])).sum(1) / W
            lo, hi = disattenuated_bounds(np.tanh(z), a, 1 / np.sqrt(W), ALPHA)
            r_hat = np.tanh(z) / a
        defined = W > 0
        lo, hi, r_hat = (np.where(defined, v, np.nan) for v in (lo, hi, r_hat))
        n_eff = np.where(defined, np.where(ok, res["n_eff"], 0).sum(1), np.nan)
        reason = np.where(defined, "", "no_seed:" + res["reason"][:, 0].astype(str))
    with warnings.catch_warnings():  # all-NaN rows: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        rel_a = np.nanmean(np.where(np.isfinite(res["rel_a"]), res["rel_a"], np.nan), axis=1)
        rel_b = np.nanmean(np.where(np.isfinite(res["rel_b"]), res["rel_b"], np.nan), axis=1)
    return {
        "r_hat": r_hat,
        "ci_low": lo,
        "ci_high": hi,
        "rel_a": rel_a,
        "rel_b": rel_b,
        "n_eff": n_eff,
        "reason": np.asarray(reason, dtype=object),
    }


METHODS = {"new": run_new, "earlier": run_earlier, "even": lambda d: run_new(d, even=True)}


def source_hash(method: str) -> str:
    """sha1 (12 hex) of the modules implementing an interval: which version of them a row was computed with."""
    import hashlib

    import oodcorr.stats as pkg

    paths = [Path(pkg.__file__).parent / name for name in SOURCES[method]]
    if not all(path.exists() for path in paths):
        return ""
    return hashlib.sha1(b"".join(path.read_bytes() for path in paths)).hexdigest()[:12]


def stats(f: dict, rho: float) -> dict:
    """Per-interval summary of one cell's replicates (module notes)."""
    lo, hi = f["ci_low"], f["ci_high"]
    R = len(lo)
    ok = np.isfinite(lo) & np.isfinite(hi)
    with np.errstate(invalid="ignore"):
        cover = (lo <= rho) & (rho <= hi)
        excl = ok & ((lo > 0) | (hi < 0))
        rel_ok = (f["rel_a"] >= RELIABILITY_MIN) & (f["rel_b"] >= RELIABILITY_MIN)
    nd = int(ok.sum())
    cov = float(cover[ok].mean()) if nd else None
    reasons = {}
    for r in f["reason"][~ok]:
        r = str(r) or "nonfinite"
        reasons[r] = reasons.get(r, 0) + 1
    width = (hi - lo)[ok]
    fin = np.isfinite(f["r_hat"])
    nf = int(fin.sum())
    out = {
        "replicates": R,
        "defined": nd,
        "defined_share": nd / R,
        "coverage": cov,
        "coverage_se": math.sqrt(cov * (1 - cov) / nd) if nd else None,
        "rejects_zero_defined": float(excl[ok].mean()) if nd else None,
        "rejects_zero_all": float(excl.mean()),
        "reliable_share": float(rel_ok.mean()),
        "defined_share_reliable": float(ok[rel_ok].mean()) if rel_ok.any() else None,
        "median_width": float(np.median(width)) if nd else None,
        "zero_width": int((width <= 0).sum()),
        "median_n_eff": float(np.nanmedian(f["n_eff"][ok])) if nd and np.isfinite(f["n_eff"][ok]).any() else None,
        "median_r_hat": float(np.nanmedian(f["r_hat"][ok])) if nd else None,
        "bias": float(np.mean(f["r_hat"][fin]) - rho) if nf else None,  # mean estimate - rho, its MC SE
        "bias_se": float(np.std(f["r_hat"][fin], ddof=1) / math.sqrt(nf)) if nf > 1 else None,
        "mean_rel_a": float(np.nanmean(f["rel_a"])) if np.isfinite(f["rel_a"]).any() else None,
        "mean_rel_b": float(np.nanmean(f["rel_b"])) if np.isfinite(f["rel_b"]).any() else None,
        "undefined_reasons": reasons,
    }
    out["false_distinguishable"] = out["rejects_zero_defined"] if rho == 0 else None
    out["power"] = out["rejects_zero_all"] if rho != 0 else None
    out["in_target"] = None if cov is None or nd < 30 else bool(TARGET[0] <= cov <= TARGET[1])
    return out


def run_cell(cell: dict, reps: int, methods=("new", "earlier")) -> dict:
    t0 = time.perf_counter()
    key = cell_key(cell)
    cols = {m: [] for m in methods}
    secs = {m: 0.0 for m in methods}
    gen = 0.0
    for size, rng in cell_rngs(key, reps):
        g0 = time.perf_counter()
        d = simulate(cell, size, rng)
        gen += time.perf_counter() - g0
        for m in methods:
            m0 = time.perf_counter()
            cols[m].append(METHODS[m](d))
            secs[m] += time.perf_counter() - m0
    row = {
        "key": key,
        **cell,
        "replicates": reps,
        "methods": sorted(methods),
        "sources": {m: source_hash(m) for m in methods},
    }
    for m in methods:
        f = {k: np.concatenate([c[k] for c in cols[m]]) for k in cols[m][0]}
        row[m] = stats(f, cell["rho"])
        row[m]["seconds"] = round(secs[m], 2)
    row["seconds_generate"] = round(gen, 2)
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


# ----------------------------------------------------------------------------- calibration


def calibrate(reps: int = 100, checkpoints=(9, 20, 40), id_items: int = 512) -> list[dict]:
    """Per dependence and checkpoint count: the stratified split-half reliability of the 128-item OOD residual
    trajectory (residuals on the observed ID series, 512 items unless id_items), the interval's moment reliability
    rel_a, and the signal share (residual sum of squares of the noise-free OOD trajectory over that of the observed
    series, both on the observed ID) at SIGNAL_SD."""
    rows = []
    for dep in DEPENDENCE:
        for n in checkpoints:
            cell = dict(variant="base", dependence=dep, id_items=id_items, seeds=1, checkpoints=n, rho=0.0)
            rng = np.random.default_rng(np.random.SeedSequence([BASE_SEED, zlib.crc32(cell_key(cell).encode()), 99]))
            d = simulate(cell, reps, rng, keep_scores=True)
            from oodcorr.stats.interval import partial_interval

            sh = split_half(d["scores"]["a"][:, 0], d["labels"]["a"], d["series"]["x"][:, 0], rng)
            s, V = d["series"], d["V"]
            res = partial_interval(s["x"][:, 0], s["a"][:, 0], s["b"][:, 0], V["x"][:, 0], V["a"][:, 0], V["b"][:, 0])
            # true: residual (on observed x) variance of the noise-free-trajectory series vs the observed one
            x = s["x"][:, 0]
            sig = _resid_var(x, d["truth"]["a"][:, 0])
            tot = _resid_var(x, s["a"][:, 0])
            rows.append(
                {
                    "dependence": dep,
                    "checkpoints": n,
                    "id_items": id_items,
                    "signal_sd": SIGNAL_SD[dep],
                    "tau": TAU,
                    "split_half": float(np.nanmedian(sh)),
                    "split_half_mean": float(np.nanmean(sh)),
                    "rel_moment": float(np.nanmedian(res["rel_a"])),
                    "signal_share": float(np.median(sig / tot)),
                }
            )
    return rows


def _resid_var(x, y):
    xc, yc = x - x.mean(-1, keepdims=True), y - y.mean(-1, keepdims=True)
    e = yc - ((xc * yc).sum(-1) / (xc * xc).sum(-1))[..., None] * xc
    return (e * e).sum(-1)


# ----------------------------------------------------------------------------- results


def read_rows(path: Path) -> dict:
    """{key: row}: per cell and interval the last line that has that interval, so a later `--methods new` run
    keeps the cell's earlier-interval results (each interval's block carries its own replicates; `sources` the
    interval modules' hashes each block was computed with); the cell's other fields from its last line."""
    rows = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            r = json.loads(line)
            old = rows.get(r["key"])
            if old is not None:
                for m in METHODS:
                    if m in old and m not in r:
                        r[m] = old[m]
                        r.setdefault("sources", {})[m] = old.get("sources", {}).get(m, "")
                r["methods"] = sorted(m for m in METHODS if m in r)
            rows[r["key"]] = r
    return rows


def order(rows) -> list[dict]:
    idx = {cell_key(c): i for i, c in enumerate(all_cells())}
    return sorted(rows, key=lambda r: (idx.get(r["key"], 10**6), r["key"]))


def write_summary(jsonl: Path) -> dict:
    rows = order(read_rows(jsonl).values())
    summary = {
        "generator": {
            "tau": TAU,
            "signal_sd": SIGNAL_SD,
            "ood_items": OOD_ITEMS,
            "curve": CURVE,
            "beta": BETA,
            "discrimination_sd": DISCRIMINATION_SD,
            "answer_bias": ANSWER_BIAS,
            "base_seed": BASE_SEED,
            "chunk": CHUNK,
        },
        "alpha": ALPHA,
        "reliability_min": RELIABILITY_MIN,
        "target": TARGET,
        "cells": rows,
    }
    for m in METHODS:
        got = [r for r in rows if m in r and r[m]["coverage"] is not None and r[m]["defined"] >= 30]
        if got:
            summary[m] = {
                "cells": len(got),
                "in_target": sum(bool(r[m]["in_target"]) for r in got),
                "coverage_min": min(r[m]["coverage"] for r in got),
                "coverage_max": max(r[m]["coverage"] for r in got),
                "max_false_distinguishable": max(
                    (r[m]["false_distinguishable"] for r in got if r["rho"] == 0), default=None
                ),
            }
    jsonl.with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def _f(v, fmt="{:.3f}"):
    return "–" if v is None else fmt.format(v)


def markdown(jsonl: Path = OUT) -> str:
    """The docs tables from the results file: a per-dependence summary and one row per design (rho in columns)."""
    rows = order(read_rows(jsonl).values())
    if not rows:
        return "(no results yet)\n"
    reps = "; ".join(
        f"{m} interval {', '.join(map(str, sorted({r[m]['replicates'] for r in rows if m in r})))}"
        for m in METHODS
        if any(m in r for r in rows)
    )
    lines = [
        f"Replicates per cell: {reps}. Coverage among replicates where the interval is "
        f"defined; false-distinguishable: share of defined intervals excluding 0 at ρ = 0; power: share of all "
        f"replicates whose interval is defined and excludes 0; defined: min share over ρ (in brackets: among "
        f"replicates with both estimated reliabilities ≥ 0.5). – : not run.",
        "",
    ]
    # summary per scenario
    lines += [
        "| scenario | cells | new: coverage min–max | new: in 0.93–0.97 | new: max false-distinguishable "
        "| earlier: coverage min–max | earlier: in 0.93–0.97 | earlier: max false-distinguishable |",
        "|---|---|---|---|---|---|---|---|",
    ]
    groups = {}
    for r in rows:
        groups.setdefault((r["variant"], r["dependence"]), []).append(r)
    for (variant, dep), g in groups.items():
        cells = []
        for m in ("new", "earlier"):
            got = [r[m] for r in g if m in r and r[m]["coverage"] is not None and r[m]["defined"] >= 30]
            if not got:
                cells += ["–", "–", "–"]
                continue
            cov = [x["coverage"] for x in got]
            fd = [x["false_distinguishable"] for x in got if x["false_distinguishable"] is not None]
            cells += [
                f"{min(cov):.3f}–{max(cov):.3f}",
                f"{sum(bool(x['in_target']) for x in got)} / {len(got)}",
                _f(max(fd)) if fd else "–",
            ]
        name = dep if variant == "base" else f"{dep}, {VARIANT_NAMES[variant]}"
        lines.append(f"| {name} | {len(g)} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| scenario | ID items | seeds | checkpoints | coverage ρ=0 / 0.5 / 0.8 | false distinguishable "
        "| power ρ=0.5 / 0.8 | defined | median width (ρ=0) | median n_eff (ρ=0) "
        "| earlier: coverage ρ=0 / 0.5 / 0.8 | earlier: false distinguishable | earlier: defined |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    designs = {}
    for r in rows:
        design = (r["variant"], r["dependence"], r["id_items"], r["seeds"], r["checkpoints"])
        designs.setdefault(design, {})[r["rho"]] = r
    for (variant, dep, idi, s, n), by in designs.items():

        def get(m, rho, k):
            r = by.get(rho)
            return None if r is None or m not in r else r[m][k]

        def dshare(m):
            sh = [by[rho][m]["defined_share"] for rho in by if m in by[rho]]
            rl = [
                by[rho][m]["defined_share_reliable"]
                for rho in by
                if m in by[rho] and by[rho][m]["defined_share_reliable"] is not None
            ]
            if not sh:
                return "–"
            return f"{min(sh):.2f}" + (f" ({min(rl):.2f})" if rl else "")

        name = dep if variant == "base" else f"{dep}, {VARIANT_NAMES[variant]}"
        cov = " / ".join(_f(get("new", rho, "coverage")) for rho in RHOS)
        pw = " / ".join(_f(get("new", rho, "power")) for rho in RHOS[1:])
        old = " / ".join(_f(get("earlier", rho, "coverage")) for rho in RHOS)
        lines.append(
            f"| {name} | {idi} | {s} | {n} | {cov} | {_f(get('new', 0.0, 'false_distinguishable'))} | {pw} "
            f"| {dshare('new')} | {_f(get('new', 0.0, 'median_width'))} "
            f"| {_f(get('new', 0.0, 'median_n_eff'), '{:.1f}')} | {old} "
            f"| {_f(get('earlier', 0.0, 'false_distinguishable'))} | {dshare('earlier')} |"
        )
    return "\n".join(lines + [""] + id_control_lines(rows)) + "\n"


def id_control_cell(r: dict) -> bool:
    """A cell of the ID-control check: pooled seeds (3, 5) at 20 or 40 checkpoints, rho 0, smooth or rough ID."""
    return (
        r["rho"] == 0
        and r["seeds"] in (3, 5)
        and r["checkpoints"] in (20, 40)
        and r["dependence"] in TARGET_DEPENDENCE
        and r["variant"] in ("base", "rough_id")
        and "new" in r
    )


def id_control_lines(rows) -> list[str]:
    """The ID-control table: per cell at rho 0 the new interval's bias (mean estimate) and false positives, each
    with its Monte Carlo SE, against |bias| <= 0.02 and 5 % + 2 MC SE."""
    got = [r for r in rows if id_control_cell(r) and r["new"].get("bias") is not None]
    if not got:
        return []
    lines = [
        "ID control at ρ = 0, pooled seeds (smooth ID: the grid's learning curves; rough ID: with an AR(1) φ 0.8 "
        "part of their own). Bias: mean estimate; excludes 0: share of intervals excluding 0; bound 5 % + 2 MC SE.",
        "",
        "| scenario | ID | ID items | seeds × checkpoints | replicates | bias ± MC SE | excludes 0 ± MC SE "
        "| within bound | coverage | median width |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    key = {k: i for i, k in enumerate(TARGET_DEPENDENCE)}
    for r in sorted(
        got, key=lambda r: (r["variant"] != "base", key[r["dependence"]], r["id_items"], r["seeds"], r["checkpoints"])
    ):
        m = r["new"]
        exc, se = (
            m["rejects_zero_defined"],
            math.sqrt(m["rejects_zero_defined"] * (1 - m["rejects_zero_defined"]) / m["defined"]),
        )
        lines.append(
            f"| {r['dependence']} | {'rough' if r['variant'] == 'rough_id' else 'smooth'} | {r['id_items']} "
            f"| {r['seeds']} × {r['checkpoints']} | {m['replicates']} | {m['bias']:+.3f} ± {m['bias_se']:.3f} "
            f"| {exc:.3f} ± {se:.3f} | {'yes' if exc <= 0.05 + 2 * se else 'no'} | {m['coverage']:.3f} "
            f"| {m['median_width']:.3f} |"
        )
    return lines


DOCS = Path(__file__).resolve().parents[2] / "docs" / "statistics-reference.md"
MARKERS = ("<!-- interval_grid:start -->", "<!-- interval_grid:end -->")


def update_docs(jsonl: Path = OUT, docs: Path = DOCS) -> None:
    """Replace what lies between the interval_grid markers of docs/statistics-reference.md with markdown(jsonl)."""
    text = docs.read_text()
    head, rest = text.split(MARKERS[0])
    _, tail = rest.split(MARKERS[1])
    docs.write_text(f"{head}{MARKERS[0]}\n{markdown(jsonl)}{MARKERS[1]}{tail}")


# ----------------------------------------------------------------------------- CLI


def select(args) -> list[dict]:
    cells = all_cells()
    if args.quick:
        return [parse_key(k) for k in QUICK["cells"]]
    if args.dependence:
        cells = [c for c in cells if c["dependence"] in args.dependence]
    if args.id_items:
        cells = [c for c in cells if c["id_items"] in args.id_items]
    if args.seeds:
        cells = [c for c in cells if c["seeds"] in args.seeds]
    if args.checkpoints:
        cells = [c for c in cells if c["checkpoints"] in args.checkpoints]
    if args.rho:
        cells = [c for c in cells if any(abs(c["rho"] - r) < 1e-9 for r in args.rho)]
    if args.variant:
        cells = [c for c in cells if c["variant"] in args.variant]
    if args.cells:
        cells = [c for c in cells if any(fnmatch.fnmatchcase(cell_key(c), p) for p in args.cells)]
    return cells


def _work(job):
    cell, reps, methods = job
    return run_cell(cell, reps, methods)


def _init_worker():
    try:  # one BLAS thread per worker process: the workers are the parallelism
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:
        pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=None, help="replicates per cell (default 200; --quick 10)")
    ap.add_argument("--dependence", nargs="*", choices=DEPENDENCE)
    ap.add_argument("--id-items", nargs="*", type=int)
    ap.add_argument("--seeds", nargs="*", type=int)
    ap.add_argument("--checkpoints", nargs="*", type=int)
    ap.add_argument("--rho", nargs="*", type=float)
    ap.add_argument("--variant", nargs="*", choices=("base", *VARIANT_NAMES))
    ap.add_argument("--cells", nargs="*", help="glob patterns on cell keys, e.g. 'base|gp0.2|id128|S1|n40|*'")
    ap.add_argument(
        "--methods",
        default=None,
        help="comma-separated intervals: new,earlier,even (default: new and earlier; earlier only when "
        "oodcorr.stats.gp_interval is not importable)",
    )
    ap.add_argument("--quick", action="store_true", help="a CI-sized subset (4 cells, 10 replicates)")
    ap.add_argument(
        "--resume",
        action="store_true",
        help="skip cells already in the results file (same replicates, intervals and interval sources); "
        "without it the selected cells are recomputed; lines are always appended, the last wins",
    )
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--out", default=None, help=f"results .jsonl (default {OUT}; --quick: {QUICK_OUT})")
    ap.add_argument("--markdown", action="store_true", help="print the docs tables from the results file")
    ap.add_argument(
        "--update-docs",
        action="store_true",
        help="write those tables between the interval_grid markers of docs/statistics-reference.md",
    )
    ap.add_argument(
        "--calibrate",
        action="store_true",
        help="print the reliabilities of a 128-item OOD testset (--id-items, --checkpoints, --reps)",
    )
    ap.add_argument("--list", action="store_true", help="list the selected cells and exit")
    args = ap.parse_args(argv)
    out = Path(args.out) if args.out else (QUICK_OUT if args.quick else OUT)
    if args.markdown:
        sys.stdout.write(markdown(out))
        return 0
    if args.update_docs:
        update_docs(out)
        return 0
    if args.calibrate:
        for r in calibrate(args.reps or 100, tuple(args.checkpoints or CHECKPOINTS), (args.id_items or [512])[0]):
            print(json.dumps(r))
        return 0
    cells = select(args)
    if args.list:
        print("\n".join(cell_key(c) for c in cells))
        return 0
    if args.methods:
        methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
        bad = [m for m in methods if m not in METHODS]
        if bad:
            ap.error(f"unknown method(s) {bad}; choose from {list(METHODS)}")
        if "new" in methods and not new_interval_available():
            ap.error("--methods new: oodcorr.stats.gp_interval is not importable")
    else:
        methods = ("new", "earlier") if new_interval_available() else ("earlier",)
        if "new" not in methods:
            print("note: oodcorr.stats.gp_interval not importable; running the earlier interval only", file=sys.stderr)
    reps = args.reps or (QUICK["reps"] if args.quick else 200)
    done = read_rows(out) if args.resume else {}
    hashes = {m: source_hash(m) for m in methods}

    def finished(c):
        row = done.get(cell_key(c))
        return row is not None and all(
            m in row and row[m]["replicates"] == reps and row.get("sources", {}).get(m) == h for m, h in hashes.items()
        )

    jobs = [(c, reps, methods) for c in cells if not finished(c)]
    print(
        f"{len(jobs)} cells to run ({len(cells) - len(jobs)} already done), {reps} replicates, "
        f"intervals: {', '.join(methods)} -> {out}",
        file=sys.stderr,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()

    def record(row):
        with out.open("a") as fh:
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        parts = []
        for m in methods:
            s = row[m]
            parts.append(
                f"{m}: cov {_f(s['coverage'])}±{_f(s['coverage_se'])} excl0 {_f(s['rejects_zero_defined'])}"
                f" def {s['defined_share']:.2f} n_eff {_f(s['median_n_eff'], '{:.1f}')}"
            )
        print(f"{row['key']:40s} {row['seconds']:6.1f}s  " + "  |  ".join(parts), flush=True)

    if args.workers > 1 and len(jobs) > 1:
        import multiprocessing as mp

        with mp.get_context("fork").Pool(args.workers, initializer=_init_worker) as pool:
            for row in pool.imap_unordered(_work, jobs):
                record(row)
    else:
        for job in jobs:
            record(_work(job))
    summary = write_summary(out)
    print(
        f"done in {time.perf_counter() - t0:.1f}s; {len(summary['cells'])} cells in {out} "
        f"(summary {out.with_suffix('.json')})",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
