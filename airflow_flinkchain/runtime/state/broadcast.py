"""Broadcast state (Flink's HeapBroadcastState): one map per MapStateDescriptor and
parallel instance of a broadcast two-input operator, outside any key.

Every instance receives every broadcast record, so instances that update their
state the same way hold the same state. `process_broadcast_element` gets the
writable `HeapBroadcastState`; `process_element` and `on_timer` get its
`ReadOnlyBroadcastStateView`, whose writes raise `ReadOnlyBroadcastStateError`.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Tuple

from airflow_flinkchain.state import BroadcastState, ReadOnlyBroadcastState


class ReadOnlyBroadcastStateError(RuntimeError):
    """A write to broadcast state from the non-broadcast side."""


class HeapBroadcastState(BroadcastState):
    def __init__(self, name: str):
        self.name = name
        self._map: dict = {}
        self.read_only = ReadOnlyBroadcastStateView(self)

    def get(self, key: Any) -> Any:
        return self._map.get(key)

    def contains(self, key: Any) -> bool:
        return key in self._map

    def items(self) -> Iterable[Tuple[Any, Any]]:
        return list(self._map.items())

    def keys(self) -> Iterable[Any]:
        return list(self._map)

    def values(self) -> Iterable[Any]:
        return list(self._map.values())

    def is_empty(self) -> bool:
        return not self._map

    def put(self, key: Any, value: Any) -> None:
        self._map[key] = value

    def put_all(self, dict_value: Dict[Any, Any]) -> None:
        self._map.update(dict_value)

    def remove(self, key: Any) -> None:
        self._map.pop(key, None)

    def clear(self) -> None:
        self._map.clear()

    def snapshot(self) -> dict:
        return dict(self._map)


class ReadOnlyBroadcastStateView(ReadOnlyBroadcastState):
    """The non-broadcast side's view of one broadcast state."""

    def __init__(self, state: HeapBroadcastState):
        self._state = state

    def get(self, key: Any) -> Any:
        return self._state.get(key)

    def contains(self, key: Any) -> bool:
        return self._state.contains(key)

    def items(self) -> Iterable[Tuple[Any, Any]]:
        return self._state.items()

    def keys(self) -> Iterable[Any]:
        return self._state.keys()

    def values(self) -> Iterable[Any]:
        return self._state.values()

    def is_empty(self) -> bool:
        return self._state.is_empty()

    def _refuse(self, what: str) -> None:
        raise ReadOnlyBroadcastStateError(
            f"broadcast state {self._state.name!r} is read-only in process_element() and on_timer(): "
            f"{what}() is not allowed there. Update broadcast state in process_broadcast_element(), "
            "which every parallel instance runs for every broadcast record (as in Flink)")

    def put(self, key: Any, value: Any) -> None:
        self._refuse("put")

    def put_all(self, dict_value: Dict[Any, Any]) -> None:
        self._refuse("put_all")

    def remove(self, key: Any) -> None:
        self._refuse("remove")

    def clear(self) -> None:
        self._refuse("clear")

    def __setitem__(self, key: Any, value: Any) -> None:
        self._refuse("put")

    def __delitem__(self, key: Any) -> None:
        self._refuse("remove")
