"""The data stage (dvc.yaml `prepare`): testsets from the registry (hub / local / synthetic) ->
data/prepared/<name>.jsonl + manifest.json.

  stage.py      `oodcorr data prepare`, `oodcorr testsets`
  settings.py   PrepareSettings: params `data` resolved once
  prepare.py    build, validate and write the prepared folder
  loaders.py    hub / local-file / synthetic rows -> the two labels, seeded stratified subsampling
  synthetic.py  the SYNTHETIC shift suite's generators

The registry (`oodcorr.settings.registry`) and the prepared-folder reader (`oodcorr.records.prepared`) are core modules:
other stages read prepared data through them, not through this package.
"""
