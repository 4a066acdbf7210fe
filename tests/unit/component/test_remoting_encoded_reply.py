"""``RemotingConnection.encode_reply``: a reply a handler hands back already encoded.

What these tests pin: on the wire it is byte for byte the frame the same reply built as
a ``RemotingCommand`` gives (same opaque, response flag, serialize type, language and
version), for JSON and MSGPACK requests; the first reply of a connection still goes
the usual way, carrying the serialize-type advertisement; a oneway request gets none;
and a client reads it as any other reply.

Real sockets on 127.0.0.1, port 0; every read has a deadline, nothing sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from aiorocketmq.remoting.codes import ResponseCode, SerializeType
from aiorocketmq.remoting.command import RPC_ONEWAY, RemotingCommand
from aiorocketmq.remoting.connection import SERIALIZE_ADVERT_FIELD, RemotingConnection
from aiorocketmq.remoting.frame import FrameDecoder, encode_frame
from tests.unit.component._remoting_harness import Harness

ENCODED, BUILT = 2001, 2002  # the same reply: encoded by the connection, or as a command
FIELDS = {"msgId": "7F000001000029BF0000000000000A00", "queueId": "3", "queueOffset": "17"}


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    harness = Harness()
    yield harness
    await harness.aclose()


def encoded(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | bytes:
    fields = {**FIELDS, "key": request.ext_fields.get("key", "")}
    reply = conn.encode_reply(request, ResponseCode.SUCCESS, fields)
    return reply if reply is not None else request.response_to(ResponseCode.SUCCESS, None, fields)


def built(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
    fields = {**FIELDS, "key": request.ext_fields.get("key", "")}
    return request.response_to(ResponseCode.SUCCESS, None, fields)


async def _frame(reader: asyncio.StreamReader) -> bytes:
    async with asyncio.timeout(5):
        prefix = await reader.readexactly(4)
        return prefix + await reader.readexactly(int.from_bytes(prefix, "big"))


def _request(code: int, opaque: int, key: str, serialize: SerializeType) -> RemotingCommand:
    cmd = RemotingCommand.request(code, {"key": key}, serialize_type=serialize)
    cmd.opaque = opaque
    return cmd


@pytest.mark.parametrize("serialize", [SerializeType.JSON, SerializeType.MSGPACK])
async def test_an_encoded_reply_is_the_frame_of_the_same_reply_built(
    h: Harness, serialize: SerializeType
) -> None:
    server = await h.server({ENCODED: encoded, BUILT: built})
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        # The first reply carries the advertisement, so it is built even when encoded
        # is asked for.
        writer.write(encode_frame(_request(ENCODED, 1, "first", serialize)))
        first = FrameDecoder().feed(await _frame(reader))[0]
        assert SERIALIZE_ADVERT_FIELD in first.ext_fields
        for opaque, key in ((7, "k"), (2**31 - 1, "é\u2603"), (300, "")):
            writer.write(encode_frame(_request(ENCODED, opaque, key, serialize)))
            writer.write(encode_frame(_request(BUILT, opaque, key, serialize)))
            mine, reference = await _frame(reader), await _frame(reader)
            assert mine == reference
            reply = FrameDecoder().feed(mine)[0]
            assert (reply.opaque, reply.code, reply.serialize_type) == (opaque, 0, serialize)
            assert reply.ext_fields == {**FIELDS, "key": key}
    finally:
        writer.close()


async def test_a_oneway_request_gets_no_encoded_reply(h: Harness) -> None:
    server = await h.server({ENCODED: encoded})
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        writer.write(encode_frame(_request(ENCODED, 1, "first", SerializeType.MSGPACK)))
        await _frame(reader)  # the advertisement's
        oneway = _request(ENCODED, 2, "quiet", SerializeType.MSGPACK)
        oneway.flag |= RPC_ONEWAY
        writer.write(encode_frame(oneway))
        writer.write(encode_frame(_request(ENCODED, 3, "after", SerializeType.MSGPACK)))
        reply = FrameDecoder().feed(await _frame(reader))[0]
        assert (reply.opaque, reply.ext_fields["key"]) == (3, "after")  # none for opaque 2
    finally:
        writer.close()


async def test_a_client_reads_encoded_replies(h: Harness) -> None:
    server = await h.server({ENCODED: encoded})
    client = h.client()
    for key in ("a", "b", "c"):
        request = RemotingCommand.request(ENCODED, {"key": key})
        reply = await client.invoke(server.address, request, 5000)
        assert (reply.code, reply.ext_fields["key"]) == (ResponseCode.SUCCESS, key)
    (conn,) = server.connections
    assert conn.replies_sent == 3
