"""The host and engine terms of an iteration and of a request, as a table: what each costs, and
whether it is on the critical path (the engine's overlap hides some phases behind the GPU)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim_core.config.predictor import CPU_PHASES
from sim_core.predictor.eager import EagerLaunch

if TYPE_CHECKING:
    from sim_core.config import SimulationConfig
    from sim_core.predictor.shape import Predictor

HIDDEN = "hidden behind the previous iteration's GPU work"
ON_PATH = "on the iteration's critical path"


def overhead_rows(config: SimulationConfig, predictor: Predictor, num_requests: int) -> list[dict[str, object]]:
    """One row per host phase of an iteration of `num_requests` requests (seconds, and where it
    sits under the scenario's engine), then the API server's share of each request's latency and,
    for an engine with CUDA graphs, what a step too large for one adds to its GPU work and the
    launch floor it cannot go below (eager.py; the first only when it adds anything)."""
    scheduler = config.scheduler
    overlapped = scheduler.overlap_schedule(config.cluster.pipeline_parallel_size)
    hidden = set(scheduler.overlapped_cpu_phases()) if overlapped else set()
    times = predictor.cpu_times(num_requests)
    rows: list[dict[str, object]] = [
        {"term": f"cpu_{phase}", "seconds": float(times.get(f"cpu_{phase}", 0.0)),
         "where": HIDDEN if phase in hidden else ON_PATH} for phase in CPU_PHASES]
    rows.append({"term": "api_server", "seconds": scheduler.client_latency_s(),
                 "where": "added to each request's TTFT and E2E (the client's view), not to the engine"})
    eager = scheduler.eager_launch()
    if eager is not None:
        launch = EagerLaunch(*eager)
        model, pp = config.model_spec(), config.cluster.pipeline_parallel_size
        floor, gaps = launch.stage_floors(model, pp)[0], launch.stage_gaps(model, pp)[0]
        if gaps:
            rows.append({"term": "eager_gaps", "seconds": gaps,
                         "where": f"added to the GPU work of a step of more than {launch.graph_tokens} tokens (no "
                                  "CUDA graph: its kernels run one by one, with gaps a graph removes)"})
        rows.append({"term": "eager_launch", "seconds": floor,
                     "where": f"the least a step of more than {launch.graph_tokens} tokens takes on the GPU side "
                              "(no CUDA graph: the host launches its layers one by one)"})
    return rows
