"""Flink's StreamingRuntimeContext: what a function class's open() receives."""

from __future__ import annotations

from typing import Optional

from airflow_flinkchain.functions import RuntimeContext
from airflow_flinkchain.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)


class StreamingRuntimeContext(RuntimeContext):
    def __init__(self, operator_name: str, chain_name: str, subtask_index: int, parallelism: int,
                 run_id: str, state_backend=None, max_parallelism: Optional[int] = None):
        self.operator_name = operator_name
        self.chain_name = chain_name
        self.run_id = run_id
        self.subtask_index = subtask_index
        self.parallelism = parallelism
        self.max_parallelism = max_parallelism
        self.state_backend = state_backend

    def get_index_of_this_subtask(self) -> int:
        return self.subtask_index

    def get_number_of_parallel_subtasks(self) -> int:
        return self.parallelism

    def get_max_number_of_parallel_subtasks(self) -> Optional[int]:
        return self.max_parallelism

    def get_task_name(self) -> str:
        return self.chain_name

    def _keyed_state(self, descriptor: StateDescriptor, expected: type, method: str):
        if self.state_backend is None:
            raise RuntimeError(
                f"operator {self.operator_name!r}: keyed state needs a KeyedStream; apply the operator"
                " directly after key_by(key_selector), e.g. stream.key_by(f).map(...)")
        if not isinstance(descriptor, expected):
            raise TypeError(f"operator {self.operator_name!r}: {method}() takes a {expected.__name__}, "
                            f"got {descriptor!r}")
        return getattr(self.state_backend, method)(descriptor)

    def get_state(self, state_descriptor: ValueStateDescriptor):
        return self._keyed_state(state_descriptor, ValueStateDescriptor, "get_state")

    def get_list_state(self, state_descriptor: ListStateDescriptor):
        return self._keyed_state(state_descriptor, ListStateDescriptor, "get_list_state")

    def get_map_state(self, state_descriptor: MapStateDescriptor):
        return self._keyed_state(state_descriptor, MapStateDescriptor, "get_map_state")

    def get_reducing_state(self, state_descriptor: ReducingStateDescriptor):
        return self._keyed_state(state_descriptor, ReducingStateDescriptor, "get_reducing_state")

    def get_aggregating_state(self, state_descriptor: AggregatingStateDescriptor):
        return self._keyed_state(state_descriptor, AggregatingStateDescriptor, "get_aggregating_state")

    def __repr__(self) -> str:
        return (f"StreamingRuntimeContext({self.operator_name!r}, chain={self.chain_name!r},"
                f" subtask={self.subtask_index}/{self.parallelism}, run_id={self.run_id!r})")
