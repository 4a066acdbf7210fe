"""When a connection's requests reach the transport.

What this pins: a request alone in flight (a sync send) is handed to the transport
inside ``invoke``, before it waits, not one loop iteration later (which cost a
poll per send); requests issued while others are in flight still leave together,
in one gather write at the end of the iteration. A fake transport that records
each write; the coroutines are driven by hand, so nothing waits on the clock.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from aiorocketmq.remoting.command import BodyParts, RemotingCommand
from aiorocketmq.remoting.connection import RemotingConnection
from aiorocketmq.remoting.frame import FrameDecoder, encode_frame
from tests.support.wait import wait_until
from tests.unit.component.test_remoting_read_budget import FakeTransport

CODE = 1001


class RecordingTransport(FakeTransport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []

    def writelines(self, items: list[bytes]) -> None:
        self.writes.append(b"".join(bytes(i) for i in items))


def suspend(coro: Coroutine[Any, Any, RemotingCommand]) -> None:
    """Run ``coro`` up to its first wait (its reply)."""
    coro.send(None)


def finish(coro: Coroutine[Any, Any, RemotingCommand]) -> RemotingCommand:
    try:
        coro.send(None)
    except StopIteration as done:
        reply: RemotingCommand = done.value
        return reply
    raise AssertionError("the request was still waiting")


def replies_to(*frames: bytes) -> bytes:
    decoder = FrameDecoder()
    requests = [cmd for frame in frames for cmd in decoder.feed(frame)]
    return b"".join(encode_frame(r.response_to(0, f"re {r.opaque}")) for r in requests)


def opaques(frame: bytes) -> list[int]:
    return [cmd.opaque for cmd in FrameDecoder().feed(frame)]


async def test_a_lone_request_is_written_inside_invoke() -> None:
    conn = RemotingConnection()
    transport = RecordingTransport()
    conn.connection_made(transport)
    for _ in range(3):  # each one alone in flight, as sync sends are
        coro = conn.invoke(RemotingCommand.request(CODE, {"k": "v"}), 5.0)
        suspend(coro)
        assert len(transport.writes) == 1  # on its way before invoke waits
        conn.data_received(replies_to(transport.writes.pop()))
        reply = finish(coro)
        assert reply.remark == f"re {reply.opaque}"
    conn.connection_lost(None)


async def test_requests_issued_together_leave_in_one_write() -> None:
    conn = RemotingConnection()
    transport = RecordingTransport()
    conn.connection_made(transport)
    first = conn.invoke(RemotingCommand.request(CODE), 5.0)
    suspend(first)
    assert len(transport.writes) == 1
    others = [conn.invoke(RemotingCommand.request(CODE), 5.0) for _ in range(3)]
    for coro in others:
        suspend(coro)
    assert len(transport.writes) == 1  # not in flight alone: the iteration's write takes them
    await wait_until(lambda: len(transport.writes) == 2, timeout=5, what="the gather write")
    assert opaques(transport.writes[1]) == [2, 3, 4]
    conn.data_received(replies_to(*transport.writes))
    assert [finish(c).remark for c in [first, *others]] == [f"re {n}" for n in (1, 2, 3, 4)]
    assert conn.pending_count == 0
    conn.connection_lost(None)


async def test_the_stream_count_is_what_the_transport_was_given() -> None:
    """Zero-copy bodies are released by the stream's byte count (module docstring of
    ``connection``), so it must be exact: frames with plain, empty and parted bodies."""
    conn = RemotingConnection()
    transport = RecordingTransport()
    conn.connection_made(transport)
    released: list[int] = []
    request = RemotingCommand.request(CODE)
    replies = [
        request.response_to(0, "plain", body=b"x" * 100),
        request.response_to(0, "empty"),
        request.response_to(
            0,
            "parts",
            body=BodyParts([b"ab", memoryview(b"cdef"), b""], lambda: released.append(1)),
        ),
    ]
    for reply in replies:
        conn.write_command(reply)
    await wait_until(lambda: len(transport.writes) == 1, timeout=5, what="the gather write")
    assert conn._held.submitted == len(transport.writes[0])  # the count under test
    assert [c.remark for c in FrameDecoder().feed(transport.writes[0])] == [
        "plain",
        "empty",
        "parts",
    ]
    await wait_until(lambda: released == [1], timeout=5, what="the parts released")
    conn.connection_lost(None)
