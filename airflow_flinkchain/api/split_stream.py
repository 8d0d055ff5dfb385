"""SplitStream: the stream of a split operator (`split(selector)` / `select(*names)`)."""

from __future__ import annotations

from typing import Iterable, Optional, Self

from airflow_flinkchain.api.datastream import DataStream
from airflow_flinkchain.function_types import OutputSelectorLike
from airflow_flinkchain.functions import OutputTag
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.graph.transformations import SelectTransformation, Transformation


class SplitStream(DataStream):
    """The stream of a split operator; `select(*names)` picks outputs. Using it
    directly (without select) gets every record, as in Flink.

    Examples:
        >>> from airflow_flinkchain import StreamPipeline
        >>> p = StreamPipeline("doc")
        >>> parity = p.from_collection(range(4)).map(int).split(lambda x: ["even" if x % 2 == 0 else "odd"])
        >>> _ = parity.select("even").collect("evens")
        >>> _ = parity.collect("all")
    """

    def select(self, *names: str) -> DataStream:
        """The records the selector routed to any of `names`.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> sizes = p.from_collection([5, 500]).map(int).split(lambda x: ["big" if x > 100 else "small"])
            >>> _ = sizes.select("big", "small").collect("both")
        """
        if not names or not all(isinstance(n, str) and n for n in names):
            raise PlanningError(f"select() needs one or more output names, got {names!r}")
        t = self._pipeline._add_virtual(SelectTransformation, (self._t,), names=tuple(names))
        return DataStream(self._pipeline, t)

    def get_side_output(self, tag: OutputTag | str) -> DataStream:
        """Refused: side outputs are not split; take them from the operator's own stream."""
        op = self._t
        raise PlanningError(
            f"get_side_output() on the split stream of {op.name!r}: side outputs are not split. "
            f"Call get_side_output() on {op.name!r}'s own stream (the one split() was called on).",
            operator=op.name,
        )

    def split(self, selector: OutputSelectorLike, names: Optional[Iterable[str]] = None) -> "SplitStream":
        """Refused: an operator is split once, with one selector returning every name."""
        raise PlanningError(
            f"split() of a split: operator {self._t.name!r} is already split. Use one selector "
            "returning every name, or add a map() after select() and split that."
        )

    def name(self, name: str) -> Self:
        """Refused: name the operator before `split()`."""
        raise _split_settings(self._t, "name")

    def uid(self, uid: str) -> Self:
        """Refused: set the uid of the operator before `split()`."""
        raise _split_settings(self._t, "uid")

    def set_parallelism(self, parallelism: int) -> Self:
        """Refused: set the parallelism of the operator before `split()`."""
        raise _split_settings(self._t, "set_parallelism")



def _split_settings(op: Transformation, method: str) -> PlanningError:
    return PlanningError(
        f"{method}() on a split stream: call it on the operator before split(), "
        f"i.e. on {getattr(op, 'name', 'the operator')!r}'s stream"
    )
