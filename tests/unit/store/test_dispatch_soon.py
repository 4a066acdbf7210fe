"""DispatchSoon: puts are dispatched by one callback after their loop iteration's
replies; a real store shows the order (put answered, then its queue unit)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiorocketmq.common.clock import ManualClock
from aiorocketmq.common.message import Message
from aiorocketmq.common.message_codec import encode_batch
from aiorocketmq.store.commit_log import AppendResult, AppendStatus
from aiorocketmq.store.dispatch_soon import SCAN_FROM_PUTS, DispatchSoon
from aiorocketmq.store.inner_message import MessageExtBatch, MessageExtBrokerInner
from aiorocketmq.store.results import PutMessageResult
from tests.unit.store.helpers import BORN_HOST, STORE_HOST
from tests.unit.store.store_support import (
    TOPIC,
    dispatched,
    inner,
    open_store,
    put_ok,
    store_config,
)


def _put(offset: int, properties: str) -> tuple[MessageExtBrokerInner, AppendResult]:
    """A single put's message (its stored properties ``properties``) and append."""
    msg = inner()
    msg.properties_string = properties
    return msg, AppendResult(AppendStatus.PUT_OK, physical_offset=offset, wrote_bytes=1)


def _recorder(calls: list[object]) -> DispatchSoon:
    return DispatchSoon(
        lambda *fields: calls.append((fields[5], fields[4])),  # offset, properties
        lambda: calls.append("scan"),
    )


def test_outside_a_loop_the_dispatch_is_immediate() -> None:
    calls: list[object] = []
    soon = _recorder(calls)
    soon.note_put(*_put(7, "P"))
    soon.note_batch()
    assert calls == [(7, "P"), "scan"]


async def test_one_callback_per_iteration_singles_in_order_then_the_scan() -> None:
    calls: list[object] = []
    soon = _recorder(calls)
    soon.note_put(*_put(1, "a"))
    soon.note_batch()
    soon.note_put(*_put(2, "b"))
    assert calls == []  # nothing inline: the caller's reply goes out first
    await asyncio.sleep(0)
    assert calls == [(1, "a"), (2, "b"), "scan"]
    soon.note_put(*_put(3, "c"))
    await asyncio.sleep(0)
    assert calls[3:] == [(3, "c")]  # a later iteration gets a callback of its own


async def test_many_singles_of_one_iteration_take_one_scan() -> None:
    calls: list[object] = []
    soon = _recorder(calls)
    for offset in range(SCAN_FROM_PUTS - 1):
        soon.note_put(*_put(offset, "p"))
    await asyncio.sleep(0)
    assert calls == [(offset, "p") for offset in range(SCAN_FROM_PUTS - 1)]
    calls.clear()
    for offset in range(SCAN_FROM_PUTS):
        soon.note_put(*_put(offset, "p"))
    soon.note_batch()
    await asyncio.sleep(0)
    assert calls == ["scan"], "one scan for the singles and the batch, nothing twice"


async def test_a_store_dispatches_a_burst_of_singles_by_one_scan(tmp_path: Path) -> None:
    """Pipelined puts: every unit, index key and queue offset as one by one."""
    store = await open_store(store_config(tmp_path), clock=ManualClock())
    try:
        await put_ok(store, inner(b"zero"))
        await dispatched(store)
        count = SCAN_FROM_PUTS * 3
        results = [
            store.put_message_nowait(inner(f"m{i}".encode(), KEYS=f"k{i}", TAGS="t"))
            for i in range(count)
        ]
        assert all(isinstance(r, PutMessageResult) and r.ok for r in results)
        assert store.get_max_offset_in_queue(TOPIC, 0) == 1  # none dispatched yet
        await asyncio.sleep(0)
        assert store.get_max_offset_in_queue(TOPIC, 0) == 1 + count  # in that callback
        await dispatched(store)  # keys too (the first index file is created meanwhile)
        for i, result in enumerate(results):
            assert isinstance(result, PutMessageResult)
            assert store.get_commit_log_offset_in_queue(TOPIC, 0, 1 + i) == result.physical_offset
            found = store.index_service.query_offset(TOPIC, f"k{i}", 10, 0, 2**62)
            assert result.physical_offset in found.phy_offsets
    finally:
        await store.shutdown()


async def test_a_store_answers_the_put_before_dispatching_it(tmp_path: Path) -> None:
    store = await open_store(store_config(tmp_path), clock=ManualClock())
    try:
        await put_ok(store, inner(b"zero"))  # the first put waits for its file
        await dispatched(store)
        single = store.put_message_nowait(inner(b"one", TAGS="a"))
        assert isinstance(single, PutMessageResult) and single.ok
        assert store.get_max_offset_in_queue(TOPIC, 0) == 1  # stored, not yet dispatched
        await asyncio.sleep(0)
        assert store.get_max_offset_in_queue(TOPIC, 0) == 2

        # A batch, and a single behind it in the same iteration: one scan takes both.
        body = encode_batch([Message(TOPIC, b"b1"), Message(TOPIC, b"b2")])
        batch = MessageExtBatch(TOPIC, 0, body, born_host=BORN_HOST, store_host=STORE_HOST)
        put = store.put_messages_nowait(batch)
        after = store.put_message_nowait(inner(b"two"))
        assert isinstance(put, PutMessageResult) and put.ok
        assert isinstance(after, PutMessageResult) and after.ok
        assert store.get_max_offset_in_queue(TOPIC, 0) == 2
        await asyncio.sleep(0)
        assert store.get_max_offset_in_queue(TOPIC, 0) == 5
    finally:
        await store.shutdown()
