"""The callable types of user functions, for type checkers and the API reference.

Every operator takes a plain callable of the type below or an instance of the
matching function class of `airflow_flinkchain.functions` (the `...Like` unions):

Examples:
    >>> from airflow_flinkchain.function_types import KeySelectorCallable, MapCallable
    >>> double: MapCallable = lambda x: x * 2
    >>> by_customer: KeySelectorCallable = lambda order: order["customer"]
    >>> double(21), by_customer({"customer": "a"})
    (42, 'a')
"""

from __future__ import annotations

from typing import Any, Callable, Hashable, Iterable, Optional, TypeAlias, Union

from airflow_flinkchain.functions import (
    FilterFunction,
    FlatMapFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    OutputSelector,
    Partitioner,
    ProcessFunction,
    ReduceFunction,
)

MapCallable: TypeAlias = Callable[[Any], Any]
"""`map`: one record in, one record out."""

FlatMapCallable: TypeAlias = Callable[[Any], Optional[Iterable[Any]]]
"""`flat_map`: one record in, any number out (a list, a generator, or None for none)."""

FilterCallable: TypeAlias = Callable[[Any], bool]
"""`filter`: keep the record when true."""

ReduceCallable: TypeAlias = Callable[[Any, Any], Any]
"""`reduce`: the running value and the next record of a key, combined."""

ProcessCallable: TypeAlias = Callable[[Any, Any], Optional[Iterable[Any]]]
"""`process`: `fn(value, ctx)` returning or yielding records; `ctx.output(tag, v)`
or `yield tag, v` for a side output."""

KeySelectorCallable: TypeAlias = Callable[[Any], Hashable]
"""`key_by`, `partition_custom`: the key of a record."""

OutputSelectorCallable: TypeAlias = Callable[[Any], Iterable[str]]
"""`split`: the output names a record goes to."""

PartitionerCallable: TypeAlias = Callable[[Any, int], int]
"""`partition_custom`: `partition(key, num_partitions)`, the channel of a key."""

HookCallable: TypeAlias = Callable[..., Any]
"""`on_setup` / `on_dispose`: a pipeline-level hook."""

MapLike: TypeAlias = Union[MapFunction, MapCallable]
FlatMapLike: TypeAlias = Union[FlatMapFunction, FlatMapCallable]
FilterLike: TypeAlias = Union[FilterFunction, FilterCallable]
ReduceLike: TypeAlias = Union[ReduceFunction, ReduceCallable]
ProcessLike: TypeAlias = Union[ProcessFunction, KeyedProcessFunction, ProcessCallable]
KeySelectorLike: TypeAlias = Union[KeySelector, KeySelectorCallable]
OutputSelectorLike: TypeAlias = Union[OutputSelector, OutputSelectorCallable]
PartitionerLike: TypeAlias = Union[Partitioner, PartitionerCallable]

__all__ = [
    "MapCallable", "FlatMapCallable", "FilterCallable", "ReduceCallable", "ProcessCallable",
    "KeySelectorCallable", "OutputSelectorCallable", "PartitionerCallable", "HookCallable",
    "MapLike", "FlatMapLike", "FilterLike", "ReduceLike", "ProcessLike", "KeySelectorLike",
    "OutputSelectorLike", "PartitionerLike",
]
