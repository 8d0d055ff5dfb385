"""Commit points: small objects created only if absent, or replaced only if unchanged since read.

An object store has no atomic rename, so a commit point there is a conditional write:
`If-None-Match: *` to create, `If-Match: <ETag>` to replace (S3; pyarrow.fs cannot send
them, so this goes through boto3, and only for these objects). Locally the same
contract holds with a hard link (create: fails when the name exists) and a rename under
an advisory lock (replace). Another writer that got there first makes the call raise
`CommitConflict`; the caller names what was being committed.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from typing import Optional

from airflow_flinkchain.runtime.exchange import storage
from airflow_flinkchain.runtime.exchange.layout import Location


class CommitConflict(RuntimeError):
    """Another writer created or replaced the object first."""


class ConditionalStore:
    """create_if_absent / replace_if_match on one filesystem; `read` gives the version token."""

    def read(self, loc: Location) -> tuple[Optional[bytes], Optional[str]]:
        raise NotImplementedError

    def create_if_absent(self, loc: Location, data: bytes) -> str:
        raise NotImplementedError

    def replace_if_match(self, loc: Location, data: bytes, token: str) -> str:
        raise NotImplementedError

    def write(self, loc: Location, data: bytes, token: Optional[str]) -> str:
        """Create (token None: nothing was there when read) or replace the version read."""
        return self.create_if_absent(loc, data) if token is None else self.replace_if_match(loc, data, token)


def conditional_store(loc: Location) -> ConditionalStore:
    scheme = storage.scheme_of(loc.uri)
    if scheme in ("s3", "s3a"):
        return S3ConditionalStore()
    if loc.is_local:
        return LocalConditionalStore()
    return CheckedStore()


class CheckedStore(ConditionalStore):
    """Other filesystems (gs://, abfs://, hdfs://; untested): the version is checked before the
    write, not by the store, so two writers racing within that moment are not told apart."""

    def read(self, loc: Location) -> tuple[Optional[bytes], Optional[str]]:
        if not loc.exists():
            return None, None
        data = loc.read_bytes()
        return data, hashlib.sha256(data).hexdigest()

    def create_if_absent(self, loc: Location, data: bytes) -> str:
        if loc.exists():
            raise CommitConflict(f"{loc.uri} exists already")
        loc.write_bytes(data)
        return hashlib.sha256(data).hexdigest()

    def replace_if_match(self, loc: Location, data: bytes, token: str) -> str:
        if self.read(loc)[1] != token:
            raise CommitConflict(f"{loc.uri} was replaced since it was read")
        loc.write_bytes(data)
        return hashlib.sha256(data).hexdigest()


class LocalConditionalStore(ConditionalStore):
    """Content hash as the version; create by link(2), replace by rename(2) under flock."""

    @staticmethod
    def _token(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    def read(self, loc: Location) -> tuple[Optional[bytes], Optional[str]]:
        try:
            with open(loc.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None, None
        return data, self._token(data)

    def _staged(self, loc: Location, data: bytes) -> str:
        os.makedirs(os.path.dirname(loc.path), exist_ok=True)
        tmp = os.path.join(os.path.dirname(loc.path), f".{loc.name}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return tmp

    def create_if_absent(self, loc: Location, data: bytes) -> str:
        tmp = self._staged(loc, data)
        try:
            os.link(tmp, loc.path)
        except FileExistsError:
            raise CommitConflict(f"{loc.uri} exists already") from None
        finally:
            os.unlink(tmp)
        return self._token(data)

    def replace_if_match(self, loc: Location, data: bytes, token: str) -> str:
        import fcntl

        tmp = self._staged(loc, data)
        lock_path = os.path.join(os.path.dirname(loc.path), f".{loc.name}.lock")
        try:
            with open(lock_path, "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                _, current = self.read(loc)
                if current != token:
                    raise CommitConflict(f"{loc.uri} was replaced since it was read")
                os.replace(tmp, loc.path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return self._token(data)


class S3ConditionalStore(ConditionalStore):
    """ETag as the version; PutObject with If-None-Match / If-Match (boto3)."""

    def _client(self):
        try:
            import boto3
        except ImportError:
            raise RuntimeError("commit points on S3 need boto3 (pip install boto3; requirements.txt pins it)") from None
        given = storage.explicit_credentials()  # else boto3's default chain, as pyarrow's
        kwargs = {"endpoint_url": storage.s3_endpoint(), "region_name": storage.s3_region(),
                  "aws_access_key_id": given.get("AWS_ACCESS_KEY_ID"),
                  "aws_secret_access_key": given.get("AWS_SECRET_ACCESS_KEY"),
                  "aws_session_token": given.get("AWS_SESSION_TOKEN")}
        return boto3.client("s3", **{k: v for k, v in kwargs.items() if v})

    @staticmethod
    def _key(loc: Location) -> tuple[str, str]:
        bucket, _, key = loc.path.partition("/")
        return bucket, key

    def read(self, loc: Location) -> tuple[Optional[bytes], Optional[str]]:
        from botocore.exceptions import ClientError

        bucket, key = self._key(loc)
        try:
            got = self._client().get_object(Bucket=bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None, None
            raise
        return got["Body"].read(), got["ETag"]

    def _put(self, loc: Location, data: bytes, **condition: str) -> str:
        from botocore.exceptions import ClientError

        bucket, key = self._key(loc)
        try:
            return self._client().put_object(Bucket=bucket, Key=key, Body=data, **condition)["ETag"]
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412):
                raise CommitConflict(f"{loc.uri}: {code or status} (another writer committed first)") from None
            raise

    def create_if_absent(self, loc: Location, data: bytes) -> str:
        return self._put(loc, data, IfNoneMatch="*")

    def replace_if_match(self, loc: Location, data: bytes, token: str) -> str:
        return self._put(loc, data, IfMatch=token)
