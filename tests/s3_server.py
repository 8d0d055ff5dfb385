"""The tests' S3 server: the one `make demo DEMO_ARGS=cluster` starts too
(airflow_flinkchain/localcluster/s3_server.py)."""

from airflow_flinkchain.localcluster.s3_server import ACCESS_KEY, REGION, SECRET_KEY, S3Server, free_port

__all__ = ["ACCESS_KEY", "REGION", "SECRET_KEY", "S3Server", "free_port"]
