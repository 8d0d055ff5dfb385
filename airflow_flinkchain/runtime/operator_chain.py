"""Flink's OperatorChain + StreamTask.invoke, per parallel subtask.

Construction mirrors Flink: one RecordWriterOutput per chain out-edge, then
the createOutputCollector / createChainedOperator recursion from the head:
an operator's output collects its non-chained outputs (RecordWriterOutput)
then its chained ones ((Copying)ChainingOutput, tagged by the edge's
output_tag), wrapped in a DirectedOutput when the node was split, a
BroadcastingOutputCollector when there are several, the single output
otherwise.

Lifecycle (`run`): setup every operator -> open tail to head -> input through
the head -> MAX_WATERMARK (unless already seen) -> end_input+close head to
tail (close may emit) -> close the record writers -> dispose tail to head in
a finally, always; a failing dispose is logged, the others still run.
"""

from __future__ import annotations

import logging
from itertools import islice
from typing import Any, Iterable, Optional

from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.planner.jobgraph import JobGraph
from airflow_flinkchain.runtime.context import StreamingRuntimeContext
from airflow_flinkchain.runtime.elements import MAX_WATERMARK, MAX_WATERMARK_TS, StreamRecord, TimestampCell, Watermark
from airflow_flinkchain.runtime.errors import ChainExecutionError
from airflow_flinkchain.runtime.interfaces import RecordWriterFactory, SinkWriterFactory
from airflow_flinkchain.runtime.metrics import SubtaskMetrics
from airflow_flinkchain.runtime.operators import ChainScope, StreamOperator, create_operator
from airflow_flinkchain.runtime.operators.fused import generic_run
from airflow_flinkchain.runtime.outputs import (BroadcastingOutputCollector, ChainingOutput, CopyingChainingOutput,
                                                DirectedOutput, Output, RecordWriterOutput)
from airflow_flinkchain.runtime.partitioners import make_channel_selector
from airflow_flinkchain.runtime.record_writer import RecordWriter
from airflow_flinkchain.runtime.operators.base import adapt_function

log = logging.getLogger(__name__)

#: Every N-th input record of the head goes through the timed wiring (time_ms).
TIMING_SAMPLE_EVERY = 1024


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
                                graph.object_reuse, graph.on_error)
        self._chained = set(chain.chained_edges)
        self._sink_writer_factory = sink_writer_factory
        # Flink's createStreamOutputs: one RecordWriterOutput per chain out-edge.
        self.record_writer_outputs: dict[Any, RecordWriterOutput] = {}
        for edge_id in chain.out_edges:
            chain_edge = job.edge(edge_id)
            self.record_writer_outputs[chain_edge.stream_edge] = self._record_writer_output(chain_edge, record_writer_factory)
        self.operators: dict[int, StreamOperator] = {}
        self.head = self._create_chained_operator(chain.head_id)
        self.all_operators = [self.operators[n] for n in chain.node_ids]  # head first

    def _record_writer_output(self, chain_edge, factory) -> RecordWriterOutput:
        stream_edge = chain_edge.stream_edge
        producer = self.graph.node(stream_edge.source_id)
        num_channels = self.job.chain_of(stream_edge.target_id).parallelism
        selector = make_channel_selector(stream_edge.partitioner, subtask_index=self.scope.subtask,
                                         upstream_parallelism=self.chain.parallelism, num_channels=num_channels,
                                         edge_id=chain_edge.id, operator=producer.name)
        writer = RecordWriter(chain_edge.id, selector, num_channels, factory(chain_edge, self.scope.subtask))
        return RecordWriterOutput(writer, stream_edge.output_tag, self.cell, producer.name, self.chain.name,
                                  self.scope.subtask)

    def _create_chained_operator(self, node_id: int) -> StreamOperator:
        node = self.graph.node(node_id)
        op = create_operator(node, self.scope, self._sink_writer_factory)
        self.operators[node_id] = op
        op.output = self._create_output_collector(op)
        return op

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
                target = self._create_chained_operator(edge.target_id)
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
    def run(self, inputs: Iterable[Any], plain_values: bool = False) -> SubtaskMetrics:
        failure: Optional[BaseException] = None
        try:
            self._setup()
            self._phase("open", reversed(self.all_operators), lambda op: op.open())
            self._process(inputs, plain_values)
            if self.head.current_watermark < MAX_WATERMARK_TS:
                self._guard(self.head, "end of input", lambda: self.head.process_watermark(MAX_WATERMARK))
            self._phase("close", self.all_operators, lambda op: (op.end_input(), op.close()))
            for rw in self.record_writer_outputs.values():
                self._guard(self.head, "close of the record writers", rw.close)
        except BaseException as exc:
            failure = exc
            for op in self.all_operators:
                op.failed = True
            raise
        finally:
            self._dispose(failed=failure is not None)
            metrics = self.metrics()
            if failure is not None:
                failure.metrics = metrics  # what was counted before the failure
        return metrics

    def _setup(self) -> None:
        chain, scope = self.chain, self.scope
        for op in self.all_operators:
            backend = getattr(op, "state_backend", None)
            ctx = StreamingRuntimeContext(op.name, chain.name, scope.subtask, chain.parallelism, scope.run_id,
                                          backend, op.node.max_parallelism)
            self._guard(op, "setup", lambda: op.setup(ctx))

    def _phase(self, phase: str, operators, action) -> None:
        for op in operators:
            self._guard(op, phase, lambda: action(op))

    def _guard(self, op: StreamOperator, phase: str, action) -> None:
        try:
            action()
        except ChainExecutionError:
            raise
        except Exception as exc:
            raise op.error(phase, exc) from exc

    def _process(self, inputs: Iterable[Any], plain_values: bool) -> None:
        head, cell = self.head, self.cell
        fast = head.handler(False)
        if head.fusable:
            run_fast = head.fast_segment.run_plain if plain_values else head.fast_segment.run
        else:
            run_fast = generic_run(fast, head.process_watermark, cell, plain_values)
        timed = head.handler(True)
        wm_type, record_type, end = Watermark, StreamRecord, object()
        it = iter(inputs)
        every = TIMING_SAMPLE_EVERY - 1
        try:
            while True:
                element = next(it, end)
                if element is end:
                    break
                t = type(element)
                if t is wm_type:
                    head.process_watermark(element)
                elif t is record_type:
                    cell.value = element.timestamp
                    timed(element.value)
                    cell.value = None
                else:
                    timed(element)
                run_fast(islice(it, every))
        except ChainExecutionError:
            raise
        except Exception as exc:  # the runtime itself (or the input iterator) failed
            raise head.error("process", exc) from exc

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
        return SubtaskMetrics(self.chain.id, self.scope.subtask, [op.finish_metrics() for op in self.all_operators])


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
) -> SubtaskMetrics:
    """Run one parallel subtask of a chain over `inputs` and return its counters.

    `inputs`: the head's input elements in order: bare values (no
    timestamp), StreamRecord(value, ts), Watermark(ts). For a source head,
    the split's values; for an exchange input, the channel files merged
    through `WatermarkValve.merge`. End of input pushes MAX_WATERMARK (fires
    remaining timers, emits keyed reduce results) then closes head to tail.
    `plain_values=True` promises that `inputs` holds bare values only (a
    source split): the input loop then skips its per-element type dispatch.
    Raises ChainExecutionError naming operator, chain, subtask, phase, record
    (its `.metrics` holds the counters up to the failure).
    """
    chain = OperatorChain(job, chain_id, subtask_index, run_id, record_writer_factory, sink_writer_factory)
    return chain.run(inputs, plain_values=plain_values)
