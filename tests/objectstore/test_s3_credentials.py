"""Object-store credentials and secrets: an Airflow `aws` connection as the storage
credentials, connector connections, and descriptions that never show a secret."""

from __future__ import annotations

import json
import os

import pytest

from airflow_flinkchain.io.sources import NatsJetStreamSource, PostgresCdcSource
from airflow_flinkchain.runtime.exchange import storage
from airflow_flinkchain.runtime.exchange.layout import Location
from tests.connectors.nats_server import nats_stream  # noqa: F401 (fixture)

pytestmark = [pytest.mark.s3]


@pytest.fixture
def no_aws_env(s3_server, monkeypatch, tmp_path):
    """The process without any AWS setting (no environment, no profile): only what the test gives."""
    for k in storage.AWS_ENV + ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_EC2_METADATA_DISABLED"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield s3_server
    storage.use_credentials(None)


def test_an_airflow_aws_connection_is_the_storage_credentials(no_aws_env, monkeypatch):
    from airflow_flinkchain.airflow import storage_credentials
    from tests.s3_server import ACCESS_KEY, REGION, SECRET_KEY

    server = no_aws_env
    bucket = server.new_bucket()
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_STORE", json.dumps({
        "conn_type": "aws", "login": ACCESS_KEY, "password": SECRET_KEY,
        "extra": {"region_name": REGION, "endpoint_url": server.endpoint}}))
    env = storage_credentials.apply("lake_store", "pipeline 'p'")
    assert env == {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_REGION": REGION,
                   "AWS_ENDPOINT_URL": server.endpoint}
    loc = Location(f"s3://{bucket}/exchange/x.json")
    loc.write_text("{}")
    assert Location(f"s3://{bucket}/exchange").list_files() == [f"{bucket}/exchange/x.json"]
    assert os.environ.get("AWS_SECRET_ACCESS_KEY") is None  # this process's layer only; spark-submit gets `env`
    assert storage.executor_env_conf()["spark.executorEnv.AWS_SECRET_ACCESS_KEY"] == SECRET_KEY
    # the pipeline setting wins over [flinkchain] storage_conn_id
    monkeypatch.setenv("AIRFLOW__FLINKCHAIN__STORAGE_CONN_ID", "other")
    assert storage_credentials.storage_conn_id("lake_store") == "lake_store"
    assert storage_credentials.storage_conn_id(None) == "other"


def test_the_executor_env_secrets_match_sparks_redaction_regex():
    import re

    default_regex = r"(?i)secret|password|token|access[.]?key"  # Spark's spark.redaction.regex default
    storage.use_credentials({"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "s", "AWS_SESSION_TOKEN": "t"})
    try:
        secret_keys = [k for k in storage.executor_env_conf() if k.split(".")[-1] in storage.SECRET_ENV]
        assert len(secret_keys) == 2 and all(re.search(default_regex, k) for k in secret_keys)
    finally:
        storage.use_credentials(None)


def test_descriptions_never_show_a_password_or_token():
    assert "password" not in NatsJetStreamSource(servers="nats://user:password@host:4222").describe()
    assert "t0ken" not in NatsJetStreamSource(servers=["nats://t0ken@a:4222", "nats://b:4222"]).describe()
    assert "secret" not in PostgresCdcSource("postgresql://cdc:secret@db/shop").describe()
    assert PostgresCdcSource(conn_id="shop").describe().endswith("at connection shop (slot flinkchain)")
    with pytest.raises(ValueError, match="exactly one of url= or conn_id="):
        PostgresCdcSource()


def test_nats_source_reads_through_an_airflow_connection(nats_stream, monkeypatch):
    """conn_id: the chain task hands the connection's URI over in the environment (as SQL's)."""
    from airflow_flinkchain import StreamPipeline
    from airflow_flinkchain.runtime.connectors.nats_jetstream import connect_options
    from airflow_flinkchain.runtime.connectors.sql import conn_url_env
    from tests.connectors.nats_server import NATS_URL

    stream = nats_stream
    subject = stream.subjects[0].replace(">", "a")
    stream.publish([{"n": i} for i in range(5)], subject=subject)
    monkeypatch.setenv(conn_url_env("mq"), NATS_URL.replace("nats://", "nats://app:pw%40x@"))
    src = NatsJetStreamSource(conn_id="mq", stream=stream.name)
    opts = connect_options(src, "here")
    assert opts["user"] == "app" and opts["password"] == "pw@x" and "pw" not in src.describe()
    monkeypatch.setenv(conn_url_env("mq"), NATS_URL)  # the test server has no authentication
    p = StreamPipeline("nats_conn", runtime_mode="streaming", checkpoint_dir=None)
    p.from_source(NatsJetStreamSource(conn_id="mq", stream=stream.name), name="mq").collect("out")
    assert sorted(r["n"] for r in p.execute_local().output("out")) == list(range(5))
