"""PyFlink's `pyflink.datastream.output_tag` (defined in `airflow_flinkchain.functions`)."""

from airflow_flinkchain.functions import OutputTag

__all__ = ["OutputTag"]
