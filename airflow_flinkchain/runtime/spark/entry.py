"""The `spark-submit` application of a chain task: runs one chain of a serialized plan.

    spark-submit [spark options] airflow_flinkchain/runtime/spark/entry.py \\
        --plan PATH --chain ID --run-id RID --exchange-root ROOT \\
        [--dag-id D] [--attempt-id A] [--overrides JSON|@file] [--metrics-out PATH]
        [--checkpoint-dir DIR]

Starts (or gets) the SparkSession - the master comes from spark-submit -, runs
`run_chain` (in a stream run, with `--checkpoint-dir`: as part of the run that
`begin_stream_run` recorded there for RID) and leaves the metrics JSON at
`{exchange_root}/{dag_id}/{run_id}/_metrics/{chain_id}.json` (see ExchangeArea; also on failure,
with state "failed" and the error; and at --metrics-out when given). Schema:
  {"pipeline", "dag_id", "run_id", "chain", "attempt", "spark_app_id", "state":
   "success"|"failed", "error": str|null, "started_at", "ended_at" (UTC ISO),
   "operators": [{"node_id", "key", "name", "subtask", "side_outputs": {tag: n},
                  and one number per counter of metrics_schema.COUNTERS}],
   "outputs": [{"edge": id | "sink": node key, "kind", "path", "records"}]}
Exit status 0 on success; on failure 1, with the error (naming the operator)
printed as the last line on stderr. The metrics JSON is printed on stdout just
before. Note: under spark-submit the Python driver's stdout and stderr both
reach spark-submit's stdout (Spark's PythonRunner merges them), so there the
error is the last line of spark-submit's stdout and the metrics JSON the line
before it; Spark's own log lines go to spark-submit's stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Optional


def parse_args(argv: Optional[list] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="entry.py", description="Run one chain of a flinkchain plan on Spark.")
    p.add_argument("--plan", required=True, help="serialized plan (runtime.spark.plan_file.dump_plan)")
    p.add_argument("--chain", required=True, help="chain id")
    p.add_argument("--run-id", required=True)
    p.add_argument("--exchange-root", required=True, help="local path or URI shared by driver and executors")
    p.add_argument("--dag-id", default=None, help="default: the pipeline name")
    p.add_argument("--attempt-id", default=None, help="default: a fresh id")
    p.add_argument("--overrides", default=None, help='JSON {node_key: {"path": rendered}} or @file')
    p.add_argument("--metrics-out", default=None, help="also write the metrics JSON here")
    p.add_argument("--checkpoint-dir", default=None,
                   help="a stream run's checkpoint_dir (the run was begun by begin_stream_run)")
    return p.parse_args(argv)


def _overrides(text: Optional[str]) -> dict:
    if not text:
        return {}
    if text.startswith("@"):
        with open(text[1:]) as f:
            text = f.read()
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"--overrides must be a JSON object, got {text[:100]!r}")
    return value


def main(argv: Optional[list] = None) -> int:
    args = parse_args(argv)
    from airflow_flinkchain.runtime.core.timings import Marks, process_start_time
    from airflow_flinkchain.runtime.spark.session import launched_by_spark_submit

    # the JVM spark-submit started is this driver's parent (Spark's PythonRunner)
    marks = Marks(driver_started=process_start_time(),
                  submit_started=process_start_time(os.getppid()) if launched_by_spark_submit() else None)
    from airflow_flinkchain.runtime.core.metrics import utc_now_iso
    from airflow_flinkchain.runtime.exchange.layout import ExchangeArea, Location
    from airflow_flinkchain.runtime.spark.job import ChainRunError, run_chain

    started = utc_now_iso()
    doc = None
    spark = None
    error = None
    try:
        from airflow_flinkchain.runtime.spark.plan_file import load_plan
        from airflow_flinkchain.runtime.spark.session import get_or_create_spark

        marks.mark("imported")
        job = load_plan(args.plan)
        marks.mark("plan_loaded")
        spark = get_or_create_spark(app_name=f"flinkchain {args.dag_id or job.pipeline} {args.chain}")
        marks.mark("session_ready")
        stream_run = None
        if args.checkpoint_dir:
            from airflow_flinkchain.runtime.stream_run import StreamRun

            stream_run = StreamRun.open(args.checkpoint_dir, args.run_id)
        result = run_chain(spark, job, args.chain, args.run_id, args.exchange_root, dag_id=args.dag_id,
                           attempt_id=args.attempt_id, overrides=_overrides(args.overrides), stream_run=stream_run,
                           marks=marks)
        doc = result.metrics
    except ChainRunError as exc:
        error, doc = str(exc), exc.metrics
    except Exception as exc:  # failed before the chain ran (plan, session, arguments)
        error = f"chain {args.chain!r} could not start: {type(exc).__name__}: {exc}"
    if doc is None:
        doc = {"pipeline": None, "dag_id": args.dag_id, "run_id": args.run_id, "chain": args.chain,
               "attempt": args.attempt_id, "spark_app_id": spark.sparkContext.applicationId if spark else None,
               "state": "failed", "error": error, "started_at": started,
               "ended_at": utc_now_iso(), "operators": [], "outputs": []}
        if args.dag_id:
            try:
                ExchangeArea(args.exchange_root, args.dag_id, args.run_id).metrics(args.chain).write_text(
                    json.dumps(doc, indent=1))
            except Exception as exc:  # the root itself may be the problem; stderr still tells
                print(f"could not write the metrics file: {exc}", file=sys.stderr)
    text = json.dumps(doc, default=str)
    if args.metrics_out:
        Location(args.metrics_out).write_text(text)
    print(text)
    sys.stdout.flush()
    if spark is not None:
        spark.stop()
    if error:
        # spark-submit merges the Python driver's stderr into its stdout (PythonRunner):
        # the error is the last line of stderr when run directly, of stdout under spark-submit
        print(f"flinkchain chain {args.chain!r} failed: {error}", file=sys.stderr)
        sys.stderr.flush()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
