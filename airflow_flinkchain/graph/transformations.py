"""Transformations: what the authoring API records (Flink's `Transformation`).

One `OperatorTransformation` per physical operator; partitioning, side
outputs, select and union are *virtual* transformations that the builder
(`graph/builder.py`) folds into edge properties and extra in-edges, exactly
as Flink's StreamGraphGenerator folds its virtual nodes.

Recording is cheap on purpose: plain mutable objects, no validation beyond
what the API checks at call time, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from airflow_flinkchain.graph.model import ChainingStrategy, ErrorPolicy, OperatorKind, Partitioner, TwoInputSpec


@dataclass(eq=False)
class Transformation:
    """Base: `id` is the creation order inside the pipeline; `inputs` the
    upstream transformations (one for operators, several for a union)."""

    id: int
    inputs: tuple["Transformation", ...]


@dataclass(eq=False)
class OperatorTransformation(Transformation):
    """A physical operator. `None` in parallelism / max_parallelism /
    slot_sharing_group means "decide at plan time" (pipeline default,
    Flink's derived max parallelism, inherited group)."""

    kind: OperatorKind
    name: str
    function: Any = None
    uid: Optional[str] = None
    parallelism: Optional[int] = None
    max_parallelism: Optional[int] = None
    chaining_strategy: ChainingStrategy = ChainingStrategy.ALWAYS
    slot_sharing_group: Optional[str] = None
    key_selector: Optional[Callable[[Any], Any]] = None
    output_type: Any = None
    # A PyFlink TypeInformation the operator's main records are coerced to (records stay pickled).
    type_info: Any = None
    on_error: Optional[ErrorPolicy] = None  # None: the pipeline default
    settings: dict = field(default_factory=dict)
    # A non-parallel operator (from_collection) always runs with parallelism 1.
    non_parallel: bool = False
    # split(): the selector and, when declared, every name it can return.
    output_selector: Any = None
    selector_names: Optional[frozenset] = None
    # Side output tag ids the function declares (None: not declared, anything goes).
    declared_output_tags: Optional[frozenset] = None
    # A two-input operator (inputs: first, second stream): Flink's TwoInputTransformation.
    two_input: Optional[TwoInputSpec] = None


@dataclass(eq=False)
class PartitionTransformation(Transformation):
    """forward / rebalance / rescale / shuffle / broadcast / global_ /
    partition_custom / key_by (HASH)."""

    partitioner: Partitioner = Partitioner.FORWARD
    key_selector: Optional[Callable[[Any], Any]] = None
    custom_partitioner: Optional[Callable[[Any, int], int]] = None


@dataclass(eq=False)
class SideOutputTransformation(Transformation):
    tag_id: str = ""
    output_type: Any = None  # the OutputTag's declared record type, if any


@dataclass(eq=False)
class SelectTransformation(Transformation):
    names: tuple[str, ...] = ()


@dataclass(eq=False)
class UnionTransformation(Transformation):
    pass


def virtual_label(t: Transformation) -> str:
    """What produced a virtual stream, for error messages."""
    if isinstance(t, PartitionTransformation):
        return "key_by()" if t.partitioner is Partitioner.HASH else f"{t.partitioner.value.lower()} partitioning"
    if isinstance(t, SideOutputTransformation):
        return f"get_side_output({t.tag_id!r})"
    if isinstance(t, SelectTransformation):
        return f"select{t.names!r}"
    if isinstance(t, UnionTransformation):
        return "union()"
    return getattr(t, "name", "operator")
