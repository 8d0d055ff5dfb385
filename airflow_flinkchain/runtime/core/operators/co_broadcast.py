"""Broadcast two-input operators: Flink's CoBroadcastWithNonKeyedOperator and
CoBroadcastWithKeyedOperator. Input 1 is the non-broadcast stream, input 2 the
broadcast one (read in full first, see input_selection.py).

Each parallel instance holds one HeapBroadcastState per MapStateDescriptor given to
`broadcast(...)`: `process_broadcast_element` writes it, `process_element` and
`on_timer` read it (their ctx hands out the read-only view)."""

from __future__ import annotations

from typing import Any, Callable

from airflow_flinkchain.runtime.core.operators.base import adapt_function
from airflow_flinkchain.runtime.core.operators.process import process_handler
from airflow_flinkchain.runtime.core.operators.keyed import timer_firer
from airflow_flinkchain.runtime.core.operators.process import ProcessContext
from airflow_flinkchain.runtime.core.operators.two_input import KeyedTwoInputOperator, TwoInputStreamOperator
from airflow_flinkchain.runtime.state.broadcast import HeapBroadcastState


class BroadcastContext(ProcessContext):
    """ctx of a broadcast process function: `get_broadcast_state(descriptor)`,
    writable on the broadcast side only."""

    def __init__(self, operator, side_lookup, writable: bool, keyed: bool):
        super().__init__(operator, side_lookup)
        self._writable = writable
        self._keyed = keyed

    def get_broadcast_state(self, state_descriptor: Any):
        name = getattr(state_descriptor, "name", state_descriptor)
        state = self._op.broadcast_states.get(name)
        if state is None:
            known = ", ".join(repr(n) for n in self._op.broadcast_states) or "none"
            raise KeyError(f"operator {self._op.name!r}: no broadcast state {name!r}; the broadcast stream was "
                           f"created with broadcast({known}): pass one of those descriptors")
        return state if self._writable else state.read_only

    def apply_to_keyed_state(self, state_descriptor: Any, function: Any) -> None:
        """Keyed broadcast side (Flink's applyToKeyedState): `function(key, state)` (or its
        `process(key, state)`) for every key of this instance holding `state_descriptor`'s state."""
        backend = getattr(self._op, "state_backend", None)
        if backend is None:
            raise RuntimeError(f"operator {self._op.name!r}: apply_to_keyed_state() needs a keyed non-broadcast "
                               "stream (KeyedBroadcastProcessFunction)")
        fn = getattr(function, "process", function)
        state = backend.get_partitioned_state(None, state_descriptor)
        saved = backend.current_key, backend.current_key_group
        try:
            for key in backend.keys(state_descriptor.get_name()):
                backend.set_current_key(key)
                fn(key, state)
        finally:
            backend.current_key, backend.current_key_group = saved

    def get_current_key(self) -> Any:
        if not self._keyed:
            raise RuntimeError(f"operator {self._op.name!r}: process_broadcast_element() runs outside any key; "
                               "get_current_key() is for process_element() and on_timer()")
        return super().get_current_key()

    def timer_service(self):
        if not self._keyed:
            raise RuntimeError(f"operator {self._op.name!r}: timers are for process_element() and on_timer() of "
                               "a KeyedBroadcastProcessFunction (keyed non-broadcast stream)")
        return super().timer_service()


def broadcast_states(node) -> dict[str, HeapBroadcastState]:
    return {d.get_name(): HeapBroadcastState(d.get_name()) for d in node.two_input.broadcast_state_descriptors}


class BroadcastProcessOperator(TwoInputStreamOperator):
    """A BroadcastProcessFunction (non-keyed stream + broadcast stream)."""

    def setup(self, runtime_context) -> None:
        super().setup(runtime_context)
        fn = self.node.function
        self.fns = (adapt_function(fn, "process_element", self.node),
                    adapt_function(fn, "process_broadcast_element", self.node))
        self.broadcast_states = broadcast_states(self.node)

    def build_input_handlers(self, timed: bool) -> tuple[Callable, Callable]:
        emit, side = self.emitters(timed)
        read_only = BroadcastContext(self, side, writable=False, keyed=False)
        writable = BroadcastContext(self, side, writable=True, keyed=False)
        return (process_handler(self, self.fns[0], read_only, emit),
                process_handler(self, self.fns[1], writable, emit))


class KeyedBroadcastProcessOperator(KeyedTwoInputOperator):
    """A KeyedBroadcastProcessFunction (keyed stream + broadcast stream): keyed state
    and timers on the keyed side."""

    def setup(self, runtime_context) -> None:
        super().setup(runtime_context)
        fn = self.node.function
        self.fns = (adapt_function(fn, "process_element", self.node),
                    adapt_function(fn, "process_broadcast_element", self.node))
        on_timer = getattr(fn, "on_timer", None)
        self.on_timer = on_timer if callable(on_timer) else None
        self._timer_emitter = None
        self.broadcast_states = broadcast_states(self.node)

    def record_processors(self, emit, side) -> tuple[Callable, Callable]:
        read_only = BroadcastContext(self, side, writable=False, keyed=True)
        writable = BroadcastContext(self, side, writable=True, keyed=False)
        return (process_handler(self, self.fns[0], read_only, emit, count_in=False),
                process_handler(self, self.fns[1], writable, emit, count_in=False))

    def _fire(self, timer) -> None:
        fire = self._timer_emitter
        if fire is None:
            _, side = self.emitters(False)
            fire = self._timer_emitter = timer_firer(
                self, self.on_timer, BroadcastContext(self, side, writable=False, keyed=True))
        fire(timer)

    on_event_time = _fire
    on_processing_time = _fire
