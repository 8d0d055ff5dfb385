"""Flink's WindowOperator: keyed windows with triggers, allowed lateness, late side output and
merging (session) windows, over a keyed state backend (heap by default) and the internal timer service.

The core class is independent of the chain: records come in through `process_element(value,
timestamp)`, watermarks through `process_watermark(t)`, and everything leaves through an
`output` with `collect(value, timestamp)`, `collect_side(tag, value, timestamp)` and
`emit_watermark(t)`. `run_batch` drives it in Flink's BATCH mode. Its parts: the internal
window functions (`window_functions_internal`), the contexts (`window_contexts`) and the
merging window set (`merging_window_set`).
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from airflow_flinkchain.functions import OutputTag
from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS, MIN_WATERMARK_TS
from airflow_flinkchain.runtime.core.operators.merging_window_set import MergingWindowSet
from airflow_flinkchain.runtime.core.operators.window_contexts import (WindowAssignerContext, WindowProcessContext,
                                                                       WindowTriggerContext)
from airflow_flinkchain.runtime.core.operators.window_functions_internal import (  # the last three re-exported
    InternalWindowFunction, aggregate_window, process_window, reduce_window)
from airflow_flinkchain.runtime.state.abstract_backend import AbstractKeyedStateBackend
from airflow_flinkchain.runtime.state.factory import create_keyed_state_backend
from airflow_flinkchain.runtime.core.timers import InternalTimer, InternalTimerService
from airflow_flinkchain.state import StateDescriptor, ValueStateDescriptor
from airflow_flinkchain.window import (
    EventTimeTrigger,
    MergingWindowAssigner,
    Trigger,
    TriggerResult,
    Window,
    WindowAssigner,
)

_MERGING_WINDOWS = ValueStateDescriptor("merging-window-set")
_CONTINUE = TriggerResult.CONTINUE
#: the key of every record of a `window_all` (Flink's NullByteKeySelector)
ALL_WINDOWS_KEY = 0

__all__ = ["ALL_WINDOWS_KEY", "WindowOperator", "aggregate_window", "process_window", "reduce_window", "run_batch"]


# ---- the operator -----------------------------------------------------------------------------

class WindowOperator:
    """One keyed window operator instance.

    `window_state_descriptor` + `window_function` come from `reduce_window`, `aggregate_window`
    or `process_window`. `key_selector` None: `window_all` (one key)."""

    def __init__(self, assigner: WindowAssigner, window_state_descriptor: StateDescriptor,
                 window_function: InternalWindowFunction, output: Any,
                 key_selector: Optional[Callable[[Any], Any]] = None, trigger: Optional[Trigger] = None,
                 allowed_lateness: int = 0, late_data_output_tag: Optional[OutputTag] = None,
                 backend: Optional[AbstractKeyedStateBackend] = None, name: str = "window",
                 processing_time: Optional[Callable[[], int]] = None):
        if allowed_lateness < 0:
            raise ValueError(f"window operator {name!r}: allowed_lateness must not be negative, got {allowed_lateness}")
        self.name = name
        self.assigner = assigner
        self.trigger = trigger if trigger is not None else assigner.get_default_trigger()
        self.is_event_time = assigner.is_event_time()
        if isinstance(assigner, MergingWindowAssigner) and not self.trigger.can_merge():
            raise ValueError(f"window operator {name!r}: trigger {self.trigger!r} cannot be used with the merging "
                             f"assigner {assigner!r}; use a trigger whose can_merge() is True")
        if not self.is_event_time and allowed_lateness:
            allowed_lateness = 0  # lateness only applies to event-time windows, as Flink
        self.allowed_lateness = allowed_lateness
        self.late_data_output_tag = late_data_output_tag
        self.key_selector = key_selector
        self.output = output
        self.backend = backend if backend is not None else create_keyed_state_backend("hashmap")
        self.timer_service = InternalTimerService(self.backend, self, processing_time=processing_time)
        self.window_function = window_function
        self._merging = isinstance(assigner, MergingWindowAssigner)
        self.window_state_descriptor = window_state_descriptor
        self.window_state = self.backend.create_state(window_state_descriptor)
        self._single = window_function.single
        self.assigner_context = WindowAssignerContext(self)
        self.trigger_context = WindowTriggerContext(self)
        self.process_context = WindowProcessContext(self)
        self.num_late_records_dropped = 0
        if type(self.trigger) is EventTimeTrigger and not self._merging and self.is_event_time:
            self._add_event_timer = self.timer_service.event_time_timers.add
            self.process_element = self._process_element_event_time_trigger

    # ---- lifecycle ----
    def open(self, runtime_context: Any = None) -> None:
        fn = self.window_function.user_function
        if hasattr(fn, "open"):
            fn.open(runtime_context)

    def close(self) -> None:
        fn = self.window_function.user_function
        if hasattr(fn, "close"):
            fn.close()

    @property
    def current_watermark(self) -> int:
        return self.timer_service.current_watermark

    # ---- input ----
    def process_element(self, value: Any, timestamp: Optional[int]) -> None:
        key = ALL_WINDOWS_KEY if self.key_selector is None else self.key_selector(value)
        self.backend.set_current_key(key)
        windows = self.assigner.assign_windows(value, timestamp, self.assigner_context)
        skipped = True
        window_state = self.window_state
        trigger_context = self.trigger_context
        if self._merging:
            merging_windows = self._merging_window_set()
            for window in windows:
                actual = merging_windows.add_window(window, self._merge)
                if self._is_window_late(actual):
                    merging_windows.retire_window(actual)
                    continue
                skipped = False
                state_window = merging_windows.get_state_window(actual)
                if state_window is None:
                    raise RuntimeError(f"window {window} is not in the in-flight window set")
                window_state.namespace = state_window
                window_state.add(value)
                trigger_context.window = actual
                self._on_trigger_result(trigger_context.on_element(value, timestamp), actual, state_window)
                self._register_cleanup_timer(actual)
            merging_windows.persist()
        else:
            event_time = self.is_event_time
            lateness = self.allowed_lateness
            watermark = self.timer_service.current_watermark
            for window in windows:
                cleanup = self._cleanup_time(window) if lateness else window.max_timestamp()
                if event_time and cleanup <= watermark:
                    continue  # the window is late
                skipped = False
                window_state.namespace = window
                window_state.add(value)
                trigger_context.window = window
                result = trigger_context.on_element(value, timestamp)
                # _on_trigger_result inlined on purpose for the per-record path (CONTINUE: no call)
                if result is not _CONTINUE:
                    if result.is_fire():
                        window_state.namespace = window
                        contents = window_state.get()
                        if contents is None or not (self._single or contents):
                            continue
                        self._emit_window_contents(window, contents)
                    if result.is_purge():
                        window_state.namespace = window
                        window_state.clear()
                if cleanup != MAX_WATERMARK_TS:
                    if event_time:
                        trigger_context.register_event_time_timer(cleanup)
                    else:
                        trigger_context.register_processing_time_timer(cleanup)

        if skipped and self._is_element_late(timestamp):
            if self.late_data_output_tag is not None:
                self.output.collect_side(self.late_data_output_tag, value, timestamp)
            else:
                self.num_late_records_dropped += 1

    def _process_element_event_time_trigger(self, value: Any, timestamp: Optional[int]) -> None:
        """`process_element` for EventTimeTrigger on non-merging windows, the trigger inlined:
        FIRE when the watermark already passed the window (a late firing), else a timer at the
        window's max timestamp (which is also the cleanup timer when there is no lateness)."""
        key = ALL_WINDOWS_KEY if self.key_selector is None else self.key_selector(value)
        self.backend.set_current_key(key)
        windows = self.assigner.assign_windows(value, timestamp, self.assigner_context)
        watermark = self.timer_service.current_watermark
        lateness = self.allowed_lateness
        add_timer = self._add_event_timer
        window_state = self.window_state
        skipped = True
        for window in windows:
            max_ts = window.max_timestamp()
            cleanup = self._cleanup_time(window) if lateness else max_ts
            if cleanup <= watermark:
                continue  # the window is late
            skipped = False
            window_state.namespace = window
            window_state.add(value)
            if max_ts <= watermark:
                contents = window_state.get()
                if contents is None or not (self._single or contents):
                    continue
                self._emit_window_contents(window, contents)
            else:
                add_timer(max_ts, key, window)
            if cleanup != max_ts and cleanup != MAX_WATERMARK_TS:
                add_timer(cleanup, key, window)
        if skipped and self._is_element_late(timestamp):
            if self.late_data_output_tag is not None:
                self.output.collect_side(self.late_data_output_tag, value, timestamp)
            else:
                self.num_late_records_dropped += 1

    def process_watermark(self, timestamp: int) -> None:
        self.timer_service.advance_watermark(timestamp)
        self.output.emit_watermark(timestamp)

    def advance_processing_time(self, time: int) -> None:
        self.timer_service.advance_processing_time(time)

    def end_input(self) -> None:
        """A bounded input ended: the MAX watermark fires every remaining window."""
        if self.timer_service.current_watermark < MAX_WATERMARK_TS:
            self.process_watermark(MAX_WATERMARK_TS)

    # ---- timers ----
    def on_event_time(self, timer: InternalTimer) -> None:
        self._on_timer(timer, self.trigger_context.on_event_time, self.is_event_time)

    def on_processing_time(self, timer: InternalTimer) -> None:
        self._on_timer(timer, self.trigger_context.on_processing_time, not self.is_event_time)

    def _on_timer(self, timer: InternalTimer, fire_trigger: Callable[[int], TriggerResult],
                  cleanup_domain: bool) -> None:
        """A timer of either time domain: the trigger decides; a timer at the window's cleanup
        time in the window's own domain (`cleanup_domain`) also clears its state."""
        window = timer.namespace
        self.trigger_context.window = window
        merging_windows = None
        if self._merging:
            merging_windows = self._merging_window_set()
            state_window = merging_windows.get_state_window(window)
            if state_window is None:
                # a timer of a window already merged away and cleaned up: nothing to do
                return
        else:
            state_window = window
        result = fire_trigger(timer.timestamp)
        self._on_trigger_result(result, window, state_window)
        if cleanup_domain and timer.timestamp == self._cleanup_time(window):
            self._clear_all_state(window, state_window, merging_windows)
        if merging_windows is not None:
            merging_windows.persist()

    def _on_trigger_result(self, result: TriggerResult, window: Window, state_window: Window) -> None:
        window_state = self.window_state
        if result.is_fire():
            window_state.namespace = state_window
            contents = window_state.get()
            if contents is not None and (self._single or contents):
                self._emit_window_contents(window, contents)
        if result.is_purge():
            window_state.namespace = state_window
            window_state.clear()

    # ---- internals ----
    def _merging_window_set(self) -> MergingWindowSet:
        return MergingWindowSet(self.assigner, self.backend.get_state(_MERGING_WINDOWS))

    def _merge(self, merge_result: Window, merged_windows: List[Window], state_window_result: Window,
               merged_state_windows: List[Window]) -> None:
        if self.is_event_time and merge_result.max_timestamp() + self.allowed_lateness <= self.current_watermark:
            raise RuntimeError(
                f"window operator {self.name!r}: the end timestamp of an event-time window cannot become earlier "
                f"than the current watermark by merging. Current watermark: {self.current_watermark} window: "
                f"{merge_result}"
            )
        ctx = self.trigger_context
        ctx.window = merge_result
        ctx.on_merge(merged_windows)
        ctx.merged_windows = None
        for m in merged_windows:
            ctx.window = m
            ctx.clear()
            self._delete_cleanup_timer(m)
        self.backend.merge_namespaces(self.window_state_descriptor, state_window_result, merged_state_windows)

    def _emit_window_contents(self, window: Window, contents: Any) -> None:
        ctx = self.process_context
        ctx._window = window
        key = self.backend.current_key
        results = self.window_function.process(key, window, ctx, contents)
        if results is not None:
            ts = window.max_timestamp()
            collect = self.output.collect
            for r in results:
                collect(r, ts)

    def _clear_all_state(self, window: Window, state_window: Window,
                         merging_windows: Optional[MergingWindowSet]) -> None:
        self.window_state.namespace = state_window
        self.window_state.clear()
        self.trigger_context.window = window
        self.trigger_context.clear()
        self.process_context._window = window
        self.window_function.clear(self.process_context)
        if merging_windows is not None:
            merging_windows.retire_window(window)
            merging_windows.persist()

    def _cleanup_time(self, window: Window) -> int:
        if self.is_event_time:
            max_ts = window.max_timestamp()
            cleanup = max_ts + self.allowed_lateness
            return cleanup if max_ts <= cleanup <= MAX_WATERMARK_TS else MAX_WATERMARK_TS
        return window.max_timestamp()

    def _is_window_late(self, window: Window) -> bool:
        return self.is_event_time and self._cleanup_time(window) <= self.timer_service.current_watermark

    def _is_element_late(self, timestamp: Optional[int]) -> bool:
        return (self.is_event_time and timestamp is not None
                and timestamp + self.allowed_lateness <= self.timer_service.current_watermark)

    def _register_cleanup_timer(self, window: Window) -> None:
        cleanup = self._cleanup_time(window)
        if cleanup == MAX_WATERMARK_TS:
            return  # would only fire at the end of input anyway
        if self.is_event_time:
            self.trigger_context.register_event_time_timer(cleanup)
        else:
            self.trigger_context.register_processing_time_timer(cleanup)

    def _delete_cleanup_timer(self, window: Window) -> None:
        cleanup = self._cleanup_time(window)
        if cleanup == MAX_WATERMARK_TS:
            return
        if self.is_event_time:
            self.trigger_context.delete_event_time_timer(cleanup)
        else:
            self.trigger_context.delete_processing_time_timer(cleanup)

    # ---- snapshot / restore ----
    def snapshot(self) -> dict:
        return {"state": self.backend.snapshot(), "timers": self.timer_service.snapshot()}

    def restore(self, snapshots: Iterable[dict]) -> None:
        snapshots = [snapshots] if isinstance(snapshots, dict) else list(snapshots)
        self.backend.restore([s["state"] for s in snapshots])
        self.timer_service.restore([s["timers"] for s in snapshots], self.backend.key_group_range)


def run_batch(operator: Any, records: Iterable[Tuple[Any, Optional[int]]],
              key_selector: Optional[Callable[[Any], Any]] = None) -> None:
    """Flink's BATCH execution of a keyed operator: records grouped by key (keys in first-seen
    order), each key's records in timestamp order (stable), no watermark while a key is processed
    (nothing is late), and at the end of each key its timers fire as at the MAX watermark; the
    output then gets the MAX watermark once."""
    if key_selector is None:
        key_selector = operator.key_selector
    groups: Dict[Any, List[Tuple[Any, Optional[int]]]] = {}
    has_untimed = False
    for record in records:
        if record[1] is None:
            has_untimed = True
        key = ALL_WINDOWS_KEY if key_selector is None else key_selector(record[0])
        group = groups.get(key)
        if group is None:
            groups[key] = [record]
        else:
            group.append(record)
    by_timestamp = (lambda r: MIN_WATERMARK_TS if r[1] is None else r[1]) if has_untimed else itemgetter(1)
    timers = operator.timer_service
    process = operator.process_element
    for key_records in groups.values():
        key_records.sort(key=by_timestamp)
        timers.current_watermark = MIN_WATERMARK_TS
        for value, ts in key_records:
            process(value, ts)
        timers.advance_watermark(MAX_WATERMARK_TS)
        timers.advance_processing_time(MAX_WATERMARK_TS)
    timers.current_watermark = MAX_WATERMARK_TS
    operator.output.emit_watermark(MAX_WATERMARK_TS)
