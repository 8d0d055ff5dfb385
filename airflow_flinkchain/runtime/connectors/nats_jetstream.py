"""NATS JetStream at run time (nats-py): the splits of a `NatsJetStreamSource`.

A split is the whole stream (split id = the stream's name) or one subject filter; its
position is the next stream sequence to read. `discover` reads the stream's state: every
split ends at the stream's last sequence + 1 when the run began. `read_split` creates an
ephemeral pull consumer (no acknowledgements, deleted at the end, and dropped by the server
after a minute of inactivity anyway) starting at the range's first sequence and filtered
to the split's subject, and reads until the range's end or until nothing matching is
pending, in pull requests of many messages (nats_fetch) whose payloads are decoded per
request. The checkpoint is the only record of what was read.
"""

from __future__ import annotations

import asyncio
import json
from bisect import bisect_left
from itertools import chain
from typing import Any, Iterator

from airflow_flinkchain.io.sources import NatsJetStreamSource
from airflow_flinkchain.runtime.connectors.unbounded import register_unbounded
from airflow_flinkchain.runtime.core.elements import StreamRecord

CONNECT_TIMEOUT_S = 5
#: messages per pull request at most, and the payload bytes a request aims at: its size is
#: these bytes over the mean message size (the stream's, then the last request's) (docs/connectors.md)
FETCH_BATCH = 20_000
FETCH_BYTES = 8 << 20
#: a pull request that gets no message for this long fails the read
FETCH_TIMEOUT_S = 10


def _nats():
    try:
        import nats  # noqa: F401
    except ImportError as exc:
        raise RuntimeError("NatsJetStreamSource needs the nats-py package (pip install nats-py)") from exc
    return nats


def connect_options(source: NatsJetStreamSource, where: str) -> dict:
    """nats.connect() arguments: the servers, or the Airflow connection `conn_id` handed over by
    the chain task (its URI in the environment, as SQL connections'), a credentials file, TLS."""
    from urllib.parse import parse_qs, urlsplit

    from airflow_flinkchain.runtime.connectors.sql import connection_url

    opts: dict = {"servers": list(source.servers)}
    extra: dict = {}
    if source.conn_id:
        u = urlsplit(connection_url(None, source.conn_id, where))
        extra = {k: v[-1] for k, v in parse_qs(u.query).items()}
        if "__extra__" in extra:  # Airflow's URI form of a nested extra
            extra = json.loads(extra["__extra__"])
        scheme = "tls" if extra.get("tls_ca_file") or extra.get("tls_cert_file") else "nats"
        opts["servers"] = [f"{scheme}://{u.hostname}:{u.port or 4222}"]
        if u.username and u.password:
            opts.update(user=unquote(u.username), password=unquote(u.password))
        elif u.password or u.username or extra.get("token"):
            opts["token"] = extra.get("token") or unquote(u.password or u.username)
    creds = source.user_credentials or extra.get("user_credentials")
    if creds:
        opts["user_credentials"] = creds
    ca, cert, key = (getattr(source, f) or extra.get(f) for f in ("tls_ca_file", "tls_cert_file", "tls_key_file"))
    if ca or cert:
        import ssl

        ctx = ssl.create_default_context(cafile=ca)
        if cert:
            ctx.load_cert_chain(cert, key)
        opts["tls"] = ctx
    return opts


_SCAN = json.JSONDecoder().scan_once


def json_values(texts: list) -> list:
    """json.loads of each text; the scanner called directly (json.loads adds two whitespace
    matches per call), json.loads where the scanner does not take the whole text."""
    scan, values = _SCAN, []
    append = values.append
    for text in texts:
        try:
            value, end = scan(text, 0)
        except StopIteration:
            end = -1
        append(value if end == len(text) else json.loads(text))
    return values


def unquote(text: str) -> str:
    from urllib.parse import unquote as unq

    return unq(text)


@register_unbounded(NatsJetStreamSource)
class NatsJetStreamSplits:
    """discover / initial_position / read_split of one NatsJetStreamSource."""

    def __init__(self, source: NatsJetStreamSource):
        self.source = source
        self.where = f"NatsJetStreamSource(stream={source.stream!r}) at {source.describe().rsplit(' at ', 1)[-1]}"

    def initial_position(self, split_id: str) -> int:
        return self.source.initial_position(split_id)

    def discover(self, positions: dict) -> dict:
        state = asyncio.run(self._stream_state())
        first, last = state.first_seq, state.last_seq
        for split_id, position in sorted(positions.items()):
            if position < first and position <= last:
                raise RuntimeError(
                    f"{self.where}: messages {position}..{first - 1} were removed from the stream (retention "
                    f"limits or a purge) before this pipeline read them (split {split_id!r} is at sequence "
                    f"{position}); give the stream a longer retention, or reset the pipeline (delete its "
                    "checkpoint_dir) to start again from the stream's first message")
        return {split_id: last + 1 for split_id in (self.source.subjects or (self.source.stream,))}

    def read_split(self, split_id: str, start: int, end: int) -> Iterator[StreamRecord]:
        return chain.from_iterable(self._batches(split_id, start, end))  # records: no generator frame each

    def _batches(self, split_id: str, start: int, end: int) -> Iterator[Iterator[StreamRecord]]:
        """The split's records from `start` to `end`, one iterator per pull request."""
        if start >= end:
            return
        loop = asyncio.new_event_loop()
        nc = loop.run_until_complete(self._connect())
        consumer = None
        try:
            consumer = loop.run_until_complete(self._subscribe(nc, split_id, start))
            name, sub, pending, message_bytes = consumer
            position = start
            while pending > 0 and position < end:
                batch = min(FETCH_BATCH, end - position, pending, max(1, FETCH_BYTES // max(1, message_bytes)))
                fetched = loop.run_until_complete(self._fetch(nc, name, sub, batch, split_id, position, pending))
                if not fetched:
                    code, text = fetched.status or (0, "")
                    raise RuntimeError(f"{self.where}: the server delivered no message of split {split_id!r} from "
                                       f"sequence {position} although {pending} were pending ({code} {text}); "
                                       "were messages deleted meanwhile?")
                last = fetched.seq(-1)
                keep = len(fetched) if last < end else bisect_left(fetched.seqs(), end)
                yield self._records(fetched, keep)
                position, pending = last + 1, fetched.pending()
                message_bytes = sum(map(len, fetched.payloads)) // len(fetched)
        finally:
            loop.run_until_complete(self._close(nc, consumer))
            loop.close()

    def _records(self, fetched, keep: int) -> Iterator[StreamRecord]:
        """The first `keep` messages of a fetch as records: payloads decoded per batch, each
        message's JetStream timestamp (ms) its timestamp."""
        payloads = fetched.payloads if keep == len(fetched.payloads) else fetched.payloads[:keep]
        fmt = self.source.value_format
        try:
            if fmt == "bytes":
                values = payloads
            else:
                values = list(map(bytes.decode, payloads))
                if fmt == "json":
                    values = json_values(values)
        except ValueError:
            for data, seq in zip(payloads, fetched.seqs()):
                self._value(data, seq)  # raises naming the first message that fails
            raise
        return map(StreamRecord, values, fetched.stamps(keep))

    async def _fetch(self, nc, consumer: str, sub, batch: int, split_id: str, position: int, pending: int):
        try:
            return await nc.fetch(self.source.stream, consumer, sub, batch, FETCH_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise RuntimeError(f"{self.where}: no message within {FETCH_TIMEOUT_S}s while reading split "
                               f"{split_id!r} from sequence {position}, although {pending} were pending; "
                               "were messages deleted meanwhile?") from None

    def _value(self, data: bytes, seq: int) -> Any:
        fmt = self.source.value_format
        if fmt == "bytes":
            return data
        try:
            text = data.decode("utf-8")
            return json.loads(text) if fmt == "json" else text
        except ValueError as exc:
            raise ValueError(f"{self.where}: message {seq} is not {'JSON' if fmt == 'json' else 'UTF-8'} "
                             f"({exc}); pick value_format='string' or 'bytes' for such payloads") from None

    async def _connect(self):
        _nats()
        from airflow_flinkchain.runtime.connectors.nats_fetch import FetchClient

        async def quiet(_exc):  # errors are raised below, not printed by the client
            return None

        try:
            # one attempt per server (allow_reconnect=False would retry the first connect forever)
            nc = FetchClient()
            await asyncio.wait_for(nc.connect(**connect_options(self.source, self.where),
                                              connect_timeout=CONNECT_TIMEOUT_S, max_reconnect_attempts=1,
                                              reconnect_time_wait=0.1, error_cb=quiet),
                                   timeout=CONNECT_TIMEOUT_S * (len(self.source.servers) + 1))
            return nc
        except Exception as exc:
            raise ConnectionError(f"{self.where}: cannot connect to the NATS server ({type(exc).__name__}: "
                                  f"{exc}); is nats-server running (with JetStream: nats-server -js) and "
                                  "reachable at that address?") from None

    async def _stream_state(self):
        nats = _nats()
        nc = await self._connect()
        try:
            info = await nc.jetstream().stream_info(self.source.stream)
        except nats.js.errors.NotFoundError:
            raise LookupError(f"{self.where}: stream {self.source.stream!r} does not exist; create it (e.g. "
                              f"`nats stream add {self.source.stream} --subjects ...`) or fix the name") from None
        except nats.js.errors.ServiceUnavailableError:
            raise ConnectionError(f"{self.where}: JetStream is not enabled on the server; start nats-server "
                                  "with -js") from None
        finally:
            await nc.close()
        return info.state

    async def _subscribe(self, nc, split_id: str, start: int):
        from nats.js import api

        js = nc.jetstream()
        config = api.ConsumerConfig(deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start,
                                    ack_policy=api.AckPolicy.NONE, inactive_threshold=60.0, mem_storage=True,
                                    filter_subject=split_id if self.source.subjects else None)
        state = (await js.stream_info(self.source.stream)).state
        info = await js.add_consumer(self.source.stream, config=config)
        return info.name, await nc.subscribe(nc.new_inbox()), info.num_pending, state.bytes // max(1, state.messages)

    async def _close(self, nc, consumer) -> None:
        try:
            if consumer is not None:
                name, sub = consumer[:2]
                await sub.unsubscribe()
                await nc.jetstream().delete_consumer(self.source.stream, name)
        except Exception:  # noqa: BLE001  (an ephemeral consumer the server drops by itself when idle)
            pass
        finally:
            await nc.close()
