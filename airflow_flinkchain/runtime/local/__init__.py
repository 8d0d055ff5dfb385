"""The in-process runner (`StreamPipeline.execute_local()`): the chain runtime without Spark."""

from airflow_flinkchain.runtime.local.runner import execute_local

__all__ = ["execute_local"]
