"""Issue 6, "failures inside a chain" and (runtime side) "retries and clears".

An exception in the head, middle or tail operator of a chain, in open, while
processing or in close, on a real local Spark run: the chain attempt fails with
an error naming operator, chain, subtask (and record); every opened function of
the subtask is closed by dispose, tail to head; nothing of the failed attempt is
visible (exchange dataset, collect, Parquet/CSV/JSON files, SQL table); the
retry of the failed chain gives exactly the output of a clean run; a downstream
chain never reads a failed or another run's upstream data."""

from __future__ import annotations

import os

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io import CsvSink, JsonLinesSink, ParquetSink, SqlSink
from airflow_flinkchain.runtime.exchange.dataset import merged_input, open_channel
from airflow_flinkchain.runtime.exchange.layout import ExchangeArea
from airflow_flinkchain.runtime.spark.local import execute_pipeline, render_overrides, template_context
from airflow_flinkchain.runtime.spark.job import ChainRunError, run_chain

from .helpers import Probe, csv_rows, events, json_rows, multiset, parquet_rows, sql_rows, table_exists, tree

pytestmark = pytest.mark.spark
OPS = ["head", "middle", "tail"]
N = 20


def probe_pipeline(tmp, fail_at=None, fail_in=None, trigger=None) -> StreamPipeline:
    logs = tmp / "logs"
    logs.mkdir(exist_ok=True)
    out = tmp / "out"
    p = StreamPipeline("faults_chain", parallelism=2, runtime_mode="batch")
    s = p.from_collection([{"n": i} for i in range(N)]).name("numbers").rebalance()
    for name in OPS:
        s = s.map(Probe(name, str(logs), fail_in if name == fail_at else None, trigger=trigger)).name(name)
    s.sink_to(ParquetSink(str(out / "{{ run_id }}" / "pq"), output_type={"n": "int64"}), name="pq_sink")
    s.sink_to(CsvSink(str(out / "{{ run_id }}" / "csv")), name="csv_sink")
    s.sink_to(JsonLinesSink(str(out / "{{ run_id }}" / "json")), name="json_sink")
    s.sink_to(SqlSink("numbers", url=f"sqlite:///{tmp / 'db.sqlite'}"), name="sql_sink")
    s.key_by(lambda r: r["n"] % 3).reduce(lambda a, b: {"n": a["n"] + b["n"]}).name("sum").collect("sums")
    return p


def expected_events(fail_at: int, phase: str, failing: bool) -> list[str]:
    opens = [f"open {OPS[j]}" for j in reversed(range(3))]
    if not failing:
        return opens + [f"close {o}" for o in OPS]
    if phase == "open":  # opened tail .. failing one; dispose closes them tail to head
        opened = [OPS[j] for j in reversed(range(fail_at, 3))]
        return [f"open {o}" for o in opened] + [f"close {o}" for o in opened]
    if phase == "process":
        return opens + [f"close {OPS[j]}" for j in reversed(range(3))]
    # close: head .. failing one closed in the close phase, the rest by dispose, tail to head
    return opens + [f"close {OPS[j]}" for j in range(fail_at + 1)] + \
        [f"close {OPS[j]}" for j in reversed(range(fail_at + 1, 3))]


def exchange_multiset(area: ExchangeArea, edge_id: str, channels: int, upstream: int) -> dict:
    return {k: multiset(el for el in merged_input(open_channel(area.edge(edge_id), edge_id, k, upstream)))
            for k in range(channels)}


def outputs_of(tmp, root, run_id, job) -> dict:
    area = ExchangeArea(root, job.pipeline, run_id)
    middle = job.chains[1]
    (edge_id,) = middle.out_edges
    out = tmp / "out" / run_id
    return {
        "exchange": exchange_multiset(area, edge_id, job.chain(job.edge(edge_id).target).parallelism, 2),
        "pq": parquet_rows(str(out / "pq")),
        "csv": csv_rows(str(out / "csv")),
        "json": json_rows(str(out / "json")),
        "sql": sql_rows(str(tmp / "db.sqlite"), "numbers", run_id),
        "sums": multiset(__import__("airflow_flinkchain.runtime.exchange.dataset", fromlist=["read_records"])
                         .read_records(area.collect("sums"), "collect:sums")),
    }


@pytest.mark.parametrize("phase", ["open", "process", "close"])
@pytest.mark.parametrize("fail_at", [0, 1, 2], ids=OPS)
def test_failure_in_any_operator_and_phase(spark, tmp_path, fail_at, phase):
    trigger = tmp_path / "fail.now"
    trigger.touch()
    p = probe_pipeline(tmp_path, OPS[fail_at], phase, trigger=str(trigger))
    job = p.plan()
    assert [c.name for c in job.chains][1].startswith("head -> middle -> tail")
    root = str(tmp_path / "exchange")
    with pytest.raises(ChainRunError) as info:
        execute_pipeline(p, spark=spark, exchange_root=root, run_id="r1")
    msg = str(info.value)
    chain = job.chains[1]
    assert f"operator {OPS[fail_at]!r} in chain {chain.name!r}, subtask " in msg, msg
    assert f"during {phase}" in msg, msg
    if phase == "process":
        assert "ValueError: " in msg and "record: {'n': 7}" in msg and "on_error" in msg, msg
    failing_subtask = int(msg.split(", subtask ")[1].split(",")[0])

    # dispose closed every opened function, tail to head, on every subtask
    got = events(str(tmp_path / "logs"))
    assert sorted(got) == [0, 1]
    for k, seq in got.items():
        failing = phase != "process" or k == failing_subtask
        assert seq == expected_events(fail_at, phase, failing), (k, seq)

    # nothing of the failed attempt is visible
    area = ExchangeArea(root, job.pipeline, "r1")
    (edge_id,) = chain.out_edges
    assert not area.edge(edge_id).exists()
    assert not area.collect("sums").exists()
    assert not area.run.join("_attempts").exists()
    assert area.edge(job.chains[0].out_edges[0]).exists()  # the upstream chain's commit stays
    assert [f for f in tree(str(tmp_path / "out")) if os.path.isfile(tmp_path / "out" / f)] == []
    assert not table_exists(str(tmp_path / "db.sqlite"), "numbers")
    import json

    doc = json.loads(area.metrics(chain.id).read_text())
    assert doc["state"] == "failed" and OPS[fail_at] in doc["error"]

    # the downstream chain refuses to run on the missing upstream attempt
    overrides = render_overrides(job, template_context("r1", job.pipeline))
    with pytest.raises(ChainRunError, match="not committed"):
        run_chain(spark, job, job.chains[2].id, "r1", root, overrides=overrides)

    if fail_at != 1:
        return
    # Retry (what Airflow's retry or a clear does): the failed chain, then downstream.
    clean = _clean_outputs(spark, tmp_path, root, job)
    trigger.unlink()
    for c in job.chains[1:]:
        run_chain(spark, job, c.id, "r1", root, overrides=overrides)
    assert outputs_of(tmp_path, root, "r1", job) == clean
    assert not area.run.join("_attempts").exists() and not area.run.join("_trash").exists()
    assert [f for f in tree(str(tmp_path / "out" / "r1")) if f.startswith(".") or "/." in f] == []


def _clean_outputs(spark, tmp_path, root, job) -> dict:
    clean_tmp = tmp_path / "clean"
    clean_tmp.mkdir()
    p = probe_pipeline(clean_tmp)
    execute_pipeline(p, spark=spark, exchange_root=root, run_id="clean")
    got = outputs_of(clean_tmp, root, "clean", p.plan())
    assert sum(got["pq"].values()) == N and sum(got["sql"].values()) == N
    assert got["sums"] == multiset([{"n": sum(i for i in range(N) if i % 3 == r)} for r in range(3)])
    return got


def test_second_attempt_replaces_first_and_other_runs_stay(spark, tmp_path):
    """Run r1 clean, re-run the middle chain of r1 twice and a second run r2 whose
    middle chain fails: r1's committed outputs never change, r2's downstream does
    not fall back on r1's data."""
    trigger = tmp_path / "fail.now"
    p = probe_pipeline(tmp_path, "tail", "process", trigger=str(trigger))
    job = p.plan()
    root = str(tmp_path / "exchange")
    execute_pipeline(p, spark=spark, exchange_root=root, run_id="r1")
    first = outputs_of(tmp_path, root, "r1", job)
    overrides = render_overrides(job, template_context("r1", job.pipeline))
    for _ in range(2):
        run_chain(spark, job, job.chains[1].id, "r1", root, overrides=overrides)
    assert outputs_of(tmp_path, root, "r1", job) == first
    trigger.touch()
    with pytest.raises(ChainRunError, match="tail"):
        execute_pipeline(p, spark=spark, exchange_root=root, run_id="r2")
    with pytest.raises(ChainRunError, match="not committed"):
        run_chain(spark, job, job.chains[2].id, "r2", root,
                  overrides=render_overrides(job, template_context("r2", job.pipeline)))
    assert outputs_of(tmp_path, root, "r1", job) == first
    r2 = tmp_path / "out" / "r2"  # at most the empty parent of the discarded staging dirs
    assert not r2.exists() or [f for f in tree(str(r2)) if os.path.isfile(r2 / f)] == []
