"""The dispatcher (ReputMessageService): CommitLog order, BLANK records, listeners,
bounded chunks, unaligned replicated frames, corrupt slices and index rotation.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from aiorocketmq.common.clock import ManualClock
from aiorocketmq.common.constants import RMQ_SYS_SCHEDULE_TOPIC, MessageSysFlag
from aiorocketmq.common.message_codec import decode_record
from aiorocketmq.common.properties import string_to_properties
from aiorocketmq.common.tag_hash import tags_code
from aiorocketmq.store.config import BrokerRole
from aiorocketmq.store.dispatch_builder import DispatchRequestBuilder
from aiorocketmq.store.dispatch_request import DispatchRequest
from aiorocketmq.store.errors import StoreError
from aiorocketmq.store.message_store import MessageStore
from aiorocketmq.store.results import GetMessageStatus, PutMessageStatus
from aiorocketmq.store.running_flags import RunningFlag
from tests.support.kernels import IMPLEMENTATIONS, use_dispatch_kernel
from tests.support.wait import wait_until
from tests.unit.store.helpers import make_record
from tests.unit.store.store_support import (
    TOPIC,
    dispatched,
    inner,
    open_store,
    put_ok,
    store_config,
)

Arrival = tuple[str, int, int, int, int, str]


@pytest.fixture(autouse=True, params=IMPLEMENTATIONS)
def _dispatch_kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here runs with requests built in C and from scanned records."""
    use_dispatch_kernel(request.param, monkeypatch)


def units_of(store: MessageStore, topic: str, queue_id: int) -> list[tuple[int, int, int]]:
    queue = store.cq_table.get(topic, queue_id)
    assert queue is not None
    return [queue.get_unit(q) for q in range(queue.max_offset)]  # type: ignore[misc]


async def test_listeners_hear_every_record_with_its_tags_code(tmp_path: Path) -> None:
    store = await open_store(store_config(tmp_path), clock=ManualClock())
    heard: list[Arrival] = []
    store.add_arrival_listener(lambda *args: heard.append(args))
    try:
        plain = await put_ok(store, inner(b"a", queue_id=2, TAGS="TagA"))
        delayed = await put_ok(store, inner(b"b", DELAY="1"))
        await dispatched(store)
    finally:
        await store.shutdown()
    assert heard[0] == (TOPIC, 2, 1, tags_code("TagA"), plain.store_timestamp, "TAGS\x01TagA")
    topic, queue_id, max_offset, code, _ts, props = heard[1]
    assert (topic, queue_id, max_offset) == (RMQ_SYS_SCHEDULE_TOPIC, 0, 1)
    assert code == delayed.store_timestamp + 1000
    assert string_to_properties(props)["REAL_TOPIC"] == TOPIC
    assert store.stats.dispatched_messages == 2


async def test_blank_records_are_skipped_across_many_files(tmp_path: Path) -> None:
    store = await open_store(store_config(tmp_path))
    try:
        results = [await put_ok(store, inner(bytes(3000 + i * 10))) for i in range(100)]
        await dispatched(store)
        assert len(store.commit_log.queue) >= 4  # every roll left a BLANK record behind
        expected = [(r.physical_offset, r.wrote_bytes, 0) for r in results]
        assert units_of(store, TOPIC, 0) == expected
        assert store.dispatch_behind_bytes() <= 0
        assert store.checkpoint.logics_msg_timestamp == results[-1].store_timestamp
    finally:
        await store.shutdown()


async def test_a_backlog_is_dispatched_in_chunks_without_starving_the_loop(tmp_path: Path) -> None:
    store = await open_store(store_config(tmp_path))
    store.dispatcher._pacing.records = 3
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    try:
        # ASYNC_FLUSH puts never suspend, so 90 of them build a backlog undispatched.
        for i in range(90):
            await put_ok(store, inner(bytes([i])))
        assert store.dispatch_behind_bytes() > 0
        task = asyncio.create_task(ticker())
        await dispatched(store)
        task.cancel()
        assert ticks >= 25  # the loop ran between (about 30) chunks
        assert len(units_of(store, TOPIC, 0)) == 90
    finally:
        await store.shutdown()


async def test_slave_dispatches_unaligned_frames_and_tells_no_listener(tmp_path: Path) -> None:
    master = await open_store(store_config(tmp_path / "m"))
    try:
        for i in range(50):
            await put_ok(master, inner(bytes([i]) * (700 + i), queue_id=i % 2, KEYS=f"k{i}"))
        await dispatched(master)
        expected = {q: units_of(master, TOPIC, q) for q in (0, 1)}
        chunks = []
        offset = 0
        while offset < master.max_phy_offset:
            data = master.get_commit_log_data(offset)
            assert data is not None
            with data:
                chunks.append((offset, bytes(data.view)))
                offset += data.size
            # A file's slice ends at its end after a roll: go on in the next file.
            offset = max(offset, master.commit_log.roll_next_file(offset - 1))
            offset = min(offset, master.max_phy_offset)
    finally:
        await master.shutdown()
    slave = await open_store(store_config(tmp_path / "s", broker_role=BrokerRole.SLAVE))
    heard: list[Arrival] = []
    slave.add_arrival_listener(lambda *args: heard.append(args))
    try:
        for start, data in chunks:
            for pos in range(0, len(data), 333):  # HA frames cut records anywhere
                assert await slave.append_to_commit_log(start + pos, data[pos : pos + 333])
                await asyncio.sleep(0)
        await dispatched(slave)
        assert {q: units_of(slave, TOPIC, q) for q in (0, 1)} == expected
        assert heard == [] and slave.stats.topic_put_times[TOPIC] == 50
        assert slave.checkpoint.physic_msg_timestamp > 0
        with slave.query_message(TOPIC, "k33", 32, 0, 2**62) as found:
            assert found.message_count == 1
    finally:
        await slave.shutdown()


async def test_master_skips_what_does_not_parse(tmp_path: Path) -> None:
    store = await open_store(store_config(tmp_path))
    try:
        await put_ok(store, inner(b"before"))
        await dispatched(store)
        # A record whose header is sound but whose lengths do not add up: skipped alone.
        broken = make_record(body=b"broken")
        broken[-2:] = b"\x7f\x7f"  # properties length no longer matches TOTALSIZE
        # Then bytes that are no record at all: the rest of the slice is skipped.
        junk = b"\x00\x00\x00\x40" + b"\xee" * 60
        for data in (bytes(broken), junk):
            assert await store.append_to_commit_log(store.max_phy_offset, data)
        await dispatched(store)
        after = await put_ok(store, inner(b"after"))
        await dispatched(store)
        queue = store.cq_table.get(TOPIC, 0)
        assert queue is not None and queue.max_offset == 2
        assert queue.get_unit(1) == (after.physical_offset, after.wrote_bytes, 0)
    finally:
        await store.shutdown()


async def test_wait_dispatched_answers_false_after_shutdown(tmp_path: Path) -> None:
    store = await open_store(store_config(tmp_path))
    await put_ok(store, inner())
    await store.shutdown()
    assert not await store.dispatcher.wait_dispatched(store.max_phy_offset + 1)


async def test_index_rotation_and_checkpoint(tmp_path: Path) -> None:
    store = await open_store(store_config(tmp_path, max_index_num=6, max_hash_slot_num=4))
    try:
        for i in range(20):
            await put_ok(store, inner(f"m{i}".encode(), KEYS=f"key{i} shared"))
        await dispatched(store)
        assert len(store.index_service.files) >= 6  # 40 keys, 5 per file
        await wait_until(lambda: store.checkpoint.index_msg_timestamp > 0, what="index full")
        with store.query_message(TOPIC, "shared", 64, 0, 2**62) as shared:
            assert shared.message_count == 20
            bodies = {decode_record(view).body for view in shared.messages}
            assert bodies == {f"m{i}".encode() for i in range(20)}
        result = store.get_message("g", TOPIC, 0, 0, 32)
        assert result is not None
        with result:
            assert result.status is GetMessageStatus.FOUND and result.message_count == 20
    finally:
        await store.shutdown()


async def test_a_dead_dispatcher_stops_puts_and_releases_waiters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = store_config(tmp_path)
    store = await open_store(config)

    def broken() -> str:
        raise RuntimeError("a dispatch bug")

    monkeypatch.setattr(store.dispatcher, "_reput_step", broken)
    try:
        await put_ok(store, inner())
        assert not await store.dispatcher.wait_dispatched(store.max_phy_offset)
        assert store.dispatcher.failures and not store.flags.writeable
        refused = await store.put_message(inner())
        assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    finally:
        await store.shutdown()
    assert config.abort_path.exists()  # the next start recovers as after a crash


async def test_a_single_put_is_dispatched_from_its_own_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A put stored as sent is dispatched without reading its record back; the queue
    unit, the index keys and the arrival are those the scanning way gives."""
    scanned: list[object] = []
    scan, walk = DispatchRequestBuilder.from_record, DispatchRequestBuilder.walk
    monkeypatch.setattr(
        DispatchRequestBuilder, "from_record", lambda self, r: scanned.append(r) or scan(self, r)
    )
    monkeypatch.setattr(  # the scanning way in either implementation starts a walk
        DispatchRequestBuilder, "walk", lambda self, v, w: scanned.append(v) or walk(self, v, w)
    )
    store = await open_store(store_config(tmp_path, verify_writes=False), clock=ManualClock())
    heard: list[Arrival] = []
    store.add_arrival_listener(lambda *args: heard.append(args))
    props = {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "U1", "\u00e9": "\udc80x"}
    try:
        # The first put waits for the first files (CommitLog, this queue's, the index):
        # the scanning way.
        await put_ok(store, inner(b"first", queue_id=1, KEYS="k0"))
        await dispatched(store)
        scanned.clear()
        heard.clear()
        result = await put_ok(store, inner(b"a", queue_id=1, **props))
        await dispatched(store)
        assert scanned == []  # nothing was read back
        *arrival, stored = heard[0]
        assert len(heard) == 1 and string_to_properties(stored) == props
        assert arrival == [TOPIC, 1, 2, tags_code("TagA"), result.store_timestamp]
        assert units_of(store, TOPIC, 1)[1] == (
            result.physical_offset,
            result.wrote_bytes,
            tags_code("TagA"),
        )
        for key in ("k1", "k2", "U1"):
            found = store.query_message(TOPIC, key, 4, 0, 2**62)
            try:
                offsets = [decode_record(m).physical_offset for m in found.messages]
                assert offsets == [result.physical_offset], key
            finally:
                found.release()
    finally:
        await store.shutdown()


async def test_a_queue_unit_that_cannot_be_written_stops_puts_and_dispatch_goes_on(
    tmp_path: Path,
) -> None:
    """A single put whose ConsumeQueue unit fails to write (the fields way): the store
    refuses further puts, the record stays stored and dispatch moves past it."""
    store = await open_store(store_config(tmp_path), clock=ManualClock())
    heard: list[Arrival] = []
    store.add_arrival_listener(lambda *args: heard.append(args))
    try:
        await put_ok(store, inner(b"first", queue_id=1))  # the queue's file exists now
        await dispatched(store)
        queue = store.cq_table.find_or_create(TOPIC, 1)
        last = queue.queue.last_file
        assert last is not None
        last.fail_writes = OSError("EIO")
        result = await put_ok(store, inner(b"second", queue_id=1))
        await dispatched(store)
        assert store.flags.bits & RunningFlag.WRITE_LOGICS_QUEUE_ERROR
        assert not store.flags.writeable
        assert store.dispatcher.reput_from == result.physical_offset + result.wrote_bytes
        assert [arrival[2] for arrival in heard] == [1, 2]  # announced all the same
        assert (await store.put_message(inner(b"third"))).status is (
            PutMessageStatus.SERVICE_NOT_AVAILABLE
        )
    finally:
        await store.shutdown()


async def test_transaction_records_take_the_fields_way_by_their_type(tmp_path: Path) -> None:
    """PREPARED and ROLLBACK records get no queue unit, COMMIT and plain ones do; the
    keys of all but ROLLBACK are indexed; each is announced."""
    store = await open_store(store_config(tmp_path), clock=ManualClock())
    heard: list[Arrival] = []
    store.add_arrival_listener(lambda *args: heard.append(args))
    types = {
        "plain": MessageSysFlag.TRANSACTION_NOT_TYPE,
        "prepared": MessageSysFlag.TRANSACTION_PREPARED_TYPE,
        "commit": MessageSysFlag.TRANSACTION_COMMIT_TYPE,
        "rollback": MessageSysFlag.TRANSACTION_ROLLBACK_TYPE,
    }
    try:
        await put_ok(store, inner(b"first", KEYS="k-first"))  # the first files exist now
        await dispatched(store)
        for name, sys_flag in types.items():
            await put_ok(store, inner(name.encode(), sys_flag=sys_flag, KEYS=f"k-{name}"))
            await dispatched(store)
        assert len(units_of(store, TOPIC, 0)) == 3  # first, plain, commit
        for name, indexed in (("plain", 1), ("prepared", 1), ("commit", 1), ("rollback", 0)):
            found = store.query_message(TOPIC, f"k-{name}", 4, 0, 2**62)
            try:
                assert len(found.messages) == indexed, name
            finally:
                found.release()
        assert len(heard) == 5
    finally:
        await store.shutdown()


async def test_a_put_request_that_disagrees_with_its_record_stops_the_store(
    tmp_path: Path,
) -> None:
    store = await open_store(store_config(tmp_path))  # verify_writes on
    try:
        result = await put_ok(store, inner(b"a", TAGS="TagA"))
        await dispatched(store)
        request = DispatchRequest(
            TOPIC, 0, result.physical_offset, result.wrote_bytes, 0, result.store_timestamp, 0
        )
        builder = DispatchRequestBuilder(())
        builder.complete_put(request, "TAGS\x01TagA")
        data = store.get_commit_log_data(result.physical_offset)
        assert data is not None
        with data:
            builder.check_put(request, data.view)  # agrees
            request.keys = "k"
            with pytest.raises(StoreError, match="dispatch request"):
                builder.check_put(request, data.view)
    finally:
        await store.shutdown()
