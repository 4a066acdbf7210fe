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


async def pull_keys(
    config: ClientConfig, group: str, topic: str, total: int, *, timeout_s: float = 30
) -> Counter[str]:
    """Every message's first key, pulled from offset 0 of each queue until ``total``
    have come and then until none is left.

    The broker dispatches a message to its queue after the send's reply, so a pull
    right after the last send may not find it yet: the passes repeat until ``total``.
    """
    seen: Counter[str] = Counter()
    async with PullConsumer(group, client_config=config) as consumer:
        queues = await consumer.fetch_subscribe_message_queues(topic)
        offsets = dict.fromkeys(queues, 0)

        async def pass_over_queues() -> bool:
            for mq in queues:
                while True:
                    result = await consumer.pull(mq, "*", offsets[mq], 32)
                    if result.status is not PullStatus.FOUND:
                        break
                    seen.update(m.keys[0] for m in result.msg_found_list)
                    offsets[mq] = result.next_begin_offset
            return seen.total() >= total

        await wait_until(
            pass_over_queues, timeout=timeout_s, what=f"{total} keys pulled from {topic}",
            describe=seen.total,
        )  # fmt: skip
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
