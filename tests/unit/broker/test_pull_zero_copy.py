"""Zero-copy pull replies (issue 5): the reply body goes from the mapped CommitLog
to the socket without being joined, and the held records are given back exactly
when the transport let go of them.

Every test runs a real store, the real pull processor and RemotingServer on
127.0.0.1, and raw sockets for the consumer side, on uvloop (default) and on
asyncio (``AIOROCKETMQ_TEST_LOOP=asyncio``), whose transports keep or copy the
written buffers respectively (``remoting/connection.py`` module docstring).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvloop

from aiorocketmq.remoting.codes import ResponseCode
from aiorocketmq.remoting.command import BodyParts, RemotingCommand
from aiorocketmq.remoting.connection import RemotingConnection
from aiorocketmq.remoting.errors import RemotingSendRequestError
from aiorocketmq.remoting.frame import FrameDecoder, encode_frame
from aiorocketmq.store.mapped_file import MappedFile, delete_files_blocking
from tests.support.wait import wait_until
from tests.unit.broker.broker_support import GROUP, TOPIC, Harness, harness, pull_request
from tests.unit.store.store_support import dispatched, inner, put_ok

#: 1 KiB bodies: ~60 records per 64 KiB test CommitLog file, so pulls cross files.
BODY_BYTES = 1024
_LEN = struct.Struct(">iI")


@pytest.fixture(autouse=True)
def _no_collected_bodies(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """A body released by the garbage collector is a missed release path: fail."""
    caplog.set_level(logging.WARNING, logger="aiorocketmq.remoting.command")
    yield
    leaked = [r for r in caplog.records if "collected unreleased" in r.getMessage()]
    assert not leaked, [r.getMessage() for r in leaked]


async def put_n(h: Harness, n: int, *, queue_id: int = 0, tags: str = "a") -> None:
    for i in range(n):
        body = f"{i:08d}".encode().ljust(BODY_BYTES, b"x")
        await put_ok(h.ctx.store, inner(body, queue_id=queue_id, TAGS=tags))
    await dispatched(h.ctx.store)


def stored(h: Harness, offset: int, n: int, *, queue_id: int = 0) -> bytes:
    """The stored records a pull of ``n`` from ``offset`` must return, copied."""
    result = h.ctx.store.get_message(GROUP, TOPIC, queue_id, offset, n)
    assert result is not None
    with result:
        return result.body()


def files(h: Harness) -> list[MappedFile]:
    return h.ctx.store.commit_log.queue.files


def reader_refs(h: Harness) -> int:
    """References held by readers over all CommitLog files (the owner's not counted)."""
    return sum(f.ref_count - 1 for f in files(h))


def server_conn(h: Harness) -> RemotingConnection:
    (conn,) = h.server.connections
    return conn


async def slow_reader(h: Harness) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A consumer socket with tiny kernel and stream buffers: it reads only when told."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (h.server.host, h.server.port))
    return await asyncio.open_connection(sock=sock, limit=4096)


def pull_frames(offsets: list[int], max_msgs: int) -> tuple[bytes, dict[int, int]]:
    """Pipelined PULL_MESSAGE frames; opaque -> offset."""
    frames, by_opaque = [], {}
    for opaque, offset in enumerate(offsets, start=1):
        request = pull_request(offset, sys_flag=0x4, max_msgs=max_msgs)
        request.opaque = opaque
        frames.append(encode_frame(request))
        by_opaque[opaque] = offset
    return b"".join(frames), by_opaque


async def read_replies(reader: asyncio.StreamReader, count: int) -> list[RemotingCommand]:
    decoder, replies = FrameDecoder(), []
    while len(replies) < count:
        data = await asyncio.wait_for(reader.read(8192), 10)
        assert data, f"connection closed after {len(replies)} of {count} replies"
        replies += decoder.feed(data)
    return replies


# -- the wire ------------------------------------------------------------------------


async def test_reply_bytes_on_the_wire_are_the_stored_records(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await put_n(h, 100)  # two CommitLog files
        reader, writer = await asyncio.open_connection(h.server.host, h.server.port)
        try:
            frames, _ = pull_frames([0, 50], max_msgs=32)
            writer.write(frames)
            raw = b""
            replies: list[RemotingCommand] = []
            decoder = FrameDecoder()
            while len(replies) < 2:
                data = await asyncio.wait_for(reader.read(65536), 5)
                assert data
                raw += data
                replies += decoder.feed(data)
        finally:
            writer.close()
            await writer.wait_closed()
        # Parse the first frame by hand: its body bytes are the records, byte for byte.
        length, info = _LEN.unpack_from(raw, 0)
        header_len = info & 0xFFFFFF
        first_body = raw[8 + header_len : 4 + length]
        assert first_body == stored(h, 0, 32)
        assert [r.code for r in replies] == [ResponseCode.SUCCESS] * 2
        # Records 50..81 straddle the end of the first CommitLog file: still exact.
        assert replies[1].body == stored(h, 50, 32)
        await wait_until(lambda: reader_refs(h) == 0, what="records released after the write")


async def test_wire_views_coalesce_runs_and_hold_until_release(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await put_n(h, 100)
        first = files(h)[0]
        refs = first.ref_count  # no await below: the flush service stays put
        result = h.ctx.store.get_message(GROUP, TOPIC, 0, 50, 32)
        assert result is not None and result.message_count == 32
        assert result.buffers[0].file is first and result.buffers[-1].file is not first
        in_first = first.ref_count - refs
        with result:
            views = result.wire_views()
            # One view per file: the run at the end of file 0, the run in file 1.
            assert len(views) == 2
            assert b"".join(views) == result.body()
            assert first.ref_count == refs + in_first + 1  # the run holds it once more
        assert first.ref_count == refs
        with pytest.raises(ValueError):
            bytes(views[0])  # released with the result: never readable again


async def test_one_run_is_one_view_and_drops_the_record_holds(tmp_path: Path) -> None:
    """The per-record scan (a CommitLog-level filter forces it): a hold per record,
    then one for the run, and the records' holds go once the run is handed over."""
    async with harness(tmp_path) as h:
        await put_n(h, 40)
        first = files(h)[0]
        # No await from here on: the flush service cannot hold or release meanwhile.
        refs = first.ref_count
        result = h.ctx.store.get_message(GROUP, TOPIC, 0, 0, 32, record_filter=_everything)
        assert result is not None and result.message_count == 32
        assert first.ref_count == refs + 32
        body = result.body()
        with result:
            views = result.wire_views()
            assert len(views) == 1 and views[0] == body
            assert first.ref_count == refs + 1  # the run's hold only
            with pytest.raises(ValueError):
                bytes(result.messages[0])  # handed over: never read again
            assert result.message_count == 32
        assert first.ref_count == refs


async def test_a_pull_without_a_filter_holds_its_file_once(tmp_path: Path) -> None:
    """The vectorised scan: one held slice for the whole pull from the start."""
    async with harness(tmp_path) as h:
        await put_n(h, 40)
        first = files(h)[0]
        refs = first.ref_count
        result = h.ctx.store.get_message(GROUP, TOPIC, 0, 0, 32)
        assert result is not None and result.message_count == 32
        assert first.ref_count == refs + 1
        assert result.message_queue_offsets == list(range(32))
        with result:
            views = result.wire_views()
            assert len(views) == 1 and bytes(views[0]) == result.body()
            assert result.body() == b"".join(stored(h, i, 1) for i in range(32))
            assert first.ref_count == refs + 1
        assert first.ref_count == refs
        with pytest.raises(ValueError):
            bytes(result.messages[0])  # released: never read again


def _everything(_record: memoryview) -> bool:
    return True


async def test_tag_filter_gaps_make_separate_views(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        for i in range(6):
            await put_ok(h.ctx.store, inner(b"m%d" % i, TAGS="a" if i % 3 else "b"))
        await dispatched(h.ctx.store)
        for record_filter in (None, _everything):  # without and with a CommitLog filter
            result = h.ctx.store.get_message(
                GROUP, TOPIC, 0, 0, 32, tag_codes=frozenset({ord("a")}), record_filter=record_filter
            )
            assert result is not None
            with result:
                assert result.message_count == 4  # records 1, 2, 4, 5
                body = result.body()
                views = result.wire_views()
                assert len(views) == 2
                assert b"".join(views) == body
        reply = await h.invoke(pull_request(0, sys_flag=0x4, subscription="a"))
        assert reply.code == ResponseCode.SUCCESS
        assert reply.body == b"".join(_stored_by_offsets(h, [1, 2, 4, 5]))
        await wait_until(lambda: reader_refs(h) == 0, what="released after the write")


def _stored_by_offsets(h: Harness, offsets: list[int]) -> list[bytes]:
    return [stored(h, offset, 1) for offset in offsets]


# -- backpressure and lifetime -------------------------------------------------------


def transport_keeps_buffers() -> bool:
    """uvloop keeps what writelines gets; asyncio 3.11's stock writelines joins a copy."""
    return isinstance(asyncio.get_running_loop(), uvloop.Loop)


async def _fill_with_replies(
    h: Harness, writer: asyncio.StreamWriter, offsets: list[int]
) -> dict[int, int]:
    """Pipeline pulls of up to 32 records at a consumer that does not read, until the
    server's transport buffers over 1 MiB of replies; return opaque -> offset."""
    frames, by_opaque = pull_frames(offsets, max_msgs=32)
    writer.write(frames)
    await wait_until(lambda: len(h.server.connections) == 1, what="server connection")
    conn = server_conn(h)
    # Every pull answered, not just the first MiB of them: a pull still being served (a
    # loaded machine answers fewer per loop iteration) would be answered after whatever
    # the test does next.
    await wait_until(
        lambda: conn.write_buffer_size > 1024 * 1024 and conn.replies_sent == len(offsets),
        timeout=20,
        what="every pull answered, replies queued in the server's transport",
        describe=lambda: (conn.write_buffer_size, conn.held_body_count, conn.replies_sent),
    )
    assert conn.transport_copies_writes is not transport_keeps_buffers()
    if transport_keeps_buffers():
        # The transport references the views: the records stay held meanwhile.
        assert conn.held_body_count > 0
        assert reader_refs(h) > 0
    else:
        # Joined into the transport's own buffer: nothing of ours is held (the
        # flush service may hold a file for a moment: wait that out).
        assert conn.held_body_count == 0
        await wait_until(lambda: reader_refs(h) == 0, what="no record held")
        assert conn.write_buffer_size > 0
    return by_opaque


async def test_many_pulls_at_a_slow_reader_keep_data_correct(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await put_n(h, 320)
        reader, writer = await slow_reader(h)
        try:
            offsets = [(i * 7) % 280 for i in range(300)]  # every CommitLog file
            by_opaque = await _fill_with_replies(h, writer, offsets)
            replies = await read_replies(reader, len(by_opaque))
        finally:
            writer.close()
            await writer.wait_closed()
        expected = {offset: stored(h, offset, 32) for offset in set(by_opaque.values())}
        assert len(replies) == len(by_opaque)
        for reply in replies:
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            assert reply.body == expected[by_opaque[reply.opaque]], reply.opaque
        await wait_until(lambda: reader_refs(h) == 0, what="every record released")


@pytest.mark.parametrize("finish", ["read", "abort", "server_abort"])
async def test_expiry_never_unmaps_under_queued_replies(tmp_path: Path, finish: str) -> None:
    """CleanupService expires the first CommitLog file while replies of its records
    wait in the server's transport: the mapping outlives them, then really closes
    (munmap) once they are read, or once the connection is aborted by either side."""
    async with harness(tmp_path) as h:
        await put_n(h, 320)
        first = files(h)[0]
        mapping = first.buffer  # the mmap object: closes only when nothing exports it
        expected = {offset: stored(h, offset, 32) for offset in range(20)}
        reader, writer = await slow_reader(h)
        # Queue offsets 0..49 are all in the first file (58 records of ~1.1 KiB).
        by_opaque = await _fill_with_replies(h, writer, [i % 20 for i in range(300)])
        conn = server_conn(h)
        h.ctx.store.commit_log.queue.detach([first])  # CleanupService's expiry
        assert await h.ctx.store.executor.run(delete_files_blocking, [first]) == 1
        if transport_keeps_buffers():
            assert first.ref_count > 0 and not first.closed and not mapping.closed
        if finish == "read":
            replies = await read_replies(reader, len(by_opaque))
            for reply in replies:
                assert reply.body == expected[by_opaque[reply.opaque]], (reply.opaque, reply.remark)
            writer.close()
            await writer.wait_closed()
        else:
            # The consumer resets the connection, or the broker drops it (idle scan,
            # shutdown) with its writes still queued in the transport.
            (writer.transport if finish == "abort" else conn).abort()
            await wait_until(lambda: not h.server.connections, what="server saw the close")
            writer.close()
        await wait_until(
            lambda: first.closed and mapping.closed,
            what="the expired file's mapping closed",
            describe=lambda: (conn.held_body_count, first.ref_count, mapping.closed),
        )
        assert conn.held_body_count == 0
        assert first.ref_count == 0
        assert not first.path.exists()


async def test_reply_to_a_closed_connection_is_released(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        await put_n(h, 10)
        reader, writer = await asyncio.open_connection(h.server.host, h.server.port)
        writer.write(encode_frame(pull_request(0, sys_flag=0x4)))
        await reader.read(1)  # the reply started: the connection is served
        conn = server_conn(h)
        writer.transport.abort()
        await conn.wait_closed()
        # A late reply (a processor finishing after the close) is dropped, released.
        result = h.ctx.store.get_message(GROUP, TOPIC, 0, 0, 10)
        assert result is not None
        body = BodyParts(result.wire_views(), on_release=result.release)
        request = pull_request(0)
        conn._reply(request, request.response_to(ResponseCode.SUCCESS, body=body))
        assert body.released
        # write_command refuses a closed connection and gives the records back too.
        again = h.ctx.store.get_message(GROUP, TOPIC, 0, 0, 10)
        assert again is not None
        body = BodyParts(again.wire_views(), on_release=again.release)
        with pytest.raises(RemotingSendRequestError):
            conn.write_command(request.response_to(ResponseCode.SUCCESS, body=body))
        assert body.released
        await wait_until(lambda: reader_refs(h) == 0, what="released")


# -- long polling --------------------------------------------------------------------


async def test_held_pull_reply_is_zero_copy_and_released(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        task = asyncio.ensure_future(h.invoke(pull_request(0)))
        await wait_until(lambda: h.hold.held_count == 1, what="pull held")
        await put_n(h, 3)
        reply = await asyncio.wait_for(task, 5)
        assert reply.code == ResponseCode.SUCCESS
        assert reply.body == stored(h, 0, 3)
        await wait_until(lambda: reader_refs(h) == 0, what="released after the write")


class _Channel:
    remote_address = "127.0.0.1:1"


async def test_rerun_for_a_waiter_that_gave_up_releases(tmp_path: Path) -> None:
    async with harness(tmp_path) as h:
        held = h.hold.suspend(
            pull_request(0),
            _Channel(),
            topic=TOPIC,
            queue_id=0,
            pull_from_offset=0,
            timeout_ms=10_000,
            tag_codes=None,
        )
        held.future.cancel()  # the processor awaiting it was cancelled
        await put_n(h, 3)  # wakes the held pull: re-run, FOUND, nobody to write it
        await wait_until(lambda: h.hold.held_count == 0, what="held pull re-run")
        await wait_until(lambda: reader_refs(h) == 0, what="the re-run's records released")
