"""Flink's StreamingRuntimeContext: what a function class's open() receives."""

from __future__ import annotations

from typing import Optional

from airflow_flinkchain.functions import RuntimeContext, ValueStateDescriptor


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

    def get_state(self, descriptor: ValueStateDescriptor):
        if self.state_backend is None:
            raise RuntimeError(
                f"operator {self.operator_name!r}: keyed state is only available after key_by();"
                " use a KeyedProcessFunction on a KeyedStream")
        return self.state_backend.get_state(descriptor)

    def __repr__(self) -> str:
        return (f"StreamingRuntimeContext({self.operator_name!r}, chain={self.chain_name!r},"
                f" subtask={self.subtask_index}/{self.parallelism}, run_id={self.run_id!r})")
