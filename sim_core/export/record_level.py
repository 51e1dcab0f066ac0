"""Which record levels a run's files can be written from: every level but `series`, the app's
Overview level, whose batch table keeps no members (the batches table and the Chrome trace list
each batch's requests)."""

from __future__ import annotations

from sim_core.errors import ConfigError

UNWRITABLE = "series"


def check_writable(record: str) -> None:
    """Refuse to write a run's files (tables, Chrome trace) from a run recorded at `record`.

    Raises:
        ConfigError: `record` is `series`, naming the level and what to record at instead.
    """
    if record == UNWRITABLE:
        raise ConfigError("engine.record 'series' keeps only what the app's Overview draws (no batch members for "
                          "the batches table and the Chrome trace): record at 'batches' or 'full' to write outputs")
