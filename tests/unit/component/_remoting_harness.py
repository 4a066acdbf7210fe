"""Shared pieces of the remoting component tests: handlers, a gate, servers, raw sockets.

Owns: ``Harness`` (starts servers on 127.0.0.1 port 0, clients and raw stream
connections, and tears all of them down, releasing blocked handlers first), ``Gate``
(an async handler that holds each request until the test releases it) and the raw-socket
helpers that speak frames with ``encode_frame`` / ``FrameDecoder``.

Must not: sleep. Everything waits on events, futures or ``wait_until`` with a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingClientConfig, RemotingServerConfig
from aiorocketmq.remoting.connection import (
    SERIALIZE_ADVERT_FIELD,
    Handler,
    ProcessorTable,
    RemotingConnection,
)
from aiorocketmq.remoting.errors import ProcessorError
from aiorocketmq.remoting.frame import FrameDecoder, encode_frame
from aiorocketmq.remoting.server import RemotingServer
from tests.support.wait import wait_until

# Request codes of the test processors (outside RocketMQ's tables on purpose).
ECHO = 1001  # sync handler: echoes ext fields, remark and body
ASYNC_ECHO = 1002  # async handler: the same, after one loop turn
BLOCK = 1003  # async handler held by the Gate until released (key = ext field "key")
FAIL = 1004  # sync handler raising RuntimeError
ASYNC_FAIL = 1005  # async handler raising ValueError
REFUSE = 1006  # sync handler raising ProcessorError(TOPIC_NOT_EXIST, ...)
ASYNC_REFUSE = 1007  # async handler raising the same
ABORT = 1008  # sync handler that aborts its own connection and answers nothing
LENGTH = 1009  # sync handler answering the body length only
UNKNOWN = 4242  # no handler

REFUSE_REMARK = "topic[TopicTest] not exist, apply first please!"


def echo(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
    return request.response_to(
        ResponseCode.SUCCESS,
        remark=request.remark,
        ext_fields=dict(request.ext_fields),
        body=bytes(request.body),
    )


async def async_echo(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
    await asyncio.sleep(0)  # one loop turn: the reply really leaves from a task
    return echo(conn, request)


def fail(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
    raise RuntimeError("boom")


async def async_fail(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
    await asyncio.sleep(0)
    raise ValueError("async boom")


def refuse(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
    raise ProcessorError(ResponseCode.TOPIC_NOT_EXIST, REFUSE_REMARK)


async def async_refuse(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
    await asyncio.sleep(0)
    raise ProcessorError(ResponseCode.TOPIC_NOT_EXIST, REFUSE_REMARK)


def abort(conn: RemotingConnection, request: RemotingCommand) -> None:
    conn.abort()


def length(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
    return request.response_to(ResponseCode.SUCCESS, ext_fields={"len": str(len(request.body))})


def without_advert(ext_fields: dict[str, str]) -> dict[str, str]:
    """A reply's extFields minus the server's once-per-connection MSGPACK advert."""
    return {k: v for k, v in ext_fields.items() if k != SERIALIZE_ADVERT_FIELD}


class Gate:
    """An async handler that holds each request until the test releases its key."""

    def __init__(self) -> None:
        self.entered: list[RemotingCommand] = []
        self.conns: list[RemotingConnection] = []
        self._events: dict[str, asyncio.Event] = {}
        self._open = False

    def _event(self, key: str) -> asyncio.Event:
        return self._events.setdefault(key, asyncio.Event())

    async def handler(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        self.entered.append(request)
        if conn not in self.conns:
            self.conns.append(conn)
        event = self._event(request.ext_fields.get("key", ""))
        if not self._open:
            await event.wait()
        return echo(conn, request)

    def keys(self) -> list[str]:
        return [r.ext_fields.get("key", "") for r in self.entered]

    def release(self, key: str = "") -> None:
        self._event(key).set()

    def release_all(self) -> None:
        self._open = True
        for event in self._events.values():
            event.set()

    def busy(self) -> int:
        """Requests held or still finishing on the server side."""
        return sum(conn.in_flight_count for conn in self.conns)


class Harness:
    """Servers, clients and raw connections of one test, all closed at teardown."""

    def __init__(self) -> None:
        self.gate = Gate()
        self.servers: list[RemotingServer] = []
        self.clients: list[RemotingClient] = []
        self._writers: list[asyncio.StreamWriter] = []

    def processors(self) -> ProcessorTable:
        table = ProcessorTable()
        for code, handler in (
            (ECHO, echo),
            (ASYNC_ECHO, async_echo),
            (BLOCK, self.gate.handler),
            (FAIL, fail),
            (ASYNC_FAIL, async_fail),
            (REFUSE, refuse),
            (ASYNC_REFUSE, async_refuse),
            (ABORT, abort),
            (LENGTH, length),
        ):
            table.register(code, handler)
        return table

    async def server(
        self, handlers: dict[int, Handler] | None = None, **config: Any
    ) -> RemotingServer:
        """A started server with the test processors (plus ``handlers``) on port 0."""
        table = self.processors()
        for code, handler in (handlers or {}).items():
            table.register(code, handler)
        settings = RemotingServerConfig(listen_host="127.0.0.1", listen_port=0, **config)
        server = RemotingServer(table, settings, name="test")
        await server.start()
        self.servers.append(server)
        assert server.port != 0
        return server

    def client(self, processors: ProcessorTable | None = None, **config: Any) -> RemotingClient:
        client = RemotingClient(RemotingClientConfig(**config), processors)
        self.clients.append(client)
        return client

    async def raw(self, server: RemotingServer) -> RawPeer:
        reader, writer = await asyncio.open_connection(server.host, server.port)
        self._writers.append(writer)
        return RawPeer(reader, writer)

    async def aclose(self) -> None:
        self.gate.release_all()
        for client in self.clients:
            await client.close()
        for writer in self._writers:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
        for server in self.servers:
            await server.shutdown()
        # Released handlers finish (their replies are dropped on closed connections).
        await wait_until(lambda: self.gate.busy() == 0, what="held handlers to finish")


class RawPeer:
    """A bare TCP peer: writes frames built with encode_frame, reads with FrameDecoder."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.decoder = FrameDecoder()

    async def send(self, *commands: RemotingCommand, raw: bytes = b"") -> None:
        """Write the commands' frames (then ``raw``) in a single write."""
        self.writer.write(b"".join(encode_frame(c) for c in commands) + raw)
        await self.writer.drain()

    async def read(self, count: int, deadline_s: float = 5.0) -> list[RemotingCommand]:
        """Read until at least ``count`` frames arrived; returns all decoded so far."""
        out: list[RemotingCommand] = []
        async with asyncio.timeout(deadline_s):
            while len(out) < count:
                data = await self.reader.read(65536)
                assert data, f"peer closed after {len(out)} of {count} replies"
                out += self.decoder.feed(data)
        return out

    async def assert_closed_by_peer(self, deadline_s: float = 5.0) -> None:
        """The peer closes the connection without sending a single frame."""
        received = b""
        async with asyncio.timeout(deadline_s):
            try:
                while data := await self.reader.read(65536):
                    received += data
            except ConnectionResetError:
                pass  # an abort with our bytes still unread is a RST
        try:
            frames = FrameDecoder().feed(received)
        except RemoteProtocolError:
            frames = ["<garbage>"]  # type: ignore[list-item]
        assert not received, f"expected a silent close, got {len(received)} bytes: {frames}"


def request(code: int, key: str = "", **fields: str) -> RemotingCommand:
    ext = dict(fields)
    if key:
        ext["key"] = key
    return RemotingCommand.request(code, ext)
