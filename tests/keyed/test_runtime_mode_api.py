"""The runtime mode and watermark interval of a pipeline (PyFlink's set_runtime_mode and
ExecutionConfig), carried by the StreamGraph."""

from __future__ import annotations

import pytest

from airflow_flinkchain import PlanningError, StreamPipeline
from airflow_flinkchain.common import RuntimeExecutionMode


def _graph(p):
    p.from_collection([1]).collect("out")
    return p.stream_graph()


def test_default_is_flinks_streaming_with_flinks_watermark_interval():
    g = _graph(StreamPipeline("p"))
    assert (g.runtime_mode, g.auto_watermark_interval) == ("streaming", 200)


@pytest.mark.parametrize("mode,expected", [(RuntimeExecutionMode.STREAMING, "streaming"),
                                           (RuntimeExecutionMode.BATCH, "batch"),
                                           (RuntimeExecutionMode.AUTOMATIC, "batch"),  # every source is bounded
                                           ("STREAMING", "streaming"), ("batch", "batch")])
def test_set_runtime_mode_and_the_constructor_accept_the_enum_and_names(mode, expected):
    assert _graph(StreamPipeline("p").set_runtime_mode(mode)).runtime_mode == expected
    assert _graph(StreamPipeline("p", runtime_mode=mode)).runtime_mode == expected


def test_get_config_sets_the_auto_watermark_interval():
    p = StreamPipeline("p")
    config = p.get_config().set_auto_watermark_interval(0)
    assert config.get_auto_watermark_interval() == 0 and _graph(p).auto_watermark_interval == 0
    assert not p.get_config().is_object_reuse_enabled()
    p.get_config().enable_object_reuse()
    assert p.object_reuse


def test_bad_mode_and_interval_name_the_pipeline():
    with pytest.raises(PlanningError, match=r"pipeline 'p'.*runtime mode.*'micro-batch'"):
        StreamPipeline("p", runtime_mode="micro-batch")
    with pytest.raises(PlanningError, match=r"pipeline 'p'.*auto watermark interval.*-1"):
        StreamPipeline("p").get_config().set_auto_watermark_interval(-1)
