"""DAG file of the cluster tests (copied into a temporary dags folder with pipelines.py).

The exchange root comes from FLINKCHAIN_TEST_EXCHANGE_ROOT: a local folder that is
"shared" here because the standalone worker runs on the same machine."""

import os

import pendulum
from airflow.sdk import DAG

from pipelines import word_counts

with DAG("cluster_words", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False) as dag:
    word_counts().to_airflow(
        exchange_root=os.environ.get("FLINKCHAIN_TEST_EXCHANGE_ROOT", "/tmp/flinkchain-cluster-exchange"),
        exchange_root_shared=True,
        keep_exchange=True,
    )
