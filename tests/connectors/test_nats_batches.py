"""NatsJetStreamSource's batched reads against a real NATS JetStream server: pull requests
smaller than a run's range, requests cut by their byte limit (also a message larger than
the limit), a range ending inside a fetched batch, messages with headers among plain ones,
the value formats, and stream runs with small requests losing and duplicating nothing."""

from __future__ import annotations

import json

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io.sources import NatsJetStreamSource
from airflow_flinkchain.runtime.connectors import nats_jetstream
from airflow_flinkchain.runtime.connectors.nats_jetstream import NatsJetStreamSplits
from airflow_flinkchain.runtime.pipeline_run import ChainRunError
from tests.connectors.nats_server import NATS_URL, nats_stream  # noqa: F401  (fixture)


@pytest.fixture
def small_requests(monkeypatch):
    """Pull requests of 7 messages at most, fewer for messages of more than 40 bytes: a run's
    range takes many of them."""
    monkeypatch.setattr(nats_jetstream, "FETCH_BATCH", 7)
    monkeypatch.setattr(nats_jetstream, "FETCH_BYTES", 280)


def splits(stream, **kw) -> NatsJetStreamSplits:
    return NatsJetStreamSplits(NatsJetStreamSource(servers=NATS_URL, stream=stream.name, **kw))


def subject(stream, leaf: str) -> str:
    return stream.subjects[0].replace(">", leaf)


def test_a_range_read_in_many_requests_gives_each_message_once_in_order(nats_stream, small_requests):
    nats_stream.publish([{"i": i, "pad": "x" * (i % 5) * 20} for i in range(60)], subject(nats_stream, "a"))
    nats_stream.publish_payloads([json.dumps({"i": 60, "pad": "y" * 1000}).encode()],  # > the request's bytes
                                 subject(nats_stream, "a"))
    nats_stream.publish([{"i": i, "pad": ""} for i in range(61, 75)], subject(nats_stream, "a"))
    s = splits(nats_stream)
    end = s.discover({})[nats_stream.name]
    assert end == 76
    records = list(s.read_split(nats_stream.name, 1, end))
    assert [r.value["i"] for r in records] == list(range(75))
    assert all(isinstance(r.timestamp, int) for r in records)
    assert [r.value["i"] for r in s.read_split(nats_stream.name, 30, 47)] == list(range(29, 46))


def test_a_range_ending_inside_a_fetched_batch_stops_at_its_end(nats_stream):
    """Subject-filtered splits fetch up to the range's length of matching messages; those at or
    past the range's end (published after the run began) are not the run's."""
    eu, us = subject(nats_stream, "eu"), subject(nats_stream, "us")
    for k in range(10):
        nats_stream.publish([{"eu": k}], eu)
        nats_stream.publish([{"us": k}], us)
    s = splits(nats_stream, subjects=(eu, us))
    # sequences: eu at 1, 3, 5, ..., us at 2, 4, 6, ...
    assert [r.value for r in s.read_split(eu, 1, 8)] == [{"eu": k} for k in range(4)]
    assert [r.value for r in s.read_split(us, 5, 13)] == [{"us": k} for k in range(2, 6)]
    assert [r.value for r in s.read_split(eu, 19, 21)] == [{"eu": 9}]
    assert list(s.read_split(us, 21, 30)) == []  # nothing there yet


def test_messages_with_headers_are_read_in_order_among_plain_ones(nats_stream, small_requests):
    a = subject(nats_stream, "a")
    nats_stream.publish([{"i": 0}, {"i": 1}], a)
    nats_stream.publish_payloads([b'{"i": 2}', b'{"i": 3}'], a, headers={"Trace": "t-1"})
    nats_stream.publish([{"i": i} for i in range(4, 12)], a)
    s = splits(nats_stream)
    assert [r.value["i"] for r in s.read_split(nats_stream.name, 1, 13)] == list(range(12))


@pytest.mark.parametrize("fmt, want", [
    ("json", [{"a": 1}, [1, "\t\n"], "text", None, 2.5, {"a": 1}]),
    ("string", ['{"a":1}', '[1,"\\t\\n"]', '"text"', "null", "2.5", ' {"a": 1} ']),
    ("bytes", [b'{"a":1}', b'[1,"\\t\\n"]', b'"text"', b"null", b"2.5", b' {"a": 1} ']),
])
def test_value_formats(nats_stream, fmt, want):
    nats_stream.publish_payloads([b'{"a":1}', b'[1,"\\t\\n"]', b'"text"', b"null", b"2.5", b' {"a": 1} '],
                                 subject(nats_stream, "a"))
    assert [r.value for r in splits(nats_stream, value_format=fmt).read_split(nats_stream.name, 1, 7)] == want


def test_a_payload_that_is_not_json_fails_naming_its_sequence(nats_stream, small_requests):
    nats_stream.publish([{"i": i} for i in range(9)], subject(nats_stream, "a"))
    nats_stream.publish_payloads([b"{not json"], subject(nats_stream, "a"))
    with pytest.raises(ValueError, match=r"message 10 is not JSON.*value_format='string' or 'bytes'"):
        list(splits(nats_stream).read_split(nats_stream.name, 1, 11))


def test_stream_runs_with_small_requests_read_each_message_once(tmp_path, nats_stream, small_requests):
    a = subject(nats_stream, "a")
    ckpt = str(tmp_path / "ckpt")

    def run(run_id):
        p = StreamPipeline("batches", runtime_mode="streaming", checkpoint_dir=ckpt)
        p.from_source(NatsJetStreamSource(servers=NATS_URL, stream=nats_stream.name), name="log").uid("log") \
            .map(lambda r: r["i"]).collect("out")
        return p.execute_local(run_id=run_id)

    outputs = []
    for lo, hi in ((0, 23), (23, 24), (24, 24), (24, 61)):
        nats_stream.publish([{"i": i} for i in range(lo, hi)], a)
        outputs.append(run(f"r{lo}-{hi}"))
    assert [o.output("out") for o in outputs] == [list(range(23)), [23], [], list(range(24, 61))]
    assert outputs[-1].stream["sources"]["log"] == {"splits": {nats_stream.name: 62}}


def test_a_run_failing_mid_batch_commits_nothing_and_its_retry_reads_the_same_messages(tmp_path, nats_stream,
                                                                                       small_requests):
    a = subject(nats_stream, "a")
    ckpt = str(tmp_path / "ckpt")
    nats_stream.publish([{"i": i} for i in range(30)], a)

    def run(run_id, fail_at=None):
        def check(r):
            if r["i"] == fail_at:
                raise RuntimeError("boom")
            return r["i"]

        p = StreamPipeline("retry", runtime_mode="streaming", checkpoint_dir=ckpt)
        p.from_source(NatsJetStreamSource(servers=NATS_URL, stream=nats_stream.name), name="log").uid("log") \
            .map(check).collect("out")
        return p.execute_local(run_id=run_id)

    with pytest.raises(ChainRunError, match="boom"):
        run("r1", fail_at=17)  # inside the third request of 7
    nats_stream.publish([{"i": i} for i in range(30, 33)], a)
    assert run("r1").output("out") == list(range(33))
    assert run("r2").output("out") == []
