"""Orderly consumers' queue locks: RebalanceLockManager and LOCK/UNLOCK_BATCH_MQ."""

from __future__ import annotations

from pathlib import Path

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.rebalance_lock import (
    REBALANCE_LOCK_MAX_LIVE_TIME_MS,
    RebalanceLockManager,
    RebalanceLockProcessor,
)
from aiorocketmq.common.clock import ManualClock
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.protocol_bodies import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable
from tests.unit.broker.broker_support import harness

G = "CID_orderly"
Q0, Q1, Q2 = (MessageQueue("TopicTest", "broker-a", i) for i in range(3))


def test_free_queues_are_locked_and_renewed_by_their_owner() -> None:
    clock = ManualClock()
    locks = RebalanceLockManager(clock)
    assert locks.try_lock_batch(G, [Q0, Q1], "c1") == [Q0, Q1]
    clock.advance(REBALANCE_LOCK_MAX_LIVE_TIME_MS - 1)
    assert locks.try_lock_batch(G, [Q0], "c1") == [Q0]  # renewed
    clock.advance(REBALANCE_LOCK_MAX_LIVE_TIME_MS - 1)
    # Q0 was renewed, so still c1's; Q1 was not, so it expired and c2 takes it.
    assert locks.try_lock_batch(G, [Q0, Q1, Q2], "c2") == [Q1, Q2]
    assert locks.holder(G, Q0) == "c1"
    assert locks.holder(G, Q1) == "c2"


def test_a_live_lock_is_never_shared() -> None:
    clock = ManualClock()
    locks = RebalanceLockManager(clock)
    assert locks.try_lock_batch(G, [Q0], "c1") == [Q0]
    clock.advance(REBALANCE_LOCK_MAX_LIVE_TIME_MS)  # exactly the lifetime: still live
    assert locks.try_lock_batch(G, [Q0], "c2") == []
    clock.advance(1)
    assert locks.holder(G, Q0) is None
    assert locks.try_lock_batch(G, [Q0], "c2") == [Q0]


def test_groups_are_independent_and_unlock_only_releases_own_locks() -> None:
    locks = RebalanceLockManager(ManualClock())
    assert locks.try_lock_batch(G, [Q0], "c1") == [Q0]
    assert locks.try_lock_batch("CID_other", [Q0], "c2") == [Q0]
    locks.unlock_batch(G, [Q0], "c2")  # not c2's lock in G
    assert locks.holder(G, Q0) == "c1"
    locks.unlock_batch(G, [Q0, Q1], "c1")
    assert locks.holder(G, Q0) is None
    assert locks.try_lock_batch(G, [Q0], "c2") == [Q0]
    locks.unlock_batch("CID_unknown", [Q0], "c1")  # unknown group: nothing happens
    assert locks.holder("CID_other", Q0) == "c2"


def _register(ctx: BrokerContext, table: ProcessorTable) -> None:
    RebalanceLockProcessor(RebalanceLockManager(ctx.clock)).register(table)


async def test_lock_and_unlock_codes_on_a_server(tmp_path: Path) -> None:
    async with harness(tmp_path, extra=_register) as h:

        async def lock(client_id: str, mqs: list[MessageQueue]) -> list[MessageQueue]:
            body = LockBatchRequestBody(G, client_id, mqs).encode()
            reply = await h.invoke(RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, body=body))
            assert reply.code == ResponseCode.SUCCESS
            return LockBatchResponseBody.decode(reply.body).lock_ok_mq_set

        assert sorted(await lock("c1", [Q0, Q1])) == [Q0, Q1]
        assert await lock("c2", [Q1, Q2]) == [Q2]
        unlock = UnlockBatchRequestBody(G, "c1", [Q1]).encode()
        reply = await h.invoke(RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, body=unlock))
        assert reply.code == ResponseCode.SUCCESS
        assert await lock("c2", [Q1]) == [Q1]
        garbage = RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, body=b"{not json")
        assert (await h.invoke(garbage)).code == ResponseCode.SYSTEM_ERROR
        assert await lock("c1", [Q0]) == [Q0]  # still serving
