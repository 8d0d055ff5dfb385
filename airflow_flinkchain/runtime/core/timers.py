"""Flink's InternalTimerService: event-time and processing-time timers of one keyed operator
instance, each a priority queue of (timestamp, key, namespace) without duplicates
(HeapPriorityQueueSet). Timers with the same timestamp fire in registration order.

`advance_watermark(t)` sets the current watermark, then fires every event-time timer with
timestamp <= t in timestamp order, setting the timer's key as current key first; timers the
callback registers at or below t fire in the same advance.

End of input, as Java Flink:
- STREAMING: `quiesce_processing_time()` (StreamOperatorWrapper quiesces the operator's
  ProcessingTimeService before finishing it): pending processing-time timers never fire, and
  later registrations are ignored.
- BATCH: `fire_all_at_key_end()` (BatchExecutionInternalTimeService.setCurrentKey): the key's
  event-time timers, then its processing-time timers, with the watermark at MAX; a timer
  registered by those callbacks is ignored (the service is quiesced meanwhile).
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS, MIN_WATERMARK_TS

TimerCallback = Callable[["InternalTimer"], None]


class InternalTimer:
    __slots__ = ("timestamp", "key", "namespace")

    def __init__(self, timestamp: int, key: Any, namespace: Any):
        self.timestamp = timestamp
        self.key = key
        self.namespace = namespace

    def get_timestamp(self) -> int:
        return self.timestamp

    def get_key(self) -> Any:
        return self.key

    def get_namespace(self) -> Any:
        return self.namespace

    def __eq__(self, other: object) -> bool:
        return (type(other) is InternalTimer and other.timestamp == self.timestamp
                and other.key == self.key and other.namespace == self.namespace)

    def __hash__(self) -> int:
        return hash((self.timestamp, self.key, self.namespace))

    def __repr__(self) -> str:
        return f"InternalTimer(timestamp={self.timestamp}, key={self.key!r}, namespace={self.namespace!r})"


class TimerQueue:
    """Deduplicated min-queue of timers; deletion is lazy (a deleted heap entry is skipped)."""

    __slots__ = ("_heap", "_live", "_seq", "quiesced")

    def __init__(self, seq: "itertools.count") -> None:
        self._heap: List[Tuple[int, int, Any, Any]] = []  # (timestamp, seq, key, namespace)
        self._live: Dict[Tuple[int, Any, Any], int] = {}  # (timestamp, key, namespace) -> seq
        self._seq = seq
        self.quiesced = False  # registrations are ignored (Flink's quiesced timer service)

    def add(self, timestamp: int, key: Any, namespace: Any) -> bool:
        if self.quiesced:
            return False
        entry = (timestamp, key, namespace)
        if entry in self._live:
            return False
        seq = next(self._seq)
        self._live[entry] = seq
        heapq.heappush(self._heap, (timestamp, seq, key, namespace))
        return True

    def remove(self, timestamp: int, key: Any, namespace: Any) -> bool:
        return self._live.pop((timestamp, key, namespace), None) is not None

    def _drop_stale(self) -> None:
        heap = self._heap
        live = self._live
        while heap:
            ts, seq, key, ns = heap[0]
            if live.get((ts, key, ns)) == seq:
                return
            heapq.heappop(heap)

    def peek_timestamp(self) -> Optional[int]:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def poll(self) -> InternalTimer:
        self._drop_stale()
        ts, _seq, key, ns = heapq.heappop(self._heap)
        del self._live[(ts, key, ns)]
        return InternalTimer(ts, key, ns)

    def __len__(self) -> int:
        return len(self._live)

    def clear(self) -> None:
        self._heap.clear()
        self._live.clear()

    def entries(self) -> List[Tuple[int, Any, Any]]:
        """Live timers in firing order."""
        return [e for e, _ in sorted(self._live.items(), key=lambda kv: (kv[0][0], kv[1]))]


class InternalTimerService:
    """Timers of one operator instance. `key_context` has `current_key` and `set_current_key`
    (the keyed state backend); `key_group_of(key)` cuts snapshots by key group."""

    def __init__(self, key_context: Any, triggerable: Any, key_group_of: Optional[Callable[[Any], int]] = None,
                 processing_time: Optional[Callable[[], int]] = None):
        self._keys = key_context
        self._target = triggerable  # on_event_time(timer), on_processing_time(timer)
        self._key_group_of = key_group_of or getattr(key_context, "key_group_of", None)
        self._processing_time = processing_time
        seq = itertools.count()
        self.event_time_timers = TimerQueue(seq)
        self.processing_time_timers = TimerQueue(seq)
        self.current_watermark = MIN_WATERMARK_TS

    def current_processing_time(self) -> int:
        if self._processing_time is None:
            import time
            return int(time.time() * 1000)
        return self._processing_time()

    def register_event_time_timer(self, namespace: Any, time: int) -> None:
        self.event_time_timers.add(time, self._keys.current_key, namespace)

    def delete_event_time_timer(self, namespace: Any, time: int) -> None:
        self.event_time_timers.remove(time, self._keys.current_key, namespace)

    def register_processing_time_timer(self, namespace: Any, time: int) -> None:
        self.processing_time_timers.add(time, self._keys.current_key, namespace)

    def delete_processing_time_timer(self, namespace: Any, time: int) -> None:
        self.processing_time_timers.remove(time, self._keys.current_key, namespace)

    def advance_watermark(self, time: int) -> None:
        self.current_watermark = time
        queue = self.event_time_timers
        heap = queue._heap
        if not heap or heap[0][0] > time:
            return
        live = queue._live
        on_event_time = self._target.on_event_time
        set_key = self._keys.set_current_key
        while heap and heap[0][0] <= time:
            ts, seq, key, ns = heapq.heappop(heap)
            entry = (ts, key, ns)
            if live.get(entry) != seq:
                continue  # deleted (or deleted and registered again: a later heap entry)
            del live[entry]
            set_key(key)
            on_event_time(InternalTimer(ts, key, ns))

    def advance_processing_time(self, time: int) -> None:
        queue = self.processing_time_timers
        while True:
            ts = queue.peek_timestamp()
            if ts is None or ts > time:
                return
            timer = queue.poll()
            self._keys.set_current_key(timer.key)
            self._target.on_processing_time(timer)

    def quiesce_processing_time(self) -> int:
        """STREAMING end of input: drop the pending processing-time timers (they never fire)
        and ignore later registrations; returns how many were dropped."""
        queue = self.processing_time_timers
        dropped = len(queue)
        queue.clear()
        queue.quiesced = True
        return dropped

    def fire_all_at_key_end(self) -> None:
        """BATCH end of a key: every event-time timer, then every processing-time timer, in
        timestamp order, at the MAX watermark; registrations meanwhile are ignored."""
        self.current_watermark = MAX_WATERMARK_TS
        self.event_time_timers.quiesced = self.processing_time_timers.quiesced = True
        try:
            for queue, fire in ((self.event_time_timers, self._target.on_event_time),
                                (self.processing_time_timers, self._target.on_processing_time)):
                while queue.peek_timestamp() is not None:
                    timer = queue.poll()
                    self._keys.set_current_key(timer.key)
                    fire(timer)
        finally:
            self.event_time_timers.quiesced = self.processing_time_timers.quiesced = False
            self.current_watermark = MIN_WATERMARK_TS

    def num_event_time_timers(self) -> int:
        return len(self.event_time_timers)

    def num_processing_time_timers(self) -> int:
        return len(self.processing_time_timers)

    # ---- snapshot / restore ----
    def snapshot(self) -> dict:
        """{"watermark", "key_groups": {kg: {"event": [(ts, key, ns)], "processing": [...]}}},
        timers in firing order."""
        if self._key_group_of is None:
            raise RuntimeError("the timer service needs key_group_of to snapshot by key group")
        groups: Dict[int, Dict[str, list]] = {}
        for kind, queue in (("event", self.event_time_timers), ("processing", self.processing_time_timers)):
            for ts, key, ns in queue.entries():
                groups.setdefault(self._key_group_of(key), {"event": [], "processing": []})[kind].append((ts, key, ns))
        return {"watermark": self.current_watermark, "key_groups": groups}

    def restore(self, snapshots: Iterable[dict], key_group_range: Any = None) -> None:
        """Adds the timers of the key groups in `key_group_range` (all when None) from the
        snapshots of any number of former instances."""
        if isinstance(snapshots, dict):
            snapshots = [snapshots]
        for snap in snapshots:
            for kg, timers in snap["key_groups"].items():
                if key_group_range is not None and int(kg) not in key_group_range:
                    continue
                for ts, key, ns in timers["event"]:
                    self.event_time_timers.add(ts, key, ns)
                for ts, key, ns in timers["processing"]:
                    self.processing_time_timers.add(ts, key, ns)


class SimpleTimerService:
    """What `ctx.timer_service()` returns (Flink's TimerService): timers of the current key
    (namespace None, Flink's VoidNamespace)."""

    __slots__ = ("_internal", "_operator", "_keys", "_event", "_processing")

    def __init__(self, internal: InternalTimerService, operator: Any):
        self._internal = internal
        self._operator = operator
        self._keys = operator.state_backend
        self._event = internal.event_time_timers
        self._processing = internal.processing_time_timers

    def current_processing_time(self) -> int:
        return self._internal.current_processing_time()

    def current_watermark(self) -> int:
        return self._operator.current_watermark

    def register_event_time_timer(self, timestamp: int) -> None:
        self._event.add(int(timestamp), self._keys.current_key, None)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._event.remove(int(timestamp), self._keys.current_key, None)

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._processing.add(int(timestamp), self._keys.current_key, None)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._processing.remove(int(timestamp), self._keys.current_key, None)
