"""Socket fuzzing of a running ``mqbroker`` and ``mqnamesrv`` with mutated captured frames.

Each test starts the real processes, sends ``SOCKET_FRAMES`` (10,000) mutated
frames of the stock C++ client and ali-ons (``tests/vectors``) over many
connections: a fifth on fresh connections of one frame each, the rest 50 to a
reused connection. Every connection then half-closes, and the server must close
it within ``HANG_S`` (a server that neither answers nor closes is a hang).
Replies are read and discarded; a connection the server resets is fine.

Afterwards a normal client must be served correctly (broker: create a topic, send,
pull the exact bodies back; name server: the broker's route unchanged), the
process must still be running, no traceback may be in its log nor a processor
failure other than ``RemoteProtocolError`` (a body that does not parse), and it must exit 0
on SIGTERM. For the broker the store is then opened with ``MessageStore`` and the
normal client's messages read back (the recovery check).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from aiorocketmq.broker.config import load_broker_settings
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message_codec import decode_pull_body, decode_record
from aiorocketmq.common.properties_file import parse_properties
from aiorocketmq.remoting.broker_headers import PullMessageResponseHeader, SendMessageResponseHeader
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.frame import FrameDecoder, encode_frame
from aiorocketmq.store.message_store import MessageStore
from aiorocketmq.store.results import GetMessageStatus
from tests.fuzz.mutate import FrameMutator, client_frames
from tests.support.cluster import (
    create_topic,
    get_route,
    start_broker,
    start_namesrv,
    wait_route,
)
from tests.support.procs import ManagedProcess
from tests.unit.broker.broker_support import pull_request
from tests.unit.broker.processor_support import send_request

pytestmark = [pytest.mark.fuzz, pytest.mark.timeout(180)]

StartProcess = Callable[..., ManagedProcess]
SOCKET_FRAMES = 10_000
FRESH_SHARE = 5  # SOCKET_FRAMES // FRESH_SHARE frames go alone on fresh connections
PER_REUSED = 50
CONCURRENCY = 16
HANG_S = 15.0
CHECK_TOPIC = "FuzzCheckTopic"
CHECK_BODIES = [f"after-fuzz-{i}".encode() * (1 + i % 5) for i in range(20)]


@dataclass
class BlastStats:
    """What the server did with the mutated frames."""

    frames: int = 0
    connections: int = 0
    reset: int = 0
    replies: int = 0
    sentinel_lost: int = 0
    hung: int = 0


def _sentinel(opaque: int) -> bytes:
    """A valid request both servers answer (the broker with "not supported")."""
    request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
    request.opaque = opaque
    return encode_frame(request)


async def _read_until(
    reader: asyncio.StreamReader, decoder: FrameDecoder, stats: BlastStats, opaque: int | None
) -> bool:
    """Read replies until the one to ``opaque`` (True) or EOF (False)."""
    while chunk := await reader.read(65536):
        try:
            replies = decoder.feed(chunk)
        except RemoteProtocolError:
            pytest.fail(f"the server sent a frame that does not decode: {chunk[:200]!r}")
        stats.replies += len(replies)
        if opaque is not None and any(r.opaque == opaque for r in replies):
            return True
    return False


async def _one_connection(
    addr: str, frames: Sequence[bytes], stats: BlastStats, opaque: int | None
) -> None:
    """Send ``frames`` (then a sentinel request when ``opaque`` is given), then half-close.

    Waiting for the sentinel's reply lets the server answer the frames before it;
    a half-close makes it close the connection, which must happen within ``HANG_S``.
    """
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    decoder = FrameDecoder()
    stats.connections += 1
    try:
        for frame in frames:
            writer.write(frame)
            stats.frames += 1
        if opaque is not None:
            writer.write(_sentinel(opaque))
            try:
                answered = await asyncio.wait_for(_read_until(reader, decoder, stats, opaque), 2)
            except TimeoutError:
                answered = False  # a mutated length swallowed it: the half-close decides
            stats.sentinel_lost += not answered
        writer.write_eof()
        await asyncio.wait_for(_read_until(reader, decoder, stats, None), HANG_S)
    except OSError:
        stats.reset += 1  # the server dropped a broken stream: fine
    except TimeoutError:
        stats.hung += 1
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def blast(addr: str, seed: int) -> BlastStats:
    """Send ``SOCKET_FRAMES`` mutated client frames to ``addr``.

    Fresh connections carry one raw byte mutation each; reused ones carry
    ``PER_REUSED`` header or body mutations with valid framing, then a sentinel.
    """
    mutator = FrameMutator(client_frames(), seed)
    jobs: list[tuple[list[bytes], int | None]] = [
        ([mutator.one()], None) for _ in range(SOCKET_FRAMES // FRESH_SHARE)
    ]
    rest = SOCKET_FRAMES - len(jobs)
    jobs += [
        ([mutator.one(keep_framing=True) for _ in range(min(PER_REUSED, rest - i))], 0x7F000000 + i)
        for i in range(0, rest, PER_REUSED)
    ]
    stats = BlastStats()
    pending = iter(jobs)

    async def worker() -> None:
        for frames, opaque in pending:
            await _one_connection(addr, frames, stats, opaque)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    elapsed = time.perf_counter() - started
    print(
        f"socket fuzz {addr}: {stats} in {elapsed:.1f} s ({stats.frames / elapsed:,.0f} frames/s)"
    )
    return stats


def _assert_blast(stats: BlastStats, proc: ManagedProcess) -> None:
    assert stats.frames == SOCKET_FRAMES
    assert stats.hung == 0, f"{stats.hung} connections neither answered nor closed"
    # Most header/body mutations keep the framing, so many frames reach a processor.
    assert stats.replies > SOCKET_FRAMES // 4, stats
    assert proc.running, proc.tail()
    logs = proc.output() + proc.stderr_path.read_text("utf-8", "replace")
    assert "Traceback" not in logs, proc.tail(60)
    # A processor that fails is logged and answered SYSTEM_ERROR; only the protocol's
    # own error (a body that does not parse) may be the cause, never a Python bug.
    failures = Counter(re.findall(r"processor failed code=\d+ .*? error=(\w+):", logs))
    assert set(failures) <= {"RemoteProtocolError"}, failures


async def _send_and_pull(client: RemotingClient, addr: str) -> None:
    """A normal client: every send stored in order, every body pulled back exactly."""
    await create_topic(addr, CHECK_TOPIC)
    for i, body in enumerate(CHECK_BODIES):
        reply = await client.invoke(addr, send_request(body, topic=CHECK_TOPIC), 5000)
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        assert SendMessageResponseHeader.from_ext_fields(reply.ext_fields).queue_offset == i
    reply = await client.invoke(addr, pull_request(0, topic=CHECK_TOPIC, suspend_ms=3000), 5000)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    header = PullMessageResponseHeader.from_ext_fields(reply.ext_fields)
    assert header.next_begin_offset == len(CHECK_BODIES)
    assert [r.body for r in decode_pull_body(bytes(reply.body))] == CHECK_BODIES


async def _read_back_store(config: Path) -> None:
    """Open the stopped broker's store and read the normal client's messages."""
    text = await asyncio.to_thread(config.read_text, "utf-8")
    settings = load_broker_settings(parse_properties(text))
    store = MessageStore(settings.store)
    try:
        await store.load()
        await store.start()
        result = store.get_message("fuzz-check", CHECK_TOPIC, 0, 0, 32)
        assert result is not None and result.status is GetMessageStatus.FOUND, result
        with result:
            assert [decode_record(v).body for v in result.messages] == CHECK_BODIES
    finally:
        await store.shutdown()


async def test_broker_survives_mutated_frames(start_process: StartProcess, tmp_path: Path) -> None:
    _ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv)
    stats = await blast(broker.addr, seed=12)
    _assert_blast(stats, broker.proc)
    client = RemotingClient()
    try:
        await _send_and_pull(client, broker.addr)
    finally:
        await client.close()
    assert broker.proc.stop() == 0, broker.proc.tail()
    await _read_back_store(broker.config)


async def test_namesrv_survives_mutated_frames(start_process: StartProcess, tmp_path: Path) -> None:
    ns, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv)
    await create_topic(broker.addr, CHECK_TOPIC)
    before = await wait_route(namesrv, CHECK_TOPIC, timeout=10)
    stats = await blast(namesrv, seed=13)
    _assert_blast(stats, ns)
    after = await get_route(namesrv, CHECK_TOPIC)
    assert after is not None
    assert after.broker_datas == before.broker_datas
    assert after.queue_datas == before.queue_datas
    assert broker.proc.running
    assert ns.stop() == 0, ns.tail()
