"""Plan a 500-operator pipeline and print how long it takes (target: < 0.5 s).

    .venv/bin/python benchmarks/plan_bench.py [--operators 500] [--repeat 5]

A benchmark, not a test: the shape mixes everything the planner handles
(chained runs, fan-out, side outputs, key_by, parallelism changes, unions),
so both the StreamGraph builder and the chaining pass are exercised.
"""

from __future__ import annotations

import argparse
import time

from airflow_flinkchain import OutputTag, StreamPipeline

TAG = OutputTag("side")


def build(operators: int) -> StreamPipeline:
    p = StreamPipeline("bench", parallelism=4, runtime_mode="batch")
    stream = p.from_collection(range(10)).name("source")
    count = 1
    pending = []
    while count < operators - 1:
        step = count % 10
        if step == 3:
            proc = stream.process(lambda v, ctx: [v], output_tags=[TAG])
            pending.append(proc.get_side_output(TAG).map(str))
            stream, count = proc, count + 2
        elif step == 5:
            stream, count = stream.key_by(lambda v: v % 7).reduce(lambda a, b: a), count + 1
        elif step == 7:
            stream, count = stream.map(str).set_parallelism(2), count + 1
        elif step == 9 and pending:
            stream, count = stream.union(pending.pop()).map(str), count + 1
        else:
            stream, count = stream.filter(bool), count + 1
    for branch in pending:
        stream = stream.union(branch)
    stream.collect("sink")
    return p


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operators", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    timings = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        pipeline = build(args.operators)
        recorded = time.perf_counter()
        plan = pipeline.plan()
        timings.append((recorded - started, time.perf_counter() - recorded))
    nodes = len(plan.stream_graph.nodes)
    best_record = min(t[0] for t in timings)
    best_plan = min(t[1] for t in timings)
    print(f"{nodes} operators, {len(plan.stream_graph.edges)} edges -> "
          f"{len(plan.chains)} chains, {len(plan.edges)} chain edges")
    print(f"record API calls: {best_record * 1000:.1f} ms, plan(): {best_plan * 1000:.1f} ms "
          f"(best of {args.repeat}; target < 500 ms) -> {'OK' if best_record + best_plan < 0.5 else 'SLOW'}")


if __name__ == "__main__":
    main()
