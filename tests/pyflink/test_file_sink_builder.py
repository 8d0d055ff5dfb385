"""PyFlink's FileSink builder methods (FileSink.BaseBuilder, inherited by RowFormatBuilder),
each called as a PyFlink program would: the ones offered configure the built sink, the others
raise UnsupportedFeatureError naming the method and what to do (none is accepted silently)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_flinkchain.common import Encoder
from airflow_flinkchain.datastream.connectors.file_system import FileSink, OutputFileConfig, RollingPolicy
from airflow_flinkchain.graph.errors import UnsupportedFeatureError

NAMES = Path(__file__).resolve().parents[1] / "data" / "pyflink_names.json"
BASE = "pyflink.datastream.connectors.file_system.FileSink.BaseBuilder."

CONFIG = OutputFileConfig.builder().with_part_prefix("pre").with_part_suffix(".txt").build()
POLICY = RollingPolicy.default_rolling_policy()
OFFERED = {  # method -> (its arguments, what the built sink then holds)
    "with_output_file_config": ((CONFIG,), lambda sink: sink.part_file(1) == "pre-1-0.txt"),
    "with_rolling_policy": ((POLICY,), lambda sink: sink.rolling_policy is POLICY),
    "disable_compact": ((), lambda sink: sink.part_file(0) == "part-0-0"),
    "build": ((), None),
}
REFUSED = {  # method -> (its arguments, what the error says to do)
    "with_bucket_check_interval": ((60_000,), "part files are complete when the run commits"),
    "with_bucket_assigner": ((object(),), "template such as {{ ds }} in the path"),
    "enable_compact": ((object(), object()), "compact the files after the run"),
}


def builder() -> FileSink.RowFormatBuilder:
    return FileSink.for_row_format("/data/out", Encoder.simple_string_encoder())


def test_every_pyflink_builder_method_is_covered():
    names = {e["name"][len(BASE):] for e in json.loads(NAMES.read_text())["names"] if e["name"].startswith(BASE)}
    assert names == set(OFFERED) | set(REFUSED)


@pytest.mark.parametrize("method", sorted(OFFERED))
def test_offered_methods_configure_the_sink(method):
    args, check = OFFERED[method]
    b = builder()
    if method == "build":
        assert b.build().describe() == "text files at /data/out"
        return
    assert getattr(b, method)(*args) is b
    assert check(b.build())


@pytest.mark.parametrize("method", sorted(REFUSED))
def test_unsupported_methods_raise_naming_the_method_and_the_way(method):
    args, advice = REFUSED[method]
    with pytest.raises(UnsupportedFeatureError) as err:
        getattr(builder(), method)(*args)
    message = str(err.value)
    assert f"FileSink.RowFormatBuilder.{method}()" in message and advice in message, message
