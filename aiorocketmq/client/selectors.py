"""Message queue selectors a producer's ``send(..., selector=...)`` may use.

Owns: the ``MessageQueueSelector`` call shape (queues, message, user argument ->
one queue) and the stock selectors of Java's ``producer/selector`` package:
``select_by_hash`` (the same key always lands on the same queue, e.g. for
per-order ordering), ``select_by_random``, plus ``RoundRobinSelector``. The
producer's default choice (round robin skipping the broker that just failed) is
``TopicPublishInfo.select_one_message_queue``.

Must not: send, or look up routes.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from aiorocketmq.common.message import Message, MessageQueue
from aiorocketmq.common.tag_hash import java_string_hash

__all__ = [
    "MessageQueueSelector",
    "RoundRobinSelector",
    "java_hash_code",
    "select_by_hash",
    "select_by_random",
]

MessageQueueSelector: TypeAlias = Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]
"""(the topic's writable queues, the message, the caller's argument) -> the queue to use."""


def java_hash_code(arg: object) -> int:
    """A Java-like ``hashCode`` for the usual argument types, so a Python producer
    and a Java producer hashing the same key pick the same queue.

    ``str`` uses Java's ``String.hashCode``; an ``int`` that fits 32 bits uses
    ``Integer.hashCode`` (itself), a larger one ``Long.hashCode``; anything else uses
    ``hash`` folded to a signed 32-bit value.
    """
    if isinstance(arg, str):
        return java_string_hash(arg)
    if isinstance(arg, int) and -(1 << 31) <= arg < 1 << 31:
        return arg
    if isinstance(arg, int):
        value = arg & 0xFFFFFFFFFFFFFFFF
        folded = (value ^ (value >> 32)) & 0xFFFFFFFF
    else:
        folded = hash(arg) & 0xFFFFFFFF
    return folded - (1 << 32) if folded >= 1 << 31 else folded


def select_by_hash(mqs: Sequence[MessageQueue], _msg: Message, arg: object) -> MessageQueue:
    """Java's ``SelectMessageQueueByHash``: ``abs(arg.hashCode() % len(mqs))``."""
    code = java_hash_code(arg)
    value = abs(code) % len(mqs)  # == abs(code % n) under Java's truncating remainder
    return mqs[value]


def select_by_random(mqs: Sequence[MessageQueue], _msg: Message, _arg: object) -> MessageQueue:
    """Java's ``SelectMessageQueueByRandom``."""
    return mqs[random.randrange(len(mqs))]


class RoundRobinSelector:
    """Each call takes the next queue in turn (the argument is ignored).

    Args:
        start: the first index (default 0).
    """

    def __init__(self, start: int = 0) -> None:
        self._next = start

    def __call__(self, mqs: Sequence[MessageQueue], _msg: Message, _arg: object) -> MessageQueue:
        mq = mqs[self._next % len(mqs)]
        self._next += 1
        return mq
