"""The run records the stages hand each other, read and written in one place: a run's folder layout (rundir),
the prepared testsets (prepared), the per-item predictions (predictions), the analysis' input tables (run_tables)
and simulated runs written in the same layout (simulated_runs). It imports the core, settings and stats only."""
