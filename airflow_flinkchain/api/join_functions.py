"""What the operators of a join run (Flink's CoGroupedStreams / JoinedStreams internals and
the settings of an IntervalJoinOperator), as picklable functions and frozen data.

A window join or co-group is, as in Flink, a union of both inputs tagged by input
(`TaggedUnion`), keyed by `UnionKeySelector` and windowed; `CoGroupWindowFunction` splits
each fired window by tag and hands both sides to the CoGroupFunction (for a join,
`JoinCoGroupFunction`: every pair, first input outer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from airflow_flinkchain.functions import CoGroupFunction, Function, JoinFunction, KeySelector, MapFunction
from airflow_flinkchain.window_functions import WindowFunction


class TaggedUnion:
    """A record of input 1 or input 2 of a two-input operation (Flink's TaggedUnion)."""

    __slots__ = ("tag", "value")

    def __init__(self, tag: int, value: Any):
        self.tag = tag
        self.value = value

    @staticmethod
    def one(value: Any) -> "TaggedUnion":
        return TaggedUnion(1, value)

    @staticmethod
    def two(value: Any) -> "TaggedUnion":
        return TaggedUnion(2, value)

    def is_one(self) -> bool:
        return self.tag == 1

    def is_two(self) -> bool:
        return self.tag == 2

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TaggedUnion) and other.tag == self.tag and other.value == self.value

    def __hash__(self) -> int:
        return hash((self.tag, self.value))

    def __repr__(self) -> str:
        return f"TaggedUnion.{'one' if self.tag == 1 else 'two'}({self.value!r})"

    def __reduce__(self):
        return (TaggedUnion, (self.tag, self.value))


class Input1Tagger(MapFunction):
    def map(self, value: Any) -> TaggedUnion:
        return TaggedUnion(1, value)


class Input2Tagger(MapFunction):
    def map(self, value: Any) -> TaggedUnion:
        return TaggedUnion(2, value)


def key_function(key_selector: Any) -> Callable[[Any], Any]:
    """A KeySelector's `get_key`, or the callable itself."""
    return key_selector.get_key if hasattr(key_selector, "get_key") else key_selector


class UnionKeySelector(KeySelector):
    """The key of a tagged record: input 1's key selector for input 1, input 2's for input 2."""

    def __init__(self, key_selector1: Any, key_selector2: Any):
        self.key_selector1 = key_selector1
        self.key_selector2 = key_selector2
        self._key1 = key_function(key_selector1)
        self._key2 = key_function(key_selector2)

    def get_key(self, value: TaggedUnion) -> Any:
        return self._key1(value.value) if value.tag == 1 else self._key2(value.value)


def _open(function: Any, runtime_context: Any) -> None:
    if isinstance(function, Function):
        function.open(runtime_context)


def _close(function: Any) -> None:
    if isinstance(function, Function):
        function.close()


class JoinCoGroupFunction(CoGroupFunction):
    """A window join as a co-group: `join(first, second)` for every pair of the window
    (nested loop, first input outer); nothing when either side is empty."""

    def __init__(self, join_function: Any):
        self.join_function = join_function
        self._join = join_function.join if isinstance(join_function, JoinFunction) else join_function

    def open(self, runtime_context: Any) -> None:
        _open(self.join_function, runtime_context)

    def close(self) -> None:
        _close(self.join_function)

    def co_group(self, first: Iterable[Any], second: Iterable[Any]) -> Iterable[Any]:
        join, second = self._join, list(second)
        for left in first:
            for right in second:
                yield join(left, right)


class CoGroupWindowFunction(WindowFunction):
    """The window function of a co-group: splits the window's tagged records by input."""

    def __init__(self, co_group_function: Any):
        self.co_group_function = co_group_function
        fn = co_group_function
        self._co_group = fn.co_group if isinstance(fn, CoGroupFunction) else fn

    def open(self, runtime_context: Any) -> None:
        _open(self.co_group_function, runtime_context)

    def close(self) -> None:
        _close(self.co_group_function)

    def apply(self, key: Any, window: Any, inputs: Iterable[TaggedUnion]) -> Optional[Iterable[Any]]:
        first, second = [], []
        for record in inputs:
            (first if record.tag == 1 else second).append(record.value)
        return self._co_group(first, second)


@dataclass(frozen=True)
class IntervalJoinSpec:
    """The settings of an interval join node: `lower_bound` / `upper_bound` are inclusive
    (exclusive bounds are already moved by 1 ms, as Flink's IntervalJoinOperator does);
    the late-data tags are None when late records are dropped."""

    lower_bound: int
    upper_bound: int
    function: Any
    left_late_data_tag: Any = None
    right_late_data_tag: Any = None


__all__ = ["CoGroupWindowFunction", "Input1Tagger", "Input2Tagger", "IntervalJoinSpec", "JoinCoGroupFunction",
           "TaggedUnion", "UnionKeySelector", "key_function"]
