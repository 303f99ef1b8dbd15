"""The `study.launch` section of params.yaml: how `oodcorr study launch` submits the runs. No imports, so
config.py can read it while loading. `study` is no stage's params dependency: editing it re-runs nothing."""

from __future__ import annotations

_NONE = type(None)

LAUNCH_SCHEMA: dict = {
    "executor": str,                            # local | slurm
    "partition": (str, _NONE),                  # sbatch --partition (null: the cluster's default)
    "gpus_per_run": (int, _NONE),               # --gpus-per-node (null: 1 on slurm; locally CUDA is left alone)
    "cpus_per_run": (int, _NONE),               # --cpus-per-task
    "mem_gb": (int, float, _NONE),              # --mem
    "time": (int, str, _NONE),                  # --time: minutes, or [D-]HH:MM[:SS]
    "max_parallel": (int, _NONE),               # array throttle (%N); locally the number of processes at once
    "account": (str, _NONE),                    # --account
    "qos": (str, _NONE),                        # --qos
    "constraint": (str, _NONE),                 # --constraint
    "sbatch": (dict, _NONE),                    # any other sbatch option, e.g. {exclude: node12, nice: 10}
    "setup": (list, _NONE),                     # shell lines run before the job, e.g. ["module load cuda/12.4"]
    "folder": (str, _NONE),                     # job pickles and logs (shared filesystem); default .oodcorr/launch
    "max_requeue": (int, _NONE),                # preempted/timed-out jobs requeue themselves this many times
}

DEFAULTS: dict = {
    "executor": "local",
    "partition": None,
    "gpus_per_run": None,
    "cpus_per_run": None,
    "mem_gb": None,
    "time": 24 * 60,
    "max_parallel": None,
    "account": None,
    "qos": None,
    "constraint": None,
    "sbatch": None,
    "setup": None,
    "folder": ".oodcorr/launch",
    "max_requeue": 3,
}
