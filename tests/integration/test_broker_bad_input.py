"""Bad input to a running ``mqbroker``: each gets its answer, and the broker serves on.

One broker process; a "bystander" connection opened before the abuse must keep
working through all of it, and a fresh connection afterwards too. Malformed frames
close only their own connection.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.frame import FrameDecoder, encode_frame
from tests.support.cluster import BROKER_READY, broker_properties
from tests.support.procs import ManagedProcess
from tests.unit.broker.broker_support import pull_request
from tests.unit.broker.processor_support import send_request

pytestmark = pytest.mark.timeout(90)

StartProcess = Callable[..., ManagedProcess]
MAX_MESSAGE_SIZE = 1024


@pytest.fixture
async def broker(start_process: StartProcess, tmp_path: Path) -> AsyncIterator[str]:
    conf = broker_properties(tmp_path, "broker-a", maxMessageSize=MAX_MESSAGE_SIZE)
    proc = start_process(
        ["-m", "aiorocketmq.cli.broker", "-c", str(conf)],
        name="broker",
        ready=BROKER_READY,
        wait=False,
    )
    addr = (await proc.wait_ready_async())["addr"]
    yield addr
    assert proc.running, "the broker died\n" + proc.tail()


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    c = RemotingClient()
    yield c
    await c.close()


async def _ok(client: RemotingClient, addr: str) -> None:
    reply = await client.invoke(addr, send_request(b"still serving"), 5000)
    assert reply.code == ResponseCode.SUCCESS, reply.remark


async def _raw(addr: str, data: bytes) -> tuple[list[RemotingCommand], bool]:
    """Write ``data`` on a fresh socket: the replies read and whether the broker closed it."""
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port))
    decoder = FrameDecoder()
    replies: list[RemotingCommand] = []
    closed = False
    try:
        writer.write(data)
        await writer.drain()
        while not closed and not replies:
            chunk = await asyncio.wait_for(reader.read(65536), 10)
            closed = not chunk
            replies.extend(decoder.feed(chunk))
    finally:
        writer.close()
    return replies, closed


async def test_answers_and_keeps_serving(broker: str, client: RemotingClient) -> None:
    bystander = RemotingClient()
    try:
        await _ok(bystander, broker)
        cases: list[tuple[RemotingCommand, int, str]] = [
            (RemotingCommand.request(9999), ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "9999"),
            (
                RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "TopicTest"}, b"x"),
                ResponseCode.SYSTEM_ERROR,
                "producerGroup",
            ),
            (
                RemotingCommand.request(RequestCode.PULL_MESSAGE, {"topic": "TopicTest"}),
                ResponseCode.SYSTEM_ERROR,
                "consumerGroup",
            ),
            (send_request(b"x" * (2 * MAX_MESSAGE_SIZE)), ResponseCode.MESSAGE_ILLEGAL, "1024"),
            (send_request(topic="bad topic!"), ResponseCode.SYSTEM_ERROR, "illegal characters"),
            (send_request(topic="t" * 128), ResponseCode.SYSTEM_ERROR, "longer than"),
            (send_request(topic="SCHEDULE_TOPIC_XXXX"), ResponseCode.NO_PERMISSION, "forbidden"),
            (pull_request(0, topic="NoSuchTopic"), ResponseCode.TOPIC_NOT_EXIST, "NoSuchTopic"),
        ]
        for request, code, remark in cases:
            reply = await client.invoke(broker, request, 5000)
            assert reply.code == code, (request.code, reply.code, reply.remark)
            assert reply.remark is not None and remark in reply.remark, reply.remark
            await _ok(bystander, broker)
    finally:
        await bystander.close()
    await _ok(client, broker)


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(b"\xff" * 64, id="random-bytes"),
        pytest.param(struct.pack(">ii", 8, 100) + b"\0" * 4, id="header-longer-than-frame"),
        pytest.param(struct.pack(">ii", 12, 4) + b"{no json", id="bad-json-header"),
        pytest.param(struct.pack(">ii", 17 * 1024 * 1024, 2), id="frame-over-16MiB"),
        pytest.param(struct.pack(">ii", 8, (7 << 24) | 4) + b"abcd", id="unknown-serialize-type"),
    ],
)
async def test_garbage_frames_close_only_their_connection(
    broker: str, client: RemotingClient, garbage: bytes
) -> None:
    await _ok(client, broker)  # the bystander's connection exists before the garbage
    replies, closed = await _raw(broker, garbage)
    assert closed and not replies
    await _ok(client, broker)
    # A good frame on a fresh raw socket is still answered.
    good = encode_frame(send_request(b"raw"))
    (reply,), _ = await _raw(broker, good)
    assert reply.code == ResponseCode.SUCCESS
