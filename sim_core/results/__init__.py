"""What a run leaves behind: columnar records, the request log, the replica descriptions, metrics,
the `SimulationResult`, per-pool figures, comparisons and the text report. Built from records the
engine hands over; never imports the engine, the schedulers or the cluster."""
