"""Call-time checks of the authoring API: fail on the user's own line with a
message naming the operator and the fix."""

from __future__ import annotations

from typing import Any, Iterable, Optional

from airflow_flinkchain.functions import OutputTag
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.graph.model import OperatorKind

ON_ERROR_CHOICES = ("fail", "dead_letter", "skip")


def check_parallelism(value: Any, what: str, operator: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PlanningError(
            f"operator {operator!r}: {what} must be a positive integer, got {value!r}", operator=operator
        )
    return value


def check_on_error(value: Optional[str], operator: Optional[str]) -> Optional[str]:
    if value is not None and value not in ON_ERROR_CHOICES:
        where = f"operator {operator!r}" if operator else "pipeline"
        raise PlanningError(
            f"{where}: on_error must be one of {', '.join(map(repr, ON_ERROR_CHOICES))}, got {value!r}",
            operator=operator,
        )
    return value


def check_function(fn: Any, method: str, what: str) -> Any:
    """Plain callables and function classes (with `method`) are both accepted."""
    if callable(fn) or callable(getattr(fn, method, None)):
        return fn
    raise PlanningError(
        f"{what}() needs a callable or an object with a {method}() method, got {fn!r}", operator=None
    )


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
    policy = op.on_error or pipeline_on_error or "fail"
    if policy != "dead_letter":
        raise PlanningError(
            f"operator {op.name!r} has no dead-letter output: its on_error policy is {policy!r}. "
            f"Set on_error='dead_letter' on it (e.g. .on_error('dead_letter') before dead_letters() / "
            "get_side_output(DEAD_LETTER_TAG)) or on the pipeline (StreamPipeline(..., on_error='dead_letter')).",
            operator=op.name,
        )
