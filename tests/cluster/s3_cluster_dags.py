"""DAGs of the shared-nothing cluster tests (test_s3_cluster.py): the example pipelines of
dags/ with every location on S3 ($FLINKCHAIN_EXAMPLES_ROOT and [flinkchain] exchange_root,
set by the test), each with one user function wrapped by `PauseOnce`: a test arms it, a
subtask then stops in it and says so on S3, and the test kills that subtask's executor or the
chain's driver. The wrapped function returns what the example's returns, so the outputs are
the example's.
"""

from __future__ import annotations

import datetime
import json
import os
import time
from urllib.parse import urlsplit

from airflow.sdk import DAG

import flinkchain_clickstream as clickstream
import flinkchain_stream_runs as stream_example
import sample_data

RETRY = {"retries": 1, "retry_delay": datetime.timedelta(seconds=1)}
PAUSE_SECONDS = 600


def pause_marker(name: str) -> str:
    """Created by the paused subtask: {"pid": its Python worker's pid}."""
    return sample_data.join(sample_data.root(), "faults", name, "paused.json")


def pause_arm(name: str) -> str:
    """Created by the test: the next call of the wrapped function pauses (once)."""
    return sample_data.join(sample_data.root(), "faults", name, "armed")


class PauseOnce:
    """`fn`, except that the first call in any subtask while `armed` exists and `paused` does
    not creates `paused` (S3 If-None-Match: one subtask wins) and waits to be killed."""

    def __init__(self, fn, name: str):
        self.fn, self.armed, self.paused = fn, pause_arm(name), pause_marker(name)

    def __call__(self, *args):
        if not getattr(self, "checked", False):
            self.checked = True
            if sample_data.exists(self.armed) and _create_if_absent(self.paused, {"pid": os.getpid()}):
                time.sleep(PAUSE_SECONDS)
                raise RuntimeError(f"PauseOnce: not killed within {PAUSE_SECONDS} s")
        return self.fn(*args)


def _create_if_absent(uri: str, doc: dict) -> bool:
    import boto3
    from botocore.exceptions import ClientError

    u = urlsplit(uri)
    try:
        boto3.client("s3").put_object(Bucket=u.netloc, Key=u.path.lstrip("/"), Body=json.dumps(doc).encode(),
                                      IfNoneMatch="*")
        return True
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in ("PreconditionFailed", "ConditionalRequestConflict"):
            return False
        raise


# The clickstream example; its bot filter (first chain, both subtasks) pauses once.
clickstream.is_human = PauseOnce(clickstream.is_human, "clickstream")
with DAG("cluster_clickstream", schedule=None, default_args=RETRY, **sample_data.example_dag_args()) as clickstream_dag:
    clickstream.clickstream_pipeline(sample_data.sample_dir(), sample_data.output_dir(),
                                     sample_data.sqlite_url()).to_airflow()


class PausingClickTime(stream_example.ClickTime):
    def __init__(self):
        self.pause = PauseOnce(super().extract_timestamp, "stream_runs")

    def extract_timestamp(self, value, record_timestamp):
        return self.pause(value, record_timestamp)


# The stream-runs example; its timestamp assigner (first chain) pauses once when armed.
stream_example.ClickTime = PausingClickTime
with DAG("cluster_stream_runs", schedule=None, default_args=RETRY,
         **sample_data.example_dag_args("stream-runs")) as stream_dag:
    stream_example.stream_runs_pipeline(**stream_example.paths()).to_airflow()
