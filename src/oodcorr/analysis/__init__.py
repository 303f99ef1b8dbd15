"""Analysis stage: partial correlations between OOD testsets across checkpoints (ID accuracy regressed
out), seed pooling, cross-model consistency, figures and report.

  partial.py      correlation methods (raw, linear, rank, gam), bootstrap, Holm/BH
  consistency.py  Fisher-z pooling over seeds, cross-model heterogeneity and verdicts, summary
  plots.py        heatmaps, residual scatter grid, accuracy curves
  report.py       self-contained report.html
  stage.py        `oodcorr analyze`, run_analysis() (the DVC stage) and log_to_mlflow()
  simulate.py     trajectories with known residual correlation; item-response studies (tests, bench)
  noise.py        testset noise: split-half reliability, disattenuated r and its noise-corrected CI,
                  from the stored per-example predictions
  plan.py         `oodcorr plan`: examples per testset / checkpoints per run for a target CI and reliability

Nothing heavy is imported here, so `oodcorr --help` stays fast.
"""
