"""Pure-Python benchmark of the chain runtime core (no Spark).

A map -> filter -> flat_map chain run by `run_subtask` (source head, default
settings: object reuse off, on_error=fail, timing sampled) against the same
three functions hand-fused in one loop, over N ints. Both write every output
record to the same in-memory channel writer through the same call
(`write(channel, value, timestamp)`), as the Spark side would; a second ratio
compares against a hand-fused loop appending to a plain list (the lower bound).

    .venv/bin/python benchmarks/runtime_core_bench.py [N]
"""

from __future__ import annotations

import gc
import sys
import time

from airflow_flinkchain.graph.model import (OperatorKind, Partitioner, PartitionSpec, StreamEdge, StreamGraph,
                                            StreamNode)
from airflow_flinkchain.planner.jobgraph import Chain, ChainEdge, JobGraph
from airflow_flinkchain.runtime.core.operator_chain import run_subtask


def f(x):
    return x * 3


def g(x):
    return x % 2 == 0


def h(x):
    return (x, x + 1)


class ListChannelWriter:
    def __init__(self):
        self.records = []
        self.write_record = self.records.append

    def write(self, channel, value, timestamp):
        self.write_record(value)

    def write_watermark(self, channel, timestamp):
        pass

    def close(self):
        pass


def build_job() -> JobGraph:
    fwd = PartitionSpec(Partitioner.FORWARD)
    nodes = (
        StreamNode(0, "src", OperatorKind.SOURCE, "Source", 1),
        StreamNode(1, "map", OperatorKind.MAP, "Map", 1, function=f),
        StreamNode(2, "filter", OperatorKind.FILTER, "Filter", 1, function=g),
        StreamNode(3, "flat_map", OperatorKind.FLAT_MAP, "FlatMap", 1, function=h),
        StreamNode(4, "next", OperatorKind.MAP, "Next", 1, function=f),
    )
    edges = tuple(StreamEdge(i, i + 1, fwd) for i in range(4))
    graph = StreamGraph("bench", nodes, edges, runtime_mode="batch")
    out = ChainEdge("flat_map__next", "c0", "c1", "flat_map", "next", Partitioner.FORWARD, None, (), edges[3])
    c0 = Chain("c0", 0, (0, 1, 2, 3), "Source -> Map -> Filter -> FlatMap", ("Source", "Map", "Filter", "FlatMap"),
               1, "default", edges[:3], (), ("flat_map__next",))
    c1 = Chain("c1", 4, (4,), "Next", ("Next",), 1, "default", (), ("flat_map__next",), ())
    return JobGraph("bench", graph, (c0, c1), (out,))


def hand_fused(data, writer):
    write = writer.write
    for v in data:
        v = f(v)
        if g(v):
            for x in h(v):
                write(0, x, None)


def hand_fused_list(data):
    out = []
    append = out.append
    for v in data:
        v = f(v)
        if g(v):
            for x in h(v):
                append(x)
    return out


def best_of_interleaved(fns, repeats=7):
    """Best CPU time of each function, runs interleaved so a busy machine hurts all alike."""
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            gc.collect()
            t0 = time.process_time()
            fn()
            best[i] = min(best[i], time.process_time() - t0)
    return best


def main(n: int = 1_000_000) -> float:
    data = list(range(n))
    job = build_job()
    writers = []
    keep_writers = [True]

    def chain(plain=True):
        w = ListChannelWriter()
        if keep_writers[0]:
            writers.append(w)
        run_subtask(job, "c0", 0, "bench", data, lambda edge, subtask: w, lambda node, subtask: None,
                    plain_values=plain)

    def fused():
        w = ListChannelWriter()
        if keep_writers[0]:
            writers.append(w)
        hand_fused(data, w)

    chain()
    fused()
    assert writers[0].records == writers[1].records, "chain and hand-fused disagree"
    writers.clear()
    keep_writers[0] = False  # don't pile up outputs across timed runs (GC pressure)
    t_chain, t_chain_dispatch, t_fused, t_list = best_of_interleaved(
        [chain, lambda: chain(plain=False), fused, lambda: hand_fused_list(data)])
    ratio = t_fused / t_chain
    print(f"records: {n:,}")
    print(f"chain (run_subtask, plain_values=True):  {t_chain * 1e3:8.1f} ms")
    print(f"chain (run_subtask, element dispatch):   {t_chain_dispatch * 1e3:8.1f} ms")
    print(f"hand-fused, same writer:       {t_fused * 1e3:8.1f} ms")
    print(f"hand-fused, list.append:       {t_list * 1e3:8.1f} ms")
    print(f"throughput ratio chain / hand-fused (same writer): {ratio:.3f}")
    print(f"throughput ratio chain with element dispatch / hand-fused (same writer): {t_fused / t_chain_dispatch:.3f}")
    print(f"throughput ratio chain / hand-fused (list.append): {t_list / t_chain:.3f}")
    return ratio


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
