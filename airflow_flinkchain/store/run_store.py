"""RunStore: the API task code and the UI plugin use to write and read runs.

    store = RunStore()                      # URL from config, see resolve_store_url
    store.start_run(dag_id, run_id, plan=job_graph.to_dict())      # setup task
    store.record_attempt(metrics_doc, try_number=ti.try_number)    # each chain task
    store.finish_run(dag_id, run_id)                               # teardown task

Every write is one transaction and idempotent: recording the same plan twice
stores it once, recording the same chain attempt again replaces its metrics."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional, TypeVar

from sqlalchemy import Connection, Engine, and_, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from airflow_flinkchain.metrics_schema import COUNTER_NAMES, FRACTIONAL_COUNTERS, GAUGE_NAMES, lowest
from airflow_flinkchain.store import queries
from airflow_flinkchain.store._util import canonical_json, plan_hash, to_db_time, utcnow
from airflow_flinkchain.store.config import resolve_store_url
from airflow_flinkchain.store.engine import get_engine
from airflow_flinkchain.store.schema import (
    attempt_outputs,
    chain_attempts,
    operator_metrics,
    pipelines,
    plan_chains,
    plan_edges,
    plan_operators,
    plans,
    runs,
    side_output_metrics,
    stream_chains,
)

T = TypeVar("T")
RUNNING, SUCCESS, FAILED = "running", "success", "failed"


class RunStore:
    def __init__(self, url: Optional[str] = None, *, engine: Optional[Engine] = None):
        self.engine = engine or get_engine(resolve_store_url(url))

    # ---- writes -------------------------------------------------------------

    def record_plan(self, dag_id: str, plan: dict, *, pipeline: Optional[str] = None) -> str:
        """Store `plan` (JobGraph.to_dict()) as the DAG's current plan; return its hash.
        Plans are versioned by hash: old runs keep pointing at the plan they ran."""
        digest = plan_hash(plan)
        name = pipeline or plan.get("pipeline") or dag_id

        def write(conn: Connection) -> str:
            now = utcnow()
            if conn.scalar(select(pipelines.c.dag_id).where(pipelines.c.dag_id == dag_id)) is None:
                conn.execute(insert(pipelines).values(
                    dag_id=dag_id, pipeline=name, current_plan_hash=digest, created_at=now, updated_at=now))
            else:
                conn.execute(update(pipelines).where(pipelines.c.dag_id == dag_id).values(
                    pipeline=name, current_plan_hash=digest, updated_at=now))
            known = select(plans.c.plan_hash).where(plans.c.dag_id == dag_id, plans.c.plan_hash == digest)
            if conn.scalar(known) is None:
                _insert_plan(conn, dag_id, digest, plan, now)
            return digest

        return self._transaction(write)

    def start_run(
        self,
        dag_id: str,
        run_id: str,
        *,
        plan: Optional[dict] = None,
        pipeline: Optional[str] = None,
        started_at: Any = None,
    ) -> None:
        """Record that a run started (the setup task). With `plan`, record it too.
        Starting a run again (a cleared DAG run) marks it running again."""
        digest = self.record_plan(dag_id, plan, pipeline=pipeline) if plan is not None else None

        def write(conn: Connection) -> None:
            values = {"state": RUNNING, "started_at": to_db_time(started_at) or utcnow(), "ended_at": None,
                      "error": None}
            current = _current_plan(conn, dag_id)
            values["plan_hash"] = digest or (current and current[1])
            values["pipeline"] = pipeline or (plan or {}).get("pipeline") or (current and current[0])
            _upsert_run(conn, dag_id, run_id, values)

        self._transaction(write)

    def record_attempt(self, metrics: dict, *, try_number: Optional[int] = None) -> int:
        """Record one chain attempt from the runtime's metrics document
        ({"dag_id", "run_id", "chain", "attempt", "state", "operators", "outputs", ...}).
        Re-recording the same (dag_id, run_id, chain, attempt) replaces it.
        Returns the attempt's row id."""
        dag_id, run_id, chain_id = metrics["dag_id"], metrics["run_id"], metrics["chain"]
        attempt = str(metrics.get("attempt", try_number if try_number is not None else 1))
        if try_number is None and attempt.isdigit():
            try_number = int(attempt)
        row = {
            "try_number": try_number,
            "state": metrics.get("state") or FAILED,
            "spark_app_id": metrics.get("spark_app_id"),
            "error": metrics.get("error"),
            "started_at": to_db_time(metrics.get("started_at")),
            "ended_at": to_db_time(metrics.get("ended_at")),
            "recorded_at": utcnow(),
        }

        def write(conn: Connection) -> int:
            run_key = and_(runs.c.dag_id == dag_id, runs.c.run_id == run_id)
            if conn.scalar(select(runs.c.state).where(run_key)) is None:
                # The setup task did not record the run (e.g. the store was added later).
                current = _current_plan(conn, dag_id)
                _upsert_run(conn, dag_id, run_id, {
                    "state": RUNNING, "started_at": row["started_at"] or row["recorded_at"],
                    "pipeline": metrics.get("pipeline") or (current and current[0]),
                    "plan_hash": current and current[1]})
            key = and_(chain_attempts.c.dag_id == dag_id, chain_attempts.c.run_id == run_id,
                       chain_attempts.c.chain_id == chain_id, chain_attempts.c.attempt == attempt)
            pk = conn.scalar(select(chain_attempts.c.id).where(key))
            if pk is None:
                pk = conn.execute(insert(chain_attempts).values(
                    dag_id=dag_id, run_id=run_id, chain_id=chain_id, attempt=attempt, **row)
                ).inserted_primary_key[0]
            else:
                conn.execute(update(chain_attempts).where(chain_attempts.c.id == pk).values(**row))
                for table in (operator_metrics, side_output_metrics, attempt_outputs, stream_chains):
                    conn.execute(delete(table).where(table.c.attempt_pk == pk))
            _insert_metrics(conn, pk, metrics.get("operators") or [])
            _insert_outputs(conn, pk, metrics.get("outputs") or [])
            if metrics.get("stream"):
                conn.execute(insert(stream_chains).values(attempt_pk=pk, summary_json=stream_summary_json(
                    metrics["stream"])))
            return pk

        return self._transaction(write)

    def finish_run(self, dag_id: str, run_id: str, *, state: Optional[str] = None, ended_at: Any = None) -> str:
        """Finalize a run (the teardown task). Without `state`, derive it: success when
        every chain of the run's plan has a successful latest attempt, else failed."""

        def write(conn: Connection) -> str:
            final = state or _derived_state(conn, dag_id, run_id)
            _upsert_run(conn, dag_id, run_id, {"state": final, "ended_at": to_db_time(ended_at) or utcnow()})
            return final

        return self._transaction(write)

    def refuse_run(self, dag_id: str, run_id: str, reason: str) -> None:
        """Record that a run was refused before its chains ran (a stream run re-run while it is
        not the latest, or a second run of a stream at once): failed, with the reason. A run
        recorded earlier (the refused re-run of a committed run) keeps its chains' attempts,
        which belong to its earlier try."""

        def write(conn: Connection) -> None:
            _upsert_run(conn, dag_id, run_id, {"state": FAILED, "ended_at": utcnow(), "error": reason})

        self._transaction(write)

    def record_publication(self, dag_id: str, run_id: str, sinks: dict[str, str]) -> int:
        """A stream run's commit published its file sinks: {sink operator key: path}. The sink
        outputs of the run's latest chain attempts get that path (the chains staged them
        elsewhere). Returns the number of outputs updated."""

        def write(conn: Connection) -> int:
            pks = [a["id"] for a, _ in queries.latest_attempts(conn, dag_id, run_id).values()]
            done = 0
            for key, path in sinks.items():
                done += conn.execute(update(attempt_outputs).where(
                    attempt_outputs.c.attempt_pk.in_(pks), attempt_outputs.c.kind == "sink",
                    attempt_outputs.c.name == key).values(path=path)).rowcount
            return done

        return self._transaction(write)

    # ---- reads (see queries.py for the shapes) --------------------------------

    def list_pipelines(self) -> list[dict]:
        with self.engine.connect() as conn:
            return queries.list_pipelines(conn)

    def get_pipeline(self, dag_id: str, *, run_limit: int = 50) -> Optional[dict]:
        with self.engine.connect() as conn:
            return queries.get_pipeline(conn, dag_id, run_limit=run_limit)

    def get_plan(self, dag_id: str, plan_hash_: str) -> Optional[dict]:
        with self.engine.connect() as conn:
            return queries.get_plan(conn, dag_id, plan_hash_)

    def list_runs(self, dag_id: str, *, limit: int = 50) -> list[dict]:
        with self.engine.connect() as conn:
            return queries.list_runs(conn, dag_id, limit=limit)

    def get_run_metrics(self, dag_id: str, run_id: str) -> Optional[dict]:
        with self.engine.connect() as conn:
            return queries.get_run_metrics(conn, dag_id, run_id)

    # ---- plumbing ---------------------------------------------------------------

    def _transaction(self, work: Callable[[Connection], T], retries: int = 5) -> T:
        """Run `work` in one transaction. Two writers inserting the same new key at
        once (two runs recording the same new plan) make one of them fail with an
        IntegrityError: it retries and then finds the row. On SQLite the transaction
        takes the write lock up front (BEGIN IMMEDIATE): a read-then-write transaction
        would otherwise fail with "database is locked" instead of waiting its turn."""
        for attempt in range(1, retries + 1):
            try:
                with self.engine.connect() as conn:
                    conn = conn.execution_options(sqlite_begin="IMMEDIATE")
                    with conn.begin():
                        return work(conn)
            except IntegrityError:
                if attempt == retries:
                    raise
                time.sleep(0.05 * attempt)
        raise AssertionError("unreachable")


def stream_summary_json(stream: dict) -> str:
    """A chain's stream summary as stored: without the shared-file lists (one per key group)."""
    operators = {k: {f: v for f, v in o.items() if f != "shared"} for k, o in (stream.get("operators") or {}).items()}
    return canonical_json({**stream, "operators": operators})


def _current_plan(conn: Connection, dag_id: str) -> Optional[tuple[str, str]]:
    row = conn.execute(select(pipelines.c.pipeline, pipelines.c.current_plan_hash)
                       .where(pipelines.c.dag_id == dag_id)).first()
    return None if row is None else (row[0], row[1])


def _upsert_run(conn: Connection, dag_id: str, run_id: str, values: dict) -> None:
    key = and_(runs.c.dag_id == dag_id, runs.c.run_id == run_id)
    if conn.scalar(select(runs.c.state).where(key)) is None:
        conn.execute(insert(runs).values(dag_id=dag_id, run_id=run_id, **{"state": RUNNING, **values}))
    else:
        values = {k: v for k, v in values.items() if v is not None or k in ("ended_at", "error")}
        conn.execute(update(runs).where(key).values(**values))


def _derived_state(conn: Connection, dag_id: str, run_id: str) -> str:
    latest = queries.latest_attempt_states(conn, dag_id, run_id)
    run_plan = conn.scalar(select(runs.c.plan_hash).where(runs.c.dag_id == dag_id, runs.c.run_id == run_id))
    expected = set(conn.scalars(select(plan_chains.c.chain_id).where(
        plan_chains.c.dag_id == dag_id, plan_chains.c.plan_hash == run_plan))) if run_plan else set()
    expected |= set(latest)
    if expected and all(latest.get(chain) == SUCCESS for chain in expected):
        return SUCCESS
    return FAILED


def _insert_plan(conn: Connection, dag_id: str, digest: str, plan: dict, now) -> None:
    conn.execute(insert(plans).values(dag_id=dag_id, plan_hash=digest, strategy=plan.get("strategy", "flink"),
                                      plan_json=canonical_json(plan), created_at=now))
    base = {"dag_id": dag_id, "plan_hash": digest}
    chain_rows, operator_rows, edge_rows = [], [], []
    for position, chain in enumerate(plan.get("chains", [])):
        chain_rows.append({**base, "chain_id": chain["id"], "position": position, "name": chain.get("name", chain["id"]),
                           "parallelism": chain.get("parallelism", 1),
                           "slot_sharing_group": chain.get("slot_sharing_group")})
        for op_position, op in enumerate(chain.get("operators", [])):
            operator_rows.append({**base, "key": op["key"], "chain_id": chain["id"], "position": op_position,
                                  "node_id": op.get("id", op_position), "name": op.get("name", op["key"]),
                                  "uid": op.get("uid"), "kind": op.get("kind", "?"),
                                  "parallelism": op.get("parallelism", chain.get("parallelism", 1))})
    for edge in plan.get("edges", []):
        edge_rows.append(_edge_row(base, edge, edge["source"], edge["target"], edge.get("partitioner"), chained=0))
    for edge in plan.get("chained_edges", []):
        edge_rows.append(_edge_row(base, edge, edge["chain"], edge["chain"], None, chained=1))
    for table, rows in ((plan_chains, chain_rows), (plan_operators, operator_rows), (plan_edges, edge_rows)):
        if rows:
            conn.execute(insert(table), rows)


def _edge_row(base: dict, edge: dict, source: str, target: str, partitioner: Optional[str], chained: int) -> dict:
    return {**base, "edge_id": edge["id"], "chained": chained, "source_chain": source, "target_chain": target,
            "source_operator": str(edge.get("source_operator", "")),
            "target_operator": str(edge.get("target_operator", "")), "partitioner": partitioner,
            "output_tag": edge.get("output_tag"), "selected_names": canonical_json(list(edge.get("selected_names") or []))}


def _insert_metrics(conn: Connection, attempt_pk: int, operators: list[dict]) -> None:
    """One row per (operator, subtask); duplicates in the document are summed (counters) or
    give their lowest value (gauges)."""
    merged: dict[tuple[str, int], dict] = {}
    side: dict[tuple[str, int, str], int] = {}
    for op in operators:
        key, subtask = str(op.get("key") or op.get("node_id")), int(op.get("subtask") or 0)
        row = merged.setdefault((key, subtask), {
            "attempt_pk": attempt_pk, "key": key, "subtask": subtask, "node_id": op.get("node_id"),
            "name": op.get("name"), **{c: 0 for c in COUNTER_NAMES}, **{g: None for g in GAUGE_NAMES}})
        for counter in COUNTER_NAMES:
            value = op.get(counter) or 0
            row[counter] += float(value) if counter in FRACTIONAL_COUNTERS else int(value)
        for gauge in GAUGE_NAMES:
            value = op.get(gauge)
            row[gauge] = lowest([row[gauge], int(value) if isinstance(value, (int, float)) else None])
        for tag, n in (op.get("side_outputs") or {}).items():
            side[(key, subtask, str(tag))] = side.get((key, subtask, str(tag)), 0) + int(n or 0)
    if merged:
        conn.execute(insert(operator_metrics), list(merged.values()))
    if side:
        conn.execute(insert(side_output_metrics), [
            {"attempt_pk": attempt_pk, "key": k, "subtask": s, "tag": t, "records": n} for (k, s, t), n in side.items()])


def _insert_outputs(conn: Connection, attempt_pk: int, outputs: list[dict]) -> None:
    rows = []
    for position, out in enumerate(outputs):
        kind = "edge" if out.get("edge") is not None else "sink"
        rows.append({"attempt_pk": attempt_pk, "position": position, "kind": kind,
                     "name": str(out.get("edge") if kind == "edge" else out.get("sink")),
                     "path": out.get("path"), "records": out.get("records")})
    if rows:
        conn.execute(insert(attempt_outputs), rows)
