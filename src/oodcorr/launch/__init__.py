"""Run the study's train/evaluate stages as cluster jobs (`oodcorr study launch|status|collect`).

DVC stays the source of truth: the launcher asks `dvc status` which runs are out of date, runs each one's
stage commands from dvc.yaml as one job (submitit: SLURM job array, or processes on this machine), then
records the finished runs in dvc.lock with `dvc commit`, so a later `dvc repro` runs only the analysis.

Modules: schema (the `study.launch` params section; no imports, config.py reads it), job (what runs inside a
job: stdlib + submitit only), core (planning, submission, status, collection), commands (click).
Only core oodcorr modules are imported (config, io, errors, tracking); stages run through their CLI.
"""
