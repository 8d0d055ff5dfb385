"""One parallel subtask of a chain: its input, the core's `run_subtask`, its report.

`run_stream_task` is shared by both pipeline runners; they differ only in the
`StreamTaskIO` they pass: where the input channels come from, how a source
is read, and where records leaving the chain go.
* On Spark (`runtime.spark.partition.subtask_report`, what partition k of the chain's
  job runs): `SparkTaskIO` reads channel k of each input edge from the committed exchange
  datasets and writes into the attempt directory.
* In process (`runtime.local`): the exchange lives in memory.

A two-input head (connect / broadcast) reads its in-edges as two inputs by their
type number (1, 2), each merged through its own WatermarkValve (which also passes on
the input's combined WatermarkStatus), interleaved as `core.input_selection.TwoInputs`
says (a broadcast input first).

The report is one JSON-able dict: {"subtask", "operators": [per-operator
counters], "written": {edge id or sink key: records}, "error": message or
absent}. See `runtime.spark.job` for the protocol around it.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, Protocol, Sequence

from airflow_flinkchain.graph.field_keys import field_key
from airflow_flinkchain.planner.vectorized import buffers_batches, takes_batches, takes_watermarked_batches
from airflow_flinkchain.graph.model import OperatorKind, Partitioner
from airflow_flinkchain.runtime.core.input_selection import TwoInputs
from airflow_flinkchain.runtime.core.interfaces import ChannelWriter, SinkWriter
from airflow_flinkchain.runtime.core.batches import ColumnarInput
from airflow_flinkchain.runtime.exchange.dataset import merged_batches, merged_input
from airflow_flinkchain.runtime.exchange.watermarked import merged_watermarked_batches



class StreamTaskIO(Protocol):
    """What a runner provides to one subtask of one chain."""

    def input_channels(self, subtask: int, edges: Optional[Sequence[str]] = None) -> list:
        """Channel `subtask` of every input edge (of `edges` only, when given): edges
        in the chain's order, then upstream subtask order. Each has `watermarks` (truthy when it carries any)
        and `elements()` (bare values, StreamRecords, Watermarks in order), as
        `exchange.dataset.ChannelFile`."""

    def source_input(self, head: Any, subtask: int) -> tuple[Iterable, bool]:
        """(the records the source `head` (its node) gives `subtask`, whether they
        are bare values only); non-parallel sources give subtask 0 everything."""

    def source_batches(self, head: Any, subtask: int) -> Optional[Iterable]:
        """Optional: the same records as Arrow batches, or None when the source is not
        columnar; asked only when the source feeds batch operators only."""

    def record_writer(self, chain_edge: Any, subtask: int) -> ChannelWriter:
        """The writer of one chain out-edge (see `core.interfaces`)."""

    def sink_writer(self, node: Any, subtask: int) -> SinkWriter:
        """The writer of one sink operator."""

    def written(self) -> dict:
        """{edge id or sink node key: records written} of the writers built so far."""

    # optional: `checkpoint`, a `core.interfaces.SubtaskCheckpoint` in a stream run


def subtask_input(job, chain_id: str, subtask: int, io: StreamTaskIO) -> tuple[Iterable, bool]:
    """(the head's input elements, whether they are bare values only): the source's
    records, the two inputs of a two-input head, or the input channels merged
    (`merged_input`: one WatermarkValve input per channel)."""
    chain = job.chain(chain_id)
    head = job.stream_graph.node(chain.head_id)
    if head.two_input is not None:
        return two_inputs(job, chain, head, subtask, io), False
    if head.kind is OperatorKind.SOURCE:
        source_batches = getattr(io, "source_batches", None)
        if source_batches is not None and feeds_batch_operators(job, chain.head_id):
            batches = source_batches(head, subtask)
            if batches is not None:  # a columnar source: batches straight to the batch operators
                return ColumnarInput(batches), False
        return io.source_input(head, subtask)
    channels = io.input_channels(subtask)
    batches = takes_batches(head) or buffers_batches(job.stream_graph, head) is not None
    if batches and channels and all(getattr(c, "format", None) == "typed" for c in channels):
        # typed exchange files: read as batches (with their per-record watermarks where the head takes them)
        merge = merged_watermarked_batches if takes_watermarked_batches(job.stream_graph, head) else merged_batches
        return ColumnarInput(merge(channels)), False
    return merged_input(channels), False


def feeds_batch_operators(job, node_id: int) -> bool:
    """Whether every output of the operator is untagged and goes to a batch operator of its
    chain, or leaves the chain on a typed edge that takes whole batches (FORWARD, GLOBAL, or
    HASH keyed by a field: batches.record_writer_batch_emitter)."""
    g = job.stream_graph
    out = g.out_edges(node_id)
    typed = g.record_type(node_id) is not None
    return bool(out) and all(e.output_tag is None and (
        takes_batches(g.node(e.target_id)) if job.chain_of(e.target_id) is job.chain_of(node_id)
        else typed and _batch_edge(e)) for e in out)


def _batch_edge(edge) -> bool:
    kind = edge.partitioner.kind
    return kind in (Partitioner.FORWARD, Partitioner.GLOBAL) or (
        kind is Partitioner.HASH and field_key(edge.partitioner.key_selector) is not None)


def two_inputs(job, chain, head, subtask: int, io: StreamTaskIO) -> TwoInputs:
    """The two inputs of a two-input head: its in-edges split by type number (1, 2),
    each input's channels merged through its own WatermarkValve; a broadcast input 2
    is read first (input_selection.py)."""
    by_input: dict[int, list[str]] = {1: [], 2: []}
    for e in chain.in_edges:
        by_input[job.edge(e).stream_edge.type_number].append(e)
    return TwoInputs(merged_input(io.input_channels(subtask, by_input[1]), statuses=True),
                     merged_input(io.input_channels(subtask, by_input[2]), statuses=True),
                     broadcast_first=head.two_input.broadcast)


def edge_record_type(job, edge_id: str) -> tuple[Any, str]:
    """(record type or None, label for errors) of the records on a chain out-edge: the
    producer's (declared, or read from its source's data), or the side output's."""
    chain_edge = job.edge(edge_id)
    g = job.stream_graph
    producer = g.node(chain_edge.stream_edge.source_id)
    return g.edge_type(chain_edge.stream_edge), f"operator {producer.name!r} writing edge {edge_id!r}"


def check_output_types(job, chain_id: str) -> None:
    """Start of a chain run: every output_type of the chain's operators (and of its
    file/SQL sinks) must parse, whether or not a record ever crosses an exchange
    or reaches a file."""
    from airflow_flinkchain.runtime.exchange.schema import parse_output_type

    g = job.stream_graph
    chain = job.chain(chain_id)
    for nid in chain.node_ids:
        node = g.node(nid)
        declared = [(node.output_type, f"operator {node.name!r}")]
        if node.kind is OperatorKind.SINK:
            declared.append((getattr(node.function, "output_type", None), f"sink {node.name!r}"))
        for output_type, label in declared:
            if output_type is not None:
                parse_output_type(output_type, label)
    for e in chain.out_edges:  # typed side outputs (OutputTag(..., output_type=...)) leaving the chain
        ce = job.edge(e)
        if ce.output_tag is not None and ce.stream_edge.output_type is not None:
            parse_output_type(ce.stream_edge.output_type, f"side output {ce.output_tag!r} of edge {e!r}")


def run_stream_task(load_job: Callable[[], Any], chain_id: str, subtask: int, run_id: str, io: StreamTaskIO,
                    runner: Optional[Callable] = None) -> dict:
    """Run one subtask and return its report; a failure (the plan, the input, a
    user function) is reported in `report["error"]`, never raised."""
    report: dict[str, Any] = {"subtask": subtask}
    try:
        job = load_job()
        inputs, plain_values = subtask_input(job, chain_id, subtask, io)
        if runner is None:
            from airflow_flinkchain.runtime.core.operator_chain import run_subtask as runner
        checkpoint = getattr(io, "checkpoint", None)  # a stream run's snapshots, or None
        extra = {} if checkpoint is None else {"checkpoint": checkpoint}
        if plain_values:  # skip the per-element StreamRecord/Watermark dispatch
            metrics = runner(job, chain_id, subtask, run_id, inputs, io.record_writer, io.sink_writer,
                             plain_values=True, **extra)
        else:
            metrics = runner(job, chain_id, subtask, run_id, inputs, io.record_writer, io.sink_writer, **extra)
        report["operators"] = metrics.to_dict()
        report["written"] = io.written()
        if checkpoint is not None:
            report["snapshots"] = checkpoint.summary()
    except Exception as exc:
        text = str(exc)
        if type(exc).__name__ != "ChainExecutionError":
            text = f"chain {chain_id!r}, subtask {subtask}: {type(exc).__name__}: {text}"
        report["error"] = text
    return report
