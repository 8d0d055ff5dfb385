"""WindowedStream and AllWindowedStream (PyFlink names and signatures).

`KeyedStream.window(assigner)` gives a WindowedStream, `DataStream.window_all(assigner)`
an AllWindowedStream; both collect the window settings (`trigger`, `allowed_lateness`,
`side_output_late_data`) and record one WINDOW operator when a window function is
given (`reduce`, `aggregate`, `apply`, `process`). As in Flink, window_all keys every
record by a constant and runs with parallelism 1.

Examples:
    >>> from airflow_flinkchain import StreamPipeline
    >>> from airflow_flinkchain.common import Duration, WatermarkStrategy
    >>> from airflow_flinkchain.window import TumblingEventTimeWindows
    >>> p = StreamPipeline("doc", runtime_mode="streaming")
    >>> clicks = p.from_collection([("a", 1, 100), ("a", 2, 1500)]).assign_timestamps_and_watermarks(
    ...     WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, ts: r[2]))
    >>> totals = clicks.key_by(lambda r: r[0]).window(TumblingEventTimeWindows.of(Duration.of_seconds(1)))
    >>> _ = totals.reduce(lambda a, b: (a[0], a[1] + b[1], b[2])).collect("totals")
    >>> sorted(p.execute_local().output("totals"))
    [('a', 1, 100), ('a', 2, 1500)]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from airflow_flinkchain.api.validation import typed_fields
from airflow_flinkchain.common import to_millis
from airflow_flinkchain.functions import OutputTag, ReduceFunction
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.graph.windows import WindowFunctionKind, WindowSpec
from airflow_flinkchain.window import MergingWindowAssigner, Trigger, WindowAssigner
from airflow_flinkchain.window_functions import (
    AggregateFunction,
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)

if TYPE_CHECKING:  # pragma: no cover
    from airflow_flinkchain.api.datastream import DataStream


def check_window_assigner(assigner: Any, method: str) -> None:
    """`method()` needs a WindowAssigner instance (a common slip: passing its class)."""
    if isinstance(assigner, type):
        raise PlanningError(f"{method}() got the assigner class {assigner.__name__}: pass an "
                            f"instance, e.g. {assigner.__name__}.of(...)")
    if not isinstance(assigner, WindowAssigner):
        raise PlanningError(f"{method}() needs a WindowAssigner (airflow_flinkchain.window), got {assigner!r}")


class _Windowed:
    """What WindowedStream and AllWindowedStream share."""

    _kind_label = "window"
    _window_functions: tuple = ()
    _process_function: type = object
    _apply_function: type = object
    _all = False

    def __init__(self, stream: "DataStream", window_assigner: WindowAssigner):
        check_window_assigner(window_assigner, self._kind_label)
        self._stream = stream
        self._window_assigner = window_assigner
        self._window_trigger: Optional[Trigger] = None
        self._allowed_lateness = 0
        self._late_data_output_tag: Optional[OutputTag] = None

    def trigger(self, trigger: Trigger) -> "_Windowed":
        """When a window fires (replaces the assigner's default trigger).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> from airflow_flinkchain.window import CountTrigger, GlobalWindows
            >>> p = StreamPipeline("doc")
            >>> w = p.from_collection([1, 2, 3]).key_by(lambda x: x % 2).window(GlobalWindows.create())
            >>> _ = w.trigger(CountTrigger.of(2)).reduce(lambda a, b: a + b).collect("pairs")
        """
        if not isinstance(trigger, Trigger):
            raise PlanningError(f"trigger() needs a Trigger (airflow_flinkchain.window), got {trigger!r}")
        if isinstance(self._window_assigner, MergingWindowAssigner) and not trigger.can_merge():
            raise PlanningError(f"trigger {trigger!r} cannot be used with the merging window assigner "
                                f"{self._window_assigner!r}: use a trigger whose can_merge() is True")
        self._window_trigger = trigger
        return self

    def allowed_lateness(self, time_ms: int) -> "_Windowed":
        """Keep a window's state `time_ms` after its end: a record arriving that late still
        fires the window again (a late firing). Later records are dropped, or go to
        `side_output_late_data`. Event-time windows only (ignored otherwise, as Flink).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> from airflow_flinkchain.window import TumblingEventTimeWindows
            >>> p = StreamPipeline("doc")
            >>> w = p.from_collection([1]).key_by(lambda x: x).window(TumblingEventTimeWindows.of(1000))
            >>> w = w.allowed_lateness(500)
        """
        millis = to_millis(time_ms, "allowed_lateness")
        if millis < 0:
            raise PlanningError(f"allowed_lateness() must not be negative, got {millis}")
        self._allowed_lateness = millis
        return self

    def side_output_late_data(self, output_tag: OutputTag) -> "_Windowed":
        """Send records that arrive behind the watermark (plus the allowed lateness) to the
        side output `output_tag` instead of dropping them; read it with `get_side_output`
        on the window's result stream.

        Examples:
            >>> from airflow_flinkchain import OutputTag, StreamPipeline
            >>> from airflow_flinkchain.window import TumblingEventTimeWindows
            >>> late = OutputTag("late")
            >>> p = StreamPipeline("doc")
            >>> w = p.from_collection([1]).key_by(lambda x: x).window(TumblingEventTimeWindows.of(1000))
            >>> sums = w.side_output_late_data(late).reduce(lambda a, b: a + b)
            >>> _ = sums.get_side_output(late).collect("late")
        """
        if not isinstance(output_tag, OutputTag):
            raise PlanningError(f"side_output_late_data() needs an OutputTag, got {output_tag!r}")
        self._late_data_output_tag = output_tag
        return self

    # ---- window functions ----
    def _check_window_function(self, window_function: Any, method: str) -> None:
        if window_function is None or isinstance(window_function, self._window_functions):
            return
        names = " or ".join(t.__name__ for t in self._window_functions)
        raise PlanningError(f"{self._kind_label} {method}(): window_function must be a {names}, "
                            f"got {window_function!r}")

    def _result(self, kind: WindowFunctionKind, function: Any, window_function: Any, output_type: Any,
                name: str) -> "DataStream":
        from airflow_flinkchain.api.datastream import DataStream

        late = self._late_data_output_tag
        spec = WindowSpec(assigner=self._window_assigner, function_kind=kind, function=function,
                          window_function=window_function, trigger=self._window_trigger,
                          allowed_lateness=self._allowed_lateness, late_data_tag=late, all_windows=self._all)
        user = window_function if window_function is not None else function
        # a process window function may emit any side output (ctx.output); otherwise only the late data
        emits_side = isinstance(user, (ProcessWindowFunction, ProcessAllWindowFunction))
        declared = None if emits_side else frozenset([late.tag_id] if late is not None else [])
        stream = self._stream
        t = stream._pipeline._add_operator(
            OperatorKind.WINDOW, name, (stream._t,), function=spec, key_selector=stream._key_selector(),
            **typed_fields(output_type, f"window operator {name!r}"), declared_output_tags=declared,
            **({"parallelism": 1, "non_parallel": True} if self._all else {}),
        )
        return DataStream(stream._pipeline, t)

    def reduce(self, reduce_function: Union[Callable, ReduceFunction], window_function: Any = None,
               output_type: Any = None) -> "DataStream":
        """Reduce each window's records as they arrive with `reduce_function(a, b)`; the window
        emits the reduced value, or hands it to `window_function`.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> from airflow_flinkchain.window import CountTumblingWindowAssigner
            >>> p = StreamPipeline("doc")
            >>> w = p.from_collection([1, 2, 3, 4]).key_by(lambda x: 0).window(CountTumblingWindowAssigner.of(2))
            >>> _ = w.reduce(lambda a, b: a + b).collect("sums")
            >>> sorted(p.execute_local().output("sums"))
            [3, 7]
        """
        if not (isinstance(reduce_function, ReduceFunction) or callable(reduce_function)):
            raise PlanningError(f"{self._kind_label} reduce() needs a ReduceFunction or a callable(a, b), "
                                f"got {reduce_function!r}")
        self._check_window_function(window_function, "reduce")
        return self._result(WindowFunctionKind.REDUCE, reduce_function, window_function, output_type,
                            self._name("Reduce"))

    def aggregate(self, aggregate_function: AggregateFunction, window_function: Any = None,
                  accumulator_type: Any = None, output_type: Any = None) -> "DataStream":
        """Keep an accumulator per window (`create_accumulator`, `add`, `merge`); the window
        emits `get_result(acc)`, or hands it to `window_function`. `accumulator_type` is
        accepted for PyFlink compatibility (accumulators stay Python objects).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> from airflow_flinkchain.window import CountTumblingWindowAssigner
            >>> from airflow_flinkchain.window_functions import AggregateFunction
            >>> class Mean(AggregateFunction):
            ...     def create_accumulator(self): return (0, 0)
            ...     def add(self, value, acc): return (acc[0] + value, acc[1] + 1)
            ...     def get_result(self, acc): return acc[0] / acc[1]
            ...     def merge(self, a, b): return (a[0] + b[0], a[1] + b[1])
            >>> p = StreamPipeline("doc")
            >>> w = p.from_collection([1, 2, 3, 5]).key_by(lambda x: 0).window(CountTumblingWindowAssigner.of(2))
            >>> _ = w.aggregate(Mean()).collect("means")
            >>> sorted(p.execute_local().output("means"))
            [1.5, 4.0]
        """
        if not isinstance(aggregate_function, AggregateFunction):
            raise PlanningError(f"{self._kind_label} aggregate() needs an AggregateFunction (create_accumulator, "
                                f"add, get_result, merge), got {aggregate_function!r}")
        self._check_window_function(window_function, "aggregate")
        return self._result(WindowFunctionKind.AGGREGATE, aggregate_function, window_function, output_type,
                            self._name("Aggregate"))

    def apply(self, window_function: Any, output_type: Any = None) -> "DataStream":
        """Hand each fired window's records, buffered, to `window_function.apply`.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> from airflow_flinkchain.window import CountTumblingWindowAssigner
            >>> from airflow_flinkchain.window_functions import WindowFunction
            >>> class Pairs(WindowFunction):
            ...     def apply(self, key, window, inputs):
            ...         yield (key, sorted(inputs))
            >>> p = StreamPipeline("doc")
            >>> w = p.from_collection([1, 2, 3]).key_by(lambda x: x % 2).window(CountTumblingWindowAssigner.of(2))
            >>> _ = w.apply(Pairs()).collect("pairs")
            >>> p.execute_local().output("pairs")
            [(1, [1, 3])]
        """
        return self._buffered(WindowFunctionKind.APPLY, window_function, self._apply_function, output_type)

    def process(self, process_window_function: Any, output_type: Any = None) -> "DataStream":
        """Hand each fired window's records, buffered, to `process(...)` with a context
        offering `window()`, `current_watermark()`, `window_state()`, `global_state()` and
        `output(tag, value)`.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> from airflow_flinkchain.window import CountTumblingWindowAssigner
            >>> from airflow_flinkchain.window_functions import ProcessWindowFunction
            >>> class Count(ProcessWindowFunction):
            ...     def process(self, key, context, elements):
            ...         yield (key, len(list(elements)))
            >>> p = StreamPipeline("doc")
            >>> w = p.from_collection([1, 2, 3, 5]).key_by(lambda x: x % 2).window(CountTumblingWindowAssigner.of(2))
            >>> _ = w.process(Count()).collect("counts")
            >>> p.execute_local().output("counts")
            [(1, 2)]
        """
        return self._buffered(WindowFunctionKind.PROCESS, process_window_function, self._process_function,
                              output_type)

    def _buffered(self, kind: WindowFunctionKind, function: Any, required: type, output_type: Any) -> "DataStream":
        """`apply` / `process`: the window's records are buffered and handed to `function`."""
        method = kind.value
        if not isinstance(function, required):
            raise PlanningError(f"{self._kind_label} {method}() needs a {required.__name__}, got {function!r}")
        return self._result(kind, function, None, output_type, self._name(method.capitalize()))

    def _name(self, what: str) -> str:
        return f"{'AllWindow' if self._all else 'Window'} {what}"


class WindowedStream(_Windowed):
    """The windows of a KeyedStream (`KeyedStream.window(assigner)`, `count_window(...)`):
    each key's records are assigned to windows, and each window fires on its own.

    Examples:
        >>> from airflow_flinkchain import StreamPipeline
        >>> from airflow_flinkchain.window import SlidingEventTimeWindows
        >>> p = StreamPipeline("doc")
        >>> keyed = p.from_collection([("a", 1)]).key_by(lambda r: r[0])
        >>> w = keyed.window(SlidingEventTimeWindows.of(1000, 500))
        >>> _ = w.reduce(lambda a, b: (a[0], a[1] + b[1])).name("sums").collect("out")
        >>> [c.name for c in p.plan().chains]
        ['Collection Source', 'sums -> out']
    """

    _kind_label = "window"
    _window_functions = (WindowFunction, ProcessWindowFunction)
    _process_function = ProcessWindowFunction
    _apply_function = WindowFunction


class AllWindowedStream(_Windowed):
    """The windows of a whole stream (`DataStream.window_all(assigner)`): one window
    operator with parallelism 1 sees every record (Flink keys them by a constant).

    Examples:
        >>> from airflow_flinkchain import StreamPipeline
        >>> from airflow_flinkchain.window import TumblingEventTimeWindows
        >>> p = StreamPipeline("doc", parallelism=2)
        >>> w = p.from_collection([1, 2]).map(lambda x: x).window_all(TumblingEventTimeWindows.of(1000))
        >>> _ = w.reduce(lambda a, b: a + b).collect("out")
        >>> [(c.name, c.parallelism) for c in p.plan().chains]
        [('Collection Source', 1), ('Map', 2), ('AllWindow Reduce', 1), ('out', 2)]
    """

    _kind_label = "window_all"
    _window_functions = (AllWindowFunction, ProcessAllWindowFunction)
    _process_function = ProcessAllWindowFunction
    _apply_function = AllWindowFunction
    _all = True


__all__ = ["AllWindowedStream", "WindowedStream"]
