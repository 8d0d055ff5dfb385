"""Connectors at run time: the implementations behind the `io/` descriptors,
looked up by descriptor type (see `base`). Importing this package registers
the built-in ones."""

from airflow_flinkchain.runtime.connectors.base import (ConnectorContext, SinkConnector, SourceReader, register_sink,
                                                       register_source, sink_connector, source_reader)
from airflow_flinkchain.runtime.connectors import (collect, collection, delta, files, iceberg,  # noqa: F401
                                                  nats_jetstream, postgres_cdc, sql, text_lines,
                                                  unbounded)  # (registration)

__all__ = ["ConnectorContext", "SinkConnector", "SourceReader", "register_sink", "register_source",
           "sink_connector", "source_reader"]
