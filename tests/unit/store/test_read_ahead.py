"""ReadAhead on real files: a pull of records that are not in memory reads them in a
thread first; records in memory cost no thread."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.store import page_ops
from aiorocketmq.store.message_store import MessageStore
from aiorocketmq.store.results import GetMessageResult, GetMessageStatus
from tests.support.page_cache import drop_from_page_cache
from tests.unit.store.store_support import TOPIC, bodies, dispatched, inner, open_store, put_ok
from tests.unit.store.store_support import store_config as make_config

#: 1 KiB bodies over 64 KiB CommitLog files and 50-unit ConsumeQueue files: eight of
#: each. A restart's recovery reads the last three of each back, and the first
#: ConsumeQueue file (its minimum offset): the pull at COLD finds neither in memory.
MESSAGES = 400
COLD = 100
BODIES = [bytes([i % 251]) * 1024 for i in range(MESSAGES)]


def in_memory(result: GetMessageResult) -> bool:
    return all(
        page_ops.resident(
            b.file.buffer,
            b.start_offset - b.file.file_from_offset,
            b.start_offset - b.file.file_from_offset + b.view.nbytes,
        )
        for b in result.buffers
        if b.file is not None
    )


async def test_records_not_in_memory_are_read_before_the_pull_answers(tmp_path: Path) -> None:
    if not page_ops.populate_supported():
        pytest.skip("no MADV_POPULATE_READ here: pulls read as before")

    def warm(store: MessageStore) -> None:
        written = store.get_message("g", TOPIC, 0, MESSAGES - 32, 32)
        assert written is not None and written.status is GetMessageStatus.FOUND
        with written:
            assert store.read_ahead.fault_in(written) is None  # just written: no thread
        assert store.read_ahead.fault_in_units(TOPIC, 0, MESSAGES - 32, 32) is None
        assert store.read_ahead.cold_reads == 0

    store = await _restarted_cold(
        tmp_path, make_config(tmp_path, flush_interval_commit_log=10), warm
    )
    try:
        await _read_cold(store)
    finally:
        await store.shutdown()


async def _restarted_cold(
    tmp_path: Path, config: Any, check: Callable[[MessageStore], None] | None = None
) -> MessageStore:
    """The store with BODIES written (``check`` run on it then), closed, its files out
    of the page cache, and open again."""
    store = await open_store(config)
    try:
        for body in BODIES:
            await put_ok(store, inner(body))
        await dispatched(store)
        if check is not None:
            check(store)
    finally:
        await store.shutdown()
    os.sync()
    drop_from_page_cache(tmp_path)
    return await open_store(config)


async def _read_cold(store: MessageStore) -> None:
    read_ahead = store.read_ahead
    units = read_ahead.fault_in_units(TOPIC, 0, COLD, 32)
    assert units is not None
    await units
    assert read_ahead.fault_in_units(TOPIC, 0, COLD, 32) is None
    assert read_ahead.fault_in_units("NoSuchTopic", 0, 0, 32) is None
    result = store.get_message("g", TOPIC, 0, COLD, 32)
    assert result is not None and result.status is GetMessageStatus.FOUND
    with result:
        assert not in_memory(result)
        pending = read_ahead.fault_in(result)
        assert pending is not None
        await pending
        assert in_memory(result)
        assert read_ahead.cold_reads == 2
        assert read_ahead.fault_in(result) is None
        assert bodies(result) == BODIES[COLD : COLD + 32]
    # What an HA transfer reads next: CommitLog bytes by offset.
    probe = store.get_message("g", TOPIC, 0, 2 * COLD, 1)
    assert probe is not None and probe.buffers
    with probe:
        offset = probe.buffers[0].start_offset
    pending = read_ahead.fault_in_commit_log(offset, 32 * 1024)
    assert pending is not None
    await pending
    assert read_ahead.cold_reads == 3
    assert read_ahead.fault_in_commit_log(offset, 32 * 1024) is None
    assert read_ahead.fault_in_commit_log(store.max_phy_offset, 1024) is None
    await _read_one_cold(store)


async def _read_one_cold(store: MessageStore) -> None:
    """One record by its CommitLog offset (a send-back's original, a delayed message
    due): read in the pool when it left memory, then found in memory."""
    read_ahead = store.read_ahead
    probe = store.get_message("g", TOPIC, 0, COLD // 2, 1)
    assert probe is not None and probe.buffers
    with probe:
        offset = probe.buffers[0].start_offset
    cold_reads = read_ahead.cold_reads
    msg = await read_ahead.read_message(offset)
    assert msg is not None and bytes(msg.body) == BODIES[COLD // 2]
    assert read_ahead.cold_reads == cold_reads + 1
    again = await read_ahead.read_message(offset)
    assert again is not None and again.queue_offset == COLD // 2
    assert read_ahead.cold_reads == cold_reads + 1  # in memory now: no thread
    assert await read_ahead.read_message(store.max_phy_offset) is None


async def test_a_pull_of_one_slice_per_record_out_of_memory_is_read_first(tmp_path: Path) -> None:
    """The per-record scan (a pull across files, say) holds a slice per record; back to
    back ones are asked about as one range, and all are read before the reply."""
    if not page_ops.populate_supported():
        pytest.skip("no MADV_POPULATE_READ here: pulls read as before")
    store = await _restarted_cold(tmp_path, make_config(tmp_path))
    try:
        queue = store.cq_table.get(TOPIC, 0)
        assert queue is not None
        units = queue.get_units(0, 32)
        assert units is not None
        with units:
            per_record = store._getter._scan(units, 32, None, None)
        with per_record:
            assert len(per_record.buffers) == 32 and not in_memory(per_record)
            pending = store.read_ahead.fault_in(per_record)
            assert pending is not None
            await pending
            assert in_memory(per_record) and store.read_ahead.cold_reads == 1
            assert bodies(per_record) == BODIES[:32]
    finally:
        await store.shutdown()


async def test_a_shut_store_reads_nothing_ahead_and_finds_nothing(tmp_path: Path) -> None:
    store = await open_store(make_config(tmp_path))
    offset = (await put_ok(store, inner(b"x" * 100))).physical_offset
    await dispatched(store)
    read_ahead = store.read_ahead
    assert await read_ahead.read_message(offset) is not None
    await store.shutdown()
    assert read_ahead.fault_in_record(offset) is None  # its file is shut: not touched
    assert read_ahead.fault_in_commit_log(offset, 1024) is None
    assert await read_ahead.read_message(offset) is None
