"""Issue 6, "bad pipelines": a catalogue of wrong pipeline definitions, each giving
ONE clear error at plan time (no Spark) or at the start of the run (before any
record moves), naming the operator and the fix."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.functions import DEAD_LETTER_TAG, OutputTag
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.io import ParquetSink, ParquetSource, SqlSink, SqlSource

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def P(**settings) -> StreamPipeline:
    return StreamPipeline("bad", **settings)


def cycle():
    p = P()
    a = p.from_collection([1]).map(int).name("a")
    b = a.map(int).name("b")
    c = b.map(int).name("c")
    c.collect("out")
    a.transformation.inputs = (c.transformation,)  # c feeds back into a
    return p.plan()


def no_sink():
    p = P()
    p.from_collection([1]).map(int).name("lonely")
    return p.plan()


def unknown_tag():
    P().from_collection([1]).process(lambda v, ctx: [v], output_tags=[OutputTag("late")]).name("flag") \
        .get_side_output(OutputTag("early"))


def side_output_of_map():
    P().from_collection([1]).map(int).name("parse").get_side_output(OutputTag("late"))


def dead_letters_without_policy():
    P().from_collection([1]).map(int).name("parse").get_side_output(DEAD_LETTER_TAG)


def dead_letters_policy_changed_later():
    p = P()
    m = p.from_collection([1]).map(int, on_error="dead_letter").name("parse")
    m.dead_letters().collect("dl")
    m.collect("out")
    m.on_error("skip")
    return p.plan()


def select_without_split():
    P().from_collection([1]).map(int).name("route").select("big")


def split_of_split():
    P().from_collection([1]).map(int).name("route").split(lambda x: ["a"]).select("a").split(lambda x: ["b"])


def forward_across_parallelism():
    p = P()
    p.from_collection([1]).name("numbers").forward().map(int).name("wide").set_parallelism(2).collect("out")
    return p.plan()


def duplicate_uids():
    p = P()
    p.from_collection([1]).map(int).name("first").uid("parse").map(int).name("second").uid("parse").collect("out")
    return p.plan()


def sink_with_outputs():
    P().from_collection([1]).map(int).collect("out").map(int)


def rebalance_after_key_by():
    P().from_collection([1]).key_by(lambda x: x).rebalance()


def parallel_collection_source():
    P().from_collection([1]).name("numbers").set_parallelism(4)


def parallelism_zero():
    P().from_collection([1]).map(int).name("parse").set_parallelism(0)


def parallelism_above_max():
    p = P()
    p.from_collection([1]).map(int).name("parse").set_parallelism(300).set_max_parallelism(256).collect("out")
    return p.plan()


def unknown_on_error():
    P().from_collection([1]).map(int, on_error="ignore").name("parse")


def not_a_function():
    P().from_collection([1]).map(42)


def sink_to_a_string():
    P().from_collection([1]).map(int).sink_to("/tmp/out.parquet")


def stream_of_another_pipeline():
    a, b = P(), P()
    a.from_collection([1]).union(b.from_collection([2]))


def unpicklable_function():
    from airflow_flinkchain.runtime.core.serialize import dumps_plan

    p = P()
    lock = threading.Lock()
    p.from_collection([1]).map(lambda x: (lock, x)).name("holds_lock").collect("out")
    dumps_plan(p.plan())  # what the setup task and execute() do first


def sql_sink_without_url():
    SqlSink("results")


PLAN_TIME = [
    (cycle, PlanningError, ["has a cycle", "operator 'a' reads from 'c'", "must be a DAG", "Remove the edge"]),
    (no_sink, PlanningError, ["has no sink", "sink_to(sink) or collect(name)"]),
    (unknown_tag, PlanningError, ["operator 'flag' never emits side output 'early'", "output_tags"]),
    (side_output_of_map, PlanningError, ["operator 'parse' (map) cannot emit side outputs", "Use process()"]),
    (dead_letters_without_policy, PlanningError,
     ["operator 'parse' has no dead-letter output", "on_error policy is 'fail'", "on_error='dead_letter'"]),
    (dead_letters_policy_changed_later, PlanningError,
     ["operator 'parse': its dead-letter output is used", "'skip'", "on_error='dead_letter'"]),
    (select_without_split, PlanningError, ["without split()", ".split(selector).select(...)"]),
    (split_of_split, PlanningError, ["split() of a split", "Add a map() between the two splits"]),
    (forward_across_parallelism, PlanningError,
     ["Forward partitioning does not allow change of parallelism", "'wide'", "rebalance"]),
    (duplicate_uids, PlanningError, ["'first' and 'second' have the same uid 'parse'", "give each operator its own uid()"]),
    (sink_with_outputs, PlanningError, ["sink 'out' has no outputs", "Call map() on the stream before"]),
    (rebalance_after_key_by, PlanningError, ["KeyedStream", "Partition before key_by()"]),
    (parallel_collection_source, PlanningError,
     ["'numbers' is a non-parallel source", "rebalance() after it"]),
    (parallelism_zero, PlanningError, ["operator 'parse': parallelism must be a positive integer, got 0"]),
    (parallelism_above_max, PlanningError, ["operator 'parse'", "exceeds its max parallelism 256",
                                            "raise set_max_parallelism()"]),
    (unknown_on_error, PlanningError, ["on_error must be one of 'fail', 'dead_letter', 'skip'", "'ignore'"]),
    (not_a_function, PlanningError, ["map() needs a callable or an object with a map() method, got 42"]),
    (sink_to_a_string, PlanningError, ["sink_to() needs a Sink descriptor", "airflow_flinkchain.io.sinks"]),
    (stream_of_another_pipeline, PlanningError, ["union() needs streams of the same pipeline 'bad'"]),
    (unpicklable_function, TypeError, ["operator 'holds_lock' (its function) cannot be serialized",
                                       "cannot pickle '_thread.lock'", "open such resources in the function's open()"]),
    (sql_sink_without_url, ValueError, ["SqlSink('results') needs exactly one of url= or conn_id="]),
]


@pytest.mark.parametrize("build,error,fragments", PLAN_TIME, ids=[c[0].__name__ for c in PLAN_TIME])
def test_plan_time_errors(build, error, fragments):
    with pytest.raises(error) as info:
        build()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    assert "\n" not in message.strip()  # one message, not a traceback dump


# ---- at the start of the run (a real Spark run; nothing is written) ----------------------


def missing_source_path(tmp):
    p = P(parallelism=2)
    p.from_source(ParquetSource(str(tmp / "no" / "such" / "dir")), name="orders").map(dict).name("parse") \
        .collect("out")
    return p


def unknown_output_type(tmp):
    p = P()
    p.from_collection([{"a": 1}]).map(dict, output_type={"a": "int65"}).name("typed").collect("out")
    return p


def sql_source_url_unreachable(tmp):
    p = P()
    p.from_source(SqlSource("select * from missing_table", url=f"sqlite:///{tmp / 'empty.db'}"), name="rows") \
        .collect("out")
    return p


def file_sink_bad_output_type(tmp):
    p = P()
    p.from_collection([{"a": 1}]).map(dict).name("m").sink_to(
        ParquetSink(str(tmp / "out"), output_type={"a": "integer"}), name="files")
    return p


RUN_START = [
    (missing_source_path, ["source 'orders'", "/no/such/dir' does not exist", "create it, or fix the path"]),
    (unknown_output_type, ["operator 'typed'", "field 'a' has unknown type 'int65'", "'int64'"]),
    (sql_source_url_unreachable, ["missing_table"]),
    (file_sink_bad_output_type, ["sink 'files'", "field 'a' has unknown type 'integer'"]),
]


@pytest.mark.spark
@pytest.mark.parametrize("build,fragments", RUN_START, ids=[c[0].__name__ for c in RUN_START])
def test_run_start_errors(spark, tmp_path, build, fragments):
    from airflow_flinkchain.runtime.spark.job import ChainRunError

    p = build(tmp_path)
    root = tmp_path / "ex"
    with pytest.raises(ChainRunError) as info:
        p.execute(spark=spark, exchange_root=str(root), run_id="r1")
    message = str(info.value)
    for fragment in fragments:
        assert fragment.lower() in message.lower(), f"{fragment!r} not in {message!r}"
    committed = [d for d in os.listdir(root / "bad" / "r1") if d != "_metrics"] if (root / "bad" / "r1").exists() else []
    assert committed == []
    assert not (tmp_path / "out").exists()


def test_missing_spark_connection_fails_before_spark_submit(tmp_path):
    """The provider would silently fall back to --master yarn; the chain task fails first."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW_CONN", "AIRFLOW__"))}
    env.update({"AIRFLOW_HOME": str(tmp_path / "home"), "PYTHONPATH": REPO})
    code = ("from airflow_flinkchain.airflow.run_context import check_spark_connection\n"
            "check_spark_connection('spark_prod', \"pipeline 'orders', chain 'parse'\")\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    last = out.stderr.strip().splitlines()[-1]
    for fragment in ("pipeline 'orders', chain 'parse'", "Spark connection 'spark_prod' is not defined",
                     "AIRFLOW_CONN_SPARK_PROD="):
        assert fragment in last, last
