"""Analysis stage (`oodcorr analyze`): the study's tables, report, figures and MLflow run, from the runs' metrics
and predictions; the statistics it computes with are in oodcorr.stats.

  stage.py        `oodcorr analyze` (the DVC stage's thin click entry)
  pipeline.py     run_analysis(): the whole analysis, compute_partials()
  series.py       the analysed metric's series per run (from metrics.jsonl or the predictions)
  noise_tables.py the noise pass over the stored per-example predictions (noise columns, reliability table)
  reliability.py  one run's split-half reliability rows
  noise_summary.py the summary's "noise" block
  answer_bias.py  how much of each correlation the answer bias (yes rate) explains
  outputs.py      the results folder: checked first, replaced atomically as a whole
  headline.py     results/metrics.json, the numbers `dvc metrics show` prints
  overview.py     the terminal summary and the report's first table
  report.py       self-contained report.html: the values templates/report.html shows
  bottom_line.py  its opening "In short" list; report_noise.py its "Signal or noise?" section
  html_parts.py   its number formats, table cells and inline figures, as values
  templating.py   the Jinja2 environment (autoescaped) and its filters
  templates/      the page: report.html and one template per section, report.css, _parts.html (tables, figures)
  plots.py        heatmaps, residual scatter grid, accuracy curves
  figure_parts.py the figures' shared pieces: names, labels, stars, titles, matplotlib (Agg)
  mlflow_log.py   the analysis' one MLflow run (log_to_mlflow)

Nothing heavy is imported here, so `oodcorr --help` stays fast.
"""
