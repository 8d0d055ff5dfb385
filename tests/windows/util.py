"""Functions the window tests share (execute_local, Spark, the WindowOperator harness):
records are `(key, value, event time)`."""

from __future__ import annotations

from airflow_flinkchain import AggregateFunction, Duration, OutputTag, WatermarkStrategy

LATE = OutputTag("late")


def event_time(r, _ts):
    return r[2]


def key(r):
    return r[0]


def add(a, b):
    return (a[0], a[1] + b[1], max(a[2], b[2]))


def stamped(value, ctx):
    yield (value, ctx.timestamp())


def events(p, records, bounded=0, name=None):
    """`records` as a source of `p` with event time `r[2]`, `bounded` ms out of orderness."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(bounded))
    s = p.from_collection(records)
    if name:
        s = s.name(name)
    return s.assign_timestamps_and_watermarks(strategy.with_timestamp_assigner(event_time))


class Mean(AggregateFunction):
    """The mean of the records' field 1 (accumulator `(sum, n)`)."""

    def create_accumulator(self):
        return (0, 0)

    def add(self, value, acc):
        return (acc[0] + value[1], acc[1] + 1)

    def get_result(self, acc):
        return acc[0] / acc[1]

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])
