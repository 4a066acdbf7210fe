"""ScheduleMessageService: delivers delayed messages from SCHEDULE_TOPIC_XXXX on time.

Owns: RocketMQ 4.9.8's ``store/schedule/ScheduleMessageService`` (specs/store.md
§13.2) and ``delayOffset.json`` (§12), on a master:

* one timer task per delay level (``messageDelayLevel``; level *L* reads queue
  *L-1* of ``SCHEDULE_TOPIC_XXXX``), starting ``first_delay_ms`` (Java: 1 s)
  after start from the level's offset in ``delayOffset.json`` (0 when absent);
* each pass reads the queue's units from that offset. A unit's tagsCode is its
  deliver timestamp (store time + the level's delay, written by the store's
  dispatcher); ``correctDeliverTimestamp`` makes one more than a level's delay
  in the future (a clock moved back) due now. The first unit not yet due ends
  the pass: the next one starts when it falls due, at most ``while_ms`` (Java:
  100 ms) later, so nothing is delivered early;
* a due message is rebuilt as Java's ``messageTimeup``: same body, flag,
  sysFlag, born/store host and time, reconsumeTimes; topic and queue from
  ``REAL_TOPIC`` / ``REAL_QID``; the stored properties string is serialised
  *before* ``DELAY`` is cleared from the map (so the re-put record still carries
  ``DELAY``, ``REAL_TOPIC``, ``REAL_QID``); ``WAIT`` = false. Then it is put; on
  PUT_OK the level's offset becomes the next unit, otherwise the pass retries in
  ``while_ms``. A pass that raises retries in ``period_ms`` (Java: 10 s);
* offsets are persisted every ``flushDelayOffsetInterval`` (after 10 s) and at
  shutdown, as fastjson's ``{"offsetTable":{1:5,2:0}}`` (bare level keys), and
  clamped into each queue's [min, max] when loaded.

Delivery is at least once: a crash between a put and the next persist delivers
the messages since the last persisted offset again, as in Java.

On a SLAVE nothing is delivered and nothing is written: the offsets are loaded
(for GET_ALL_DELAY_OFFSET), and the slave's sync of the master's offsets goes
through ``apply_master_offsets``.

Must not: redirect delayed puts or compute deliver timestamps (the store's put
path and dispatcher do), block the loop (file work runs in the executor), or
deliver a message before its time.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Final

from aiorocketmq.broker.config_manager import ConfigManager
from aiorocketmq.broker.stored_copy import inner_from_stored, join_properties
from aiorocketmq.common import fastjson
from aiorocketmq.common.admin_bodies import DelayOffsetSerializeWrapper
from aiorocketmq.common.clock import Clock
from aiorocketmq.common.constants import (
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
    parse_delay_levels,
)
from aiorocketmq.common.message import MessageExt
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.runtime import BlockingExecutor
from aiorocketmq.runtime.lifecycle import Periodic, Service
from aiorocketmq.store.config import BrokerRole
from aiorocketmq.store.consume_queue import ConsumeQueue
from aiorocketmq.store.inner_message import MessageExtBrokerInner
from aiorocketmq.store.message_store import MessageStore
from aiorocketmq.store.results import PutMessageStatus

__all__ = [
    "DelayOffsetTable",
    "ScheduleMessageService",
    "correct_deliver_timestamp",
    "delay_level_to_queue_id",
    "message_timeup",
]

log = logging.getLogger(__name__)

FIRST_DELAY_TIME_MS: Final = 1_000
"""Java's ``FIRST_DELAY_TIME``: a level's first pass, after start."""
DELAY_FOR_A_WHILE_MS: Final = 100
"""Java's ``DELAY_FOR_A_WHILE``: between passes, and the longest wait for a due unit."""
DELAY_FOR_A_PERIOD_MS: Final = 10_000
"""Java's ``DELAY_FOR_A_PERIOD``: after a pass that raised."""
FIRST_PERSIST_DELAY_MS: Final = 10_000
"""The first ``delayOffset.json`` write, after start (then every flushDelayOffsetInterval)."""
MAX_UNITS_PER_PASS: Final = 1_024
"""Units read per pass; a full batch starts the next pass at once. Bounds the memory
of one pass over a queue file holding 300,000 units."""
SHUTDOWN_GRACE_S: Final = 5.0
"""Java's ``WAIT_FOR_SHUTDOWN``: a pass in flight finishes its put before the
final persist, so a delivered message's offset is not lost."""


def delay_level_to_queue_id(level: int) -> int:
    """``delayLevel2QueueId``: level *L* lives in queue *L-1*."""
    return level - 1


class DelayOffsetTable(ConfigManager[dict[int, int]]):
    """``delayOffset.json``: delay level -> next queue offset to deliver.

    Args:
        path: ``<storePathRootDir>/config/delayOffset.json``.
        executor: where file work runs; not owned.
    """

    def __init__(self, path: Path, executor: BlockingExecutor) -> None:
        super().__init__(path, executor)
        self.offsets: dict[int, int] = {}

    def encode(self, pretty: bool = False) -> str:
        """``{"offsetTable":{1:5}}`` with bare level keys (the compact form is
        GET_ALL_DELAY_OFFSET's body)."""
        doc = {"offsetTable": dict(sorted(self.offsets.items()))}
        return fastjson.dumps_pretty(doc) if pretty else fastjson.dumps(doc, unquoted_int_keys=True)

    def parse(self, text: str) -> dict[int, int]:
        """Read the file form (bare or quoted levels). Raises ``RemoteProtocolError``."""
        return DelayOffsetSerializeWrapper.decode(text).offset_table

    def apply(self, table: dict[int, int]) -> None:
        """Install a parsed table (Java's ``putAll``: loaded levels replace ours)."""
        self.offsets.update(table)


def correct_deliver_timestamp(now_ms: int, deliver_ms: int, delay_ms: int) -> int:
    """``correctDeliverTimestamp``: a deliver time further away than one level's delay
    means the clock went back since the store; such a message is due now."""
    return now_ms if deliver_ms > now_ms + delay_ms else deliver_ms


def message_timeup(msg: MessageExt) -> MessageExtBrokerInner | None:
    """The message to deliver for a due schedule-topic record (``messageTimeup``).

    Returns:
        The rebuilt message, or None when ``REAL_TOPIC`` / ``REAL_QID`` are missing
        or not usable (Java would throw on every pass and never get past it).
    """
    props = dict(msg.properties)
    # Serialised before DELAY is cleared, exactly as Java: the stored record keeps it.
    properties_string = join_properties(props)
    props.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)
    # Only the map: the put must not wait for a flush or a slave.
    props[MessageConst.PROPERTY_WAIT_STORE_MSG_OK] = "false"
    topic = props.get(MessageConst.PROPERTY_REAL_TOPIC)
    raw_queue_id = props.get(MessageConst.PROPERTY_REAL_QUEUE_ID, "")
    if not topic or not raw_queue_id.lstrip("-").isdigit():
        return None
    return inner_from_stored(
        msg, topic=topic, queue_id=int(raw_queue_id), properties=props,
        properties_string=properties_string,
    )  # fmt: skip


class ScheduleMessageService(Service):
    """Delivers delayed messages; see the module docstring.

    Args:
        store: the broker's message store (loaded and started first).
        executor: where ``delayOffset.json`` is read and written; not owned.
        path: the offsets file; default ``<storePathRootDir>/config/delayOffset.json``.
        clock: deliver times are compared with its ``now_ms``; default the store's.
        first_delay_ms: a level's first pass after start (Java: 1 s).
        while_ms: between passes (Java: 100 ms).
        period_ms: after a pass that raised (Java: 10 s).
        first_persist_delay_ms: the first periodic persist (Java: 10 s).

    Attributes:
        levels: the delays in ms, level *L* at index *L-1*.
        offsets: the persisted table (``DelayOffsetTable``).
        delivering: the level timers run (a started master).
        watcher: the job that wakes parked levels once they have units (a started
            master).
        delivered: messages delivered since start.
        failed_passes: passes that raised.
        retried_puts: deliveries to be retried (put refused, store not serving).

    Raises:
        ValueError: ``messageDelayLevel`` cannot be parsed (Java's load fails then).
    """

    shutdown_grace_s = SHUTDOWN_GRACE_S

    def __init__(
        self,
        store: MessageStore,
        executor: BlockingExecutor,
        *,
        path: Path | None = None,
        clock: Clock | None = None,
        first_delay_ms: int = FIRST_DELAY_TIME_MS,
        while_ms: int = DELAY_FOR_A_WHILE_MS,
        period_ms: int = DELAY_FOR_A_PERIOD_MS,
        first_persist_delay_ms: int = FIRST_PERSIST_DELAY_MS,
    ) -> None:
        super().__init__("ScheduleMessageService")
        config = store.config
        self._store = store
        self._clock = clock if clock is not None else store.clock
        self.levels = parse_delay_levels(config.message_delay_level)
        self.offsets = DelayOffsetTable(path or config.delay_offset_path, executor)
        self._first_delay_ms = first_delay_ms
        self._while_ms = while_ms
        self._period_ms = period_ms
        self._first_persist_delay_ms = first_persist_delay_ms
        self._persist_interval_ms = config.flush_delay_offset_interval
        self._loaded = False
        self.delivering = False
        self.delivered = 0
        self.failed_passes = 0
        self.retried_puts = 0
        self._failing_levels: set[int] = set()
        # Offsets a master's catch-up raised; a level's timer holds its offset in a
        # local, so it picks these up at its next pass (never moving backwards).
        self._raised: dict[int, int] = {}
        # Levels with nothing to deliver: level -> (its offset, the event its timer
        # waits on). The watcher sets the event once the level has work.
        self._parked: dict[int, tuple[int, asyncio.Event]] = {}
        self.watcher: Periodic | None = None

    # -- offsets -------------------------------------------------------------------------

    async def load(self) -> bool:
        """Read ``delayOffset.json`` (or its ``.bak``) and clamp each level's offset
        into its queue's [min, max] (``correctDelayOffset``).

        Returns:
            True if a file was read.
        """
        found = await self.offsets.load()
        self._loaded = True
        self.correct_delay_offsets()
        return found

    def correct_delay_offsets(self) -> None:
        """Clamp every known level's offset into its existing queue's [min, max]."""
        for level in range(1, len(self.levels) + 1):
            current = self.offsets.offsets.get(level)
            queue = self._queue(level)
            if current is None or queue is None:
                continue
            corrected = min(max(current, queue.min_offset), queue.max_offset)
            if corrected != current:
                log.error(
                    "correct delay offset level=%s from=%s to=%s min=%s max=%s",
                    level,
                    current,
                    corrected,
                    queue.min_offset,
                    queue.max_offset,
                )
                self.offsets.offsets[level] = corrected

    def encode(self) -> str:
        """The offsets as GET_ALL_DELAY_OFFSET sends them (``{"offsetTable":{1:5}}``)."""
        return self.offsets.encode()

    def apply_master_offsets(self, text: str) -> None:
        """A slave's sync: install the master's ``delayOffset.json`` content.

        Raises:
            RemoteProtocolError: the text does not parse.
        """
        self.offsets.decode(text)

    def merge_slave_offsets(self, table: dict[int, int]) -> list[tuple[int, int, int]]:
        """A master's catch-up: raise levels to its slaves' delay offsets.

        A slave holds the master's table as of its last sync (every 10 s), which
        can be newer than the ``delayOffset.json`` a killed master last wrote;
        without this, the restarted master delivers those messages again. A level
        only moves forward and never past its queue's max offset here; unknown
        levels are ignored.

        Args:
            table: level -> next offset, the largest over the slaves.

        Returns:
            ``(level, before, after)`` of every level raised.
        """
        raised: list[tuple[int, int, int]] = []
        for level, offset in sorted(table.items()):
            queue = self._queue(level) if 1 <= level <= len(self.levels) else None
            if queue is None:
                continue
            before = self.offsets.offsets.get(level, 0)
            capped = min(offset, queue.max_offset)
            if capped > before:
                self.offsets.offsets[level] = capped
                self._raised[level] = max(capped, self._raised.get(level, 0))
                raised.append((level, before, capped))
        return raised

    def _queue(self, level: int) -> ConsumeQueue | None:
        return self._store.cq_table.get(RMQ_SYS_SCHEDULE_TOPIC, delay_level_to_queue_id(level))

    # -- lifecycle -----------------------------------------------------------------------

    async def on_start(self) -> None:
        """Load offsets if not yet loaded; on a master start the level timers and
        the periodic persist."""
        if not self._loaded:
            await self.load()
        if self._store.config.broker_role is BrokerRole.SLAVE:
            log.info("schedule service idle on a slave")
            return
        for level in range(1, len(self.levels) + 1):
            self.spawn(self._level_loop(level), name=f"schedule-level-{level}")
        self.watcher = self.periodic(self._while_ms / 1000, self._watch, name="schedule-watch")
        self.spawn(self._unpark_at_stop(), name="schedule-unpark")
        self.periodic(
            self._persist_interval_ms / 1000,
            self.offsets.persist,
            name="persist-delay-offset",
            initial_delay_s=self._first_persist_delay_ms / 1000,
        )
        self.delivering = True
        log.info("schedule service started levels=%s offsets=%s", self.levels, self.encode())

    async def on_shutdown(self) -> None:
        """Persist the offsets (a master only: a slave's file is the master's copy)."""
        if self.delivering:
            self.delivering = False
            await self.offsets.flush()
            log.info("schedule service stopped offsets=%s", self.encode())

    # -- delivery ------------------------------------------------------------------------

    async def _stopped_within(self, delay_ms: int) -> bool:
        """Wait ``delay_ms`` unless shutdown begins; True when it did."""
        if self.stopping.is_set():
            return True
        try:
            async with asyncio.timeout(delay_ms / 1000):
                await self.stopping.wait()
        except TimeoutError:
            return False
        return True

    def _caught_up(self, level: int, offset: int) -> bool:
        """Nothing for ``level`` from ``offset`` on: no unit, no raised offset."""
        if level in self._raised:
            return False
        queue = self._queue(level)
        return queue is None or offset >= queue.max_offset

    async def _park(self, level: int, offset: int) -> bool:
        """Wait until ``level`` has a unit past ``offset`` or shutdown begins; True
        when it did.

        Java's timer looks every ``while_ms`` whether or not the level has anything;
        eighteen idle levels were 180 loop wakeups a second, each a timeout and an
        event wait. Parked, they cost one watcher pass per ``while_ms`` for all, and a
        unit is still seen within ``while_ms`` of its dispatch, as before.
        """
        event = asyncio.Event()
        self._parked[level] = (offset, event)
        try:
            if not self.stopping.is_set():
                await event.wait()
        finally:
            del self._parked[level]
        return self.stopping.is_set()

    @property
    def parked(self) -> dict[int, asyncio.Event]:
        """The levels parked now, each with the event its timer waits on (a copy)."""
        return {level: event for level, (_offset, event) in self._parked.items()}

    def _watch(self) -> None:
        """Wake every parked level that has work now."""
        for level, (offset, event) in self._parked.items():
            if not self._caught_up(level, offset):
                event.set()

    async def _unpark_at_stop(self) -> None:
        """At shutdown, release the parked timers (not left to the grace period)."""
        await self.stopping.wait()
        for _offset, event in self._parked.values():
            event.set()

    async def _level_loop(self, level: int) -> None:
        """One level's timer (``DeliverDelayedMessageTimerTask`` rescheduling itself);
        parked while the level has nothing to deliver (``_park``)."""
        offset = self.offsets.offsets.get(level, 0)
        delay_ms = self._first_delay_ms
        while not (
            await self._park(level, offset)
            if delay_ms == self._while_ms and self._caught_up(level, offset)
            else await self._stopped_within(delay_ms)
        ):
            offset = max(offset, self._raised.pop(level, offset))
            try:
                offset, delay_ms = await self._deliver_due(level, offset)
            except Exception:
                # Java logs and tries the same offset again after a period; one bad
                # pass must not end the level's timer.
                self.failed_passes += 1
                log.exception("schedule pass failed level=%s offset=%s", level, offset)
                delay_ms = self._period_ms

    async def _deliver_due(self, level: int, offset: int) -> tuple[int, int]:
        """One pass (``executeOnTimeup``): deliver the due units from ``offset``.

        Returns:
            ``(next offset, ms until the next pass)``.
        """
        queue = self._queue(level)
        if queue is None:
            return offset, self._while_ms
        units = _read_units(queue, offset)
        if units is None:
            return _reset_offset(queue, offset, level), self._while_ms
        delay_ms = self.levels[level - 1]
        for index, (physical_offset, tags) in enumerate(units):
            queue_offset = offset + index
            if self.stopping.is_set():
                return queue_offset, self._while_ms
            now_ms = self._clock.now_ms()
            deliver_ms = correct_deliver_timestamp(now_ms, tags, delay_ms)
            countdown_ms = deliver_ms - now_ms
            if countdown_ms > 0:
                return queue_offset, min(countdown_ms, self._while_ms)
            if not await self._deliver_one(level, physical_offset, queue_offset):
                return queue_offset, self._while_ms
        next_delay = 0 if len(units) == MAX_UNITS_PER_PASS else self._while_ms
        return offset + len(units), next_delay

    async def _deliver_one(self, level: int, physical_offset: int, queue_offset: int) -> bool:
        """Put one due message to its real topic; False when the pass must be retried."""
        # Due after up to hours: read in a thread first when it left memory.
        msg = await self._store.read_ahead.read_message(physical_offset)
        if msg is None:
            if not self._store.running:
                # A store that stopped serving reads nothing: not a reason to skip.
                return self._put_failed(level, "store not serving", physical_offset)
            # Java skips it (``continue``) without moving the stored offset.
            log.warning("schedule message unreadable level=%s offset=%s", level, physical_offset)
            return True
        inner = message_timeup(msg)
        if inner is None:
            log.error("schedule message without a usable REAL_TOPIC/REAL_QID, dropped: %s", msg)
            return True
        if inner.topic == RMQ_SYS_TRANS_HALF_TOPIC:
            log.error("[BUG] the real topic of schedule msg is %s, dropped: %s", inner.topic, msg)
            return True
        result = await self._store.put_message(inner)
        if result.status is not PutMessageStatus.PUT_OK:
            return self._put_failed(level, result.status.name, physical_offset)
        if level in self._failing_levels:
            self._failing_levels.discard(level)
            log.info("schedule delivery recovered level=%s", level)
        self.offsets.offsets[level] = queue_offset + 1
        self.delivered += 1
        return True

    def _put_failed(self, level: int, why: str, physical_offset: int) -> bool:
        """Count a delivery to retry; log the first of a streak at ERROR (then DEBUG:
        a full disk would otherwise log ten lines a second per level)."""
        self.retried_puts += 1
        if level in self._failing_levels:
            log.debug("schedule deliver failed again level=%s why=%s", level, why)
        else:
            self._failing_levels.add(level)
            log.error(
                "schedule deliver failed level=%s why=%s offset=%s", level, why, physical_offset
            )
        return False

    def running_stats(self) -> dict[str, str]:
        """``buildRunningStats``: ``scheduleMessageOffset_<level>`` -> ``"<offset>,<max>"``,
        the keys GET_BROKER_RUNTIME_INFO carries for each level with an offset."""
        stats = {}
        for level, offset in sorted(self.offsets.offsets.items()):
            queue_id = delay_level_to_queue_id(level)
            max_offset = self._store.get_max_offset_in_queue(RMQ_SYS_SCHEDULE_TOPIC, queue_id)
            stats[f"scheduleMessageOffset_{level}"] = f"{offset},{max_offset}"
        return stats


def _read_units(queue: ConsumeQueue, offset: int) -> list[tuple[int, int]] | None:
    """``(physical offset, deliver ms)`` of up to a pass's units from ``offset``.

    Copied out so the queue file is not held across the puts' awaits.
    """
    held = queue.get_units(offset, MAX_UNITS_PER_PASS)
    if held is None:
        return None
    with held:
        units = held.units
        return list(zip(units["offset"].tolist(), units["tags"].tolist(), strict=True))


def _reset_offset(queue: ConsumeQueue, offset: int, level: int) -> int:
    """Where a pass that found no unit at ``offset`` goes on (Java's reset rule)."""
    if queue.min_offset > offset:
        log.error(
            "schedule CQ offset invalid level=%s offset=%s min=%s", level, offset, queue.min_offset
        )
        return queue.min_offset
    if queue.max_offset < offset:
        log.error(
            "schedule CQ offset invalid level=%s offset=%s max=%s", level, offset, queue.max_offset
        )
        return queue.max_offset
    return offset
