"""StreamOperator: what every chained operator shares - lifecycle, the
error policy, metrics and the two wirings of handlers.

Handlers: `handler(timed=False)` is the fastest callable(value) that
processes one record of this operator (for map/filter/flat_map/source/sink
runs of operators it is one generated, fused function, see fused.py);
`handler(timed=True)` is an unfused copy that measures the inclusive time of
each operator. The chain sends every TIMING_SAMPLE_EVERY-th input through
the timed wiring and extrapolates `time_ms` = self time per sampled record x
records_in, so the fast path never calls perf_counter.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Optional

from airflow_flinkchain.functions import DEAD_LETTER_TAG, Function
from airflow_flinkchain.graph.model import ErrorPolicy, StreamNode
from airflow_flinkchain.runtime.core.elements import MIN_WATERMARK_TS, TimestampCell, Watermark
from airflow_flinkchain.runtime.core.errors import ChainExecutionError
from airflow_flinkchain.runtime.core.metrics import TIMING_SAMPLE_EVERY, OperatorMetrics

log = logging.getLogger(__name__)


def adapt_function(fn: Any, method: str, node: StreamNode) -> Callable:
    """A function class's method or a plain callable, resolved once at setup."""
    if isinstance(fn, Function) or (not callable(fn) and hasattr(fn, method)):
        bound = getattr(fn, method, None)
        if bound is None:
            raise TypeError(f"operator {node.name!r}: {type(fn).__name__} has no {method}() method")
        return bound
    if not callable(fn):
        raise TypeError(f"operator {node.name!r}: function {fn!r} is neither callable nor has {method}()")
    return fn


# The three record processors below share their try/except shape: each is the per-record
# closure of its operator, inlined on purpose (a shared wrapper would add a call per record).
def map_processor(op: "StreamOperator", fn: Callable, emit: Optional[Callable], count_in: bool) -> Callable:
    """fn(value) for an unfused map (keyed or co-map): emits `fn(value)`, on_error applied.
    `count_in`: this closure counts records_in (False where a keyed handler counts it)."""
    metrics, err, cee = op.metrics, op.error_handler(False), ChainExecutionError

    def process(value: Any) -> None:
        if count_in:
            metrics.records_in += 1
        try:
            result = fn(value)
        except cee:
            raise
        except Exception as exc:
            err(exc, value)
            return
        metrics.records_out += 1
        if emit is not None:
            emit(result)

    return process


def flat_map_processor(op: "StreamOperator", fn: Callable, emit: Optional[Callable], count_in: bool) -> Callable:
    """fn(value) for an unfused flat_map: emits every element `fn(value)` yields."""
    metrics, err, cee = op.metrics, op.error_handler(False), ChainExecutionError

    def process(value: Any) -> None:
        if count_in:
            metrics.records_in += 1
        try:
            results = fn(value)
            if results is None:
                return
            for r in results:
                metrics.records_out += 1
                if emit is not None:
                    emit(r)
        except cee:
            raise
        except Exception as exc:
            err(exc, value)

    return process


def filter_processor(op: "StreamOperator", fn: Callable, emit: Optional[Callable], count_in: bool) -> Callable:
    """fn(value) for an unfused filter: emits the value when `fn(value)` is true."""
    metrics, err, cee = op.metrics, op.error_handler(False), ChainExecutionError

    def process(value: Any) -> None:
        if count_in:
            metrics.records_in += 1
        try:
            keep = fn(value)
        except cee:
            raise
        except Exception as exc:
            err(exc, value)
            return
        if keep:
            metrics.records_out += 1
            if emit is not None:
                emit(value)
        else:
            metrics.filtered += 1

    return process


class ChainScope:
    """What every operator of one chain subtask knows about where it runs."""

    def __init__(self, chain_id: str, chain_name: str, subtask: int, parallelism: int, run_id: str,
                 cell: TimestampCell, object_reuse: bool, default_on_error: str, graph: Any = None):
        self.chain_id = chain_id
        self.chain_name = chain_name
        self.subtask = subtask
        self.parallelism = parallelism
        self.run_id = run_id
        self.cell = cell
        self.object_reuse = object_reuse
        self.default_on_error = default_on_error
        self.graph = graph  # the StreamGraph: runtime_mode, auto_watermark_interval


class StreamOperator:
    fusable = False  # map/filter/flat_map/source/sink: can be fused into generated code

    def __init__(self, node: StreamNode, scope: ChainScope):
        self.node = node
        self.kind = node.kind
        self.name = node.name
        self.scope = scope
        self.cell = scope.cell
        self.on_error = ErrorPolicy.effective(node.on_error, scope.default_on_error, f"operator {node.name!r}")
        self.output = None  # an Output, set by the chain before setup
        self.chained_targets: list[StreamOperator] = []  # for self time = inclusive - children
        self.current_watermark = MIN_WATERMARK_TS
        self.metrics = OperatorMetrics(node.id, node.key, node.name, scope.subtask)
        self.runtime_context = None
        self.failed = False
        self._handlers: dict[bool, Callable] = {}
        self._segments: list = []  # fused segments this operator is part of (counts)
        self.sampled_in = 0
        self.sampled_time = 0.0  # inclusive seconds over sampled records
        self.timing = False  # in a sampled record of its own (firing_emitter: whose time it is)
        self.fired_time = 0.0  # seconds of sampled firing records in the operators after it

    # ---- lifecycle -------------------------------------------------------
    def setup(self, runtime_context) -> None:
        self.runtime_context = runtime_context

    def open(self) -> None:
        fn = self.node.function
        if isinstance(fn, Function):
            self._function_open = True  # set before: a failing open() still gets its close() on dispose
            fn.open(self.runtime_context)

    def end_input(self) -> None:
        """BATCH end of input, before close: emit what is still held."""

    def close(self) -> None:
        fn = self.node.function
        if isinstance(fn, Function):
            self._function_open = False  # close() is called at most once, even if it raises
            fn.close()

    def dispose(self) -> None:
        """Release resources; called tail to head even after a failure. As Flink's
        AbstractUdfStreamOperator.dispose: a function class that was opened but not
        closed (the subtask failed before its close phase) gets its close() here,
        so user resources are released on failures too."""
        if getattr(self, "_function_open", False):
            self._function_open = False
            self.node.function.close()

    # ---- snapshot / restore (stream runs) ----------------------------------
    def snapshot_state(self) -> dict:
        """Flink's snapshotState at the end of a stream run: what this subtask holds
        (here its watermark; subclasses add their state)."""
        return {"watermark": self.current_watermark}

    def initialize_state(self, snapshots: list, own: Optional[dict] = None) -> None:
        """Flink's initializeState, before open: `snapshots` of every former subtask of
        this operator, `own` the one of this subtask index when the parallelism is
        unchanged (else None: the watermark is the minimum of the former ones)."""
        marks = [s["watermark"] for s in ([own] if own is not None else snapshots) if "watermark" in s]
        if marks:
            self.current_watermark = min(marks)

    # ---- records ---------------------------------------------------------
    def make_process(self, emit: Optional[Callable], side: Callable[[str], Optional[Callable]]) -> Callable:
        raise NotImplementedError

    def handler(self, timed: bool = False) -> Callable[[Any], None]:
        h = self._handlers.get(timed)
        if h is None:
            h = self._build_handler(timed)
            self._handlers[timed] = h
        return h

    def _build_handler(self, timed: bool) -> Callable[[Any], None]:
        if self.fusable:
            from airflow_flinkchain.runtime.core.operators.fused import build_segment

            segment = build_segment(self, timed)
            if not timed:
                self.fast_segment = segment  # its run() is the input loop when this op is the head
            h = segment.process
        else:
            out = self.output
            h = self.make_process(out.main_emitter(timed), lambda tag_id: out.side_emitter(tag_id, timed))
        return self._timing(h) if timed else h

    def _timing(self, inner: Callable) -> Callable:
        clock = time.perf_counter
        me = self

        def timed(value: Any) -> None:
            t0 = clock()
            outer, me.timing = me.timing, True
            try:
                inner(value)
            finally:
                me.timing = outer
                me.sampled_time += clock() - t0
                me.sampled_in += 1

        return timed

    def firing_emitter(self, tag_id: Optional[str] = None) -> Optional[Callable[[Any], None]]:
        """The emitter of the records this operator emits outside its input records (window
        firings, timers on a watermark, BATCH results at the end of input): every
        TIMING_SAMPLE_EVERY-th one (the first included) takes the timed wiring, so the operators
        after it get a time too. That time is not this operator's own, unless the firing happens
        inside one of its sampled records (then it is part of both, as any chained output)."""
        out = self.output
        fast = out.main_emitter(False) if tag_id is None else out.side_emitter(tag_id, False)
        if fast is None:
            return None
        timed = out.main_emitter(True) if tag_id is None else out.side_emitter(tag_id, True)
        clock, me, every = time.perf_counter, self, TIMING_SAMPLE_EVERY
        n = 0

        def emit(value: Any) -> None:
            nonlocal n
            n += 1
            if (n - 1) % every or me.timing:
                fast(value)
                return
            t0 = clock()
            try:
                timed(value)
            finally:
                me.fired_time += clock() - t0

        return emit

    def process_watermark(self, watermark: Watermark) -> None:
        self.current_watermark = watermark.timestamp
        self.output.emit_watermark(watermark)

    def process_watermark_status(self, status) -> None:
        self.output.emit_watermark_status(status)

    # ---- errors ----------------------------------------------------------
    def error(self, phase: str, cause: BaseException, record: Any = None, has_record: bool = False):
        return ChainExecutionError(operator=self.name, chain=self.scope.chain_name, subtask=self.scope.subtask,
                                   phase=phase, record=record, has_record=has_record, cause=cause)

    def guarded(self, phase: str, action: Callable[[], None]) -> None:
        """Run `action`; a failure other than a ChainExecutionError is raised naming this
        operator and `phase`."""
        try:
            action()
        except ChainExecutionError:
            raise
        except Exception as exc:
            raise self.error(phase, exc) from exc

    def error_handler(self, timed: bool = False) -> Callable[[BaseException, Any], None]:
        """handle(exc, record): the on_error policy for a failing record."""
        policy = self.on_error
        metrics = self.metrics
        if policy is ErrorPolicy.FAIL:
            def fail(exc: BaseException, record: Any) -> None:
                raise self.error("process", exc, record, True) from exc
            return fail
        if policy is ErrorPolicy.SKIP:
            def skip(exc: BaseException, record: Any) -> None:
                metrics.skipped += 1
            return skip
        dead_letter_emit = self.output.side_emitter(DEAD_LETTER_TAG.tag_id, timed) if self.output else None
        name = self.name

        def dead_letter(exc: BaseException, record: Any) -> None:
            metrics.dead_lettered += 1
            if dead_letter_emit is not None:
                dead_letter_emit({"record": record, "operator": name,
                                  "error_type": type(exc).__name__, "error": str(exc)})
        return dead_letter

    # ---- metrics ---------------------------------------------------------
    def add_counts(self, records_in: int, records_out: int) -> None:
        self.metrics.records_in += records_in
        self.metrics.records_out += records_out

    def finish_metrics(self) -> OperatorMetrics:
        for segment in self._segments:
            segment.flush_counts()
        self._segments = []
        m = self.metrics
        if self.sampled_in:
            # the children's samples from this operator's firings were not in its own time
            child_time = sum(c.sampled_time for c in self.chained_targets) - self.fired_time
            self_time = max(self.sampled_time - child_time, 0.0)
            m.time_ms = self_time / self.sampled_in * max(m.records_in, self.sampled_in) * 1000.0
        return m
