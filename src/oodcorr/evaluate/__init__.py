"""The evaluate stage (dvc.yaml `evaluate@<run>`): every checkpoint of a run x every testset.

stage.py        `oodcorr evaluate` and evaluate_run(): which pairs are pending, sharding, outputs
settings.py     EvaluateSettings: params `evaluate` resolved once (defaults, checks)
checkpoints.py  the run's checkpoints, each checked cheaply (bad ones named and skipped)
cache.py        scoring settings, cache keys, one parquet file per (checkpoint, testset)
scorer.py       one base model per process, adapters swapped per checkpoint
scoring.py      longest-first batched scoring of the verbaliser tokens; accuracy / F1 per slice
outputs.py      metrics.jsonl, accuracy.csv, summary.json, predictions/, MLflow eval/* metrics
"""
