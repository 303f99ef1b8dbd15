"""Tracking: MLflow as a mirror of the run folders. `store` (URI resolution, crash-safe sqlite store,
flatten), `store_relocation` (a copied or moved store's artifact locations), `mirror` (runs/<run>/tracking
records replayed into MLflow), `run_records` (rebuilding records from run folders), `ui_links` and `commands`
(`oodcorr ui`, `oodcorr sync`).

Imports the flat core modules (errors, io, rundir, metrics) and settings/ (Project, load_params); never
modeling/, a stage, launch/ or an entry point. MLflow itself is imported lazily, inside functions."""
