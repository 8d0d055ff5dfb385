"""StreamGraph: Flink's StreamNode / StreamEdge as plain frozen data.

No Airflow, no Spark. Virtual nodes of the authoring API (partitioning, side
outputs, split/select, union) never appear here: as in Flink's StreamGraph
they have become properties of edges (partitioner, output tag, selected
names) or extra in-edges of the downstream node (union).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Optional


class Partitioner(str, enum.Enum):
    """Flink's StreamPartitioner kinds (what picks the channel of a record)."""

    FORWARD = "FORWARD"
    REBALANCE = "REBALANCE"
    RESCALE = "RESCALE"
    SHUFFLE = "SHUFFLE"
    BROADCAST = "BROADCAST"
    GLOBAL = "GLOBAL"
    HASH = "HASH"
    CUSTOM = "CUSTOM"

    def __str__(self) -> str:
        return self.value


class ChainingStrategy(str, enum.Enum):
    """Flink's ChainingStrategy: HEAD = start_new_chain, NEVER = disable_chaining."""

    ALWAYS = "ALWAYS"
    HEAD = "HEAD"
    NEVER = "NEVER"

    def __str__(self) -> str:
        return self.value


class OperatorKind(str, enum.Enum):
    SOURCE = "source"
    MAP = "map"
    FLAT_MAP = "flat_map"
    FILTER = "filter"
    # vectorized operators: functions of Arrow record batches (runtime/core/operators/batch.py)
    MAP_BATCHES = "map_batches"
    FILTER_BATCHES = "filter_batches"
    PROCESS = "process"
    KEYED_PROCESS = "keyed_process"
    REDUCE = "reduce"
    TIMESTAMPS_AND_WATERMARKS = "timestamps_and_watermarks"
    WINDOW = "window"
    SINK = "sink"
    # two-input operators (Flink's TwoInputStreamOperator): always chain heads
    CO_MAP = "co_map"
    CO_FLAT_MAP = "co_flat_map"
    CO_PROCESS = "co_process"
    KEYED_CO_PROCESS = "keyed_co_process"
    BROADCAST_PROCESS = "broadcast_process"
    KEYED_BROADCAST_PROCESS = "keyed_broadcast_process"
    INTERVAL_JOIN = "interval_join"

    def __str__(self) -> str:
        return self.value



class ErrorPolicy(str, enum.Enum):
    """What an operator does with a record its user function fails on (`on_error`).

    Flink fails the job; `DEAD_LETTER` and `SKIP` keep it running, sending the
    record to the operator's dead-letter side output or counting it as skipped.
    Users may give the value as a string (`on_error="skip"`)."""

    FAIL = "fail"
    DEAD_LETTER = "dead_letter"
    SKIP = "skip"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: Any, where: str = "on_error") -> "ErrorPolicy":
        """`value` as a policy; `ValueError` naming `where` (the operator or the pipeline) if unknown."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(
                f"{where}: on_error must be one of {', '.join(repr(p.value) for p in cls)}, got {value!r}"
            ) from None

    @classmethod
    def effective(cls, operator: Optional[str], pipeline: Optional[str], where: str = "on_error") -> "ErrorPolicy":
        """The operator's own policy, else the pipeline's default, else FAIL."""
        return cls.parse(operator or pipeline or cls.FAIL, where)


#: Tag id of the side output that ErrorPolicy.DEAD_LETTER sends failed records to
#: (functions.DEAD_LETTER_TAG).
DEAD_LETTER_TAG_ID = "dead_letter"

DEFAULT_SLOT_SHARING_GROUP = "default"
DEFAULT_MAX_PARALLELISM = 128

#: Runtime modes (Flink's RuntimeExecutionMode, lower-cased). The default is Flink's,
#: STREAMING; a deployment sets its own with `[flinkchain] runtime_mode` (deployment_config).
RUNTIME_MODES = ("batch", "streaming")
DEFAULT_RUNTIME_MODE = "streaming"
#: Flink's default auto-watermark interval (ms); 0 emits no watermark until the end.
DEFAULT_AUTO_WATERMARK_INTERVAL = 200


@dataclass(frozen=True)
class PartitionSpec:
    """How an edge picks channels. `key_selector` for HASH and CUSTOM,
    `custom_partitioner(key, num_channels) -> int` for CUSTOM, `max_parallelism`
    is the number of key groups for HASH (Flink's key-group assignment)."""

    kind: Partitioner
    key_selector: Optional[Callable[[Any], Any]] = field(default=None, compare=False)
    custom_partitioner: Optional[Callable[[Any, int], int]] = field(default=None, compare=False)
    max_parallelism: int = DEFAULT_MAX_PARALLELISM


@dataclass(frozen=True)
class TwoInputSpec:
    """What a two-input operator knows besides its function: the key selector of
    input 2 (keyed connected streams; input 1's is the node's `key_selector`) and
    the MapStateDescriptors of a broadcast input 2 (`DataStream.broadcast(...)`).
    A broadcast input is read in full before the other one."""

    key_selector2: Optional[Callable[[Any], Any]] = field(default=None, compare=False)
    broadcast_state_descriptors: tuple = field(default=(), compare=False)

    @property
    def broadcast(self) -> bool:
        return bool(self.broadcast_state_descriptors)


@dataclass(frozen=True, eq=False)
class StreamNode:
    """One physical operator.

    `key` is unique in the graph, stable and readable (the uid if set, else a
    slug of the name, de-duplicated); ids of chains, edges and Airflow tasks
    derive from it. `function` is the user function (or the source/sink
    descriptor); `key_selector` is set on keyed operators (state is per key);
    `output_selector` is set when the node's output was `split()` (its out-edges
    then carry `selected_names`, routed by a DirectedOutput)."""

    id: int
    key: str
    kind: OperatorKind
    name: str
    parallelism: int
    uid: Optional[str] = None
    max_parallelism: int = DEFAULT_MAX_PARALLELISM
    chaining_strategy: ChainingStrategy = ChainingStrategy.ALWAYS
    slot_sharing_group: str = DEFAULT_SLOT_SHARING_GROUP
    function: Any = None
    key_selector: Optional[Callable[[Any], Any]] = None
    output_selector: Any = None
    output_type: Any = None
    type_info: Any = None  # a PyFlink TypeInformation: main records are coerced to it (TypeCoercingOutput)
    on_error: Optional[ErrorPolicy] = None  # None: the pipeline's default
    settings: dict = field(default_factory=dict)
    two_input: Optional[TwoInputSpec] = None  # set on two-input operators (their in-edges: type_number 1, 2)


@dataclass(frozen=True)
class StreamEdge:
    """A physical edge. `index` tells apart several edges between the same two
    nodes (a stream unioned with itself); `type_number` is the input position at
    the target (0 for one-input operators, 1 or 2 for the inputs of a two-input
    operator, as Flink's typeNumber; all inputs of a union share it)."""

    source_id: int
    target_id: int
    partitioner: PartitionSpec
    output_tag: Optional[str] = None
    selected_names: tuple[str, ...] = ()
    type_number: int = 0
    index: int = 0
    # declared record type of a side-output edge (its OutputTag's output_type); main-output
    # edges take the producer node's output_type. Not part of the edge's identity.
    output_type: Any = field(default=None, compare=False)


@dataclass(frozen=True, eq=False)
class StreamGraph:
    """Nodes in id order; edges in creation order, so that a node's out-edges
    come in the order Flink's StreamGraph lists them."""

    name: str
    nodes: tuple[StreamNode, ...]
    edges: tuple[StreamEdge, ...]
    chaining_enabled: bool = True
    object_reuse: bool = False
    on_error: ErrorPolicy = ErrorPolicy.FAIL  # the pipeline's default policy
    runtime_mode: str = DEFAULT_RUNTIME_MODE  # "batch" | "streaming"
    auto_watermark_interval: int = DEFAULT_AUTO_WATERMARK_INTERVAL  # ms
    state_backend: Any = None  # the StateBackend's spec() (plain dict); None: hashmap
    # read from the data when a run starts (runtime/connectors/inferred_types.py): node id -> the
    # pyarrow schema of an undeclared node's records, and node id -> why none could be read
    inferred_types: dict = field(default_factory=dict, compare=False)
    type_notes: dict = field(default_factory=dict, compare=False)
    _by_id: dict = field(init=False, repr=False, compare=False)
    _out: dict = field(init=False, repr=False, compare=False)
    _in: dict = field(init=False, repr=False, compare=False)
    _by_key: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_id = {n.id: n for n in self.nodes}
        out: dict[int, list[StreamEdge]] = {n.id: [] for n in self.nodes}
        inn: dict[int, list[StreamEdge]] = {n.id: [] for n in self.nodes}
        for e in self.edges:
            out[e.source_id].append(e)
            inn[e.target_id].append(e)
        object.__setattr__(self, "_by_id", by_id)
        object.__setattr__(self, "_out", {k: tuple(v) for k, v in out.items()})
        object.__setattr__(self, "_in", {k: tuple(v) for k, v in inn.items()})
        object.__setattr__(self, "_by_key", {n.key: n for n in self.nodes})

    def node(self, node_id: int) -> StreamNode:
        return self._by_id[node_id]

    def out_edges(self, node_id: int) -> tuple[StreamEdge, ...]:
        return self._out[node_id]

    def in_edges(self, node_id: int) -> tuple[StreamEdge, ...]:
        return self._in[node_id]

    def node_by_key(self, key: str) -> StreamNode:
        return self._by_key[key]

    def record_type(self, node_id: int) -> Any:
        """The type of the node's main output records: its declared `output_type`, else the
        schema its source's data carries (`inferred_types`), else None (pickled records)."""
        declared = self._by_id[node_id].output_type
        return declared if declared is not None else self.inferred_types.get(node_id)

    def edge_type(self, edge: "StreamEdge") -> Any:
        """The record type of an edge: a side output's declared one, else its producer's."""
        return edge.output_type if edge.output_tag is not None else self.record_type(edge.source_id)


def edge_id(graph: StreamGraph, edge: StreamEdge) -> str:
    """Stable, readable id of an edge, used for exchange directories:
    `<source key>__<target key>` (plus `__<index>` for repeated edges)."""
    base = f"{graph.node(edge.source_id).key}__{graph.node(edge.target_id).key}"
    return base if edge.index == 0 else f"{base}__{edge.index}"
