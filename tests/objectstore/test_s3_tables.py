"""Delta and Iceberg sinks writing to tables on an S3 server (moto), with the storage layer's
credentials: stream runs plus a drain, each table holding exactly the windows once."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.objectstore.s3_pipelines import EVENTS, as_row, tables_pipeline, write_events
from tests.streamruns.cases import slices

pytestmark = [pytest.mark.s3]


def test_delta_and_iceberg_sinks_write_tables_on_s3(s3_server, tmp_path):
    import deltalake
    from pyiceberg.catalog import load_catalog

    from airflow_flinkchain.runtime.exchange.storage import delta_storage_options, iceberg_io_properties

    bucket = f"s3://{s3_server.new_bucket()}"
    source, ckpt, delta = f"{bucket}/in", f"{bucket}/checkpoints", f"{bucket}/tables/windows"
    catalog = {"name": "s3test", "type": "sql", "uri": f"sqlite:///{tmp_path / 'catalog.db'}",
               "warehouse": f"{bucket}/warehouse"}
    windows = []
    for k, part in enumerate(slices(EVENTS, 3)):
        write_events(source, k, part)
        res = tables_pipeline(source, ckpt, delta, catalog).execute_local(run_id=f"r{k}", drain=k == 2)
        windows.extend(as_row(w) for w in res.output("windows"))
    want = Counter(tuple(sorted(r.items())) for r in windows)
    assert sum(want.values()) > 10
    table = deltalake.DeltaTable(delta, storage_options=delta_storage_options(delta))
    assert Counter(tuple(sorted(r.items())) for r in table.to_pyarrow_table().to_pylist()) == want
    assert len(table.history()) == 3  # one commit per run
    from airflow_flinkchain.runtime.connectors.delta import pyarrow_dataset

    read = pyarrow_dataset(table, delta).to_table().to_pylist()  # DeltaSource's read: the layer's S3 filesystem
    assert Counter(tuple(sorted(r.items())) for r in read) == want
    ice = load_catalog("s3test", **iceberg_io_properties(), **{k: v for k, v in catalog.items() if k != "name"})
    rows = ice.load_table("shop.windows").scan().to_arrow().to_pylist()
    assert Counter(tuple(sorted(r.items())) for r in rows) == want
    keys = s3_server.keys(bucket[5:])
    assert any(k.startswith("tables/windows/_delta_log/") for k in keys)
    assert any(k.startswith("warehouse/") and k.endswith(".parquet") for k in keys)
