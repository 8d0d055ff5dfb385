"""map_batches / filter_batches give what the per-record version of the same pipeline gives
(execute_local): maps, filters, mixed chains, side outputs, dead letters, typed outputs,
event time; plus planning and errors."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from airflow_flinkchain import OutputTag, StreamPipeline
from airflow_flinkchain.common import Duration, Types, WatermarkStrategy
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.window import TumblingEventTimeWindows

ROWS = [{"x": i, "name": f"n{i % 7}"} for i in range(1000)]
SIDE = OutputTag("big")


# -- the same logic, per record and per batch -------------------------------------------
def triple(r):
    return {"x": r["x"] * 3 + 1, "name": r["name"]}


def triple_b(b):
    return b.set_column(0, "x", pc.add(pc.multiply(b["x"], 3), 1))


def even(r):
    return r["x"] % 2 == 0


def even_b(b):
    return pc.equal(pc.bit_wise_and(b["x"], 1), 0)


def expand(r):
    return [{"x": r["x"]}, {"x": r["x"] + 1}]


def expand_b(b):
    x = b["x"].to_numpy()
    return pa.RecordBatch.from_arrays([pa.array(np.column_stack([x, x + 1]).ravel())], names=["x"])


def source(p, rows=ROWS):
    return p.from_collection(rows)


def run(build, parallelism=2, **settings):
    p = StreamPipeline("vec", parallelism=parallelism, **settings)
    build(p)
    return p.execute_local()


def test_map_and_filter_batches_equal_map_and_filter():
    per_record = run(lambda p: source(p).map(triple).filter(even).collect("out"))
    batched = run(lambda p: source(p).map_batches(triple_b).filter_batches(even_b).collect("out"))
    assert batched.output("out") == per_record.output("out")
    assert len(batched.output("out")) == 500


def test_mixed_chain_batch_record_batch_equals_per_record_and_counts_alike():
    def per_record(p):
        source(p).map(triple).name("m").filter(even).name("f").flat_map(expand).name("e").collect("out")

    def mixed(p):
        source(p).map_batches(triple_b).name("m").filter(even).name("f").map_batches(expand_b).name("e").collect("out")

    a, b = run(per_record), run(mixed)
    assert b.output("out") == a.output("out")
    chain = StreamPipeline("x", parallelism=2)
    mixed(chain)
    assert [c.name for c in chain.plan().chains] == ["Collection Source", "m -> f -> e -> out"]

    def counts(res):
        ops = [o for doc in res.metrics.values() for o in doc["operators"]]
        return {(o["name"], k): sum(p[k] for p in ops if p["name"] == o["name"])
                for o in ops for k in ("records_in", "records_out", "filtered")}
    assert counts(b) == counts(a)


def test_record_batch_record_with_small_batches_and_a_pandas_function():
    def pandas_triple(df):
        df["x"] = df["x"] * 3 + 1
        df["rows"] = len(df)  # the batch size the function saw
        return df

    per_record = run(lambda p: source(p).map(lambda r: dict(r)).map(triple).map(lambda r: r["x"]).collect("out"))
    batched = run(lambda p: source(p).map(lambda r: dict(r)).map_batches(pandas_triple, batch_format="pandas",
                                                                          batch_size=64)
                  .map(lambda r: (r["x"], r["rows"])).collect("out"))
    assert [x for x, _ in batched.output("out")] == per_record.output("out")
    assert max(n for _, n in batched.output("out")) == 64


def test_side_outputs_of_a_batch_function_equal_process_side_outputs():
    def route(value, ctx):
        if value["x"] > 900:
            ctx.output(SIDE, value)
        else:
            yield value

    def route_b(b):
        big = pc.greater(b["x"], 900)
        yield b.filter(pc.invert(big))
        yield SIDE, b.filter(big)

    def build(fn, batched):
        def b(p):
            s = source(p)
            s = s.map_batches(fn, output_tags=[SIDE]) if batched else s.process(fn, output_tags=[SIDE])
            s.collect("main")
            s.get_side_output(SIDE).collect("side")
        return b

    a, b = run(build(route, False)), run(build(route_b, True))
    assert sorted(b.output("main"), key=lambda r: r["x"]) == sorted(a.output("main"), key=lambda r: r["x"])
    assert b.output("side") == a.output("side") and len(a.output("side")) == 99


def test_undeclared_side_output_is_refused():
    p = StreamPipeline("vec")
    s = source(p).map_batches(triple_b, output_tags=[OutputTag("other")])
    with pytest.raises(PlanningError, match="never emits side output 'big'"):
        s.get_side_output(SIDE)
    with pytest.raises(PlanningError, match="cannot emit side outputs"):
        source(p).filter_batches(even_b).get_side_output(SIDE)


def test_dead_letters_are_found_by_bisection_and_equal_the_per_record_ones():
    bad = {13, 500, 501, 999}

    def check(r):
        if r["x"] in bad:
            raise ValueError(f"bad x {r['x']}")
        return triple(r)

    def check_b(b):
        hits = [x for x in b["x"].to_pylist() if x in bad]
        if hits:
            raise ValueError(f"bad x {hits[0]}")
        return triple_b(b)

    def build(batched):
        def b(p):
            s = source(p)
            s = (s.map_batches(check_b) if batched else s.map(check)).name("check").on_error("dead_letter")
            s.collect("out")
            s.dead_letters().collect("dead")
        return b

    a, b = run(build(False)), run(build(True))
    assert b.output("out") == a.output("out")
    assert b.output("dead") == a.output("dead")
    assert sorted(d["record"]["x"] for d in b.output("dead")) == sorted(bad)
    ops = [o for doc in b.metrics.values() for o in doc["operators"] if o["name"] == "check"]
    assert sum(o["dead_lettered"] for o in ops) == 4 and sum(o["records_out"] for o in ops) == 996


def test_skip_policy_and_fail_policy():
    def boom_b(b):
        if pc.any(pc.equal(b["x"], 7)).as_py():
            raise ValueError("seven")
        return b

    skipped = run(lambda p: source(p).map_batches(boom_b).on_error("skip").collect("out"))
    assert sorted(r["x"] for r in skipped.output("out")) == [i for i in range(1000) if i != 7]
    with pytest.raises(Exception, match="seven") as info:
        run(lambda p: source(p).map_batches(boom_b).name("boom").collect("out"))
    assert "boom" in str(info.value)


def test_typed_outputs_are_cast_and_equal_the_per_record_typed_exchange():
    row = Types.ROW_NAMED(["x", "name"], [Types.INT(), Types.STRING()])

    def build(batched):
        def b(p):
            s = source(p)
            # a batch operator's ROW_NAMED is its Arrow schema; the per-record twin declares that schema
            # (a per-record ROW_NAMED gives PyFlink's Rows, pickled)
            s = (s.map_batches(triple_b, output_type=row) if batched
                 else s.map(triple, output_type={"x": "int32", "name": "string"}))
            s.rebalance().map(lambda r: r).collect("out")  # a typed exchange edge
        return b

    a, b = run(build(False)), run(build(True))
    assert sorted(b.output("out"), key=lambda r: r["x"]) == sorted(a.output("out"), key=lambda r: r["x"])


@pytest.mark.parametrize("returned, message", [
    (lambda b: b.append_column("extra", b["x"]), "undeclared field(s) ['extra']"),
    (lambda b: b.drop_columns(["name"]), "missing field(s) ['name']"),
    (lambda b: b.set_column(1, "name", b["x"]), "field 'name' expects string"),
    (lambda b: b.set_column(0, "x", pa.array([str(v) for v in b["x"].to_pylist()])), "field 'x' expects int32"),
])
def test_typed_output_that_does_not_fit_fails_naming_operator_and_field(returned, message):
    with pytest.raises(Exception) as info:
        run(lambda p: source(p).map_batches(returned, output_type={"x": "int32", "name": "string"})
            .name("typed").on_error("dead_letter").collect("out"))
    assert "typed" in str(info.value) and message in str(info.value)


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_timestamps_and_watermarks_cross_batch_operators(mode):
    events = [{"k": i % 3, "x": i, "t": i * 37 % 4000} for i in range(300)]
    strategy = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(500))
                .with_timestamp_assigner(lambda e, ts: e["t"]))

    def build(batched):
        def b(p):
            s = p.from_collection(events).assign_timestamps_and_watermarks(strategy)
            s = s.map_batches(lambda b: b.set_column(1, "x", pc.multiply(b["x"], 2))) if batched \
                else s.map(lambda e: {**e, "x": e["x"] * 2})
            (s.key_by(lambda e: e["k"]).window(TumblingEventTimeWindows.of(1000))
             .reduce(lambda a, c: {**a, "x": a["x"] + c["x"]}).map(lambda e: (e["k"], e["x"])).collect("out"))
            s.process(lambda e, ctx: [(e["x"], ctx.timestamp())]).collect("stamped")
        return b

    a, b = run(build(False), runtime_mode=mode), run(build(True), runtime_mode=mode)
    assert sorted(b.output("out")) == sorted(a.output("out"))
    assert sorted(b.output("stamped")) == sorted(a.output("stamped"))
    assert all(ts is not None for _, ts in b.output("stamped"))


def test_the_timestamp_column_is_visible_and_settable():
    def stamp(b):  # event time from a column, vectorized
        return b.append_column("_ts", pc.multiply(b["x"], 10))

    res = run(lambda p: source(p, ROWS[:5]).map_batches(stamp).process(lambda e, ctx: [ctx.timestamp()])
              .collect("out"), parallelism=1)
    assert res.output("out") == [0, 10, 20, 30, 40]


def test_batch_operators_chain_by_flink_rules():
    p = StreamPipeline("vec", parallelism=2)
    s = source(p).map_batches(triple_b).name("a").uid("a-v1")
    s = s.filter_batches(even_b).name("b").start_new_chain()
    s = s.map_batches(triple_b).name("c").set_parallelism(3)
    s.map_batches(triple_b).name("d").disable_chaining().collect("out")
    assert [c.name for c in p.plan().chains] == ["Collection Source", "a", "b", "c", "d", "out"]
    p2 = StreamPipeline("vec2", parallelism=2)
    source(p2).rebalance().map_batches(triple_b).name("a").filter_batches(even_b).name("b").collect("out")
    assert [c.name for c in p2.plan().chains] == ["Collection Source", "a -> b -> out"]


def test_planning_errors():
    p = StreamPipeline("vec")
    with pytest.raises(PlanningError, match="KeyedStream"):
        source(p).key_by(lambda r: r["x"]).map_batches(triple_b)
    with pytest.raises(PlanningError, match="batch_format"):
        source(p).map_batches(triple_b, batch_format="polars")
    with pytest.raises(PlanningError, match="batch_size"):
        source(p).filter_batches(even_b, batch_size=0)


def test_runtime_errors_name_the_operator():
    with pytest.raises(Exception, match="'vec_op' takes records as dicts"):
        run(lambda p: p.from_collection([1, 2]).map_batches(triple_b).name("vec_op").collect("out"))
    with pytest.raises(Exception, match="mask has 1 entries"):
        run(lambda p: source(p).filter_batches(lambda b: pa.array([True])).name("mask").collect("out"))
