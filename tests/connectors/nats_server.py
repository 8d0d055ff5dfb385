"""The NATS JetStream server of the connector tests (127.0.0.1:4222, or $FLINKCHAIN_TEST_NATS):
a fresh stream per test, deleted afterwards. Without a server (or nats-py) the tests skip,
naming what is missing; in CI (CI=true) they fail instead."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import uuid
from urllib.parse import urlsplit

import pytest

NATS_URL = os.environ.get("FLINKCHAIN_TEST_NATS", "nats://127.0.0.1:4222")


def unavailable(what: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what}; CI must provide it (these tests never skip in CI)")
    pytest.skip(what)


def require_nats() -> None:
    try:
        import nats  # noqa: F401
    except ImportError:
        unavailable("nats-py is not installed (pip install -r requirements.txt)")
    u = urlsplit(NATS_URL)
    try:
        socket.create_connection((u.hostname, u.port or 4222), timeout=2).close()
    except OSError:
        unavailable(f"no NATS server with JetStream at {NATS_URL} (start `nats-server -js`)")


class NatsStream:
    """A JetStream stream of its own: `publish(records, subject=...)` JSON-encodes each record."""

    def __init__(self, name: str, subjects: tuple):
        self.name, self.subjects = name, subjects

    def _run(self, coro_fn):
        import nats

        async def main():
            nc = await nats.connect(NATS_URL)
            try:
                return await coro_fn(nc.jetstream())
            finally:
                await nc.close()

        return asyncio.run(main())

    def create(self) -> "NatsStream":
        async def create(js):
            await js.add_stream(name=self.name, subjects=list(self.subjects))

        self._run(create)
        return self

    def delete(self) -> None:
        async def delete(js):
            await js.delete_stream(self.name)

        self._run(delete)

    def publish(self, records, subject: str) -> None:
        async def publish(js):
            for r in records:
                await js.publish(subject, json.dumps(list(r) if isinstance(r, tuple) else r).encode())

        self._run(publish)

    def publish_payloads(self, payloads, subject: str, headers=None) -> None:
        """Raw payloads (bytes), with `headers` (a dict) on each when given."""
        async def publish(js):
            for data in payloads:
                await js.publish(subject, data, headers=headers)

        self._run(publish)


@pytest.fixture
def nats_stream():
    require_nats()
    tag = uuid.uuid4().hex[:10]
    stream = NatsStream(f"T{tag}", (f"t{tag}.>",)).create()
    yield stream
    stream.delete()
