"""A waiting queue in priority order (vLLM's `priority` scheduling policy)."""

from __future__ import annotations

import heapq
from typing import Protocol

from sim_core.entities import Request


class WaitingQueue(Protocol):
    """The deque operations the schedulers use on `waiting` (a deque, or a PriorityQueue)."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> Request: ...
    def append(self, request: Request) -> None: ...
    def appendleft(self, request: Request) -> None: ...
    def popleft(self) -> Request: ...
    def remove(self, request: Request) -> None: ...


class PriorityQueue:
    """Waiting requests by (priority, arrival time, id): smaller priority first, FCFS among
    equals. Offers the deque operations the schedulers use; a preempted request re-enters by
    its priority like any other (`appendleft` is `append`)."""

    __slots__ = ("_heap",)

    def __init__(self) -> None:
        self._heap: list[tuple[int, float, int, Request]] = []

    def __len__(self) -> int:
        return len(self._heap)

    def __getitem__(self, index: int) -> Request:
        assert index == 0, "only the head of a priority queue can be read"
        return self._heap[0][3]

    def append(self, request: Request) -> None:
        heapq.heappush(self._heap, (request.priority, request.arrived_at, request.id, request))

    appendleft = append

    def popleft(self) -> Request:
        return heapq.heappop(self._heap)[3]

    def remove(self, request: Request) -> None:
        self._heap = [entry for entry in self._heap if entry[3] is not request]
        heapq.heapify(self._heap)
