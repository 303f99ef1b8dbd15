"""Run the study's train/evaluate stages as cluster jobs (`oodcorr study launch|status|collect`).

DVC stays the source of truth: the launcher asks `dvc status` which runs are out of date, runs each one's
stage commands from dvc.yaml as one job (submitit: SLURM job array, or processes on this machine), then
records the finished runs in dvc.lock with `dvc commit`, so a later `dvc repro` runs only the analysis.

Modules: core (planning, submission, watching, collection), dvc_plumbing (dvc status/commit, stage specs and
fingerprints), records (launch.json records and run states), executors (the EXECUTORS table: name -> class),
local / slurm (one module per executor), common (the Executor interface, echo), job (what runs inside a job:
stdlib + submitit only), commands (click), saved (`oodcorr study save | reanalyze`: studies/<name>/,
docs/studies.md), save_runs (save's checked copies of runs), verify (`oodcorr study verify`: objects against their
names, runs against dvc.lock). The `study.launch` params schema and defaults are in oodcorr.settings.config.
Only core oodcorr modules are imported (config, io, errors, tracking); stages run through their CLI.
"""
