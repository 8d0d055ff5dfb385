"""DAGs of the end-to-end tests (copied into the test's dags folder)."""

import pendulum
from airflow.sdk import DAG

import sample_data
from airflow_flinkchain import StreamPipeline
from flinkchain_orders import orders_pipeline

START = pendulum.datetime(2026, 1, 1, tz="UTC")


def mark_disposed():
    import os

    os.makedirs(sample_data.output_dir(), exist_ok=True)
    open(os.path.join(sample_data.output_dir(), "failing.disposed"), "w").close()


def explode_on_seven(x):
    if x == 7:
        raise ValueError("seven is not allowed")
    return x


with DAG("af_orders_keep", schedule=None, start_date=START, catchup=False) as orders_keep:
    orders_pipeline(sample_data.sample_dir(), sample_data.output_dir(), sample_data.sqlite_url()).to_airflow(
        keep_exchange=True)

with DAG("af_failing", schedule=None, start_date=START, catchup=False) as failing:
    p = StreamPipeline("failing", parallelism=1)
    p.on_dispose(mark_disposed)
    (p.from_collection(range(10)).name("numbers").map(explode_on_seven).name("explode")
        .key_by(lambda x: x % 2).reduce(lambda a, b: a + b).name("total").collect("total"))
    p.to_airflow()

with DAG("af_tiny", schedule=None, start_date=START, catchup=False) as tiny:
    t = StreamPipeline("tiny", parallelism=1)
    t.from_collection(range(5)).name("numbers").map(lambda x: x * x).name("square").collect("squares")
    t.to_airflow()

# The scheduler test's DAG (tests/airflow/test_airflow_scheduler.py): three chains, a HASH
# exchange and a side output, so the Chains tab it screenshots shows a real job graph.
with DAG("af_orders", schedule=None, start_date=START, catchup=False) as orders:
    orders_pipeline(sample_data.sample_dir(), sample_data.output_dir(), sample_data.sqlite_url()).to_airflow()

# The scheduler test's stream DAG: every minute, one run at a time, files dropped between runs.
import datetime  # noqa: E402
import os  # noqa: E402

from flinkchain_stream_runs import stream_runs_pipeline  # noqa: E402

AF_STREAM_ROOT = os.path.join(sample_data.home(), "flinkchain", "af_stream")

with DAG("af_stream_runs", schedule=datetime.timedelta(minutes=1), start_date=START, catchup=False) as stream_runs:
    stream_runs_pipeline(os.path.join(AF_STREAM_ROOT, "incoming"), os.path.join(AF_STREAM_ROOT, "output"),
                         os.path.join(AF_STREAM_ROOT, "checkpoints"), name="af_stream").to_airflow()

from flinkchain_cdc_delta import CDC_URL, cdc_pipeline, gold_pipeline  # noqa: E402

AF_CDC_ROOT = os.path.join(sample_data.home(), "flinkchain", "af_cdc")

# tests/airflow/test_cdc_delta_scheduler.py: $FLINKCHAIN_CDC_URL is the cluster that test starts
with DAG("af_cdc_orders", schedule=datetime.timedelta(minutes=1), start_date=START, catchup=False,
         max_active_runs=1) as cdc_orders:
    cdc_pipeline(CDC_URL, os.path.join(AF_CDC_ROOT, "silver"), os.path.join(AF_CDC_ROOT, "changes"),
                 os.path.join(AF_CDC_ROOT, "checkpoints", "cdc"), name="af_cdc_orders",
                 slot_name="af_cdc_orders").to_airflow()

from airflow.sdk import Asset  # noqa: E402

with DAG("af_orders_gold", schedule=[Asset("file://" + os.path.join(AF_CDC_ROOT, "changes"))], start_date=START,
         catchup=False, max_active_runs=1) as orders_gold:  # a run after each CDC run's commit
    gold_pipeline(os.path.join(AF_CDC_ROOT, "changes"), os.path.join(AF_CDC_ROOT, "gold"),
                  os.path.join(AF_CDC_ROOT, "checkpoints", "gold"), name="af_orders_gold").to_airflow()
