"""Simulated studies written as the evaluate stage writes a run (per-example predictions, metrics.jsonl), so that
tests and benchmarks run the real analysis on data with a known answer (the studies: oodcorr.stats.simulate)."""

from __future__ import annotations

import numpy as np

from oodcorr.stats.simulate import prediction_table


def write_predictions(eval_dir, study: dict, steps, id_name: str, ood_names) -> None:
    """runs/<run>/eval/predictions/step-<N>/<testset>.parquet as the evaluate stage writes them, from a
    simulated study (label alternates; the margin is log p(gold) - log p(other) of a two-way softmax)."""
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    eval_dir = Path(eval_dir)
    series = [(id_name, study["x_items"], study["x_margin"]), *zip(ood_names, study["items"], study["margins"])]
    for i, step in enumerate(steps):
        d = eval_dir / "predictions" / f"step-{int(step)}"
        d.mkdir(parents=True, exist_ok=True)
        for name, items, margins in series:
            k = items.shape[1]
            label = np.where(np.arange(k) % 2 == 0, "entailment", "non_entailment")
            z = margins[i]
            lp_gold = -np.logaddexp(0, -z)
            lp_other = -np.logaddexp(0, z)
            ent = label == "entailment"
            pred = np.where(items[i], label, np.where(ent, "non_entailment", "entailment"))
            pq.write_table(
                pa.table(
                    {
                        "id": [f"{name}-{q:05d}" for q in range(k)],
                        "label": label,
                        "prediction": pred,
                        "logp_entailment": np.where(ent, lp_gold, lp_other).astype("float32"),
                        "logp_non_entailment": np.where(ent, lp_other, lp_gold).astype("float32"),
                        "slice": [None] * k,
                    }
                ),
                d / f"{name}.parquet",
            )


def write_bias_study(
    eval_dir, study: dict, run: str, model: str, seed: int, steps, names, train_set: str = "mnli_train", shots: int = 16
) -> list[dict]:
    """predictions/step-<N>/<testset>.parquet and metrics.jsonl (every metric of the table, as the evaluate
    stage writes them) of a simulated answer_bias_study; names[0] is the ID testset. Returns the rows."""
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    from oodcorr.core.io import write_jsonl
    from oodcorr.stats.metrics import table_metrics

    eval_dir, rows = Path(eval_dir), []
    for i, step in enumerate(steps):
        d = eval_dir / "predictions" / f"step-{int(step)}"
        d.mkdir(parents=True, exist_ok=True)
        for name, gold, m in zip(names, study["gold"], study["log_odds"]):
            t = prediction_table(gold, m[i])
            pq.write_table(
                pa.table(
                    {
                        "id": [f"{name}-{q:05d}" for q in range(len(gold))],
                        **{c: (np.asarray(v, "float32") if c.startswith("logp") else v) for c, v in t.items()},
                        "slice": [None] * len(gold),
                    }
                ),
                d / f"{name}.parquet",
            )
            rows.append(
                {
                    "run": run,
                    "model": model,
                    "train_set": train_set,
                    "id_testset": names[0],
                    "shots": shots,
                    "seed": seed,
                    "step": int(step),
                    "testset": name,
                    "slice": None,
                    "n": len(gold),
                    **table_metrics(t),
                }
            )
    write_jsonl(eval_dir / "metrics.jsonl", rows)
    return rows


# ----------------------------------------------------------------------------- design grid (vectorised)
# The interval's coverage grid (bench/stats/noise_simulation.py): many runs of one design at once.
#   deviations D_jt (j = A, B): AR(1) over checkpoints with lag-1 autocorrelation phi (0: independent
#   checkpoints; 0.8: the smooth trajectories fine-tuning produces), unit variance, innovations correlated rho
#   between A and B, so the population partial correlation of the noise-free scores given noise-free ID is rho.
#   (tau 0.07 / tau_theta 0.2: reliability about 0.6 at 64 items and 0.95 at 1,000, so every item count of
#   the grid has cells where the interval is defined)
#   accuracy: P_jt = level_j + slope (P0_t - mean P0) + tau D_jt (as irt_study), items answer correctly with
#             probability Phi(a (theta_jt - b_i)), theta = scale * Phi^-1(P).
#   balanced_margin: theta_jt = theta_j + slope (theta0_t - mean theta0) + tau_theta D_jt; an item's margin
#             toward its gold label is m = a (theta - b_i) + N(0, 1); the model's "Yes" log-odds is s_i m + bias_t
#             (s = +1 for gold Yes, -1 for gold No, bias_t ~ N(0, bias_sd^2) shared by every testset at a
#             checkpoint); balanced_margin = (mean over gold-Yes - mean over gold-No of the Yes log-odds) / 2, the
#             mean of per-item scores w_i * yes_logodds_i (w = +I / (2 I_yes), -I / (2 I_no)): the bias cancels.
#   Items (difficulties b_i) are drawn once per run and scored at every checkpoint (persistent item effects).
