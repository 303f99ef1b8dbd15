"""Analysis stage: partial correlations between OOD testsets across checkpoints (ID accuracy regressed
out), seed pooling, cross-model consistency, figures and report.

  stage.py        `oodcorr analyze` (the DVC stage's thin click entry)
  settings.py     AnalyzeSettings: params `analyze` resolved once (every default and check)
  pipeline.py     run_analysis(): the whole analysis, compute_partials()
  loading.py      metrics.jsonl -> one table -> per run ID series and OOD trajectories
  partial.py      METHODS (raw, linear, rank, gam: name -> residualiser), bootstrap, Holm/BH
  noise.py        testset noise: split-half reliability, disattenuated r and its noise-corrected CI
  noise_tables.py the noise pass over the stored per-example predictions (tables, summary block)
  consistency.py  Fisher-z pooling over seeds, cross-model heterogeneity and verdicts, summary
  outputs.py      the results folder: checked first, replaced atomically as a whole
  mlflow_log.py   the analysis' one MLflow run (log_to_mlflow)
  plots.py        heatmaps, residual scatter grid, accuracy curves
  report.py       self-contained report.html
  simulate.py     trajectories with known residual correlation; item-response studies (tests, bench)
  plan.py         `oodcorr plan`: examples per testset / checkpoints per run for a target CI and reliability
  plan_budget.py  `oodcorr plan --budget`: the design a compute budget buys (gp_design's model, the search)
  plan_budget_cmd.py  its options, inputs, printout and params fragment
  plan_pilot.py   a pilot's testsets under the interval's model; measured scoring / training rates

Nothing heavy is imported here, so `oodcorr --help` stays fast.
"""
