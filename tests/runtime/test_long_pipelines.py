"""Long chains on Spark: 1,000 maps, 100 filters, 50 flat_maps, 50 process
functions and a mixed run, all chained to one source (one chain of ~1,400
operators), planned, shipped to a Spark worker and run there."""

from __future__ import annotations

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.functions import ProcessFunction

pytestmark = pytest.mark.spark

N = 200


def inc(x):
    return x + 1


def inc_each(x):
    yield x + 1


class Inc(ProcessFunction):
    def process_element(self, value, ctx):
        yield value + 1


def test_long_chains_of_every_kind_run_on_spark(spark):
    p = StreamPipeline("long_chains", parallelism=1)
    src = p.from_collection(range(N)).name("src")
    maps = src
    for i in range(1000):
        maps = maps.map(inc).name(f"map{i}")
    maps.collect("maps")
    filters = src
    for k in range(100):
        filters = filters.filter(lambda x, k=k: x != k).name(f"filter{k}")  # drops record k
    filters.collect("filters")
    flat_maps = src
    for i in range(50):
        flat_maps = flat_maps.flat_map(inc_each).name(f"flat_map{i}")
    flat_maps.collect("flat_maps")
    processes = src
    for i in range(50):
        processes = processes.process(Inc()).name(f"process{i}")
    processes.collect("processes")
    mixed = src
    for i in range(60):
        mixed = (mixed.map(to_record).name(f"mixed_map{i}")
                 .filter(lambda r, i=i: keep(r, i)).name(f"mixed_filter{i}")
                 .flat_map(duplicate_fifty).name(f"mixed_flat_map{i}")
                 .process(lambda r, ctx: [r["v"]]).name(f"mixed_process{i}"))
    mixed.collect("mixed")

    plan = p.plan()
    assert len(plan.chains) == 1 and len(plan.chains[0].node_ids) > 1400
    res = p.execute(spark=spark)
    assert res.output("maps") == [x + 1000 for x in range(N)]
    assert res.output("filters") == list(range(100, N))
    assert res.output("flat_maps") == [x + 50 for x in range(N)]
    assert res.output("processes") == [x + 50 for x in range(N)]
    expected = list(range(N))
    for i in range(60):
        expected = [r["v"] for x in expected if keep(to_record(x), i) for r in duplicate_fifty(to_record(x))]
    assert res.output("mixed") == expected and len(expected) > N / 2


def to_record(x):
    return {"v": x + 1}


def keep(r, i):
    return r["v"] % 60 != i


def duplicate_fifty(r):
    return [r, {"v": -1000}] if r["v"] == 50 else [r]
