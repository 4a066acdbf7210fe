"""MessageStore puts: every PutMessageStatus the store can produce, batches and delays.

Each test runs a real store on small files in ``tmp_path``; faults are injected
through the file layer's hooks (``fail_writes``, ``fail_flushes``) or by holding
the allocator, never by sleeping.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.common.clock import ManualClock
from aiorocketmq.common.constants import RMQ_SYS_SCHEDULE_TOPIC, MessageSysFlag
from aiorocketmq.common.message import Message
from aiorocketmq.common.message_codec import decode_record, encode_batch
from aiorocketmq.common.msg_id import create_offset_msg_id
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.store import dispatch_files
from aiorocketmq.store.config import BrokerRole, FlushDiskType
from aiorocketmq.store.errors import StoreIOError
from aiorocketmq.store.index_file import IndexFile
from aiorocketmq.store.inner_message import MessageExtBatch
from aiorocketmq.store.message_store import MessageStore
from aiorocketmq.store.results import GetMessageStatus, PutMessageStatus
from tests.support.kernels import IMPLEMENTATIONS, use_batch_kernel
from tests.support.wait import wait_until
from tests.unit.store.helpers import BORN_HOST, STORE_HOST
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

S = PutMessageStatus


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[MessageStore]:
    store = await open_store(store_config(tmp_path), clock=ManualClock())
    yield store
    await store.shutdown()


async def test_put_ok_reports_offsets_ids_and_time(store: MessageStore) -> None:
    first = await put_ok(store, inner(b"one", TAGS="a"))
    second = await put_ok(store, inner(b"two", TAGS="a"))
    assert (first.status, first.physical_offset, first.queue_offset) == (S.PUT_OK, 0, 0)
    assert second.physical_offset == first.wrote_bytes and second.queue_offset == 1
    assert first.msg_ids == [create_offset_msg_id(*STORE_HOST, 0)]
    assert first.store_timestamp == store.clock.now_ms() and first.message_count == 1
    selected = store.select_one_message_by_offset(second.physical_offset)
    assert selected is not None
    with selected:
        record = decode_record(selected.view, check_crc=True)
        assert (record.queue_offset, record.physical_offset) == (1, second.physical_offset)
        assert (record.body, record.store_timestamp) == (b"two", second.store_timestamp)
        assert record.born_host == BORN_HOST and record.store_host == STORE_HOST
    assert store.stats.put_message_times_total == 2
    assert store.stats.topic_put_size[TOPIC] == first.wrote_bytes + second.wrote_bytes


async def test_queue_offsets_count_per_queue(store: MessageStore) -> None:
    offsets = [(await put_ok(store, inner(queue_id=i % 3))).queue_offset for i in range(9)]
    assert offsets == [0, 0, 0, 1, 1, 1, 2, 2, 2]


async def test_refused_before_start_and_after_shutdown(tmp_path: Path) -> None:
    store = MessageStore(store_config(tmp_path))
    await store.load()
    refused = await store.put_message(inner())
    assert refused.status is S.SERVICE_NOT_AVAILABLE and not refused.ok
    await store.start()
    await put_ok(store, inner())
    await store.shutdown()
    assert (await store.put_message(inner())).status is S.SERVICE_NOT_AVAILABLE
    assert store.stats.put_message_failed_times == 2


async def test_slave_refuses_puts(tmp_path: Path) -> None:
    store = await open_store(store_config(tmp_path, broker_role=BrokerRole.SLAVE))
    try:
        assert (await store.put_message(inner())).status is S.SERVICE_NOT_AVAILABLE
    finally:
        await store.shutdown()


async def test_full_disk_refuses_puts_and_keeps_serving_reads(store: MessageStore) -> None:
    await put_ok(store, inner(b"before"))
    await dispatched(store)
    store.on_disk_writable_changed(False)
    assert (await store.put_message(inner())).status is S.SERVICE_NOT_AVAILABLE
    result = store.get_message("g", TOPIC, 0, 0, 32)
    assert result is not None
    with result:
        assert result.status is GetMessageStatus.FOUND and result.message_count == 1
    store.on_disk_writable_changed(True)
    await put_ok(store, inner(b"after"))


async def test_puts_resume_once_an_index_file_can_be_created_with_no_put_to_retry_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dispatch_files, "_RETRY_PAUSE_S", 0.05)
    real = IndexFile.create_blocking
    disk_full = [True]

    def create(*args: Any) -> IndexFile:
        if disk_full[0]:
            raise StoreIOError("cannot create the index file: No space left on device")
        return real(*args)

    monkeypatch.setattr(IndexFile, "create_blocking", create)
    store = await open_store(store_config(tmp_path))
    try:
        await put_ok(store, inner(b"stored", KEYS="k1"))  # its dispatch finds no index file
        await wait_until(lambda: not store.flags.writeable, what="puts refused")
        assert (await store.put_message(inner())).status is S.SERVICE_NOT_AVAILABLE
        disk_full[0] = False  # space again, and no put comes to bring a retry
        await wait_until(lambda: store.flags.writeable, what="puts taken again")
        await put_ok(store, inner(b"after", KEYS="k2"))
        await dispatched(store)
    finally:
        await store.shutdown()


@pytest.mark.parametrize(
    ("case", "status"),
    [
        ("topic of 128 chars", S.MESSAGE_ILLEGAL),
        ("topic of 64 two-byte chars (128 bytes)", S.MESSAGE_ILLEGAL),
        ("properties string of 32768 chars", S.MESSAGE_ILLEGAL),
        ("properties of 40000 bytes in 20000 chars", S.PROPERTIES_SIZE_EXCEEDED),
        ("properties holding a lone surrogate (no UTF-8 form)", S.MESSAGE_ILLEGAL),
        ("body over maxMessageSize", S.MESSAGE_ILLEGAL),
        ("record larger than a CommitLog file", S.MESSAGE_ILLEGAL),
        ("DELAY not an integer", S.MESSAGE_ILLEGAL),
    ],
)
async def test_invalid_messages_are_refused(
    tmp_path: Path, case: str, status: PutMessageStatus
) -> None:
    # 16 KiB CommitLog files: a 15 KiB body passes maxMessageSize but no file holds it.
    config = store_config(
        tmp_path, max_message_size=48 * 1024, mapped_file_size_commit_log=16 * 1024
    )
    store = await open_store(config)
    msg = inner(b"x")
    if case.startswith("topic of 128"):
        msg.topic = "T" * 128
    elif case.startswith("topic of 64"):
        msg.topic = "é" * 64
    elif case.startswith("properties string"):
        msg.properties_string = "K\x01" + "v" * 32766
    elif case.startswith("properties of 40000"):
        msg.properties_string = "K\x01" + "é" * 20000
    elif case.startswith("properties holding"):
        msg.properties_string = "K\x01\ud800"  # a JSON header's "\\ud800" decodes to this
    elif case.startswith("body over"):
        msg.body = bytes(48 * 1024 + 1)
    elif case.startswith("record larger"):
        msg.body = bytes(16 * 1024 - 100)
    else:
        msg.properties["DELAY"] = "three"
    try:
        result = await store.put_message(msg)
        assert result.status is status, (case, result)
        assert not result.ok and result.physical_offset == -1
        assert store.max_phy_offset == 0  # nothing was written
    finally:
        await store.shutdown()


async def test_write_failure_is_unknown_error(store: MessageStore) -> None:
    await put_ok(store, inner())
    last = store.commit_log.queue.last_file
    assert last is not None
    last.fail_writes = OSError("EIO")
    assert (await store.put_message(inner())).status is S.UNKNOWN_ERROR
    last.fail_writes = None
    await put_ok(store, inner())


async def test_stalled_file_creation_gives_os_pagecache_busy_then_create_failed(
    store: MessageStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A put waiting over 1 s for a new CommitLog file makes others fail fast."""
    clock = store.clock
    assert isinstance(clock, ManualClock)
    gate = asyncio.Event()
    original = store.commit_log.allocate_next_file

    async def held(start_offset: int = 0) -> object:
        await gate.wait()
        return await original(start_offset)

    # No prepared file is ever "ready", so the first append needs one.
    monkeypatch.setattr(store.commit_log.allocator, "take", lambda path: None)
    monkeypatch.setattr(store.commit_log, "allocate_next_file", held)
    waiting = asyncio.create_task(store.put_message(inner(b"first")))
    await wait_until(lambda: store._putter._stalled_since_ms, what="the put to wait for a file")
    clock.advance(1001)
    assert (await store.put_message(inner())).status is S.OS_PAGECACHE_BUSY
    monkeypatch.undo()
    gate.set()
    assert (await asyncio.wait_for(waiting, 5)).status is S.PUT_OK

    async def broken(start_offset: int = 0) -> object:
        raise StoreIOError("no space left")

    await put_ok(store, inner(bytes(40_000)))
    monkeypatch.setattr(store.commit_log.allocator, "take", lambda path: None)
    monkeypatch.setattr(store.commit_log, "allocate_next_file", broken)
    # The second 40 KB body does not fit the 64 KiB file: it needs the next one.
    assert (await store.put_message(inner(bytes(40_000)))).status is S.CREATE_MAPEDFILE_FAILED


async def test_sync_flush_timeout_still_stores(tmp_path: Path) -> None:
    config = store_config(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH, sync_flush_timeout=50)
    store = await open_store(config)
    try:
        first = await put_ok(store, inner(b"durable"))
        assert first.status is S.PUT_OK
        assert store.commit_log.flushed_where >= first.physical_offset + first.wrote_bytes
        last = store.commit_log.queue.last_file
        assert last is not None
        last.fail_flushes = OSError("EIO")
        timed_out = await store.put_message(inner(b"not durable"))
        assert timed_out.status is S.FLUSH_DISK_TIMEOUT and timed_out.ok
        last.fail_flushes = None
        no_wait = await store.put_message(inner(b"no wait", WAIT="false"))
        assert no_wait.status is S.PUT_OK
        end = no_wait.physical_offset + no_wait.wrote_bytes
        await wait_until(lambda: store.commit_log.flushed_where >= end, what="WAIT=false flushed")
    finally:
        await store.shutdown()


async def test_sync_flush_puts_across_rolls_while_files_warm(tmp_path: Path) -> None:
    # RocketMQ's warmMapedFileEnable under SYNC_FLUSH: the warming msyncs every few
    # pages of files the writer and the group commit are using at the same time.
    config = store_config(
        tmp_path,
        flush_disk_type=FlushDiskType.SYNC_FLUSH,
        warm_maped_file_enable=True,
        flush_least_pages_when_warm_maped_file=2,
        mapped_file_size_commit_log=5 * 1024 * 1024,
        max_message_size=256 * 1024,
    )
    store = await open_store(config)
    try:
        sent = [bytes([i]) * (96 * 1024 + i) for i in range(130)]  # ~12.5 MiB: two rolls
        for start in range(0, len(sent), 10):
            results = await asyncio.gather(
                *(store.put_message(inner(body)) for body in sent[start : start + 10])
            )
            assert {r.status for r in results} == {S.PUT_OK}
        assert len(store.commit_log.queue.files) == 3
        await dispatched(store)
        read: list[bytes] = []
        while len(read) < len(sent):
            got = store.get_message("g", TOPIC, 0, len(read), 32)
            assert got is not None and got.messages, got
            with got:
                read += bodies(got)
        assert read == sent
    finally:
        await store.shutdown()


async def test_sync_master_waits_for_the_replica_seam(tmp_path: Path) -> None:
    store = await open_store(store_config(tmp_path, broker_role=BrokerRole.SYNC_MASTER))
    try:
        assert (await store.put_message(inner())).status is S.SLAVE_NOT_AVAILABLE
        asked: list[int] = []

        async def replica(next_offset: int) -> PutMessageStatus:
            asked.append(next_offset)
            return S.FLUSH_SLAVE_TIMEOUT if len(asked) == 1 else S.PUT_OK

        store.replica_waiter = replica
        slow = await store.put_message(inner(b"a"))
        assert slow.status is S.FLUSH_SLAVE_TIMEOUT and slow.ok
        assert asked == [slow.physical_offset + slow.wrote_bytes]
        assert (await store.put_message(inner(b"b"))).status is S.PUT_OK
        assert (await store.put_message(inner(b"c", WAIT="false"))).status is S.PUT_OK
        assert len(asked) == 2  # WAIT=false does not wait for the slave
    finally:
        await store.shutdown()


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
async def test_batch_put_stores_consecutive_records(
    store: MessageStore, implementation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_batch_kernel(implementation, monkeypatch)
    messages = [
        Message(TOPIC, f"b{i}".encode(), flag=i, properties={"TAGS": "t", "KEYS": f"k{i}"})
        for i in range(3)
    ]
    batch = MessageExtBatch(
        TOPIC, 1, encode_batch(messages), {"CLUSTER": "c1"},
        born_timestamp=1, born_host=BORN_HOST, store_host=STORE_HOST,
    )  # fmt: skip
    result = await store.put_messages(batch)
    assert (result.status, result.message_count, result.queue_offset) == (S.PUT_OK, 3, 0)
    assert len(result.msg_ids) == 3 and result.msg_ids[0] == create_offset_msg_id(*STORE_HOST, 0)
    await dispatched(store)
    got = store.get_message("g", TOPIC, 1, 0, 32)
    assert got is not None
    with got:
        stored = records(got)
        assert [r.body for r in stored] == [b"b0", b"b1", b"b2"]
        assert [r.queue_offset for r in stored] == [0, 1, 2] and stored[2].flag == 2
        assert stored[0].properties == {"TAGS": "t", "KEYS": "k0", "CLUSTER": "c1"}
    assert (await put_ok(store, inner(queue_id=1))).queue_offset == 3


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("case", ["transactional", "delayed", "body too large", "garbled"])
async def test_invalid_batches_are_refused(
    store: MessageStore, case: str, implementation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_batch_kernel(implementation, monkeypatch)
    body = encode_batch([Message(TOPIC, b"x")])
    batch = MessageExtBatch(TOPIC, 0, body, born_host=BORN_HOST, store_host=STORE_HOST)
    if case == "transactional":
        batch.sys_flag = MessageSysFlag.TRANSACTION_PREPARED_TYPE
    elif case == "delayed":
        batch.properties["DELAY"] = "2"
    elif case == "body too large":
        batch.body = encode_batch([Message(TOPIC, bytes(4 * 1024 * 1024))])
    else:
        batch.body = body[:-1]
    assert (await store.put_messages(batch)).status is S.MESSAGE_ILLEGAL


async def test_delayed_message_goes_to_the_schedule_topic(store: MessageStore) -> None:
    delayed = await put_ok(store, inner(b"later", queue_id=5, DELAY="3", TAGS="a"))
    clamped = await put_ok(store, inner(b"much later", queue_id=6, DELAY="99"))
    await dispatched(store)
    assert store.get_max_offset_in_queue(TOPIC, 5) == 0
    level3 = store.cq_table.get(RMQ_SYS_SCHEDULE_TOPIC, 2)
    level18 = store.cq_table.get(RMQ_SYS_SCHEDULE_TOPIC, 17)
    assert level3 is not None and level18 is not None
    # tagsCode of a schedule unit is the deliver time: store time + the level's delay.
    assert level3.get_unit(0) == (delayed.physical_offset, delayed.wrote_bytes,
                                  delayed.store_timestamp + 10_000)  # fmt: skip
    assert level18.get_unit(0)[2] == clamped.store_timestamp + 2 * 3600_000  # type: ignore[index]
    message = store.look_message_by_offset(clamped.physical_offset)
    assert message is not None and message.topic == RMQ_SYS_SCHEDULE_TOPIC
    assert message.queue_id == 17
    assert message.properties[MessageConst.PROPERTY_REAL_TOPIC] == TOPIC
    assert message.properties[MessageConst.PROPERTY_REAL_QUEUE_ID] == "6"
    assert message.properties[MessageConst.PROPERTY_DELAY_TIME_LEVEL] == "18"


async def test_prepared_message_is_not_delayed_and_gets_no_unit(store: MessageStore) -> None:
    prepared = inner(b"half", sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE, DELAY="2")
    result = await put_ok(store, prepared)
    await put_ok(store, inner(b"normal"))
    await dispatched(store)
    assert result.queue_offset == 0
    assert store.get_max_offset_in_queue(TOPIC, 0) == 1  # only the normal one
    message = store.look_message_by_offset(result.physical_offset)
    assert message is not None and message.topic == TOPIC
