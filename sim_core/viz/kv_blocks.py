"""KV-block occupancy over time, as small integer arrays (the data behind the KV-cache map).

Per replica and sampled time, each physical block is free or owned by a request; its state code
says what the owner is doing then. Large pools are aggregated into super-cells holding the
percentage of their blocks in use (0..100), so a frame never has more than `max_cells` values
per replica and every array sent to the browser is int8/int16/int32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from sim_core.results.result import SimulationResult

FREE, PREFILL, DECODE, PREEMPTED, SHARED, CACHED, SELECTED = range(7)
STATE_NAMES = ("free", "prefill", "decode", "preempted / swapped", "shared prefix", "cached, free",
               "selected request")
STATE_COLORS = ("#eceff1", "#f28e2b", "#4e79a7", "#e15759", "#76b7b2", "#b8d8be", "#ffd400")


@dataclass(frozen=True)
class BlockFrames:
    """Sampled KV-block states of one replica.

    Attributes:
        times: the sampled instants (seconds), shape (F,).
        owners: owning request id per block and instant, -1 when free; shape (F, B), int32.
        states: state code per block and instant (FREE, PREFILL, ...); shape (F, B), int8.
    """

    times: np.ndarray
    owners: np.ndarray
    states: np.ndarray


def sample_times(start: float, end: float, max_frames: int) -> np.ndarray:
    """`max_frames` evenly spaced instants from start to end inclusive (one when end <= start)."""
    if end <= start or max_frames <= 1:
        return np.array([float(start)])
    return np.linspace(start, end, max_frames)


def owner_states(owners: np.ndarray, times: np.ndarray, requests: pd.DataFrame,
                 selected: int | None = None) -> np.ndarray:
    """State code per cell: PREFILL before the owner's first token, DECODE after, FREE when
    unowned, SELECTED for the selected request's blocks."""
    first_token = requests["prefill_completed_at"].to_numpy(dtype=np.float64, na_value=np.inf)
    states = np.zeros(owners.shape, dtype=np.int8)
    owned = owners >= 0
    rows = np.broadcast_to(times[:, None], owners.shape)[owned]
    decoding = rows >= first_token[owners[owned]]
    states[owned] = np.where(decoding, DECODE, PREFILL)
    if selected is not None:
        states[owners == selected] = SELECTED
    return states


def block_holders(events: pd.DataFrame, num_blocks: int, times: np.ndarray,
                  selected: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Holders of possibly shared blocks, from one replica's block events (in the order they
    happened; delta +1/-1 a request takes/lets go of a block, +2/-2 the block gets/loses a
    prefix-cache key). Per instant and block: the owner shown (the holder that took it last,
    -1 when nobody holds it), the number of holders, whether it is cached, and whether
    `selected` holds it. Returns (owners int32, holders int32, cached bool, by_selected bool)."""
    shape = (len(times), num_blocks)
    owners, counts = np.full(shape, -1, dtype=np.int32), np.zeros(shape, dtype=np.int32)
    cached, mine = np.zeros(shape, dtype=bool), np.zeros(shape, dtype=bool)
    delta = events["delta"].to_numpy()
    position = np.arange(len(events))
    seen = np.searchsorted(events["time"].to_numpy(), times, side="right")   # events seen per instant
    holds = np.abs(delta) == 1
    acquired, released, block, request = _hold_intervals(events[holds], position[holds])
    keyed = ~holds
    key_pos, key_block, key_delta = position[keyed], events["block"].to_numpy()[keyed], delta[keyed]
    for f, bound in enumerate(seen.tolist()):
        open_ = (acquired < bound) & (released >= bound)
        counts[f] = np.bincount(block[open_], minlength=num_blocks)
        latest = np.full(num_blocks, -1, dtype=np.int64)
        np.maximum.at(latest, block[open_], np.flatnonzero(open_))
        owners[f][latest >= 0] = request[latest[latest >= 0]]
        if selected is not None:
            mine[f][block[open_ & (request == selected)]] = True
        last_key = np.full(num_blocks, -1, dtype=np.int64)
        upto = key_pos < bound
        np.maximum.at(last_key, key_block[upto], np.flatnonzero(upto))
        cached[f][last_key >= 0] = key_delta[last_key[last_key >= 0]] > 0
    return owners, counts, cached, mine


def _hold_intervals(holds: pd.DataFrame,
                    positions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each +1 event as an interval of event positions [taken, let go) (let go: a huge number
    while still held), with its block and request, in the order the blocks were taken."""
    request, block, delta = (holds[c].to_numpy() for c in ("request", "block", "delta"))
    # by request, then block, then position: `positions` increase, so a stable sort on one
    # (request, block) key keeps them in order (ids are >= 0; a third as fast as a 3-key lexsort)
    order = np.argsort(request.astype(np.int64) * (int(block.max(initial=0)) + 1) + block, kind="stable")
    pairs = (request[order][1:] == request[order][:-1]) & (block[order][1:] == block[order][:-1])
    release = np.full(len(order), np.iinfo(np.int64).max)
    release[:-1][pairs & (delta[order][1:] < 0)] = positions[order][1:][pairs & (delta[order][1:] < 0)]
    taken = delta[order] > 0
    keep = order[taken]
    arrival = np.argsort(positions[keep], kind="stable")
    return (positions[keep][arrival], release[taken][arrival], block[keep][arrival], request[keep][arrival])


def replica_frames(result: SimulationResult, replica: int, times: np.ndarray,
                   selected: int | None = None) -> BlockFrames:
    """Sampled block owners and states of one replica of a run recorded with `record: full`:
    blocks held by several requests are SHARED, unheld blocks that keep a prefix-cache key
    CACHED; where the run has the data (vllm_v0), blocks referenced by several sequences are
    SHARED and blocks whose KV is being swapped in or out are PREEMPTED (swapped) until the copy
    ends."""
    events = result.block_events
    mine = events[events["replica"] == replica]
    width = touched_blocks(result, replica)             # blocks past it were never taken: free
    owners, counts, cached, by_selected = block_holders(mine, width, times, selected)
    states = owner_states(owners, times, result.requests, None)
    states[counts > 1] = SHARED
    states[(counts == 0) & cached] = CACHED
    refs = getattr(result, "block_refs", None)
    if refs is not None and len(refs):
        shared = block_refs_at(refs[refs["replica"] == replica], width, times) > 1
        states[shared & (owners >= 0)] = SHARED
    ops = getattr(result, "cache_ops", None)
    if ops is not None and len(ops):
        _mark_swaps(result, replica, mine, times, owners, states)
    if selected is not None:
        states[by_selected | (owners == selected)] = SELECTED
    return BlockFrames(times, owners, states)


def touched_blocks(result: SimulationResult, replica: int) -> int:
    """1 + the highest block id one replica's run ever used (at least 1, at most its num_blocks).

    Pools hand out ids from 0 upwards and reuse freed ones first, so every block at or past
    this id stayed free all run: frames need columns only up to it, whatever num_blocks is."""
    highest = -1
    for table in (result.block_events, getattr(result, "block_refs", None)):
        if table is not None and len(table):
            blocks = table.loc[table["replica"] == replica, "block"]
            highest = max(highest, int(blocks.max()) if len(blocks) else -1)
    return int(min(max(highest + 1, 1), result.replicas[replica].num_blocks))


def block_refs_at(refs: pd.DataFrame, num_blocks: int, times: np.ndarray) -> np.ndarray:
    """Reference count of every block right after each instant (0 when never shared), from one
    replica's reference-count rows (time, block, refs) in the order they happened."""
    counts = np.zeros((len(times), num_blocks), dtype=np.int64)
    if not len(refs) or not len(times):
        return counts
    boundaries = np.searchsorted(refs["time"].to_numpy(), times, side="right")   # rows seen by each frame
    frame_of = np.searchsorted(boundaries, np.arange(len(refs)), side="right")
    seen = frame_of < len(times)
    last = np.full((len(times), num_blocks), -1, dtype=np.int64)
    np.maximum.at(last, (frame_of[seen], refs["block"].to_numpy()[seen]), np.flatnonzero(seen))
    last = np.maximum.accumulate(last, axis=0)                     # latest row so far, per block
    has = last >= 0
    counts[has] = refs["refs"].to_numpy()[last[has]]
    return counts


def _mark_swaps(result: SimulationResult, replica: int, events: pd.DataFrame, times: np.ndarray, owners: np.ndarray,
                states: np.ndarray) -> None:
    """PREEMPTED for blocks in transit: a swap-in's new blocks until its copy ends, and a
    swap-out's released blocks (still holding the KV being copied) unless someone took them."""
    ops = result.cache_ops[result.cache_ops["replica_id"] == replica]
    stages = result.batch_stages
    first = stages[(stages["replica_id"] == replica) & (stages["stage_id"] == 0)]
    start = dict(zip(first["batch_id"].tolist(), first["start"].tolist()))
    ends = ops.groupby("batch_id", sort=False)["seconds"].cumsum().to_numpy()
    for (batch, request, kind, formed), end in zip(ops[["batch_id", "request_id", "kind", "formed_at"]].itertuples(
            index=False), ends):
        window = (times >= formed) & (times < start.get(batch, formed) + end)
        if not window.any() or str(kind) == "copy":
            continue
        if str(kind) == "swap_in":
            states[window] = np.where(owners[window] == request, PREEMPTED, states[window])
            continue
        released = events[(events["request"] == request) & (events["delta"] < 0) & (events["time"] == formed)]
        for block in released["block"].tolist():
            idle = window & (owners[:, block] < 0)
            owners[idle, block], states[idle, block] = request, PREEMPTED


def super_cells(states: np.ndarray, group: int, num_blocks: int | None = None) -> np.ndarray:
    """Percent of blocks in use (held by a request) per group of `group` consecutive blocks, shape
    (F, ceil(num_blocks/group)), int8 in 0..100 (the last group counts only the blocks it has).
    `states` may cover only the first blocks (the rest free); num_blocks defaults to its width."""
    frames, touched = states.shape
    num_blocks = touched if num_blocks is None else num_blocks
    cells, touched_cells = -(-num_blocks // group), -(-touched // group)
    padded = np.zeros((frames, touched_cells * group), dtype=np.int32)
    padded[:, :touched] = (states != FREE) & (states != CACHED)   # cached blocks are free to reuse
    used = np.zeros((frames, cells), dtype=np.int64)
    used[:, :touched_cells] = padded.reshape(frames, touched_cells, group).sum(axis=2)
    sizes = np.full(cells, group, dtype=np.int64)
    sizes[-1] = num_blocks - group * (cells - 1)
    return np.round(100 * used / sizes).astype(np.int8)


def utilization(result: SimulationResult, replica: int) -> pd.DataFrame:
    """KV blocks used over time for one replica: columns time, used, fraction (of its blocks)."""
    series = result.timeseries
    mine = series[series["replica_id"] == replica]
    return pd.DataFrame({"time": mine["time"].to_numpy(), "used": mine["kv_blocks_used"].to_numpy(),
                         "fraction": mine["kv_blocks_used"].to_numpy() / max(result.replicas[replica].num_blocks, 1)})


def preemptions(result: SimulationResult, replica: int | None = None) -> pd.DataFrame:
    """Restart (preemption) events: time, replica, request."""
    states = result.state_events
    restarts = states[states["state"] == "restarted"]
    if replica is not None:
        restarts = restarts[restarts["replica"] == replica]
    return restarts[["time", "replica", "request"]].reset_index(drop=True)


def swap_use(result: SimulationResult, replica: int) -> pd.DataFrame:
    """vllm_v0's CPU swap space of one replica over time: columns time, held (CPU blocks, 0 at
    time 0, then after each swap-out or swap-in, taken or given back when the step that decided
    it was formed) and fraction (of the replica's swap space). Empty without swaps. A swapped request that vLLM
    later ignores (its KV can never come back) keeps its CPU blocks here."""
    ops = result.cache_ops
    mine = ops[(ops["replica_id"] == replica) & ops["kind"].isin(["swap_out", "swap_in"])]
    if mine.empty:
        return pd.DataFrame({"time": [], "held": [], "fraction": []})
    signs = np.where(mine["kind"].to_numpy() == "swap_out", 1, -1)
    held = np.concatenate([[0], np.cumsum(signs * mine["num_blocks"].to_numpy())])
    capacity = max(result.replicas[replica].num_swap_blocks, 1)
    return pd.DataFrame({"time": np.concatenate([[0.0], mine["formed_at"].to_numpy()]), "held": held,
                         "fraction": held / capacity})



def offload_use(result: SimulationResult, replica: int) -> pd.DataFrame:
    """vllm_v1's CPU offload tier of one replica over time: columns time, held (CPU blocks, 0 at
    time 0, then after each store or load recorded) and fraction (of the tier). Empty without
    offload."""
    rows = result.kv_offload
    if rows.empty or not result.replicas[replica].num_offload_blocks:
        return pd.DataFrame({"time": [], "held": [], "fraction": []})
    mine = rows[rows["replica_id"] == replica]
    held = np.concatenate([[0], mine["cpu_blocks_used"].to_numpy()])
    return pd.DataFrame({"time": np.concatenate([[0.0], mine["time"].to_numpy()]), "held": held,
                         "fraction": held / result.replicas[replica].num_offload_blocks})
