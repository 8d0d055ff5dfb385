"""Flink's execution mode (PyFlink's `pyflink.datastream.execution_mode`; defined here so that
`airflow_flinkchain.common` offers it too without importing the authoring API)."""

from enum import Enum


class RuntimeExecutionMode(Enum):
    STREAMING = 0
    BATCH = 1
    AUTOMATIC = 2
