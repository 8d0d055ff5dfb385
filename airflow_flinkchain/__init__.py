"""airflow-flinkchain: Flink-style operator chaining for Airflow, chains run on Spark.

Importing this package imports neither Airflow nor Spark (DAG parsing stays fast).
"""

from airflow_flinkchain.functions import OutputTag
from airflow_flinkchain.api.pipeline import StreamPipeline
from airflow_flinkchain.api.datastream import DataStream, KeyedStream
from airflow_flinkchain.graph.errors import PlanningError, PlanningWarning

__all__ = ["StreamPipeline", "DataStream", "KeyedStream", "OutputTag", "PlanningError", "PlanningWarning"]
__version__ = "0.1.0"
