"""The scenario: one validated `SimulationConfig`, loadable from YAML or JSON."""

from sim_core.config.disaggregation import DisaggregationConfig, PoolConfig
from sim_core.config.loading import config_to_yaml, load_config, parse_config
from sim_core.config.memory import MemoryConfig
from sim_core.config.predictor import PredictorConfig
from sim_core.config.scheduler import PolicyTraits, SchedulerConfig
from sim_core.config.sections import ClusterConfig, EngineConfig
from sim_core.config.simulation import SimulationConfig
from sim_core.config.workload import (
                                      ArrivalConfig,
                                      LengthConfig,
                                      SessionConfig,
                                      WorkloadConfig,
)

__all__ = [
                                      "ArrivalConfig",
                                      "ClusterConfig",
                                      "DisaggregationConfig",
                                      "EngineConfig",
                                      "LengthConfig",
                                      "MemoryConfig",
                                      "PolicyTraits",
                                      "PoolConfig",
                                      "PredictorConfig",
                                      "SchedulerConfig",
                                      "SessionConfig",
                                      "SimulationConfig",
                                      "WorkloadConfig",
                                      "config_to_yaml",
                                      "load_config",
                                      "parse_config",
]
