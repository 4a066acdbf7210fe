"""Queue locks of orderly consumers (``RebalanceLockManager``) and their two codes.

Owns: per consumer group, which client holds each queue's lock and since when; a
lock lives ``rebalanceLockMaxLiveTime`` (60 s, RocketMQ's system property
``rocketmq.broker.rebalance.lockMaxLiveTime``) after its last renewal, so a
consumer that died without unlocking loses its queues a minute later;
LOCK_BATCH_MQ (41: lock what is free or expired or already ours, renew ours, answer
the set we hold) and UNLOCK_BATCH_MQ (42: release only our own locks).

Must not: persist anything (RocketMQ keeps these locks in memory: after a broker
restart consumers lock again) or block.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from aiorocketmq.common.clock import Clock
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.protocol_bodies import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection

__all__ = ["REBALANCE_LOCK_MAX_LIVE_TIME_MS", "RebalanceLockManager", "RebalanceLockProcessor"]

log = logging.getLogger(__name__)

REBALANCE_LOCK_MAX_LIVE_TIME_MS: Final = 60_000


@dataclass(slots=True)
class _LockEntry:
    client_id: str
    last_update_ms: int


class RebalanceLockManager:
    """Who holds which queue, per consumer group.

    Args:
        clock: Monotonic time of renewals and expiry.
        max_live_ms: Lock lifetime after the last renewal.
    """

    def __init__(self, clock: Clock, max_live_ms: int = REBALANCE_LOCK_MAX_LIVE_TIME_MS) -> None:
        self._clock = clock
        self._max_live_ms = max_live_ms
        self._table: dict[str, dict[MessageQueue, _LockEntry]] = {}

    def _expired(self, entry: _LockEntry, now: int) -> bool:
        return now - entry.last_update_ms > self._max_live_ms

    def try_lock_batch(
        self, group: str, mqs: list[MessageQueue], client_id: str
    ) -> list[MessageQueue]:
        """Lock (or renew) each queue that is free, expired or already ``client_id``'s.

        Returns:
            The queues ``client_id`` holds now, in request order.
        """
        now = self._clock.monotonic_ms()
        locks = self._table.setdefault(group, {})
        held: list[MessageQueue] = []
        for mq in mqs:
            entry = locks.get(mq)
            if entry is None:
                locks[mq] = _LockEntry(client_id, now)
                log.info("lock %s of %s taken by %s", mq, group, client_id)
            elif entry.client_id == client_id or self._expired(entry, now):
                if entry.client_id != client_id:
                    log.warning(
                        "lock %s of %s expired; %s -> %s", mq, group, entry.client_id, client_id
                    )
                entry.client_id = client_id
                entry.last_update_ms = now
            else:
                log.debug("lock %s of %s held by %s, not %s", mq, group, entry.client_id, client_id)
                continue
            held.append(mq)
        return held

    def unlock_batch(self, group: str, mqs: list[MessageQueue], client_id: str) -> None:
        """Release the queues ``client_id`` holds; others' locks are left alone."""
        locks = self._table.get(group)
        if locks is None:
            return
        for mq in mqs:
            entry = locks.get(mq)
            if entry is None:
                continue
            if entry.client_id == client_id:
                del locks[mq]
                log.info("lock %s of %s released by %s", mq, group, client_id)
            else:
                log.warning(
                    "unlock %s of %s by %s refused: held by %s",
                    mq,
                    group,
                    client_id,
                    entry.client_id,
                )
        if not locks:
            del self._table[group]

    def holder(self, group: str, mq: MessageQueue) -> str | None:
        """The client holding a live lock on ``mq``, or None."""
        entry = self._table.get(group, {}).get(mq)
        if entry is None or self._expired(entry, self._clock.monotonic_ms()):
            return None
        return entry.client_id


class RebalanceLockProcessor:
    """LOCK_BATCH_MQ and UNLOCK_BATCH_MQ."""

    def __init__(self, locks: RebalanceLockManager) -> None:
        self._locks = locks

    def register(self, table: ProcessorTable) -> None:
        """Route codes 41 and 42 here."""
        table.register(RequestCode.LOCK_BATCH_MQ, self.lock_batch_mq)
        table.register(RequestCode.UNLOCK_BATCH_MQ, self.unlock_batch_mq)

    def lock_batch_mq(self, _conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Lock what can be locked; the body lists the queues the requester holds."""
        body = LockBatchRequestBody.decode(request.body)
        held = self._locks.try_lock_batch(body.consumer_group, body.mq_set, body.client_id)
        reply = LockBatchResponseBody(held).encode()
        return request.response_to(ResponseCode.SUCCESS, body=reply)

    def unlock_batch_mq(
        self, _conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """Release the requester's locks; always SUCCESS."""
        body = UnlockBatchRequestBody.decode(request.body)
        self._locks.unlock_batch(body.consumer_group, body.mq_set, body.client_id)
        return request.response_to(ResponseCode.SUCCESS)
