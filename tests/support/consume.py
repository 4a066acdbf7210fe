"""Read every key of a topic back with our client: a pull consumer from offset 0 and a
push consumer from the first offset. Tests compare the counts with what they sent."""

from __future__ import annotations

import asyncio
from collections import Counter

from aiorocketmq.client import ConsumeConcurrentlyStatus, PushConsumer, PushConsumerConfig
from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.pull_consumer import PullConsumer
from aiorocketmq.client.results import PullStatus
from aiorocketmq.common.message import MessageExt
from tests.support.wait import wait_until


async def pull_keys(config: ClientConfig, group: str, topic: str) -> Counter[str]:
    """Every message's first key, pulled from offset 0 of each queue until none is left."""
    seen: Counter[str] = Counter()
    async with PullConsumer(group, client_config=config) as consumer:
        for mq in await consumer.fetch_subscribe_message_queues(topic):
            offset = 0
            while (result := await consumer.pull(mq, "*", offset, 32)).status is PullStatus.FOUND:
                seen.update(m.keys[0] for m in result.msg_found_list)
                offset = result.next_begin_offset
    return seen


async def push_keys(
    config: ClientConfig, group: str, topic: str, total: int, *, timeout_s: float = 30
) -> Counter[str]:
    """Every message's first key as a push consumer gets them, once ``total`` distinct
    keys have arrived."""
    seen: Counter[str] = Counter()
    done = asyncio.Event()

    # async: it sets an asyncio.Event (a def listener would run on a pool thread)
    async def listener(msgs: list[MessageExt], _context: object) -> ConsumeConcurrentlyStatus:
        seen.update(m.keys[0] for m in msgs)
        if len(seen) >= total:
            done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    push = PushConsumerConfig(consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer = PushConsumer(group, config=push, client_config=config)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    async with consumer:
        await wait_until(done, timeout=timeout_s, what=f"{total} keys pushed from {topic}")
    return seen
