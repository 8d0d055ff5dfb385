"""map_batches / filter_batches: argument checks and the recorded BatchFunction."""

from __future__ import annotations

from typing import Any, Iterable, Optional

from airflow_flinkchain.api.validation import check_function, declared_tags
from airflow_flinkchain.batch_functions import BATCH_FORMATS, BatchFunction
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.graph.model import OperatorKind


def batch_function(stream: Any, kind: OperatorKind, func: Any, batch_format: str, batch_size: Optional[int],
                   output_tags: Optional[Iterable[Any]]) -> tuple[BatchFunction, Optional[frozenset]]:
    """(the BatchFunction to record, its declared side output tag ids) or a PlanningError."""
    what = kind.value
    check_function(func, what, what)
    if stream._key_selector() is not None:
        raise PlanningError(
            f"{what}() on a KeyedStream: a batch function sees many keys at once and has no key context. "
            f"Call {what}() before key_by(), or use map/filter/process on the KeyedStream.")
    if batch_format not in BATCH_FORMATS:
        raise PlanningError(f"{what}(): batch_format must be one of {', '.join(map(repr, BATCH_FORMATS))}, "
                            f"got {batch_format!r}")
    if batch_format == "pandas":
        try:
            import pandas  # noqa: F401
        except ImportError:  # pragma: no cover - pandas ships with the project's dependencies
            raise PlanningError(f"{what}(batch_format='pandas') needs pandas installed; "
                                "use batch_format='pyarrow'") from None
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                   or batch_size < 1):
        raise PlanningError(f"{what}(): batch_size must be a positive int or None, got {batch_size!r}")
    return BatchFunction(func, batch_format, batch_size), declared_tags(func, output_tags)
