"""Simulated metrics.jsonl rows with a KNOWN residual correlation, for tests and bench/speed/analysis_scale.py.

Why: real evaluations cannot tell us the right answer. Here ID accuracy rises along a saturating curve,
and each OOD testset is a (non-linear) function of ID plus noise; the noise of testsets A and B has a
chosen correlation rho per model, so a correct partial correlation (after removing f(ID)) recovers rho.
"""

from __future__ import annotations

import math
import zlib

import numpy as np

from oodcorr.stats.metrics import ANALYSABLE

SHAPES = {
    "linear": lambda u: 0.5 + 0.3 * u,
    "quadratic": lambda u: 0.45 + 0.45 * u**2,
    "sigmoid": lambda u: 0.5 + 0.35 / (1 + np.exp(-12 * (u - 0.5))),
    "hump": lambda u: 0.55 + 0.25 * np.sin(np.pi * u),
}


def trajectories(
    n_steps: int, rho, shapes=("quadratic", "sigmoid"), noise: float = 0.02, rng=None, id_noise: float = 0.01
):
    """(steps, id_acc, Y) with Y[:, j] = shape_j(ID) + e_j and corr(e) = rho (scalar: corr(e_0, e_1) = rho,
    every other pair independent; or a full correlation matrix)."""
    rng = rng if rng is not None else np.random.default_rng(0)
    T = len(shapes)
    steps = np.unique(np.r_[0, np.round(np.geomspace(1, 50 * n_steps, n_steps - 1))]).astype(int)
    while len(steps) < n_steps:  # rounding collisions
        steps = np.unique(np.r_[steps, steps.max() + np.arange(1, n_steps - len(steps) + 1)])
    t = np.linspace(0, 1, n_steps)
    u = np.clip(1 - np.exp(-4 * t) + rng.normal(0, id_noise, n_steps), 0, 1)  # progress, noisy
    id_acc = 0.5 + 0.4 * u
    if np.ndim(rho) == 2:
        C = np.asarray(rho, float)
    else:  # scalar: only the first two testsets share noise, so any rho in (-1, 1) is a valid matrix
        C = np.eye(T)
        if T > 1:
            C[0, 1] = C[1, 0] = float(rho)
    E = rng.multivariate_normal(np.zeros(T), C, size=n_steps) * noise
    Y = np.column_stack([SHAPES[s](u) for s in shapes]) + E
    return steps, id_acc, Y


def metrics_rows(
    model: str,
    seed: int,
    n_steps: int,
    rho,
    ood_names,
    shapes=None,
    noise: float = 0.02,
    train_set: str = "mnli_train",
    id_testset: str = "mnli",
    shots: int = 16,
    rng=None,
    run: str | None = None,
) -> list[dict]:
    """metrics.jsonl rows (the evaluate stage's contract) for one simulated run; the simulated trajectory
    stands for every analysable metric (oodcorr.stats.metrics.ANALYSABLE), like it does for the F1 columns."""
    rng = rng if rng is not None else np.random.default_rng(zlib.crc32(f"{model}|{seed}".encode()))
    shapes = shapes or [list(SHAPES)[i % len(SHAPES)] for i in range(len(ood_names))]
    steps, x, Y = trajectories(n_steps, rho, shapes, noise, rng)
    run = run or f"{model}-{train_set}-{shots}shot-s{seed}"
    rows = []
    for i, step in enumerate(steps):
        for name, acc in [(id_testset, x[i]), *zip(ood_names, Y[i])]:
            rows.append(
                {
                    "run": run,
                    "model": model,
                    "train_set": train_set,
                    "id_testset": id_testset,
                    "shots": shots,
                    "seed": seed,
                    "step": int(step),
                    "testset": name,
                    "slice": None,
                    "accuracy": float(acc),
                    "f1_non_entailment": float(acc),
                    "macro_f1": float(acc),
                    **{m: float(acc) for m in ANALYSABLE},
                    "n": 1000,
                }
            )
    return rows


# ----------------------------------------------------------------------------- item-response simulator
# (issue #10: is a partial correlation signal or testset sampling noise?)
#
# Truth, per checkpoint t (n checkpoints along a fixed schedule) and testset j (0 = ID):
#   true expected accuracy (over the item POPULATION, i.e. infinite items)
#       P_0t = lo + (hi - lo) * (1 - exp(-4 s_t)),  s_t = t / (n - 1)              (ID trend)
#       P_jt = c_j + slope_j * (P_0t - mean P_0) + tau_j * d_jt,  d_t ~ N(0, Sigma)  iid over checkpoints
#   so the partial correlation of (P_a, P_b) given P_0 (linear, population) is EXACTLY Sigma[a, b]:
#   that is the estimand every CI is checked against.
#   latent ability theta_jt = mu_b + sqrt(1 + a^2 sd_b^2) / a * Phi^-1(P_jt)
#   items: difficulty b_i ~ N(mu_b, sd_b^2), discrimination a (per testset);
#   response: margin z_it = a (theta_jt - b_i) + N(0, 1), correct = z_it > 0,
#   so P(correct) = Phi(a (theta - b_i)) and E_b P(correct) = Phi(a (theta - mu_b) / sqrt(1 + a^2 sd_b^2))
#   = P_jt (the probit-normal identity). The margin z is stored as log p(gold) - log p(other).
# True reliability of a residual trajectory = var(residual of P_j on P_0) / var(residual of observed Y_j
# on observed ID), both on the realised checkpoints.


def irt_study(
    n_ckpt: int,
    n_items,
    sigma,
    tau=0.03,
    n_id_items: int | None = None,
    a: float = 1.5,
    sd_b: float = 1.0,
    levels=None,
    slopes=None,
    id_range=(0.55, 0.85),
    rng=None,
) -> dict:
    """One simulated run: true expected accuracies and item-level responses.

    sigma: (T, T) correlation matrix of the OOD deviations (the true partial correlations); n_items: int or
    one per OOD testset; tau: SD of the deviations (scalar or per testset). Returns {"P0", "P" (n, T),
    "x_items" (n, I0) bool, "items" [T x (n, I_j) bool], "x_margin", "margins" [T x (n, I_j)]}."""
    from scipy.stats import norm

    rng = rng if rng is not None else np.random.default_rng(0)
    sigma = np.atleast_2d(np.asarray(sigma, float))
    T = sigma.shape[0]
    n_items = [int(n_items)] * T if np.ndim(n_items) == 0 else [int(v) for v in n_items]
    n_id_items = int(n_id_items or max(n_items))
    tau = np.broadcast_to(np.asarray(tau, float), (T,))
    levels = np.asarray(levels if levels is not None else np.linspace(0.6, 0.7, T), float)
    slopes = np.asarray(slopes if slopes is not None else np.full(T, 0.5), float)
    s = np.linspace(0, 1, n_ckpt)
    P0 = id_range[0] + (id_range[1] - id_range[0]) * (1 - np.exp(-4 * s))
    D = rng.multivariate_normal(np.zeros(T), sigma, size=n_ckpt)
    P = np.clip(levels + slopes * (P0 - P0.mean())[:, None] + tau * D, 0.02, 0.98)
    scale = math.sqrt(1 + a * a * sd_b * sd_b) / a

    def respond(p, k):
        theta = scale * norm.ppf(p)  # mu_b = 0
        b = rng.normal(0, sd_b, k)
        z = a * (theta[:, None] - b[None, :]) + rng.standard_normal((len(p), k))
        return z > 0, z

    x_items, x_margin = respond(P0, n_id_items)
    out = [respond(P[:, j], n_items[j]) for j in range(T)]
    return {
        "P0": P0,
        "P": P,
        "x_items": x_items,
        "x_margin": x_margin,
        "items": [o[0] for o in out],
        "margins": [o[1] for o in out],
    }


def true_reliability(study: dict, j: int, metric_items=None) -> float:
    """var(residual of true P_j on true P_0) / var(residual of observed accuracy on observed ID)."""
    from oodcorr.stats.partial import residualise_linear

    x_obs = study["x_items"].mean(axis=1)
    y_obs = (metric_items if metric_items is not None else study["items"][j]).mean(axis=1)
    r_true = residualise_linear(study["P0"], study["P"][:, [j]])[:, 0]
    r_obs = residualise_linear(x_obs, y_obs[:, None])[:, 0]
    return float(r_true.var() / r_obs.var())


def irt_metrics_rows(
    study: dict,
    run: str,
    model: str,
    seed: int,
    steps,
    id_name: str,
    ood_names,
    train_set: str = "mnli_train",
    shots: int = 16,
) -> list[dict]:
    """metrics.jsonl rows (accuracy = mean correctness) of a simulated study."""
    rows = []
    for i, step in enumerate(steps):
        for name, items in [(id_name, study["x_items"]), *zip(ood_names, study["items"])]:
            rows.append(
                {
                    "run": run,
                    "model": model,
                    "train_set": train_set,
                    "id_testset": id_name,
                    "shots": shots,
                    "seed": seed,
                    "step": int(step),
                    "testset": name,
                    "slice": None,
                    "accuracy": float(items[i].mean()),
                    "n": int(items.shape[1]),
                }
            )
    return rows


# ----------------------------------------------------------------------------- shared answer bias
# Truth, per checkpoint t and testset j (0 = ID): ability theta_jt; OOD abilities follow the ID trend plus
# deviations d_jt ~ N(0, sigma) (sigma = identity: the OOD abilities are uncorrelated given ID, the true
# partial r is 0); a per-checkpoint answer bias beta_t ~ N(0, bias_sd^2) shared by every testset. Items have
# fixed difficulties b_i ~ N(0, sd_b^2) and gold labels with a testset's share of "Yes" (entailment); the
# model's log-odds of " Yes" is
#     m_it = s_i a (theta_jt - b_i) + beta_t + e_it,   s_i = +1 (gold Yes) / -1 (gold No),  e ~ N(0, 1),
# and it answers "Yes" when m_it > 0. On a testset with fewer gold "Yes" than "No", a checkpoint with a larger
# beta loses accuracy; two such testsets' accuracy residuals then correlate through beta alone.


def answer_bias_study(
    n_ckpt: int,
    n_items,
    yes_shares,
    bias_sd: float,
    sigma=None,
    tau: float = 0.25,
    n_id_items: int | None = None,
    id_yes_share: float = 0.5,
    a: float = 1.5,
    sd_b: float = 1.0,
    slope: float = 0.5,
    rng=None,
) -> dict:
    """One simulated run with a shared answer bias. n_items: int or one per OOD testset; yes_shares: the gold
    "Yes" share of each OOD testset; sigma: (T, T) correlation of the OOD ability deviations (default
    identity); tau: their SD (logit units). Returns {"theta" (n, T+1), "bias" (n,), "gold" [T+1 x (I,) bool],
    "log_odds" [T+1 x (n, I)]}, testset 0 = ID."""
    rng = rng if rng is not None else np.random.default_rng(0)
    T = len(yes_shares)
    sigma = np.eye(T) if sigma is None else np.asarray(sigma, float)
    n_items = [int(n_items)] * T if np.ndim(n_items) == 0 else [int(v) for v in n_items]
    n_id_items = int(n_id_items or max(n_items))
    s = np.linspace(0, 1, n_ckpt)
    theta0 = -0.3 + 1.5 * (1 - np.exp(-4 * s))
    D = rng.multivariate_normal(np.zeros(T), sigma, size=n_ckpt)
    theta = np.column_stack([theta0, slope * theta0[:, None] + tau * D])
    bias = rng.normal(0, bias_sd, n_ckpt)
    gold, log_odds = [], []
    for j, (k, share) in enumerate(zip([n_id_items, *n_items], [id_yes_share, *yes_shares])):
        g = np.zeros(k, bool)
        g[: int(round(share * k))] = True
        b = rng.normal(0, sd_b, k)
        sign = np.where(g, 1.0, -1.0)
        m = sign * a * (theta[:, [j]] - b[None, :]) + bias[:, None] + rng.standard_normal((n_ckpt, k))
        gold.append(g)
        log_odds.append(m)
    return {"theta": theta, "bias": bias, "gold": gold, "log_odds": log_odds}


def prediction_table(gold, log_odds) -> dict:
    """A predictions table (the evaluate stage's columns; 2-D (checkpoints, items) log-prob columns) from gold
    labels and log-odds of " Yes": a two-way softmax, the answer the more likely token (ties: entailment)."""
    label = np.where(gold, "entailment", "non_entailment")
    return {
        "label": label,
        "prediction": np.where(log_odds >= 0, "entailment", "non_entailment"),
        "logp_entailment": -np.logaddexp(0, -log_odds),
        "logp_non_entailment": -np.logaddexp(0, log_odds),
    }


def _ar1_pair(reps, n, rho, phi, rng):
    """(reps, n, 2) AR(1) pairs, unit stationary variance, innovation correlation rho."""
    eta = rng.standard_normal((reps, n, 2))
    eta[..., 1] = rho * eta[..., 0] + math.sqrt(1 - rho * rho) * eta[..., 1]
    D = np.empty_like(eta)
    D[:, 0] = eta[:, 0]
    c = math.sqrt(1 - phi * phi)
    for t in range(1, n):
        D[:, t] = phi * D[:, t - 1] + c * eta[:, t]
    return D


def design_runs(
    reps: int,
    n_ckpt: int,
    n_items: int,
    rho: float,
    phi: float = 0.0,
    id_items: int = 1000,
    metric: str = "accuracy",
    bias_sd: float = 0.0,
    yes_share=(0.5, 0.5, 0.5),
    tau: float = 0.07,
    tau_theta: float = 0.2,
    a: float = 1.5,
    sd_b: float = 1.0,
    id_range=(0.55, 0.85),
    rng=None,
) -> dict:
    """`reps` simulated runs of one design (see the notes above). Returns {"items": [ID, A, B] per-item score
    arrays (reps, n, I_j) float32, "labels": [3 x (I_j,) 1 = gold Yes], "rho": rho}."""
    from scipy.stats import norm

    rng = rng if rng is not None else np.random.default_rng(0)
    s = np.linspace(0, 1, n_ckpt)
    P0 = id_range[0] + (id_range[1] - id_range[0]) * (1 - np.exp(-4 * s))
    scale = math.sqrt(1 + a * a * sd_b * sd_b) / a
    D = _ar1_pair(reps, n_ckpt, rho, phi, rng)
    sizes = [id_items, n_items, n_items]
    labels = [(np.arange(k) < round(share * k)).astype(np.int8) for k, share in zip(sizes, yes_share)]
    if metric == "accuracy":
        P = np.clip(np.array([0.6, 0.7]) + 0.5 * (P0 - P0.mean())[:, None] + tau * D, 0.02, 0.98)
        thetas = [
            np.broadcast_to(scale * norm.ppf(P0), (reps, n_ckpt)),
            scale * norm.ppf(P[..., 0]),
            scale * norm.ppf(P[..., 1]),
        ]
    elif metric == "balanced_margin":
        t0 = scale * norm.ppf(P0)
        thetas = [np.broadcast_to(t0, (reps, n_ckpt))] + [
            c + 0.5 * (t0 - t0.mean()) + tau_theta * D[..., j] for j, c in enumerate((0.3, 0.6))
        ]
    else:
        raise ValueError(f"unknown metric {metric!r}")
    bias = rng.normal(0, bias_sd, (reps, n_ckpt, 1)) if bias_sd else 0.0
    out = []
    for theta, k, lab in zip(thetas, sizes, labels):
        b = rng.normal(0, sd_b, (reps, 1, k)).astype(np.float32)
        m = rng.standard_normal((reps, n_ckpt, k), dtype=np.float32)
        m += a * (theta[..., None].astype(np.float32) - b)
        if metric == "accuracy":
            out.append((m > 0).astype(np.float32))
            continue
        sign = np.where(lab == 1, 1.0, -1.0)
        n_yes = max(int(lab.sum()), 1)
        w = np.where(lab == 1, k / (2 * n_yes), -k / (2 * max(k - n_yes, 1)))
        out.append(((sign * m + bias) * w).astype(np.float32))
    return {"items": out, "labels": labels, "rho": rho}
