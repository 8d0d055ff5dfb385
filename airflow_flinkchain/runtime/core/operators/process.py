"""ProcessOperator: a ProcessFunction (or a plain callable(value, ctx)).

Results: `process_element` returns/yields records (an iterable, or None);
a yielded `(OutputTag, value)` pair goes to that side output, as does
`ctx.output(tag, value)`. A side output nothing consumes is dropped but
counted."""

from __future__ import annotations

from typing import Any, Callable, Optional

from airflow_flinkchain.functions import KeyedProcessFunction, OutputTag, ProcessFunction
from airflow_flinkchain.runtime.core.errors import ChainExecutionError
from airflow_flinkchain.runtime.core.operators.base import StreamOperator, adapt_function

_MISSING = object()


def _drop(_value: Any) -> None:
    pass


class ProcessContext(KeyedProcessFunction.OnTimerContext):
    """ctx of process functions (keyed or not); one per operator and wiring."""

    def __init__(self, operator: StreamOperator, side_lookup: Callable[[str], Optional[Callable]]):
        self._op = operator
        self._cell = operator.cell
        self._side_lookup = side_lookup
        self._side: dict[str, Optional[Callable]] = {}
        self._side_counts = operator.metrics.side_outputs

    def output(self, output_tag: OutputTag, value: Any) -> None:
        tag_id = output_tag if isinstance(output_tag, str) else output_tag.tag_id
        emit = self._side.get(tag_id, _MISSING)
        if emit is _MISSING:
            emit = self._side[tag_id] = self._side_lookup(tag_id)
        self._side_counts[tag_id] = self._side_counts.get(tag_id, 0) + 1
        if emit is not None:
            emit(value)

    def timestamp(self) -> Optional[int]:
        return self._cell.value

    def current_watermark(self) -> int:
        return self._op.current_watermark

    # keyed
    def get_current_key(self) -> Any:
        backend = getattr(self._op, "state_backend", None)
        if backend is None:
            raise RuntimeError(f"operator {self._op.name!r}: get_current_key() needs key_by()")
        return backend.current_key

    def timer_service(self):
        service = getattr(self._op, "user_timer_service", None)
        if service is None:
            raise RuntimeError(f"operator {self._op.name!r}: timers need key_by() and a KeyedProcessFunction")
        return service


def make_result_emitter(op: StreamOperator, emit: Optional[Callable], ctx: ProcessContext) -> Callable:
    """emit_results(iterable): main records to `emit`, (OutputTag, v) pairs to side outputs."""
    emit = emit or _drop
    metrics = op.metrics
    side = ctx.output
    tag_type = OutputTag

    def emit_results(results: Any) -> None:
        for x in results:
            if type(x) is tuple and len(x) == 2 and type(x[0]) is tag_type:
                side(x[0], x[1])
            else:
                metrics.records_out += 1
                emit(x)

    return emit_results


def process_handler(op, fn: Callable, ctx: ProcessContext, emit, count_in: bool = True) -> Callable:
    """fn(value) running `fn(value, ctx)` and emitting its results (side outputs too)."""
    emit_results = make_result_emitter(op, emit, ctx)
    metrics, err, cee = op.metrics, op.error_handler(False), ChainExecutionError

    # The on_error try/except of base.map_processor & co., inlined on purpose for the per-record path.
    def process(value: Any) -> None:
        if count_in:
            metrics.records_in += 1
        try:
            results = fn(value, ctx)
            if results is not None:
                emit_results(results)
        except cee:
            raise
        except Exception as exc:
            err(exc, value)

    return process


class ProcessOperator(StreamOperator):
    """Fusable (fused.py generates its per-record code, as a flat_map's plus side
    outputs); the keyed variant is not (key context, state, timers)."""

    method = "process_element"
    function_class = ProcessFunction
    fusable = True

    def setup(self, runtime_context) -> None:
        super().setup(runtime_context)
        self.fn = adapt_function(self.node.function, self.method, self.node)

    def context(self, timed: bool = False) -> ProcessContext:
        out = self.output
        return ProcessContext(self, lambda tag_id: out.side_emitter(tag_id, timed))
