"""BATCH replay of one key through a window that reduces or aggregates (Flink's sort-based
batch execution: the key's records in timestamp order, nothing late, every window fired at
the end of the key).

What the per-record WindowOperator does there, without its per-record machinery: the
contents of each window are kept in a local accumulator (no keyed state lookups, no timers),
windows are found arithmetically for tumbling windows (consecutive records share one) and by
the assigner otherwise, and at the end of the key the windows fire in the order their timers
would: by window end, then in the order the windows were first seen. The user function sees
the same calls in the same order, failures take the same on_error policy, and the window
function (if any) the same contents, window, context and watermark (MAX).

Taken for non-merging event-time windows with EventTimeTrigger (the default of event-time
assigners) over a ReducingState or AggregatingState; a key whose records include one without
timestamp (or at Long.MIN_VALUE: the per-record operator reports it) goes per record.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple

from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS, MIN_WATERMARK_TS
from airflow_flinkchain.runtime.core.errors import ChainExecutionError
from airflow_flinkchain.state import AggregatingStateDescriptor, ReducingStateDescriptor
from airflow_flinkchain.window import (EventTimeTrigger, SlidingEventTimeWindows, TimeWindow,
                                       TumblingEventTimeWindows)


class KeyWindowFold:
    """fold(records) -> [(window, accumulator)] in first-seen order; fire(windows) emits them."""

    def __init__(self, core: Any, cell: Any, err: Callable[[BaseException, Any], None]):
        self.core = core
        self.cell = cell
        self.err = err
        descriptor = core.window_state_descriptor
        self.aggregate = None
        if isinstance(descriptor, AggregatingStateDescriptor):
            self.aggregate = descriptor.get_agg_function()
        else:
            self.reduce = descriptor._reduce
        self.state_name = descriptor.name
        assigner = core.assigner
        self.tumbling = (assigner.get_size(), assigner.get_offset()) \
            if type(assigner) is TumblingEventTimeWindows else None

    @staticmethod
    def applies(core: Any) -> bool:
        return (not core._merging and core.is_event_time and type(core.trigger) is EventTimeTrigger
                and type(core.assigner) in (TumblingEventTimeWindows, SlidingEventTimeWindows)
                and isinstance(core.window_state_descriptor, (ReducingStateDescriptor, AggregatingStateDescriptor)))

    @staticmethod
    def takes(records: list) -> bool:
        """Whether the key's records (sorted by timestamp: None first) all have a usable one."""
        first = records[0][0]
        return first is not None and first != MIN_WATERMARK_TS

    # ---- the fold ----------------------------------------------------------------------------
    def fold(self, records: list) -> List[Tuple[Any, Any]]:
        if self.tumbling is not None:
            return self._fold_tumbling(records)
        return self._fold_windows(records)

    def _fold_tumbling(self, records: list) -> List[Tuple[Any, Any]]:
        size, offset = self.tumbling
        windows: list = []
        start, acc = None, None
        add, cee = self._adder(), ChainExecutionError
        reduce = None if self.aggregate is not None else self.reduce
        for ts, value in records:
            s = ts - (ts - offset) % size
            if s != start:
                if start is not None:
                    windows.append((start, acc))
                start, acc = s, None
            try:
                if reduce is not None and acc is not None and value is not None:
                    acc = reduce(acc, value)  # the ReducingState's add, inlined for the common case
                else:
                    acc = add(acc, value)
            except cee:
                raise
            except Exception as exc:
                self._failed(exc, value, ts)
        if start is not None:
            windows.append((start, acc))
        return [(TimeWindow(s, s + size), a) for s, a in windows]

    def _fold_windows(self, records: list) -> List[Tuple[Any, Any]]:
        accs: dict = {}
        assign, context = self.core.assigner.assign_windows, self.core.assigner_context
        add, cee = self._adder(), ChainExecutionError
        for ts, value in records:
            try:
                for window in assign(value, ts, context):
                    accs[window] = add(accs.get(window), value)
            except cee:
                raise
            except Exception as exc:
                self._failed(exc, value, ts)
        return list(accs.items())

    def _adder(self) -> Callable[[Any, Any], Any]:
        """add(accumulator or None, value) -> the new accumulator, as the state's add()."""
        if self.aggregate is not None:
            agg = self.aggregate

            def add_aggregate(acc: Any, value: Any) -> Any:
                return agg.add(value, agg.create_accumulator() if acc is None else acc)

            return add_aggregate
        reduce, name = self.reduce, self.state_name

        def add_reduced(acc: Any, value: Any) -> Any:
            if value is None:
                raise ValueError(f"state {name!r}: cannot add None to a ReducingState")
            return value if acc is None else reduce(acc, value)

        return add_reduced

    def _failed(self, exc: BaseException, value: Any, ts: Optional[int]) -> None:
        cell = self.cell
        saved, cell.value = cell.value, ts  # the failing record's timestamp, as per record
        try:
            self.err(exc, value)
        finally:
            cell.value = saved

    # ---- the firing --------------------------------------------------------------------------
    def fire(self, windows: List[Tuple[Any, Any]]) -> None:
        """The key's windows as its timers fire them at the MAX watermark: (timestamp,
        registration order), a window's firing at its max timestamp, its cleanup (the window
        function's clear) at its cleanup time."""
        core = self.core
        timers = core.timer_service
        has_clear = core.window_function._clear is not None
        events = []
        for seq, (window, acc) in enumerate(windows):
            max_ts = window.max_timestamp()
            events.append((max_ts, 2 * seq, window, acc, True))
            if has_clear:
                cleanup = core._cleanup_time(window)
                if cleanup != max_ts and cleanup != MAX_WATERMARK_TS:  # else one timer: firing, then cleanup
                    events.append((cleanup, 2 * seq + 1, window, None, False))
        if self.tumbling is None or has_clear:
            events.sort(key=lambda e: (e[0], e[1]))
        get_result = None if self.aggregate is None else self.aggregate.get_result
        emit = core._emit_window_contents
        saved, timers.current_watermark = timers.current_watermark, MAX_WATERMARK_TS
        try:
            for t, _seq, window, acc, firing in events:
                if firing:
                    if acc is not None:
                        contents = acc if get_result is None else get_result(acc)
                        if contents is not None:
                            emit(window, contents)
                    if not has_clear or t != core._cleanup_time(window):
                        continue
                ctx = core.process_context
                ctx._window = window
                core.window_function.clear(ctx)
        finally:
            timers.current_watermark = saved
