"""The send and offset processors on a real store and a real server, for component tests.

Owns: ``SendHarness`` (a started MessageStore on small files, the config managers
in tmp_path, ``SendProcessor`` + ``ConsumerManageProcessor`` behind a
RemotingServer on 127.0.0.1:0, a RemotingClient), raw-frame replay of captured
client frames, and request builders.

Must not: fake the store or the network: every part is the real one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiorocketmq.broker.client_registry import ConsumerManager, ProducerManager
from aiorocketmq.broker.config import BrokerConfig
from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.offsets import ConsumerOffsetManager
from aiorocketmq.broker.processors.consumer_manage import ConsumerManageProcessor
from aiorocketmq.broker.processors.send import SendProcessor
from aiorocketmq.broker.subscription_group import SubscriptionGroupManager
from aiorocketmq.broker.topic_config import TopicConfigManager
from aiorocketmq.common.clock import SystemClock
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.remoting.broker_headers import SendMessageRequestHeader
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingServerConfig
from aiorocketmq.remoting.connection import ProcessorTable
from aiorocketmq.remoting.frame import FrameDecoder
from aiorocketmq.remoting.server import RemotingServer
from aiorocketmq.runtime import BlockingExecutor
from tests.unit.store.store_support import open_store, store_config

TOPIC = "TopicTest"
STORE_HOST = ("127.0.0.1", 10911)


@dataclass
class SendHarness:
    """The parts a test talks to."""

    ctx: BrokerContext
    server: RemotingServer
    client: RemotingClient

    @property
    def address(self) -> str:
        """Where the server listens."""
        return self.server.address

    async def invoke(self, request: RemotingCommand, timeout_ms: int = 3000) -> RemotingCommand:
        """One request through the client."""
        return await self.client.invoke(self.address, request, timeout_ms)

    async def replay(self, frames: list[bytes]) -> tuple[list[RemotingCommand], tuple[str, int]]:
        """Write captured frames on one raw socket; the replies and the local address."""
        host, port = self.server.host, self.server.port
        reader, writer = await asyncio.open_connection(host, port)
        local = writer.get_extra_info("sockname")
        decoder = FrameDecoder()
        replies: list[RemotingCommand] = []
        try:
            for i, frame in enumerate(frames):
                writer.write(frame)
                await writer.drain()
                while len(replies) <= i:
                    data = await asyncio.wait_for(reader.read(65536), 5.0)
                    assert data, "server closed the connection"
                    replies.extend(decoder.feed(data))
        finally:
            writer.close()
        return replies, (local[0], local[1])


@contextlib.asynccontextmanager
async def send_harness(
    tmp_path: Path,
    *,
    broker: dict[str, Any] | None = None,
    store: dict[str, Any] | None = None,
) -> AsyncIterator[SendHarness]:
    """A started harness with ``TopicTest`` (4 queues) created."""
    executor = BlockingExecutor("test-send")
    clock = SystemClock()
    cfg = BrokerConfig(**(broker or {}))
    scfg = store_config(tmp_path / "store", **(store or {}))
    st = await open_store(scfg)
    cfgdir = tmp_path / "config"
    topics = TopicConfigManager(cfgdir / "topics.json", executor, cfg, clock)
    topics.update_topic_config(TopicConfig(TOPIC, 4, 4))
    ctx = BrokerContext(
        config=cfg,
        store_config=scfg,
        store=st,
        topics=topics,
        groups=SubscriptionGroupManager(cfgdir / "subscriptionGroup.json", executor, cfg, clock),
        offsets=ConsumerOffsetManager(cfgdir / "consumerOffset.json", executor),
        producers=ProducerManager(clock),
        consumers=ConsumerManager(clock),
        hold=None,
        store_host=STORE_HOST,
        clock=clock,
    )
    table = ProcessorTable()
    SendProcessor(ctx).register(table)
    ConsumerManageProcessor(ctx).register(table)
    server = RemotingServer(table, RemotingServerConfig(listen_host="127.0.0.1", listen_port=0))
    client = RemotingClient()
    await server.start()
    try:
        yield SendHarness(ctx, server, client)
    finally:
        await client.close()
        await server.shutdown()
        await ctx.topics.flush()
        await ctx.groups.flush()
        await st.shutdown()
        await executor.shutdown()


def send_request(
    body: bytes = b"hello",
    *,
    topic: str = TOPIC,
    queue_id: int = 0,
    properties: str = "TAGS\x01TagA\x02WAIT\x01true\x02",
    code: int = RequestCode.SEND_MESSAGE,
    **fields: Any,
) -> RemotingCommand:
    """A SEND_MESSAGE (or another code) as a Java client builds it."""
    values: dict[str, Any] = {
        "producer_group": "PID_test",
        "topic": topic,
        "default_topic": "TBW102",
        "default_topic_queue_nums": 4,
        "queue_id": queue_id,
        "sys_flag": 0,
        "born_timestamp": 1_700_000_000_000,
        "flag": 0,
        "properties": properties,
    }
    values.update(fields)
    header = SendMessageRequestHeader(**values)
    ext = (
        header.to_ext_fields_v2() if code == RequestCode.SEND_MESSAGE_V2 else header.to_ext_fields()
    )
    return RemotingCommand.request(code, ext, body)
