"""PyFlink programs on local Spark: execute() prints and clears the job, Rows cross Spark's
Python workers, the text-line file source and the row-format file sink."""

from __future__ import annotations

import os

from airflow_flinkchain.common import Encoder, Row, Types, WatermarkStrategy
from airflow_flinkchain.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from airflow_flinkchain.datastream.connectors.file_system import (FileSink, FileSource, OutputFileConfig,
                                                                  RollingPolicy, StreamFormat)

ROWS = Types.ROW_NAMED(["id", "info"], [Types.INT(), Types.STRING()])


def test_execute_on_spark_prints_with_subtask_prefix_ships_rows_and_clears_the_job(spark, capsys):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_parallelism(2)
    rows = env.from_collection([(i, f"r{i}") for i in range(6)], type_info=ROWS)
    # Rows cross an exchange (pickled on the source's worker, unpickled on the map's)
    rows.rebalance().map(lambda r: (r.info, r.id * 0.1), output_type=Types.TUPLE([Types.STRING(), Types.FLOAT()])) \
        .print()
    env.execute("pyflink_rows")
    lines = capsys.readouterr().out.splitlines()
    assert sorted(line.split("> ")[1] for line in lines) == [
        "(r0,0.0)", "(r1,0.1)", "(r2,0.2)", "(r3,0.3)", "(r4,0.4)", "(r5,0.5)"]
    assert sorted({line.split("> ")[0] for line in lines}) == ["1", "2"]

    rows.map(lambda r: Row(id=r.id, twice=r.id * 2)).filter(lambda r: r.id < 2).print("second").set_parallelism(1)
    result = env.execute()
    assert capsys.readouterr().out.splitlines() == ["second> Row(id=0, twice=0)", "second> Row(id=1, twice=2)"]
    assert list(result.outputs) == ["print-1"] and result.pipeline == "flink_streaming_job"  # the first job is gone


def test_text_line_source_in_file_order_and_row_format_sink_on_spark(spark, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.txt").write_text("to be or\nnot to be\r\nthat is\n")
    (src / "b.txt").write_text("the question\nto be")
    out = tmp_path / "out"
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    env.set_parallelism(2)
    lines = env.from_source(FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(src))
                            .process_static_file_set().build(),
                            watermark_strategy=WatermarkStrategy.for_monotonous_timestamps(),
                            source_name="file_source")
    lines.collect("lines")
    lines.flat_map(str.split).map(lambda w: (w, 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()])) \
        .key_by(lambda t: t[0]).reduce(lambda a, b: (a[0], a[1] + b[1])) \
        .sink_to(FileSink.for_row_format(base_path=str(out), encoder=Encoder.simple_string_encoder())
                 .with_output_file_config(OutputFileConfig.builder().with_part_prefix("prefix")
                                          .with_part_suffix(".ext").build())
                 .with_rolling_policy(RollingPolicy.default_rolling_policy()).build())
    result = env.execute()
    # one split per file, each read in order: subtask 0 reads a.txt, subtask 1 b.txt
    assert result.output("lines") == ["to be or", "not to be", "that is", "the question", "to be"]
    assert sorted(os.listdir(out)) == ["prefix-0-0.ext", "prefix-1-0.ext"]
    written = [line for f in sorted(os.listdir(out)) for line in (out / f).read_text().splitlines()]
    assert sorted(written) == sorted(["(be,3)", "(is,1)", "(not,1)", "(or,1)", "(that,1)", "(the,1)",
                                      "(question,1)", "(to,3)"])


def test_text_line_source_and_row_format_sink_in_process(tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("b\na\n")
    out = tmp_path / "out"
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)
    lines = env.from_source(FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(src)).build(),
                            WatermarkStrategy.no_watermarks(), "lines")
    lines.map(lambda s: s.upper()).sink_to(FileSink.for_row_format(str(out), Encoder.simple_string_encoder()).build())
    env.execute_local()
    assert (out / "part-0-0").read_text() == "B\nA\n"
