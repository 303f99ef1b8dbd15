"""The train stage (dvc.yaml `train@<run>`): few-shot (Q)LoRA fine-tuning with scheduled checkpoints.

stage.py        `oodcorr train` and train_run(): resume / skip / fresh start, run.json
plan.py         the few-shot draw, step plan, checkpoint schedule, RNG state (no weights needed)
sizing.py       `--dry-run`: parameter counts and a peak-memory estimate from the config
model.py        preflight checks; base model + LoRA / QLoRA wrapping
loop.py         the optimisation loop and the verbaliser-token loss
checkpoints.py  atomic checkpoint writes, loading weights back
mlflow_log.py   the training run's MLflow record (params once, per-step metrics)
"""
