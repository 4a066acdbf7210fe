"""The broker's named limits, each exceeded over real sockets against a started broker:
``maxConnections``, ``maxHeldPullRequests``, ``maxBatchMessageNums`` and
``maxPropertiesSize``. Each refusal carries a clear code and remark naming the
setting, and the broker goes on serving within its limits afterwards.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from aiorocketmq.common.batch_codec import encode_batch
from aiorocketmq.common.message import Message
from aiorocketmq.remoting.client import RemotingClient, split_address
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import RemotingConnection
from tests.support.cluster import create_topic, in_process_broker
from tests.support.wait import wait_until
from tests.unit.broker.broker_support import pull_request
from tests.unit.broker.processor_support import send_request

pytestmark = pytest.mark.timeout(60)

TOPIC = "LimitTopic"


async def connect(addr: str) -> RemotingConnection:
    host, port = split_address(addr)
    _, conn = await asyncio.get_running_loop().create_connection(
        lambda: RemotingConnection(None), host, port
    )
    return conn


def runtime_info() -> RemotingCommand:
    return RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)


async def test_connections_past_max_connections_get_system_busy(tmp_path: Path) -> None:
    async with in_process_broker(tmp_path, maxConnections=3) as broker:
        addr = broker.listen_address
        kept = [await connect(addr) for _ in range(3)]
        for conn in kept:
            assert (await conn.invoke(runtime_info(), 5.0)).code == ResponseCode.SUCCESS
        extra = await connect(addr)
        reply = await extra.invoke(runtime_info(), 5.0)
        assert reply.code == ResponseCode.SYSTEM_BUSY
        assert reply.remark == "[OVERLOAD] broker serves at most maxConnections=3 connections"
        await asyncio.wait_for(extra.wait_closed(), 5.0)
        # A silent one is closed too, after its grace period.
        silent = await connect(addr)
        await asyncio.wait_for(silent.wait_closed(), 5.0)
        assert broker.server.refused_connections == 2
        # The kept connections were untouched; once one leaves, a newcomer is served.
        assert (await kept[0].invoke(runtime_info(), 5.0)).code == ResponseCode.SUCCESS
        kept[2].close()
        await kept[2].wait_closed()
        await wait_until(lambda: len(broker.server.connections) == 2, timeout=5, what="close seen")
        newcomer = await connect(addr)
        assert (await newcomer.invoke(runtime_info(), 5.0)).code == ResponseCode.SUCCESS
        for conn in (*kept[:2], newcomer):
            conn.close()


async def test_held_pulls_past_the_limit_get_system_busy(tmp_path: Path) -> None:
    async with in_process_broker(tmp_path, maxHeldPullRequests=2) as broker:
        addr = broker.listen_address
        await create_topic(addr, TOPIC)
        client = RemotingClient()
        try:
            # Two pulls at the (empty) end are held; the third is refused at once.
            held = [
                asyncio.ensure_future(
                    client.invoke(addr, pull_request(0, topic=TOPIC, queue_id=q), 20_000)
                )
                for q in (0, 1)
            ]
            await wait_until(lambda: broker.hold.held_count == 2, timeout=5, what="2 held")
            third = await client.invoke(addr, pull_request(0, topic=TOPIC, queue_id=2), 5_000)
            assert third.code == ResponseCode.SYSTEM_BUSY
            assert third.remark == "too many held pulls (2 >= 2); try again later"
            # A message wakes the held pull of its queue with it.
            sent = await client.invoke(addr, send_request(b"wake", topic=TOPIC, queue_id=0), 5_000)
            assert sent.code == ResponseCode.SUCCESS, sent.remark
            woken = await asyncio.wait_for(held[0], 10)
            assert woken.code == ResponseCode.SUCCESS
            held[1].cancel()
        finally:
            await client.close()


async def test_batch_and_properties_limits_are_message_illegal(tmp_path: Path) -> None:
    settings = {"maxBatchMessageNums": 5, "maxPropertiesSize": 200}
    async with in_process_broker(tmp_path, **settings) as broker:
        addr = broker.listen_address
        await create_topic(addr, TOPIC)
        client = RemotingClient()

        def batch(n: int) -> RemotingCommand:
            body = encode_batch(Message(TOPIC, f"m{i}".encode()) for i in range(n))
            return send_request(body, topic=TOPIC, code=RequestCode.SEND_BATCH_MESSAGE, batch=True)

        try:
            ok = await client.invoke(addr, batch(5), 5_000)
            assert ok.code == ResponseCode.SUCCESS, ok.remark
            refused = await client.invoke(addr, batch(6), 5_000)
            assert (refused.code, refused.remark) == (
                ResponseCode.MESSAGE_ILLEGAL,
                "the batch holds more than maxBatchMessageNums 5 messages",
            )
            fits = "TAGS\x01a\x02k\x01" + "v" * 150 + "\x02"
            ok = await client.invoke(addr, send_request(topic=TOPIC, properties=fits), 5_000)
            assert ok.code == ResponseCode.SUCCESS, ok.remark
            # 70 three-byte characters: 79 code points in all, 220 bytes.
            wide = "TAGS\x01a\x02k\x01" + "\u20ac" * 70 + "\x02"
            refused = await client.invoke(addr, send_request(topic=TOPIC, properties=wide), 5_000)
            assert refused.code == ResponseCode.MESSAGE_ILLEGAL
            assert refused.remark == "message properties are 220 bytes, over maxPropertiesSize 200"
            # Nothing refused was stored: 5 batch messages and one single, in queue 0.
            await wait_until(
                lambda: broker.store.dispatch_behind_bytes() == 0, timeout=5, what="dispatched"
            )
            offsets = await client.invoke(
                addr,
                RemotingCommand.request(
                    RequestCode.GET_MAX_OFFSET, {"topic": TOPIC, "queueId": "0"}
                ),
                5_000,
            )
            assert offsets.ext_fields["offset"] == "6"
        finally:
            await client.close()
