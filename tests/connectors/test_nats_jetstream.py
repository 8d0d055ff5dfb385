"""NatsJetStreamSource against a real NATS JetStream server: N runs with messages published
between them plus a drain equal one STREAMING run over the whole stream, also when runs are
SIGKILLed and retried; message timestamps are record timestamps; clear errors."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.common import WatermarkStrategy
from airflow_flinkchain.io.sources import NatsJetStreamSource
from airflow_flinkchain.runtime.pipeline_run import ChainRunError
from tests.conformance_cases import WithTimestamp, as_multiset, sum_values, window_assigner
from tests.connectors.nats_server import NATS_URL, nats_stream, require_nats  # noqa: F401  (fixture)
from tests.streamruns.cases import FailOn, SINKS, build, collected, differences, make_records, slices

REPO = Path(__file__).resolve().parents[2]


def source_of(stream, **kw) -> NatsJetStreamSource:
    return NatsJetStreamSource(servers=NATS_URL, stream=stream.name, **kw)


def reference(stream) -> dict:
    """One STREAMING run, without a checkpoint_dir, over everything in the stream."""
    result = build("whole", None, source=source_of(stream)).execute_local()
    return {s: as_multiset(result.output(s)) for s in SINKS}


@pytest.mark.parametrize("n", [3])
def test_n_runs_with_messages_published_between_and_a_drain_equal_one_streaming_run(tmp_path, nats_stream, n):
    records, ckpt = make_records(seed=13), str(tmp_path / "ckpt")
    subject = nats_stream.subjects[0].replace(">", "orders")
    results = []
    for k, part in enumerate(slices(records, n)):
        nats_stream.publish(part, subject)
        results.append(build("nats", None, ckpt, source=source_of(nats_stream)).execute_local(run_id=f"run-{k}"))
        assert results[-1].stream["sources"]["log"] == {"splits": {nats_stream.name: sum(
            len(p) for p in slices(records, n)[:k + 1]) + 1}}
    results.append(build("nats", None, ckpt, source=source_of(nats_stream)).execute_local(run_id="drain",
                                                                                         drain=True))
    want = reference(nats_stream)
    assert sum(want["rolling"].values()) == len(records)
    assert differences(collected(results), want) == []


def test_subject_splits_are_read_in_parallel_each_message_once(tmp_path, nats_stream):
    base = nats_stream.subjects[0][:-1]
    eu, us = base + "eu", base + "us"
    source = source_of(nats_stream, subjects=(eu, us))
    ckpt = str(tmp_path / "ckpt")

    def run(run_id):
        p = StreamPipeline("subjects", runtime_mode="streaming", checkpoint_dir=ckpt)
        p.from_source(source, name="orders").uid("orders").set_parallelism(2).map(tuple).collect("out")
        return p.execute_local(run_id=run_id)

    nats_stream.publish([("eu", i) for i in range(3)], eu)
    nats_stream.publish([("us", i) for i in range(2)], us)
    first = run("r1")
    nats_stream.publish([("us", i) for i in range(2, 6)], us)
    nats_stream.publish([("other", 0)], base + "other")  # in the stream, matched by no filter
    second = run("r2")
    third = run("r3")
    assert sorted(first.output("out")) == [("eu", 0), ("eu", 1), ("eu", 2), ("us", 0), ("us", 1)]
    assert sorted(second.output("out")) == [("us", i) for i in range(2, 6)]
    assert third.output("out") == []
    assert third.stream["sources"]["orders"] == {"splits": {eu: 11, us: 11}}


def test_message_timestamp_is_the_record_timestamp(tmp_path, nats_stream):
    """A WatermarkStrategy without a timestamp assigner uses the JetStream timestamps."""
    subject = nats_stream.subjects[0].replace(">", "ticks")
    ckpt = str(tmp_path / "ckpt")

    def pipeline(checkpoint_dir=None):
        p = StreamPipeline("ticks", runtime_mode="streaming", checkpoint_dir=checkpoint_dir)
        s = p.from_source(source_of(nats_stream), name="ticks").uid("ticks").set_parallelism(1)
        s = s.assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps()).uid("wm")
        s.process(WithTimestamp()).name("stamp").collect("stamped")
        w = s.map(tuple).key_by(lambda r: r[0]).window(window_assigner(["tumbling", 40])).reduce(sum_values)
        w.uid("win").process(WithTimestamp()).name("win.stamp").collect("windows")
        return p

    before = int(time.time() * 1000)
    runs = []
    for k in range(3):
        nats_stream.publish([("a", k, 0), ("b", k, 0)], subject)
        time.sleep(0.05)
        runs.append(pipeline(ckpt).execute_local(run_id=f"r{k}"))
    runs.append(pipeline(ckpt).execute_local(run_id="drain", drain=True))
    after = int(time.time() * 1000)
    stamped = [r for res in runs for r in res.output("stamped")]
    assert len(stamped) == 6 and all(before - 1000 <= ts <= after + 1000 for _v, ts in stamped)
    whole = pipeline().execute_local()
    assert as_multiset(stamped) == as_multiset(whole.output("stamped"))
    assert as_multiset([r for res in runs for r in res.output("windows")]) == as_multiset(whole.output("windows"))


KILL_SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
from airflow_flinkchain.io.sources import NatsJetStreamSource
from tests.streamruns.cases import FailOn, build
source = NatsJetStreamSource(servers={url!r}, stream={stream!r})
build("p", None, {ckpt!r}, fail=FailOn({marker!r}, {value!r}, kill=True), source=source).execute_local(
    run_id={run_id!r}, drain={drain!r})
"""


def test_runs_killed_at_random_points_and_retried_lose_and_duplicate_nothing(tmp_path, nats_stream):
    """Each run's first attempt is SIGKILLed (a process of its own) on a record chosen at
    random; the retry (same run id, or the drain) restarts from the last committed checkpoint."""
    records, ckpt, marker = make_records(seed=17), str(tmp_path / "ckpt"), tmp_path / "kill-now"
    subject = nats_stream.subjects[0].replace(">", "orders")
    rng = random.Random(5)
    parts = slices(records, 3)
    fail = FailOn(str(marker), -1, kill=True)
    results = []
    for k, part in enumerate(parts):
        drain = k == len(parts) - 1  # the last slice goes to the drain run
        nats_stream.publish(part, subject)
        value = rng.choice(part)[1]  # a record this run reads
        marker.write_text("")
        script = KILL_SCRIPT.format(repo=str(REPO), url=NATS_URL, stream=nats_stream.name, ckpt=ckpt,
                                    marker=str(marker), value=value, run_id=f"r{k}", drain=drain)
        proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, timeout=300)
        assert proc.returncode == -9, proc.stderr.decode()[-2000:]
        marker.unlink()
        results.append(build("p", None, ckpt, fail=fail, source=source_of(nats_stream)).execute_local(
            run_id=f"r{k}", drain=drain))
    assert differences(collected(results), reference(nats_stream)) == []


def test_unreachable_server_fails_naming_the_source(tmp_path):
    require_nats()
    p = StreamPipeline("down", runtime_mode="streaming", checkpoint_dir=str(tmp_path / "ckpt"))
    p.from_source(NatsJetStreamSource(servers="nats://127.0.0.1:1", stream="ORDERS"), name="orders").collect("o")
    with pytest.raises(ChainRunError, match=r"source 'orders'.*cannot connect to the NATS server.*nats-server"):
        p.execute_local(run_id="r1")


def test_missing_stream_fails_naming_the_source_and_the_stream(tmp_path):
    require_nats()
    p = StreamPipeline("missing", runtime_mode="streaming", checkpoint_dir=str(tmp_path / "ckpt"))
    p.from_source(NatsJetStreamSource(servers=NATS_URL, stream="NO_SUCH_STREAM"), name="orders").collect("o")
    with pytest.raises(ChainRunError, match=r"source 'orders'.*stream 'NO_SUCH_STREAM' does not exist"):
        p.execute_local(run_id="r1")
    assert not (tmp_path / "ckpt" / "_latest.json").exists()
