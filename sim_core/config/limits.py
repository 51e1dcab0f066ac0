"""Bounds every validated input stays within, so that a scenario that validates also runs.

| limit          | value          | why                                                          |
|----------------|----------------|--------------------------------------------------------------|
| HORIZON_S      | 1e9 s (~32 y)  | arrivals later than this are refused (trace rows, generated  |
|                |                | arrivals, scaled times): the float64 clock must still tell   |
|                |                | MIN_STAGE_S apart there (its spacing at 1e9 s is 1.2e-7 s)   |
| MIN_STAGE_S    | 1e-6 s         | the linear cost model's cheapest stage (base_s + per_token_s) |
|                |                | (roofline stages cost at least a kernel launch, 2e-6 s)      |
| MIN_DEVICE_RATE| 1e-3           | TFLOP/s and GB/s of a scenario's own device: a batch's time  |
|                |                | stays finite (a runaway clock ends with a SimulationError)   |
| MAX_TOKENS     | 1e9 tokens     | per request and column (prompt, output, prefix); sums over   |
|                |                | 1e8 requests stay far inside int64; max_model_len (at most   |
|                |                | 1e7) bounds what a request actually holds                    |
| MAX_DEPTH      | 50 levels      | nesting of a scenario or sweep file (real ones use about 5)  |
| MAX_VALUES     | 1,000,000      | values of a YAML document with every alias use expanded:     |
|                |                | aliases cannot make a file bigger than a plain 5 MB one      |
"""

from __future__ import annotations

HORIZON_S = 1e9
MIN_STAGE_S = 1e-6
MIN_DEVICE_RATE = 1e-3
MAX_TOKENS = 1_000_000_000
MAX_DEPTH = 50
MAX_VALUES = 1_000_000
