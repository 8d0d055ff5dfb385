"""Test helpers for pipelines: a source and a sink for unit tests of DAG authors.

Build the pipeline as in the DAG, feed it a `TestingSource`, send what you
check to a `TestingSink`, run it with `execute_local()` (in process, no
Spark, no Airflow) and read `sink.records`:

>>> from airflow_flinkchain import StreamPipeline
>>> from airflow_flinkchain.testing import TestingSink, TestingSource
>>> p = StreamPipeline("word_lengths", parallelism=2)
>>> lengths = TestingSink()
>>> words = p.from_source(TestingSource(["flink", "airflow", "spark"]))
>>> _ = words.map(lambda w: (w, len(w))).filter(lambda t: t[1] > 5).sink_to(lengths)
>>> _ = p.execute_local()
>>> lengths.records
[('airflow', 7)]

`execute()` (Spark) fills a TestingSink the same way. A TestingSink is a
collect sink: `result.output(sink.name)` holds the same records.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Iterable

from airflow_flinkchain.io.sinks import CollectSink
from airflow_flinkchain.io.sources import CollectionSource

_sink_ids = itertools.count(1)


class TestingSource(CollectionSource):
    """A non-parallel source of the given records, as `from_collection`. Records
    may be `StreamRecord(value, timestamp)` and `Watermark(timestamp)`
    (`airflow_flinkchain.runtime.core.elements`) to test event time.

    >>> TestingSource([1, 2, 3]).describe()
    'collection of 3 records'
    """

    __test__ = False  # not a pytest test class

    def __init__(self, records: Iterable[Any] = ()):
        object.__setattr__(self, "items", tuple(records))


@dataclass(frozen=True, eq=False)
class TestingSink(CollectSink):
    """A collect sink whose records, after `execute_local()` or `execute()`, are
    in `.records` (in subtask order; each run replaces them). `name`: the collect
    name (default: a unique `testing_sink_N`).

    >>> sink = TestingSink("out")
    >>> sink.name, sink.records
    ('out', [])
    """

    __test__ = False  # not a pytest test class

    name: str = ""
    records: list = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", f"testing_sink_{next(_sink_ids)}")


__all__ = ["TestingSink", "TestingSource"]
