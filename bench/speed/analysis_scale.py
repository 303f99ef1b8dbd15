"""Analysis at study scale: 10 models x 3 seeds x 50 checkpoints x 8 testsets (1 ID + 7 OOD).

Times run_analysis with linear+rank+gam and 1,000 bootstrap resamples against a baseline in the same
process (linear only, no bootstrap), both without figures, then the full run with figures and report.
Writes bench/speed/results/analysis_scale.json. Usage: python bench/speed/analysis_scale.py [--bootstrap N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

MODELS, SEEDS, STEPS = 10, 3, 50
OOD = ["hans", "anli", "wnli", "rte", "scitail", "sick", "fever_nli"]


def simulate(folder: Path) -> list[Path]:
    import numpy as np

    from oodcorr.core.io import write_jsonl
    from oodcorr.stats.simulate import metrics_rows

    files = []
    for m in range(MODELS):
        rho = 0.5 if m < 7 else -0.5  # three models flip the sign of the (hans, anli) residual correlation
        for seed in range(SEEDS):
            path = folder / f"m{m}-s{seed}" / "eval" / "metrics.jsonl"
            write_jsonl(
                path, metrics_rows(f"model{m}", seed, STEPS, rho, OOD, rng=np.random.default_rng(1000 * m + seed))
            )
            files.append(path)
    return files


def timed(fn, repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", type=int, default=1000)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "analysis_scale.json"))
    args = ap.parse_args()

    from oodcorr.analysis.pipeline import run_analysis

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        files = simulate(tmp / "runs")
        run_analysis(files[:2], tmp / "warm", methods=("linear", "gam"), bootstrap=10, plots=False)  # imports
        baseline = timed(lambda: run_analysis(files, tmp / "base", methods=("linear",), bootstrap=0, plots=False), 3)
        full = timed(
            lambda: run_analysis(
                files, tmp / "full", methods=("linear", "rank", "gam"), bootstrap=args.bootstrap, plots=False
            ),
            2,
        )
        with_figures = timed(
            lambda: run_analysis(
                files, tmp / "figs", methods=("linear", "rank", "gam"), bootstrap=args.bootstrap, plots=True
            )
        )
        summary = json.loads((tmp / "figs" / "summary.json").read_text())
        n_figures = len(summary["figures"])
    result = {
        "scale": {
            "models": MODELS,
            "seeds": SEEDS,
            "checkpoints": STEPS,
            "testsets": len(OOD) + 1,
            "runs": MODELS * SEEDS,
            "ood_pairs": len(OOD) * (len(OOD) - 1) // 2,
        },
        "bootstrap": args.bootstrap,
        "baseline_linear_no_bootstrap_s": round(baseline, 3),
        "linear_rank_gam_raw_bootstrap_s": round(full, 3),
        "ratio_vs_baseline": round(full / baseline, 2),
        "with_figures_and_report_s": round(with_figures, 3),
        "n_figures": n_figures,
        "verdicts_gam": summary["methods"]["gam"]["verdicts"],
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"baseline {baseline:.2f}s, full {full:.2f}s (x{full / baseline:.1f}), with figures {with_figures:.2f}s")


if __name__ == "__main__":
    main()
