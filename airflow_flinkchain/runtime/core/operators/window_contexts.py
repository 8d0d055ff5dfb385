"""The contexts a window operator hands to its assigner, trigger and process window function
(Flink's WindowOperator.WindowContext / Context / WindowAssignerContext), and the keyed state
they reach: the current key's, in the current window's namespace."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional

from airflow_flinkchain.functions import OutputTag
from airflow_flinkchain.runtime.state.abstract_backend import AbstractKeyedStateBackend
from airflow_flinkchain.state import StateDescriptor
from airflow_flinkchain.window import Trigger, TriggerResult, Window, WindowAssigner
from airflow_flinkchain.window_functions import KeyedStateStore, ProcessAllWindowFunction, ProcessWindowFunction

if TYPE_CHECKING:
    from airflow_flinkchain.runtime.core.operators.window import WindowOperator


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
