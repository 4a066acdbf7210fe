"""Remoting connections over loopback: failure, timeouts, reconnects, limits and shutdown.

What these tests pin (STYLE.md §4.3 habits 7 and 10): a closed connection fails every
pending request at once with RemotingSendRequestError; a timeout is RemotingTimeoutError and
the late reply is dropped quietly; the client reconnects on the next request; in-flight
bounds hold on both sides (the client's semaphore, the server's per-connection limit that
stops reading); idle connections expire; listeners hear about opens and closes; shutdown
closes every connection.

Real sockets on 127.0.0.1, port 0; every wait has a deadline, nothing sleeps.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
from collections.abc import AsyncIterator

import pytest

from aiorocketmq.common.errors import LocalProtocolError
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import RemotingConnection
from aiorocketmq.remoting.errors import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
    RemotingTooMuchRequestError,
)
from tests.support.wait import wait_until
from tests.unit.component._remoting_harness import ABORT, BLOCK, ECHO, Harness, request

TIMEOUT_MS = 5000
LONG_MS = 30_000  # longer than any test may take: a failure must not come from a timeout


@pytest.fixture
async def h() -> AsyncIterator[Harness]:
    harness = Harness()
    yield harness
    await harness.aclose()


async def test_server_dropping_the_connection_fails_every_pending_request_at_once(
    h: Harness,
) -> None:
    """Two held requests and the one whose handler aborts: all fail, long before timeout."""
    server = await h.server()
    client = h.client()
    held = [
        asyncio.create_task(client.invoke(server.address, request(BLOCK, k), LONG_MS))
        for k in ("a", "b")
    ]
    await wait_until(lambda: len(h.gate.entered) == 2, what="2 held requests")
    conn = await client.connection(server.address)
    async with asyncio.timeout(5):
        with pytest.raises(RemotingSendRequestError):
            await client.invoke(server.address, request(ABORT), LONG_MS)
        for task in held:
            with pytest.raises(RemotingSendRequestError) as info:
                await task
            assert info.value.retriable and info.value.address == conn.remote_address
    assert conn.pending_count == 0 and conn.is_closed


async def test_timeout_raises_and_the_late_reply_is_dropped_quietly(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """No reply in time: RemotingTimeoutError. The reply that comes later matches nothing,
    is dropped without a warning, and the connection goes on serving new requests."""
    server = await h.server()
    client = h.client()
    caplog.set_level(logging.DEBUG, logger="aiorocketmq.remoting")
    late = request(BLOCK, "late")
    with pytest.raises(RemotingTimeoutError) as info:
        await client.invoke(server.address, late, 100)
    assert info.value.retriable
    conn = await client.connection(server.address)
    assert conn.pending_count == 0
    h.gate.release("late")
    await wait_until(lambda: h.gate.busy() == 0, what="the late reply to be written")
    # TCP keeps order: once the next reply is in, the late one was read (and dropped).
    reply = await client.invoke(server.address, request(ECHO, "next"), TIMEOUT_MS)
    assert reply.ext_fields["key"] == "next" and reply.opaque != late.opaque
    assert await client.connection(server.address) is conn and not conn.is_closed
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert any(f"opaque={late.opaque}" in r.getMessage() for r in caplog.records)


async def test_next_invoke_reconnects_after_the_server_closed_the_connection(
    h: Harness,
) -> None:
    """The client keeps no dead connection: the request after a close opens a new one."""
    server = await h.server()
    client = h.client()
    await client.invoke(server.address, request(ECHO), TIMEOUT_MS)
    [old] = server.connections
    first = await client.connection(server.address)
    old.close()
    await wait_until(lambda: first.is_closed and not client.addresses, what="client sees close")
    reply = await client.invoke(server.address, request(ECHO, "again"), TIMEOUT_MS)
    assert reply.ext_fields["key"] == "again"
    second = await client.connection(server.address)
    assert second is not first and not second.is_closed
    [new] = server.connections
    assert new is not old
    assert client.addresses == [server.address]


async def test_connect_to_a_closed_port_is_a_connect_error(h: Harness) -> None:
    """Nothing listening: RemotingConnectError (retriable), carrying the address."""
    # A bound but non-listening socket refuses connections and keeps the port ours.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"
        client = h.client(connect_timeout_millis=2000)
        with pytest.raises(RemotingConnectError) as info:
            await client.invoke(address, request(ECHO), TIMEOUT_MS)
    assert info.value.retriable and info.value.address == address
    assert isinstance(info.value, RemotingError)
    assert client.addresses == []


@pytest.mark.parametrize("address", ["no-port", "127.0.0.1:0", "127.0.0.1:x"])
async def test_bad_address_is_a_connect_error(h: Harness, address: str) -> None:
    """A malformed address fails like an unreachable one, not with a ValueError."""
    with pytest.raises(RemotingConnectError):
        await h.client().invoke(address, request(ECHO), TIMEOUT_MS)


async def test_client_in_flight_bound_refuses_after_its_timeout(h: Harness) -> None:
    """client_async_semaphore_value=2: a third request waits its timeout, then is refused.

    A slot freed by a finished request is usable again.
    """
    server = await h.server()
    client = h.client(client_async_semaphore_value=2)
    held = [
        asyncio.create_task(client.invoke(server.address, request(BLOCK, k), LONG_MS))
        for k in ("a", "b")
    ]
    await wait_until(lambda: len(h.gate.entered) == 2, what="2 held requests")
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(RemotingTooMuchRequestError) as info:
        await client.invoke(server.address, request(ECHO), 200)
    assert loop.time() - started >= 0.15  # it waited (about) its timeout first
    assert info.value.retriable
    assert h.gate.keys() == ["a", "b"]  # the refused request never reached the server
    h.gate.release("a")
    assert (await held[0]).ext_fields["key"] == "a"
    reply = await client.invoke(server.address, request(ECHO, "c"), TIMEOUT_MS)
    assert reply.ext_fields["key"] == "c"
    h.gate.release("b")
    await held[1]


async def test_client_slot_comes_back_however_a_request_ends(h: Harness) -> None:
    """client_async_semaphore_value=1: after a reply, a timeout, a task cancelled before
    it ran or while it waited, and a dropped connection, the one slot is free again
    (the next request is answered, not refused after its timeout)."""
    server = await h.server()
    client = h.client(client_async_semaphore_value=1)

    async def answered(key: str) -> None:
        reply = await client.invoke(server.address, request(ECHO, key), 2000)
        assert reply.ext_fields["key"] == key

    await answered("reply")
    with pytest.raises(RemotingTimeoutError):  # held past its timeout
        await client.invoke(server.address, request(BLOCK, "slow"), 100)
    h.gate.release("slow")
    await answered("after-timeout")
    never_ran = asyncio.create_task(client.invoke(server.address, request(ECHO), TIMEOUT_MS))
    never_ran.cancel()
    with pytest.raises(asyncio.CancelledError):
        await never_ran
    await answered("after-cancel-before-start")
    held = asyncio.create_task(client.invoke(server.address, request(BLOCK, "held"), LONG_MS))
    await wait_until(lambda: h.gate.keys()[-1:] == ["held"], what="the held request")
    held.cancel()
    with pytest.raises(asyncio.CancelledError):
        await held
    h.gate.release("held")
    await answered("after-cancel-in-flight")
    dropped = asyncio.create_task(client.invoke(server.address, request(BLOCK, "drop"), LONG_MS))
    await wait_until(lambda: h.gate.keys()[-1:] == ["drop"], what="the request to drop")
    client.close_connection(server.address)
    with pytest.raises(RemotingSendRequestError):
        await dropped
    h.gate.release("drop")
    await answered("after-drop")


async def test_connection_listeners_hear_open_and_close(h: Harness) -> None:
    """on_open and on_close fire once each with the same connection; a failing listener
    does not stop the others."""
    server = await h.server()
    loop = asyncio.get_running_loop()
    opened: asyncio.Future[RemotingConnection] = loop.create_future()
    closed: asyncio.Future[RemotingConnection] = loop.create_future()
    calls: list[str] = []

    def broken(conn: RemotingConnection) -> None:
        calls.append("broken")
        raise RuntimeError("listener bug")

    server.add_connection_listener(on_open=broken, on_close=broken)
    server.add_connection_listener(on_open=opened.set_result, on_close=closed.set_result)
    client = h.client()
    await client.invoke(server.address, request(ECHO), TIMEOUT_MS)
    async with asyncio.timeout(5):
        conn = await opened
    assert conn in server.connections
    assert conn.remote_address.startswith("127.0.0.1:")
    assert not closed.done()
    client.close_connection(server.address)
    async with asyncio.timeout(5):
        assert await closed is conn
    assert conn not in server.connections
    assert calls == ["broken", "broken"]


@pytest.mark.parametrize("one_write", [True, False], ids=["one-write", "separate-writes"])
async def test_server_stops_reading_past_max_in_flight(h: Harness, one_write: bool) -> None:
    """max_in_flight_per_connection=2 with held handlers: the third request is not
    dispatched until one finishes, even when all three arrive in one TCP segment."""
    server = await h.server(max_in_flight_per_connection=2)
    peer = await h.raw(server)
    reqs = [
        RemotingCommand(code=BLOCK, opaque=i, ext_fields={"key": k})
        for i, k in enumerate("abc", start=1)
    ]
    if one_write:
        await peer.send(*reqs)
    else:
        await peer.send(*reqs[:2])
        await wait_until(lambda: len(h.gate.entered) == 2, what="2 held requests")
        await peer.send(reqs[2])
    await wait_until(lambda: len(h.gate.entered) >= 2, what="2 held requests")
    # Several round trips on another connection give the server loop many turns in
    # which it could have read and dispatched the third request, had it not paused.
    client = h.client()
    for _ in range(5):
        await client.invoke(server.address, request(ECHO), TIMEOUT_MS)
    assert h.gate.keys() == ["a", "b"]
    h.gate.release("a")
    await wait_until(lambda: h.gate.keys() == ["a", "b", "c"], what="the third dispatched")
    h.gate.release_all()
    replies = await peer.read(3)
    assert sorted(r.opaque for r in replies) == [1, 2, 3]


async def test_idle_connection_expires(h: Harness) -> None:
    """server_channel_max_idle_time_seconds=1: a silent connection is closed by the server,
    and the client notices (its next request would reconnect)."""
    server = await h.server(server_channel_max_idle_time_seconds=1)
    closed = asyncio.Event()
    server.add_connection_listener(on_close=lambda conn: closed.set())
    client = h.client()
    await client.invoke(server.address, request(ECHO), TIMEOUT_MS)
    conn = await client.connection(server.address)
    await wait_until(closed, timeout=5, what="the idle connection closed")
    assert not server.connections
    await wait_until(lambda: conn.is_closed and not client.addresses, what="client sees close")
    assert (await client.invoke(server.address, request(ECHO), TIMEOUT_MS)).code == 0


async def test_client_closes_its_idle_connection(h: Harness) -> None:
    """client_channel_max_idle_time_seconds=1: the client drops a connection it has not
    heard from, the server sees the close, and the next request reconnects."""
    server = await h.server()
    closed = asyncio.Event()
    server.add_connection_listener(on_close=lambda conn: closed.set())
    client = h.client(client_channel_max_idle_time_seconds=1)
    await client.invoke(server.address, request(ECHO), TIMEOUT_MS)
    first = await client.connection(server.address)
    await wait_until(closed, timeout=5, what="the server to see the client's idle close")
    assert first.is_closed and client.addresses == []
    assert (await client.invoke(server.address, request(ECHO), TIMEOUT_MS)).code == 0
    assert await client.connection(server.address) is not first


async def test_busy_connection_does_not_expire(h: Harness) -> None:
    """A connection that keeps sending outlives the idle limit; a silent one beside it dies."""
    server = await h.server(server_channel_max_idle_time_seconds=1)
    silent = await h.raw(server)
    client = h.client()
    conn = await client.connection(server.address)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 5
    # Each round trip refreshes the active connection; stop when the silent one is gone.
    while len(server.connections) == 2:
        assert loop.time() < deadline, "the silent connection was never expired"
        await client.invoke(server.address, request(ECHO), TIMEOUT_MS)
    await silent.assert_closed_by_peer()
    assert not conn.is_closed and len(server.connections) == 1


async def test_shutdown_closes_connections_and_fails_pending_requests(h: Harness) -> None:
    """server.shutdown closes every connection; the clients' pending requests fail at once
    with RemotingSendRequestError; the port stops accepting; a second shutdown is a no-op."""
    server = await h.server()
    client = h.client()
    other = h.client()
    held = asyncio.create_task(client.invoke(server.address, request(BLOCK, "x"), LONG_MS))
    await wait_until(lambda: len(h.gate.entered) == 1, what="the held request")
    await other.invoke(server.address, request(ECHO), TIMEOUT_MS)
    other_conn = await other.connection(server.address)
    assert len(server.connections) == 2
    async with asyncio.timeout(5):
        await server.shutdown(grace_s=2.0)
        with pytest.raises(RemotingSendRequestError):
            await held
    assert not server.connections
    await wait_until(lambda: other_conn.is_closed, what="the idle client to see the close")
    with pytest.raises(RemotingConnectError):
        await client.invoke(server.address, request(ECHO), TIMEOUT_MS)
    await server.shutdown()  # idempotent


async def test_client_close_fails_pending_and_refuses_new_requests(h: Harness) -> None:
    """client.close fails what is in flight and refuses later requests (idempotent)."""
    server = await h.server()
    client = h.client()
    held = asyncio.create_task(client.invoke(server.address, request(BLOCK, "x"), LONG_MS))
    await wait_until(lambda: len(h.gate.entered) == 1, what="the held request")
    async with asyncio.timeout(5):
        await client.close()
        with pytest.raises(RemotingSendRequestError):
            await held
    with pytest.raises(RemotingSendRequestError):
        await client.invoke(server.address, request(ECHO), TIMEOUT_MS)
    await client.close()
    await wait_until(lambda: not server.connections, what="the server to see the close")


async def test_cancelled_invoke_leaves_nothing_pending(h: Harness) -> None:
    """A caller that gives up (cancellation) removes its pending entry; the reply that
    comes later is dropped and the connection keeps serving."""
    server = await h.server()
    client = h.client()
    task = asyncio.create_task(client.invoke(server.address, request(BLOCK, "gone"), LONG_MS))
    await wait_until(lambda: h.gate.keys() == ["gone"], what="the request held")
    conn = await client.connection(server.address)
    assert conn.pending_count == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert conn.pending_count == 0
    h.gate.release("gone")
    await wait_until(lambda: h.gate.busy() == 0, what="the orphan reply to be written")
    reply = await client.invoke(server.address, request(ECHO, "live"), TIMEOUT_MS)
    assert reply.ext_fields["key"] == "live" and not conn.is_closed


async def test_client_close_during_connect_is_a_send_error_not_a_cancellation(
    h: Harness,
) -> None:
    """Regression: close() cancels connect attempts in progress, and an invoke waiting on
    one used to get a CancelledError it never asked for (its task ended up cancelled,
    which silently kills a producer's or consumer's background loop). It must see
    RemotingSendRequestError like any request on a closing client."""
    server = await h.server()
    client = h.client()
    task = asyncio.create_task(client.invoke(server.address, request(ECHO), TIMEOUT_MS))
    # One loop turn (a yield, not a wait for a condition): the task runs up to its
    # connect, which cannot complete in the same turn.
    await asyncio.sleep(0)
    await client.close()
    with pytest.raises(RemotingSendRequestError):
        await task
    assert not task.cancelled()


async def test_connect_failing_after_its_only_caller_left_is_not_an_unretrieved_error(
    h: Harness,
) -> None:
    """Regression: callers wait for a shared connect attempt through a shield. When the
    only caller was cancelled and the attempt then failed, nobody took its exception and
    the loop reported "Task exception was never retrieved" (this test's loop-error
    check fails on exactly that)."""
    with socket.socket() as sock:  # bound, not listening: the connect is refused
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"
        client = h.client(connect_timeout_millis=2000)
        task = asyncio.create_task(client.invoke(address, request(ECHO), TIMEOUT_MS))
        await asyncio.sleep(0)  # one turn: the task starts its connect attempt
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await wait_until(lambda: not client._connecting, what="the attempt to fail")
    gc.collect()  # an unretrieved exception is reported when its task is collected


async def test_request_too_big_to_send_fails_locally_and_the_connection_survives(
    h: Harness,
) -> None:
    """A request over the client's frame limit is a LocalProtocolError before any byte is
    written; nothing stays pending and the connection is untouched."""
    server = await h.server()
    client = h.client(frame_max_length=1024)
    await client.invoke(server.address, request(ECHO), TIMEOUT_MS)
    conn = await client.connection(server.address)
    with pytest.raises(LocalProtocolError):
        await client.invoke(server.address, RemotingCommand.request(ECHO, body=bytes(2048)), 1000)
    assert conn.pending_count == 0 and not conn.is_closed
    assert (await client.invoke(server.address, request(ECHO, "ok"), TIMEOUT_MS)).code == 0
