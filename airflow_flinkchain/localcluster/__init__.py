"""Throwaway clusters on 127.0.0.1 for the cluster tests, `make demo DEMO_ARGS=cluster` and the
cluster benchmark: a Spark standalone master and workers from the installed pyspark
(standalone.py), each worker optionally in a private mount namespace (mounts.py), and an S3
server (s3_server.py). Nothing here is used by pipelines."""
