"""Sweeps and capacity planning: a grid of scenarios, the highest arrival rate each serves within
its SLOs, cost, Pareto fronts; run on local processes or a Ray cluster, resumable.

    from sim_core.sweep import load_sweep_spec, run_sweep, LocalBackend
    spec, base = load_sweep_spec("sweep.yaml")
    outcome = run_sweep(spec, base, LocalBackend(), out_dir="out/")
"""

from sim_core.sweep.grid import Grid, Point, build_grid
from sim_core.sweep.local import LocalBackend
from sim_core.sweep.ray_backend import RayBackend
from sim_core.sweep.runner import SweepOutcome, run_sweep, sweep_table
from sim_core.sweep.search import Capacity, bracket_search, capacity_search
from sim_core.sweep.spec import (
           SearchSettings,
           SweepSpec,
           load_sweep_spec,
           parse_sweep_spec,
)

__all__ = ["Capacity", "Grid", "LocalBackend", "Point", "RayBackend", "SearchSettings", "SweepOutcome", "SweepSpec",
           "bracket_search", "build_grid", "capacity_search", "load_sweep_spec", "parse_sweep_spec", "run_sweep",
           "sweep_table"]
