"""MessageStore reads: every GetMessageStatus row of specs/store.md §9.1, nextBeginOffset,
tag filtering, transfer limits, suggestPullingFromSlave, lookups and queries.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.common.clock import ManualClock
from aiorocketmq.common.constants import RMQ_SYS_SCHEDULE_TOPIC
from aiorocketmq.common.tag_hash import tags_code
from aiorocketmq.store.config import BrokerRole
from aiorocketmq.store.message_store import MessageStore
from aiorocketmq.store.results import GetMessageResult, GetMessageStatus
from aiorocketmq.store.store_lifecycle import total_physical_memory
from tests.unit.store.store_support import (
    TOPIC,
    bodies,
    dispatched,
    inner,
    open_store,
    put_ok,
    records,
    store_config,
)

G = GetMessageStatus
BODY = bytes(900)  # ~1 KB records: about 65 per 64 KiB CommitLog file


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MessageStore]:
    store = await open_store(store_config(tmp_path), clock=ManualClock())
    yield store
    await store.shutdown()


def get(
    store: MessageStore, queue_id: int, offset: int, max_msgs: int = 32, **filters: Any
) -> GetMessageResult:
    result = store.get_message("group", TOPIC, queue_id, offset, max_msgs, **filters)
    assert result is not None
    return result


async def fill(store: MessageStore, count: int, queue_id: int = 0, **props: str) -> None:
    for i in range(count):
        await put_ok(store, inner(f"m{i}".encode(), queue_id=queue_id, **props))
    await dispatched(store)


# -- the status table ----------------------------------------------------------------


async def test_unknown_queue_and_empty_queue(store: MessageStore) -> None:
    with get(store, 3, 5) as missing:
        assert (missing.status, missing.next_begin_offset) == (G.NO_MATCHED_LOGIC_QUEUE, 0)
    store.cq_table.find_or_create(TOPIC, 4)  # a queue with no unit yet
    with get(store, 4, 5) as empty:
        assert (empty.status, empty.next_begin_offset) == (G.NO_MESSAGE_IN_QUEUE, 0)
        assert (empty.min_offset, empty.max_offset) == (0, 0)


async def test_found_and_overflows(store: MessageStore) -> None:
    await fill(store, 10)
    with get(store, 0, 4, max_msgs=3) as found:
        assert found.status is G.FOUND and bodies(found) == [b"m4", b"m5", b"m6"]
        assert found.next_begin_offset == 7 and found.message_queue_offsets == [4, 5, 6]
        assert (found.min_offset, found.max_offset) == (0, 10)
        assert not found.suggest_pulling_from_slave
    with get(store, 0, 10) as one:
        assert (one.status, one.next_begin_offset) == (G.OFFSET_OVERFLOW_ONE, 10)
    with get(store, 0, 25) as badly:
        assert (badly.status, badly.next_begin_offset) == (G.OFFSET_OVERFLOW_BADLY, 10)
    assert store.stats.get_message_times_total_found == 1
    assert store.stats.get_message_transfered_msg_count == 3
    assert store.stats.get_message_times_total_miss == 2


async def test_removed_commit_log_file_too_small_and_removing(store: MessageStore) -> None:
    # Queue 1 lives only in the first CommitLog file; queue 0 spans two files.
    for i in range(10):
        await put_ok(store, inner(BODY + bytes([i]), queue_id=1))
    for i in range(100):
        await put_ok(store, inner(BODY + bytes([i]), queue_id=0))
    await dispatched(store)
    first = store.commit_log.queue.files[0]
    store.commit_log.queue.detach([first])  # what file expiry does
    with get(store, 1, 0) as removing:
        assert removing.status is G.MESSAGE_WAS_REMOVING and removing.message_count == 0
        assert removing.next_begin_offset == 10  # every unit was scanned
    with get(store, 0, 0) as gone:
        # A pull never crosses a ConsumeQueue file (50 units here): all 50 are gone.
        assert (gone.status, gone.next_begin_offset) == (G.MESSAGE_WAS_REMOVING, 50)
    with get(store, 0, 50) as skipped:
        # Units left in the removed file are skipped; the scan resumes in the next file.
        assert skipped.status is G.FOUND
        first_kept = skipped.message_queue_offsets[0]
        assert first_kept == 55 and records(skipped)[0].physical_offset == store.min_phy_offset
    # What the ConsumeQueue expiry does next: drop CQ files below the CommitLog's min
    # offset and correct each queue's min offset.
    assert await store.cq_table.delete_expired(store.min_phy_offset) == 1
    assert store.get_min_offset_in_queue(TOPIC, 0) == first_kept
    with get(store, 0, 0) as small:
        assert (small.status, small.next_begin_offset) == (G.OFFSET_TOO_SMALL, first_kept)


async def test_missing_consume_queue_file_is_offset_found_null(store: MessageStore) -> None:
    await fill(store, 60)  # 50 units per ConsumeQueue file in these tests
    queue = store.cq_table.get(TOPIC, 0)
    assert queue is not None
    queue.queue.detach([queue.queue.files[0]])
    with get(store, 0, 3) as null:
        assert (null.status, null.next_begin_offset) == (G.OFFSET_FOUND_NULL, 50)
    with get(store, 0, 50) as found:
        assert found.status is G.FOUND and found.message_queue_offsets[0] == 50


async def test_tag_filter_skips_units_and_counts_them(store: MessageStore) -> None:
    for i in range(12):
        await put_ok(store, inner(f"m{i}".encode(), TAGS="a" if i % 3 == 0 else "b"))
    await dispatched(store)
    wanted = {tags_code("a")}
    with get(store, 0, 1, max_msgs=2, tag_codes=wanted) as found:
        assert bodies(found) == [b"m3", b"m6"]
        assert found.next_begin_offset == 7  # units 1..6 scanned, 7 filled the batch
    with get(store, 0, 10, tag_codes=wanted) as none:
        assert (none.status, none.next_begin_offset) == (G.NO_MATCHED_MESSAGE, 12)
    with get(store, 0, 0, record_filter=lambda view: b"m9" in bytes(view)) as sql:
        assert sql.status is G.FOUND and bodies(sql) == [b"m9"]


async def test_transfer_limits_in_memory(store: MessageStore, tmp_path: Path) -> None:
    await fill(store, 40)
    with get(store, 0, 0, max_msgs=64) as by_count:
        assert by_count.message_count == 32 and by_count.next_begin_offset == 32
    config = store_config(tmp_path / "b", max_transfer_bytes_on_message_in_memory=3000)
    small = await open_store(config)
    try:
        for _ in range(10):
            await put_ok(small, inner(BODY))
        await dispatched(small)
        with get(small, 0, 0, max_msgs=64) as by_bytes:
            # 3 x 1001 bytes fit; the 4th would pass 3000, so the batch is full.
            assert by_bytes.message_count == 3 and by_bytes.next_begin_offset == 3
    finally:
        await small.shutdown()


async def test_data_far_behind_counts_as_on_disk_and_suggests_slave(tmp_path: Path) -> None:
    # 10 KB of "RAM" at 40 %: anything more than 4000 bytes behind the end is on disk.
    store = await open_store(store_config(tmp_path), total_physical_memory=10_000)
    try:
        assert store._getter.memory_threshold == 4000
        await fill(store, 20)
        for _ in range(10):
            await put_ok(store, inner(BODY, queue_id=1))
        await dispatched(store)
        with get(store, 0, 0) as far:
            assert far.message_count == 8  # maxTransferCountOnMessageInDisk
            assert far.suggest_pulling_from_slave
        assert store.check_in_disk_by_consume_offset(TOPIC, 0, 0)
        with get(store, 1, 7) as near:
            assert near.message_count == 3 and not near.suggest_pulling_from_slave
        assert not store.check_in_disk_by_consume_offset(TOPIC, 1, 9)
    finally:
        await store.shutdown()


async def test_slave_keeps_the_consumer_offset_unless_offset_check(tmp_path: Path) -> None:
    master = await open_store(store_config(tmp_path / "m"))
    try:
        await fill(master, 5)
        data = master.get_commit_log_data(0)
        assert data is not None
        with data:
            payload = bytes(data.view)
    finally:
        await master.shutdown()
    for check, expected in ((False, (99, 7)), (True, (5, 0))):
        root = tmp_path / f"s{check}"
        config = store_config(root, broker_role=BrokerRole.SLAVE, offset_check_in_slave=check)
        slave = await open_store(config)
        try:
            assert await slave.append_to_commit_log(0, payload)
            await dispatched(slave)
            with get(slave, 0, 99) as badly, get(slave, 9, 7) as missing:
                assert (badly.next_begin_offset, missing.next_begin_offset) == expected
            with get(slave, 0, 0) as found:
                assert bodies(found) == [f"m{i}".encode() for i in range(5)]
        finally:
            await slave.shutdown()


async def test_release_drops_views_and_file_references(store: MessageStore) -> None:
    await fill(store, 3)
    mapped = store.commit_log.queue.files[0]
    refs = mapped.ref_count
    result = get(store, 0, 0)
    # One hold per held slice: a run (the vectorised scan) or a record each.
    assert result.buffers and mapped.ref_count == refs + len(result.buffers)
    assert len(result.body()) == result.buffer_total_size and result.message_count == 3
    result.release()
    result.release()
    assert mapped.ref_count == refs and result.message_count == 3
    with pytest.raises(ValueError):
        bytes(result.messages[0])


async def test_not_serving_returns_none(tmp_path: Path) -> None:
    store = MessageStore(store_config(tmp_path))
    await store.load()
    assert store.get_message("g", TOPIC, 0, 0, 1) is None
    await store.shutdown()


# -- lookups and queries -------------------------------------------------------------


async def test_lookups_by_offset_and_msg_id(store: MessageStore) -> None:
    result = await put_ok(store, inner(b"find me", TAGS="t"))
    message = store.look_message_by_msg_id(result.msg_ids[0])
    assert message is not None and message.body == b"find me"
    assert message.msg_id == result.msg_ids[0] and message.tags == "t"
    assert store.look_message_by_offset(result.physical_offset + 1) is None
    assert store.look_message_by_offset(10**9) is None
    assert store.look_message_by_msg_id("not-an-id") is None


async def test_query_by_key_and_uniq_key(store: MessageStore) -> None:
    clock = store.clock
    assert isinstance(clock, ManualClock)
    start = clock.now_ms()
    for i in range(6):
        await put_ok(store, inner(f"m{i}".encode(), KEYS=f"order-{i % 2} k{i}", UNIQ_KEY=f"U{i}"))
        clock.advance(1000)
    await dispatched(store)
    end = clock.now_ms()
    with store.query_message(TOPIC, "order-1", 32, start, end) as odd:
        assert sorted(bodies(odd)) == [b"m1", b"m3", b"m5"]  # type: ignore[arg-type]
        assert odd.index_last_update_phyoffset == store.index_service.files[-1].end_phy_offset
        assert odd.index_last_update_timestamp == start + 5000
    with store.query_message(TOPIC, "U4", 32, start, end) as uniq:
        assert bodies(uniq) == [b"m4"]  # type: ignore[arg-type]
    with store.query_message(TOPIC, "order-0", 1, start, end) as capped:
        assert capped.message_count == 1
    with store.query_message(TOPIC, "order-0", 32, start + 3000, end) as window:
        assert sorted(bodies(window)) == [b"m4"]  # type: ignore[arg-type]
    with store.query_message("OtherTopic", "order-0", 32, start, end) as other:
        assert other.message_count == 0


async def test_offsets_and_times(store: MessageStore) -> None:
    clock = store.clock
    assert isinstance(clock, ManualClock)
    start = clock.now_ms()
    stored = []
    for i in range(5):
        stored.append(await put_ok(store, inner(f"m{i}".encode())))
        clock.advance(10_000)
    await dispatched(store)
    assert store.get_offset_in_queue_by_time(TOPIC, 0, start + 20_000) == 2
    assert store.get_offset_in_queue_by_time(TOPIC, 0, start + 21_000) == 2
    assert store.get_offset_in_queue_by_time(TOPIC, 0, start + 29_000) == 3
    assert store.get_earliest_message_time(TOPIC, 0) == start
    assert store.get_earliest_store_time() == start
    assert store.get_message_store_timestamp(TOPIC, 0, 3) == start + 30_000
    assert store.get_commit_log_offset_in_queue(TOPIC, 0, 4) == stored[4].physical_offset
    assert store.get_message_total_in_queue(TOPIC, 0) == 5
    # A Java store creates the queue on lookup: an unknown queue reads as empty, 0..0.
    assert (store.get_min_offset_in_queue("Nope", 0), store.get_max_offset_in_queue("Nope", 0)) == (
        0, 0,
    )  # fmt: skip
    assert store.get_message_total_in_queue("Nope", 0) == 0
    assert store.get_earliest_message_time("Nope", 0) == -1
    assert store.get_message_store_timestamp(TOPIC, 0, 99) == -1


async def test_clean_expired_consume_queue_keeps_schedule_topic(store: MessageStore) -> None:
    for i in range(70):
        await put_ok(store, inner(BODY, queue_id=1 if i < 5 else 0))
    await put_ok(store, inner(b"d", DELAY="1"))
    await dispatched(store)
    assert store.cq_table.get(RMQ_SYS_SCHEDULE_TOPIC, 0) is not None
    store.commit_log.queue.detach([store.commit_log.queue.files[0]])
    assert await store.clean_expired_consume_queue() == 1
    assert store.cq_table.get(TOPIC, 1) is None and store.cq_table.get(TOPIC, 0) is not None
    assert store.commit_log.queue_offset(TOPIC, 1) == 0
    assert not (store.config.consume_queue_dir / TOPIC / "1").exists()


async def test_a_pull_scans_at_most_800_units(tmp_path: Path) -> None:
    """max(16000 bytes of units, maxMsgNums units): 900 misses end one pull at 800."""
    config = store_config(tmp_path, mapped_file_size_consume_queue=20 * 2000)
    store = await open_store(config)
    try:
        for i in range(901):
            await put_ok(store, inner(b"x", TAGS="hit" if i == 900 else "miss"))
        await dispatched(store)
        wanted = {tags_code("hit")}
        with get(store, 0, 0, tag_codes=wanted) as first:
            assert (first.status, first.next_begin_offset) == (G.NO_MATCHED_MESSAGE, 800)
        with get(store, 0, 800, tag_codes=wanted) as second:
            assert second.status is G.FOUND and second.message_queue_offsets == [900]
            assert second.next_begin_offset == 901
        with get(store, 0, 0, max_msgs=1000, tag_codes=wanted) as wide:
            assert wide.message_queue_offsets == [900]  # 1000 units may be scanned
        info = store.runtime_info()
        assert info["get_message_times_total_found"] == 2
        assert info["commitLogMaxOffset"] == store.max_phy_offset
    finally:
        await store.shutdown()


def test_total_physical_memory_falls_back_to_24_gib(monkeypatch: pytest.MonkeyPatch) -> None:
    assert total_physical_memory() > 0

    def unknown(name: str) -> int:
        raise ValueError(name)

    monkeypatch.setattr(os, "sysconf", unknown)
    assert total_physical_memory() == 24 * 1024**3
