"""A durable timer for messages with an arbitrary delivery time (RocketMQ 5's
``TIMER_DELIVER_MS``; its timer store in spirit): a DELAY message waits in the system
topic ``rmq_sys_wheel_timer`` and is stored in its real topic and queue once its time
has come, never earlier.

Owns: parking a message (its real topic and queue kept in ``REAL_TOPIC`` /
``REAL_QID``, as 4.x's delay levels do), the in-memory heap of what is pending, the
delivery step, and the progress file ``config/timerProgress.json``: the timer queue's
watermark (every offset below it was delivered) and the delivered offsets above it,
written atomically (``ConfigManager``) after deliveries. A start scans the timer queue
from the watermark and re-arms whatever was not delivered; a crash between a delivery
and the next progress write can deliver that message twice (at least once), never
lose it, never deliver it early.

A remoting producer's timed message (``broker.timed_message``) takes the same path
as a gRPC DELAY message.

Must not: hold gRPC or request logic (the proxy and the send path call ``schedule``).
"""

from __future__ import annotations

import asyncio
import heapq
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from aiorocketmq.broker.config_manager import ConfigManager, config_file_path
from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.stored_copy import inner_from_stored, join_properties
from aiorocketmq.broker.timed_message import (
    PROPERTY_TIMER_DELIVER_MS,
    TIMER_TOPIC,
    deliver_time_ms,
)
from aiorocketmq.common.constants import PERM_READ, PERM_WRITE
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.message_codec import decode_record
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.runtime.lifecycle import Service
from aiorocketmq.store.inner_message import MessageExtBrokerInner
from aiorocketmq.store.results import PutMessageResult

__all__ = ["PROPERTY_TIMER_DELIVER_MS", "TIMER_TOPIC", "TimerMessageService"]

log = logging.getLogger(__name__)

PROGRESS_FILE: Final = "timerProgress.json"
_TIMER_GROUP: Final = "CID_RMQ_SYS_TIMER"
_READ_BATCH: Final = 256
_RETRY_MS: Final = 1_000
_C = MessageConst


class _Progress(ConfigManager[tuple[int, set[int]]]):
    """``timerProgress.json``: watermark and delivered offsets above it."""

    def __init__(self, path: Path, executor: BlockingExecutor) -> None:
        super().__init__(path, executor)
        self.watermark = 0
        self.delivered: set[int] = set()

    def encode(self, pretty: bool = False) -> str:
        doc = {"watermark": self.watermark, "delivered": sorted(self.delivered)}
        return json.dumps(doc, indent=2 if pretty else None)

    def parse(self, text: str) -> tuple[int, set[int]]:
        doc = json.loads(text)
        return int(doc["watermark"]), {int(o) for o in doc["delivered"]}

    def apply(self, table: tuple[int, set[int]]) -> None:
        self.watermark, self.delivered = table

    def mark(self, offset: int) -> None:
        self.delivered.add(offset)
        while self.watermark in self.delivered:
            self.delivered.discard(self.watermark)
            self.watermark += 1


class TimerMessageService(Service):
    """Delivers parked messages at their time.

    Args:
        ctx: the broker's parts.
    """

    def __init__(self, ctx: BrokerContext) -> None:
        super().__init__("timer")
        self._ctx = ctx
        self._executor = BlockingExecutor("timer-progress", max_workers=1)
        self._progress = _Progress(
            config_file_path(ctx.store_config.root_dir, PROGRESS_FILE), self._executor
        )
        self._heap: list[tuple[int, int]] = []
        self._wake = asyncio.Event()
        self.delivered = 0

    @property
    def pending(self) -> int:
        """Messages parked and not delivered yet."""
        return len(self._heap)

    async def on_start(self) -> None:
        """Load the progress, re-arm what the timer queue still holds, deliver (a
        slave does nothing: its master delivers, and the store refuses its puts)."""
        ctx = self._ctx
        if ctx.is_slave:
            return
        await self._progress.load()
        store = ctx.store
        await store.dispatcher.wait_dispatched(store.max_phy_offset)
        self._progress.watermark = max(
            self._progress.watermark, store.get_min_offset_in_queue(TIMER_TOPIC, 0)
        )
        for offset, deliver_ms in self._scan(self._progress.watermark):
            if offset not in self._progress.delivered:
                heapq.heappush(self._heap, (deliver_ms, offset))
        log.info("timer started pending=%d watermark=%d", len(self._heap), self._progress.watermark)
        self.spawn(self._deliver_loop(), name="timer-deliver")

    async def on_shutdown(self) -> None:
        """Write the progress."""
        if not self._ctx.is_slave:
            await self._progress.flush()
        await self._executor.shutdown()

    def due_ms(self, props: Mapping[str, str], topic: str, now_ms: int) -> int | None:
        """``deliver_time_ms`` (the send path's view of this service)."""
        return deliver_time_ms(props, topic, now_ms)

    def _scan(self, start: int) -> list[tuple[int, int]]:
        """``(queue offset, deliver ms)`` of every parked message from ``start`` on."""
        store = self._ctx.store
        out: list[tuple[int, int]] = []
        pos, end = start, store.get_max_offset_in_queue(TIMER_TOPIC, 0)
        while pos < end:
            result = store.get_message(_TIMER_GROUP, TIMER_TOPIC, 0, pos, _READ_BATCH)
            if result is None:
                break
            try:
                for view, offset in zip(result.messages, result.message_queue_offsets, strict=True):
                    try:
                        props = decode_record(view).properties
                        out.append((offset, int(props.get(PROPERTY_TIMER_DELIVER_MS, "0"))))
                    except (RemoteProtocolError, ValueError) as exc:
                        log.error("timer: unreadable parked message at %d: %s", offset, exc)
            finally:
                result.release()
            if result.next_begin_offset <= pos:
                break
            pos = result.next_begin_offset
        return out

    async def schedule(self, msg: MessageExtBrokerInner, deliver_ms: int) -> PutMessageResult:
        """Park ``msg`` until ``deliver_ms`` (the put's result is the client's answer)."""
        topics = self._ctx.topics
        if topics.select_topic_config(TIMER_TOPIC) is None:  # made on first use
            topics.update_topic_config(TopicConfig(TIMER_TOPIC, 1, 1, PERM_READ | PERM_WRITE))
        props = msg.properties
        props[_C.PROPERTY_REAL_TOPIC] = msg.topic
        props[_C.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        props[PROPERTY_TIMER_DELIVER_MS] = str(deliver_ms)
        msg.topic, msg.queue_id = TIMER_TOPIC, 0
        msg.properties_string = join_properties(props)
        result = await self._ctx.store.put_message(msg)
        if result.ok:
            heapq.heappush(self._heap, (deliver_ms, result.queue_offset))
            self._wake.set()
        return result

    async def _deliver_loop(self) -> None:
        clock = self._ctx.clock
        while not self.stopping.is_set():
            self._wake.clear()
            now = clock.now_ms()
            delivered = False
            while self._heap and self._heap[0][0] <= now:
                _deliver_ms, offset = heapq.heappop(self._heap)
                if await self._deliver(offset):
                    delivered = True
                else:  # the store refused: try again a little later, never earlier
                    heapq.heappush(self._heap, (now + _RETRY_MS, offset))
                    break
            if delivered:
                self._progress.request_persist()
            wait_s = (self._heap[0][0] - now) / 1000 if self._heap else 1.0
            try:
                async with asyncio.timeout(min(max(wait_s, 0.001), 1.0)):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _deliver(self, offset: int) -> bool:
        store = self._ctx.store
        # Due after up to days: read in a thread first when it left memory.
        parked = await store.read_ahead.read_message(
            store.get_commit_log_offset_in_queue(TIMER_TOPIC, 0, offset)
        )
        if parked is None or parked.topic != TIMER_TOPIC or parked.queue_offset != offset:
            log.error("timer: parked message at %d is gone", offset)
            self._progress.mark(offset)
            return True
        result = await store.put_message(_real_message(parked, self._ctx.store_host))
        if not result.ok:
            log.warning("timer: delivery of %d refused: %s", offset, result.status.name)
            return False
        self._progress.mark(offset)
        self.delivered += 1
        return True


def _real_message(parked: MessageExt, store_host: tuple[str, int]) -> MessageExtBrokerInner:
    props = dict(parked.properties)
    topic = props.pop(_C.PROPERTY_REAL_TOPIC, parked.topic)
    queue_id = int(props.pop(_C.PROPERTY_REAL_QUEUE_ID, "0"))
    return inner_from_stored(
        parked, topic=topic, queue_id=queue_id, properties=props, store_host=store_host
    )
