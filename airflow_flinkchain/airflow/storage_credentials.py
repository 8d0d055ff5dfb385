"""Object-store credentials from an Airflow connection (`aws` type), for every task of a run.

Without a connection the standard AWS chain (environment, profile, instance role) is used
and nothing is set here. With `[flinkchain] storage_conn_id` (env
`AIRFLOW__FLINKCHAIN__STORAGE_CONN_ID`) or the pipeline's `storage_conn_id=`, each task
resolves the connection at run time and hands its credentials to the storage layer of its
own process (`runtime.exchange.storage.use_credentials`) and to spark-submit through its
environment only (the driver passes them on to executors as `spark.executorEnv.*`,
redacted by Spark's `spark.redaction.regex`). They are never written to the plan, the run
store, XCom or the task log.
"""

from __future__ import annotations

from typing import Optional

from airflow_flinkchain.airflow.compat import AirflowFailException, conf_get, get_connection


def storage_conn_id(pipeline_setting: Optional[str]) -> Optional[str]:
    return pipeline_setting or conf_get("flinkchain", "storage_conn_id", fallback=None) or None


def aws_env(conn_id: str, where: str) -> dict[str, str]:
    """The AWS_* variables of Airflow connection `conn_id`: login/password (or the Amazon
    provider's extra `aws_access_key_id` / `aws_secret_access_key`), extra `aws_session_token`,
    `region_name` and `endpoint_url`."""
    try:
        conn = get_connection(conn_id)
    except Exception as exc:
        raise AirflowFailException(f"{where}: storage connection {conn_id!r} is not defined ({type(exc).__name__}); "
                                   "create it (type aws: login = access key id, password = secret access key, "
                                   "extra region_name / endpoint_url) or unset storage_conn_id to use the "
                                   "standard AWS credential chain") from None
    extra = conn.extra_dejson or {}
    env = {
        "AWS_ACCESS_KEY_ID": conn.login or extra.get("aws_access_key_id"),
        "AWS_SECRET_ACCESS_KEY": conn.password or extra.get("aws_secret_access_key"),
        "AWS_SESSION_TOKEN": extra.get("aws_session_token"),
        "AWS_REGION": extra.get("region_name"),
        "AWS_ENDPOINT_URL": extra.get("endpoint_url") or (extra.get("service_config") or {}).get("s3", {}).get(
            "endpoint_url"),
    }
    return {k: str(v) for k, v in env.items() if v}


def apply(pipeline_setting: Optional[str], where: str) -> dict[str, str]:
    """Resolve the storage connection (if any) for this task's process; returns its AWS_* env."""
    from airflow_flinkchain.runtime.exchange import storage

    conn_id = storage_conn_id(pipeline_setting)
    env = aws_env(conn_id, where) if conn_id else {}
    storage.use_credentials(env)
    return env
