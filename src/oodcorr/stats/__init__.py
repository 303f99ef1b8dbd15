"""Statistics: estimators, intervals and power, as pure functions of arrays, frames and plain arguments.

  defaults.py     alpha, the reliability floor, split count, equivalence margin: every default written once
  methods.py      the method table (raw, linear, rank, gam): residualiser, interval, columns, the primary one
  residualise.py  the residualisers (OLS on ID, on ranks, a GCV spline), batched
  partial.py      partial r per run and method, its bootstrap, Holm/BH
  noise.py        split-half reliability, residual operators, item-noise covariances, two-level bootstrap
  item_cov.py     item-noise covariances over checkpoints (stratified, shrunk), from per-item scores
  interval.py     the AR(1) effective sample size, partial_interval
  gp_model.py     the Gaussian-process trajectory model (kernels, likelihood, score)
  gp_smooth.py    the ID control's smoother (GP regression, kernel by restricted likelihood)
  gp_interval.py  the likelihood interval that decides verdicts; gp_even.py the even-checkpoint variant
  gate.py         how far a family fell below the reliability gate, and the items that would lift it
  gp_design.py    the interval's expected statistic and power for a design (the planner's engine)
  pair_ci2.py     the likelihood interval for a pair of testsets over a model's seeds, and its words
  consistency.py  Fisher-z pooling over seeds, cross-model heterogeneity
  noise_pooling.py  a seed-pooled row's noise columns (seeds' intervals pooled, or their joint likelihood)
  verdicts.py     the verdicts (consistent, model-dependent, ...) and the equivalence test
  simulate.py     trajectories with known residual correlation; item-response studies (tests, bench)

Imports numpy/scipy/pandas and the flat core modules that define scores (metrics, aggregate, errors); never
reads or writes a file, never imports settings/, tracking/, modeling/, a stage, the planner or an entry point.
"""
