"""Co-map, co-flat-map (keyed or not) and (keyed) co-process operators: Flink's CoStreamMap,
CoStreamFlatMap, CoProcessOperator and KeyedCoProcessOperator."""

from __future__ import annotations

from typing import Callable

from airflow_flinkchain.runtime.core.operators.base import flat_map_processor, map_processor
from airflow_flinkchain.runtime.core.operators.keyed import UserTimers
from airflow_flinkchain.runtime.core.operators.process import ProcessContext, process_handler
from airflow_flinkchain.runtime.core.operators.two_input import KeyedTwoInputOperator, TwoInputStreamOperator


class CoMapOperator(TwoInputStreamOperator):
    methods = ("map1", "map2")
    processor = staticmethod(map_processor)

    def build_input_handlers(self, timed: bool) -> tuple[Callable, Callable]:
        emit, _ = self.emitters(timed)
        return tuple(self.processor(self, fn, emit, count_in=True) for fn in self.fns)


class CoFlatMapOperator(CoMapOperator):
    methods = ("flat_map1", "flat_map2")
    processor = staticmethod(flat_map_processor)


class KeyedCoMapOperator(KeyedTwoInputOperator):
    """map / flat_map of keyed connected streams: the functions run in the record's key
    context (keyed state shared by both inputs)."""

    methods = CoMapOperator.methods
    processor = staticmethod(map_processor)

    def record_processors(self, emit, side) -> tuple[Callable, Callable]:
        return tuple(self.processor(self, fn, emit, count_in=False) for fn in self.fns)


class KeyedCoFlatMapOperator(KeyedCoMapOperator):
    methods = CoFlatMapOperator.methods
    processor = staticmethod(flat_map_processor)


class CoProcessOperator(TwoInputStreamOperator):
    """A CoProcessFunction: `process_element1/2(value, ctx)`; no timers (not keyed)."""

    methods = ("process_element1", "process_element2")

    def build_input_handlers(self, timed: bool) -> tuple[Callable, Callable]:
        emit, side = self.emitters(timed)
        ctx = ProcessContext(self, side)
        return tuple(process_handler(self, fn, ctx, emit) for fn in self.fns)


class KeyedCoProcessOperator(UserTimers, KeyedTwoInputOperator):
    """A KeyedCoProcessFunction: both inputs keyed, state and timers shared by them."""

    methods = ("process_element1", "process_element2")

    def setup(self, runtime_context) -> None:
        super().setup(runtime_context)
        self.setup_on_timer()

    def record_processors(self, emit, side) -> tuple[Callable, Callable]:
        ctx = ProcessContext(self, side)
        return tuple(process_handler(self, fn, ctx, emit, count_in=False) for fn in self.fns)
