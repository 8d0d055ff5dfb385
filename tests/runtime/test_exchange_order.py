"""Exchanges keep each channel's order of records, timestamps and watermarks: pickled and
typed edges, across Arrow batch boundaries, on every re-read of a committed dataset, after a
retried (rewritten) attempt, and in the in-process exchange of execute_local(). No Spark."""

from __future__ import annotations

import pytest

from airflow_flinkchain.runtime.core.elements import StreamRecord, Watermark
from airflow_flinkchain.runtime.exchange import dataset
from airflow_flinkchain.runtime.exchange.dataset import DatasetWriter, open_channel
from airflow_flinkchain.runtime.exchange.layout import ExchangeArea, replace
from airflow_flinkchain.runtime.local.exchange import LocalChannelWriter

TYPED = {"k": "string", "v": "int64"}


def _elements(n):
    """Records with timestamps, a watermark after every third record."""
    out = []
    for i in range(n):
        out.append(StreamRecord({"k": f"k{i % 3}", "v": i}, 1000 + i))
        if i % 3 == 2:
            out.append(Watermark(1000 + i - 1))
    return out


def _commit(area, attempt, edge, elements, output_type):
    att = area.attempt("c1", attempt)
    w = DatasetWriter(att.edge(edge), edge, 0, 1, output_type)
    for el in elements:
        if type(el) is Watermark:
            w.write_watermark(0, el.timestamp)
        else:
            w.write(0, el.value, el.timestamp)
    w.close()
    replace(att.edge(edge), area.edge(edge), area.trash())
    att.discard()


@pytest.mark.parametrize("output_type", [None, TYPED], ids=["pickled", "typed"])
def test_channel_order_survives_batches_and_rereads(tmp_path, monkeypatch, output_type):
    monkeypatch.setattr(dataset, "BATCH_ROWS", 4)  # several Arrow batches per file
    area = ExchangeArea(str(tmp_path), "dag", "r1")
    elements = _elements(17) + [Watermark(5000)]
    _commit(area, "1", "e", elements, output_type)
    first = list(open_channel(area.edge("e"), "e", 0, 1)[0].elements())
    again = list(open_channel(area.edge("e"), "e", 0, 1)[0].elements())
    assert first == elements and again == elements


@pytest.mark.parametrize("output_type", [None, TYPED], ids=["pickled", "typed"])
def test_a_retried_attempt_replaces_records_and_watermarks(tmp_path, output_type):
    area = ExchangeArea(str(tmp_path), "dag", "r1")
    _commit(area, "1", "e", _elements(5), output_type)
    retried = _elements(7)
    _commit(area, "2", "e", retried, output_type)
    assert list(open_channel(area.edge("e"), "e", 0, 1)[0].elements()) == retried


@pytest.mark.parametrize("output_type", [None, TYPED], ids=["pickled", "typed"])
def test_local_exchange_keeps_channel_order(output_type):
    w = LocalChannelWriter("e", 0, 2, output_type)
    elements = _elements(8)
    for el in elements:
        if type(el) is Watermark:
            for ch in range(2):
                w.write_watermark(ch, el.timestamp)
        else:
            w.write(el.value["v"] % 2, el.value, el.timestamp)
    w.close()
    for ch in range(2):
        want = [el for el in elements if type(el) is Watermark or el.value["v"] % 2 == ch]
        assert list(w.channel(ch).elements()) == want
        assert list(w.channel(ch).elements()) == want  # re-read


def test_watermark_statuses_cross_the_exchange_and_prime_the_valve(tmp_path):
    from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS, WatermarkStatus
    from airflow_flinkchain.runtime.exchange.dataset import merged_input

    area = ExchangeArea(str(tmp_path), "dag", "r1")
    att = area.attempt("c1", "1")
    busy = DatasetWriter(att.edge("e"), "e", 0, 1)
    busy.write(0, "x", 10)
    busy.write_watermark(0, 10)
    busy.write(0, "y", 20)
    busy.write_watermark(0, 20)
    busy.close()
    idle = DatasetWriter(att.edge("e"), "e", 1, 1)  # a subtask that saw no record
    idle.write_watermark_status(0, True)
    idle.write_watermark_status(0, False)
    idle.write_watermark(0, MAX_WATERMARK_TS)
    idle.close()
    replace(att.edge("e"), area.edge("e"), area.trash())
    files = open_channel(area.edge("e"), "e", 0, 2)
    assert [f.initially_idle for f in files] == [False, True]
    assert list(files[1].elements()) == [WatermarkStatus.IDLE, WatermarkStatus.ACTIVE, Watermark(MAX_WATERMARK_TS)]
    # the idle file is read after the busy one, yet does not hold its watermarks back
    assert list(merged_input(files)) == [StreamRecord("x", 10), Watermark(10), StreamRecord("y", 20), Watermark(20)]
