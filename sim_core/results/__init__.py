"""What a run leaves behind: columnar records, the request log, metrics, the `SimulationResult`,
per-pool figures, comparisons and the text report. Never imports the engine."""
