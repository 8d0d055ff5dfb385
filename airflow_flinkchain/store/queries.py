"""Read side of the run store: what the UI plugin and its JSON API show.

Metrics of a run use, per chain, its latest attempt (highest try number, then
latest recorded), summed over subtasks per operator. An operator's
`time_share` is its share of the summed operator time of its chain."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Optional

from sqlalchemy import Connection, func, select

from airflow_flinkchain.metrics_schema import COUNTER_NAMES, DROPPED_COUNTERS, GAUGE_NAMES, lowest
from airflow_flinkchain.store._util import from_db_time
from airflow_flinkchain.store.schema import (
    attempt_outputs,
    chain_attempts,
    operator_metrics,
    pipelines,
    plan_chains,
    plan_operators,
    plans,
    runs,
    side_output_metrics,
    stream_chains,
)



def list_pipelines(conn: Connection) -> list[dict]:
    counts = dict(conn.execute(select(runs.c.dag_id, func.count()).group_by(runs.c.dag_id)).all())
    chains = dict(conn.execute(
        select(plan_chains.c.dag_id, func.count()).join(pipelines, (pipelines.c.dag_id == plan_chains.c.dag_id)
            & (pipelines.c.current_plan_hash == plan_chains.c.plan_hash)).group_by(plan_chains.c.dag_id)).all())
    operators = dict(conn.execute(
        select(plan_operators.c.dag_id, func.count()).join(pipelines, (pipelines.c.dag_id == plan_operators.c.dag_id)
            & (pipelines.c.current_plan_hash == plan_operators.c.plan_hash)).group_by(plan_operators.c.dag_id)).all())
    result = []
    for row in conn.execute(select(pipelines).order_by(pipelines.c.dag_id)).mappings():
        latest = list_runs(conn, row["dag_id"], limit=1)
        result.append({
            "dag_id": row["dag_id"],
            "pipeline": row["pipeline"],
            "plan_hash": row["current_plan_hash"],
            "updated_at": from_db_time(row["updated_at"]),
            "chains": chains.get(row["dag_id"], 0),
            "operators": operators.get(row["dag_id"], 0),
            "runs": counts.get(row["dag_id"], 0),
            "latest_run": latest[0] if latest else None,
        })
    return result


def get_plan(conn: Connection, dag_id: str, plan_hash: str) -> Optional[dict]:
    text = conn.scalar(select(plans.c.plan_json).where(plans.c.dag_id == dag_id, plans.c.plan_hash == plan_hash))
    return None if text is None else json.loads(text)


def get_pipeline(conn: Connection, dag_id: str, *, run_limit: int = 50) -> Optional[dict]:
    row = conn.execute(select(pipelines).where(pipelines.c.dag_id == dag_id)).mappings().first()
    if row is None:
        return None
    return {
        "dag_id": dag_id,
        "pipeline": row["pipeline"],
        "plan_hash": row["current_plan_hash"],
        "updated_at": from_db_time(row["updated_at"]),
        "plan": get_plan(conn, dag_id, row["current_plan_hash"]),
        "runs": list_runs(conn, dag_id, limit=run_limit),
    }


def list_runs(conn: Connection, dag_id: str, *, limit: int = 50) -> list[dict]:
    """Newest first: [{"run_id", "state", "started_at", "ended_at", "plan_hash", "chain_states"}]."""
    rows = conn.execute(
        select(runs).where(runs.c.dag_id == dag_id)
        .order_by(runs.c.started_at.desc(), runs.c.run_id.desc()).limit(limit)
    ).mappings().all()
    return [
        {
            "run_id": r["run_id"],
            "state": r["state"],
            "error": r["error"],
            "started_at": from_db_time(r["started_at"]),
            "ended_at": from_db_time(r["ended_at"]),
            "plan_hash": r["plan_hash"],
            "chain_states": latest_attempt_states(conn, dag_id, r["run_id"]),
        }
        for r in rows
    ]


def latest_attempt_states(conn: Connection, dag_id: str, run_id: str) -> dict[str, str]:
    return {chain: a["state"] for chain, (a, _) in latest_attempts(conn, dag_id, run_id).items()}


def latest_attempts(conn: Connection, dag_id: str, run_id: str) -> dict[str, tuple[dict, int]]:
    """chain_id -> (latest attempt row, number of attempts)."""
    rows = conn.execute(
        select(chain_attempts).where(chain_attempts.c.dag_id == dag_id, chain_attempts.c.run_id == run_id)
        .order_by(func.coalesce(chain_attempts.c.try_number, 0), chain_attempts.c.id)
    ).mappings().all()
    latest: dict[str, tuple[dict, int]] = {}
    for r in rows:
        count = latest[r["chain_id"]][1] + 1 if r["chain_id"] in latest else 1
        latest[r["chain_id"]] = (dict(r), count)
    return latest


def get_run_metrics(conn: Connection, dag_id: str, run_id: str) -> Optional[dict]:
    run = conn.execute(select(runs).where(runs.c.dag_id == dag_id, runs.c.run_id == run_id)).mappings().first()
    if run is None:
        return None
    latest = latest_attempts(conn, dag_id, run_id)
    order = _plan_order(conn, dag_id, run["plan_hash"])
    chain_ids = [c for c in order["chains"] if c in latest] + sorted(c for c in latest if c not in order["chains"])
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "pipeline": run["pipeline"],
        "plan_hash": run["plan_hash"],
        "state": run["state"],
        "error": run["error"],
        "started_at": from_db_time(run["started_at"]),
        "ended_at": from_db_time(run["ended_at"]),
        "chains": [_chain_metrics(conn, chain_id, *latest[chain_id], order["operators"]) for chain_id in chain_ids],
    }


def _plan_order(conn: Connection, dag_id: str, plan_hash: Optional[str]) -> dict:
    if not plan_hash:
        return {"chains": [], "operators": {}}
    chains = list(conn.scalars(select(plan_chains.c.chain_id).where(
        plan_chains.c.dag_id == dag_id, plan_chains.c.plan_hash == plan_hash).order_by(plan_chains.c.position)))
    ops = conn.execute(select(plan_operators.c.key, plan_operators.c.position).where(
        plan_operators.c.dag_id == dag_id, plan_operators.c.plan_hash == plan_hash)).all()
    return {"chains": chains, "operators": dict(ops)}


def _chain_metrics(conn: Connection, chain_id: str, attempt: dict, attempts: int, op_order: dict) -> dict:
    pk = attempt["id"]
    per_op: dict[str, dict] = {}
    for r in conn.execute(select(operator_metrics).where(operator_metrics.c.attempt_pk == pk)).mappings():
        op = per_op.setdefault(r["key"], {"key": r["key"], "name": r["name"] or r["key"], "node_id": r["node_id"],
                                          "subtasks": 0, "side_outputs": {}, **{c: 0 for c in COUNTER_NAMES},
                                          **{g: None for g in GAUGE_NAMES}})
        op["subtasks"] += 1
        for c in COUNTER_NAMES:
            op[c] += r[c] or 0
        for g in GAUGE_NAMES:
            op[g] = lowest([op[g], r[g]])
    side = defaultdict(int)
    for r in conn.execute(select(side_output_metrics).where(side_output_metrics.c.attempt_pk == pk)).mappings():
        side[(r["key"], r["tag"])] += r["records"]
    for (key, tag), n in side.items():
        if key in per_op:
            per_op[key]["side_outputs"][tag] = n
    operators = sorted(per_op.values(), key=lambda o: (op_order.get(o["key"], 10**6), o["node_id"] or 0, o["key"]))
    total_time = sum(o["time_ms"] for o in operators)
    for o in operators:
        # Records an operator took in and did not pass on: filtered, skipped or dead-lettered.
        o["dropped"] = sum(o[c] for c in DROPPED_COUNTERS)
        o["time_share"] = round(o["time_ms"] / total_time, 4) if total_time else 0.0
    outputs = [
        {("edge" if r["kind"] == "edge" else "sink"): r["name"], "path": r["path"], "records": r["records"]}
        for r in conn.execute(select(attempt_outputs).where(attempt_outputs.c.attempt_pk == pk)
                              .order_by(attempt_outputs.c.position)).mappings()
    ]
    started, ended = attempt["started_at"], attempt["ended_at"]
    return {
        "chain_id": chain_id,
        "state": attempt["state"],
        "attempt": attempt["attempt"],
        "try_number": attempt["try_number"],
        "attempts": attempts,
        "spark_app_id": attempt["spark_app_id"],
        "error": attempt["error"],
        "started_at": from_db_time(started),
        "ended_at": from_db_time(ended),
        "duration_ms": int((ended - started).total_seconds() * 1000) if started and ended else None,
        "time_ms": total_time,
        "records_in": operators[0]["records_in"] if operators else 0,
        # The chain's gauges: the lowest of its operators' (its event-time progress).
        **{g: lowest(o[g] for o in operators) for g in GAUGE_NAMES},
        "operators": operators,
        "outputs": outputs,
        "stream": _stream_summary(conn, pk),
        "slowest": _pick(operators, lambda o: o["time_ms"]),
        "lossiest": _pick(operators, lambda o: o["dropped"] / o["records_in"] if o["records_in"] else o["dropped"]),
    }


def _stream_summary(conn: Connection, pk: int) -> Optional[dict]:
    """A stream run's chain: what it read, its positions, per operator its watermark and state size."""
    text = conn.scalar(select(stream_chains.c.summary_json).where(stream_chains.c.attempt_pk == pk))
    return json.loads(text) if text else None


def _pick(operators: list[dict], score) -> Optional[str]:
    """Key of the highest-scoring operator, or None when nothing scores (no time, no loss)."""
    best = max(operators, key=score, default=None)
    return best["key"] if best is not None and score(best) > 0 else None
