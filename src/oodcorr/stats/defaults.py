"""The statistics' defaults, written once: the analyze stage's settings (oodcorr.settings.analyze) and the
planner take their defaults from here, so the statistics never import a settings module."""

ALPHA = 0.05  # significance level of every interval (analyze.alpha)
# below: a testset is too noisy to divide by; its pairs are `unreliable` (analyze.reliability_min)
RELIABILITY_MIN = 0.5
RELIABILITY_SPLITS = 200  # random item halves per split-half reliability (analyze.reliability_splits)
MAX_RESAMPLES = 100_000  # analyze.bootstrap / reliability_splits: more only fills memory (arrays of this many rows)
EQUIVALENCE = 0.3  # consistent_null: every reliable model's interval inside +/- this (analyze.equivalence)
