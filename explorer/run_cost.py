"""How long a scenario's run would take, from its cost estimate: the app asks for an explicit
Apply before re-simulating anything slower than the server's `apply_above_s`."""

from __future__ import annotations

from sim_core.config import SimulationConfig
from sim_core.engine.budget import estimate_cost

# CPU seconds per simulated event (the estimate's `num_events`), the median of the default
# scenario at 1,000-20,000 requests and the 17 presets on the 2-core development machine (0.5-1.2
# us; vllm_v1 with prefix caching and P/D up to 3.8 us); measured with record: full, the level of
# the KV cache and Requests pages and the costliest (the Overview simulates series, the Pipeline
# page batches: the estimate errs long for them)
SECONDS_PER_EVENT = 1.0e-6


def estimated_seconds(config: SimulationConfig) -> float:
    """About how long simulating `config` takes (0 when the estimate has no event count yet, e.g.
    a trace not read)."""
    events = estimate_cost(config).num_events
    return (events or 0) * SECONDS_PER_EVENT
