"""`flinkchain plan` over Parquet sources that declare no schema: the footers of the files that
exist say which aggregations run vectorized, and the plan says why the others run per record."""

from __future__ import annotations

import json


import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io import ParquetSource
from airflow_flinkchain.cli import main
from airflow_flinkchain.planner.vectorized import per_record_reason, runs_vectorized
from airflow_flinkchain.runtime.connectors.inferred_types import with_inferred_types

DAG = '''
import sys
from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.common import Duration, WatermarkStrategy
from airflow_flinkchain.io import ParquetSource
from airflow_flinkchain.window import TumblingEventTimeWindows

p = StreamPipeline("orders", parallelism=2, runtime_mode="batch")
s = p.from_source(ParquetSource({path!r}), name="orders")
s.key_by(lambda r: r["k"]).sum("v").name("total").collect("totals")
stamped = s.assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps()
                                             .with_timestamp_assigner(lambda r, ts: r["ts"])).name("stamp")
stamped.key_by(lambda r: r["k"]).window(TumblingEventTimeWindows.of(Duration.of_seconds(10))) \\
    .sum("v").name("per_10s").collect("windows")
'''


def plan(capsys, tmp_path, source_path, *args):
    dag = tmp_path / "dag.py"
    dag.write_text(DAG.format(path=str(source_path)))
    code = main(["plan", str(dag), *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def write(path, **columns):
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)


def test_files_with_the_fields_show_the_vectorized_path(capsys, tmp_path):
    write(tmp_path / "in" / "a.parquet", k=["a", "b"], v=[1, 2], ts=[1, 2], note=["x", None])
    write(tmp_path / "in" / "b.parquet", k=["c"], v=[3], ts=[3], note=[None])
    out = plan(capsys, tmp_path, tmp_path / "in")
    assert "total -> totals  [vectorized: total]" in out
    assert "per_10s -> windows  [vectorized: per_10s]" in out
    assert "orders -> stamp  [vectorized: stamp]" in out
    assert "per record" not in out
    ops = {o["name"]: o for c in json.loads(plan(capsys, tmp_path, tmp_path / "in", "-f", "json"))["pipelines"][0][
        "chains"] for o in c["operators"]}
    assert ops["total"]["vectorized"] and ops["total"]["per_record_reason"] is None


def test_files_without_the_field_show_the_per_record_path_and_why(capsys, tmp_path):
    write(tmp_path / "in" / "a.parquet", k=["a"], amount=[1], ts=[1])
    out = plan(capsys, tmp_path, tmp_path / "in")
    assert "vectorized: total" not in out and "vectorized: per_10s" not in out
    assert "per record: total: field 'v' is not in its input's fields (k, amount, ts)" in out
    assert "per record: per_10s: field 'v' is not in its input's fields (k, amount, ts)" in out
    assert "[vectorized: stamp]" in out  # the timestamp field is there


@pytest.mark.parametrize("columns, reason", [
    (dict(k=["a"], v=["1"], ts=[1]), "field 'v' is string, not a number"),
    (dict(k=["a"], v=[1.5], ts=[1]), "field 'v' is double: a sum of floats depends on the order of its terms"),
    (dict(k=[1.5], v=[1], ts=[1]), "its key field 'k' is double, not an integer or a string"),
])
def test_field_types_the_batch_path_does_not_take(capsys, tmp_path, columns, reason):
    write(tmp_path / "in" / "a.parquet", **columns)
    assert f"per record: total: {reason}" in plan(capsys, tmp_path, tmp_path / "in")


def test_sources_whose_schema_is_not_known_say_why(capsys, tmp_path):
    out = plan(capsys, tmp_path, tmp_path / "missing")
    assert (f"per record: total: source 'orders' declares no output_type and its schema is unknown at plan time: "
            f"no files at {tmp_path / 'missing'} yet") in out
    out = plan(capsys, tmp_path, str(tmp_path / "{{ ds }}"))
    assert "its path is a template, rendered when a run starts" in out
    write(tmp_path / "in" / "a.parquet", k=["a"], v=[1], ts=[1])
    write(tmp_path / "in" / "b.parquet", k=["a"], v=[1.5], ts=[1])
    assert "its files' schemas differ" in plan(capsys, tmp_path, tmp_path / "in")


def test_a_user_function_before_the_aggregation_and_a_declared_type(tmp_path):
    write(tmp_path / "in" / "a.parquet", k=["a"], v=[1])
    p = StreamPipeline("f", runtime_mode="batch")
    s = p.from_source(ParquetSource(str(tmp_path / "in")), name="src")
    s.map(lambda r: r, output_type={"k": "string", "v": "int64"}).name("typed") \
        .key_by(lambda r: r["k"]).sum("v").name("declared").collect("a")
    s.map(lambda r: r).name("fix").key_by(lambda r: r["k"]).sum("v").name("after_map").collect("b")
    s.key_by(lambda r: r["k"].lower()).sum("v").name("lower").collect("c")
    g = with_inferred_types(p.plan()).stream_graph
    ops = {n.name: n for n in g.nodes}
    assert runs_vectorized(g, ops["declared"])
    assert per_record_reason(g, ops["after_map"]) == \
        "its input comes from 'fix', a user function (map) that declares no output_type"
    assert per_record_reason(g, ops["lower"]).startswith("its key selector is a user function")
    assert per_record_reason(g, ops["src"]) is None and not runs_vectorized(g, ops["fix"])


def test_parsing_reads_no_file(tmp_path):
    """A plan made at parse time knows no schema (nothing is read): the run's setup reads it."""
    write(tmp_path / "in" / "a.parquet", k=["a"], v=[1])
    p = StreamPipeline("parse", runtime_mode="batch")
    p.from_source(ParquetSource(str(tmp_path / "in")), name="src").key_by(lambda r: r["k"]).sum("v") \
        .name("total").collect("out")
    g = p.plan().stream_graph
    total = next(n for n in g.nodes if n.name == "total")
    assert not runs_vectorized(g, total)
    assert per_record_reason(g, total).endswith("its schema is read from its files when a run starts")

