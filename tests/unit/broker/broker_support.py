"""A broker's processors on a real store and a real server, for component tests.

Owns: ``Harness`` (a started MessageStore on small files, the config managers in
tmp_path, a started PullRequestHoldService wired to the pull processor, more
processors registered by the caller, a RemotingServer on 127.0.0.1:0, a
RemotingClient, and raw replay of captured client frames) and request builders.

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
from aiorocketmq.broker.long_polling import PullRequestHoldService
from aiorocketmq.broker.offsets import ConsumerOffsetManager
from aiorocketmq.broker.processors.pull import PullProcessor
from aiorocketmq.broker.subscription_group import SubscriptionGroupManager
from aiorocketmq.broker.topic_config import TopicConfigManager
from aiorocketmq.common.clock import SystemClock
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.remoting.broker_headers import PullMessageRequestHeader
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingServerConfig
from aiorocketmq.remoting.connection import ProcessorTable
from aiorocketmq.remoting.frame import FrameDecoder
from aiorocketmq.remoting.server import RemotingServer
from aiorocketmq.runtime import BlockingExecutor
from aiorocketmq.store.message_store import MessageStore
from tests.unit.store.store_support import open_store, store_config

TOPIC = "TopicTest"
GROUP = "CID_test"
STORE_HOST = ("127.0.0.1", 10911)
#: suspend | subscription
PULL_FLAGS = 0x2 | 0x4


@dataclass
class Harness:
    """The parts a test talks to."""

    ctx: BrokerContext
    hold: PullRequestHoldService
    table: ProcessorTable
    server: RemotingServer
    client: RemotingClient
    pull: PullProcessor

    @property
    def address(self) -> str:
        """Where the server listens."""
        return self.server.address

    async def invoke(self, request: RemotingCommand, timeout_ms: int = 3000) -> RemotingCommand:
        """One request through the client."""
        return await self.client.invoke(self.address, request, timeout_ms)

    async def replay(self, frames: list[bytes]) -> tuple[list[RemotingCommand], tuple[str, int]]:
        """Write captured frames on one raw socket; the replies and the local address."""
        reader, writer = await asyncio.open_connection(self.server.host, self.server.port)
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
async def harness(
    tmp_path: Path,
    *,
    broker: dict[str, Any] | None = None,
    store: dict[str, Any] | None = None,
    total_physical_memory: int | None = None,
    short_polling_ms: int = 1_000,
    long_polling_enable: bool = True,
    extra: Any = None,
) -> AsyncIterator[Harness]:
    """A started harness; ``extra(ctx, table)`` registers more processors."""
    executor = BlockingExecutor("test-broker")
    clock = SystemClock()
    cfg = BrokerConfig(**(broker or {}))
    scfg = store_config(tmp_path / "store", **(store or {}))
    kwargs = (
        {} if total_physical_memory is None else {"total_physical_memory": total_physical_memory}
    )
    st = await open_store(scfg, **kwargs)
    ctx = _context(tmp_path / "config", cfg, st, executor, clock)
    pull = PullProcessor(ctx)
    hold = PullRequestHoldService(
        clock=clock,
        max_offset=st.get_max_offset_in_queue,
        rerun=pull.rerun,
        long_polling_enable=long_polling_enable,
        short_polling_ms=short_polling_ms,
    )
    ctx.hold = hold
    st.add_arrival_listener(hold.on_arrival)
    table = ProcessorTable()
    pull.register(table)
    if extra is not None:
        extra(ctx, table)
    server = RemotingServer(table, RemotingServerConfig(listen_host="127.0.0.1", listen_port=0))
    client = RemotingClient()
    await hold.start()
    await server.start()
    try:
        yield Harness(ctx, hold, table, server, client, pull)
    finally:
        await client.close()
        await server.shutdown()
        await hold.shutdown()
        await st.shutdown()
        for manager in (ctx.topics, ctx.groups, ctx.offsets):
            await manager.flush()
        await executor.shutdown()


def _context(
    cfgdir: Path,
    cfg: BrokerConfig,
    st: MessageStore,
    executor: BlockingExecutor,
    clock: SystemClock,
) -> BrokerContext:
    topics = TopicConfigManager(cfgdir / "topics.json", executor, cfg, clock)
    topics.update_topic_config(TopicConfig(TOPIC, 4, 4))
    return BrokerContext(
        config=cfg,
        store_config=st.config,
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


def pull_request(
    offset: int,
    *,
    queue_id: int = 0,
    topic: str = TOPIC,
    group: str = GROUP,
    sys_flag: int = PULL_FLAGS,
    subscription: str | None = "*",
    suspend_ms: int = 15_000,
    commit_offset: int = 0,
    sub_version: int = 0,
    max_msgs: int = 32,
) -> RemotingCommand:
    """A PULL_MESSAGE as a Java client builds it."""
    header = PullMessageRequestHeader(
        consumer_group=group,
        topic=topic,
        queue_id=queue_id,
        queue_offset=offset,
        max_msg_nums=max_msgs,
        sys_flag=sys_flag,
        commit_offset=commit_offset,
        suspend_timeout_millis=suspend_ms,
        sub_version=sub_version,
        subscription=subscription,
    )
    return RemotingCommand(code=RequestCode.PULL_MESSAGE, ext_fields=header.to_ext_fields())
