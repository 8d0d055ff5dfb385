"""Issue 6, "bad records": the dead-letter policy per operator and per pipeline,
dead letters sunk through the dead-letter side output (record, operator,
exception type and message), counts in the run store, and the books of every
operator kind balance: records in = out + filtered + dead-lettered + skipped
(flat_map: in = inputs that produced output + dead-lettered + skipped; keyed
reduce: in = reduced + dead-lettered, out = one record per key)."""

from __future__ import annotations

import threading

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.functions import DEAD_LETTER_TAG
from airflow_flinkchain.io import JsonLinesSink
from airflow_flinkchain.store import RunStore

from .helpers import json_rows, multiset

pytestmark = pytest.mark.spark
NUMBERS = list(range(20))
BAD = [n for n in NUMBERS if n % 5 == 3]  # 3, 8, 13, 18
GOOD = [n for n in NUMBERS if n not in BAD]


def check(n):
    if n % 5 == 3:
        raise ValueError(f"bad record {n}")
    return n


def total(ms, counter):
    return sum(m[counter] for m in ms)


def books(result, name):
    ms = result.operator_metrics(name)
    assert ms, f"no metrics for {name}: {result.metrics}"
    return {c: total(ms, c) for c in ("records_in", "records_out", "filtered", "dead_lettered", "skipped")}


def dead_letter(n, op, error_type="ValueError"):
    return {"record": n, "operator": op, "error_type": error_type, "error": f"bad record {n}"}


def build(kind, policy_on="operator", policy="dead_letter", tmp=None):
    p = StreamPipeline(f"bad_{kind}", parallelism=2, runtime_mode="batch",  # reduce: one result per key
                       **({"on_error": policy} if policy_on == "pipeline" else {}))
    own = {"on_error": policy} if policy_on == "operator" else {}
    s = p.from_collection(NUMBERS).name("numbers")
    if kind == "map":
        op = s.map(lambda n: check(n) * 2, **own).name("op")
    elif kind == "flat_map":
        op = s.flat_map(lambda n: [check(n)] * (n % 3), **own).name("op")
    elif kind == "filter":
        op = s.filter(lambda n: check(n) % 2 == 0, **own).name("op")
    elif kind == "process":
        op = s.process(lambda n, ctx: [check(n) + 100], **own).name("op")
    elif kind == "keyed_reduce":
        op = s.key_by(lambda n: n % 2).reduce(lambda a, b: a + check(b), **own).name("op")
    elif kind == "keyed_process":
        op = s.key_by(lambda n: n % 2).process(lambda n, ctx: [(ctx.get_current_key(), check(n))], **own).name("op")
    elif kind == "sink":  # the sink cannot pickle the record it is handed
        p.set_object_reuse(True)  # else the copy between the chained map and the sink fails first
        op = s.map(lambda n: (n, threading.Lock()) if n % 5 == 3 else n).name("pre")
        sink = op.collect("out")
        if policy_on == "operator":
            sink.on_error(policy)
        return p
    else:
        raise AssertionError(kind)
    op.collect("out")
    if policy == "dead_letter":
        dl = op.dead_letters() if kind != "map" else op.get_side_output(DEAD_LETTER_TAG)
        dl.collect("dl")
        if tmp is not None:
            dl.sink_to(JsonLinesSink(str(tmp / "dead_letters")), name="dl_file")
    return p


EXPECTED_OUT = {
    "map": [n * 2 for n in GOOD],
    "flat_map": [n for n in GOOD for _ in range(n % 3)],
    "filter": [n for n in GOOD if n % 2 == 0],
    "process": [n + 100 for n in GOOD],
    "keyed_reduce": [sum(n for n in GOOD if n % 2 == k) for k in (0, 1)],
    "keyed_process": [(n % 2, n) for n in GOOD],
    "sink": GOOD,
}


@pytest.mark.parametrize("kind", list(EXPECTED_OUT))
def test_dead_letter_books_balance_per_operator_kind(spark, tmp_path, kind):
    p = build(kind, tmp=tmp_path)
    result = p.execute(spark=spark, exchange_root=str(tmp_path / "ex"), run_id="r1")
    assert multiset(result.output("out")) == multiset(EXPECTED_OUT[kind])
    op = "out" if kind == "sink" else "op"
    b = books(result, op)
    assert b["dead_lettered"] == len(BAD) and b["skipped"] == 0, b
    assert b["records_in"] == len(NUMBERS), b
    if kind == "flat_map":
        assert b["records_out"] == len(EXPECTED_OUT[kind])
        assert b["records_in"] == len(GOOD) + b["filtered"] + b["dead_lettered"] + b["skipped"], b
    elif kind == "keyed_reduce":
        assert b["records_out"] == 2, b
        assert b["records_in"] == len(GOOD) + b["dead_lettered"], b
    elif kind == "sink":
        written = sum(o["records"] for doc in result.metrics.values() for o in doc["outputs"] if o.get("sink") == "out")
        assert b["records_in"] == written + b["dead_lettered"] and written == len(GOOD), (b, written)
    else:
        assert b["records_in"] == b["records_out"] + b["filtered"] + b["dead_lettered"] + b["skipped"], b
        assert b["records_out"] == len(EXPECTED_OUT[kind]), b
    if kind == "sink":
        return
    letters = result.output("dl")
    assert multiset(letters) == multiset(dead_letter(n, "op") for n in BAD)
    assert json_rows(str(tmp_path / "dead_letters")) == multiset(letters)
    # side-output count of the dead-letter tag
    assert sum(m["side_outputs"].get("dead_letter", 0) for m in result.operator_metrics("op")) in (0, len(BAD))

    # the counts reach the run store
    store = RunStore(f"sqlite:///{tmp_path / 'store.db'}")
    for doc in result.metrics.values():
        store.record_attempt(doc)
    run = store.get_run_metrics(p.name, "r1")
    ops = {o["name"]: o for c in run["chains"] for o in c["operators"]}
    assert ops["op"]["dead_lettered"] == len(BAD) and ops["op"]["records_in"] == len(NUMBERS)
    assert ops["op"]["dropped"] == len(BAD) + b["filtered"]


@pytest.mark.parametrize("policy", ["dead_letter", "skip"])
def test_pipeline_level_policy(spark, tmp_path, policy):
    p = build("map", policy_on="pipeline", policy=policy)
    result = p.execute(spark=spark, exchange_root=str(tmp_path / "ex"), run_id="r1")
    assert multiset(result.output("out")) == multiset(EXPECTED_OUT["map"])
    b = books(result, "op")
    bad_counter = "dead_lettered" if policy == "dead_letter" else "skipped"
    assert b[bad_counter] == len(BAD) and b["records_in"] == b["records_out"] + b[bad_counter], b
    if policy == "dead_letter":
        assert multiset(result.output("dl")) == multiset(dead_letter(n, "op") for n in BAD)


def test_operator_policy_overrides_pipeline_policy(spark, tmp_path):
    """Pipeline says dead_letter, one operator says fail: that operator fails the run."""
    from airflow_flinkchain.runtime.spark.job import ChainRunError

    p = StreamPipeline("override", parallelism=1, on_error="dead_letter")
    p.from_collection(NUMBERS).map(check, on_error="fail").name("strict").collect("out")
    with pytest.raises(ChainRunError, match=r"operator 'strict'.*ValueError: bad record 3; record: 3"):
        p.execute(spark=spark, exchange_root=str(tmp_path / "ex"), run_id="r1")
