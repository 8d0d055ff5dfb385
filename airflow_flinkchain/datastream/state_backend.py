"""PyFlink's `pyflink.datastream.state_backend` (defined in `airflow_flinkchain.state_backend`)."""

from airflow_flinkchain.state_backend import (EmbeddedRocksDBStateBackend, HashMapStateBackend, PredefinedOptions,
                                              StateBackend)

__all__ = ["StateBackend", "HashMapStateBackend", "EmbeddedRocksDBStateBackend", "PredefinedOptions"]
