"""Simulation core of the LLM-serving scheduling explorer (no Streamlit here).

    from sim_core import load_config, run_simulation
    result = run_simulation(load_config("scenario.yaml"))
"""

from sim_core.config import SimulationConfig, load_config, parse_config
from sim_core.engine.simulation import run_simulation
from sim_core.errors import ConfigError, SimCoreError, SimulationError, TraceError
from sim_core.results.result import SimulationResult

__all__ = ["ConfigError", "SimCoreError", "SimulationConfig", "SimulationError", "SimulationResult",
           "TraceError", "load_config", "parse_config", "run_simulation"]
