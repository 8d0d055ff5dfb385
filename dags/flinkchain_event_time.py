"""Example: event time on Airflow + Spark - sensor readings, per-minute windows, overheat alerts.

    readings -> timestamps (watermarks: 5 s out of orderness)
        -> key_by sensor -> minute_stats: tumbling 1-minute event-time windows, 20 s allowed
           lateness (late firings update a minute), later readings -> side output
        -> key_by sensor -> overheat: KeyedProcessFunction, ValueState + event-time timers:
           a sensor above 80 degrees for 15 s of event time raises an alert

STREAMING runtime mode: a watermark follows every reading, windows fire as it passes their end,
results are stamped `window.max_timestamp()`, timers fire when the watermark reaches them.
Three chains (tasks): `readings -> timestamps`, `minute_stats -> ...` and `overheat -> alerts`.
Outputs land in $AIRFLOW_HOME/flinkchain/output/event_time/<run_key>/. The guide:
docs/event-time.md.

`sensor_job` is a PyFlink DataStream program: the imports below are the only lines that differ
from PyFlink (2.x). The PyFlink imports they replace:

    from pyflink.common import Duration, Types, WatermarkStrategy
    from pyflink.common.watermark_strategy import TimestampAssigner
    from pyflink.datastream import OutputTag, RuntimeExecutionMode
    from pyflink.datastream.functions import AggregateFunction, KeyedProcessFunction, ProcessWindowFunction
    from pyflink.datastream.state import ValueStateDescriptor
    from pyflink.datastream.window import TumblingEventTimeWindows

The environment, source and sinks (PyFlink: `StreamExecutionEnvironment`, `from_collection`,
`FileSink`) are the Airflow part, at the end of the file.
"""

from __future__ import annotations

from airflow.sdk import DAG

import sample_data
from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io.sinks import JsonLinesSink, ParquetSink

# The program's imports: PyFlink's names, from airflow_flinkchain (see above).
from airflow_flinkchain import OutputTag, RuntimeExecutionMode
from airflow_flinkchain.common import Duration, TimestampAssigner, Types, WatermarkStrategy
from airflow_flinkchain.functions import AggregateFunction, KeyedProcessFunction, ProcessWindowFunction
from airflow_flinkchain.state import ValueStateDescriptor
from airflow_flinkchain.window import TumblingEventTimeWindows

# ---- the event-time program (PyFlink API) ------------------------------------------------------

OVERHEAT_DEGREES = 80.0
OVERHEAT_FOR_MS = 15_000
ALLOWED_LATENESS_MS = 20_000
LATE_READINGS = OutputTag("late_readings")


class ReadingTimestamp(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value["ts"]


def sensor_of(reading):
    return reading["sensor"]


class MeanAndPeak(AggregateFunction):
    """Accumulator (readings, sum, peak) -> (readings, mean, peak)."""

    def create_accumulator(self):
        return (0, 0.0, None)

    def add(self, value, accumulator):
        n, total, peak = accumulator
        t = value["temperature"]
        return (n + 1, total + t, t if peak is None else max(peak, t))

    def get_result(self, accumulator):
        n, total, peak = accumulator
        return (n, total / n, peak)

    def merge(self, acc_a, acc_b):
        peaks = [p for p in (acc_a[2], acc_b[2]) if p is not None]
        return (acc_a[0] + acc_b[0], acc_a[1] + acc_b[1], max(peaks) if peaks else None)


class MinuteStats(ProcessWindowFunction):
    """One row per sensor and minute (again, updated, when a late reading fires the window)."""

    def process(self, key, context, elements):
        n, mean, peak = next(iter(elements))
        window = context.window()
        yield {"sensor": key, "window_start": window.start, "window_end": window.end,
               "readings": n, "mean": round(mean, 2), "peak": peak}


class OverheatAlert(KeyedProcessFunction):
    """An alert when a sensor stays above OVERHEAT_DEGREES for OVERHEAT_FOR_MS of event time: the
    first hot reading registers an event-time timer that long after it; a normal reading taken
    after it (readings arrive out of order) deletes the timer."""

    def open(self, runtime_context):
        self.hot_since = runtime_context.get_state(ValueStateDescriptor("hot_since", Types.LONG()))
        self.peak = runtime_context.get_state(ValueStateDescriptor("peak", Types.DOUBLE()))

    def process_element(self, value, ctx):
        hot_since = self.hot_since.value()
        if value["temperature"] > OVERHEAT_DEGREES:
            if hot_since is None:
                self.hot_since.update(ctx.timestamp())
                ctx.timer_service().register_event_time_timer(ctx.timestamp() + OVERHEAT_FOR_MS)
            self.peak.update(max(self.peak.value() or value["temperature"], value["temperature"]))
        elif hot_since is not None and ctx.timestamp() > hot_since:  # an older reading says nothing
            ctx.timer_service().delete_event_time_timer(hot_since + OVERHEAT_FOR_MS)
            self.hot_since.clear()
            self.peak.clear()
        return []  # nothing per reading: alerts come from on_timer

    def on_timer(self, timestamp, ctx):
        yield {"sensor": ctx.get_current_key(), "hot_since": self.hot_since.value(), "alert_at": timestamp,
               "peak": self.peak.value()}
        self.hot_since.clear()
        self.peak.clear()


def sensor_job(readings):
    """readings -> (per-minute stats, readings too late for their minute, overheat alerts)."""
    watermarks = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5))
                  .with_timestamp_assigner(ReadingTimestamp()))
    # Watermarks right at the (non-parallel) source, in its chain.
    timed = readings.assign_timestamps_and_watermarks(watermarks).name("timestamps").uid("timestamps") \
        .set_parallelism(1)
    stats = (timed.key_by(sensor_of)
             .window(TumblingEventTimeWindows.of(Duration.of_minutes(1)))
             .allowed_lateness(ALLOWED_LATENESS_MS)
             .side_output_late_data(LATE_READINGS)
             .aggregate(MeanAndPeak(), window_function=MinuteStats())
             .name("minute_stats").uid("minute_stats"))
    late = stats.get_side_output(LATE_READINGS)
    alerts = timed.key_by(sensor_of).process(OverheatAlert()).name("overheat").uid("overheat")
    return stats, late, alerts


# ---- the Airflow part: environment, source, sinks, DAG -------------------------------------------

def event_time_pipeline(output_dir: str, parallelism: int = 2) -> StreamPipeline:
    """The pipeline; output paths are keyed by `{{ run_key }}` (Airflow's run id, path-safe)."""
    out = f"{output_dir}/event_time/{{{{ run_key }}}}"
    env = StreamPipeline("event_time", parallelism=parallelism, conn_id="spark_default", driver_memory="1g")
    env.set_runtime_mode(RuntimeExecutionMode.STREAMING)
    readings = env.from_collection(sample_data.sensor_readings()).name("readings").uid("readings")
    stats, late, alerts = sensor_job(readings)
    stats.sink_to(ParquetSink(f"{out}/minute_stats"), name="minute_stats_parquet").uid("minute_stats_parquet")
    late.sink_to(JsonLinesSink(f"{out}/late_readings"), name="late_readings_json").uid("late_readings_json")
    alerts.sink_to(ParquetSink(f"{out}/alerts"), name="alerts_parquet").uid("alerts_parquet")
    return env


with DAG("flinkchain_event_time", schedule=None, doc_md=__doc__, **sample_data.example_dag_args("event-time")) as dag:
    event_time_pipeline(sample_data.output_dir()).to_airflow()
