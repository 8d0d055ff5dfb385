"""Which operators compute over Arrow batches: batch functions, and the built-in aggregations
(`KeyedStream.sum/min/max/min_by/max_by`, the same on a tumbling event-time `WindowedStream`)
of a stream keyed by a field (graph/field_keys.py). Used by the runtime (which operator to
build, whether a chain head reads batches) and by `flinkchain plan` / the Chains tab (the
"vectorized" mark); docs/vectorized.md says when the batch path is taken."""

from __future__ import annotations

from typing import Any, Optional

from airflow_flinkchain.graph.field_keys import field_key, timestamp_field
from airflow_flinkchain.graph.model import OperatorKind, Partitioner
from airflow_flinkchain.graph.windows import WindowFunctionKind
from airflow_flinkchain.window import TumblingEventTimeWindows


def vectorized_aggregation(node: Any) -> Optional[str]:
    """The key field of a keyed built-in aggregation (`KeyedStream.sum/min/max/min_by/max_by`)
    that takes Arrow batches, or None when the operator runs per record only."""
    fn = node.function
    if node.kind is not OperatorKind.REDUCE or not getattr(fn, "vectorizable", False) or \
            type(getattr(fn, "position", None)) is not str:
        return None  # a position (tuples, lists) has no column
    return field_key(node.key_selector)


def combined_edge(graph: Any, edge: Any) -> Optional[str]:
    """The key field of a HASH edge whose producer sends partial aggregates (one row per key
    and run of its output, runtime/core/combiner.py) instead of every row: BATCH mode, into a
    vectorized keyed aggregation keyed by the field the edge partitions by. None otherwise."""
    if graph is None or graph.runtime_mode == "streaming" or edge.partitioner.kind is not Partitioner.HASH:
        return None
    key = vectorized_aggregation(graph.node(edge.target_id))
    return key if key is not None and field_key(edge.partitioner.key_selector) == key else None


def shows_combined(graph: Any, edge: Any) -> bool:
    """What `flinkchain plan` and the plan's JSON say of a chain edge: combined_edge, into an
    aggregation that runs vectorized for the input's known schema (runs_vectorized)."""
    return combined_edge(graph, edge) is not None and runs_vectorized(graph, graph.node(edge.target_id))


def vectorized_window(node: Any) -> Optional[str]:
    """The key field of a keyed tumbling event-time window computing a built-in aggregation
    (`WindowedStream.sum/min/max/min_by/max_by`, or `aggregate(Aggregates.of(...))`) with the
    default trigger and no window function: it has a batch path (in STREAMING mode, fed batches
    with their per-record watermarks: takes_watermarked_batches). None otherwise."""
    spec = node.function
    if node.kind is not OperatorKind.WINDOW or getattr(spec, "all_windows", True) or spec.trigger is not None \
            or spec.window_function is not None or type(spec.assigner) is not TumblingEventTimeWindows:
        return None
    fn = spec.function
    if not getattr(fn, "vectorizable", False):
        return None
    if spec.function_kind is WindowFunctionKind.AGGREGATE:
        fields = [f for f, _how in getattr(fn, "columns", {}).values()]
    else:
        fields = [getattr(fn, "position", None)]
    return field_key(node.key_selector) if all(type(f) is str for f in fields) else None


def vectorized_timestamps(node: Any) -> Optional[str]:
    """The field an `assign_timestamps_and_watermarks` operator's TimestampAssigner reads
    (graph/field_keys.py: `timestamp_field`): it stamps whole batches from that column. None
    when the assigner is anything else (or absent)."""
    if node.kind is not OperatorKind.TIMESTAMPS_AND_WATERMARKS:
        return None
    get = getattr(node.function, "get_timestamp_assigner", None)
    return None if get is None else timestamp_field(get())


def takes_batches(node: Any) -> bool:
    """Whether the operator has a batch path (batch functions, vectorized aggregations,
    a timestamp assigner reading a field)."""
    return node.kind in (OperatorKind.MAP_BATCHES, OperatorKind.FILTER_BATCHES) or \
        vectorized_aggregation(node) is not None or vectorized_window(node) is not None or \
        vectorized_timestamps(node) is not None


_BUFFERING_KINDS = frozenset({OperatorKind.WINDOW, OperatorKind.REDUCE, OperatorKind.KEYED_PROCESS, OperatorKind.MAP,
                              OperatorKind.FLAT_MAP, OperatorKind.FILTER})


def buffers_batches(graph: Any, node: Any) -> Optional[str]:
    """The key field of a single-input keyed operator, in BATCH mode, whose per-key input buffer
    takes whole Arrow batches (grouped by that column, each row becoming a record once): a
    chain head reading typed exchange files, whatever its function (a user reduce, a window
    with any function, a keyed process). None in STREAMING mode and for other operators."""
    if graph is None or graph.runtime_mode == "streaming" or node.kind not in _BUFFERING_KINDS or \
            getattr(node, "two_input", None) is not None:
        return None
    if node.kind is OperatorKind.WINDOW and getattr(node.function, "all_windows", True):
        return None
    return field_key(node.key_selector)


def takes_watermarked_batches(graph: Any, node: Any) -> bool:
    """Whether the operator, as a chain head reading typed exchange files, takes whole batches
    with their per-record watermarks (a vectorized window in STREAMING mode)."""
    return graph is not None and graph.runtime_mode == "streaming" and vectorized_window(node) is not None


def runs_vectorized(graph: Any, node: Any) -> bool:
    """Whether the operator computes over Arrow batches (what `flinkchain plan` and the Chains
    tab mark "vectorized"): a batch function always; a vectorized aggregation, window
    aggregation or timestamp assigner when the schema of its input (declared, or read from its
    source's files when the run starts: StreamGraph.record_type) has the fields it needs with
    the types its batch path takes (the chain head then reads the exchange as batches)."""
    if node.kind in (OperatorKind.MAP_BATCHES, OperatorKind.FILTER_BATCHES):
        return True
    return _needs(node) is not None and per_record_reason(graph, node) is None


def per_record_reason(graph: Any, node: Any) -> Optional[str]:
    """Why a built-in with a batch path (has_batch_form: an aggregation, a timestamp assigner
    reading a field) runs per record: a user function as its key selector, a window shape
    without one, an input without a known schema (a user function before it that declares no
    output_type, a source whose files were not read), a field missing or of another type.
    None when it runs vectorized, and for every other operator (user reduce functions, ...)."""
    if node.kind not in (OperatorKind.REDUCE, OperatorKind.WINDOW, OperatorKind.TIMESTAMPS_AND_WATERMARKS) \
            or not has_batch_form(node):
        return None
    needs = _needs(node)
    if needs is None:
        return _user_function(node)
    edges = graph.in_edges(node.id)
    if not edges:
        return "it has no input"
    key, fields = needs
    for e in edges:
        declared = graph.edge_type(e)
        if declared is None:
            return _unknown_input(graph, e)
        types = _field_types(declared)
        if key is not None:
            why = _check(types, key, "key", "its key field")
            if why is not None:
                return why
        for name, need in fields.items():
            why = _check(types, name, need, "field")
            if why is not None:
                return why
    return None


def has_batch_form(node: Any) -> bool:
    """Whether the operator is one of the built-ins with a batch path - an aggregation
    (`sum`, ..., `Aggregates.of`) or a timestamp assigner reading a field - whatever its key,
    window or input: `flinkchain plan` says why such an operator runs per record."""
    fn = node.function.function if node.kind is OperatorKind.WINDOW else node.function
    if node.kind in (OperatorKind.REDUCE, OperatorKind.WINDOW):
        return getattr(fn, "vectorizable", False)
    return vectorized_timestamps(node) is not None


def _needs(node: Any) -> Optional[tuple]:
    """(key field or None, {field: "number" | "integer" | "sum" | "any"}) of an operator with a
    batch path, None without one."""
    key = vectorized_aggregation(node)
    if key is not None:
        fn = node.function
        return key, {fn.position: "sum" if fn.kind == "sum" else "number"}
    key = vectorized_window(node)
    if key is not None:
        fn = node.function.function
        if node.function.function_kind is WindowFunctionKind.AGGREGATE:
            fields: dict = {}
            for field, how in fn.columns.values():
                need = {"first": "any", "count": "any", "sum": "sum", "avg": "sum"}.get(how, "number")
                if fields.get(field, "any") == "any":
                    fields[field] = need
            return key, fields
        return key, {fn.position: "sum" if fn.kind == "sum" else "number"}
    ts = vectorized_timestamps(node)
    return None if ts is None else (None, {ts: "integer"})


def _user_function(node: Any) -> str:
    if node.kind is OperatorKind.WINDOW and vectorized_window_shape(node) is not None:
        return vectorized_window_shape(node)
    if field_key(node.key_selector) is None:
        return "its key selector is a user function (only one returning a field, r[\"k\"], takes batches)"
    return "it aggregates a position, not a named field of dict records"


def vectorized_window_shape(node: Any) -> Optional[str]:
    """Why a window's shape has no batch path (None: a keyed tumbling event-time window with
    the default trigger and no window function)."""
    spec = node.function
    if getattr(spec, "all_windows", True):
        return "window_all runs per record"
    if type(spec.assigner) is not TumblingEventTimeWindows:
        return f"a {type(spec.assigner).__name__} window runs per record (only tumbling event-time ones take batches)"
    if spec.trigger is not None or spec.window_function is not None:
        return "a custom trigger or a window function runs per record"
    return None


def _unknown_input(graph: Any, edge: Any) -> str:
    producer = graph.node(edge.source_id)
    if edge.output_tag is not None:
        return f"its input, side output {edge.output_tag!r} of {producer.name!r}, declares no output_type"
    if producer.type_info is not None:
        return f"{producer.name!r} declares a PyFlink type (records, not columns)"
    if producer.kind is OperatorKind.SOURCE:
        note = graph.type_notes.get(producer.id) or "its schema is read from its files when a run starts"
        return f"source {producer.name!r} declares no output_type and its schema is unknown at plan time: {note}"
    if producer.kind is OperatorKind.TIMESTAMPS_AND_WATERMARKS:
        return _unknown_input(graph, graph.in_edges(producer.id)[0]) if len(graph.in_edges(producer.id)) == 1 \
            else f"the inputs of {producer.name!r} have no one known schema"
    return f"its input comes from {producer.name!r}, a user function ({producer.kind}) that declares no output_type"


_ALIASES = {"int": "int64", "float": "double", "str": "string", "boolean": "bool", "utf8": "string",
            "large_utf8": "large_string"}
_INTEGERS = frozenset(f"{u}int{n}" for u in ("", "u") for n in (8, 16, 32, 64))
_FLOATS = frozenset({"halffloat", "float", "double", "float16", "float32", "float64"})
_STRINGS = frozenset({"string", "large_string"})


def _field_types(declared: Any) -> dict:
    """{field: type name} of a declared type (a dict of types or a pyarrow schema)."""
    if isinstance(declared, dict):
        pairs = declared.items()
    else:
        pairs = zip(getattr(declared, "names", ()), getattr(declared, "types", ()))
    out = {}
    for name, typ in pairs:
        text = str(typ).strip().lower()
        if text.endswith(" not null"):
            text = text[: -len(" not null")].strip()
        out[name] = _ALIASES.get(text, text)
    return out


def _check(types: dict, name: Any, need: str, what: str) -> Optional[str]:
    if name not in types:
        return f"{what} {name!r} is not in its input's fields ({', '.join(map(str, types)) or 'none'})"
    t = types[name]
    if need == "key":
        ok, expected = t in _INTEGERS or t in _STRINGS, "an integer or a string"
    elif need == "integer":
        ok, expected = t in _INTEGERS, "an integer"
    elif need == "sum" and t in _FLOATS:
        return f"{what} {name!r} is {t}: a sum of floats depends on the order of its terms"
    elif need in ("sum", "number"):
        ok, expected = t in _INTEGERS or t in _FLOATS, "a number"
    else:
        ok, expected = True, ""
    return None if ok else f"{what} {name!r} is {t}, not {expected}"
