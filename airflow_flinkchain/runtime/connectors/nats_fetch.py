"""Bulk pull requests on a JetStream consumer over a nats-py connection.

nats-py turns every delivered message into a `Msg` on a subscription queue that a
coroutine awaits one by one: tens of microseconds per message. `FetchClient` is
nats-py's client with `FetchParser`, a protocol parser that reads the frames of the
fetch inbox straight into lists (stream sequence, timestamp and payload of each
message, from the frame's `$JS.ACK` reply subject); every other frame (PING, INFO,
JetStream API replies) goes, one complete frame at a time, to nats-py's own parser.

`fetch` sends one pull request (`batch` messages, `no_wait`) and returns when the server
delivered the batch or ended the request with a status (404 nothing available, 408 fewer
than asked available). No `max_bytes`: a request whose byte budget runs out exactly ends
without a status (nats-server 2.9), indistinguishable from one still arriving; the reader
sizes its requests from the message sizes instead. Only one request is in flight, and only
while the reader reads: a consumer that stops reading with data in flight is cut off by the
server as a slow consumer.
"""

from __future__ import annotations

import asyncio
import json
import re
from operator import methodcaller
from typing import Iterator, Optional

from nats.aio.client import Client
from nats.protocol.parser import AWAITING_CONTROL_LINE, CRLF_SIZE, MAX_CONTROL_LINE_SIZE, Parser, ProtocolError

API_PREFIX = "$JS.API"
_OPS_WITH_PAYLOAD = (b"MSG ", b"HMSG ")
#: the reply subject of a JetStream message: ...<consumer>.<delivered>.<stream seq>.<consumer seq>.
#: <timestamp ns>.<pending>[.<token>] (v1 and v2 formats); the timestamp captured in milliseconds
_ACK_TAIL = rb"\.\d+\.(\d+)\.\d+\.(\d+)\d{6}\.(\d+)(?:\.[^ .]+)?"
_GROUP_1, _GROUP_2 = methodcaller("group", 1), methodcaller("group", 2)


class FetchError(RuntimeError):
    """A frame on the fetch subscription that is neither a JetStream message nor a status."""


class Fetched:
    """One pull request's messages: per message the regex match of its frame (groups 1, 2, 3:
    stream sequence, timestamp in ms, messages pending after it, as ASCII digits; converted
    for the messages the reader keeps) and its payload."""

    __slots__ = ("want", "metas", "payloads", "status", "done")

    def __init__(self, want: int, done: asyncio.Future):
        self.want = want
        self.metas: list = []
        self.payloads: list = []
        self.status: Optional[tuple[int, str]] = None  # (code, description) that ended the request
        self.done = done

    def __len__(self) -> int:
        return len(self.metas)

    def seq(self, i: int) -> int:
        return int(self.metas[i].group(1))

    def seqs(self) -> list:
        return list(map(int, map(_GROUP_1, self.metas)))

    def stamps(self, keep: int) -> Iterator[int]:
        return map(int, map(_GROUP_2, self.metas[:keep]))

    def pending(self) -> int:
        """Messages of the consumer after the last one fetched."""
        return int(self.metas[-1].group(3))

    def finish(self, status: Optional[tuple[int, str]] = None) -> None:
        self.status = status
        if not self.done.done():
            self.done.set_result(None)

    def fail(self, what: str) -> None:
        if not self.done.done():
            self.done.set_exception(FetchError(what))


class FetchParser(Parser):
    """nats-py's parser with a fast path for the frames of one subscription (see the module docstring)."""

    def __init__(self, nc=None) -> None:
        super().__init__(nc)
        self.fetch: Optional[Fetched] = None
        self.sid = b""
        self._msg = self._reply = None

    def listen(self, sid: int, consumer: str) -> None:
        """Read the frames of subscription `sid` (messages of JetStream consumer `consumer`)."""
        self.sid = str(sid).encode()
        tail = re.escape(consumer.encode()) + _ACK_TAIL
        self._msg = re.compile(rb"MSG [^ ]+ " + self.sid + rb" \$JS\.ACK\.[^ ]*?\." + tail + rb" (\d+)\r\n").match
        self._reply = re.compile(rb"\$JS\.ACK\.[^ ]*?\." + tail + rb"\Z").match

    async def parse(self, data: bytes = b"") -> None:
        if self._msg is None:
            return await super().parse(data)
        if self.state != AWAITING_CONTROL_LINE:  # nats-py's parser amid a frame: only that frame's rest
            rest = self.needed + CRLF_SIZE - len(self.buf)
            await super().parse(data[:rest])
            data = data[rest:]
            if self.state != AWAITING_CONTROL_LINE or not data:
                return
        buf = bytes(self.buf) + data if self.buf else data
        self.buf = bytearray()
        pos, n, match = 0, len(buf), self._msg
        fetch = self.fetch if self.fetch is not None else Fetched(0, None)  # none in progress: dropped
        metas_append, payloads_append = fetch.metas.append, fetch.payloads.append
        try:
            while pos < n:
                m = match(buf, pos)
                if m is not None:  # a message of the fetch inbox
                    start = m.end()
                    stop = start + int(m.group(4))
                    if stop + 2 > n:
                        break
                    metas_append(m)
                    payloads_append(buf[start:stop])
                    pos = stop + 2
                    continue
                line_end = buf.find(b"\r\n", pos)
                if line_end < 0:
                    if n - pos > MAX_CONTROL_LINE_SIZE:
                        raise ProtocolError("nats: unknown protocol")
                    break
                end = line_end + 2
                if buf.startswith(_OPS_WITH_PAYLOAD, pos):
                    end += int(buf[buf.rfind(b" ", pos, line_end) + 1:line_end]) + 2
                    if end > n:
                        break
                    control = buf[pos:line_end].split()
                    if control[2] == self.sid:
                        if control[0] == b"HMSG":
                            self._headed(control, buf[line_end + 2:end - 2])
                        elif self.fetch is not None:
                            self.fetch.fail(f"nats: unexpected message on the fetch inbox: {buf[pos:line_end]!r}")
                        pos = end
                        continue
                self.buf = bytearray(buf[pos:end])  # one complete frame for nats-py's parser
                pos = end
                await super().parse()
        finally:
            self.buf = bytearray(buf[pos:]) + self.buf
            if self.fetch is fetch and len(fetch.metas) >= fetch.want:
                fetch.finish()

    def _headed(self, control: list, frame: bytes) -> None:
        """A frame with headers on the fetch inbox: a message published with headers (it has
        the $JS.ACK reply subject), or the status that ends the request."""
        header_size = int(control[-2])
        if len(control) == 6 and self.fetch is not None:  # HMSG subject sid reply hdr_len total_len
            m = self._reply(control[3])
            if m is None:
                self.fetch.fail(f"nats: unexpected reply subject {control[3]!r} on the fetch inbox")
            else:
                self.fetch.metas.append(m)
                self.fetch.payloads.append(frame[header_size:])
        elif self.fetch is not None:  # "NATS/1.0 404 No Messages\r\n..."
            status = frame[:header_size].split(b"\r\n", 1)[0].split(b" ", 2)
            code = int(status[1]) if len(status) > 1 and status[1].isdigit() else 0
            if code != 100:  # 100: an idle heartbeat (none is asked for)
                self.fetch.finish((code, status[2].decode(errors="replace") if len(status) > 2 else ""))


class FetchClient(Client):
    """nats-py's client with the `FetchParser`."""

    def __init__(self) -> None:
        super().__init__()
        self._ps = FetchParser(self)

    async def fetch(self, stream: str, consumer: str, sub, batch: int, idle_timeout: float) -> Fetched:
        """One pull request on consumer `consumer` of `stream`, delivered to subscription `sub` (its
        own inbox): up to `batch` messages. Raises
        asyncio.TimeoutError when no message or status arrived for `idle_timeout` seconds."""
        sid, inbox = sub._id, sub.subject
        parser: FetchParser = self._ps
        if parser.sid != str(sid).encode():
            parser.listen(sid, consumer)
        fetched = parser.fetch = Fetched(batch, asyncio.get_running_loop().create_future())
        await self.publish(f"{API_PREFIX}.CONSUMER.MSG.NEXT.{stream}.{consumer}",
                           json.dumps({"batch": batch, "no_wait": True}).encode(), reply=inbox)
        seen = -1
        try:
            while not fetched.done.done():
                if len(fetched) == seen:
                    raise asyncio.TimeoutError
                seen = len(fetched)
                await asyncio.wait([fetched.done], timeout=idle_timeout)
        finally:
            parser.fetch = None
        fetched.done.result()  # raises what failed the request
        return fetched
