"""`make bench`: the whole benchmark suite in one run, on the same generated data.

    python -m benchmarks.run [--quick] [--only runtime,vectorized,airflow,parse,scale,flink,eventtime,join,state,connectors]
                             [--repeat 3] [--out DIR]

Sections (see each module's docstring):
  runtime  chain runtime vs hand-fused mapInArrow / the same in P pyarrow tasks (the ceiling) /
           rdd.mapPartitions / native DataFrame / one stage per operator; 3- and 10-operator
           pipelines over 4M records, and 1M (`at_other_sizes`); the input is P Parquet files,
           which Spark reads as P splits                                          (bench_spark)
  vectorized  the runtime pipeline with map_batches/filter_batches over pyarrow.compute vs native
           DataFrame expressions (target >= 0.8x) and the same in P pyarrow tasks, beside mixed
           batch/record chains, the per-record chain, hand-fused mapInArrow and per-record
           pyarrow tasks; 4M and 1M records, Parquet in and out                 (bench_vectorized)
  aggregations  keyed sum (vectorized and per record) and tumbling 10 s window sum (vectorized and
           per record, both modes) beside Spark's groupBy(k).agg(sum) and groupBy(k, window(ts, "10 seconds")); 1M records
           in two Parquet files, 1,000 keys; results checked equal to Spark's; then stream runs over
           N slices (+ a drain) beside Spark Structured Streaming AvailableNow  (bench_aggregations)
  airflow  chained vs unchained DAG through Airflow with real spark-submit        (bench_airflow_e2e)
  parse    DagBag parse of a DAG file with a 200-operator pipeline vs without     (bench_parse)
  scale    (1) at 0.5M, 2M, 8M records with the Python workers' peak RSS          (bench_spark)
  flink    the same pipeline in PyFlink BATCH mode, if a venv with apache-flink exists (bench_flink)
  eventtime  keyed tumbling window and KeyedProcessFunction (ValueState + timer) at 1M records
           beside the same pipeline's keyed reduce (BATCH), both modes; PyFlink's window if present
                                                                                   (bench_eventtime)
  join     interval join and keyed co-process vs a single-input keyed process, 1M records each (bench_join)
  state    a keyed operator's state in the heap vs the RocksDB backend at 1M keys, RocksDB at 5M:
           peak RSS, snapshot size and time per key group, incremental re-snapshot, restore (bench_state)
  stream_run_fixed_cost  seconds of one stream run of the stream-runs example through Airflow (make demo
           DEMO_ARGS=stream: 60 records, 3 chains), split into where they go (Airflow, spark-submit and the
           JVM, imports, SparkContext, the job, commit), beside a Spark AvailableNow query by spark-submit
                                                                          (bench_stream_fixed_cost)
  connectors  records/s of one stream run over 1M rows per connector (NATS JetStream source, Delta
           source and sink, SQL sink, PostgreSQL CDC source, Iceberg sink) beside the file source;
           skipped when the service is down
                                                                                  (bench_connectors)

Writes DIR/report.json (median, min, max of --repeat runs per figure, machine,
versions, load average) and DIR/<section>.png. `--quick` runs tiny sizes (the
smoke version `make test` runs). A benchmark, not a test: it asserts nothing
about speed; the report says which targets were met.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback

from benchmarks.bench_common import REPO, machine_info

SECTIONS = ("runtime", "vectorized", "aggregations", "airflow", "parse", "scale", "flink", "eventtime", "join",
            "state", "connectors", "stream_run_fixed_cost")
DEFAULT_OUT = os.path.join(REPO, "benchmarks", "results")
SIZES = {
    False: {"runtime": 4_000_000, "runtime_other": [1_000_000], "scale": [500_000, 2_000_000, 8_000_000], "airflow": 20_000, "operators": 200,
            "eventtime": 1_000_000, "aggregations": 1_000_000, "stream_slices": 4,
            "connectors": 1_000_000, "stream_runs": 3,
            "join": 1_000_000, "state": [1_000_000, 5_000_000]},
    True: {"runtime": 2_000, "runtime_other": [1_000], "scale": [1_000, 2_000, 4_000], "airflow": 500,
           "operators": 200, "eventtime": 2_000,
           "aggregations": 30_000, "stream_slices": 2, "join": 2_000, "connectors": 2_000, "stream_runs": 2,
           "state": [2_000, 5_000]},
}
SPARK_CONF = {"spark.driver.memory": "2g"}
BASELINE_NOTE = ("Spark baselines read the input as P Parquet files (P splits) with no .repartition(P): a "
                 "repartition adds a shuffle that makes Spark slower than its own read of the files, so ratios of "
                 "the chain to Spark baselines measured with it are higher than these for that reason, not because "
                 "the chain got slower. On a machine loaded by other processes, wall-time ratios favour the variants "
                 "that run JVM threads beside the Python workers (mapInArrow, native DataFrame); cpu_ratios (records "
                 "per CPU second of the whole process tree) are barely moved by that load. The pyarrow variants (P "
                 "Spark tasks reading and writing Parquet with pyarrow) are the ceiling of a Python runtime on Spark "
                 "running the same functions with pyarrow's own conversions (to_pylist, from_pylist). The session "
                 "talks to its Python workers over Unix domain sockets (spark.python.unix.domain.socket.enabled, the "
                 "chain runtime's default), as every Python baseline in it does: the pyarrow tasks gain more from "
                 "that than the chain, so chain/pyarrow ratios measured over TCP are higher for that reason.")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke version of the whole harness")
    ap.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated subset of {','.join(SECTIONS)}")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure (median, min, max reported)")
    ap.add_argument("--parallelism", type=int, default=2, help="Spark local[P] and pipeline parallelism")
    ap.add_argument("--out", default=DEFAULT_OUT, help="directory for report.json and the PNGs")
    ap.add_argument("--records", type=int, help="override the runtime and vectorized sections' main input size "
                                                "(default 4M)")
    ap.add_argument("--other-records", help="the runtime and vectorized sections' other sizes, comma-separated "
                                            "(default 1000000; empty: none)")
    ap.add_argument("--eventtime-records", type=int, help="override the eventtime section's input size (default 1M)")
    ap.add_argument("--aggregations-records", type=int,
                    help="override the aggregations section's input size (default 1M)")
    ap.add_argument("--join-records", type=int, help="override the join section's input size (default 1M)")
    ap.add_argument("--connectors-records", type=int, help="override the connectors section's size (default 1M)")
    ap.add_argument("--connectors", help="comma-separated subset of the connectors section's connectors (the "
                                         "file_source baseline always runs), e.g. nats_source,sql_sink")
    ap.add_argument("--state-keys", help="override the state section's key counts: HEAP_AND_ROCKSDB,ROCKSDB_ONLY "
                                         "(default 1000000,5000000)")
    ap.add_argument("--scale-sizes", help="override the scale curve's sizes, e.g. 500000,2000000,8000000")
    ap.add_argument("--merge", action="store_true",
                    help="keep the other sections of the existing DIR/report.json (each section records "
                         "the machine and commit it was measured on)")
    args = ap.parse_args(argv)
    args.sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(args.sections) - set(SECTIONS)
    if unknown:
        ap.error(f"unknown section(s) {sorted(unknown)}; choose from {','.join(SECTIONS)}")
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    selected_connectors(args.connectors)  # unknown names fail before Spark starts
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    sizes = dict(SIZES[args.quick])
    if args.records:
        sizes["runtime"] = args.records
    if args.other_records is not None:
        sizes["runtime_other"] = [int(n) for n in args.other_records.split(",") if n.strip()]
    if args.eventtime_records:
        sizes["eventtime"] = args.eventtime_records
    if args.join_records:
        sizes["join"] = args.join_records
    if args.connectors_records:
        sizes["connectors"] = args.connectors_records
    if args.aggregations_records:
        sizes["aggregations"] = args.aggregations_records
    if args.state_keys:
        sizes["state"] = [int(n) for n in args.state_keys.split(",")]
    if args.scale_sizes:
        sizes["scale"] = [int(n) for n in args.scale_sizes.split(",")]
    os.makedirs(args.out, exist_ok=True)
    # Python workers import the benchmark functions by module name.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    report = {"machine": machine_info(), "settings": {
        "quick": args.quick, "repeat": args.repeat, "parallelism": args.parallelism, "sections": args.sections,
        "sizes": sizes, "spark_master": f"local[{args.parallelism}]", "spark_conf": SPARK_CONF}}
    report["code"] = code_version()
    if args.merge:
        report = merged_base(args.out, report)
    tmp = tempfile.mkdtemp(prefix="flinkchain-bench-")
    failed = []
    spark = None
    started = time.time()

    def section(name, fn):
        if name not in args.sections:
            return
        print(f"[bench] {name} ...", flush=True)
        t = time.time()
        before = list(os.getloadavg())
        try:
            report[name] = fn()
        except Exception:  # noqa: BLE001 - one broken section must not lose the others' numbers
            failed.append(name)
            report[name] = {"error": traceback.format_exc()[-4000:]}
        if isinstance(report[name], dict):
            report[name].setdefault("repeat", args.repeat)
            report[name]["measured"] = {"date": machine_info()["date"], "commit": report["code"]["commit"],
                                        "load_average_before": before}
            report[name]["section_seconds"] = round(time.time() - t, 1)
            report[name]["load_average_after"] = list(os.getloadavg())
        write_report(report, args.out)  # a later section that never ends still leaves these numbers
        print(f"[bench] {name} done in {time.time() - t:.0f}s", flush=True)

    try:
        from benchmarks.bench_spark import write_input

        # P files: Spark reads them as P splits (no repartition), the subtasks read a file each
        inputs = {n: os.path.join(tmp, f"input_{n}") for n in [sizes["runtime"], *sizes["runtime_other"]]}
        input_path = inputs[sizes["runtime"]]
        if {"runtime", "vectorized", "scale", "flink"} & set(args.sections):  # the sections reading it
            write_input(input_path, sizes["runtime"], args.parallelism)
        if {"runtime", "vectorized"} & set(args.sections):
            for n in sizes["runtime_other"]:
                write_input(inputs[n], n, args.parallelism)
        if {"runtime", "vectorized", "aggregations", "scale", "eventtime", "join", "connectors"} & set(args.sections):
            from airflow_flinkchain.runtime.spark.session import get_or_create_spark

            spark = get_or_create_spark(master=f"local[{args.parallelism}]", app_name="flinkchain-bench",
                                        conf=SPARK_CONF)
            from benchmarks.bench_spark import run_runtime, run_scale

            def at_sizes(run):  # the main size's figures, the others' under at_other_sizes
                result = run(sizes["runtime"])
                result["at_other_sizes"] = {str(n): run(n) for n in sizes["runtime_other"]}
                result["baseline_note"] = BASELINE_NOTE
                return result

            section("runtime", lambda: at_sizes(lambda n: run_runtime(
                spark, tmp, n, args.parallelism, args.repeat, warmup=not args.quick, input_path=inputs[n])))
            from benchmarks.bench_vectorized import run_vectorized

            section("vectorized", lambda: at_sizes(lambda n: run_vectorized(
                spark, tmp, n, args.parallelism, args.repeat, warmup=not args.quick, input_path=inputs[n])))
            from benchmarks.bench_aggregations import run_aggregations

            section("aggregations", lambda: run_aggregations(spark, tmp, sizes["aggregations"], args.parallelism,
                                                             args.repeat, warmup=not args.quick,
                                                             stream_slices=sizes["stream_slices"]))
            section("scale", lambda: run_scale(spark, tmp, sizes["scale"], args.parallelism, args.repeat, inputs))
            from benchmarks.bench_eventtime import run_eventtime

            section("eventtime", lambda: run_eventtime(spark, tmp, sizes["eventtime"], args.parallelism, args.repeat,
                                                       warmup=not args.quick))
            if "join" in args.sections:
                from benchmarks.bench_join import run_join

                section("join", lambda: run_join(spark, tmp, sizes["join"], args.parallelism, args.repeat,
                                                 warmup=not args.quick))
            from benchmarks.bench_connectors import run_connectors

            section("connectors", lambda: run_connectors(spark, tmp, sizes["connectors"], args.parallelism,
                                                         warmup=not args.quick,
                                                         connectors=selected_connectors(args.connectors)))
            spark.stop()
            spark = None
        from benchmarks.bench_state import run_state

        section("state", lambda: run_state(tmp, *sizes["state"]))
        from benchmarks.bench_flink import run_flink

        section("flink", lambda: run_flink(input_path, sizes["runtime"], args.parallelism, args.repeat, tmp))
        from benchmarks.bench_parse import run_parse

        section("parse", lambda: run_parse(tmp, sizes["operators"], args.repeat))
        from benchmarks.bench_airflow_e2e import run_airflow

        section("airflow", lambda: run_airflow(tmp, sizes["airflow"], args.repeat))
        from benchmarks.bench_stream_fixed_cost import run_stream_fixed_cost

        section("stream_run_fixed_cost", lambda: run_stream_fixed_cost(tmp, sizes["stream_runs"]))
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    report["machine"]["load_average_at_end"] = list(os.getloadavg())
    report["total_seconds"] = round(time.time() - started, 1)
    report["targets"] = {k: report[k].get("meets_target") for k in ("runtime", "vectorized", "aggregations", "airflow",
                                                                      "parse", "eventtime", "stream_run_fixed_cost")
                         if isinstance(report.get(k), dict) and "error" not in report[k]}
    if isinstance(report.get("runtime"), dict) and "pipelines" in report["runtime"]:
        report["targets"]["runtime"] = {k: v["meets_target"] for k, v in report["runtime"]["pipelines"].items()}
    from benchmarks.bench_plots import write_plots

    report["plots"] = write_plots(report, args.out)
    write_report(report, args.out)
    print(summary(report))
    print(f"[bench] wrote {os.path.join(args.out, 'report.json')} and {', '.join(report['plots']) or 'no plots'}")
    if failed:
        print(f"[bench] FAILED sections: {', '.join(failed)} (tracebacks in report.json)", file=sys.stderr)
    return 1 if failed else 0


def selected_connectors(names):
    """The connectors section's entries named in `names` (comma-separated; None: all), the
    file_source baseline first."""
    from benchmarks.bench_connectors import CONNECTORS

    if not names:
        return CONNECTORS
    wanted = {n.strip() for n in names.split(",") if n.strip()}
    unknown = wanted - {c.name for c in CONNECTORS}
    if unknown:
        raise SystemExit(f"unknown connector(s) {sorted(unknown)}; choose from {[c.name for c in CONNECTORS]}")
    return tuple(c for c in CONNECTORS if c.name == "file_source" or c.name in wanted)


def merged_base(out: str, fresh: dict) -> dict:
    """The existing report with this run's settings: sections not re-run are kept as measured."""
    path = os.path.join(out, "report.json")
    if not os.path.exists(path):
        return fresh
    with open(path) as fh:
        old = json.load(fh)
    kept = [s for s in SECTIONS if s in old and s not in fresh["settings"]["sections"]]
    base = {k: v for k, v in old.items() if k in kept}
    earlier = old.get("settings", {}).get("merged_from_earlier_run", {})
    fresh["settings"]["merged_from_earlier_run"] = {
        s: earlier.get(s) or (base[s].get("measured") or {}).get("commit") or old.get("code", {}).get("commit")
        for s in kept}
    for s in kept:  # the number of runs behind each kept figure
        if isinstance(base[s], dict):
            base[s].setdefault("repeat", old.get("settings", {}).get("repeat"))
    ran = set(fresh["settings"]["sections"])
    # the sections each size is for, where not the section of its name
    sections_of = {"operators": {"parse"}, "runtime": {"runtime", "vectorized", "scale", "flink"},
                   "runtime_other": {"runtime", "vectorized"}, "stream_slices": {"aggregations"},
                   "stream_runs": {"stream_run_fixed_cost"}}
    run_sizes = {k: v for k, v in fresh["settings"]["sizes"].items() if sections_of.get(k, {k}) & ran}
    fresh["settings"]["sizes"] = {**old.get("settings", {}).get("sizes", {}), **run_sizes}  # kept sections' own
    return {**fresh, **base}


def write_report(report: dict, out: str) -> None:
    tmp = os.path.join(out, "report.json.tmp")
    with open(tmp, "w") as fh:
        json.dump(report, fh, indent=2, sort_keys=False)
        fh.write("\n")
    os.replace(tmp, os.path.join(out, "report.json"))


def code_version() -> dict:
    """The commit measured, and the files under airflow_flinkchain/ and benchmarks/ that differ from it."""
    import subprocess

    def git(*a):
        r = subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True)
        return r.stdout.rstrip() if r.returncode == 0 else None

    dirty = git("status", "--porcelain", "--", "airflow_flinkchain", "benchmarks")
    return {"commit": (git("rev-parse", "HEAD") or "").strip() or None, "uncommitted": dirty.splitlines() if dirty else []}


def summary(report: dict) -> str:
    lines = []
    rt = report.get("runtime")
    if isinstance(rt, dict) and "pipelines" in rt:
        for shape, d in rt["pipelines"].items():
            lines.append(f"runtime {shape} ({rt['records']:,} records): " + ", ".join(
                f"{v} {s['median']:,.0f}/s" for v, s in d["records_per_s"].items())
                + f" | chain/fused {d['ratios']['chain_over_fused']:.2f} (target >= {d['target_chain_over_fused']}), "
                f"chain/pyarrow tasks {d['ratios'].get('chain_over_pyarrow', float('nan')):.2f}")
    vc = report.get("vectorized")
    if isinstance(vc, dict) and "ratios" in vc:
        lines.append(f"vectorized ({vc['records']:,} records): " + ", ".join(
            f"{v} {s['median']:,.0f}/s" for v, s in vc["records_per_s"].items())
            + f" | vectorized/native {vc['ratios']['vectorized_over_native']:.2f} (target >= {vc['target_vectorized_over_native']})")
    ag = report.get("aggregations")
    if isinstance(ag, dict) and "ratios" in ag:
        lines.append(f"aggregations ({ag['records']:,} records): " + ", ".join(
            f"{v} {s['median']:,.0f}/s" for v, s in ag["records_per_s"].items())
            + " | " + ", ".join(f"{k} {r:.2f}" for k, r in ag["ratios"].items())
            + f" | equal to Spark: {all(ag['results_equal_spark'].values())}")
        sr = ag.get("stream_runs", {})
        if "stream_runs" in sr:
            ours, theirs = sr["stream_runs"], sr["spark_available_now"]
            lines.append(f"aggregations, {sr['slices']} stream runs + drain: {ours['total_seconds']:.1f}s total, "
                         f"{ours['seconds_per_run']:.2f}s per run, drain {sr['drain_seconds']:.2f}s | Spark "
                         f"AvailableNow x{sr['slices']}: {theirs['total_seconds']:.1f}s total, "
                         f"{theirs['seconds_per_run']:.2f}s per run | records/s ours/Spark "
                         f"{sr['ratio_stream_runs_over_spark_available_now']:.2f} | results equal")
    sc = report.get("scale")
    if isinstance(sc, dict) and "points" in sc:
        for p in sc["points"]:
            lines.append(f"scale {p['records']:>10,}: chain {p['chain']['records_per_s']['median']:,.0f}/s "
                         f"rss {p['chain']['peak_worker_rss_bytes'] / 2**20:.0f} MiB, fused "
                         f"{p['fused']['records_per_s']['median']:,.0f}/s "
                         f"rss {p['fused']['peak_worker_rss_bytes'] / 2**20:.0f} MiB")
    pc = report.get("parse")
    if isinstance(pc, dict) and "seconds" in pc:
        lines.append(f"parse: baseline {pc['seconds']['baseline']['median']:.2f}s, with pipeline "
                     f"{pc['seconds']['with_pipeline']['median']:.2f}s, +{pc['extra_seconds']:.2f}s (target < 1 s)")
    af = report.get("airflow")
    if isinstance(af, dict) and "seconds" in af:
        lines.append(f"airflow: chained {af['seconds']['chained']['median']:.1f}s, unchained "
                     f"{af['seconds']['unchained']['median']:.1f}s, ratio {af['ratio_unchained_over_chained']:.2f}x "
                     f"(target >= 3x)")
    et = report.get("eventtime")
    if isinstance(et, dict) and "records_per_s" in et:
        rates = et["records_per_s"]
        lines.append(f"eventtime ({et['records']:,} records): " + ", ".join(
            f"{v} {rates[v]['median']:,.0f}/s" for v in rates)
            + " | over reduce_batch: " + ", ".join(f"{k.split('_over_')[0]} {r:.2f}" for k, r in et["ratios"].items())
            + f" (target >= {et['target_ratio']:.2f})")
        fe = et.get("flink", {})
        lines.append(f"eventtime PyFlink window: {fe['records_per_s']['median']:,.0f}/s" if "records_per_s" in fe
                     else f"eventtime PyFlink window: {fe.get('status')}")
    fl = report.get("flink")
    if isinstance(fl, dict) and "records_per_s" in fl:
        lines.append(f"flink: PyFlink {fl['apache_flink']} {fl['records_per_s']['median']:,.0f}/s "
                     f"({fl['records']:,} records)")
    elif isinstance(fl, dict):
        lines.append(f"flink: {fl.get('status', 'error')}")
    st = report.get("state")
    if isinstance(st, dict) and "runs" in st:
        from benchmarks.bench_state import summary_lines

        lines.extend(summary_lines(st))
    cn = report.get("connectors")
    if isinstance(cn, dict) and "connectors" in cn:
        from benchmarks.bench_connectors import summary_line

        lines.append(summary_line(cn))
    fc = report.get("stream_run_fixed_cost")
    if isinstance(fc, dict) and "stream_run_seconds" in fc:
        from benchmarks.bench_stream_fixed_cost import summary_line as fixed_cost_line

        lines.append(fixed_cost_line(fc))
    jn = report.get("join")
    if isinstance(jn, dict) and "records_per_s" in jn:
        lines.append(f"join ({jn['records']:,} records): " + ", ".join(
            f"{v} {s['median']:,.0f}/s" for v, s in jn["records_per_s"].items()))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
