"""What a topic route means to a producer and to a consumer.

Owns: ``TopicPublishInfo`` (a topic's writable queues and the round-robin index a
producer picks them with, skipping the broker that just failed: MQFaultStrategy's
non-latency path), and the pure conversions of a ``TopicRouteData`` into publish
info and into the set of readable queues (Java's
``MQClientInstance.topicRouteData2TopicPublishInfo`` / ``...2TopicSubscribeInfo``).

Must not: fetch routes, or know about sending.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from aiorocketmq.common.constants import MASTER_ID, PERM_READ, PERM_WRITE
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.route import TopicRouteData

__all__ = [
    "SendWhichQueue",
    "TopicPublishInfo",
    "route_to_publish_info",
    "route_to_subscribe_info",
]

_POSITIVE_MASK = 0x7FFFFFFF


class SendWhichQueue:
    """Java's ``ThreadLocalIndex``: a random start, then +1 per pick, kept non-negative.

    Args:
        start: the first value (None: random, as Java).
    """

    __slots__ = ("_index",)

    def __init__(self, start: int | None = None) -> None:
        self._index = random.randrange(_POSITIVE_MASK) if start is None else start

    def increment_and_get(self) -> int:
        """The next index (Java wraps at 2**31 and masks to positive)."""
        self._index = (self._index + 1) & 0xFFFFFFFF
        return self._index & _POSITIVE_MASK


@dataclass(slots=True)
class TopicPublishInfo:
    """A topic's queues as a producer sees them.

    Attributes:
        message_queues: writable queues, grouped by broker in route order.
        order_topic: the queues came from an ``orderTopicConf``.
        have_topic_router_info: a route was found (False for the placeholder Java
            puts before the first lookup).
        route: the route the queues came from.
        send_which_queue: the round-robin index.
    """

    message_queues: list[MessageQueue] = field(default_factory=list)
    order_topic: bool = False
    have_topic_router_info: bool = False
    route: TopicRouteData | None = None
    send_which_queue: SendWhichQueue = field(default_factory=SendWhichQueue)

    def ok(self) -> bool:
        """There is at least one queue to send to."""
        return bool(self.message_queues)

    def select_one_message_queue(self, last_broker_name: str | None = None) -> MessageQueue:
        """The next queue round robin; after a failure, one on another broker if any.

        Args:
            last_broker_name: the broker the previous attempt of this send used.

        Raises:
            IndexError: there are no queues (check ``ok()`` first).
        """
        queues = self.message_queues
        if last_broker_name is not None:
            for _ in range(len(queues)):
                mq = queues[self.send_which_queue.increment_and_get() % len(queues)]
                if mq.broker_name != last_broker_name:
                    return mq
        return queues[self.send_which_queue.increment_and_get() % len(queues)]


def route_to_publish_info(topic: str, route: TopicRouteData) -> TopicPublishInfo:
    """The queues a producer may write to.

    With an ``orderTopicConf`` (``"broker-a:4;broker-b:4"``) it decides; otherwise
    every writable QueueData (sorted by brokerName, as Java sorts them) whose broker
    has a master contributes ``writeQueueNums`` queues.
    """
    info = TopicPublishInfo(route=route, have_topic_router_info=True)
    if route.order_topic_conf:
        for item in route.order_topic_conf.split(";"):
            broker_name, _, count = item.partition(":")
            if not broker_name or not count.strip().lstrip("-").isdigit():
                continue  # Java would throw; a bad entry just contributes nothing here
            info.message_queues += [MessageQueue(topic, broker_name, i) for i in range(int(count))]
        info.order_topic = True
        return info
    masters = {bd.broker_name for bd in route.broker_datas if MASTER_ID in bd.broker_addrs}
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if qd.perm & PERM_WRITE and qd.broker_name in masters:
            info.message_queues += [
                MessageQueue(topic, qd.broker_name, i) for i in range(qd.write_queue_nums)
            ]
    return info


def route_to_subscribe_info(topic: str, route: TopicRouteData) -> set[MessageQueue]:
    """The queues a consumer may read: ``readQueueNums`` of every readable QueueData."""
    return {
        MessageQueue(topic, qd.broker_name, i)
        for qd in route.queue_datas
        if qd.perm & PERM_READ
        for i in range(qd.read_queue_nums)
    }
