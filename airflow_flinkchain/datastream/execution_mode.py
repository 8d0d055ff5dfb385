"""PyFlink's `pyflink.datastream.execution_mode` (defined in `airflow_flinkchain.common.execution_mode`)."""

from airflow_flinkchain.common.execution_mode import RuntimeExecutionMode

__all__ = ["RuntimeExecutionMode"]
