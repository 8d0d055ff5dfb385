"""airflow-flinkchain: Flink-style operator chaining for Airflow, chains run on Spark.

Importing this package imports neither Airflow nor Spark (DAG parsing stays fast).
"""

from airflow_flinkchain.functions import OutputTag
from airflow_flinkchain.api.pipeline import StreamPipeline
from airflow_flinkchain.api.datastream import DataStream, KeyedStream

__all__ = ["StreamPipeline", "DataStream", "KeyedStream", "OutputTag"]
__version__ = "0.1.0"
