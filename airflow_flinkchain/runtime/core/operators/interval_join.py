"""Flink's IntervalJoinOperator: a keyed join of two inputs within a time interval.

Each record is added to its input's buffer (MapState timestamp -> records of the current
key), then joined with every buffered record of the other input whose timestamp lies in its
interval: for a left record `l`, right records with `l.ts + lower <= r.ts <= l.ts + upper`;
for a right record `r`, left records with `r.ts - upper <= l.ts <= r.ts - lower`. Each pair
goes to `process_element(left, right, ctx)`, its results stamped `max(l.ts, r.ts)`. An
event-time cleanup timer per record removes it once the watermark has passed the last time a
record of the other input could still join it. A record behind the operator's watermark
(the minimum of both inputs') is late: dropped, or sent to its input's late-data side output
with its own timestamp. Exclusive bounds arrive already moved by 1 ms (IntervalJoinSpec).

A keyed two-input operator (KeyedTwoInputOperator): each input's key selector sets the
current key, the operator's watermark is the minimum of both inputs' (cleanup timers fire by
it), and in BATCH mode each key's records of both inputs are replayed together in timestamp
order (nothing is late), then the key's timers fire and its state is dropped.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from airflow_flinkchain.functions import Function, ProcessJoinFunction
from airflow_flinkchain.runtime.core.elements import MIN_WATERMARK_TS
from airflow_flinkchain.runtime.core.errors import ChainExecutionError
from airflow_flinkchain.runtime.core.operators.base import adapt_function
from airflow_flinkchain.runtime.core.operators.two_input import KeyedTwoInputOperator
from airflow_flinkchain.runtime.core.operators.process import ProcessContext, make_result_emitter
from airflow_flinkchain.state import MapStateDescriptor

LEFT_BUFFER = MapStateDescriptor("LEFT_BUFFER")
RIGHT_BUFFER = MapStateDescriptor("RIGHT_BUFFER")
CLEANUP_NAMESPACE_LEFT = "CLEANUP_LEFT"
CLEANUP_NAMESPACE_RIGHT = "CLEANUP_RIGHT"


class IntervalJoinContext(ProcessContext, ProcessJoinFunction.Context):
    """The `ctx` of `process_element(left, right, ctx)`: both records' timestamps and the
    result's (`timestamp()` / `get_timestamp()`), side outputs, the current key."""

    def __init__(self, operator: "IntervalJoinOperator", side_lookup: Callable[[str], Optional[Callable]]):
        super().__init__(operator, side_lookup)
        self.left_timestamp = MIN_WATERMARK_TS
        self.right_timestamp = MIN_WATERMARK_TS

    def get_left_timestamp(self) -> int:
        return self.left_timestamp

    def get_right_timestamp(self) -> int:
        return self.right_timestamp

    def get_timestamp(self) -> int:
        return self._cell.value


class IntervalJoinOperator(KeyedTwoInputOperator):
    """The interval join of an INTERVAL_JOIN node (`node.function`: an IntervalJoinSpec;
    input 1 is the left stream, input 2 the right)."""

    def __init__(self, node, scope):
        super().__init__(node, scope)
        spec = node.function
        self.lower_bound = spec.lower_bound
        self.upper_bound = spec.upper_bound
        self.user_function = spec.function
        self.left_late_tag = spec.left_late_data_tag
        self.right_late_tag = spec.right_late_data_tag
        self._function_open = False

    # ---- lifecycle ---------------------------------------------------------
    def setup(self, runtime_context) -> None:
        super().setup(runtime_context)
        self.fn = adapt_function(self.user_function, "process_element", self.node)
        self.left_buffer = self.state_backend.get_map_state(LEFT_BUFFER)
        self.right_buffer = self.state_backend.get_map_state(RIGHT_BUFFER)

    def open(self) -> None:
        if isinstance(self.user_function, Function):
            self._function_open = True  # set before: a failing open() still gets its close() on dispose
            self.user_function.open(self.runtime_context)

    def close(self) -> None:
        if self._function_open:
            self._function_open = False
            self.user_function.close()

    def dispose(self) -> None:
        try:
            self.close()
        finally:
            self.state_backend.dispose()

    # ---- records -----------------------------------------------------------
    def record_processors(self, emit, side) -> tuple[Callable, Callable]:
        ctx = IntervalJoinContext(self, side)
        emit_results = make_result_emitter(self, emit, ctx)
        fn, cell, err, cee = self.fn, self.cell, self.error_handler(False), ChainExecutionError
        left_buffer, right_buffer = self.left_buffer, self.right_buffer
        lower, upper = self.lower_bound, self.upper_bound
        register = self.timer_service.register_event_time_timer
        name = self.name

        def late_output(tag) -> Optional[Callable]:
            if tag is None:
                return None
            return lambda value: ctx.output(tag, value)

        late_left, late_right = late_output(self.left_late_tag), late_output(self.right_late_tag)
        op = self

        def join(ours: Any, ts: int, our_buffer, other_buffer, rel_lower: int, rel_upper: int, is_left: bool,
                 late: Optional[Callable]) -> None:
            if ts is None:
                raise ValueError(
                    f"interval join {name!r}: a record of the {'left' if is_left else 'right'} input has no "
                    "timestamp; interval joins need event timestamps: assign them with "
                    "assign_timestamps_and_watermarks() before key_by()")
            watermark = op.current_watermark
            if watermark != MIN_WATERMARK_TS and ts < watermark:
                if late is not None:
                    late(ours)  # stamped with its own timestamp (the cell's)
                return
            bucket = our_buffer.get(ts)
            if bucket is None:
                bucket = [ours]
            else:
                bucket.append(ours)
            our_buffer.put(ts, bucket)  # written back: a RocksDB backend hands out copies
            low, high = ts + rel_lower, ts + rel_upper
            for other_ts, others in other_buffer.items():
                if other_ts < low or other_ts > high:
                    continue
                if is_left:
                    ctx.left_timestamp, ctx.right_timestamp = ts, other_ts
                else:
                    ctx.left_timestamp, ctx.right_timestamp = other_ts, ts
                cell.value = ts if ts >= other_ts else other_ts
                try:
                    for other in others:
                        results = fn(ours, other, ctx) if is_left else fn(other, ours, ctx)
                        if results is not None:
                            emit_results(results)
                finally:
                    cell.value = ts
            register(CLEANUP_NAMESPACE_LEFT if is_left else CLEANUP_NAMESPACE_RIGHT,
                     ts + rel_upper if rel_upper > 0 else ts)

        def processor(rel_lower: int, rel_upper: int, is_left: bool, late: Optional[Callable]) -> Callable:
            ours, other = (left_buffer, right_buffer) if is_left else (right_buffer, left_buffer)

            def process(value: Any) -> None:
                try:
                    join(value, cell.value, ours, other, rel_lower, rel_upper, is_left, late)
                except cee:
                    raise
                except Exception as exc:
                    err(exc, value)

            return process

        return (processor(lower, upper, True, late_left), processor(-upper, -lower, False, late_right))

    # ---- cleanup -----------------------------------------------------------
    def on_event_time(self, timer) -> None:
        ts = timer.timestamp
        if timer.namespace == CLEANUP_NAMESPACE_LEFT:
            self.left_buffer.remove(ts if self.upper_bound <= 0 else ts - self.upper_bound)
        elif timer.namespace == CLEANUP_NAMESPACE_RIGHT:
            self.right_buffer.remove(ts + self.lower_bound if self.lower_bound <= 0 else ts)


__all__ = ["IntervalJoinContext", "IntervalJoinOperator"]
