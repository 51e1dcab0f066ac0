"""Command line: `python -m sim_core run|validate|generate|compare|sweep|predictor ...`."""

from sim_core.cli.main import main

__all__ = ["main"]
