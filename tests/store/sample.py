"""A realistic plan (JobGraph.to_dict() shape) and runtime metrics documents."""

from __future__ import annotations

import copy

PLAN = {
    "pipeline": "orders",
    "strategy": "flink",
    "runtime_mode": "batch",
    "object_reuse": False,
    "chains": [
        {"id": "read_orders", "name": "read_orders -> parse -> valid", "parallelism": 2,
         "slot_sharing_group": "default", "in_edges": [], "out_edges": ["valid__by_customer"],
         "operators": [
             {"id": 1, "key": "read_orders", "name": "read_orders", "uid": None, "kind": "source",
              "parallelism": 2, "chaining_strategy": "ALWAYS"},
             {"id": 2, "key": "parse", "name": "parse", "uid": None, "kind": "process",
              "parallelism": 2, "chaining_strategy": "ALWAYS"},
             {"id": 3, "key": "valid", "name": "valid", "uid": None, "kind": "filter",
              "parallelism": 2, "chaining_strategy": "ALWAYS"}]},
        {"id": "by_customer", "name": "by_customer -> write_totals", "parallelism": 3,
         "slot_sharing_group": "default", "in_edges": ["valid__by_customer"], "out_edges": [],
         "operators": [
             {"id": 4, "key": "by_customer", "name": "by_customer", "uid": None, "kind": "reduce",
              "parallelism": 3, "chaining_strategy": "ALWAYS"},
             {"id": 5, "key": "write_totals", "name": "write_totals", "uid": None, "kind": "sink",
              "parallelism": 3, "chaining_strategy": "ALWAYS"}]},
        {"id": "write_rejects", "name": "write_rejects", "parallelism": 1,
         "slot_sharing_group": "default", "in_edges": ["parse__write_rejects"], "out_edges": [],
         "operators": [
             {"id": 6, "key": "write_rejects", "name": "write_rejects", "uid": None, "kind": "sink",
              "parallelism": 1, "chaining_strategy": "ALWAYS"}]},
    ],
    "edges": [
        {"id": "valid__by_customer", "source": "read_orders", "target": "by_customer",
         "source_operator": "valid", "target_operator": "by_customer", "partitioner": "HASH",
         "output_tag": None, "selected_names": []},
        {"id": "parse__write_rejects", "source": "read_orders", "target": "write_rejects",
         "source_operator": "parse", "target_operator": "write_rejects", "partitioner": "REBALANCE",
         "output_tag": "rejects", "selected_names": []},
    ],
    "chained_edges": [
        {"id": "read_orders__parse", "chain": "read_orders", "source_operator": "read_orders",
         "target_operator": "parse", "output_tag": None, "selected_names": []},
        {"id": "parse__valid", "chain": "read_orders", "source_operator": "parse",
         "target_operator": "valid", "output_tag": None, "selected_names": []},
        {"id": "by_customer__write_totals", "chain": "by_customer", "source_operator": "by_customer",
         "target_operator": "write_totals", "output_tag": None, "selected_names": []},
    ],
}


def _op(node_id, key, subtask, rin, rout, time_ms, side=None, dead=0, skipped=0, filtered=0, watermark=None):
    return {"node_id": node_id, "key": key, "name": key, "subtask": subtask, "records_in": rin,
            "records_out": rout, "side_outputs": side or {}, "dead_lettered": dead, "skipped": skipped,
            "filtered": filtered, "time_ms": time_ms, "watermark": watermark}


#: The by_customer chain's watermark per subtask (the third saw none): the chain's is 1200.
BY_CUSTOMER_WATERMARKS = (1500, 1200, None)


def metrics(dag_id="orders_dag", run_id="run_1", chain="read_orders", attempt=1, state="success", scale=1):
    """Metrics documents as the runtime writes them (two subtasks for the head chain)."""
    base = {"pipeline": "orders", "dag_id": dag_id, "run_id": run_id, "chain": chain, "attempt": attempt,
            "spark_app_id": f"local-{chain}-{attempt}", "state": state,
            "error": None if state == "success" else "ValueError: bad record in parse",
            "started_at": "2025-01-01T10:00:00+00:00", "ended_at": "2025-01-01T10:00:05+00:00"}
    if chain == "read_orders":
        ops = []
        for s in (0, 1):
            ops += [_op(1, "read_orders", s, 0, 500 * scale, 40),
                    _op(2, "parse", s, 500 * scale, 480 * scale, 300, side={"rejects": 15 * scale}, dead=5 * scale),
                    _op(3, "valid", s, 480 * scale, 400 * scale, 60, filtered=80 * scale)]
        outputs = [{"edge": "valid__by_customer", "path": f"/x/{run_id}/valid__by_customer", "records": 800 * scale},
                   {"edge": "parse__write_rejects", "path": f"/x/{run_id}/parse__write_rejects", "records": 30 * scale}]
    elif chain == "by_customer":
        ops = [_op(4, "by_customer", s, 800 * scale // 3, 10, 90, watermark=BY_CUSTOMER_WATERMARKS[s]) for s in range(3)]
        ops += [_op(5, "write_totals", s, 10, 0, 20, watermark=BY_CUSTOMER_WATERMARKS[s]) for s in range(3)]
        outputs = [{"sink": "write_totals", "path": "/out/totals", "records": 30}]
    else:
        ops = [_op(6, "write_rejects", 0, 30 * scale, 0, 5)]
        outputs = [{"sink": "write_rejects", "path": "/out/rejects", "records": 30 * scale}]
    return {**base, "operators": ops, "outputs": outputs}


def plan(**changes):
    p = copy.deepcopy(PLAN)
    p.update(changes)
    return p
