"""Settings: params.yaml read, checked and resolved once. `config` (the schema, validation, load_params),
`project` (Project: the params folder, the `study` section, data.out), `run_settings` (RunSettings: one run's
resolved settings), `registry` (the testset registry), `names` (run keys, hub ids) and `params_edit` (edits
that keep params.yaml's comments).

Imports only the flat core modules (errors, io) and modeling/'s leaf modules (prompts' defaults, models'
aliases, threads' value check); never tracking/, a stage, launch/ or an entry point."""
