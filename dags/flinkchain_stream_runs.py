"""Example: stream runs - each DAG run continues the click stream where the last run stopped.

    clicks (a monitored directory of JSON lines: each run reads the files not read before)
        -> timestamps (watermarks: 10 s out of orderness)
        -> key_by page -> page_views: tumbling 1-minute event-time windows, views per page
        -> key_by user -> sessions: KeyedProcessFunction, ValueState + an event-time timer:
           a user's session ends after 2 minutes of event time without a click

Every run restores the last committed snapshot (open windows, session state, timers,
watermarks, the files read), reads the files that arrived since, and commits a new snapshot
together with the part files it appends to the two JSON-lines sinks: exactly once, whatever
fails. A normal run leaves the windows and sessions that are still open for the next run;
a run triggered with `{"drain": true}` (the DAG param `drain`) fires them all. The guide:
docs/stream-runs.md. `python -m airflow_flinkchain.demo stream` drops three slices of files,
runs the DAG after each, then drains and prints the outputs.

Paths, under the examples' root ($FLINKCHAIN_EXAMPLES_ROOT, e.g. s3://bucket/flinkchain, else
$AIRFLOW_HOME/flinkchain): input incoming/clicks/, checkpoints checkpoints/stream_runs/,
outputs output/stream_runs/{page_views,sessions}/ (one part file per run).
"""

from __future__ import annotations

import datetime
import json
import os

from airflow.sdk import DAG

import sample_data
from airflow_flinkchain import RuntimeExecutionMode, StreamPipeline
from airflow_flinkchain.common import Duration, TimestampAssigner, Types, WatermarkStrategy
from airflow_flinkchain.functions import KeyedProcessFunction, ProcessWindowFunction
from airflow_flinkchain.io.sinks import JsonLinesSink
from airflow_flinkchain.io.sources import JsonLinesSource
from airflow_flinkchain.state import ValueStateDescriptor
from airflow_flinkchain.window import TumblingEventTimeWindows

SESSION_GAP_MS = 120_000


class ClickTime(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value["ts"]


class ViewsPerPage(ProcessWindowFunction):
    def process(self, key, context, elements):
        window = context.window()
        yield {"page": key, "window_start": window.start, "views": sum(1 for _ in elements)}


class Sessions(KeyedProcessFunction):
    """A session per user: clicks closer than SESSION_GAP_MS of event time. Each click moves
    the session's end timer; when it fires, the session is emitted."""

    def open(self, runtime_context):
        self.session = runtime_context.get_state(ValueStateDescriptor("session", Types.PICKLED_BYTE_ARRAY()))

    def process_element(self, value, ctx):
        s = self.session.value()
        if s is None:
            s = {"start": ctx.timestamp(), "last": ctx.timestamp(), "clicks": 0}
        else:
            ctx.timer_service().delete_event_time_timer(s["last"] + SESSION_GAP_MS)
        s = {"start": min(s["start"], ctx.timestamp()), "last": max(s["last"], ctx.timestamp()),
             "clicks": s["clicks"] + 1}
        self.session.update(s)
        ctx.timer_service().register_event_time_timer(s["last"] + SESSION_GAP_MS)
        return []

    def on_timer(self, timestamp, ctx):
        s = self.session.value()
        self.session.clear()
        yield {"user": ctx.get_current_key(), "start": s["start"], "end": s["last"], "clicks": s["clicks"]}


def stream_runs_pipeline(input_dir: str, output_dir: str, checkpoint_dir: str, parallelism: int = 1,
                         name: str = "stream_runs") -> StreamPipeline:
    """`checkpoint_dir=None`: one ordinary STREAMING run (what the stream runs add up to)."""
    env = StreamPipeline(name, runtime_mode=RuntimeExecutionMode.STREAMING, parallelism=parallelism,
                         conn_id="spark_default", driver_memory="1g", checkpoint_dir=checkpoint_dir)
    watermarks = (WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(10))
                  .with_timestamp_assigner(ClickTime()))
    clicks = (env.from_source(JsonLinesSource(input_dir, monitor=True), name="clicks").uid("clicks")
              .set_parallelism(1)
              .assign_timestamps_and_watermarks(watermarks).name("timestamps").uid("timestamps").set_parallelism(1))
    (clicks.key_by(lambda c: c["page"])
     .window(TumblingEventTimeWindows.of(Duration.of_minutes(1)))
     .process(ViewsPerPage()).name("page_views").uid("page_views")
     .sink_to(JsonLinesSink(f"{output_dir}/page_views"), name="page_views_json").uid("page_views_json"))
    (clicks.key_by(lambda c: c["user"]).process(Sessions()).name("sessions").uid("sessions")
     .sink_to(JsonLinesSink(f"{output_dir}/sessions"), name="sessions_json").uid("sessions_json"))
    return env


def paths(root: str = None) -> dict:
    """The example's locations under `root` (default: the examples' root, sample_data.root())."""
    root = root or sample_data.root()
    return {"input_dir": sample_data.join(root, "incoming", "clicks"),
            "output_dir": sample_data.join(root, "output", "stream_runs"),
            "checkpoint_dir": sample_data.join(root, "checkpoints", "stream_runs")}


def click_slices(n_slices: int = 3, per_slice: int = 60, seed: int = 11) -> list[list[dict]]:
    """Deterministic clicks of 6 users on 5 pages, event time rising with some disorder
    (up to 8 s), cut into `n_slices` consecutive slices: a session or a minute often spans two."""
    import random

    rng = random.Random(seed)
    t0 = int(datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc).timestamp() * 1000)
    t, clicks = t0, []
    for i in range(n_slices * per_slice):
        t += rng.choice((1_000, 4_000, 9_000, 30_000, 150_000 if rng.random() < 0.1 else 7_000))
        clicks.append({"id": i, "user": f"u{rng.randrange(6)}", "page": f"/p/{rng.randrange(5)}",
                       "ts": t - rng.randrange(0, 8_000)})
    return [clicks[k * per_slice:(k + 1) * per_slice] for k in range(n_slices)]


def drop_slice(input_dir: str, k: int, clicks: list[dict]) -> str:
    """Write slice k as one file. On a local disk it is written under a '_' name, then renamed
    (readers skip '_' files); an object store shows an object only once it is whole."""
    final = sample_data.join(input_dir, f"clicks-{k:04d}.json")
    text = "".join(json.dumps(c) + "\n" for c in clicks)
    if "://" in input_dir:
        return sample_data.write_text(final, text)
    tmp = sample_data.write_text(os.path.join(input_dir, f"_clicks-{k:04d}.json"), text)
    os.replace(tmp, final)
    return final


with DAG("flinkchain_stream_runs", schedule=None, doc_md=__doc__,
         **sample_data.example_dag_args("stream-runs")) as dag:
    stream_runs_pipeline(**paths()).to_airflow()
