"""The merge rules of a master learning its slaves' offsets (issue 24), and its gate.

While a master is down its consumers commit to the slave; the restarted master
must take that progress (the larger offset per queue, over every slave) without
ever moving an offset backwards, and without moving one past its own end of the
queue (a slave may hold offsets for data the master lost). Delay levels follow
the same rules. QUERY_CONSUMER_OFFSET waits for a pending round, bounded.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiorocketmq.broker.ha.offset_catchup import SlaveOffsetCatchUp, merge_delay_tables
from aiorocketmq.broker.offsets import (
    ConsumerOffsetManager,
    OffsetTable,
    RaisedOffset,
    merge_offset_tables,
)
from aiorocketmq.runtime import BlockingExecutor
from tests.support.wait import wait_until
from tests.unit.broker.broker_support import TOPIC
from tests.unit.broker.test_schedule import _queue_messages, _send, scheduled
from tests.unit.store.store_support import dispatched

pytestmark = pytest.mark.timeout(30)

MAX = {("T", 0): 100, ("T", 1): 100, ("T", 2): 10, ("%RETRY%g", 0): 4}


def _max_offset(topic: str, queue_id: int) -> int:
    return MAX.get((topic, queue_id), 0)


def _manager(executor: BlockingExecutor) -> ConsumerOffsetManager:
    return ConsumerOffsetManager(Path("/nonexistent/consumerOffset.json"), executor)


def test_several_slaves_give_the_largest_offset_per_queue() -> None:
    one: OffsetTable = {"T@g": {0: 5, 1: 9}, "U@g": {0: 1}}
    two: OffsetTable = {"T@g": {0: 7, 1: 3, 2: 4}}
    three: OffsetTable = {}
    assert merge_offset_tables([one, two, three]) == {"T@g": {0: 7, 1: 9, 2: 4}, "U@g": {0: 1}}
    assert merge_offset_tables([]) == {}
    assert merge_delay_tables([{1: 3, 2: 8}, {1: 5}, {}]) == {1: 5, 2: 8}


def test_master_offsets_move_forward_only_and_stop_at_its_max(executor: BlockingExecutor) -> None:
    mgr = _manager(executor)
    mgr.commit_offset("c", "g", "T", 0, 40)
    mgr.commit_offset("c", "g", "T", 1, 60)
    mgr.commit_offset("c", "g", "T", 2, 3)
    slaves = merge_offset_tables([{"T@g": {0: 55, 1: 20}}, {"T@g": {0: 50, 2: 500}}])
    raised = mgr.merge_from_slaves(slaves, _max_offset)
    assert raised == [RaisedOffset("T", "g", 0, 40, 55), RaisedOffset("T", "g", 2, 3, 10)]
    # Queue 1: the slave's 20 is older than the master's 60: never backwards.
    # Queue 2: the slave's 500 is past the master's end (10): capped there.
    assert mgr.query_offsets("g", "T") == {0: 55, 1: 60, 2: 10}
    # Idempotent: the same tables change nothing the second time.
    assert mgr.merge_from_slaves(slaves, _max_offset) == []


def test_new_groups_retry_topics_and_bad_keys(executor: BlockingExecutor) -> None:
    mgr = _manager(executor)
    table: OffsetTable = {
        "%RETRY%g@g": {0: 9},  # capped at the retry queue's end, 4
        "T@fresh": {1: 30},  # a group the master never saw
        "no-separator": {0: 5},  # not topic@group: skipped, as Java's readers do
        "a@b@c": {0: 5},
        "T@empty": {},
    }
    raised = mgr.merge_from_slaves(table, _max_offset)
    assert raised == [
        RaisedOffset("%RETRY%g", "g", 0, -1, 4),
        RaisedOffset("T", "fresh", 1, -1, 30),
    ]
    assert mgr.offset_table() == {"%RETRY%g@g": {0: 4}, "T@fresh": {1: 30}}


def test_a_queue_the_master_does_not_have_gets_nothing_past_zero(
    executor: BlockingExecutor,
) -> None:
    # The master's end of an unknown queue is 0: a slave's offset there becomes 0
    # (the start, which is where a consumer of that queue begins anyway).
    mgr = _manager(executor)
    assert mgr.merge_from_slaves({"Gone@g": {3: 77}}, _max_offset) == [
        RaisedOffset("Gone", "g", 3, -1, 0)
    ]
    mgr.commit_offset("c", "g", "Gone", 3, 2)
    assert mgr.merge_from_slaves({"Gone@g": {3: 77}}, _max_offset) == []
    assert mgr.query_offset("g", "Gone", 3) == 2


offsets = st.integers(min_value=0, max_value=200)
tables = st.dictionaries(
    st.sampled_from(["T@g", "T@h", "%RETRY%g@g"]),
    st.dictionaries(st.integers(0, 3), offsets, max_size=4),
    max_size=3,
)


@given(master=tables, slaves=st.lists(tables, max_size=4))
def test_merge_rules_hold_for_any_tables(master: OffsetTable, slaves: list[OffsetTable]) -> None:
    mgr = ConsumerOffsetManager(Path("/nonexistent/consumerOffset.json"), None)  # type: ignore[arg-type]
    mgr.apply({k: dict(v) for k, v in master.items()})
    mgr.merge_from_slaves(merge_offset_tables(slaves), _max_offset)
    after = mgr.offset_table()
    for key in set(master) | {k for s in slaves for k in s}:
        topic = key.rsplit("@", 1)[0]
        for queue_id in set(master.get(key, {})) | {q for s in slaves for q in s.get(key, {})}:
            before = master.get(key, {}).get(queue_id, -1)
            best = max((s[key][queue_id] for s in slaves if queue_id in s.get(key, {})), default=-1)
            expected = max(before, min(best, _max_offset(topic, queue_id)))
            assert after.get(key, {}).get(queue_id, -1) == expected


async def test_delay_levels_move_forward_only_and_stop_at_the_queue_end(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    async with scheduled(tmp_path, executor, start=False) as (h, service):
        await _send(h, b"x", 1)
        await _send(h, b"y", 1)
        await dispatched(h.ctx.store)
        assert await service.load() is False
        service.offsets.offsets[1] = 1
        # Level 1 capped at its queue's end (2); level 2 has no queue yet and 99 is
        # not a level: both ignored.
        assert service.merge_slave_offsets({1: 5, 2: 1, 99: 3}) == [(1, 1, 2)]
        assert service.offsets.offsets == {1: 2}
        assert service.merge_slave_offsets({1: 0}) == []
        assert service.offsets.offsets == {1: 2}


async def test_a_running_level_skips_what_the_slave_says_was_delivered(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    # The level timer holds its offset between passes: a raise must reach it.
    async with scheduled(tmp_path, executor, levels="1s", first_delay_ms=0) as (h, service):
        await _send(h, b"delivered-before-the-crash", 1)
        await dispatched(h.ctx.store)
        assert service.merge_slave_offsets({1: 1}) == [(1, 0, 1)]
        await _send(h, b"marker", 1)
        await wait_until(
            lambda: [m.body for m in _queue_messages(h.ctx.store, TOPIC)] == [b"marker"],
            timeout=4,
            what="the marker, alone, on the real topic",
            describe=lambda: [m.body for m in _queue_messages(h.ctx.store, TOPIC)],
        )
        assert service.delivered == 1
        assert service.offsets.offsets == {1: 2}


async def test_gate_waits_for_a_round_and_is_bounded(executor: BlockingExecutor) -> None:
    with pytest.raises(ValueError, match="slaveOffsetCatchUpTimeoutMillis"):
        _catch_up(executor, timeout_ms=-1)
    idle = _catch_up(executor, timeout_ms=0)
    idle.request("master start")  # turned off: nothing to wait for
    assert idle.caught_up and await idle.wait_caught_up()

    catch_up = _catch_up(executor, timeout_ms=200)
    catch_up.request("master start")
    assert not catch_up.caught_up
    # Not started: no round runs, so the wait gives up at its bound.
    assert await catch_up.wait_caught_up() is False
    assert catch_up.gate_timeouts == 1
    await catch_up.start()
    try:
        assert await catch_up.wait_caught_up() is True
        assert catch_up.rounds == 1 and catch_up.last_report is not None
        assert catch_up.last_report.slaves == [] and catch_up.last_report.reason == "master start"
        catch_up.on_slave_connected("127.0.0.1:5")
        await wait_until(lambda: catch_up.rounds == 2, what="a second round")
        assert catch_up.last_report.reason == "slave connected 127.0.0.1:5"
    finally:
        await catch_up.shutdown()


def _catch_up(executor: BlockingExecutor, timeout_ms: int) -> SlaveOffsetCatchUp:
    return SlaveOffsetCatchUp(
        broker_name="broker-a",
        namesrv_addrs=list,
        own_addr=lambda: "127.0.0.1:1",
        offsets=_manager(executor),
        max_offset=_max_offset,
        timeout_ms=timeout_ms,
    )
