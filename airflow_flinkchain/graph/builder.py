"""Transformations → StreamGraph, with Flink's StreamGraphGenerator rules.

- An edge with no explicit partitioner is FORWARD when both ends have the
  same parallelism, else REBALANCE; an explicit forward() across a
  parallelism change is refused (StreamGraph.addEdgeInternal).
- key_by gives HASH with the key selector and the *target's* max parallelism.
- Slot sharing group: explicit, else the group shared by all physical
  inputs, else "default" (StreamGraphGenerator.determineSlotSharingGroup).
- Virtual transformations become edge properties; on a stack of virtual
  partitionings the one applied last (nearest the consumer) wins, as in Flink.
- Edges are created per downstream operator in creation order, so each
  node's out-edges are ordered by the creation of their targets.

Linear in the number of transformations and edges.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from airflow_flinkchain.graph.errors import PlanningError, PlanningWarning
from airflow_flinkchain.graph.model import (
    DEAD_LETTER_TAG_ID,
    DEFAULT_AUTO_WATERMARK_INTERVAL,
    DEFAULT_RUNTIME_MODE,
    DEFAULT_SLOT_SHARING_GROUP,
    RUNTIME_MODES,
    ErrorPolicy,
    OperatorKind,
    PartitionSpec,
    Partitioner,
    StreamEdge,
    StreamGraph,
    StreamNode,
)
from airflow_flinkchain.graph.transformations import (
    OperatorTransformation,
    PartitionTransformation,
    SelectTransformation,
    SideOutputTransformation,
    Transformation,
    UnionTransformation,
)
from airflow_flinkchain.path_names import UnsafeNameError, check_name, shortened

MAX_MAX_PARALLELISM = 32768  # Flink's UPPER_BOUND_MAX_PARALLELISM
# Keys never contain "__": edge ids join two keys with it (graph.model.edge_id).
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+|__+")


@dataclass(frozen=True)
class _Route:
    """A resolved path from a physical upstream operator through virtual nodes."""

    source: OperatorTransformation
    partition: Optional[PartitionTransformation] = None
    output_tag: Optional[str] = None
    selected_names: tuple[str, ...] = ()
    output_type: Any = field(default=None, compare=False)  # of the side output (OutputTag.output_type)


def default_max_parallelism(parallelism: int) -> int:
    """Flink's KeyGroupRangeAssignment.computeDefaultMaxParallelism:
    1.5 × parallelism rounded up to a power of two, within [128, 32768]."""
    wanted = parallelism + parallelism // 2
    power = 1
    while power < wanted:
        power <<= 1
    return min(max(power, 128), MAX_MAX_PARALLELISM)


def slugify(text: str) -> str:
    """`"Keyed Reduce"` → `"keyed_reduce"`: safe for task ids and paths."""
    slug = re.sub(r"_{2,}", "_", _KEY_UNSAFE.sub("_", text.strip())).strip("_.-").lower()
    return slug or "operator"


def assign_keys(operators: Iterable[OperatorTransformation]) -> dict[int, str]:
    """Unique readable keys: the uid when set (made path-safe), else the slug
    of the name, de-duplicated with `_2`, `_3`, ... in creation order. uids
    are reserved first so that adding an unnamed operator never renames an
    operator with a uid."""
    ops = list(operators)
    keys: dict[int, str] = {}
    used: dict[str, OperatorTransformation] = {}
    for t in ops:
        if t.uid is None:
            continue
        key = shortened(t.uid if not _KEY_UNSAFE.search(t.uid) else slugify(t.uid), t.uid)
        try:
            check_name(key, f"operator {t.name!r}: uid")
        except UnsafeNameError as exc:
            raise PlanningError(str(exc), operator=t.name) from None
        if key in used:
            other = used[key]
            raise PlanningError(
                (f"operators {other.name!r} and {t.name!r} have the same uid {t.uid!r}"
                 if other.uid == t.uid
                 else f"uids {other.uid!r} ({other.name!r}) and {t.uid!r} ({t.name!r}) map to the same key {key!r}")
                + ": uids must be unique in a pipeline; give each operator its own uid()",
                operator=t.name,
            ) from None
        keys[t.id] = key
        used[key] = t
    next_suffix: dict[str, int] = {}
    for t in ops:
        if t.uid is not None:
            continue
        base = shortened(slugify(t.name), t.name)
        key, n = base, next_suffix.get(base, 2)
        while key in used:
            key = f"{base}_{n}"
            n += 1
        next_suffix[base] = n
        keys[t.id] = key
        used[key] = t
    return keys


class _Resolver:
    """Resolves any transformation into the physical routes feeding a consumer."""

    def __init__(self) -> None:
        self._memo: dict[int, tuple[_Route, ...]] = {}

    def routes(self, t: Transformation) -> tuple[_Route, ...]:
        """Inputs are resolved before the transformations that read them, with an
        explicit stack: a long run of unions or partitionings needs no recursion."""
        memo = self._memo
        pending = [t]
        while pending:
            top = pending[-1]
            if top.id in memo:
                pending.pop()
                continue
            unresolved = [] if isinstance(top, OperatorTransformation) else [
                i for i in top.inputs if i.id not in memo]
            if unresolved:
                pending.extend(unresolved)
                continue
            pending.pop()
            memo[top.id] = self._resolve(top)
        return memo[t.id]

    def _resolve(self, t: Transformation) -> tuple[_Route, ...]:
        """t's routes, its inputs' being resolved."""
        if isinstance(t, OperatorTransformation):
            return (_Route(t),)
        if isinstance(t, UnionTransformation):
            return tuple(r for i in t.inputs for r in self._memo[i.id])
        (inner,) = t.inputs
        return tuple(self._wrap(r, t) for r in self._memo[inner.id])

    @staticmethod
    def _wrap(route: _Route, t: Transformation) -> _Route:
        if isinstance(t, PartitionTransformation):
            # Applied last = nearest the consumer: it wins (as in Flink).
            return _Route(route.source, t, route.output_tag, route.selected_names, route.output_type)
        if isinstance(t, SideOutputTransformation):
            return _Route(route.source, route.partition, t.tag_id, route.selected_names, t.output_type)
        if isinstance(t, SelectTransformation):
            return _Route(route.source, route.partition, route.output_tag, t.names, route.output_type)
        raise TypeError(f"unknown transformation {t!r}")  # pragma: no cover


def build_stream_graph(
    name: str,
    transformations: Iterable[Transformation],
    *,
    default_parallelism: int = 1,
    chaining_enabled: bool = True,
    object_reuse: bool = False,
    on_error: str = ErrorPolicy.FAIL,
    runtime_mode: str = DEFAULT_RUNTIME_MODE,
    auto_watermark_interval: int = DEFAULT_AUTO_WATERMARK_INTERVAL,
    state_backend: Optional[dict] = None,
) -> StreamGraph:
    """Translate recorded transformations (any order) into a StreamGraph."""
    if runtime_mode not in RUNTIME_MODES:
        raise PlanningError(
            f"pipeline {name!r}: runtime mode must be one of {', '.join(map(repr, RUNTIME_MODES))}, "
            f"got {runtime_mode!r}"
        )
    ordered = sorted(transformations, key=lambda t: t.id)
    operators = [t for t in ordered if isinstance(t, OperatorTransformation)]
    if not any(t.kind is OperatorKind.SINK for t in operators):
        raise PlanningError(
            f"pipeline {name!r} has no sink: nothing would be written. End each branch with "
            "sink_to(sink) or collect(name)."
        )
    keys = assign_keys(operators)
    resolver = _Resolver()
    parallelism: dict[int, int] = {}
    max_par: dict[int, int] = {}
    group: dict[int, str] = {}
    nodes: list[StreamNode] = []
    edges: list[StreamEdge] = []
    pair_count: dict[tuple[int, int], int] = {}

    for t in operators:
        p = 1 if t.non_parallel else (t.parallelism or default_parallelism)
        mp = t.max_parallelism or default_max_parallelism(p)
        if p > mp:
            raise PlanningError(
                f"operator {t.name!r}: parallelism {p} exceeds its max parallelism {mp}; "
                "lower set_parallelism() or raise set_max_parallelism()",
                operator=t.name,
            )
        parallelism[t.id], max_par[t.id] = p, mp
        routes = [r for i in t.inputs for r in resolver.routes(i)]
        # a two-input operator's in-edges carry their input's position (Flink's typeNumber 1, 2)
        type_numbers = ([n for n, i in enumerate(t.inputs, 1) for _ in resolver.routes(i)]
                        if t.two_input is not None else [0] * len(routes))
        for route in routes:
            if route.source.id not in parallelism or route.source is t:  # inputs come first, unless looped back
                raise PlanningError(
                    f"pipeline {name!r} has a cycle: operator {t.name!r} reads from {route.source.name!r}, "
                    f"which is created after it (downstream): a pipeline must be a DAG. Remove the edge that "
                    f"feeds {route.source.name!r}'s output back into {t.name!r}.",
                    operator=t.name,
                )
        group[t.id] = _slot_sharing_group(t, routes, group)
        for route, type_number in zip(routes, type_numbers):
            _check_dead_letter_route(route, on_error)
            _check_split_without_side_outputs(route)
            edges.append(_edge(route, t, parallelism, mp, pair_count, type_number))
        _check_selected_names(t, routes)
        nodes.append(
            StreamNode(
                id=t.id,
                key=keys[t.id],
                kind=t.kind,
                name=t.name,
                parallelism=p,
                uid=t.uid,
                max_parallelism=mp,
                chaining_strategy=t.chaining_strategy,
                slot_sharing_group=group[t.id],
                function=t.function,
                key_selector=t.key_selector,
                output_selector=t.output_selector,
                output_type=t.output_type,
                type_info=t.type_info,
                on_error=t.on_error,
                settings=dict(t.settings),
                two_input=t.two_input,
            )
        )
    return StreamGraph(
        name=name,
        nodes=tuple(nodes),
        edges=tuple(edges),
        chaining_enabled=chaining_enabled,
        object_reuse=object_reuse,
        on_error=ErrorPolicy.parse(on_error, f"pipeline {name!r}"),
        runtime_mode=runtime_mode,
        auto_watermark_interval=int(auto_watermark_interval),
        state_backend=state_backend,
    )


def _slot_sharing_group(t: OperatorTransformation, routes: list[_Route], group: dict[int, str]) -> str:
    if t.slot_sharing_group is not None:
        return t.slot_sharing_group
    inherited: Optional[str] = None
    for r in routes:
        candidate = group[r.source.id]
        if inherited is None:
            inherited = candidate
        elif inherited != candidate:
            return DEFAULT_SLOT_SHARING_GROUP
    return inherited or DEFAULT_SLOT_SHARING_GROUP


def _edge(
    route: _Route,
    target: OperatorTransformation,
    parallelism: dict[int, int],
    target_max_parallelism: int,
    pair_count: dict[tuple[int, int], int],
    type_number: int = 0,
) -> StreamEdge:
    src = route.source
    up, down = parallelism[src.id], parallelism[target.id]
    part = route.partition
    if part is None:
        spec = PartitionSpec(Partitioner.FORWARD if up == down else Partitioner.REBALANCE)
    else:
        if part.partitioner is Partitioner.FORWARD and up != down:
            raise PlanningError(
                "Forward partitioning does not allow change of parallelism. "
                f"Upstream operation: {src.name!r} parallelism: {up}, downstream operation: "
                f"{target.name!r} parallelism: {down}. You must use another partitioning strategy, "
                "such as broadcast, rebalance, shuffle or global (or give both the same parallelism).",
                operator=target.name,
            )
        spec = PartitionSpec(
            part.partitioner,
            key_selector=part.key_selector,
            custom_partitioner=part.custom_partitioner,
            max_parallelism=target_max_parallelism,
        )
    pair = (src.id, target.id)
    index = pair_count.get(pair, 0)
    pair_count[pair] = index + 1
    return StreamEdge(
        source_id=src.id,
        target_id=target.id,
        partitioner=spec,
        output_tag=route.output_tag,
        selected_names=route.selected_names,
        type_number=type_number,
        index=index,
        output_type=route.output_type,
    )


def _check_dead_letter_route(route: _Route, pipeline_on_error: str) -> None:
    """Re-checked at plan time: on_error may have changed after dead_letters()."""
    src = route.source
    if route.output_tag != DEAD_LETTER_TAG_ID or (
        src.declared_output_tags is not None and DEAD_LETTER_TAG_ID in src.declared_output_tags
    ):
        return
    policy = ErrorPolicy.effective(src.on_error, pipeline_on_error)
    if policy is not ErrorPolicy.DEAD_LETTER:
        raise PlanningError(
            f"operator {src.name!r}: its dead-letter output is used, but its on_error policy is {policy.value!r}, "
            "so it never dead-letters a record. Set on_error='dead_letter' on it or on the pipeline.",
            operator=src.name,
        )


def _check_split_without_side_outputs(route: _Route) -> None:
    """Flink refuses split() and get_side_output() on one operator (its
    dead-letter output is not a side output of the function: allowed)."""
    src = route.source
    if src.output_selector is None or route.output_tag is None or route.output_tag == DEAD_LETTER_TAG_ID:
        return
    raise PlanningError(
        f"operator {src.name!r} is split (split()) and its side output {route.output_tag!r} is used "
        "(get_side_output()): split() and get_side_output() may not be used on the same operator, as in Flink. "
        f"Add a map() after {src.name!r} and split that instead.",
        operator=src.name,
    )


def _check_selected_names(target: OperatorTransformation, routes: list[_Route]) -> None:
    for r in routes:
        declared = r.source.selector_names
        if not r.selected_names or declared is None:
            continue
        unknown = [n for n in r.selected_names if n not in declared]
        if unknown:
            warnings.warn(
                f"operator {target.name!r} selects {unknown} from the split of {r.source.name!r}, "
                f"whose selector only returns {sorted(declared)}: it will receive nothing from them. "
                "Fix the name in select() or the names declared in split(..., names=[...]).",
                PlanningWarning,
                stacklevel=4,
            )
