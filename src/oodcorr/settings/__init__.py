"""Settings: params.yaml read, checked and resolved once. `config` (the schema, validation, load_params),
`project` (Project: the params folder, the `study` section, data.out), `analyze` (AnalyzeSettings: the
`analyze` section, which the analysis stage and the planner both read), `run_settings` (RunSettings: one run's
resolved settings), `registry` (the testset registry), `names` (run keys, hub ids), `yaml_dialect` (the YAML
dialect params.yaml is read in: read_yaml) and `params_edit` (edits that keep params.yaml's comments).

Imports the flat core modules (errors, io, choices: the model names, prompt defaults and thread check it
shares with modeling/) and stats/ (its defaults); never modeling/, tracking/, a stage, launch/, the planner or an
entry point."""
