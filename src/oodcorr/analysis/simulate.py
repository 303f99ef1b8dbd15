"""Simulated metrics.jsonl rows with a KNOWN residual correlation, for tests and bench/analysis_scale.py.

Why: real evaluations cannot tell us the right answer. Here ID accuracy rises along a saturating curve,
and each OOD testset is a (non-linear) function of ID plus noise; the noise of testsets A and B has a
chosen correlation rho per model, so a correct partial correlation (after removing f(ID)) recovers rho.
"""

from __future__ import annotations

import zlib

import numpy as np

SHAPES = {
    "linear": lambda u: 0.5 + 0.3 * u,
    "quadratic": lambda u: 0.45 + 0.45 * u**2,
    "sigmoid": lambda u: 0.5 + 0.35 / (1 + np.exp(-12 * (u - 0.5))),
    "hump": lambda u: 0.55 + 0.25 * np.sin(np.pi * u),
}


def trajectories(n_steps: int, rho, shapes=("quadratic", "sigmoid"), noise: float = 0.02, rng=None,
                 id_noise: float = 0.01):
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


def metrics_rows(model: str, seed: int, n_steps: int, rho, ood_names, shapes=None, noise: float = 0.02,
                 train_set: str = "mnli_train", id_testset: str = "mnli", shots: int = 16, rng=None,
                 run: str | None = None) -> list[dict]:
    """metrics.jsonl rows (the evaluate stage's contract) for one simulated run."""
    rng = rng if rng is not None else np.random.default_rng(zlib.crc32(f"{model}|{seed}".encode()))
    shapes = shapes or [list(SHAPES)[i % len(SHAPES)] for i in range(len(ood_names))]
    steps, x, Y = trajectories(n_steps, rho, shapes, noise, rng)
    run = run or f"{model}-{train_set}-{shots}shot-s{seed}"
    rows = []
    for i, step in enumerate(steps):
        for name, acc in [(id_testset, x[i]), *zip(ood_names, Y[i])]:
            rows.append({"run": run, "model": model, "train_set": train_set, "id_testset": id_testset,
                         "shots": shots, "seed": seed, "step": int(step), "testset": name, "slice": None,
                         "accuracy": float(acc), "f1_non_entailment": float(acc), "macro_f1": float(acc),
                         "n": 1000})
    return rows
