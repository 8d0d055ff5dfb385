"""The storage layer: the one place that turns a URI into a filesystem with its credentials.

Every location of a pipeline (exchange root, checkpoint_dir, file sources and sinks,
dead-letter outputs, Delta and Iceberg tables) goes through here, via `Location`.
A plain path or `file://` is the local filesystem; `s3://bucket/prefix` is
`pyarrow.fs.S3FileSystem`; `gs://`, `abfs://`, `hdfs://` are what
`pyarrow.fs.FileSystem.from_uri` builds (same layer, untested here).

S3 is configured the standard AWS way: the AWS SDK's default credential chain
(environment, profile, instance role) unless credentials were given for this process
(`use_credentials`, which the Airflow side calls with an `aws` connection); the
endpoint from `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` and the region from
`AWS_REGION` / `AWS_DEFAULT_REGION`. Credentials are never part of a URI, a plan
or a record: they live in the process environment (`CREDENTIAL_ENV`) and Spark
hands them to executors through `spark.executorEnv.*` (`executor_env_conf`).
"""

from __future__ import annotations

import os
import threading
from typing import Optional
from urllib.parse import urlsplit

import pyarrow.fs as pafs

#: the variables of the standard AWS configuration this layer reads; the secret ones
#: are redacted wherever the project prints an environment or a Spark conf
AWS_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
           "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE")
SECRET_ENV = frozenset({"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"})
OBJECT_STORE_SCHEMES = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "abfss", "az"})

_override: dict[str, str] = {}
_cache: dict = {}
_lock = threading.Lock()


def use_credentials(env: Optional[dict]) -> None:
    """Credentials for this process (AWS_* names, e.g. from an Airflow `aws` connection),
    taking precedence over the environment; None or {} goes back to the default chain."""
    with _lock:
        _override.clear()
        _override.update({k: str(v) for k, v in (env or {}).items() if v not in (None, "")})
        _cache.clear()


def explicit_credentials() -> dict[str, str]:
    """The credentials given by `use_credentials` ({} when the default chain applies)."""
    return {k: v for k, v in _override.items() if k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                                         "AWS_SESSION_TOKEN")}


def setting(name: str) -> Optional[str]:
    return _override.get(name) or os.environ.get(name) or None


def storage_env() -> dict[str, str]:
    """The AWS_* settings in effect for this process (override, then environment)."""
    return {k: v for k in AWS_ENV if (v := setting(k))}


def scheme_of(uri: str) -> str:
    return urlsplit(uri).scheme.lower() if "://" in uri else ""


def is_object_store(uri: str) -> bool:
    """An object store: no atomic rename, commits are conditional writes (`conditional`)."""
    return scheme_of(uri) in OBJECT_STORE_SCHEMES


def s3_endpoint() -> Optional[str]:
    return setting("AWS_ENDPOINT_URL_S3") or setting("AWS_ENDPOINT_URL")


def s3_region() -> Optional[str]:
    return setting("AWS_REGION") or setting("AWS_DEFAULT_REGION")


def _s3_filesystem() -> pafs.S3FileSystem:
    kwargs: dict = {}
    endpoint = s3_endpoint()
    if endpoint:
        u = urlsplit(endpoint if "://" in endpoint else "https://" + endpoint)
        kwargs.update(endpoint_override=u.netloc, scheme=u.scheme or "https")
    if s3_region():
        kwargs["region"] = s3_region()
    if _override.get("AWS_ACCESS_KEY_ID"):
        kwargs.update(access_key=_override["AWS_ACCESS_KEY_ID"], secret_key=_override.get("AWS_SECRET_ACCESS_KEY"),
                      session_token=_override.get("AWS_SESSION_TOKEN"))
    return pafs.S3FileSystem(**kwargs)


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path on it) of a URI or plain path."""
    scheme = scheme_of(uri)
    if scheme in ("s3", "s3a"):
        u = urlsplit(uri)
        with _lock:
            key = ("s3", tuple(sorted(storage_env().items())))
            fs = _cache.get(key)
            if fs is None:
                fs = _cache[key] = _s3_filesystem()
        return fs, (u.netloc + u.path).rstrip("/") or u.netloc
    return pafs.FileSystem.from_uri(uri if scheme else os.path.abspath(uri))


def delta_storage_options(uri: str, explicit: Optional[dict] = None) -> Optional[dict]:
    """delta-rs storage options of a table URI: this layer's S3 settings, then the table's own.
    Commits are conditional puts (`conditional_put: etag`), delta-rs's safe mode on S3;
    an unsafe rename (`AWS_S3_ALLOW_UNSAFE_RENAME`) is never set here."""
    if scheme_of(uri) not in ("s3", "s3a"):
        return dict(explicit) if explicit else None
    opts: dict[str, str] = {}
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        if _override.get(name):
            opts[name] = _override[name]
    if s3_region():
        opts["AWS_REGION"] = s3_region()
    endpoint = s3_endpoint()
    if endpoint:
        opts["AWS_ENDPOINT_URL"] = endpoint
        if endpoint.startswith("http://"):
            opts["AWS_ALLOW_HTTP"] = "true"
    opts["conditional_put"] = "etag"
    opts.update({k: str(v) for k, v in (explicit or {}).items()})
    if str(opts.get("AWS_S3_ALLOW_UNSAFE_RENAME", "")).lower() == "true":
        raise ValueError(f"Delta table {uri!r}: AWS_S3_ALLOW_UNSAFE_RENAME would let two writers overwrite each "
                         "other's commit; drop it (commits use S3 conditional writes)")
    return opts


def iceberg_io_properties(uri: Optional[str] = None) -> dict[str, str]:
    """pyiceberg FileIO properties (its pyarrow FileIO) for this layer's S3 settings."""
    props = {"py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO"}
    if s3_endpoint():
        props["s3.endpoint"] = s3_endpoint()
    if s3_region():
        props["s3.region"] = s3_region()
    for name, prop in (("AWS_ACCESS_KEY_ID", "s3.access-key-id"), ("AWS_SECRET_ACCESS_KEY", "s3.secret-access-key"),
                       ("AWS_SESSION_TOKEN", "s3.session-token")):
        if setting(name):
            props[prop] = setting(name)
    return props


def executor_env_conf() -> dict[str, str]:
    """Spark conf that hands this process's storage settings to the executors
    (`spark.executorEnv.*`; Spark's `spark.redaction.regex` hides the secret ones)."""
    return {f"spark.executorEnv.{k}": v for k, v in storage_env().items()}


def redact_env(env: dict) -> dict:
    return {k: ("*****" if k in SECRET_ENV or "PASSWORD" in k.upper() or "SECRET" in k.upper() else v)
            for k, v in env.items()}
