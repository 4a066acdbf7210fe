"""ScheduleMessageService on a real store and server: on time, in order, across restarts."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.processors.admin import AdminProcessor
from aiorocketmq.broker.processors.send import SendProcessor
from aiorocketmq.broker.processors.send_back import SendBackProcessor
from aiorocketmq.broker.schedule import (
    SHUTDOWN_GRACE_S,
    ScheduleMessageService,
    correct_deliver_timestamp,
    message_timeup,
)
from aiorocketmq.common.admin_bodies import DelayOffsetSerializeWrapper
from aiorocketmq.common.constants import RMQ_SYS_SCHEDULE_TOPIC
from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.message_codec import decode_pull_body
from aiorocketmq.common.msg_id import decode_offset_msg_id
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable
from aiorocketmq.runtime import BlockingExecutor
from aiorocketmq.store.message_store import MessageStore
from tests.support.wait import wait_until
from tests.unit.broker.broker_support import GROUP, TOPIC, Harness, harness, pull_request
from tests.unit.broker.processor_support import send_request
from tests.unit.broker.test_send_back import back_request
from tests.unit.store.store_support import dispatched

C = MessageConst


@contextlib.asynccontextmanager
async def scheduled(
    tmp_path: Path,
    executor: BlockingExecutor,
    *,
    levels: str = "1s 2s",
    store: dict[str, Any] | None = None,
    start: bool = True,
    **service_kwargs: Any,
) -> AsyncIterator[tuple[Harness, ScheduleMessageService]]:
    """The shared harness (send, send-back, admin) plus a schedule service on its store."""
    holder: list[ScheduleMessageService] = []

    def delay_offsets() -> str:
        # The service is made after the harness registers the processors.
        return holder[0].encode()

    def register(ctx: BrokerContext, table: ProcessorTable) -> None:
        SendProcessor(ctx).register(table)
        SendBackProcessor(ctx).register(table)
        AdminProcessor(ctx, delay_offsets=delay_offsets).register(table)

    store_cfg = {"message_delay_level": levels, **(store or {})}
    async with harness(tmp_path, store=store_cfg, extra=register) as h:
        service = ScheduleMessageService(h.ctx.store, executor, **service_kwargs)
        holder.append(service)
        try:
            if start:
                await service.start()
            yield h, service
        finally:
            await service.shutdown()


def _delayed(level: int, tags: str = "TagA") -> str:
    return f"TAGS\x01{tags}\x02DELAY\x01{level}\x02WAIT\x01true\x02"


async def _send(h: Harness, body: bytes, level: int) -> MessageExt:
    """Send one delayed message; the stored (schedule-topic) record."""
    reply = await h.invoke(send_request(body, properties=_delayed(level)))
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    msg = h.ctx.store.look_message_by_offset(decode_offset_msg_id(reply.ext_fields["msgId"])[2])
    assert msg is not None and msg.topic == RMQ_SYS_SCHEDULE_TOPIC
    return msg


def _queue_messages(store: MessageStore, topic: str, queue_id: int = 0) -> list[MessageExt]:
    """Every message of a queue, in queue order."""
    queue = store.cq_table.get(topic, queue_id)
    if queue is None:
        return []
    out = []
    for offset in range(queue.min_offset, queue.max_offset):
        unit = queue.get_unit(offset)
        assert unit is not None
        msg = store.look_message_by_offset(unit[0])
        assert msg is not None
        out.append(msg)
    return out


def _count_is(store: MessageStore, topic: str, n: int) -> Callable[[], bool]:
    return lambda: store.get_max_offset_in_queue(topic, 0) >= n


async def test_level_1_is_pulled_from_the_real_topic_after_1s_within_1_5s(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    # Java's timings: first pass 1 s after start, then every 100 ms.
    async with scheduled(tmp_path, executor) as (h, service):
        pull = asyncio.ensure_future(h.invoke(pull_request(0, suspend_ms=5_000), 6_000))
        await wait_until(lambda: h.hold.held_count == 1, what="pull held")
        sent_at = time.monotonic()
        stored = await _send(h, b"late", 1)
        reply = await pull
        elapsed_s = time.monotonic() - sent_at
        assert reply.code == ResponseCode.SUCCESS
        [record] = decode_pull_body(reply.body)
        assert record.topic == TOPIC and record.body == b"late"
        # Never early: the store clock (ms) says at least the level's delay passed.
        assert record.store_timestamp - stored.store_timestamp >= 1_000
        assert 0.999 <= elapsed_s <= 1.5, elapsed_s
        props = record.properties
        assert props[C.PROPERTY_REAL_TOPIC] == TOPIC and props[C.PROPERTY_REAL_QUEUE_ID] == "0"
        # Java serialises the properties before clearing DELAY: the record keeps it.
        assert props[C.PROPERTY_DELAY_TIME_LEVEL] == "1"
        assert props[C.PROPERTY_TAGS] == "TagA"
        assert record.born_timestamp == stored.born_timestamp
        assert record.born_host == stored.born_host
        assert service.delivered == 1
        assert service.encode() == '{"offsetTable":{1:1}}'


async def test_levels_deliver_in_order_and_never_early(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    async with scheduled(tmp_path, executor, first_delay_ms=0) as (h, service):
        sent = [await _send(h, body, level) for body, level in ((b"A", 2), (b"B", 1), (b"C", 2))]
        sent.append(await _send(h, b"D", 1))
        await wait_until(_count_is(h.ctx.store, TOPIC, 4), timeout=5, what="4 delivered")
        delivered = _queue_messages(h.ctx.store, TOPIC)
        # Level 1 (1 s) before level 2 (2 s); each level in store order.
        assert [m.body for m in delivered] == [b"B", b"D", b"A", b"C"]
        by_body = {m.body: m for m in sent}
        for msg in delivered:
            level = int(by_body[msg.body].properties[C.PROPERTY_DELAY_TIME_LEVEL])
            gap_ms = msg.store_timestamp - by_body[msg.body].store_timestamp
            assert level * 1_000 <= gap_ms <= level * 1_000 + 500, (msg.body, gap_ms)
        assert service.offsets.offsets == {1: 2, 2: 2}
        # GET_BROKER_RUNTIME_INFO's keys: "<delivered offset>,<queue max>".
        assert service.running_stats() == {
            "scheduleMessageOffset_1": "2,2",
            "scheduleMessageOffset_2": "2,2",
        }


async def test_idle_levels_park_and_a_later_message_is_still_delivered_on_time(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    """Levels with nothing to deliver wait for the watcher instead of passing every
    100 ms; a unit dispatched later wakes its level within a watch, and shutdown
    releases parked levels at once (not after the grace period)."""
    async with scheduled(tmp_path, executor, first_delay_ms=0) as (h, service):
        await wait_until(lambda: set(service.parked) == {1, 2}, timeout=5, what="both parked")
        events = service.parked
        watcher = service.watcher
        assert watcher is not None
        runs = watcher.runs
        await wait_until(lambda: watcher.runs >= runs + 3, timeout=5, what="3 watches")
        assert service.parked == events  # the same waits: no level ran a pass meanwhile
        stored = await _send(h, b"later", 1)
        await wait_until(_count_is(h.ctx.store, TOPIC, 1), timeout=5, what="delivered")
        [delivered] = _queue_messages(h.ctx.store, TOPIC)
        gap_ms = delivered.store_timestamp - stored.store_timestamp
        assert 1_000 <= gap_ms <= 1_500, gap_ms
        await wait_until(lambda: set(service.parked) == {1, 2}, timeout=5, what="parked again")
        started = time.monotonic()
        await service.shutdown()
        assert time.monotonic() - started < SHUTDOWN_GRACE_S / 2
        assert service.encode() == '{"offsetTable":{1:1}}'


async def test_offsets_persist_and_reload_across_a_restart(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    quick: dict[str, Any] = {"first_delay_ms": 0, "first_persist_delay_ms": 20}
    store = {"flush_delay_offset_interval": 20}
    async with scheduled(tmp_path, executor, store=store, **quick) as (h, service):
        path = h.ctx.store_config.delay_offset_path
        await _send(h, b"m1", 1)
        await _send(h, b"m2", 1)
        await wait_until(_count_is(h.ctx.store, TOPIC, 2), timeout=3, what="2 delivered")
        # The periodic persist writes the fastjson file form.
        await wait_until(
            lambda: path.exists() and "{1:2" in path.read_text(), what="delayOffset.json"
        )
        reply = await h.invoke(RemotingCommand.request(RequestCode.GET_ALL_DELAY_OFFSET, {}))
        assert reply.code == ResponseCode.SUCCESS
        assert DelayOffsetSerializeWrapper.decode(reply.body).offset_table == {1: 2}
        pending = await _send(h, b"pending", 2)
    # Shut down before the 2 s message was due: its level has no offset yet.
    assert DelayOffsetSerializeWrapper.decode(path.read_text()).offset_table == {1: 2}
    async with scheduled(tmp_path, executor, store=store, **quick) as (h, service):
        assert service.offsets.offsets == {1: 2}
        assert h.ctx.store.get_max_offset_in_queue(TOPIC, 0) == 2
        await _send(h, b"marker", 1)
        await wait_until(_count_is(h.ctx.store, TOPIC, 4), timeout=4, what="4 delivered")
        # Level 1's units are delivered in order: had the offsets been lost, m1 and m2
        # would have come again before the marker.
        await dispatched(h.ctx.store)
        bodies = sorted(bytes(m.body) for m in _queue_messages(h.ctx.store, TOPIC))
        assert bodies == [b"m1", b"m2", b"marker", b"pending"]
        late = next(m for m in _queue_messages(h.ctx.store, TOPIC) if m.body == b"pending")
        assert late.store_timestamp - pending.store_timestamp >= 2_000
        assert service.offsets.offsets == {1: 3, 2: 1}
    assert DelayOffsetSerializeWrapper.decode(path.read_text()).offset_table == {1: 3, 2: 1}


async def test_loaded_offsets_are_clamped_into_the_queue(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    async with scheduled(tmp_path, executor, start=False) as (h, service):
        await _send(h, b"x", 1)
        await _send(h, b"y", 1)
        await dispatched(h.ctx.store)
        path = h.ctx.store_config.delay_offset_path
        path.parent.mkdir(parents=True, exist_ok=True)
        # Level 2's queue does not exist: Java leaves its offset alone.
        path.write_text('{"offsetTable":{1:50,2:7}}')
        assert await service.load()
        assert service.offsets.offsets == {1: 2, 2: 7}


async def test_slave_delivers_nothing_and_keeps_the_file(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    root = tmp_path / "store"
    (root / "config").mkdir(parents=True)
    (root / "config" / "delayOffset.json").write_text('{"offsetTable":{1:4}}')
    store = {"broker_role": "SLAVE"}
    async with scheduled(tmp_path, executor, store=store) as (h, service):
        assert not service.delivering
        assert service.tasks == frozenset()
        assert service.encode() == '{"offsetTable":{1:4}}'
        service.apply_master_offsets('{"offsetTable":{1:6,3:2}}')
        assert service.encode() == '{"offsetTable":{1:6,3:2}}'
        reply = await h.invoke(RemotingCommand.request(RequestCode.GET_ALL_DELAY_OFFSET, {}))
        assert reply.body == b'{"offsetTable":{1:6,3:2}}'
    # A slave's shutdown does not overwrite the file (the master's copy).
    assert (root / "config" / "delayOffset.json").read_text() == '{"offsetTable":{1:4}}'


async def test_send_back_comes_back_on_the_retry_topic(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    # Level 3 (the first retry's) made 1 s.
    async with scheduled(tmp_path, executor, levels="1s 1s 1s", first_delay_ms=0) as (h, _):
        reply = await h.invoke(send_request(b"fail-me"))
        assert reply.code == ResponseCode.SUCCESS
        offset = decode_offset_msg_id(reply.ext_fields["msgId"])[2]
        back = await h.invoke(back_request(offset))
        assert back.code == ResponseCode.SUCCESS, back.remark
        retry = f"%RETRY%{GROUP}"
        await wait_until(_count_is(h.ctx.store, retry, 1), timeout=3, what="retry delivered")
        [msg] = _queue_messages(h.ctx.store, retry)
        original = h.ctx.store.look_message_by_offset(offset)
        assert original is not None
        assert msg.body == b"fail-me" and msg.reconsume_times == 1
        assert msg.properties[C.PROPERTY_RETRY_TOPIC] == TOPIC
        assert msg.properties[C.PROPERTY_ORIGIN_MESSAGE_ID] == original.msg_id
        [scheduled_msg] = _queue_messages(h.ctx.store, RMQ_SYS_SCHEDULE_TOPIC, 2)
        assert msg.store_timestamp - scheduled_msg.store_timestamp >= 1_000


def test_message_timeup_and_deliver_time_correction() -> None:
    stored = MessageExt(
        topic=RMQ_SYS_SCHEDULE_TOPIC,
        body=b"b",
        flag=3,
        properties={"DELAY": "2", "REAL_TOPIC": "T", "REAL_QID": "5", "TAGS": "x", "WAIT": "true"},
        queue_id=1,
        sys_flag=0,
        born_timestamp=11,
        born_host=("10.0.0.1", 5),
        store_host=("10.0.0.2", 6),
        reconsume_times=2,
    )
    inner = message_timeup(stored)
    assert inner is not None
    assert (inner.topic, inner.queue_id, inner.flag, inner.reconsume_times) == ("T", 5, 3, 2)
    assert (inner.born_host, inner.store_host, inner.born_timestamp) == (
        ("10.0.0.1", 5),
        ("10.0.0.2", 6),
        11,
    )
    assert "DELAY" not in inner.properties and inner.properties["WAIT"] == "false"
    assert inner.properties_string is not None and "DELAY\x012" in inner.properties_string
    assert not inner.wait_store_msg_ok
    stored.properties.pop("REAL_QID")
    assert message_timeup(stored) is None
    # Due time more than a level's delay ahead: the clock moved back, deliver now.
    assert correct_deliver_timestamp(1_000, 5_000, 1_000) == 1_000
    assert correct_deliver_timestamp(1_000, 2_000, 1_000) == 2_000
