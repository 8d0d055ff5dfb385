"""Flink's OperatorChain + StreamTask.invoke, per parallel subtask.

Construction mirrors Flink: one RecordWriterOutput per chain out-edge, then
createChainedOperator / createOutputCollector from the head (as a loop, not
Flink's recursion, so chains of any length build): an operator's output
collects its non-chained outputs (RecordWriterOutput) then its chained ones
((Copying)ChainingOutput, tagged by the edge's output_tag), wrapped in a
DirectedOutput when the node was split, a BroadcastingOutputCollector when
there are several, the single output otherwise.

Lifecycle (`run`): setup every operator -> open tail to head -> input through
the head -> MAX_WATERMARK (unless already seen) -> end_input+close head to
tail (close may emit) -> close the record writers -> dispose tail to head in
a finally, always; a failing dispose is logged, the others still run.

A stream run (`checkpoint` given, see docs/stream-runs.md) differs: state is restored
(initialize_state) between setup and open; after open each chain out-edge gets the
restored watermark of its producer again; at the end a drained run ends as above but
snapshots before close, and a run that is not drained sends no MAX watermark and
calls no end_input (pending windows and timers wait in the snapshot).

Each operator's `watermark` gauge is its watermark just before the MAX
watermark ends the input (or when the subtask failed): how far in event time
the run got, which the end-of-input MAX would hide.
"""

from __future__ import annotations

import logging
import sys
from itertools import islice
from typing import Any, Iterable, Optional

from airflow_flinkchain.planner.jobgraph import JobGraph
from airflow_flinkchain.planner.vectorized import combined_edge
from airflow_flinkchain.runtime.core.batches import ColumnarInput, run_columnar
from airflow_flinkchain.runtime.core.combiner import KeyedCombiner
from airflow_flinkchain.runtime.core.context import StreamingRuntimeContext
from airflow_flinkchain.runtime.core.elements import (MAX_WATERMARK, MAX_WATERMARK_TS, MIN_WATERMARK_TS, StreamRecord,
                                                      TimestampCell, Watermark, WatermarkStatus)
from airflow_flinkchain.runtime.core.errors import READ_INPUT, ChainExecutionError
from airflow_flinkchain.runtime.core.input_selection import END_OF_INPUT, TwoInputs
from airflow_flinkchain.runtime.core.interfaces import RecordWriterFactory, SinkWriterFactory, SubtaskCheckpoint
from airflow_flinkchain.runtime.core.metrics import TIMING_SAMPLE_EVERY, SubtaskMetrics
from airflow_flinkchain.runtime.core.operators import ChainScope, StreamOperator, create_operator
from airflow_flinkchain.runtime.core.operators.fused import generic_run, segment_heads
from airflow_flinkchain.runtime.core.operators.keyed import key_error_channel
from airflow_flinkchain.runtime.core.outputs import (BroadcastingOutputCollector, ChainingOutput, CopyingChainingOutput,
                                                DirectedOutput, Output, RecordWriterOutput, TypeCoercingOutput)
from airflow_flinkchain.runtime.core.partitioners import make_channel_selector
from airflow_flinkchain.runtime.core.record_writer import RecordWriter
from airflow_flinkchain.runtime.core.splits import SourceSplits
from airflow_flinkchain.runtime.core.operators.base import adapt_function

log = logging.getLogger(__name__)


#: Python frames a record's (or watermark's) nested calls take per chained operator,
#: at most (timed wiring: timing wrapper, the operator's code, a copying output), with room.
FRAMES_PER_OPERATOR = 4


def _ensure_call_depth(operators: int) -> None:
    """Records and watermarks cross the chain as nested calls (as in Flink:
    collect -> processElement -> collect ...), so a long chain needs more frames
    than Python's default limit; that default stays free for user code. Only
    raised, never lowered: Python-to-Python calls take no C stack (3.11+)."""
    needed = 1000 + FRAMES_PER_OPERATOR * operators
    if sys.getrecursionlimit() < needed:
        sys.setrecursionlimit(needed)


class OperatorChain:
    def __init__(self, job: JobGraph, chain_id: str, subtask_index: int, run_id: str,
                 record_writer_factory: RecordWriterFactory, sink_writer_factory: SinkWriterFactory):
        chain = job.chain(chain_id)
        graph = job.stream_graph
        if not 0 <= subtask_index < chain.parallelism:
            raise ValueError(f"chain {chain.name!r} has parallelism {chain.parallelism}; no subtask {subtask_index}")
        self.job, self.chain, self.graph = job, chain, graph
        self.cell = TimestampCell()
        self.scope = ChainScope(chain.id, chain.name, subtask_index, chain.parallelism, run_id, self.cell,
                                graph.object_reuse, graph.on_error, graph=graph)
        self._chained = set(chain.chained_edges)
        self.checkpoint: Optional[SubtaskCheckpoint] = None  # a stream run's, set by run()
        self._sink_writer_factory = sink_writer_factory
        # Flink's createStreamOutputs: one RecordWriterOutput per chain out-edge.
        self.record_writer_outputs: dict[Any, RecordWriterOutput] = {}
        for edge_id in chain.out_edges:
            chain_edge = job.edge(edge_id)
            self.record_writer_outputs[chain_edge.stream_edge] = self._record_writer_output(chain_edge, record_writer_factory)
        self.operators: dict[int, StreamOperator] = {}
        self._preorder = self._create_chained_operators(chain.head_id)  # each before those it feeds
        self.head = self._preorder[0]
        self.all_operators = [self.operators[n] for n in chain.node_ids]  # head first

    def _record_writer_output(self, chain_edge, factory) -> RecordWriterOutput:
        stream_edge = chain_edge.stream_edge
        producer = self.graph.node(stream_edge.source_id)
        num_channels = self.job.chain_of(stream_edge.target_id).parallelism
        target = self.graph.node(stream_edge.target_id)
        selector = make_channel_selector(stream_edge.partitioner, subtask_index=self.scope.subtask,
                                         upstream_parallelism=self.chain.parallelism, num_channels=num_channels,
                                         edge_id=chain_edge.id, operator=producer.name, keyed_operator=target.name,
                                         key_error_channel=key_error_channel(target, self.graph.on_error))
        writer = RecordWriter(chain_edge.id, selector, num_channels, factory(chain_edge, self.scope.subtask))
        key = combined_edge(self.graph, stream_edge)
        if key is not None and hasattr(writer.channel_sink, "write_batch") and \
                (type(selector) is int or getattr(selector, "key_field", None) == key):
            writer.set_combiner(KeyedCombiner(key, target.function.kind, target.function.position))
        return RecordWriterOutput(writer, stream_edge.output_tag, self.cell, producer.name, self.chain.name,
                                  self.scope.subtask)

    def _create_chained_operators(self, head_id: int) -> list[StreamOperator]:
        """Every operator of the chain in depth-first pre-order (Flink's
        createChainedOperator order), then each one's output."""
        created: list[StreamOperator] = []
        pending = [head_id]
        while pending:
            node_id = pending.pop()
            op = create_operator(self.graph.node(node_id), self.scope, self._sink_writer_factory)
            self.operators[node_id] = op
            created.append(op)
            pending.extend(reversed([e.target_id for e in self.graph.out_edges(node_id) if e in self._chained]))
        for op in created:
            op.output = self._create_output_collector(op)
            if op.node.type_info is not None:
                op.output = TypeCoercingOutput(op.output, op.node.type_info)
        return created

    def _create_output_collector(self, op: StreamOperator) -> Output:
        node = op.node
        outputs: list[tuple[Output, Any]] = []
        out_edges = self.graph.out_edges(node.id)
        for edge in out_edges:
            if edge not in self._chained:
                rw = self.record_writer_outputs.get(edge)
                if rw is None:
                    raise ValueError(f"edge {edge} of operator {node.name!r} is neither chained nor a chain out-edge"
                                     f" of chain {self.chain.name!r}: the JobGraph is inconsistent")
                outputs.append((rw, edge))
        # chained outputs that receive the same (main) records: all but the last need copies
        chained_main = [e for e in out_edges if e in self._chained and e.output_tag is None]
        for edge in out_edges:
            if edge in self._chained:
                target = self.operators[edge.target_id]
                op.chained_targets.append(target)
                if self.scope.object_reuse:
                    chaining: Output = ChainingOutput(target, edge.output_tag)
                else:
                    shared = len(chained_main) > 1 and edge is not chained_main[-1]
                    chaining = CopyingChainingOutput(target, edge.output_tag, producer_kind=node.kind, shared=shared)
                outputs.append((chaining, edge))
        if node.output_selector is not None:
            selector = adapt_function(node.output_selector, "select", node)
            return DirectedOutput(selector, [(o, e.selected_names) for o, e in outputs], self.scope.object_reuse,
                                  on_selector_error=lambda exc, value: op.error_handler(False)(exc, value))
        if len(outputs) == 1:
            return outputs[0][0]
        return BroadcastingOutputCollector([o for o, _ in outputs], self.scope.object_reuse)

    # ---- lifecycle ---------------------------------------------------------
    def run(self, inputs: Iterable[Any], plain_values: bool = False,
            checkpoint: Optional[SubtaskCheckpoint] = None) -> SubtaskMetrics:
        """`checkpoint`: a stream run's snapshots (restored before open, written at the end)."""
        failure: Optional[BaseException] = None
        _ensure_call_depth(len(self.all_operators))
        self.checkpoint = checkpoint
        try:
            self._setup()
            self._note_watermarks_at_end_of_input()
            if checkpoint is not None:
                self._restore(checkpoint)
                self._pass_only_advancing_watermarks()
            self._phase("open", reversed(self.all_operators), lambda op: op.open())
            if checkpoint is not None:
                self._reemit_restored_watermarks()
            self._process(inputs, plain_values)
            if checkpoint is None:
                if self.head.current_watermark < MAX_WATERMARK_TS:
                    self.head.guarded("end of input", lambda: self.head.process_watermark(MAX_WATERMARK))
                self._phase("close", self.all_operators, lambda op: (op.end_input(), op.close()))
            else:
                self._end_stream_run(checkpoint)
            for rw in self.record_writer_outputs.values():
                self.head.guarded("close of the record writers", rw.close)
        except BaseException as exc:
            failure = exc
            for op in self.all_operators:
                op.failed = True
            raise
        finally:
            self._dispose(failed=failure is not None)
            if failure is not None:
                self._note_watermarks()
            metrics = self.metrics()
            if failure is not None:
                failure.metrics = metrics  # what was counted before the failure
        return metrics

    # ---- stream runs ---------------------------------------------------------
    def _restore(self, checkpoint: SubtaskCheckpoint) -> None:
        k = self.scope.subtask
        for op in self.all_operators:
            snapshots, own = checkpoint.restore(op.node.key, k)
            if snapshots:
                op.guarded("restore", lambda: op.initialize_state(snapshots, own))

    def _pass_only_advancing_watermarks(self) -> None:
        """A restored one-input head goes on from the watermark it was restored to, as its input
        valve does in one run (Flink's StatusWatermarkValve forwards only advancing watermarks): the
        watermark the upstream chains re-emit at the start of a run does not reach it again, so a
        timer registered behind it fires at the next watermark that advances, as in one run.
        (A two-input head forwards only advancing combined watermarks itself.)"""
        head = self.head
        restored = head.current_watermark
        if restored <= MIN_WATERMARK_TS or getattr(head, "two_input", False):
            return
        process_watermark = head.process_watermark

        def advancing(watermark: Watermark) -> None:
            if watermark.timestamp > restored:
                process_watermark(watermark)

        head.process_watermark = advancing

    def _reemit_restored_watermarks(self) -> None:
        """Each chain out-edge starts with the watermark its producer was restored to, so
        the downstream WatermarkValves start where the last run left them."""
        for stream_edge, rw in self.record_writer_outputs.items():
            wm = self.operators[stream_edge.source_id].current_watermark
            if MIN_WATERMARK_TS < wm:
                self.head.guarded("restore", lambda: rw.emit_watermark(Watermark(wm)))

    def _end_stream_run(self, checkpoint: SubtaskCheckpoint) -> None:
        """Drain: the end of input of a STREAMING run (MAX watermark, end_input). Otherwise the
        input just stops: no MAX watermark, pending windows and timers stay in the snapshot.
        Then every operator is snapshotted and closed."""
        if checkpoint.drain:
            if self.head.current_watermark < MAX_WATERMARK_TS:
                self.head.guarded("end of input", lambda: self.head.process_watermark(MAX_WATERMARK))
            self._phase("end of input", self.all_operators, lambda op: op.end_input())
        else:
            self._note_watermarks()
        k = self.scope.subtask
        self._phase("snapshot", self.all_operators, lambda op: checkpoint.write(op.node.key, k, op.snapshot_state()))
        self._phase("close", self.all_operators, lambda op: op.close())

    def _note_watermarks_at_end_of_input(self) -> None:
        """Wrap the head's watermark input (every watermark of the subtask enters there, also
        in fused code, which looks the method up when its handlers are built) so that the
        operators' watermarks are noted before the MAX watermark replaces them."""
        process_watermark = self.head.process_watermark
        note = self._note_watermarks

        def noting_process_watermark(watermark: Watermark) -> None:
            if watermark.timestamp >= MAX_WATERMARK_TS:
                note()
            process_watermark(watermark)

        self.head.process_watermark = noting_process_watermark

    def _note_watermarks(self) -> None:
        for op in self.all_operators:
            wm = op.current_watermark
            if MIN_WATERMARK_TS < wm < MAX_WATERMARK_TS:
                op.metrics.watermark = wm

    def _setup(self) -> None:
        chain, scope = self.chain, self.scope
        for op in self.all_operators:
            backend = getattr(op, "state_backend", None)
            ctx = StreamingRuntimeContext(op.name, chain.name, scope.subtask, chain.parallelism, scope.run_id,
                                          backend, op.node.max_parallelism)
            op.guarded("setup", lambda: op.setup(ctx))

    def _phase(self, phase: str, operators, action) -> None:
        for op in operators:
            op.guarded(phase, lambda: action(op))

    def _build_handlers(self) -> None:
        """Build the handlers tail first, so that each finds those it calls built
        (no recursion over the chain's length); an operator fused into its
        predecessor's segment has no fast handler of its own."""
        for op in reversed(segment_heads(self._preorder)):
            op.handler(False)
        for op in reversed(self._preorder):  # the timed wiring is unfused
            op.handler(True)

    def _process(self, inputs: Iterable[Any], plain_values: bool) -> None:
        if isinstance(inputs, TwoInputs):
            return self._process_two_inputs(inputs)
        if isinstance(inputs, ColumnarInput):
            self._build_handlers()
            return run_columnar(self.head, inputs,
                                [op.start_split for op in self.all_operators if hasattr(op, "start_split")],
                                [op.read_splits for op in self.all_operators if hasattr(op, "read_splits")])
        if isinstance(inputs, SourceSplits):
            for op in self.all_operators:
                if hasattr(op, "read_splits"):
                    op.guarded("open", lambda: op.read_splits(inputs.layout))
            inputs = inputs.records([op.start_split for op in self.all_operators if hasattr(op, "start_split")])
        head, cell = self.head, self.cell
        self._build_handlers()
        fast = head.handler(False)
        if head.fusable:
            run_fast = head.fast_segment.run_plain if plain_values else head.fast_segment.run
        else:
            run_fast = generic_run(fast, head.process_watermark, cell, plain_values)
        timed = head.handler(True)
        wm_type, record_type, end = Watermark, StreamRecord, object()
        it = iter(inputs)
        every = TIMING_SAMPLE_EVERY - 1
        # The element dispatch (watermark / record / plain value) is inlined on purpose in each
        # input loop (here, two inputs below, fused.py's run): a call per record would cost.
        try:
            while True:
                element = next(it, end)
                if element is end:
                    break
                t = type(element)
                if t is wm_type:
                    # not the sample: the next record is (a stream run's input starts with the
                    # restored watermark; with fewer than TIMING_SAMPLE_EVERY records after it,
                    # sampling only the first element would leave the chain untimed)
                    head.process_watermark(element)
                    continue
                if t is record_type:
                    cell.value = element.timestamp
                    timed(element.value)
                    cell.value = None
                else:
                    timed(element)
                run_fast(islice(it, every))
        except ChainExecutionError:
            raise
        except Exception as exc:  # the runtime itself (or the input iterator) failed
            raise head.error(READ_INPUT, exc) from exc

    def _process_two_inputs(self, inputs: TwoInputs) -> None:
        """A two-input head (always a chain head): each element to its input's handler
        or watermark, in the interleaving of `TwoInputs.elements()`."""
        head, cell = self.head, self.cell
        if not getattr(head, "two_input", False):
            raise ValueError(f"chain {self.chain.name!r}: its head {head.name!r} has one input, but two were given")
        self._build_handlers()
        fast, timed = head.input_handlers(False), head.input_handlers(True)
        on_watermark = (None, head.process_watermark1, head.process_watermark2)
        on_status = (None, head.process_watermark_status1, head.process_watermark_status2)
        wm_type, status_type, record_type, end = Watermark, WatermarkStatus, StreamRecord, END_OF_INPUT
        every, n = TIMING_SAMPLE_EVERY, 0
        stopping = self.checkpoint is not None and not self.checkpoint.drain
        try:  # element dispatch inlined on purpose for the per-record path, as in _process
            for number, element in inputs.elements():
                t = type(element)
                if t is wm_type:
                    on_watermark[number](element)
                    continue
                if t is status_type:  # the input's combined status changed
                    on_status[number](element)
                    continue
                if element is end:
                    if stopping:  # a stream run that is not drained: the input does not end
                        continue
                    head.end_of_input(number)
                    continue
                n += 1
                handler = (timed if n % every == 1 else fast)[number - 1]
                if t is record_type:
                    cell.value = element.timestamp
                    handler(element.value)
                    cell.value = None
                else:
                    handler(element)
        except ChainExecutionError:
            raise
        except Exception as exc:
            raise head.error(READ_INPUT, exc) from exc

    def _dispose(self, failed: bool) -> None:
        for op in reversed(self.all_operators):
            try:
                op.dispose()
            except Exception:
                log.exception("dispose of operator %r in chain %r, subtask %d failed; disposing the others",
                              op.name, self.chain.name, self.scope.subtask)
        if failed:
            for rw in self.record_writer_outputs.values():
                try:
                    rw.record_writer.abort()
                except Exception:
                    log.exception("abort of the writer of edge %r failed", rw.record_writer.edge_id)

    def metrics(self) -> SubtaskMetrics:
        metrics = SubtaskMetrics(self.chain.id, self.scope.subtask, [op.finish_metrics() for op in self.all_operators])
        for edge, output in self.record_writer_outputs.items():
            combiner = output.record_writer.combiner
            if combiner is not None and combiner.rows_in:
                producer = self.operators[edge.source_id].metrics
                producer.combined[output.record_writer.edge_id] = [combiner.rows_in, combiner.rows_out]
        return metrics


def run_subtask(
    job: JobGraph,
    chain_id: str,
    subtask_index: int,
    run_id: str,
    inputs: Iterable[Any],
    record_writer_factory: RecordWriterFactory,
    sink_writer_factory: SinkWriterFactory,
    *,
    plain_values: bool = False,
    checkpoint: Optional[SubtaskCheckpoint] = None,
) -> SubtaskMetrics:
    """Run one parallel subtask of a chain over `inputs` and return its counters.

    `inputs`: the head's input elements in order: bare values (no
    timestamp), StreamRecord(value, ts), Watermark(ts); for a two-input
    head, a `TwoInputs` (input_selection.py). For a source head,
    the split's values (a `SourceSplits` when it reads several splits: its
    timestamp assigners hear where each starts); for an exchange input, the channel files merged
    through `WatermarkValve.merge`. End of input pushes MAX_WATERMARK (fires
    remaining timers, emits keyed reduce results) then closes head to tail.
    `plain_values=True` promises that `inputs` holds bare values only (a
    source split): the input loop then skips its per-element type dispatch.
    `checkpoint`: a stream run (`core.interfaces.SubtaskCheckpoint`): state is
    restored before open and snapshotted at the end, and the input ends with the
    MAX watermark only when the run drains.
    Raises ChainExecutionError naming operator, chain, subtask, phase, record
    (its `.metrics` holds the counters up to the failure).
    """
    chain = OperatorChain(job, chain_id, subtask_index, run_id, record_writer_factory, sink_writer_factory)
    return chain.run(inputs, plain_values=plain_values, checkpoint=checkpoint)
