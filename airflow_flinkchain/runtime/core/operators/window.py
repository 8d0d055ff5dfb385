"""Flink's WindowOperator: keyed windows with triggers, allowed lateness, late side output and
merging (session) windows, over a keyed state backend (heap by default) and the internal timer service.

The core class is independent of the chain: records come in through `process_element(value,
timestamp)`, watermarks through `process_watermark(t)`, and everything leaves through an
`output` with `collect(value, timestamp)`, `collect_side(tag, value, timestamp)` and
`emit_watermark(t)`. `run_batch` drives it in Flink's BATCH mode.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from airflow_flinkchain.functions import OutputTag, ReduceFunction
from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS, MIN_WATERMARK_TS
from airflow_flinkchain.runtime.state.abstract_backend import AbstractKeyedStateBackend
from airflow_flinkchain.runtime.state.factory import create_keyed_state_backend
from airflow_flinkchain.runtime.core.timers import InternalTimer, InternalTimerService
from airflow_flinkchain.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from airflow_flinkchain.window import (
    EventTimeTrigger,
    MergingWindowAssigner,
    Trigger,
    TriggerResult,
    Window,
    WindowAssigner,
)
from airflow_flinkchain.window_functions import (
    AggregateFunction,
    AllWindowFunction,
    KeyedStateStore,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)

WINDOW_CONTENTS = "window-contents"
_MERGING_WINDOWS = ValueStateDescriptor("merging-window-set")
_CONTINUE = TriggerResult.CONTINUE
#: the key of every record of a `window_all` (Flink's NullByteKeySelector)
ALL_WINDOWS_KEY = 0


# ---- internal window functions --------------------------------------------------------

class InternalWindowFunction:
    """Turns the window's contents (a list, or one reduced / aggregated value) into the user
    function's call; `single` tells whether the contents are one value."""

    def __init__(self, call: Callable[[Any, Window, Any, Iterable[Any]], Optional[Iterable[Any]]],
                 single: bool, user_function: Any = None,
                 clear: Optional[Callable[[Any], None]] = None):
        self.call = call
        self.single = single
        self.user_function = user_function
        self._clear = clear

    def process(self, key: Any, window: Window, context: Any, contents: Any) -> Optional[Iterable[Any]]:
        return self.call(key, window, context, [contents] if self.single else contents)

    def clear(self, context: Any) -> None:
        if self._clear is not None:
            self._clear(context)


def _user_call(window_function: Any, where: str) -> Tuple[Callable, Optional[Callable]]:
    if isinstance(window_function, ProcessWindowFunction):
        return (lambda key, window, ctx, elements: window_function.process(key, ctx, elements)), window_function.clear
    if isinstance(window_function, ProcessAllWindowFunction):
        return (lambda key, window, ctx, elements: window_function.process(ctx, elements)), window_function.clear
    if isinstance(window_function, WindowFunction):
        return (lambda key, window, ctx, elements: window_function.apply(key, window, elements)), None
    if isinstance(window_function, AllWindowFunction):
        return (lambda key, window, ctx, elements: window_function.apply(window, elements)), None
    raise TypeError(f"{where}: the window function must be a ProcessWindowFunction, ProcessAllWindowFunction, "
                    f"WindowFunction or AllWindowFunction, got {type(window_function).__name__}")


def _pass_through(key, window, ctx, elements):
    return elements


def reduce_window(reduce_function: Any, window_function: Any = None,
                  where: str = "window reduce") -> Tuple[StateDescriptor, InternalWindowFunction]:
    """Window contents kept reduced; emits the reduced value, or passes it to `window_function`."""
    if not (isinstance(reduce_function, ReduceFunction) or callable(reduce_function)):
        raise TypeError(f"{where}: reduce needs a ReduceFunction or a callable(value1, value2)")
    return _single_value_window(ReducingStateDescriptor(WINDOW_CONTENTS, reduce_function), reduce_function,
                                window_function, where)


def aggregate_window(aggregate_function: AggregateFunction, window_function: Any = None,
                     where: str = "window aggregate") -> Tuple[StateDescriptor, InternalWindowFunction]:
    """Window contents kept as the accumulator; emits `get_result`, or passes it to `window_function`."""
    if not isinstance(aggregate_function, AggregateFunction):
        raise TypeError(f"{where}: aggregate needs an AggregateFunction (create_accumulator, add, get_result, merge)")
    return _single_value_window(AggregatingStateDescriptor(WINDOW_CONTENTS, aggregate_function),
                                aggregate_function, window_function, where)


def _single_value_window(descriptor: StateDescriptor, combine_function: Any, window_function: Any,
                         where: str) -> Tuple[StateDescriptor, InternalWindowFunction]:
    """Contents kept as one value (reduced / accumulated): emitted as is, or passed to `window_function`."""
    if window_function is None:
        return descriptor, InternalWindowFunction(_pass_through, True, combine_function)
    call, clear = _user_call(window_function, where)
    return descriptor, InternalWindowFunction(call, True, window_function, clear)


def process_window(window_function: Any, where: str = "window process") -> Tuple[StateDescriptor, InternalWindowFunction]:
    """Window contents kept as the list of elements, handed whole to `window_function`
    (process or apply)."""
    call, clear = _user_call(window_function, where)
    return ListStateDescriptor(WINDOW_CONTENTS), InternalWindowFunction(call, False, window_function, clear)


# ---- contexts -------------------------------------------------------------------------------

class _ScopedStateStore(KeyedStateStore):
    """Keyed state of the current key in one namespace (a window, or None across windows)."""

    __slots__ = ("_backend", "_namespace")

    def __init__(self, backend: AbstractKeyedStateBackend, namespace: Any):
        self._backend = backend
        self._namespace = namespace

    def _get(self, descriptor):
        return self._backend.get_partitioned_state(self._namespace, descriptor)

    get_state = get_list_state = get_map_state = get_reducing_state = get_aggregating_state = _get


class _RuntimeContextView:
    """What a window assigner's context offers as runtime context: keyed state of the key."""

    def __init__(self, backend: AbstractKeyedStateBackend):
        self._store = _ScopedStateStore(backend, None)

    def get_state(self, descriptor):
        return self._store.get_state(descriptor)


class WindowAssignerContext(WindowAssigner.WindowAssignerContext):
    def __init__(self, operator: "WindowOperator"):
        self._operator = operator
        self._runtime_context = _RuntimeContextView(operator.backend)

    def get_current_processing_time(self) -> int:
        return self._operator.timer_service.current_processing_time()

    def get_runtime_context(self) -> Any:
        return self._runtime_context


class WindowTriggerContext(Trigger.OnMergeContext):
    """Trigger calls for the current key and `window`; timers and state scoped to the window."""

    def __init__(self, operator: "WindowOperator"):
        self._op = operator
        self._timers = operator.timer_service
        self._backend = operator.backend
        self.window: Any = None
        self.merged_windows: Optional[List[Window]] = None
        self._add_event_timer = self._timers.event_time_timers.add

    def get_current_processing_time(self) -> int:
        return self._timers.current_processing_time()

    def get_metric_group(self) -> Any:
        return None

    def get_current_watermark(self) -> int:
        return self._timers.current_watermark

    def register_processing_time_timer(self, time: int) -> None:
        self._timers.register_processing_time_timer(self.window, time)

    def register_event_time_timer(self, time: int) -> None:
        self._add_event_timer(time, self._backend.current_key, self.window)

    def delete_processing_time_timer(self, time: int) -> None:
        self._timers.delete_processing_time_timer(self.window, time)

    def delete_event_time_timer(self, time: int) -> None:
        self._timers.delete_event_time_timer(self.window, time)

    def get_partitioned_state(self, state_descriptor: StateDescriptor) -> Any:
        return self._backend.get_partitioned_state(self.window, state_descriptor)

    def merge_partitioned_state(self, state_descriptor: StateDescriptor) -> None:
        if self.merged_windows:
            self._backend.merge_namespaces(state_descriptor, self.window, self.merged_windows)

    def on_element(self, value: Any, timestamp: int) -> TriggerResult:
        return self._op.trigger.on_element(value, timestamp, self.window, self)

    def on_event_time(self, time: int) -> TriggerResult:
        return self._op.trigger.on_event_time(time, self.window, self)

    def on_processing_time(self, time: int) -> TriggerResult:
        return self._op.trigger.on_processing_time(time, self.window, self)

    def on_merge(self, merged_windows: List[Window]) -> None:
        self.merged_windows = merged_windows
        self._op.trigger.on_merge(self.window, self)

    def clear(self) -> None:
        self._op.trigger.clear(self.window, self)


class WindowProcessContext(ProcessWindowFunction.Context, ProcessAllWindowFunction.Context):
    """What `ProcessWindowFunction.process` receives as context."""

    def __init__(self, operator: "WindowOperator"):
        self._op = operator
        self._window: Any = None
        self._global = _ScopedStateStore(operator.backend, None)

    def window(self) -> Any:
        return self._window

    def current_processing_time(self) -> int:
        return self._op.timer_service.current_processing_time()

    def current_watermark(self) -> int:
        return self._op.timer_service.current_watermark

    def window_state(self) -> KeyedStateStore:
        return _ScopedStateStore(self._op.backend, self._window)

    def global_state(self) -> KeyedStateStore:
        return self._global

    def output(self, output_tag: OutputTag, value: Any) -> None:
        if not isinstance(output_tag, OutputTag):
            raise TypeError(f"window operator {self._op.name!r}: ctx.output needs an OutputTag, got {output_tag!r}")
        self._op.output.collect_side(output_tag, value, self._window.max_timestamp())


# ---- merging windows --------------------------------------------------------------------

class MergingWindowSet:
    """Flink's MergingWindowSet for one key: maps each in-flight (merged) window to the window
    whose namespace holds its state, so merging never moves state more than once."""

    def __init__(self, assigner: MergingWindowAssigner, state: Any):
        self._assigner = assigner
        self._state = state
        self.mapping: Dict[Window, Window] = dict(state.value() or {})

    def persist(self) -> None:
        if self.mapping:
            self._state.update(self.mapping)
        else:
            self._state.clear()

    def get_state_window(self, window: Window) -> Optional[Window]:
        return self.mapping.get(window)

    def retire_window(self, window: Window) -> None:
        if self.mapping.pop(window, None) is None:
            raise RuntimeError(f"window {window} is not in the in-flight window set")

    def add_window(self, new_window: Window,
                   merge_function: Callable[[Window, List[Window], Window, List[Window]], None]) -> Window:
        """The window `new_window` ends up in; `merge_function(merge_result, merged_windows,
        state_window_result, merged_state_windows)` per merge."""
        windows = list(self.mapping)
        windows.append(new_window)
        merge_results: Dict[Window, List[Window]] = {}

        class _Collect(MergingWindowAssigner.MergeCallback):
            def merge(self, to_be_merged, merge_result):
                merge_results[merge_result] = list(to_be_merged)

        self._assigner.merge_windows(windows, _Collect())

        result_window = new_window
        merged_new_window = False
        for merge_result, merged_windows in merge_results.items():
            if new_window in merged_windows:
                merged_windows.remove(new_window)
                merged_new_window = True
                result_window = merge_result
            merged_state_window = self.mapping[merged_windows[0]]
            merged_state_windows = []
            for merged in merged_windows:
                res = self.mapping.pop(merged, None)
                if res is not None:
                    merged_state_windows.append(res)
            self.mapping[merge_result] = merged_state_window
            merged_state_windows.remove(merged_state_window)
            # merging one pre-existing window into itself without extending it: nothing to merge
            if not (merge_result in merged_windows and len(merged_windows) == 1):
                merge_function(merge_result, merged_windows, self.mapping[merge_result], merged_state_windows)

        if not merge_results or (result_window == new_window and not merged_new_window):
            self.mapping[result_window] = result_window
        return result_window


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
