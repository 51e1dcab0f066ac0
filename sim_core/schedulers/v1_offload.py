"""vllm_v1's side of vLLM's OffloadingConnector (v0.33, CPU backend): what the scheduler asks
the CPU tier and when (`docs/design/kv-offload.md`).

* Lookup (admission of a request with nothing computed): after its GPU prefix hit, the
  longest run of readable CPU blocks of its prompt that no other load is reading.
* Load: a hit is loaded asynchronously; the request holds GPU blocks for its GPU hit plus the
  loaded blocks and waits (vLLM's WAITING_FOR_REMOTE_KVS) for `blocks x block bytes / host
  link` seconds (`take_loads`: the simulator times them). Once loaded it is admitted before any
  waiting request, its computed tokens being the hit (one less when that is the whole prompt).
* Store: every step, each request's full prompt blocks up to the tokens that step computes
  (the original prompt only: `offload_prompt_only`) are offered to the tier from where its last
  offer ended; they become readable when the step ends. A finished request refreshes the
  recency of every block it touched.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from sim_core.memory.cpu_tier import CpuKvTier, OffloadSize

if TYPE_CHECKING:
    from sim_core.entities import Batch, Request
    from sim_core.results.record import Recorder

STORE, LOAD = 0, 1   # kinds of the recorded offload rows


class OffloadConnector:
    """The CPU tier of one replica, the loads in flight, the stores of the steps in flight."""

    def __init__(self, size: OffloadSize, block_size: int, replica: int, recorder: Recorder) -> None:
        self.size, self.block_size, self.replica = size, block_size, replica
        self.tier = CpuKvTier(size.num_blocks)
        self._recorder = recorder
        # request id -> (request, keys loaded, tokens computed once loaded), until it is admitted
        self._loading: dict[int, tuple[Request, list[int], int]] = {}
        self.ready: deque[Request] = deque()                   # loaded, admitted before the waiting queue
        self._started: list[tuple[Request, float]] = []        # loads started this formation
        self._next_store: dict[int, int] = {}                  # request id -> next block to offer
        self._stores: dict[int, list[int]] = {}                # batch id -> keys its end makes readable

    # ---- lookup and loads ---------------------------------------------------------------------

    def num_hit_blocks(self, request: Request, keys: list[int], num_gpu_hits: int) -> int:
        """CPU blocks that extend the request's GPU hit (full prompt blocks only, none that
        another load is reading: vLLM delays such a request; here it computes them)."""
        candidates = keys[num_gpu_hits: request.num_prefill_tokens // self.block_size]
        hits = self.tier.num_hits(candidates)
        for index, key in enumerate(candidates[:hits]):
            if self.tier.is_pinned(key):
                return index
        return hits

    def start_load(self, request: Request, keys: list[int], num_gpu_hits: int, num_hits: int) -> None:
        """Load `num_hits` blocks after the GPU hit; the request waits until `on_load_done`."""
        loaded = keys[num_gpu_hits: num_gpu_hits + num_hits]
        self.tier.pin(request.id, loaded, num_gpu_hits)
        self._loading[request.id] = (request, loaded, (num_gpu_hits + num_hits) * self.block_size)
        self._next_store[request.id] = num_gpu_hits + num_hits
        seconds = self.size.load_seconds(num_hits)
        self._started.append((request, seconds))
        self._recorder.on_offload(self.replica, request.id, LOAD, num_hits, num_hits * self.size.block_bytes, 0,
                                  seconds, self.tier.num_used)

    def take_loads(self) -> list[tuple[Request, float]]:
        """The loads started since the last call, with their seconds (the simulator times them)."""
        started, self._started = self._started, []
        return started

    def on_load_done(self, request: Request) -> None:
        """The request's blocks are on the GPU: it queues for admission ahead of the waiting."""
        _, loaded, _ = self._loading[request.id]
        self.tier.unpin(loaded)
        self.ready.append(request)

    def loaded_tokens(self, request: Request) -> tuple[int, int]:
        """(computed tokens, of which loaded) of a loaded request: its GPU and CPU hits, but never
        its whole prompt (the last token is computed again to sample the next one); forgets the
        load."""
        _, keys, tokens = self._loading.pop(request.id)
        computed = min(tokens, request.num_prefill_tokens - 1)
        return computed, computed - (tokens - len(keys) * self.block_size)

    def holders(self) -> list[Request]:
        """Requests holding GPU blocks that are not running yet: loading, or loaded and waiting."""
        return [request for request, _, _ in self._loading.values()]   # ready ones stay until admitted

    # ---- stores ---------------------------------------------------------------------------------

    def on_admit(self, request: Request) -> None:
        """A lookup without a load: offers start again from the first block."""
        self._next_store[request.id] = 0

    def on_launch(self, batch: Batch, computed: list[int], keys: list[list[int]]) -> None:
        """Offer the prompt blocks the batch completes (per request: `computed`, its tokens once
        the batch ran, and `keys`, its block keys); they are readable once the batch ends."""
        stored: list[int] = []
        for request, upto, request_keys in zip(batch.requests, computed, keys):
            end = min(upto, request.initial_prefill_tokens) // self.block_size
            stored.extend(self._offer(request, request_keys, end))
        if stored:
            self._stores[batch.id] = stored

    def _offer(self, request: Request, request_keys: list[int], end: int) -> list[int]:
        start = self._next_store.get(request.id, 0)
        if end <= start:
            return []
        keys = request_keys[start:end]
        before = self.tier.num_evicted
        stored = self.tier.store(request.id, keys, start)
        if stored is None:
            return []   # no room: offered again at its next step
        self._next_store[request.id] = end
        if stored:
            self._recorder.on_offload(self.replica, request.id, STORE, len(stored),
                                      len(stored) * self.size.block_bytes, self.tier.num_evicted - before, 0.0,
                                      self.tier.num_used)
        return stored

    def has_unstored(self, requests: list[Request]) -> bool:
        """Whether a request has prompt blocks not offered yet (an offer found no room): the
        next steps would offer them again."""
        return any(self._next_store.get(r.id, 0) < r.initial_prefill_tokens // self.block_size for r in requests)

    def on_batch_end(self, batch: Batch) -> None:
        stored = self._stores.pop(batch.id, None)
        if stored:
            self.tier.complete(stored)

    def on_finished(self, request: Request) -> None:
        self.tier.on_request_finished(request.id)
        self._next_store.pop(request.id, None)
