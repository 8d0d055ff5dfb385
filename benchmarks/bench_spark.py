"""Spark sections of `make bench`: runtime throughput (1) and the scale curve (4).

Every variant reads the same generated Parquet input ({"x": int64}, N rows in P
files, so Spark reads it as P splits: no repartition, no shuffle) and writes
Parquet, so only the per-record work differs:

  chain     run_chain of a one-chain pipeline (the OperatorChain runtime)
  fused     the same functions hand-fused in one mapInArrow function
  pyarrow   the same functions hand-fused in P Spark tasks that read their files and write
            Parquet with pyarrow (no JVM data path: the ceiling of any per-record Python
            runtime on Spark)
  rdd       the same functions in rdd.mapPartitions
  native    the same logic as DataFrame expressions                    (no Python per record)
  staged    one Spark stage per operator, each a mapInArrow writing Parquet that the next reads
            (what chaining removes)

Besides wall time, each run's CPU seconds of the whole process tree (driver, JVM, Python
workers) are recorded: other load on the machine moves them little.

The 3-operator pipeline (map -> filter -> flat_map -> sink) reuses
benchmarks.runtime_bench (build_chain, run_fused, mapper/keep/expand); the
10-operator one (fan-out and a side output, three sinks) is defined here.
"""

from __future__ import annotations

import glob
import os
import resource
import shutil
import statistics
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_flinkchain import OutputTag
from benchmarks import runtime_bench as rb
from benchmarks.bench_common import summarize, throughput, timed, timed_cpu
from benchmarks.bench_tasks import file_batches, in_tasks, pyarrow3

X = pa.schema([("x", pa.int64())])
TAGGED = pa.schema([("out", pa.int32()), ("x", pa.int64())])
VARIANTS = ("chain", "fused", "pyarrow", "rdd", "native", "staged")


def write_input(path: str, records: int, files: int = 2) -> None:
    """A directory of `files` Parquet files (the parallelism: Spark reads each as one split)
    holding x = 0 .. records-1 in order."""
    os.makedirs(path, exist_ok=True)
    for k in range(files):
        lo, hi = k * records // files, (k + 1) * records // files
        pq.write_table(pa.table({"x": pa.array(range(lo, hi), pa.int64())}),
                       os.path.join(path, f"part-{k:05d}.parquet"), row_group_size=256_000)


def input_partitions(spark, path: str) -> int:
    """How many partitions (splits) Spark reads the input as."""
    return spark.read.parquet(path).rdd.getNumPartitions()


def _rows(batches):
    for batch in batches:
        yield from batch.to_pylist()


# -- 10-operator pipeline: src -> parse -> valid -+-> route -> enrich -> expand -> sink_main
#                                                 |        `-(side)-> side_fmt -> sink_side
#                                                 `-> sink_audit                 (fan-out)
def parse(r):
    return {"x": r["x"] * 3 + 1}


def valid(r):
    return r["x"] % 2 == 0


def is_side(r):
    return r["x"] % 5 == 0


def enrich(r):
    return {"x": r["x"] + 7}


def expand10(r):
    return [r, {"x": r["x"] + 1}]


def side_fmt(r):
    return {"x": -r["x"]}


SIDE = OutputTag("side")


def route(value, ctx):
    if is_side(value):
        ctx.output(SIDE, value)
    else:
        yield value


def build_chain10(path: str, out: str, parallelism: int):
    from airflow_flinkchain import StreamPipeline
    from airflow_flinkchain.io import ParquetSink, ParquetSource

    x = {"x": "int64"}
    p = StreamPipeline("bench10", parallelism=parallelism, runtime_mode="batch")
    checked = p.from_source(ParquetSource(path), name="src").map(parse).name("parse").filter(valid).name("valid")
    checked.sink_to(ParquetSink(os.path.join(out, "audit"), output_type=x), name="sink_audit")
    routed = checked.process(route, output_tags=[SIDE]).name("route")
    (routed.map(enrich).name("enrich").flat_map(expand10).name("expand")
     .sink_to(ParquetSink(os.path.join(out, "main"), output_type=x), name="sink_main"))
    (routed.get_side_output(SIDE).map(side_fmt).name("side_fmt")
     .sink_to(ParquetSink(os.path.join(out, "side"), output_type=x), name="sink_side"))
    job = p.plan()
    assert len(job.chains) == 1, [c.operator_names for c in job.chains]
    return job


def fused10(batches):
    for batch in batches:
        tags, xs = [], []
        for r in batch.to_pylist():
            r = parse(r)
            if not valid(r):
                continue
            tags.append(0)
            xs.append(r["x"])
            if is_side(r):
                tags.append(1)
                xs.append(side_fmt(r)["x"])
            else:
                for o in expand10(enrich(r)):
                    tags.append(2)
                    xs.append(o["x"])
        yield pa.RecordBatch.from_arrays([pa.array(tags, pa.int32()), pa.array(xs, pa.int64())], schema=TAGGED)


def pyarrow10(files: list, out: str, k: int) -> int:
    writers = []
    for name in ("audit", "side", "main"):
        os.makedirs(os.path.join(out, name), exist_ok=True)
        writers.append(pq.ParquetWriter(os.path.join(out, name, f"part-{k:05d}.parquet"), X))
    n = 0
    for batch in file_batches(files):
        audit, side, main = [], [], []
        for r in batch.to_pylist():
            r = parse(r)
            if not valid(r):
                continue
            audit.append(r)
            if is_side(r):
                side.append(side_fmt(r))
            else:
                main.extend(expand10(enrich(r)))
        for w, rows in zip(writers, (audit, side, main)):
            w.write_batch(pa.RecordBatch.from_pylist(rows, schema=X))
            n += len(rows)
    for w in writers:
        w.close()
    return n


def rdd10(rows):
    for row in rows:
        r = parse({"x": row[0]})
        if not valid(r):
            continue
        yield 0, r["x"]
        if is_side(r):
            yield 1, side_fmt(r)["x"]
        else:
            for o in expand10(enrich(r)):
                yield 2, o["x"]


def rdd3(rows):
    for row in rows:
        r = rb.mapper({"x": row[0]})
        if rb.keep(r):
            for o in rb.expand(r):
                yield (o["x"],)


def per_operator(kind: str, fn, schema=X):
    """One operator as its own mapInArrow function (for the staged variant)."""
    def run(batches):
        for batch in batches:
            out = []
            for r in batch.to_pylist():
                if kind == "map":
                    out.append(fn(r))
                elif kind == "filter":
                    if fn(r):
                        out.append(r)
                else:
                    out.extend(fn(r))
            yield pa.RecordBatch.from_pylist(out, schema=schema)
    return run


def route_stage(batches):
    for batch in batches:
        out = [{"out": int(is_side(r)), "x": r["x"]} for r in batch.to_pylist()]
        yield pa.RecordBatch.from_pylist(out, schema=TAGGED)


def parquet_rows(directory: str) -> int:
    """Rows of every Parquet file under a local directory, from the footers (no Spark job)."""
    total = 0
    for root, _, files in os.walk(directory):
        for f in files:
            if f.endswith(".parquet") and not f.startswith((".", "_")):
                total += pq.ParquetFile(os.path.join(root, f)).metadata.num_rows
    return total


class RuntimeBench:
    """Runs the variants of one pipeline shape on one input; each call = one timed run."""

    def __init__(self, spark, tmp: str, path: str, records: int, parallelism: int):
        self.spark, self.tmp, self.path, self.records, self.p = spark, tmp, path, records, parallelism
        self.exchange = os.path.join(tmp, "exchange")
        self.job3 = rb.build_chain(path, self.out("chain3"), parallelism)
        self.job10 = build_chain10(path, self.out("chain10"), parallelism)
        from airflow_flinkchain.runtime.core.serialize import dumps_plan

        self.plan3, self.plan10 = dumps_plan(self.job3), dumps_plan(self.job10)
        self.last_chain_outputs = {}

    def out(self, name: str) -> str:
        return os.path.join(self.tmp, "out", name)

    def src(self):
        return self.spark.read.parquet(self.path)  # P files: P splits

    def _write(self, df, name, partition_by=None):
        w = df.write.mode("overwrite")
        if partition_by:
            w = w.partitionBy(partition_by)
        w.parquet(self.out(name))

    # 3 operators ----------------------------------------------------------
    def chain3(self):
        from airflow_flinkchain.runtime.spark.job import run_chain

        res = run_chain(self.spark, self.job3, self.job3.chains[0].id, f"r{uuid.uuid4().hex[:8]}", self.exchange,
                        plan_bytes=self.plan3)
        self.last_chain_outputs["3"] = sum(o["records"] for o in res.outputs)

    def fused3(self):
        rb.run_fused(self.spark, self.path, self.out("fused3"), self.p)

    def pyarrow3(self):
        in_tasks(self.spark, self.path, self.out("pyarrow3"), self.p, pyarrow3)

    def rdd3(self):
        rdd = self.src().rdd.mapPartitions(rdd3)
        self._write(self.spark.createDataFrame(rdd, "x long"), "rdd3")

    def native3(self):
        from pyspark.sql import functions as F

        x = F.col("x") * 3 + 1
        df = self.src().select(x.alias("x")).filter(F.col("x") % 2 == 0)
        self._write(df.select(F.explode(F.array(F.col("x"), F.col("x") + 1)).alias("x")), "native3")

    def staged3(self):
        prev = self.src()
        for i, (kind, fn) in enumerate((("map", rb.mapper), ("filter", rb.keep), ("flat_map", rb.expand))):
            self._write(prev.mapInArrow(per_operator(kind, fn), "x long"), f"staged3_{i}")
            prev = self.spark.read.parquet(self.out(f"staged3_{i}"))

    # 10 operators ---------------------------------------------------------
    def chain10(self):
        from airflow_flinkchain.runtime.spark.job import run_chain

        res = run_chain(self.spark, self.job10, self.job10.chains[0].id, f"r{uuid.uuid4().hex[:8]}",
                        self.exchange, plan_bytes=self.plan10)
        self.last_chain_outputs["10"] = sum(o["records"] for o in res.outputs)

    def fused10(self):
        self._write(self.src().mapInArrow(fused10, "out int, x long"), "fused10", "out")

    def pyarrow10(self):
        in_tasks(self.spark, self.path, self.out("pyarrow10"), self.p, pyarrow10)

    def rdd10(self):
        rdd = self.src().rdd.mapPartitions(rdd10)
        self._write(self.spark.createDataFrame(rdd, "out int, x long"), "rdd10", "out")

    def native10(self):
        from pyspark.sql import functions as F

        x = F.col("x")
        checked = self.src().select((x * 3 + 1).alias("x")).filter(x % 2 == 0)
        audit = checked.select(F.lit(0).alias("out"), x)
        side = checked.filter(x % 5 == 0).select(F.lit(1).alias("out"), (-x).alias("x"))
        main = checked.filter(x % 5 != 0).select((x + 7).alias("x")).select(
            F.lit(2).alias("out"), F.explode(F.array(x, x + 1)).alias("x"))
        self._write(audit.unionByName(side).unionByName(main), "native10", "out")

    def staged10(self):
        read = self.spark.read.parquet
        self._write(self.src().mapInArrow(per_operator("map", parse), "x long"), "s10_parse")
        self._write(read(self.out("s10_parse")).mapInArrow(per_operator("filter", valid), "x long"), "s10_valid")
        self._write(read(self.out("s10_valid")), "s10_sink_audit")  # the audit sink: its own stage
        self._write(read(self.out("s10_valid")).mapInArrow(route_stage, "out int, x long"), "s10_route", "out")
        self._write(read(self.out("s10_route/out=0")).mapInArrow(per_operator("map", enrich), "x long"),
                    "s10_enrich")
        self._write(read(self.out("s10_enrich")).mapInArrow(per_operator("flat_map", expand10), "x long"),
                    "s10_sink_main")
        self._write(read(self.out("s10_route/out=1")).mapInArrow(per_operator("map", side_fmt), "x long"),
                    "s10_sink_side")

    def output_counts(self) -> dict:
        """Records written by the last run of each variant (a correctness check, untimed)."""
        count = lambda name: parquet_rows(self.out(name))  # noqa: E731
        return {
            "3": {"chain": self.last_chain_outputs.get("3"), "fused": count("fused3"), "pyarrow": count("pyarrow3"),
                  "rdd": count("rdd3"), "native": count("native3"), "staged": count("staged3_2")},
            "10": {"chain": self.last_chain_outputs.get("10"), "fused": count("fused10"),
                   "pyarrow": count("pyarrow10"), "rdd": count("rdd10"), "native": count("native10"),
                   "staged": sum(count(n) for n in ("s10_sink_audit", "s10_sink_main", "s10_sink_side"))},
        }


TARGET_CHAIN_OVER_FUSED = 0.9


def run_runtime(spark, tmp: str, records: int, parallelism: int, repeat: int, warmup: bool,
                input_path: str) -> dict:
    bench = RuntimeBench(spark, tmp, input_path, records, parallelism)
    shapes = {"3": "map -> filter -> flat_map -> sink",
              "10": "src -> parse -> valid -> {sink_audit, route -> enrich -> expand -> sink_main, "
                    "route[side] -> side_fmt -> sink_side}"}
    times = {shape: {v: [] for v in VARIANTS} for shape in shapes}
    cpu = {shape: {v: [] for v in VARIANTS} for shape in shapes}
    if warmup:  # JVM JIT, Python worker start, first-job overheads: not measured
        bench.chain3()
        bench.fused3()
        bench.pyarrow3()
    for _ in range(repeat):
        for shape in shapes:
            for v in VARIANTS:  # interleaved: machine load hits every variant alike
                wall, used = timed_cpu(getattr(bench, f"{v}{shape}"))
                times[shape][v].append(wall)
                cpu[shape][v].append(used)
    counts = bench.output_counts()
    result = {"records": records, "parallelism": parallelism, "repeat": repeat,
              "input": f"{parallelism} Parquet files, read by Spark as {input_partitions(spark, input_path)} splits",
              "warmup": "one untimed chain, fused and pyarrow run first" if warmup else "none", "pipelines": {}}
    for shape, desc in shapes.items():
        secs = {v: summarize(times[shape][v]) for v in VARIANTS}
        tput = {v: throughput(records, secs[v]) for v in VARIANTS}
        ratios = {f"chain_over_{v}": tput["chain"]["median"] / tput[v]["median"] for v in VARIANTS if v != "chain"}
        cpu_med = {v: statistics.median(cpu[shape][v]) for v in VARIANTS}
        result["pipelines"][f"{shape}_operators"] = {
            "shape": desc, "seconds": secs, "records_per_s": tput, "ratios": ratios,
            "cpu_seconds": {v: summarize(cpu[shape][v]) for v in VARIANTS},
            # records per CPU second of the chain over the variant's
            "cpu_ratios": {f"chain_over_{v}": cpu_med[v] / cpu_med["chain"] for v in VARIANTS
                           if v != "chain" and cpu_med["chain"] > 0},
            "output_records": counts[shape],
            "target_chain_over_fused": TARGET_CHAIN_OVER_FUSED,
            "meets_target": ratios["chain_over_fused"] >= TARGET_CHAIN_OVER_FUSED,
        }
    return result


# -- scale curve: (1) at several sizes, with the Python workers' peak RSS ----------------------------
def _reset_peak_rss() -> None:
    """Start of a partition: reset the worker's peak-RSS mark (Linux: clear_refs "5"). Python
    workers are reused across tasks, so a lifetime peak (ru_maxrss) would carry earlier tasks'."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def _peak_rss() -> int:
    from benchmarks.bench_common import proc_bytes

    return proc_bytes("/proc/self/status", "VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _report_rss(rss_dir: str) -> None:
    """Called inside a Python worker at the end of a partition: its peak RSS since the
    partition started (bytes)."""
    rss = _peak_rss()
    with open(os.path.join(rss_dir, f"{os.getpid()}-{uuid.uuid4().hex}"), "w") as fh:
        fh.write(str(rss))


def _collect_rss(rss_dir: str) -> int:
    values = []
    for f in glob.glob(os.path.join(rss_dir, "*")):
        with open(f) as fh:
            values.append(int(fh.read()))
        os.remove(f)
    return max(values) if values else 0


def _rss_expand_class():
    from airflow_flinkchain.functions import FlatMapFunction

    class ExpandReportingRss(FlatMapFunction):
        """runtime_bench.expand, reporting the worker's peak RSS when the chain closes."""

        def __init__(self, rss_dir):
            self.rss_dir = rss_dir

        def open(self, ctx):
            _reset_peak_rss()

        def flat_map(self, value):
            return rb.expand(value)

        def close(self):
            _report_rss(self.rss_dir)

    return ExpandReportingRss


def build_chain_rss(path: str, out: str, parallelism: int, rss_dir: str):
    from airflow_flinkchain import StreamPipeline
    from airflow_flinkchain.io import ParquetSink, ParquetSource

    p = StreamPipeline("bench_scale", parallelism=parallelism, runtime_mode="batch")
    (p.from_source(ParquetSource(path), name="src").map(rb.mapper).name("map").filter(rb.keep).name("filter")
     .flat_map(_rss_expand_class()(rss_dir)).name("flat_map")
     .sink_to(ParquetSink(out, output_type={"x": "int64"}), name="sink"))
    return p.plan()


def fused_rss(rss_dir: str):
    def fused(batches):
        _reset_peak_rss()
        for batch in batches:
            out_rows = []
            for r in batch.to_pylist():
                r = rb.mapper(r)
                if rb.keep(r):
                    out_rows.extend(rb.expand(r))
            yield pa.RecordBatch.from_pylist(out_rows, schema=X)
        _report_rss(rss_dir)
    return fused


def run_scale(spark, tmp: str, sizes: list, parallelism: int, repeat: int, inputs: dict) -> dict:
    from airflow_flinkchain.runtime.core.serialize import dumps_plan
    from airflow_flinkchain.runtime.spark.job import run_chain

    rss_dir = os.path.join(tmp, "rss")
    os.makedirs(rss_dir, exist_ok=True)
    points = []
    for n in sizes:
        path = inputs.get(n) or os.path.join(tmp, f"input_{n}.parquet")
        if not os.path.exists(path):
            write_input(path, n, parallelism)
        out = os.path.join(tmp, "scale_out")
        job = build_chain_rss(path, os.path.join(out, "chain"), parallelism, rss_dir)
        plan = dumps_plan(job)
        secs, rss = {"chain": [], "fused": []}, {"chain": [], "fused": []}
        for _ in range(repeat):
            _collect_rss(rss_dir)
            secs["chain"].append(timed(lambda: run_chain(spark, job, job.chains[0].id, f"s{uuid.uuid4().hex[:8]}",
                                                          os.path.join(tmp, "exchange"), plan_bytes=plan)))
            rss["chain"].append(_collect_rss(rss_dir))
            fused = fused_rss(rss_dir)
            secs["fused"].append(timed(lambda: spark.read.parquet(path).mapInArrow(
                fused, "x long").write.mode("overwrite").parquet(os.path.join(out, "fused"))))
            rss["fused"].append(_collect_rss(rss_dir))
        point = {"records": n}
        for v in ("chain", "fused"):
            s = summarize(secs[v])
            point[v] = {"seconds": s, "records_per_s": throughput(n, s), "peak_worker_rss_bytes": max(rss[v])}
        point["chain_over_fused"] = point["chain"]["records_per_s"]["median"] / point["fused"]["records_per_s"]["median"]
        points.append(point)
        shutil.rmtree(out, ignore_errors=True)
    return {"parallelism": parallelism, "repeat": repeat, "points": points,
            "rss_note": "peak RSS (VmHWM) of each Python worker during its partition: the mark is reset at "
                        "the partition's start (/proc/self/clear_refs) and read at its end (chain: open()/"
                        "close() of the flat_map function; fused: start/end of the mapInArrow function); "
                        "max over partitions and runs. Python workers are reused across tasks, so a "
                        "lifetime peak would carry earlier tasks' memory."}
