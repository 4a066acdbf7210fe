"""PullMessageService: one long-polling pull loop per queue a push consumer owns.

Owns (Java 4.9.8 ``PullMessageService`` and ``DefaultMQPushConsumerImpl.pullMessage``):
a task per owned queue that pulls while its process queue lives, flow control by
count, size and (concurrent) span, the orderly rule that pulls start from the
committed offset once the queue's broker lock is held, the pull itself (always
with the subscription, ``suggestWhichBrokerId`` followed through
``PullAPIWrapper``), and OFFSET_ILLEGAL handling.

Must not: decide which queues are owned (``rebalance``) or consume messages (the
consume services, through ``PushConsumer.submit_pulled``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Final

from aiorocketmq.client.errors import MQClientError, MQRemotingError
from aiorocketmq.client.offset_store import ReadOffsetType
from aiorocketmq.client.process_queue import ProcessQueue
from aiorocketmq.client.pull_wrapper import build_pull_sys_flag
from aiorocketmq.client.rebalance import compute_pull_from_where
from aiorocketmq.client.results import PullStatus
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.protocol_bodies import MessageModel

if TYPE_CHECKING:
    from aiorocketmq.client.push_consumer import PushConsumer

__all__ = ["PullMessageService"]

log = logging.getLogger(__name__)

_FLOW_CONTROL_WAIT_S: Final = 1.0
"""Longest wait of a queue held back by flow control: it is woken as soon as messages
leave its process queue; the bound only covers limits changed from elsewhere."""


class PullMessageService:
    """The pull loops of one push consumer (see the module docstring).

    Args:
        consumer: the push consumer whose queues are pulled.
    """

    def __init__(self, consumer: PushConsumer) -> None:
        self.consumer = consumer
        self._tasks: dict[MessageQueue, asyncio.Task[None]] = {}

    def tasks(self) -> list[asyncio.Task[None]]:
        """The running pull loops."""
        return list(self._tasks.values())

    def clear(self) -> None:
        """Forget the loops (after they were cancelled and awaited)."""
        self._tasks = {}

    def dispatch(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        """Start the pull loop of a newly owned queue."""
        old = self._tasks.get(mq)
        if old is not None and not old.done():
            old.cancel()  # its process queue was dropped; the new one takes over
        task = asyncio.create_task(self._pull_loop(mq, pq, next_offset), name=f"pull-{mq}")
        self._tasks[mq] = task

        def forget(done: asyncio.Task[None]) -> None:
            if self._tasks.get(mq) is done:
                del self._tasks[mq]

        task.add_done_callback(forget)

    def _must_wait(self, pq: ProcessQueue) -> bool:
        """Java's flow control: too many, too large, or (concurrent) too far apart."""
        c = self.consumer.config
        if pq.msg_count > c.pull_threshold_for_queue:
            return True
        if pq.msg_size > c.pull_threshold_size_for_queue * 1024 * 1024:
            return True
        return not self.consumer.orderly and pq.max_span() > c.consume_concurrently_max_span

    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        """Pull ``mq`` until its process queue is dropped (Java's pullMessage)."""
        consumer = self.consumer
        delay_on_error = consumer.config.pull_time_delay_millis_when_exception / 1000
        previously_locked = False
        while consumer.is_running() and not pq.dropped:
            pq.last_pull_timestamp = int(time.monotonic() * 1000)
            if self._must_wait(pq):
                await pq.wait_for_room(_FLOW_CONTROL_WAIT_S)
                continue
            if consumer.orderly and not previously_locked:
                if not pq.locked:
                    await asyncio.sleep(delay_on_error)
                    continue
                try:  # the lock is ours now: start from the committed offset
                    rebalance = consumer.rebalance
                    offset = await compute_pull_from_where(
                        mq, rebalance.consume_from_where, consumer.offset_store, consumer,
                        rebalance.consume_timestamp_ms,
                    )  # fmt: skip
                except MQClientError:
                    await asyncio.sleep(delay_on_error)
                    continue
                previously_locked = True
            try:
                offset = await self._pull_once(mq, pq, offset)
            except MQRemotingError as exc:
                log.info("pull failed mq=%s error=%s", mq, exc)
                if not await self._broker_moved(mq, exc.address):
                    await asyncio.sleep(delay_on_error)
            except MQClientError as exc:
                log.info("pull failed mq=%s error=%s", mq, exc)
                await asyncio.sleep(delay_on_error)
            except Exception:  # a bug must not end this queue's pulls for good
                log.exception("pull loop error mq=%s", mq)
                await asyncio.sleep(delay_on_error)

    async def _broker_moved(self, mq: MessageQueue, failed: str | None) -> bool:
        """After a transport failure at ``failed``: refresh the route at once; True when
        it now names another node of ``mq``'s broker (its master died and the name
        servers dropped it, so the slave serves), and the pull is retried now rather
        than after ``pullTimeDelayMillsWhenException`` (Java waits those 3 s; a
        consumer then stalls that long on every master failure)."""
        if failed is None:
            return False
        consumer = self.consumer
        try:
            await consumer.instance.update_topic_route(mq.topic)
        except MQClientError:
            return False
        node = consumer.pull_wrapper.recalculate_pull_from_which_node(mq)
        found = consumer.instance.find_broker_address_in_subscribe(mq.broker_name, node, False)
        return found is not None and found.address != failed

    async def _pull_once(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> int:
        """One long-polling pull; returns the next offset."""
        consumer = self.consumer
        config = consumer.config
        subscription = consumer.rebalance.subscription_inner.get(mq.topic)
        if subscription is None:
            await asyncio.sleep(config.pull_time_delay_millis_when_exception / 1000)
            return offset
        commit_offset = 0
        if consumer.model is MessageModel.CLUSTERING:
            commit_offset = max(
                0, await consumer.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
            )
        wrapper = consumer.pull_wrapper
        began = time.monotonic()
        result = await wrapper.pull_kernel(
            mq,
            subscription,
            offset,
            config.pull_batch_size,
            sys_flag=build_pull_sys_flag(commit_offset > 0, True, True),
            commit_offset=commit_offset,
            suspend_timeout_ms=config.broker_suspend_max_time_millis,
            timeout_ms=config.consumer_timeout_millis_when_suspend,
        )
        result = wrapper.process_pull_result(mq, result, subscription)
        if pq.dropped:
            return offset
        if result.status is PullStatus.FOUND:
            msgs = result.msg_found_list
            stats = consumer.stats
            stats.inc_pull_rt(consumer.group, mq.topic, (time.monotonic() - began) * 1000)
            stats.inc_pull_tps(consumer.group, mq.topic, len(msgs))
            if msgs:
                dispatch = pq.put_messages(msgs)
                consumer.submit_pulled(msgs, pq, mq, dispatch)
            return result.next_begin_offset
        if result.status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
            if pq.msg_count == 0:  # Java's correctTagsOffset
                consumer.offset_store.update_offset(
                    mq, result.next_begin_offset, increase_only=True
                )
            return result.next_begin_offset
        await self._offset_illegal(mq, pq, result.next_begin_offset)
        return result.next_begin_offset

    async def _offset_illegal(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        """OFFSET_ILLEGAL: drop the queue, then (10 s later) store the broker's offset."""
        log.warning("pull offset illegal mq=%s next=%d", mq, next_offset)
        pq.dropped = True
        await asyncio.sleep(10)
        store = self.consumer.offset_store
        store.update_offset(mq, next_offset)
        await store.persist(mq)
        self.consumer.rebalance.remove_process_queue(mq)
        self.consumer.rebalance_soon()
