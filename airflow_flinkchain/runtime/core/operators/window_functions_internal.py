"""Flink's internal window functions: what a window operator calls when a window fires, for
the contents it keeps (a list of elements, or one reduced / aggregated value) and the user's
window function (`reduce_window`, `aggregate_window`, `process_window` build both)."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, Tuple

from airflow_flinkchain.functions import ReduceFunction
from airflow_flinkchain.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
)
from airflow_flinkchain.window import Window
from airflow_flinkchain.window_functions import (
    AggregateFunction,
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)

WINDOW_CONTENTS = "window-contents"


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
