"""The lite pull consumer's fetcher: one pull loop per assigned queue, feeding poll().

Owns (Java 4.9's ``DefaultLitePullConsumerImpl.PullTaskImpl`` and its
``consumeRequestCache``): per assigned queue an ``AssignedQueue`` (next pull offset,
the consumed offset a commit stores, pause and seek state) and a task that
long-polls the queue while it is assigned; flow control (``pullThresholdForAll``
messages waiting in the cache, ``pullThresholdForQueue`` / ``...SizeForQueue`` per
queue) by events, not sleeps; the cache of pulled batches that ``take`` hands to
poll in pull order, skipping batches of queues dropped or re-sought since.

A seek bumps the queue's generation: batches pulled before it are discarded when
they reach the head of the cache, and the loop pulls from the new offset.

Must not: decide which queues are assigned (the consumer and its rebalance do),
or write offsets to the offset store (the consumer commits).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from aiorocketmq.client.config import LitePullConsumerConfig
from aiorocketmq.client.errors import MQClientError
from aiorocketmq.client.process_queue import ProcessQueue
from aiorocketmq.client.pull_wrapper import PullAPIWrapper, build_pull_sys_flag
from aiorocketmq.client.results import PullStatus
from aiorocketmq.common.message import MessageExt, MessageQueue
from aiorocketmq.common.protocol_bodies import SubscriptionData, build_subscription_data

__all__ = ["AssignedQueue", "Fetcher", "PulledBatch"]

log = logging.getLogger(__name__)


@dataclass(eq=False)
class AssignedQueue:
    """One assigned queue's state.

    Attributes:
        mq: the queue.
        pq: its pulled, not yet polled messages (``dropped`` once unassigned).
        next_offset: where the next pull starts.
        consumed_offset: after the last polled message; what a commit stores
            (-1 until something was polled or sought).
        generation: bumped by each seek; older cached batches are stale.
        paused: pulls wait until resumed.
    """

    mq: MessageQueue
    pq: ProcessQueue
    next_offset: int
    consumed_offset: int = -1
    generation: int = 0
    paused: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


@dataclass(slots=True)
class PulledBatch:
    """One pull's messages, waiting in the cache for poll."""

    queue: AssignedQueue
    generation: int
    msgs: list[MessageExt]


class Fetcher:
    """The pull loops and the poll cache of one lite pull consumer (module docstring).

    Args:
        group: the consumer group (task names, log lines).
        config: the consumer's settings.
        wrapper: pulls with ``suggestWhichBrokerId`` followed.
        subscription_of: the topic's subscription (assign mode: None, meaning ``*``).
    """

    def __init__(
        self,
        group: str,
        config: LitePullConsumerConfig,
        wrapper: PullAPIWrapper,
        subscription_of: Callable[[str], SubscriptionData | None],
    ) -> None:
        self.group = group
        self.config = config
        self.wrapper = wrapper
        self.subscription_of = subscription_of
        self.queues: dict[MessageQueue, AssignedQueue] = {}
        self._cache: deque[PulledBatch] = deque()
        self._cached_msgs = 0
        self._arrived = asyncio.Event()
        self._space = asyncio.Event()
        self._running = True

    # -- queues ---------------------------------------------------------------------------

    def add(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> AssignedQueue:
        """Start pulling ``mq`` from ``offset`` (a queue already pulled is replaced)."""
        self.drop(mq)
        queue = AssignedQueue(mq, pq, offset)
        queue.task = asyncio.create_task(self._pull_loop(queue), name=f"lite-pull-{mq}")
        self.queues[mq] = queue
        return queue

    def drop(self, mq: MessageQueue) -> AssignedQueue | None:
        """Stop pulling ``mq``; its cached batches are discarded when reached."""
        queue = self.queues.pop(mq, None)
        if queue is not None:
            queue.pq.dropped = True
            queue.wake.set()
            if queue.task is not None:
                queue.task.cancel()
        return queue

    def seek(self, queue: AssignedQueue, offset: int) -> None:
        """Pull ``queue`` from ``offset`` next; what was pulled before is discarded."""
        queue.generation += 1
        queue.pq.clear()
        queue.next_offset = offset
        queue.consumed_offset = offset
        queue.wake.set()
        if queue.task is not None:
            queue.task.cancel()  # a held pull of the old offset must not land
        queue.task = asyncio.create_task(self._pull_loop(queue), name=f"lite-pull-{queue.mq}")

    async def shutdown(self) -> None:
        """Stop every pull loop."""
        self._running = False
        tasks = [q.task for q in self.queues.values() if q.task is not None]
        for queue in list(self.queues.values()):
            self.drop(queue.mq)
        await asyncio.gather(*tasks, return_exceptions=True)
        self._arrived.set()

    # -- poll -----------------------------------------------------------------------------

    async def take(self, timeout_s: float) -> PulledBatch | None:
        """The next live batch, waiting up to ``timeout_s``; None when none came."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            while self._cache:
                batch = self._cache.popleft()
                self._cached_msgs -= len(batch.msgs)
                self._space.set()
                queue = batch.queue
                live = self.queues.get(queue.mq) is queue and not queue.pq.dropped
                if live and batch.generation == queue.generation:
                    return batch
            left = deadline - time.monotonic()
            if left <= 0 or not self._running:
                return None
            self._arrived.clear()
            try:
                async with asyncio.timeout(left):
                    await self._arrived.wait()
            except TimeoutError:
                return None

    # -- pulling --------------------------------------------------------------------------

    def _must_wait(self, queue: AssignedQueue) -> bool:
        c = self.config
        if queue.paused or self._cached_msgs >= c.pull_threshold_for_all:
            return True
        pq = queue.pq
        return (
            pq.msg_count >= c.pull_threshold_for_queue
            or pq.msg_size >= c.pull_threshold_size_for_queue * 1024 * 1024
        )

    async def _wait_for_room(self, queue: AssignedQueue) -> None:
        """Until resumed, sought, dropped or the cache drains; at most 1 s (pull expiry)."""
        queue.wake.clear()
        self._space.clear()
        waits = [
            asyncio.ensure_future(queue.wake.wait()),
            asyncio.ensure_future(self._space.wait()),
        ]
        try:
            await asyncio.wait(waits, timeout=1.0, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waits:
                waiter.cancel()

    async def _pull_loop(self, queue: AssignedQueue) -> None:
        try:
            await self._pull_until_dropped(queue)
        finally:
            # The rebalance drops a queue by marking it: forget it here.
            if queue.pq.dropped and self.queues.get(queue.mq) is queue:
                del self.queues[queue.mq]

    async def _pull_until_dropped(self, queue: AssignedQueue) -> None:
        delay_s = self.config.pull_time_delay_millis_when_exception / 1000
        while self._running and not queue.pq.dropped:
            queue.pq.last_pull_timestamp = int(time.monotonic() * 1000)
            if self._must_wait(queue):
                await self._wait_for_room(queue)
                continue
            try:
                await self._pull_once(queue)
            except MQClientError as exc:
                log.info("lite pull failed mq=%s error=%s", queue.mq, exc)
                await asyncio.sleep(delay_s)
            except Exception:  # a bug must not end this queue's pulls for good
                log.exception("lite pull loop error mq=%s", queue.mq)
                await asyncio.sleep(delay_s)

    async def _pull_once(self, queue: AssignedQueue) -> None:
        mq, generation, offset = queue.mq, queue.generation, queue.next_offset
        subscription = self.subscription_of(mq.topic) or build_subscription_data(mq.topic, "*")
        result = await self.wrapper.pull_kernel(
            mq,
            subscription,
            offset,
            self.config.pull_batch_size,
            sys_flag=build_pull_sys_flag(False, True, True),
            suspend_timeout_ms=self.config.broker_suspend_max_time_millis,
            timeout_ms=self.config.consumer_timeout_millis_when_suspend,
        )
        result = self.wrapper.process_pull_result(mq, result, subscription)
        if queue.pq.dropped or generation != queue.generation:
            return  # unassigned or sought meanwhile: this answer is stale
        if result.status is PullStatus.FOUND and result.msg_found_list:
            msgs = result.msg_found_list
            queue.pq.put_messages(msgs)
            self._cache.append(PulledBatch(queue, generation, msgs))
            self._cached_msgs += len(msgs)
            self._arrived.set()
        elif result.status is PullStatus.OFFSET_ILLEGAL:
            log.warning("lite pull offset illegal mq=%s next=%d", mq, result.next_begin_offset)
        queue.next_offset = result.next_begin_offset
