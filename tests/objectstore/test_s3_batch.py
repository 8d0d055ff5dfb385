"""A batch pipeline with every location on an S3 server (moto) equals its local run."""

from __future__ import annotations

import pytest

from tests.objectstore.s3_pipelines import read_json_dir, totals_pipeline, write_orders

pytestmark = [pytest.mark.s3, pytest.mark.spark]


def test_batch_pipeline_on_s3_equals_local_run(s3_server, spark, tmp_path):
    bucket = f"s3://{s3_server.new_bucket()}"
    write_orders(f"{bucket}/in")
    write_orders(str(tmp_path / "in"))
    local = totals_pipeline(str(tmp_path / "in"), str(tmp_path / "out"))
    local.execute(spark=spark, exchange_root=str(tmp_path / "exchange"))
    remote = totals_pipeline(f"{bucket}/in", f"{bucket}/out")
    remote.execute(spark=spark, exchange_root=f"{bucket}/exchange")
    expected = read_json_dir(str(tmp_path / "out"))
    assert len(expected) == 4
    assert read_json_dir(f"{bucket}/out") == expected
    keys = s3_server.keys(bucket[5:])
    assert [k for k in keys if k.startswith("out/")] and not [k for k in keys if "flinkchain-" in k], keys
