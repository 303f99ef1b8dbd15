"""`oodcorr plan --budget 20` from this repository's pilot (studies/pilot), the command docs/studies.md records, with
today's planner; prints the design beside the one bench/planner/results/pilot_plan.txt recorded (9 seeds x 9
checkpoints, 19.7 h, power 0.68: a planner that priced every pair with the pooled median testset and kept HANS) and
writes the plan to pilot_plan_now.txt beside this script.

  dvc --cd studies pull -R -r studies pilot/runs   # once: the pilot's runs (2 MB)
  python bench/planner/pilot_plan.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).with_name("pilot_plan_now.txt")
ARGS = ["--pilot", "studies/pilot", "--examples-per-s", "3.7", "--train-hours", "0.4", "--train-steps", "64"]
ARGS += ["--budget", "20", "--details"]
RECORDED = {"seeds": 9, "checkpoints": 9, "hours": 19.7, "power": 0.68}  # bench/planner/results/pilot_plan.txt


def main() -> None:
    if not list((ROOT / "studies" / "pilot" / "runs").glob("*/eval/metrics.jsonl")):
        sys.exit("pull the pilot's runs first: dvc --cd studies pull -R -r studies pilot/runs")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    cmd = [sys.executable, "-m", "oodcorr", "plan", *ARGS]
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    OUT.write_text(f"$ oodcorr plan {' '.join(ARGS)}\n{res.stdout}")
    d = re.search(r"design: (\d+) seeds x (\d+) checkpoints.*?: ([0-9.]+) h", res.stdout)
    power = float(re.search(r"expected power ([0-9.]+) per pair", res.stdout).group(1))
    now = {"seeds": int(d.group(1)), "checkpoints": int(d.group(2)), "hours": float(d.group(3)), "power": power}
    for key, was in RECORDED.items():
        print(f"{key:<12} recorded {was:>6g}  now {now[key]:>6g}  ratio {now[key] / was:.2f}")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
