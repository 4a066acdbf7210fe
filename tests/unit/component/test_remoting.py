"""Remoting server and client over loopback: requests, replies and their wire rules.

What these tests pin (``specs/remoting.md`` §1.4, §2.4, §2.5, §9; STYLE.md §4.3 habits
6 and 7): replies find their request by opaque even out of order; unknown codes get
REQUEST_CODE_NOT_SUPPORTED with RocketMQ's remark; processor failures become SYSTEM_ERROR
or the ProcessorError's code and the connection stays up; the oneway *wire bit* alone
decides whether a reply is sent; a reply uses its request's serialize type; malformed or
oversized frames close only their own connection; servers can call clients back.

Connection lifecycle (timeouts, reconnects, limits, shutdown) is in
``test_remoting_connections.py``. Real sockets on 127.0.0.1, port 0; no sleeps.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import AsyncIterator, Callable

import pytest

from aiorocketmq.remoting.codes import RequestCode, ResponseCode, SerializeType
from aiorocketmq.remoting.command import RPC_ONEWAY, RPC_RESPONSE, RemotingCommand
from aiorocketmq.remoting.connection import (
    SERIALIZE_ADVERT_FIELD,
    ProcessorTable,
    RemotingConnection,
)
from aiorocketmq.remoting.frame import encode_frame, encode_json_header
from tests.support.wait import wait_until
from tests.unit.component._remoting_harness import (
    ASYNC_ECHO,
    ASYNC_FAIL,
    ASYNC_REFUSE,
    BLOCK,
    ECHO,
    FAIL,
    LENGTH,
    REFUSE,
    REFUSE_REMARK,
    UNKNOWN,
    Harness,
    request,
    without_advert,
)

TIMEOUT_MS = 5000


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    harness = Harness()
    yield harness
    await harness.aclose()


@pytest.mark.parametrize("code", [ECHO, ASYNC_ECHO], ids=["sync", "async"])
async def test_invoke_round_trip(h: Harness, code: int) -> None:
    """A sync or async handler's reply comes back whole, matched by a per-connection opaque."""
    server = await h.server()
    client = h.client()
    first = RemotingCommand.request(code, {"topic": "T", "ü": "värde"}, b"\x00body\xff")
    first.remark = "hi"
    reply = await client.invoke(server.address, first, TIMEOUT_MS)
    assert reply.is_response and not reply.is_oneway
    assert reply.code == ResponseCode.SUCCESS
    assert reply.opaque == first.opaque
    assert without_advert(reply.ext_fields) == {"topic": "T", "ü": "värde"}
    assert reply.remark == "hi"
    assert bytes(reply.body) == b"\x00body\xff"
    second = request(code, n="2")
    reply = await client.invoke(server.address, second, TIMEOUT_MS)
    assert reply.opaque == second.opaque == first.opaque + 1
    assert without_advert(reply.ext_fields) == {"n": "2"}
    assert len(server.connections) == 1


async def test_pipelined_replies_out_of_order(h: Harness) -> None:
    """Three requests in flight on one connection, answered in reverse order, each gets its own.

    The pending table is keyed by opaque (replies may come in any order, spec §1.1).
    """
    server = await h.server()
    client = h.client()
    keys = ["a", "b", "c"]
    tasks = {
        k: asyncio.create_task(client.invoke(server.address, request(BLOCK, k), 10_000))
        for k in keys
    }
    await wait_until(lambda: len(h.gate.entered) == 3, what="3 requests held")
    conn = await client.connection(server.address)
    assert conn.pending_count == 3
    finished: list[str] = []
    for key in reversed(keys):
        h.gate.release(key)
        reply = await tasks[key]
        finished.append(key)
        assert reply.ext_fields["key"] == key
        assert all(not tasks[k].done() for k in keys if k not in finished)
    assert finished == ["c", "b", "a"]
    assert conn.pending_count == 0
    assert len({t.result().opaque for t in tasks.values()}) == 3


async def test_unknown_code_gets_request_code_not_supported(h: Harness) -> None:
    """RocketMQ's reply to a code nobody handles, remark text and its leading space included."""
    server = await h.server()
    client = h.client()
    reply = await client.invoke(server.address, request(UNKNOWN), TIMEOUT_MS)
    assert reply.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert reply.remark == f" request type {UNKNOWN} not supported"
    assert (await client.invoke(server.address, request(ECHO), TIMEOUT_MS)).code == 0


@pytest.mark.parametrize(
    ("code", "remark"),
    [(FAIL, "RuntimeError: boom"), (ASYNC_FAIL, "ValueError: async boom")],
    ids=["sync", "async"],
)
async def test_processor_exception_is_system_error_and_connection_survives(
    h: Harness, code: int, remark: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Any exception from a processor: SYSTEM_ERROR, one log line with opaque and code.

    The connection is not touched: the next request on it works (STYLE.md habit 6).
    """
    server = await h.server()
    client = h.client()
    conn = await client.connection(server.address)
    caplog.set_level(logging.ERROR, logger="aiorocketmq.remoting")
    failing = request(code)
    reply = await client.invoke(server.address, failing, TIMEOUT_MS)
    assert reply.code == ResponseCode.SYSTEM_ERROR
    assert reply.remark == remark
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1
    line = errors[0].getMessage()
    assert f"code={code}" in line and f"opaque={failing.opaque}" in line
    ok = await client.invoke(server.address, request(ECHO, "after"), TIMEOUT_MS)
    assert ok.code == ResponseCode.SUCCESS and ok.ext_fields["key"] == "after"
    assert await client.connection(server.address) is conn and not conn.is_closed
    assert len(server.connections) == 1


@pytest.mark.parametrize("code", [REFUSE, ASYNC_REFUSE], ids=["sync", "async"])
async def test_processor_error_sets_code_and_remark(h: Harness, code: int) -> None:
    """ProcessorError(code, remark) is answered with exactly that code and remark."""
    server = await h.server()
    client = h.client()
    reply = await client.invoke(server.address, request(code), TIMEOUT_MS)
    assert reply.code == ResponseCode.TOPIC_NOT_EXIST
    assert reply.remark == REFUSE_REMARK
    assert (await client.invoke(server.address, request(ECHO), TIMEOUT_MS)).code == 0


async def test_oneway_wire_bit_alone_decides_whether_to_reply(h: Harness) -> None:
    """Flag bit 1 set: no reply, whatever the handler does. Not set: always a reply.

    Stock clients send their "oneway" requests with flag 0 (spec §2.4), so a request
    without the bit gets answered even from an unknown code or a failing handler.
    """
    server = await h.server()
    peer = await h.raw(server)

    def cmd(code: int, opaque: int, flag: int = 0) -> RemotingCommand:
        return RemotingCommand(code=code, opaque=opaque, flag=flag)

    oneways = [cmd(c, 100 + i, RPC_ONEWAY) for i, c in enumerate([ECHO, UNKNOWN, FAIL, REFUSE])]
    await peer.send(*oneways, cmd(ECHO, 1), cmd(UNKNOWN, 2), cmd(FAIL, 3), cmd(REFUSE, 4))
    replies = await peer.read(4)
    assert [(r.opaque, r.code) for r in replies] == [
        (1, ResponseCode.SUCCESS),
        (2, ResponseCode.REQUEST_CODE_NOT_SUPPORTED),
        (3, ResponseCode.SYSTEM_ERROR),
        (4, ResponseCode.TOPIC_NOT_EXIST),
    ]
    assert all(r.flag == RPC_RESPONSE for r in replies)
    # Async handlers answer later; wait until the oneway one finished, then a marker
    # request proves nothing else was queued before its reply.
    await peer.send(cmd(ASYNC_ECHO, 110, RPC_ONEWAY), cmd(ASYNC_ECHO, 5))
    assert [r.opaque for r in await peer.read(1)] == [5]
    [conn] = server.connections
    await wait_until(lambda: conn.in_flight_count == 0, what="async handlers to finish")
    await peer.send(cmd(ECHO, 6))
    assert [r.opaque for r in await peer.read(1)] == [6]


@pytest.mark.parametrize("kind", list(SerializeType), ids=lambda t: t.name)
async def test_reply_uses_the_requests_serialize_type(h: Harness, kind: SerializeType) -> None:
    """JSON in, JSON out (the only type stock clients read); ROCKETMQ and MSGPACK likewise.

    Holds for handler replies, REQUEST_CODE_NOT_SUPPORTED and SYSTEM_ERROR alike.
    """
    server = await h.server()
    peer = await h.raw(server)
    sent = [
        RemotingCommand(code=c, opaque=i, ext_fields={"k": "v"}, serialize_type=kind)
        for i, c in enumerate([ECHO, ASYNC_ECHO, UNKNOWN, FAIL], start=1)
    ]
    await peer.send(*sent)
    replies = sorted(await peer.read(4), key=lambda r: r.opaque)
    assert [r.serialize_type for r in replies] == [kind] * 4
    assert [r.code for r in replies] == [0, 0, 3, 1]
    assert without_advert(replies[0].ext_fields) == {"k": "v"}
    # The advert rides on exactly one reply per connection, and never changes its type.
    assert sum(SERIALIZE_ADVERT_FIELD in r.ext_fields for r in replies) == 1


@pytest.mark.parametrize("kind", ["JSON", "ROCKETMQ", "MSGPACK"])
async def test_client_fixed_serialize_type(h: Harness, kind: str) -> None:
    """A client configured with one serialize type sends it and gets replies in it."""
    server = await h.server()
    client = h.client(serialize_type=kind)
    for _ in range(2):  # before and after the server's advert
        reply = await client.invoke(server.address, request(ECHO, "x"), TIMEOUT_MS)
        assert reply.serialize_type is SerializeType[kind]
        assert reply.ext_fields["key"] == "x"


async def test_client_auto_switches_to_msgpack_after_the_servers_advert(h: Harness) -> None:
    """AUTO speaks JSON first (a stock server may be on the other end), MSGPACK once told."""
    server = await h.server()
    client = h.client()
    first = await client.invoke(server.address, request(ECHO), TIMEOUT_MS)
    assert first.serialize_type is SerializeType.JSON
    assert "MSGPACK" in first.ext_fields[SERIALIZE_ADVERT_FIELD]
    second = await client.invoke(server.address, request(ECHO), TIMEOUT_MS)
    assert second.serialize_type is SerializeType.MSGPACK
    assert SERIALIZE_ADVERT_FIELD not in second.ext_fields


BAD_FRAMES = {
    "length-below-4": struct.pack(">i", 2) + b"\x00\x00",
    "negative-length": struct.pack(">i", -5),
    "bad-json": struct.pack(">iI", 4 + 9, 9) + b'{"code":1',
    "json-not-object": struct.pack(">iI", 4 + 2, 2) + b"[]",
    "header-past-frame": struct.pack(">iI", 4 + 2, 50) + b"{}",
    "unknown-serialize-type": struct.pack(">iI", 4 + 2, (9 << 24) | 2) + b"{}",
}


@pytest.mark.parametrize("bad", list(BAD_FRAMES.values()), ids=list(BAD_FRAMES))
async def test_malformed_frame_closes_only_that_connection(h: Harness, bad: bytes) -> None:
    """A RemoteProtocolError closes its own connection; other connections keep working.

    The valid request before the bad bytes (same write) shows the server does not reply
    on a connection it is dropping for a framing error.
    """
    server = await h.server()
    client = h.client()
    assert (await client.invoke(server.address, request(ECHO), TIMEOUT_MS)).code == 0
    healthy = await client.connection(server.address)
    peer = await h.raw(server)
    await wait_until(lambda: len(server.connections) == 2, what="2 server connections")
    await peer.send(raw=bad)
    await peer.assert_closed_by_peer()
    await wait_until(lambda: len(server.connections) == 1, what="the bad connection to go")
    reply = await client.invoke(server.address, request(ECHO, "still"), TIMEOUT_MS)
    assert reply.ext_fields["key"] == "still"
    assert await client.connection(server.address) is healthy and not healthy.is_closed


async def test_frame_at_the_size_limit_passes_one_byte_over_closes(h: Harness) -> None:
    """frame_max_length counts the whole frame, length field included (Netty's decoder).

    Exactly at the limit is served; one byte over closes the connection, and the server
    decides on the 4 length bytes alone, without waiting for the rest of the frame.
    """
    limit = 1024
    server = await h.server(frame_max_length=limit)
    probe = RemotingCommand(code=LENGTH, opaque=1)
    body_len = limit - 8 - len(encode_json_header(probe))
    probe.body = b"x" * body_len
    exact = encode_frame(probe, limit)
    assert len(exact) == limit
    peer = await h.raw(server)
    await peer.send(raw=exact)
    [reply] = await peer.read(1)
    assert reply.code == 0 and reply.ext_fields["len"] == str(body_len)

    probe.body = b"x" * (body_len + 1)
    over = encode_frame(probe, limit + 1)
    assert len(over) == limit + 1
    whole = await h.raw(server)
    await whole.send(raw=over)
    await whole.assert_closed_by_peer()
    length_only = await h.raw(server)
    await length_only.send(raw=over[:4])
    await length_only.assert_closed_by_peer()
    # The connection that sent a valid frame is still served.
    await peer.send(RemotingCommand(code=ECHO, opaque=2))
    assert [r.opaque for r in await peer.read(1)] == [2]


async def test_server_invokes_the_client_on_its_connection(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """A broker calls its clients back (NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_RUNNING_INFO).

    server.invoke gets the client processor's reply; server.invoke_oneway delivers a
    flag-2 request and the client sends nothing back (no reply for an unknown opaque).
    """
    seen: list[RemotingCommand] = []
    oneway_seen = asyncio.Event()

    def on_request(conn: RemotingConnection, req: RemotingCommand) -> RemotingCommand:
        seen.append(req)
        if req.is_oneway:
            oneway_seen.set()
        return req.response_to(ResponseCode.SUCCESS, ext_fields={"got": req.ext_fields["q"]})

    client_table = ProcessorTable()
    client_table.register(RequestCode.GET_CONSUMER_RUNNING_INFO, on_request)
    client_table.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, on_request)
    server = await h.server()
    client = h.client(client_table)
    await client.invoke(server.address, request(ECHO), TIMEOUT_MS)
    [conn] = server.connections
    caplog.set_level(logging.DEBUG, logger="aiorocketmq.remoting")

    ask = RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"q": "1"})
    reply = await server.invoke(conn, ask, 5.0)
    assert reply.code == ResponseCode.SUCCESS and reply.ext_fields == {"got": "1"}
    assert reply.opaque == ask.opaque and seen[-1].serialize_type is SerializeType.JSON

    note = RemotingCommand.request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"q": "2"})
    await server.invoke_oneway(conn, note, 5.0)
    await wait_until(oneway_seen, what="the oneway request at the client")
    assert seen[-1].flag == RPC_ONEWAY
    # A round trip after it: had the client answered the oneway, that reply came first.
    again = await server.invoke(
        conn, RemotingCommand.request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"q": "3"}), 5.0
    )
    assert again.ext_fields == {"got": "3"}
    assert not [r for r in caplog.records if "unknown opaque" in r.getMessage()]
    assert conn.pending_count == 0


async def test_client_invoke_oneway_sets_the_bit_and_gets_nothing(h: Harness) -> None:
    """client.invoke_oneway sends flag 2; the server runs the handler and replies nothing."""
    server = await h.server()
    client = h.client()
    await client.invoke_oneway(server.address, request(BLOCK, "ow"), TIMEOUT_MS)
    await wait_until(lambda: h.gate.keys() == ["ow"], what="the oneway request held")
    assert h.gate.entered[0].is_oneway
    conn = await client.connection(server.address)
    assert conn.pending_count == 0
    h.gate.release("ow")
    await wait_until(lambda: h.gate.busy() == 0, what="the oneway handler to finish")
    # The next reply on the connection is the next request's, nothing in between.
    reply = await client.invoke(server.address, request(ECHO, "next"), TIMEOUT_MS)
    assert reply.ext_fields["key"] == "next"


@pytest.mark.parametrize(
    ("bad_reply", "remark_part"),
    [
        (lambda req: {"code": 0}, "processor returned dict"),
        (lambda req: req.response_to(0, ext_fields={"queueId": 3}), "queueId"),
        (lambda req: req.response_to(0, body=b"x" * 2048), "exceeds"),
    ],
    ids=["not-a-command", "int-ext-value", "over-frame-limit"],
)
async def test_unsendable_reply_becomes_system_error(
    h: Harness, bad_reply: Callable[[RemotingCommand], object], remark_part: str
) -> None:
    """A processor whose reply cannot go on the wire (not a command, a non-string extField
    that the C++ client would misread, a body past the frame limit) gets SYSTEM_ERROR sent
    in its place; the requester is never left waiting and the connection stays up."""
    server = await h.server({2001: lambda conn, req: bad_reply(req)}, frame_max_length=1024)
    peer = await h.raw(server)
    await peer.send(RemotingCommand(code=2001, opaque=7), RemotingCommand(code=ECHO, opaque=8))
    replies = await peer.read(2)
    assert [r.opaque for r in replies] == [7, 8]
    assert replies[0].code == ResponseCode.SYSTEM_ERROR
    assert remark_part in (replies[0].remark or "")
    assert replies[1].code == ResponseCode.SUCCESS


async def test_concurrent_first_requests_share_one_connection(h: Harness) -> None:
    """Callers racing to a new address share one connect attempt and one connection."""
    server = await h.server()
    client = h.client()
    replies = await asyncio.gather(
        *(client.invoke(server.address, request(ECHO, str(i)), TIMEOUT_MS) for i in range(8))
    )
    assert [r.ext_fields["key"] for r in replies] == [str(i) for i in range(8)]
    assert len(server.connections) == 1
    assert len({r.opaque for r in replies}) == 8
