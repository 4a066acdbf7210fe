"""Rebalance: which queues this push consumer owns, and where it starts reading them.

Owns (Java 4.9.8 ``RebalanceImpl`` + ``RebalancePushImpl``):

- per subscribed topic, the queue set (from routes) and, in clustering, the group's
  consumer ids (GET_CONSUMER_LIST_BY_GROUP from one of the topic's brokers), both
  sorted, then allocated with the configured strategy; broadcasting takes every
  queue;
- ``update_process_queue_table``: the diff against the current ``ProcessQueue``
  table. A removed queue is marked dropped, its offset persisted and forgotten and,
  for orderly consumption, unlocked once no consume of it runs; a queue idle past
  ``PULL_MAX_IDLE_TIME_MS`` is recreated; a new queue is locked first (orderly;
  skipped when the lock is refused), given its start offset
  (``compute_pull_from_where``) and handed to the host's pull loop;
- the orderly broker locks: ``lock`` one queue, ``lock_all`` (every 20 s),
  ``unlock_all`` (shutdown).

Must not: pull or consume (the host's pull loop and consume services do), or
choose a strategy's answer (``allocate`` does).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Protocol

from aiorocketmq.client.allocate import AllocateStrategy
from aiorocketmq.client.errors import MQClientError
from aiorocketmq.client.instance import ClientInstance
from aiorocketmq.client.offset_store import (
    LocalFileOffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
)
from aiorocketmq.client.process_queue import ProcessQueue
from aiorocketmq.common.constants import MASTER_ID, is_retry_topic
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.protocol_bodies import (
    ConsumeFromWhere,
    LockBatchRequestBody,
    MessageModel,
    SubscriptionData,
    UnlockBatchRequestBody,
)

__all__ = [
    "QueueOffsets",
    "RebalanceHost",
    "RebalanceImpl",
    "compute_pull_from_where",
    "consume_timestamp_or_default",
    "diff_queues",
]

log = logging.getLogger(__name__)

OffsetStoreT = RemoteBrokerOffsetStore | LocalFileOffsetStore

LOCK_TIMEOUT_MS = 1_000
"""Java's lockBatchMQ / unlockBatchMQ timeout."""


class QueueOffsets(Protocol):
    """Queue offsets on the brokers (Java's ``MQAdminImpl`` maxOffset / searchOffset)."""

    async def max_offset(self, mq: MessageQueue) -> int:
        """The queue's next offset to be written."""

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset stored at or after ``timestamp_ms``."""


class RebalanceHost(QueueOffsets, Protocol):
    """What the rebalance needs from its push consumer."""

    def dispatch_pull_request(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        """Start pulling ``mq`` into ``pq`` from ``next_offset``."""


def consume_timestamp_or_default(timestamp_ms: int | None) -> int:
    """CONSUME_FROM_TIMESTAMP's time: the configured one, or Java's default of half an
    hour before now."""
    if timestamp_ms is None:
        return int(time.time() * 1000) - 30 * 60 * 1000
    return timestamp_ms


async def compute_pull_from_where(
    mq: MessageQueue,
    where: ConsumeFromWhere,
    store: OffsetStoreT,
    offsets: QueueOffsets,
    timestamp_ms: int = 0,
) -> int:
    """Java's ``computePullFromWhereWithException``: the offset a new queue starts at.

    A committed offset always wins. Without one (-1): LAST_OFFSET (and the
    deprecated MIN/MAX variants) start at the queue's end, except retry topics,
    which start at 0; FIRST_OFFSET starts at 0; TIMESTAMP searches
    ``timestamp_ms`` (retry topics: the end). When the store could not be asked
    (-2) the answer is -1: the queue is skipped until the next rebalance.

    Raises:
        MQClientError: the broker could not say the queue's end or search it.
    """
    last = await store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
    if last >= 0:
        return last
    if last != -1:
        return -1
    if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
        return 0
    if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
        if is_retry_topic(mq.topic):
            return await offsets.max_offset(mq)
        return await offsets.search_offset(mq, timestamp_ms)
    if is_retry_topic(mq.topic):
        return 0
    return await offsets.max_offset(mq)


def diff_queues(
    current: Iterable[MessageQueue], allocated: Iterable[MessageQueue], topic: str
) -> tuple[list[MessageQueue], list[MessageQueue]]:
    """(queues of ``topic`` to drop, queues to add), each sorted."""
    mine = {mq for mq in current if mq.topic == topic}
    wanted = set(allocated)
    return sorted(mine - wanted), sorted(wanted - mine)


class RebalanceImpl:
    """A push consumer's queue ownership (see the module docstring).

    Args:
        instance: the client instance (routes, requests).
        group: the consumer group.
        model: CLUSTERING or BROADCASTING.
        strategy: the allocation function.
        store: the consumer's offset store.
        host: the push consumer (pull loop, queue offsets).
        orderly: orderly consumption (queues are locked on the broker).
        consume_from_where: where a queue without a committed offset starts.
        consume_timestamp_ms: the time CONSUME_FROM_TIMESTAMP searches.
    """

    def __init__(
        self,
        instance: ClientInstance,
        group: str,
        model: MessageModel,
        *,
        strategy: AllocateStrategy,
        store: OffsetStoreT,
        host: RebalanceHost,
        orderly: bool = False,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp_ms: int = 0,
    ) -> None:
        self.instance = instance
        self.group = group
        self.model = model
        self.strategy = strategy
        self.store = store
        self.host = host
        self.orderly = orderly
        self.consume_from_where = consume_from_where
        self.consume_timestamp_ms = consume_timestamp_ms
        self.subscription_inner: dict[str, SubscriptionData] = {}
        self.topic_subscribe_info: dict[str, set[MessageQueue]] = {}
        self.process_queue_table: dict[MessageQueue, ProcessQueue] = {}
        self.retry_soon = False
        """Set when the last rebalance left work undone (a lock refused, a queue busy, an error)."""
        self._lock = asyncio.Lock()
        # Queues whose LOCK_BATCH_MQ was sent and not yet answered "refused" or unlocked.
        # A rebalance cancelled between the broker's grant and the process queue's entry
        # (shutdown during the start-offset lookup) would otherwise leave a lock only
        # the 60 s expiry releases; unlock_all releases these too.
        self._lock_requested: set[MessageQueue] = set()

    # -- rebalance ----------------------------------------------------------------------

    async def do_rebalance(self) -> bool:
        """Rebalance every subscribed topic; True when the owned queues changed."""
        changed = False
        async with self._lock:
            self.retry_soon = False
            for topic in sorted(self.subscription_inner):
                try:
                    changed |= await self.rebalance_by_topic(topic)
                except MQClientError as exc:
                    # e.g. the broker has not seen our heartbeat yet: try again soon
                    self.retry_soon = True
                    log.warning(
                        "rebalance failed group=%s topic=%s error=%s", self.group, topic, exc
                    )
            for mq in [
                mq for mq in self.process_queue_table if mq.topic not in self.subscription_inner
            ]:
                pq = self.process_queue_table.pop(mq)
                pq.dropped = True
                changed = True
        return changed

    async def rebalance_by_topic(self, topic: str) -> bool:
        """Allocate ``topic``'s queues and apply the difference (Java's rebalanceByTopic)."""
        mq_set = self.topic_subscribe_info.get(topic)
        if not mq_set:
            log.info("rebalance: no queues yet group=%s topic=%s", self.group, topic)
            return False
        if self.model is MessageModel.BROADCASTING:
            return await self.update_process_queue_table(topic, set(mq_set))
        cids = await self.find_consumer_id_list(topic)
        if not cids:
            log.info("rebalance: no consumer ids group=%s topic=%s", self.group, topic)
            return False
        mine = self.strategy(self.instance.client_id, sorted(mq_set), sorted(cids))
        return await self.update_process_queue_table(topic, set(mine))

    async def find_consumer_id_list(self, topic: str) -> list[str]:
        """The group's consumer ids from one of ``topic``'s brokers (a route refresh first
        if none is known)."""
        address = self._any_broker_of(topic)
        if address is None:
            await self.instance.update_topic_route(topic)
            address = self._any_broker_of(topic)
        if address is None:
            return []
        return await self.instance.api.get_consumer_id_list_by_group(
            address, self.group, self.instance.config.mq_client_api_timeout
        )

    def _any_broker_of(self, topic: str) -> str | None:
        route = self.instance.topic_route_table.get(topic)
        if route is None:
            return None
        for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
            found = self.instance.find_broker_address_in_subscribe(bd.broker_name, MASTER_ID, False)
            if found is not None:
                return found.address
        return None

    async def update_process_queue_table(self, topic: str, mq_set: set[MessageQueue]) -> bool:
        """Apply an allocation of ``topic`` (Java's updateProcessQueueTableInRebalance)."""
        changed = False
        removed, added = diff_queues(self.process_queue_table, mq_set, topic)
        expired = [
            mq
            for mq, pq in self.process_queue_table.items()
            if mq.topic == topic and mq in mq_set and pq.is_pull_expired()
        ]
        for mq in removed + expired:
            pq = self.process_queue_table[mq]
            pq.dropped = True
            if await self.remove_unnecessary_message_queue(mq, pq):
                del self.process_queue_table[mq]
                changed = True
                log.info("rebalance: dropped group=%s mq=%s", self.group, mq)
        for mq in sorted(set(added) | {mq for mq in expired if mq not in self.process_queue_table}):
            changed |= await self._add_queue(mq)
        return changed

    async def _add_queue(self, mq: MessageQueue) -> bool:
        if self.orderly and not await self.lock(mq):
            log.info("rebalance: lock refused, later group=%s mq=%s", self.group, mq)
            self.retry_soon = True
            return False
        self.store.remove_offset(mq)  # Java's removeDirtyOffset
        pq = ProcessQueue()
        pq.locked = True
        try:
            offset = await compute_pull_from_where(
                mq, self.consume_from_where, self.store, self.host, self.consume_timestamp_ms
            )
        except MQClientError as exc:
            log.warning(
                "rebalance: start offset failed group=%s mq=%s error=%s", self.group, mq, exc
            )
            return False
        if offset < 0:
            log.warning("rebalance: no start offset group=%s mq=%s", self.group, mq)
            return False
        self.process_queue_table[mq] = pq
        log.info("rebalance: added group=%s mq=%s offset=%d", self.group, mq, offset)
        self.host.dispatch_pull_request(mq, pq, offset)
        return True

    async def remove_unnecessary_message_queue(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        """Persist and forget ``mq``'s offset; orderly: unlock once no consume runs (1 s).

        Returns:
            False when an orderly consume kept the queue busy (retried next rebalance).
        """
        try:  # orderly waits for the answer: the unlock below must not overtake it
            await self.store.persist(mq, oneway=not self.orderly)
        except MQClientError as exc:
            log.warning("persist offset of dropped queue failed mq=%s error=%s", mq, exc)
        self.store.remove_offset(mq)
        if not (self.orderly and self.model is MessageModel.CLUSTERING):
            return True
        try:
            async with asyncio.timeout(1.0):
                await pq.consume_lock.acquire()
        except TimeoutError:
            pq.try_unlock_times += 1
            self.retry_soon = True
            return False
        try:
            await self.unlock(mq)
        finally:
            pq.consume_lock.release()
        return True

    async def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """Drop ``topic``'s queues (their in-flight messages are not committed), take
        and commit ``offsets``; the caller rebalances so they are pulled from there
        (Java's ``MQClientInstance.resetOffset``)."""
        for mq in [mq for mq in self.process_queue_table if mq.topic == topic]:
            self.remove_process_queue(mq)
        for mq, offset in offsets.items():
            self.store.update_offset(mq, offset)
            try:
                await self.store.persist(mq, oneway=False)
            except MQClientError as exc:
                log.warning("reset offset: commit of %s failed: %s", mq, exc)

    def remove_process_queue(self, mq: MessageQueue) -> None:
        """Drop ``mq`` now (its offset was illegal); the next rebalance adds it again."""
        pq = self.process_queue_table.pop(mq, None)
        if pq is not None:
            pq.dropped = True

    # -- orderly locks ------------------------------------------------------------------

    def _lock_body(self, mqs: Iterable[MessageQueue]) -> LockBatchRequestBody:
        return LockBatchRequestBody(self.group, self.instance.client_id, sorted(mqs))

    async def lock(self, mq: MessageQueue) -> bool:
        """LOCK_BATCH_MQ for one queue on its master; True when this client holds it."""
        found = self.instance.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, True)
        if found is None:
            return False
        self._lock_requested.add(mq)
        try:
            locked = await self.instance.api.lock_batch_mq(
                found.address, self._lock_body([mq]), LOCK_TIMEOUT_MS
            )
        except MQClientError as exc:
            log.warning("lock failed mq=%s error=%s", mq, exc)
            return False
        if mq not in locked:
            self._lock_requested.discard(mq)
        now = int(time.monotonic() * 1000)
        for locked_mq in locked:
            pq = self.process_queue_table.get(locked_mq)
            if pq is not None:
                pq.locked, pq.last_lock_timestamp = True, now
        return mq in locked

    async def lock_all(self) -> None:
        """Renew the locks of every owned queue, broker by broker (Java's lockAll)."""
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in self.process_queue_table:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker_name, mqs in sorted(by_broker.items()):
            found = self.instance.find_broker_address_in_subscribe(broker_name, MASTER_ID, True)
            if found is None:
                continue
            try:
                locked = await self.instance.api.lock_batch_mq(
                    found.address, self._lock_body(mqs), LOCK_TIMEOUT_MS
                )
            except MQClientError as exc:
                log.warning("lock all failed broker=%s error=%s", broker_name, exc)
                continue
            now = int(time.monotonic() * 1000)
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is None:
                    continue
                if mq in locked:
                    pq.locked, pq.last_lock_timestamp = True, now
                else:
                    pq.locked = False

    async def unlock(self, mq: MessageQueue) -> None:
        """UNLOCK_BATCH_MQ for one queue (oneway, as Java's unlock of a dropped queue)."""
        found = self.instance.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, True)
        if found is None:
            return
        self._lock_requested.discard(mq)
        try:
            await self.instance.api.unlock_batch_mq(
                found.address,
                UnlockBatchRequestBody(self.group, self.instance.client_id, [mq]),
                LOCK_TIMEOUT_MS,
            )
        except MQClientError as exc:
            log.warning("unlock failed mq=%s error=%s", mq, exc)

    async def unlock_all(self) -> None:
        """Release every owned queue's lock and wait for the brokers' answers (shutdown).

        Also queues whose lock was requested but never reached the process queue table.
        """
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in set(self.process_queue_table) | self._lock_requested:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker_name, mqs in sorted(by_broker.items()):
            found = self.instance.find_broker_address_in_subscribe(broker_name, MASTER_ID, True)
            if found is None:
                continue
            try:
                await self.instance.api.unlock_batch_mq(
                    found.address,
                    UnlockBatchRequestBody(self.group, self.instance.client_id, sorted(mqs)),
                    LOCK_TIMEOUT_MS,
                )
            except MQClientError as exc:
                log.warning("unlock all failed broker=%s error=%s", broker_name, exc)
                continue
            self._lock_requested.difference_update(mqs)
            for mq in mqs:
                pq = self.process_queue_table.get(mq)
                if pq is not None:
                    pq.locked = False
