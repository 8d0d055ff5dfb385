"""Apache Flink's own PyFlink DataStream examples, with `pyflink` renamed to
`airflow_flinkchain` and nothing else (tests/data/flink-examples/), each run as a script on
local Spark, print the records PyFlink 2.3.0 printed (expected/<name>.out, recorded by
tests/data/flink-examples/record_expected.py).

How the output is compared: the lines the example's print() sinks wrote, as multisets (the
order across subtasks and between parallel operators is Flink's to choose), with Flink's `N> `
subtask prefix removed on both sides: PyFlink ran the examples that set no parallelism at its
local default (the machine's cores), here they run at the pipeline's default of 1. The
example's own messages ("Printing result to stdout. ...") are not records: the script runs
with a `print` that writes them to stderr, as the recorder sends them away on PyFlink's side.

Watermark timing: `event_time_timer` (event-time timers) and
`tumbling_window_continuous_trigger` (a ContinuousEventTimeTrigger) print results that depend
on when watermarks arrive. PyFlink emits watermarks periodically (every 200 ms by default) and
these inputs pass in less time, so PyFlink's run saw no watermark before the end of the input
(the recorder checks it: PyFlink with periodic watermarks off prints the same). Their expected
output therefore assumes no watermark until the end of the input, and they run here with the
deployment setting `[flinkchain] auto_watermark_interval = 0` (the environment variable
AIRFLOW__FLINKCHAIN__AUTO_WATERMARK_INTERVAL). With this project's default, a watermark after
every record, their timers and triggers fire as the records pass and print partial results.
The window examples use in-order timestamps: their results do not depend on the timing.
"""

from __future__ import annotations

import builtins
import re
import runpy
import sys
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

FOLDER = Path(__file__).resolve().parents[1] / "data" / "flink-examples"
_recorder = runpy.run_path(str(FOLDER / "record_expected.py"))  # the list of examples, in one place
EXAMPLES, WATERMARK_TIMING = _recorder["EXAMPLES"], _recorder["WATERMARK_TIMING"]

SUBTASK = re.compile(r"^\d+> ")


def records(lines):
    """The printed records as a multiset, without Flink's `N> ` subtask prefix."""
    return Counter(SUBTASK.sub("", line) for line in lines)


def to_stderr(*args, **kwargs):
    """The example's own messages: not records."""
    kwargs.pop("file", None)
    builtins.print(*args, file=sys.stderr, **kwargs)


@pytest.fixture
def run_example(spark, monkeypatch, capsys):
    def run(name):
        script = FOLDER / EXAMPLES[name]
        monkeypatch.setattr(sys, "argv", [str(script)])  # its no-argument mode: built-in input, print()
        if name in WATERMARK_TIMING:
            monkeypatch.setenv("AIRFLOW__FLINKCHAIN__AUTO_WATERMARK_INTERVAL", "0")
        capsys.readouterr()
        runpy.run_path(str(script), init_globals={"print": to_stderr}, run_name="__main__")
        return capsys.readouterr().out.splitlines()
    return run


def test_the_vendored_examples_are_flinks_with_only_the_package_renamed():
    for name, rel in EXAMPLES.items():
        text = (FOLDER / rel).read_text()
        assert "pyflink" not in text, rel
        if rel.startswith("datastream/"):  # Apache Flink's files keep their license header
            assert text.startswith("#" * 80 + "\n#  Licensed to the Apache Software Foundation (ASF)"), rel


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_example_prints_what_pyflink_printed(run_example, name):
    expected = (FOLDER / "expected" / f"{name}.out").read_text().splitlines()
    printed = run_example(name)
    assert expected, f"nothing recorded for {name}"
    assert records(printed) == records(expected), (
        f"{name}: printed\n" + "\n".join(printed) + "\nPyFlink printed\n" + "\n".join(expected))
