"""Keyed state: descriptors, TTL configuration and the state interfaces, named as
PyFlink's `pyflink.datastream.state`. The runtime supplies the implementations
(`runtime/state/backend.py`).

>>> ttl = StateTtlConfig.new_builder(Time.seconds(1)).update_ttl_on_read_and_write().build()
>>> d = ValueStateDescriptor("count", Types.LONG()); d.enable_time_to_live(ttl)
>>> d.get_name(), d.get_ttl_config().get_update_type().name
('count', 'OnReadAndWrite')
"""

from __future__ import annotations

from abc import ABC
from enum import Enum
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from airflow_flinkchain.common import Time, Types, to_millis


# ---- interfaces ---------------------------------------------------------------

class State(ABC):
    def clear(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class ValueState(State):
    """Interface of a per-key value; the runtime supplies the implementation."""

    def value(self) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def update(self, value: Any) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class AppendingState(State):
    def get(self) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def add(self, value: Any) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class MergingState(AppendingState):
    pass


class ReducingState(MergingState):
    """`get()` is the reduction of every added value (None when empty)."""


class AggregatingState(MergingState):
    """`get()` is the AggregateFunction's result over every added value (None when empty)."""


class ListState(MergingState):
    """`get()` is an iterable of the elements ([] when empty)."""

    def update(self, values: List[Any]) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def add_all(self, values: List[Any]) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def __iter__(self) -> Iterator[Any]:
        return iter(self.get())


class _MapReads(State):
    """The read methods MapState and the broadcast states share."""

    def get(self, key: Any) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def contains(self, key: Any) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def items(self) -> Iterable[Tuple[Any, Any]]:  # pragma: no cover - interface
        raise NotImplementedError

    def keys(self) -> Iterable[Any]:  # pragma: no cover - interface
        raise NotImplementedError

    def values(self) -> Iterable[Any]:  # pragma: no cover - interface
        raise NotImplementedError

    def is_empty(self) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __contains__(self, key: Any) -> bool:
        return self.contains(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())


class _MapWrites:
    """The write methods MapState and BroadcastState share."""

    def put(self, key: Any, value: Any) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def put_all(self, dict_value: Dict[Any, Any]) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def remove(self, key: Any) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)


class MapState(_MapWrites, _MapReads):
    """Interface of a per-key map; the runtime supplies the implementation."""


class ReadOnlyBroadcastState(_MapReads):
    """Broadcast state as the non-broadcast side sees it (`process_element`, `on_timer`):
    read only, the same in every parallel instance. Flink's ReadOnlyBroadcastState."""


class BroadcastState(_MapWrites, ReadOnlyBroadcastState):
    """Broadcast state as `process_broadcast_element` sees it: a map it may write
    (every parallel instance receives every broadcast record, so all write alike)."""


# ---- TTL ----------------------------------------------------------------------------

class StateTtlConfig:
    """Time-to-live of state entries (processing time, Flink's semantics)."""

    class UpdateType(Enum):
        Disabled = 0
        OnCreateAndWrite = 1
        OnReadAndWrite = 2

    class StateVisibility(Enum):
        ReturnExpiredIfNotCleanedUp = 0
        NeverReturnExpired = 1

    class TtlTimeCharacteristic(Enum):
        ProcessingTime = 0

    class CleanupStrategies:
        """Which background cleanups are configured. The heap backend drops an expired entry when
        it is read, and leaves expired entries out of snapshots with `cleanup_full_snapshot()`;
        the other strategies are accepted and have no further effect."""

        class Strategies(Enum):
            FULL_STATE_SCAN_SNAPSHOT = 0
            INCREMENTAL_CLEANUP = 1
            ROCKSDB_COMPACTION_FILTER = 2

        def __init__(self, strategies: Dict[Any, Any], is_cleanup_in_background: bool):
            self._strategies = dict(strategies)
            self._is_cleanup_in_background = is_cleanup_in_background

        def is_cleanup_in_background(self) -> bool:
            return self._is_cleanup_in_background

        def in_full_snapshot(self) -> bool:
            return StateTtlConfig.CleanupStrategies.Strategies.FULL_STATE_SCAN_SNAPSHOT in self._strategies

    def __init__(self, update_type: "StateTtlConfig.UpdateType",
                 state_visibility: "StateTtlConfig.StateVisibility",
                 ttl_time_characteristic: "StateTtlConfig.TtlTimeCharacteristic",
                 ttl: Time, cleanup_strategies: "StateTtlConfig.CleanupStrategies"):
        self._update_type = update_type
        self._state_visibility = state_visibility
        self._ttl_time_characteristic = ttl_time_characteristic
        self._ttl = ttl
        self._cleanup_strategies = cleanup_strategies

    @staticmethod
    def new_builder(ttl: Time) -> "StateTtlConfig.Builder":
        return StateTtlConfig.Builder(ttl)

    def get_update_type(self) -> "StateTtlConfig.UpdateType":
        return self._update_type

    def get_state_visibility(self) -> "StateTtlConfig.StateVisibility":
        return self._state_visibility

    def get_ttl(self) -> Time:
        return self._ttl

    def get_ttl_time_characteristic(self) -> "StateTtlConfig.TtlTimeCharacteristic":
        return self._ttl_time_characteristic

    def is_enabled(self) -> bool:
        return self._update_type is not StateTtlConfig.UpdateType.Disabled

    def get_cleanup_strategies(self) -> "StateTtlConfig.CleanupStrategies":
        return self._cleanup_strategies

    def ttl_millis(self) -> int:
        return to_millis(self._ttl, "StateTtlConfig ttl")

    def __repr__(self) -> str:
        return (f"StateTtlConfig<update_type={self._update_type}, state_visibility={self._state_visibility}, "
                f"ttl={self._ttl}>")

    class Builder:
        def __init__(self, ttl: Time):
            if to_millis(ttl, "StateTtlConfig.new_builder(ttl)") <= 0:
                raise ValueError("StateTtlConfig ttl must be positive")
            self._ttl = ttl
            self._update_type = StateTtlConfig.UpdateType.OnCreateAndWrite
            self._state_visibility = StateTtlConfig.StateVisibility.NeverReturnExpired
            self._ttl_time_characteristic = StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
            self._is_cleanup_in_background = True
            self._strategies: Dict[Any, Any] = {}

        def set_update_type(self, update_type: "StateTtlConfig.UpdateType") -> "StateTtlConfig.Builder":
            self._update_type = update_type
            return self

        def update_ttl_on_create_and_write(self) -> "StateTtlConfig.Builder":
            return self.set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)

        def update_ttl_on_read_and_write(self) -> "StateTtlConfig.Builder":
            return self.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)

        def set_state_visibility(self, state_visibility: "StateTtlConfig.StateVisibility") -> "StateTtlConfig.Builder":
            self._state_visibility = state_visibility
            return self

        def return_expired_if_not_cleaned_up(self) -> "StateTtlConfig.Builder":
            return self.set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)

        def never_return_expired(self) -> "StateTtlConfig.Builder":
            return self.set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)

        def set_ttl_time_characteristic(self, ttl_time_characteristic) -> "StateTtlConfig.Builder":
            self._ttl_time_characteristic = ttl_time_characteristic
            return self

        def use_processing_time(self) -> "StateTtlConfig.Builder":
            return self.set_ttl_time_characteristic(StateTtlConfig.TtlTimeCharacteristic.ProcessingTime)

        def cleanup_full_snapshot(self) -> "StateTtlConfig.Builder":
            self._strategies[StateTtlConfig.CleanupStrategies.Strategies.FULL_STATE_SCAN_SNAPSHOT] = None
            return self

        def cleanup_incrementally(self, cleanup_size: int, run_cleanup_for_every_record) -> "StateTtlConfig.Builder":
            self._strategies[StateTtlConfig.CleanupStrategies.Strategies.INCREMENTAL_CLEANUP] = (
                cleanup_size, run_cleanup_for_every_record)
            return self

        def cleanup_in_rocksdb_compact_filter(self, query_time_after_num_entries,
                                              periodic_compaction_time=None) -> "StateTtlConfig.Builder":
            self._strategies[StateTtlConfig.CleanupStrategies.Strategies.ROCKSDB_COMPACTION_FILTER] = (
                query_time_after_num_entries, periodic_compaction_time)
            return self

        def disable_cleanup_in_background(self) -> "StateTtlConfig.Builder":
            self._is_cleanup_in_background = False
            return self

        def set_ttl(self, ttl: Time) -> "StateTtlConfig.Builder":
            self._ttl = ttl
            return self

        def build(self) -> "StateTtlConfig":
            return StateTtlConfig(self._update_type, self._state_visibility, self._ttl_time_characteristic,
                                  self._ttl, StateTtlConfig.CleanupStrategies(self._strategies,
                                                                              self._is_cleanup_in_background))


# ---- descriptors -----------------------------------------------------------------------

class StateDescriptor(ABC):
    """Names a keyed state and its type; `kind` tells the backend which state to create."""

    kind = ""

    def __init__(self, name: str, type_info: Any = None):
        if not isinstance(name, str) or not name:
            raise ValueError(f"{type(self).__name__} needs a non-empty string name, got {name!r}")
        self.name = name
        self.type_info = type_info
        self._ttl_config: Optional[StateTtlConfig] = None

    def get_name(self) -> str:
        return self.name

    def enable_time_to_live(self, ttl_config: StateTtlConfig) -> None:
        if not isinstance(ttl_config, StateTtlConfig):
            raise TypeError(f"state {self.name!r}: enable_time_to_live needs a StateTtlConfig "
                            "(StateTtlConfig.new_builder(Time...).build())")
        self._ttl_config = ttl_config

    def get_ttl_config(self) -> Optional[StateTtlConfig]:
        return self._ttl_config

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class ValueStateDescriptor(StateDescriptor):
    """Declares a per-key value state (`runtime_context.get_state(descriptor)`)."""

    kind = "value"

    def __init__(self, name: str, value_type_info: Any = None):
        super().__init__(name, value_type_info)

    @property
    def value_type(self) -> Any:
        return self.type_info


class ListStateDescriptor(StateDescriptor):
    kind = "list"

    def __init__(self, name: str, elem_type_info: Any = None):
        super().__init__(name, Types.LIST(elem_type_info) if elem_type_info is not None else None)


class MapStateDescriptor(StateDescriptor):
    kind = "map"

    def __init__(self, name: str, key_type_info: Any = None, value_type_info: Any = None):
        type_info = Types.MAP(key_type_info, value_type_info) if key_type_info is not None else None
        super().__init__(name, type_info)


class ReducingStateDescriptor(StateDescriptor):
    kind = "reducing"

    def __init__(self, name: str, reduce_function: Any, type_info: Any = None):
        super().__init__(name, type_info)
        from airflow_flinkchain.functions import ReduceFunction

        if isinstance(reduce_function, ReduceFunction):
            self._reduce = reduce_function.reduce
        elif callable(reduce_function):
            self._reduce = reduce_function
        else:
            raise TypeError(f"ReducingStateDescriptor {name!r}: the reduce function must be a ReduceFunction "
                            f"or a callable(value1, value2), got {reduce_function!r}")
        self._reduce_function = reduce_function

    def get_reduce_function(self) -> Any:
        return self._reduce_function

    def reduce(self, value1: Any, value2: Any) -> Any:
        return self._reduce(value1, value2)


class AggregatingStateDescriptor(StateDescriptor):
    kind = "aggregating"

    def __init__(self, name: str, agg_function: Any, state_type_info: Any = None):
        super().__init__(name, state_type_info)
        from airflow_flinkchain.window_functions import AggregateFunction

        if not isinstance(agg_function, AggregateFunction):
            raise TypeError(f"AggregatingStateDescriptor {name!r}: the function must be an AggregateFunction "
                            "(create_accumulator, add, get_result, merge)")
        self._agg_function = agg_function

    def get_agg_function(self) -> Any:
        return self._agg_function
