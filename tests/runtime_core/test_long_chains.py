"""Chains of any length run: long fused runs are generated as several parts
(CPython refuses deeper nesting), the chain and its handlers are built
without recursion, and a record may cross thousands of operators."""

from __future__ import annotations

import copy

import pytest

from airflow_flinkchain.functions import ProcessFunction
from airflow_flinkchain.runtime.core.elements import StreamRecord, Watermark
from airflow_flinkchain.runtime.core.memory import MemoryWriters
from airflow_flinkchain.runtime.core.operator_chain import OperatorChain

from .helpers import K, build_job, edge, node

N = 200


def linear_job(stages, on_error="fail"):
    """source -> stages (kind, function[, on_error]) -> sink "out", all in one chain."""
    nodes = [node(0, K.SOURCE)]
    for i, (kind, fn, *policy) in enumerate(stages, start=1):
        nodes.append(node(i, kind, fn, on_error=policy[0] if policy else None))
    nodes.append(node(len(nodes), K.SINK, name="out"))
    return build_job(nodes, [edge(i, i + 1) for i in range(len(nodes) - 1)], on_error=on_error)


def run_chain(job, inputs, **kw):
    writers = MemoryWriters()
    chain = OperatorChain(job, "c0", 0, "run-1", writers.record_writer_factory, writers.sink_writer_factory)
    metrics = chain.run(inputs, **kw)
    return chain, writers, {r["key"]: r for r in metrics.to_dict()}


def reference(stages, records):
    """The stages applied one after the other to copies of the records (object reuse off)."""
    for kind, fn, *policy in stages:
        out = []
        for r in records:
            try:
                if kind is K.MAP:
                    out.append(fn(copy.deepcopy(r)))
                elif kind is K.FILTER:
                    if fn(r):
                        out.append(r)
                elif kind is K.FLAT_MAP:
                    out.extend(copy.deepcopy(x) for x in fn(copy.deepcopy(r)))
                else:
                    process = getattr(fn, "process_element", fn)
                    out.extend(copy.deepcopy(x) for x in process(copy.deepcopy(r), None))
            except ValueError:
                assert policy == ["skip"]
        records = out
    return records


def parts_of_head(chain) -> int:
    return chain.head.fast_segment.source.count("\n    def part") + 1


def inc(x):
    return x + 1


def test_a_thousand_maps():
    stages = [(K.MAP, inc)] * 1000
    chain, w, m = run_chain(linear_job(stages), range(N), plain_values=True)
    assert w.sink_values("out") == [x + 1000 for x in range(N)]
    assert parts_of_head(chain) > 1  # one function would not compile
    assert m["map1"]["records_in"] == m["map1000"]["records_out"] == m["out"]["records_in"] == N
    # bare values, timestamped records and watermarks through the element loop
    _, w, _ = run_chain(linear_job(stages), [StreamRecord(1, 7), Watermark(7), 2])
    assert [(r.value, r.timestamp) for r in w.sink[("out", 0)].records] == [(1001, 7), (1002, None)]


def test_a_hundred_filters():
    stages = [(K.FILTER, lambda x, k=k: x != k) for k in range(100)]  # filter k drops record k
    chain, w, m = run_chain(linear_job(stages), range(N))
    assert w.sink_values("out") == list(range(100, N))
    assert parts_of_head(chain) > 1
    assert all(m[f"filter{k + 1}"]["filtered"] == 1 for k in range(100))
    assert m["filter100"]["records_out"] == N - 100


def test_fifty_flat_maps():
    def inc_each(x):  # a generator: its records are private (nothing else holds them)
        yield x + 1

    stages = [(K.FLAT_MAP, inc_each)] * 50
    stages[10] = (K.FLAT_MAP, lambda x: (x + 1, -1) if x == 15 else (x + 1,))  # one record becomes two
    chain, w, m = run_chain(linear_job(stages), range(N))
    expected = reference(stages, list(range(N)))
    assert w.sink_values("out") == expected and len(expected) == N + 1
    assert parts_of_head(chain) > 1
    assert m["flat_map11"]["records_out"] == N + 1 and m["flat_map50"]["records_out"] == N + 1


class AddIndex(ProcessFunction):
    def __init__(self, k):
        self.k = k

    def process_element(self, value, ctx):
        out = {**value, "n": value.get("n", 0) + 1}
        if self.k % 10 == 0:
            out[f"p{self.k}"] = True
        yield out


def test_fifty_process_functions():
    stages = [(K.PROCESS, AddIndex(k)) for k in range(50)]
    chain, w, m = run_chain(linear_job(stages), [{"n": i} for i in range(N)])
    assert w.sink_values("out") == reference(stages, [{"n": i} for i in range(N)])
    assert w.sink_values("out")[3] == {"n": 53, "p0": True, "p10": True, "p20": True, "p30": True, "p40": True}
    assert parts_of_head(chain) > 1
    assert m["process50"]["records_out"] == N


def bump(r):  # mutates and returns its input: the copy before the next operator is needed
    r["v"] += 1
    return r


def fail_on_three(r):
    if r["id"] == 3:
        raise ValueError("three")
    return {**r, "v": r["v"] * 2}


def test_a_mixed_chain_of_six_hundred_operators_with_copies_and_errors():
    stages = []
    for k in range(150):
        stages += [(K.MAP, bump),
                   (K.FILTER, lambda r, k=k: r["id"] != k + 40),
                   (K.FLAT_MAP, lambda r, k=k: [r, {**r, "dup": k}] if r["id"] == k else [r]),
                   (K.PROCESS, AddIndex(k) if k % 2 else (lambda r, ctx: [{**r, "n": r.get("n", 0) + 1}]))]
    stages[4] = (K.MAP, fail_on_three, "skip")
    expected = reference(stages, [{"id": i, "v": i} for i in range(N)])
    chain, w, m = run_chain(linear_job(stages), [{"id": i, "v": i} for i in range(N)])
    assert w.sink_values("out") == expected
    assert len(expected) > N - 150 and all(r["id"] != 3 for r in expected)
    assert m["map5"]["skipped"] == 1
    assert parts_of_head(chain) > 1


def test_three_hundred_fan_outs_in_one_chain():
    """Each map also feeds its own sink: every map ends a fused segment (300 segments
    handing records to each other, 600 operators in the timed wiring)."""
    n = 300
    nodes = [node(0, K.SOURCE)]
    edges = []
    for i in range(1, n + 1):
        nodes.append(node(2 * i - 1, K.MAP, inc))
        nodes.append(node(2 * i, K.SINK, name=f"out{i}"))
        edges += [edge(2 * i - 3 if i > 1 else 0, 2 * i - 1), edge(2 * i - 1, 2 * i)]
    job = build_job(nodes, edges)
    _, w, m = run_chain(job, range(N))
    assert w.sink_values("out1") == [x + 1 for x in range(N)]
    assert w.sink_values(f"out{n}") == [x + n for x in range(N)]
    assert m[f"map{2 * n - 1}"]["records_out"] == N


@pytest.mark.parametrize("kind, count", [(K.MAP, 120), (K.FILTER, 60), (K.FLAT_MAP, 12), (K.PROCESS, 12)])
def test_just_past_each_former_limit(kind, count):
    fn = {K.MAP: inc, K.FILTER: lambda x: True, K.FLAT_MAP: lambda x: (x,), K.PROCESS: lambda x, ctx: (x,)}[kind]
    _, w, _ = run_chain(linear_job([(kind, fn)] * count), range(N))
    assert w.sink_values("out") == [x + (count if kind is K.MAP else 0) for x in range(N)]
