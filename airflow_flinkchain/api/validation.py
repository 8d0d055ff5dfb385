"""Call-time checks of the authoring API: fail on the user's own line with a
message naming the operator and the fix."""

from __future__ import annotations

import posixpath
import re
from typing import Any, Iterable, Optional

from airflow_flinkchain.common.typeinfo import TypeInformation, to_output_type
from airflow_flinkchain.functions import Function, OutputTag
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.graph.model import ErrorPolicy, OperatorKind
from airflow_flinkchain.io.sinks import CollectSink, DeltaSink, FileSink, IcebergSink, SqlSink
from airflow_flinkchain.path_names import UnsafeNameError, check_name


def check_parallelism(value: Any, what: str, operator: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PlanningError(
            f"operator {operator!r}: {what} must be a positive integer, got {value!r}", operator=operator
        )
    return value


def check_on_error(value: Optional[str], operator: Optional[str]) -> Optional[ErrorPolicy]:
    """The ErrorPolicy named by `value` (a string or an ErrorPolicy); None stays None (inherit)."""
    if value is None:
        return None
    try:
        return ErrorPolicy.parse(value, f"operator {operator!r}" if operator else "pipeline")
    except ValueError as exc:
        raise PlanningError(str(exc), operator=operator) from None


def check_function(fn: Any, method: str, what: str) -> Any:
    """Plain callables and function objects (with `method`) are both accepted;
    a function class itself is refused (calling it would build an instance
    per record instead of running its `method`)."""
    if isinstance(fn, type) and (issubclass(fn, Function) or callable(getattr(fn, method, None))):
        name = fn.__name__
        raise PlanningError(
            f"{what}() got the function class {name}, not an instance of it: pass {name}() "
            f"(e.g. .{what}({name}())) so that its {method}() runs on each record", operator=None
        )
    if callable(fn) or callable(getattr(fn, method, None)):
        return fn
    raise PlanningError(
        f"{what}() needs a callable or an object with a {method}() method, got {fn!r}", operator=None
    )


def typed_fields(output_type: Any, where: str, columnar: bool = False) -> dict:
    """The transformation fields of a declared record type. A PyFlink `TypeInformation`
    (`Types.TUPLE([...])`, ...) becomes `type_info`: the operator's records are coerced to it
    (Rows, tuples, float32, ...) and stay pickled; on a columnar (batch) operator it becomes
    the Arrow schema of `to_output_type`. Anything else is an `output_type` as before
    (a pyarrow schema or a dict; checked when the chain starts)."""
    if isinstance(output_type, TypeInformation):
        if columnar:
            columns = to_output_type(output_type)
            if columns is None:
                raise PlanningError(f"{where}: a batch operator's output_type must be Types.ROW_NAMED of basic types "
                                    f"(or a pyarrow schema / dict), got {output_type!r}")
            return {"output_type": columns}
        return {"output_type": None, "type_info": output_type}
    return {"output_type": output_type}


def tag_id(tag: Any) -> str:
    if isinstance(tag, OutputTag):
        return tag.tag_id
    if isinstance(tag, str) and tag:
        return tag
    raise PlanningError(f"expected an OutputTag (or its id), got {tag!r}")


def declared_tags(fn: Any, explicit: Optional[Iterable[Any]]) -> Optional[frozenset]:
    """Side-output tags a process function declares: `output_tags=[...]` given
    to process(), else an `output_tags` attribute on the function (class or
    instance). None when nothing is declared: any tag is then accepted, since
    a plain generator function cannot be inspected without running it."""
    source = explicit if explicit is not None else getattr(fn, "output_tags", None)
    if source is None:
        return None
    if isinstance(source, (OutputTag, str)):
        source = [source]
    return frozenset(tag_id(t) for t in source)


def check_dead_letter_policy(op: Any, pipeline_on_error: Optional[str]) -> None:
    """The dead-letter side output exists only for an operator that runs a user
    function under on_error="dead_letter" (its own setting, else the pipeline's)."""
    if op.kind in (OperatorKind.SOURCE, OperatorKind.SINK):
        raise PlanningError(
            f"operator {op.name!r} ({op.kind.value}) has no dead-letter output: only operators running a "
            "user function (map, flat_map, filter, process, reduce) dead-letter records. Take the dead "
            "letters of the operator after it.",
            operator=op.name,
        )
    policy = ErrorPolicy.effective(op.on_error, pipeline_on_error)
    if policy is not ErrorPolicy.DEAD_LETTER:
        raise PlanningError(
            f"operator {op.name!r} has no dead-letter output: its on_error policy is {policy.value!r}. "
            f"Set on_error='dead_letter' on it (e.g. .on_error('dead_letter') before dead_letters() / "
            "get_side_output(DEAD_LETTER_TAG)) or on the pipeline (StreamPipeline(..., on_error='dead_letter')).",
            operator=op.name,
        )


def check_sink_destinations(sinks: Iterable[Any]) -> None:
    """Every sink owns its destination: a run replaces what a sink wrote (a
    directory, a collect name, a run's rows of a table), so two sinks sharing
    one would silently replace each other's output. `sinks`: the pipeline's
    sink transformations (`.name`, `.function` = the sink descriptor)."""
    seen: list[tuple[Any, tuple]] = []
    for t in sinks:
        destination = _destination(t)
        for other, other_destination in seen:
            clash = _clash(other_destination, destination)
            if clash:
                raise PlanningError(
                    f"sinks {other.name!r} and {t.name!r} {clash}: a run replaces what a sink wrote, so one "
                    "would silently replace the other's output. Give each sink its own destination.",
                    operator=t.name,
                )
        seen.append((t, destination))


def _destination(t: Any) -> tuple:
    sink = t.function
    if isinstance(sink, CollectSink):
        try:
            check_name(sink.name, f"sink {t.name!r}: collect() name")
        except UnsafeNameError as exc:
            raise PlanningError(str(exc), operator=t.name) from None
        return ("collect", sink.name)
    if isinstance(sink, FileSink):
        path = _normalized_path(sink.path)
        if _is_root_or_dot(path):
            raise PlanningError(
                f"sink {t.name!r}: path {sink.path!r} is a root, current or parent directory, which each run "
                "would replace as a whole: give the sink a directory of its own (e.g. '/data/out/orders')",
                operator=t.name,
            )
        return ("files", path)
    if isinstance(sink, SqlSink):
        # A run's rows are keyed by its run id (and DAG id) columns: sinks keyed alike replace each other's rows.
        return ("table", sink.url or sink.conn_id, sink.table, sink.run_id_column, sink.dag_id_column)
    if isinstance(sink, DeltaSink):  # a run's commit (batch: its rows) of one table
        return ("lake", f"Delta table {_normalized_path(sink.path)!r}")
    if isinstance(sink, IcebergSink):
        return ("lake", f"Iceberg table {sink.table!r} of catalog {sink.catalog_name!r}")
    return ("other", id(sink))


def _normalized_path(path: str) -> str:
    """The directory a file sink replaces, normalized so that spellings of one path compare equal."""
    scheme = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", path)
    if scheme and scheme.group(1).lower() == "file":
        path = path[len(scheme.group(0)):]
    elif scheme:
        return scheme.group(0).lower() + posixpath.normpath("/" + path[len(scheme.group(0)):]).lstrip("/")
    return posixpath.normpath(path)


def _is_root_or_dot(path: str) -> bool:
    """'/', '.', '..', 'a/..', 's3a://bucket': directories a sink must not replace."""
    scheme, sep, rest = path.partition("://")
    rest = (rest if sep else scheme).rstrip("/")
    if sep and "/" not in rest:  # a bucket or host root
        return True
    return rest.rsplit("/", 1)[-1] in ("", ".", "..")


def _clash(a: tuple, b: tuple) -> Optional[str]:
    if a[0] != b[0] or a[0] == "other":
        return None
    if a[0] == "collect" and a[1] == b[1]:
        return f"both collect({a[1]!r})"
    if a[0] == "lake" and a == b:
        return f"both write the {a[1]}"
    if a[0] == "table" and a == b:
        return f"both write table {a[2]!r} of {a[1]!r} keyed by the same run id column {a[3]!r}"
    if a[0] == "files":
        if a[1] == b[1]:
            return f"both write the directory {a[1]!r}"
        outer, inner = sorted((a[1], b[1]), key=len)
        if inner.startswith(outer.rstrip("/") + "/"):
            return f"write nested directories ({inner!r} is inside {outer!r})"
    return None
