"""Pipelines run on the standalone cluster (and by benchmarks/cluster_bench.py).

User functions are closures and lambdas defined here, in a file the executors never
see: they travel by value in the serialized plan."""

from __future__ import annotations

from airflow_flinkchain import OutputTag, StreamPipeline

ODD = OutputTag("odd")


def word_counts(name: str = "cluster_words", n: int = 200, parallelism: int = 2) -> StreamPipeline:
    """collection -> flat_map -> map (closure) -> process with a side output (one chain, parallelism 1)
    -> key_by -> reduce (second chain, `parallelism` subtasks) -> collect; the side output is collected too.
    Two chains: two spark-submits per run."""
    vocabulary = ["flink", "spark", "airflow", "chain", "operator"]
    weight = 3  # captured by the map below

    p = StreamPipeline(name, parallelism=parallelism, runtime_mode="batch")  # one total per word

    def route(value, ctx):
        if value[1] % 2:
            ctx.output(ODD, value)
        yield value

    lines = p.from_collection([" ".join(vocabulary[(i + j) % len(vocabulary)] for j in range(i % 4 + 1)) for i in range(n)])
    words = lines.flat_map(lambda line: line.split()).name("split").set_parallelism(1)
    words = words.map(lambda w: (w, len(w) * weight)).name("weigh").set_parallelism(1)
    routed = words.process(route, output_tags=[ODD]).name("route").set_parallelism(1)
    routed.get_side_output(ODD).collect("odd").set_parallelism(1)
    routed.key_by(lambda kv: kv[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).name("sum").collect("totals")
    return p


def expected_word_counts(n: int = 200) -> dict:
    vocabulary = ["flink", "spark", "airflow", "chain", "operator"]
    totals: dict = {}
    odd = []
    for i in range(n):
        for j in range(i % 4 + 1):
            w = vocabulary[(i + j) % len(vocabulary)]
            totals[w] = totals.get(w, 0) + len(w) * 3
            if len(w) * 3 % 2:
                odd.append((w, len(w) * 3))
    return {"totals": sorted(totals.items()), "odd": sorted(odd)}


def failing(name: str = "cluster_failing") -> StreamPipeline:
    p = StreamPipeline(name, parallelism=1)

    def explode(x):
        if x == 3:
            raise ValueError("boom on record 3")
        return x

    p.from_collection(range(5)).map(explode).name("explode").collect("out")
    return p
