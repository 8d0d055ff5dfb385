"""Stream runs on Spark (`execute()`): the same guarantee, with the parallelism changed
between runs and a file sink published per committed run."""

from __future__ import annotations

import json

from tests.conformance_cases import as_multiset
from tests.streamruns.cases import build, collected, differences, make_records, reference, slices
from tests.streamruns.partitioned_log import append

SINKS = ("tumbling", "session", "bucket")


def test_stream_runs_on_spark_equal_one_streaming_run(spark, tmp_path):
    records = make_records(n=120, seed=13)
    want = reference(tmp_path, records, SINKS)
    log, ckpt, out = str(tmp_path / "log"), str(tmp_path / "ckpt"), tmp_path / "files"
    results = []
    for k, part in enumerate(slices(records, 2)):
        append(log, "p0", part)
        p = build("spark-stream", log, ckpt, parallelism=(2, 3)[k], sinks=SINKS, file_sink=str(out))
        results.append(p.execute(spark=spark, run_id=f"r{k}"))
    p = build("spark-stream", log, ckpt, parallelism=2, sinks=SINKS, file_sink=str(out))
    results.append(p.execute(spark=spark, run_id="drain", drain=True))
    assert differences(collected(results, SINKS), want) == []
    assert [r.stream["seq"] for r in results] == [1, 2, 3]
    rows = [tuple(json.loads(line)) for f in sorted(out.glob("*.json")) for line in f.read_text().splitlines()]
    assert as_multiset(rows) == as_multiset([v for v, _ts in want["tumbling"].elements()])
