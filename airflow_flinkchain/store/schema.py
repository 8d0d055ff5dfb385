"""Tables of the run store (SQLAlchemy Core). All names start with
`flinkchain_` so the store can share a database with other tools.

Keys: a pipeline is identified by its Airflow `dag_id`; a plan by
(dag_id, plan_hash); a run by (dag_id, run_id), so concurrent runs of one DAG
never collide; a chain attempt by (dag_id, run_id, chain_id, attempt)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Double,
    ForeignKey,
    ForeignKeyConstraint,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from airflow_flinkchain.metrics_schema import COUNTER_NAMES, FRACTIONAL_COUNTERS, GAUGE_NAMES

metadata = MetaData()

ID = 250  # dag_id / run_id / keys: Airflow allows 250 characters


def _id(name: str, *args, **kw) -> Column:
    return Column(name, String(ID), *args, **kw)


schema_version = Table(
    "flinkchain_schema_version",
    metadata,
    Column("id", Integer, primary_key=True),  # always 1: a single row
    Column("version", Integer, nullable=False),
)

pipelines = Table(
    "flinkchain_pipelines",
    metadata,
    _id("dag_id", primary_key=True),
    Column("pipeline", String(ID), nullable=False),
    Column("current_plan_hash", String(64), nullable=False),
    Column("created_at", DateTime, nullable=False),
    Column("updated_at", DateTime, nullable=False),
)

plans = Table(
    "flinkchain_plans",
    metadata,
    _id("dag_id", ForeignKey("flinkchain_pipelines.dag_id", ondelete="CASCADE"), primary_key=True),
    Column("plan_hash", String(64), primary_key=True),
    Column("strategy", String(50), nullable=False),
    Column("plan_json", Text, nullable=False),
    Column("created_at", DateTime, nullable=False),
)


def _plan_table(name: str, *columns) -> Table:
    """A table of one plan's parts: keyed by (dag_id, plan_hash) first, deleted with the plan."""
    return Table(
        name,
        metadata,
        _id("dag_id", primary_key=True),
        Column("plan_hash", String(64), primary_key=True),
        *columns,
        ForeignKeyConstraint(
            ["dag_id", "plan_hash"], ["flinkchain_plans.dag_id", "flinkchain_plans.plan_hash"], ondelete="CASCADE"
        ),
    )


plan_chains = _plan_table(
    "flinkchain_plan_chains",
    _id("chain_id", primary_key=True),
    Column("position", Integer, nullable=False),
    Column("name", Text, nullable=False),
    Column("parallelism", Integer, nullable=False),
    Column("slot_sharing_group", String(ID)),
)

plan_operators = _plan_table(
    "flinkchain_plan_operators",
    _id("key", primary_key=True),
    _id("chain_id", nullable=False),
    Column("position", Integer, nullable=False),  # order inside the chain, head = 0
    Column("node_id", Integer, nullable=False),
    Column("name", Text, nullable=False),
    _id("uid"),
    Column("kind", String(50), nullable=False),
    Column("parallelism", Integer, nullable=False),
)

plan_edges = _plan_table(
    "flinkchain_plan_edges",
    _id("edge_id", primary_key=True),
    Column("chained", Integer, nullable=False),  # 1: inside a chain, 0: between chains (an exchange)
    _id("source_chain", nullable=False),
    _id("target_chain", nullable=False),
    Column("source_operator", Text, nullable=False),
    Column("target_operator", Text, nullable=False),
    Column("partitioner", String(50)),  # None for chained edges (always a direct call)
    _id("output_tag"),
    Column("selected_names", Text, nullable=False),  # JSON list
)

runs = Table(
    "flinkchain_runs",
    metadata,
    _id("dag_id", primary_key=True),
    _id("run_id", primary_key=True),
    Column("pipeline", String(ID)),
    Column("plan_hash", String(64)),
    Column("state", String(20), nullable=False),  # running | success | failed
    Column("started_at", DateTime),
    Column("ended_at", DateTime),
    Column("error", Text),  # why the run failed before any chain ran (a refused stream run)
)

chain_attempts = Table(
    "flinkchain_chain_attempts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    _id("dag_id", nullable=False),
    _id("run_id", nullable=False),
    _id("chain_id", nullable=False),
    _id("attempt", nullable=False),  # the runtime's attempt id (Airflow try number by default)
    Column("try_number", Integer),
    Column("state", String(20), nullable=False),  # success | failed
    Column("spark_app_id", String(ID)),
    Column("error", Text),
    Column("started_at", DateTime),
    Column("ended_at", DateTime),
    Column("recorded_at", DateTime, nullable=False),
    UniqueConstraint("dag_id", "run_id", "chain_id", "attempt", name="uq_flinkchain_attempt"),
    ForeignKeyConstraint(
        ["dag_id", "run_id"], ["flinkchain_runs.dag_id", "flinkchain_runs.run_id"], ondelete="CASCADE"
    ),
)


def _attempt_pk() -> Column:
    return Column(
        "attempt_pk", Integer, ForeignKey("flinkchain_chain_attempts.id", ondelete="CASCADE"), primary_key=True
    )


def _metrics_table(name: str, *columns) -> Table:
    """Metrics of one attempt's operator subtasks: keyed by (attempt, operator key, subtask) first,
    deleted with the attempt."""
    return Table(
        name,
        metadata,
        _attempt_pk(),
        _id("key", primary_key=True),
        Column("subtask", Integer, primary_key=True),
        *columns,
    )


operator_metrics = _metrics_table(
    "flinkchain_operator_metrics",
    Column("node_id", Integer),
    Column("name", Text),
    *(Column(name, Double if name in FRACTIONAL_COUNTERS else BigInteger, nullable=False, default=0)
      for name in COUNTER_NAMES),
    *(Column(name, BigInteger) for name in GAUGE_NAMES),  # NULL: not measured (no watermark)
)

side_output_metrics = _metrics_table(
    "flinkchain_side_output_metrics",
    _id("tag", primary_key=True),
    Column("records", BigInteger, nullable=False),
)

attempt_outputs = Table(
    "flinkchain_attempt_outputs",
    metadata,
    _attempt_pk(),
    Column("position", Integer, primary_key=True),
    Column("kind", String(10), nullable=False),  # edge | sink
    _id("name", nullable=False),  # the edge id or the sink's operator key
    Column("path", Text),
    Column("records", BigInteger),
)

#: A stream run's chain attempt: its `stream` summary (runtime.stream_run.ChainStreamStep.commit:
#: ranges read, source positions, per-operator watermark and snapshot size), as JSON.
stream_chains = Table(
    "flinkchain_stream_chains",
    metadata,
    _attempt_pk(),
    Column("summary_json", Text, nullable=False),
)

V1_TABLES = [
    pipelines,
    plans,
    plan_chains,
    plan_operators,
    plan_edges,
    runs,
    chain_attempts,
    operator_metrics,
    side_output_metrics,
    attempt_outputs,
]
