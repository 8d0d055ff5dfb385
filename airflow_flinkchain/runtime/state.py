"""Keyed state and event-time timers of one operator subtask, behind one
interface that can be snapshotted (DESIGN "Planned next": snapshot at the
end of a run, restore at the start of the next - Flink's snapshotState /
initializeState). Heap-based, like Flink's HashMapStateBackend."""

from __future__ import annotations

import heapq
import itertools
import time
from typing import Any, Iterator, Optional

from airflow_flinkchain.functions import ValueState, ValueStateDescriptor


class HeapValueState(ValueState):
    __slots__ = ("_backend", "_table")

    def __init__(self, backend: "KeyedStateBackend", table: dict):
        self._backend = backend
        self._table = table

    def value(self) -> Any:
        return self._table.get(self._backend.current_key)

    def update(self, value: Any) -> None:
        self._table[self._backend.current_key] = value

    def clear(self) -> None:
        self._table.pop(self._backend.current_key, None)


class KeyedStateBackend:
    """Per-key state tables (name -> {key: value}) plus the event-time timers.

    `current_key` is set by the keyed operator before each record / timer.
    Tables keep keys in first-seen order, which is the (deterministic) order
    keyed operators emit end-of-input results in."""

    def __init__(self) -> None:
        self.current_key: Any = None
        self.tables: dict[str, dict] = {}
        self._timer_heap: list[tuple[int, int, Any]] = []  # (ts, seq, key); seq breaks ties
        self._timers: dict[tuple[int, Any], int] = {}  # live (ts, key) -> seq
        self._seq = itertools.count()
        self.processing_time_timers: dict[tuple[int, Any], int] = {}

    def table(self, name: str) -> dict:
        t = self.tables.get(name)
        if t is None:
            t = self.tables[name] = {}
        return t

    def get_state(self, descriptor: ValueStateDescriptor) -> HeapValueState:
        return HeapValueState(self, self.table(descriptor.name))

    # ---- timers ----------------------------------------------------------
    def register_event_time_timer(self, timestamp: int) -> None:
        entry = (int(timestamp), self.current_key)
        if entry not in self._timers:
            seq = next(self._seq)
            self._timers[entry] = seq
            heapq.heappush(self._timer_heap, (entry[0], seq, entry[1]))

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._timers.pop((int(timestamp), self.current_key), None)

    def pop_due_timer(self, watermark: int) -> Optional[tuple[int, Any]]:
        """The next live timer with timestamp <= watermark, in (timestamp, registration) order."""
        heap = self._timer_heap
        while heap and heap[0][0] <= watermark:
            ts, seq, key = heapq.heappop(heap)
            if self._timers.get((ts, key)) == seq:
                del self._timers[(ts, key)]
                return ts, key
        return None

    def register_processing_time_timer(self, timestamp: int) -> None:
        entry = (int(timestamp), self.current_key)
        self.processing_time_timers.setdefault(entry, next(self._seq))

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self.processing_time_timers.pop((int(timestamp), self.current_key), None)

    def pop_processing_time_timers(self) -> Iterator[tuple[int, Any]]:
        """BATCH: processing time never advances during the run; all fire at end of input."""
        while self.processing_time_timers:
            entries = sorted(self.processing_time_timers.items(), key=lambda kv: (kv[0][0], kv[1]))
            self.processing_time_timers.clear()
            for (ts, key), _seq in entries:
                yield ts, key

    # ---- snapshot / restore ------------------------------------------------
    def snapshot(self) -> dict:
        """Picklable copy of all state and pending timers of this subtask."""
        live = sorted((seq, ts, key) for (ts, key), seq in self._timers.items())
        return {
            "tables": {name: list(t.items()) for name, t in self.tables.items()},
            "event_time_timers": [(ts, key) for _seq, ts, key in live],
            "processing_time_timers": [k for k, _ in sorted(self.processing_time_timers.items(),
                                                            key=lambda kv: kv[1])],
        }

    def restore(self, snapshot: dict) -> None:
        self.__init__()
        for name, items in snapshot.get("tables", {}).items():
            self.tables[name] = dict(items)
        for ts, key in snapshot.get("event_time_timers", []):
            self.current_key = key
            self.register_event_time_timer(ts)
        for ts, key in snapshot.get("processing_time_timers", []):
            self.current_key = key
            self.register_processing_time_timer(ts)
        self.current_key = None


class TimerService:
    """What `ctx.timer_service()` returns (Flink's TimerService)."""

    def __init__(self, backend: KeyedStateBackend, operator):
        self._backend = backend
        self._operator = operator

    def register_event_time_timer(self, timestamp: int) -> None:
        self._backend.register_event_time_timer(timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._backend.delete_event_time_timer(timestamp)

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._backend.register_processing_time_timer(timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._backend.delete_processing_time_timer(timestamp)

    def current_watermark(self) -> int:
        return self._operator.current_watermark

    def current_processing_time(self) -> int:
        return int(time.time() * 1000)
