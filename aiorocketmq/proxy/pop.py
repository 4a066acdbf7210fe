"""POP-style consumption for gRPC consumers: receive, ack, change invisible time,
revive, DLQ, FIFO blocking (RocketMQ 5's ``PopMessageProcessor``,
``AckMessageProcessor``, ``ChangeInvisibleTimeProcessor``, ``PopReviveService`` and
``ConsumerOrderInfoManager``; specs/grpc-v5.md §7).

How it works:

* A **receive** reads the group's queues of the topic on this broker (all of them,
  whatever queue the client named, plus the group's pop-retry topic
  ``%RETRY%<group>_<topic>``), from the group's consume offset. For a normal group
  the offset moves past what was read at once, and a checkpoint (CK) is written to
  the revive log *before* the messages are handed out. With nothing to read it
  waits (long polling) for an arrival on those topics, or the poll time.
* An **ack** marks offsets of a CK done (an ack record); a CK with nothing pending
  is dropped. **ChangeInvisibleDuration** moves one offset to a new CK with a new
  deadline and a new handle (normal), or re-times the whole orderly batch.
* **Revive**: when a normal CK's deadline passes, every pending offset is copied
  into the pop-retry topic with ``reconsumeTimes + 1`` (so it comes back with its
  delivery attempt increased), or to ``%DLQ%<group>`` once the group's max
  attempts (``retryMaxTimes + 1``) are used; then an ack record closes the CK.
* **Orderly** (FIFO) groups (``consumeMessageOrderly``): one batch in flight per
  queue, hence per message group (a group's messages share a queue); the offset
  moves only when the whole batch is acked; an expired batch is delivered again,
  same offsets, attempt + 1, until max attempts, then to the DLQ.
* **Restart**: the revive log is replayed from the revive position; CKs come back
  with their deadlines and acks, consume offsets are raised past every replayed
  normal CK. Nothing received and not acked is lost; a crash between a revive copy
  and its ack record may deliver a message once more (at least once).

Must not: block the loop (store reads are in-memory mmap slices, writes go through
the store's put path).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import random
from dataclasses import dataclass
from typing import Any, Final

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.common.constants import is_readable
from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.message_codec import decode_record
from aiorocketmq.common.tag_hash import tags_code
from aiorocketmq.proxy.pop_log import ReviveLog
from aiorocketmq.proxy.pop_records import (
    ACK_TAG,
    CK_TAG,
    Checkpoint,
    ReceiptHandle,
    ack_body,
    new_ck_id,
)
from aiorocketmq.proxy.pop_requeue import Requeue, pop_retry_topic
from aiorocketmq.proxy.status import ProxyError
from aiorocketmq.proxy.v2 import definition_pb2 as pb
from aiorocketmq.runtime.lifecycle import Service

__all__ = ["PopRequest", "PopService", "Popped", "TagFilter", "pop_retry_topic"]

log = logging.getLogger(__name__)

_RETRY_FIRST_PROBABILITY: Final = 0.2  # popFromRetryProbability
_READ_CHUNK: Final = 32
#: Passes of a pop's read that may wait for what is not in memory; the next one reads
#: whatever it finds (pages evicted again meanwhile fault on the loop, as before).
_COLD_READ_TRIES: Final = 2
_RETRY_MAX_TIMES: Final = 16  # SubscriptionGroupConfig's default
_QueueKey = tuple[str, str, int]  # group, stored topic, queue id


@dataclass(frozen=True, slots=True)
class TagFilter:
    """A TAG filter expression: ``*`` (or empty) = all, else ``a || b``."""

    tags: frozenset[str] | None

    @classmethod
    def parse(cls, expression: str) -> TagFilter:
        """Read an expression; ``ProxyError(ILLEGAL_FILTER_EXPRESSION)`` when blank parts."""
        text = expression.strip()
        if not text or text == "*":
            return cls(None)
        tags = frozenset(t.strip() for t in text.split("||"))
        if "" in tags:
            raise ProxyError(pb.Code.ILLEGAL_FILTER_EXPRESSION, f"bad tag expression {text!r}")
        return cls(tags)

    def matches(self, tag: str | None) -> bool:
        """Whether a message with ``tag`` passes."""
        return self.tags is None or (tag is not None and tag in self.tags)

    @property
    def codes(self) -> set[int] | None:
        """tagsCodes for the store's queue filter."""
        return None if self.tags is None else {tags_code(t) for t in self.tags}


@dataclass(frozen=True, slots=True)
class PopRequest:
    """What one receive asks for."""

    group: str
    topic: str
    batch: int
    invisible_ms: int
    tag_filter: TagFilter
    orderly: bool


@dataclass(slots=True)
class Popped:
    """One received message, its handle and its delivery attempt."""

    message: MessageExt
    handle: ReceiptHandle
    attempt: int


class PopService(Service):
    """POP state of one broker.

    Args:
        ctx: the broker's parts.
    """

    def __init__(self, ctx: BrokerContext) -> None:
        super().__init__("pop")
        self._ctx = ctx
        self.log = ReviveLog(ctx)
        self._requeue = Requeue(ctx)
        self._cks: dict[str, Checkpoint] = {}
        self._orderly: dict[_QueueKey, str] = {}
        self._heap: list[tuple[int, str]] = []
        self._wake = asyncio.Event()
        self._arrivals: dict[str, set[asyncio.Event]] = {}
        self._random = random.Random()
        self.revived = 0
        self.dead_lettered = 0

    def max_attempts(self, group: str) -> int:
        """Deliveries before the DLQ: the group's ``retryMaxTimes + 1`` (17 by default)."""
        config = self._ctx.groups.find_subscription_group_config(group)
        return (config.retry_max_times if config is not None else _RETRY_MAX_TIMES) + 1

    # -- lifecycle -----------------------------------------------------------------------

    async def on_start(self) -> None:
        """Replay the revive log, then revive in the background."""
        self.log.ensure_topic()
        count = await self.log.replay(self._apply_record)
        for ck in self._cks.values():
            heapq.heappush(self._heap, (ck.deadline, ck.ck_id))
        log.info("pop state replayed records=%d in_flight=%d", count, len(self._cks))
        self._ctx.store.add_arrival_listener(self._on_arrival)
        self.spawn(self._revive_loop(), name="pop-revive")

    async def on_shutdown(self) -> None:
        """Commit the revive position (flushed with the consumer offsets)."""
        self._ctx.store.dispatcher.remove_arrival_listener(self._on_arrival)
        self._commit_position()
        for events in self._arrivals.values():
            for event in events:
                event.set()

    def _apply_record(self, tag: str, doc: dict[str, Any], offset: int) -> None:
        try:
            if tag == CK_TAG:
                self._replay_ck(Checkpoint.from_doc(doc), offset)
            elif tag == ACK_TAG:
                ck = self._cks.get(str(doc["id"]))
                if ck is not None:
                    ck.done.update(int(o) for o in doc["o"])
                    if not ck.pending:
                        self._finish(ck)
        except (KeyError, TypeError, ValueError) as exc:
            log.error("revive log: bad %s record at offset %d: %s", tag, offset, exc)

    def _replay_ck(self, ck: Checkpoint, offset: int) -> None:
        ck.record_offset = offset
        old = self._cks.get(ck.ck_id)
        if old is not None:  # an orderly batch re-timed: keep what was done since
            ck.done |= old.done
        self._track(ck)
        if not ck.orderly and ck.offsets:
            ctx = self._ctx
            current = ctx.offsets.query_offset(ck.group, ck.topic, ck.queue_id)
            if current < ck.offsets[-1] + 1:
                ctx.offsets.commit_offset(
                    "proxy", ck.group, ck.topic, ck.queue_id, ck.offsets[-1] + 1
                )
        if not ck.pending:
            self._finish(ck)

    # -- state ---------------------------------------------------------------------------

    def _track(self, ck: Checkpoint) -> None:
        self._cks[ck.ck_id] = ck
        if ck.orderly:
            key = (ck.group, ck.topic, ck.queue_id)
            previous = self._orderly.get(key)
            if previous is not None and previous != ck.ck_id:
                self._cks.pop(previous, None)  # superseded by a redelivery of the batch
            self._orderly[key] = ck.ck_id

    def _finish(self, ck: Checkpoint) -> None:
        """A CK with nothing pending: forget it; an orderly batch moves the offset."""
        self._cks.pop(ck.ck_id, None)
        if ck.orderly:
            key = (ck.group, ck.topic, ck.queue_id)
            if self._orderly.get(key) == ck.ck_id:
                del self._orderly[key]
            ctx = self._ctx
            ctx.offsets.commit_offset("proxy", ck.group, ck.topic, ck.queue_id, ck.next_offset)
            self._notify(ck.topic)

    def _commit_position(self) -> None:
        live = [ck.record_offset for ck in self._cks.values() if ck.record_offset >= 0]
        self.log.commit(min(live) if live else self.log.end)

    async def _write_ck(self, ck: Checkpoint) -> None:
        # Tracked before the write awaits: a receive running meanwhile must already see
        # an orderly batch blocking its queue.
        self._track(ck)
        try:
            ck.record_offset = await self.log.write(CK_TAG, ck.to_body())
        except ProxyError:
            self._cks.pop(ck.ck_id, None)
            key = (ck.group, ck.topic, ck.queue_id)
            if self._orderly.get(key) == ck.ck_id:
                del self._orderly[key]
            raise
        heapq.heappush(self._heap, (ck.deadline, ck.ck_id))
        self._wake.set()

    async def _write_done(self, ck: Checkpoint, offsets: list[int]) -> None:
        await self.log.write(ACK_TAG, ack_body(ck.ck_id, offsets))
        ck.done.update(offsets)
        if not ck.pending:
            self._finish(ck)

    @property
    def in_flight(self) -> int:
        """CKs not done (for tests and runtime info)."""
        return len(self._cks)

    # -- long polling --------------------------------------------------------------------

    def _on_arrival(self, topic: str, *_: object) -> None:
        self._notify(topic)

    def _notify(self, topic: str) -> None:
        for event in self._arrivals.get(topic, ()):
            event.set()

    async def _wait_arrival(self, topics: list[str], timeout_s: float) -> None:
        event = asyncio.Event()
        for topic in topics:
            self._arrivals.setdefault(topic, set()).add(event)
        try:
            async with asyncio.timeout(timeout_s):
                await event.wait()
        except TimeoutError:
            pass
        finally:
            for topic in topics:
                waiters = self._arrivals.get(topic)
                if waiters is not None:
                    waiters.discard(event)
                    if not waiters:
                        del self._arrivals[topic]

    # -- receive -------------------------------------------------------------------------

    async def receive(self, req: PopRequest, poll_ms: int) -> list[Popped]:
        """Up to ``req.batch`` messages, waiting up to ``poll_ms`` for some to arrive."""
        clock = self._ctx.clock
        deadline = clock.now_ms() + poll_ms
        retry = pop_retry_topic(req.group, req.topic)
        while True:
            popped = await self._pop_once(req)
            remaining = deadline - clock.now_ms()
            if popped or remaining <= 0 or not self.running:
                return popped
            await self._wait_arrival([req.topic, retry], remaining / 1000)

    def _queues(self, group: str, topic: str) -> list[tuple[str, int]]:
        """(stored topic, queue) to read, retry topic first one time in five."""
        topics = self._ctx.topics
        config = topics.select_topic_config(topic)
        if config is None:
            raise ProxyError(pb.Code.TOPIC_NOT_FOUND, f"topic {topic} not found")
        if not is_readable(config.perm):
            raise ProxyError(pb.Code.FORBIDDEN, f"topic {topic} is not readable")
        nums = config.read_queue_nums
        start = self._random.randrange(nums) if nums else 0
        normal = [(topic, (start + i) % nums) for i in range(nums)]
        retry_config = topics.select_topic_config(pop_retry_topic(group, topic))
        if retry_config is None:
            return normal
        retry = [(retry_config.topic_name, q) for q in range(retry_config.read_queue_nums)]
        if self._random.random() < _RETRY_FIRST_PROBABILITY:
            return retry + normal
        return normal + retry

    async def _pop_once(self, req: PopRequest) -> list[Popped]:
        popped: list[Popped] = []
        for stored_topic, queue_id in self._queues(req.group, req.topic):
            want = req.batch - len(popped)
            if want <= 0:
                break
            if req.orderly:
                popped.extend(await self._pop_orderly(req, stored_topic, queue_id, want))
            else:
                popped.extend(await self._pop_queue(req, stored_topic, queue_id, want))
        return popped

    def _start_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The group's offset; a new group starts at the queue's start when it never
        lost a message (as 4.x answers a new group), else at its end."""
        store = self._ctx.store
        offset = self._ctx.offsets.query_offset(group, topic, queue_id)
        if offset >= 0:
            return offset
        low = store.get_min_offset_in_queue(topic, queue_id)
        return low if low == 0 else store.get_max_offset_in_queue(topic, queue_id)

    async def _read(
        self, req: PopRequest, topic: str, queue_id: int, want: int
    ) -> tuple[list[MessageExt], int, int]:
        """Matching messages from the group's offset on (at most ``want``), where the
        read started and where the next one starts.

        What is not in memory is read in a thread first (``store/read_ahead.py``), and
        then everything again: the last pass reads the offset, the units and the records
        with no await, so the caller commits the next offset before another pop of the
        queue can read the same one.
        """
        store = self._ctx.store
        count = min(want, _READ_CHUNK)
        where = (topic, queue_id)
        for attempt in range(_COLD_READ_TRIES + 1):
            offset = self._start_offset(req.group, topic, queue_id)
            ahead = attempt < _COLD_READ_TRIES  # the last pass reads whatever it finds
            if (
                ahead
                and (units := store.read_ahead.fault_in_units(*where, offset, count)) is not None
            ):
                await units
                continue
            result = store.get_message(
                req.group, *where, offset, count, tag_codes=req.tag_filter.codes
            )
            if result is None or not ahead:
                break
            records = store.read_ahead.fault_in(result)
            if records is None:
                break
            try:
                await records
            finally:
                result.release()
        if result is None:
            return [], offset, offset
        try:
            messages = [decode_record(view).to_message_ext() for view in result.messages]
        finally:
            result.release()
        matched = [m for m in messages if req.tag_filter.matches(m.tags)]
        return matched, offset, max(result.next_begin_offset, offset)

    async def _pop_queue(
        self, req: PopRequest, topic: str, queue_id: int, want: int
    ) -> list[Popped]:
        messages, offset, next_offset = await self._read(req, topic, queue_id, want)
        if next_offset != offset:
            self._ctx.offsets.commit_offset("proxy", req.group, topic, queue_id, next_offset)
        if not messages:
            return []
        ck = Checkpoint(
            new_ck_id(),
            req.group,
            topic,
            queue_id,
            [m.queue_offset for m in messages],
            self._ctx.clock.now_ms(),
            req.invisible_ms,
        )
        await self._write_ck(ck)
        return [Popped(m, ck.handle(m.queue_offset), m.reconsume_times + 1) for m in messages]

    async def _pop_orderly(
        self, req: PopRequest, topic: str, queue_id: int, want: int
    ) -> list[Popped]:
        now = self._ctx.clock.now_ms()
        attempt = 0
        previous_id = self._orderly.get((req.group, topic, queue_id))
        previous = self._cks.get(previous_id) if previous_id else None
        if previous is not None:
            if previous.deadline > now:
                return []  # one batch in flight per queue: the queue is blocked
            attempt = previous.attempt + 1
        messages, offset, next_offset = await self._read(req, topic, queue_id, want)
        if not messages:
            if next_offset != offset:  # only filtered-out messages: skip them
                self._ctx.offsets.commit_offset("proxy", req.group, topic, queue_id, next_offset)
            return []
        ck = Checkpoint(
            new_ck_id(),
            req.group,
            topic,
            queue_id,
            [m.queue_offset for m in messages],
            now,
            req.invisible_ms,
            orderly=True,
            attempt=attempt,
            next_offset=next_offset,
        )
        if previous is not None:
            ck.done = {o for o in previous.done if o in ck.offsets}
        await self._write_ck(ck)
        if previous is not None:
            await self.log.write(ACK_TAG, ack_body(previous.ck_id, previous.offsets))
        return await self._orderly_deliveries(ck, messages)

    async def _orderly_deliveries(self, ck: Checkpoint, messages: list[MessageExt]) -> list[Popped]:
        """The batch's messages still to deliver; those past max attempts go to the DLQ."""
        limit = self.max_attempts(ck.group)
        out: list[Popped] = []
        dead: list[int] = []
        for m in messages:
            if m.queue_offset in ck.done:
                continue
            attempt = m.reconsume_times + 1 + ck.attempt
            if attempt > limit:
                await self._requeue.to_dlq(ck.group, m)
                self.dead_lettered += 1
                dead.append(m.queue_offset)
                continue
            out.append(Popped(m, ck.handle(m.queue_offset), attempt))
        if dead:
            await self._write_done(ck, dead)
        return out

    # -- ack / change invisible / DLQ ----------------------------------------------------

    def _checkpoint(self, group: str, handle_text: str) -> tuple[Checkpoint | None, ReceiptHandle]:
        try:
            handle = ReceiptHandle.parse(handle_text)
        except ValueError as exc:
            raise ProxyError(pb.Code.INVALID_RECEIPT_HANDLE, str(exc)) from None
        ck = self._cks.get(handle.ck_id)
        if ck is not None and (ck.group != group or handle.queue_offset not in ck.offsets):
            raise ProxyError(pb.Code.INVALID_RECEIPT_HANDLE, "receipt handle is not this group's")
        now = self._ctx.clock.now_ms()
        deadline = ck.deadline if ck is not None else handle.pop_time + handle.invisible_ms
        if deadline <= now:
            raise ProxyError(pb.Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
        return ck, handle

    async def ack(self, group: str, handle_text: str) -> None:
        """Mark one received message done.

        A handle already used (acked, or replaced by ChangeInvisibleDuration) is
        INVALID_RECEIPT_HANDLE: the SDKs stop retrying on that code.
        """
        ck, handle = self._checkpoint(group, handle_text)
        if ck is None or handle.queue_offset in ck.done:
            raise ProxyError(pb.Code.INVALID_RECEIPT_HANDLE, "receipt handle was already used")
        await self._write_done(ck, [handle.queue_offset])

    async def change_invisible(self, group: str, handle_text: str, invisible_ms: int) -> str:
        """Give one received message a new invisible time from now; its new handle."""
        ck, handle = self._checkpoint(group, handle_text)
        if ck is None or handle.queue_offset in ck.done:
            raise ProxyError(pb.Code.INVALID_RECEIPT_HANDLE, "message is already acked")
        now = self._ctx.clock.now_ms()
        if ck.orderly:  # the batch is one unit: re-time it (same id, same offsets)
            ck.pop_time, ck.invisible_ms = now, invisible_ms
            await self._write_ck(ck)
            return ck.handle(handle.queue_offset).encode()
        moved = Checkpoint(
            new_ck_id(), group, ck.topic, ck.queue_id, [handle.queue_offset], now, invisible_ms
        )
        await self._write_ck(moved)
        await self._write_done(ck, [handle.queue_offset])
        return moved.handle(handle.queue_offset).encode()

    async def forward_to_dlq(self, group: str, handle_text: str) -> None:
        """Move one received message to ``%DLQ%<group>`` and mark it done."""
        ck, handle = self._checkpoint(group, handle_text)
        if ck is None or handle.queue_offset in ck.done:
            raise ProxyError(pb.Code.INVALID_RECEIPT_HANDLE, "message is already acked")
        message = await self._requeue.look(ck.topic, ck.queue_id, handle.queue_offset)
        if message is None:
            raise ProxyError(pb.Code.INVALID_RECEIPT_HANDLE, "message is no longer stored")
        await self._requeue.to_dlq(group, message)
        self.dead_lettered += 1
        await self._write_done(ck, [handle.queue_offset])

    # -- revive --------------------------------------------------------------------------

    async def _revive_loop(self) -> None:
        clock = self._ctx.clock
        while not self.stopping.is_set():
            self._wake.clear()
            now = clock.now_ms()
            while self._heap and self._heap[0][0] <= now:
                deadline, ck_id = heapq.heappop(self._heap)
                ck = self._cks.get(ck_id)
                if ck is not None and ck.deadline == deadline:
                    await self._revive(ck)
            self._commit_position()
            wait_s = (self._heap[0][0] - now) / 1000 if self._heap else 1.0
            try:
                async with asyncio.timeout(min(max(wait_s, 0.001), 1.0)):
                    await self._wake.wait()
            except TimeoutError:
                pass

    async def _revive(self, ck: Checkpoint) -> None:
        """A CK's deadline passed: re-enqueue what is pending (orderly batches stay
        where they are and are delivered again by the next receive)."""
        if ck.orderly:
            self._notify(ck.topic)
            return
        pending = ck.pending
        limit = self.max_attempts(ck.group)
        try:
            for offset in pending:
                message = await self._requeue.look(ck.topic, ck.queue_id, offset)
                if message is None:
                    log.warning("revive: %s/%d offset %d is gone", ck.topic, ck.queue_id, offset)
                    continue
                if message.reconsume_times + 1 >= limit:
                    await self._requeue.to_dlq(ck.group, message)
                    self.dead_lettered += 1
                else:
                    await self._requeue.to_retry(ck.group, message)
                    self.revived += 1
            await self._write_done(ck, pending)
        except ProxyError as exc:
            # The store refused: try again a little later (the CK stays in flight).
            log.warning("revive of %s failed, retried in 1 s: %s", ck.ck_id, exc.message)
            ck.invisible_ms += 1000
            heapq.heappush(self._heap, (ck.deadline, ck.ck_id))
