"""The operator settings every stream and sink offers (PyFlink's `name`, `uid`,
`set_parallelism`, ...): they apply to the operator that produced the stream."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from airflow_flinkchain.api.validation import check_on_error, check_parallelism
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.graph.model import ChainingStrategy, OperatorKind
from airflow_flinkchain.graph.transformations import OperatorTransformation, Transformation, virtual_label

if TYPE_CHECKING:  # pragma: no cover
    from airflow_flinkchain.api.pipeline import StreamPipeline


class OperatorSettings:
    """Settings of the operator behind a stream or a sink (all return self)."""

    _pipeline: "StreamPipeline"
    _t: Transformation

    def _op(self, method: str) -> OperatorTransformation:
        if isinstance(self._t, OperatorTransformation):
            return self._t
        raise PlanningError(
            f"{method}() applies to an operator, but this stream is the result of "
            f"{virtual_label(self._t)}, which is not an operator. Call {method}() on the operator "
            "before it, or on the operator that consumes it."
        )

    def name(self, name: str) -> Self:
        """Name the operator (Flink's `name`): shown in chains, the UI and errors; without
        a `uid`, its slug is the operator's key and, for a chain head, the Airflow task id.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection([1]).name("numbers").map(str).name("as_text").collect("out")
            >>> [c.name for c in p.plan().chains]
            ['numbers -> as_text -> out']
        """
        if not isinstance(name, str) or not name.strip():
            raise PlanningError(f"name() needs a non-empty string, got {name!r}")
        self._op("name").name = name
        return self

    def uid(self, uid: str) -> Self:
        """A stable id (Flink's `uid`): the operator's key, and its chain's task id when
        it heads a chain, kept while the pipeline around it changes.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection([1]).uid("numbers-v1").collect("out")
            >>> [c.id for c in p.plan().chains]
            ['numbers-v1']
        """
        if not isinstance(uid, str) or not uid.strip():
            raise PlanningError(f"operator {self._op('uid').name!r}: uid() needs a non-empty string, got {uid!r}")
        self._op("uid").uid = uid
        return self

    def set_parallelism(self, parallelism: int) -> Self:
        """Parallel subtasks of this operator (default: the pipeline's). A change of
        parallelism between two operators ends a chain (REBALANCE edge).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc", parallelism=2)
            >>> _ = p.from_collection([1]).map(str).set_parallelism(4).collect("out")
            >>> [(c.name, c.parallelism) for c in p.plan().chains]
            [('Collection Source', 1), ('Map', 4), ('out', 2)]
        """
        op = self._op("set_parallelism")
        check_parallelism(parallelism, "parallelism", op.name)
        if op.non_parallel and parallelism != 1:
            raise PlanningError(
                (f"operator {op.name!r} is a non-parallel source: its parallelism must be 1, got "
                 f"{parallelism}. Use a parallel source (from_source) or rebalance() after it."
                 if op.kind is OperatorKind.SOURCE else
                 f"operator {op.name!r} is a window_all: its parallelism must be 1, got {parallelism}. "
                 "Use key_by(...).window(...) for parallel windows."),
                operator=op.name,
            )
        op.parallelism = parallelism
        return self

    def set_max_parallelism(self, max_parallelism: int) -> Self:
        """Number of key groups of a keyed operator (Flink's max parallelism).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> s = p.from_collection([1]).key_by(lambda x: x).reduce(max).set_max_parallelism(256)
        """
        op = self._op("set_max_parallelism")
        op.max_parallelism = check_parallelism(max_parallelism, "max parallelism", op.name)
        return self

    def start_new_chain(self) -> Self:
        """Start a new chain at this operator (Flink's HEAD chaining strategy).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection([1]).map(str).start_new_chain().collect("out")
            >>> [c.name for c in p.plan().chains]
            ['Collection Source', 'Map -> out']
        """
        self._op("start_new_chain").chaining_strategy = ChainingStrategy.HEAD
        return self

    def disable_chaining(self) -> Self:
        """Keep this operator alone in its chain (Flink's NEVER chaining strategy).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection([1]).map(str).disable_chaining().collect("out")
            >>> [c.name for c in p.plan().chains]
            ['Collection Source', 'Map', 'out']
        """
        self._op("disable_chaining").chaining_strategy = ChainingStrategy.NEVER
        return self

    def slot_sharing_group(self, group: str) -> Self:
        """Operators in different slot sharing groups never share a chain; operators
        without one inherit their inputs' group (or `"default"`).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection([1]).map(str).slot_sharing_group("heavy").collect("out")
            >>> [c.name for c in p.plan().chains]
            ['Collection Source', 'Map -> out']
        """
        op = self._op("slot_sharing_group")
        if not isinstance(group, str) or not group:
            raise PlanningError(f"operator {op.name!r}: slot_sharing_group() needs a name, got {group!r}")
        op.slot_sharing_group = group
        return self

    def set_spark_settings(self, **settings: Any) -> Self:
        """Per-operator Spark settings (e.g. executor_memory) for its chain's task;
        they override the pipeline's, and a chain takes the largest memory request.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> s = p.from_collection([1]).map(str).set_spark_settings(executor_memory="8g")
        """
        self._op("set_spark_settings").settings.update(settings)
        return self

    def on_error(self, policy: str) -> Self:
        """What happens to a record the function fails on: `"fail"` (the default),
        `"dead_letter"` (to `dead_letters()`) or `"skip"`; overrides the pipeline's.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> parsed = p.from_collection(["1", "x"]).map(int).on_error("dead_letter")
            >>> _ = parsed.dead_letters().collect("bad")
        """
        op = self._op("on_error")
        op.on_error = check_on_error(policy, op.name)
        return self
