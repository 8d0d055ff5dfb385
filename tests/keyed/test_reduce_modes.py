"""KeyedStream.reduce and sum/min/max/min_by/max_by: rolling results in STREAMING mode
(each stamped with its record's timestamp), one final result per key in BATCH mode
(stamped with the MAX watermark) - Flink's StreamGroupedReduceOperator / BatchGroupedReduceOperator."""

from __future__ import annotations

from collections import namedtuple

import pytest

from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS

from .util import collect_stamped, pipeline

# arrival order differs from timestamp order on purpose
TUPLES = [(("a", 3, "x"), 30), (("b", 5, "y"), 10), (("a", 1, "z"), 10), (("a", 2, "w"), 20), (("b", 5, "v"), 40)]


def _run(mode, build, records=TUPLES):
    p, src = pipeline(mode, records)
    collect_stamped(build(src.key_by(lambda r: r[0])))
    return p.execute_local().output("out")


def test_streaming_reduce_emits_a_rolling_result_per_record_stamped_with_it():
    out = _run("streaming", lambda k: k.reduce(lambda a, b: (a[0], a[1] + b[1], a[2] + b[2])))
    assert out == [(("a", 3, "x"), 30), (("b", 5, "y"), 10), (("a", 4, "xz"), 10), (("a", 6, "xzw"), 20),
                   (("b", 10, "yv"), 40)]


def test_batch_reduce_emits_one_result_per_key_in_timestamp_order_stamped_max():
    out = _run("batch", lambda k: k.reduce(lambda a, b: (a[0], a[1] + b[1], a[2] + b[2])))
    # a's records in timestamp order: z@10, w@20, x@30
    assert out == [(("a", 6, "zwx"), MAX_WATERMARK_TS), (("b", 10, "yv"), MAX_WATERMARK_TS)]


AGGREGATIONS = {
    # kind: (streaming results, batch result per key) over TUPLES by position 1
    "sum": ([("a", 3, "x"), ("b", 5, "y"), ("a", 4, "x"), ("a", 6, "x"), ("b", 10, "y")],
            [("a", 6, "z"), ("b", 10, "y")]),
    "min": ([("a", 3, "x"), ("b", 5, "y"), ("a", 1, "x"), ("a", 1, "x"), ("b", 5, "y")],
            [("a", 1, "z"), ("b", 5, "y")]),
    "max": ([("a", 3, "x"), ("b", 5, "y"), ("a", 3, "x"), ("a", 3, "x"), ("b", 5, "y")],
            [("a", 3, "z"), ("b", 5, "y")]),
    "min_by": ([("a", 3, "x"), ("b", 5, "y"), ("a", 1, "z"), ("a", 1, "z"), ("b", 5, "y")],
               [("a", 1, "z"), ("b", 5, "y")]),
    "max_by": ([("a", 3, "x"), ("b", 5, "y"), ("a", 3, "x"), ("a", 3, "x"), ("b", 5, "y")],
               [("a", 3, "x"), ("b", 5, "y")]),
}


@pytest.mark.parametrize("kind", sorted(AGGREGATIONS))
def test_aggregations_by_position_in_both_modes(kind):
    rolling, final = AGGREGATIONS[kind]
    streaming = _run("streaming", lambda k: getattr(k, kind)(1))
    assert streaming == list(zip(rolling, [ts for _, ts in TUPLES]))
    batch = _run("batch", lambda k: getattr(k, kind)(1))
    assert batch == [(v, MAX_WATERMARK_TS) for v in final]


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_aggregations_by_field_name_on_dicts_and_namedtuples_and_on_basic_values(mode):
    dicts = [({"k": "a", "n": 2, "t": 1}, 1), ({"k": "a", "n": 7, "t": 2}, 2), ({"k": "a", "n": 1, "t": 3}, 3)]
    p, src = pipeline(mode, dicts)
    keyed = src.key_by(lambda r: r["k"])
    keyed.sum("n").collect("sum")
    keyed.max("n").collect("max")
    keyed.min_by("n").collect("min_by")
    res = p.execute_local()
    last = -1 if mode == "streaming" else 0
    assert res.output("sum")[last] == {"k": "a", "n": 10, "t": 1}
    assert res.output("max")[last] == {"k": "a", "n": 7, "t": 1}
    assert res.output("min_by")[last] == {"k": "a", "n": 1, "t": 3}
    assert dicts[0][0] == {"k": "a", "n": 2, "t": 1}  # records are not changed in place

    Point = namedtuple("Point", "k n")
    p, src = pipeline(mode, [(Point("a", 1), None), (Point("a", 4), None), (5, None), (6, None)])
    src.filter(lambda r: isinstance(r, tuple)).key_by(lambda r: r.k).sum("n").collect("points")
    src.filter(lambda r: isinstance(r, int)).key_by(lambda r: r % 2 * 0).max().collect("numbers")
    res = p.execute_local()
    assert res.output("points")[last] == Point("a", 5)
    assert res.output("numbers")[last] == 6


def test_bad_field_fails_naming_the_operator_and_bad_position_type_is_refused():
    p, src = pipeline("batch", [(("a", 1), None), (("a", 2), None)])
    src.key_by(lambda r: r[0]).sum("amount").name("totals").collect("out")
    with pytest.raises(Exception, match=r"totals.*cannot select field 'amount' of tuple"):
        p.execute_local()
    with pytest.raises(TypeError, match=r"sum\(\) takes a field position"):
        src.key_by(lambda r: r[0]).sum(1.5)


def test_batch_keeps_arrival_order_of_records_without_timestamps_before_timestamped_ones():
    records = [(("a", "x"), None), (("a", "y"), 5), (("a", "z"), None), (("a", "w"), 1), (("b", "q"), None)]
    out = _run("batch", lambda k: k.reduce(lambda a, b: (a[0], a[1] + b[1])), records)
    assert [v for v, _ in out] == [("a", "xzwy"), ("b", "q")]
