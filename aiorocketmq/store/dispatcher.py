"""ReputMessageService: the one path from CommitLog records to ConsumeQueue units and index keys.

Owns: reading the CommitLog from ``reput_from`` to its max offset in strict
CommitLog order (``DefaultMessageStore.ReputMessageService``; specs/store.md §8),
building a ``DispatchRequest`` per record, putting the ConsumeQueue units
(NOT_TYPE and COMMIT records only; a chunk's units of one queue as one write) and
the index keys (``messageIndexEnable``), advancing the checkpoint's logics
timestamp, and telling arrival listeners (long polling) about the dispatched
records: per chunk, one notice per queue and tagsCode, for the newest such record
(``dispatch_runs``). The master's put path, a slave's replication and the
start-time redispatch after recovery all go through here.

Must not: block the loop (a backlog goes in bounded chunks with a yield between),
create files on the loop (NEED_FILE and a full index await the allocator, then the
same record is dispatched again: both puts are idempotent), copy bodies, or verify
CRCs (recovery did). The files a record waits for, and what their absence imposes,
are ``dispatch_files``'s.

Reading rules, per record of a slice that ends at its file's read position:

* valid record -> dispatch, notify, advance by TOTALSIZE;
* BLANK -> the rest of the file is filler: jump to the next file's start;
* the slice ends exactly after a record -> read the next slice;
* a sound header whose fields do not add up -> "[BUG]": skip its TOTALSIZE;
* anything else unparseable -> on a master, skip the rest of the readable slice; on
  a SLAVE, stop and retry at the next wakeup (HA frames are not message-aligned).

tagsCode: ``hashCode(TAGS)`` (0 without tags), or a schedule record's deliver time
(``dispatch_builder``, which builds every request).

Waking: after a master's puts, a callback of the same loop iteration
(``dispatch_soon``, once the replies are written) calls ``dispatch_now()``: the new
records inline when idle, else an ``asyncio.Event`` is set (``dispatch_fields``: a
single put's record, not read back); replication and recovery call ``wakeup()``, which
only sets it. RocketMQ's 1 ms sleep-poll becomes a wait on the event (a 1 s safety timer).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter
from typing import Any, Final

from aiorocketmq.common.constants import (
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    RMQ_SYS_SCHEDULE_TOPIC,
    MessageSysFlag,
    parse_delay_levels,
)
from aiorocketmq.common.message_codec import (
    MIN_RECORD_SIZE,
    ScanStop,
    StopReason,
)
from aiorocketmq.runtime.lifecycle import Service, TaskFailure
from aiorocketmq.store.checkpoint import StoreCheckpoint
from aiorocketmq.store.commit_log import CommitLog
from aiorocketmq.store.config import BrokerRole, MessageStoreConfig
from aiorocketmq.store.consume_queue import ConsumeQueue, PutUnitStatus
from aiorocketmq.store.consume_queue_table import ConsumeQueueTable
from aiorocketmq.store.dispatch_builder import DispatchRequestBuilder, RecordWalk
from aiorocketmq.store.dispatch_files import DispatchFiles
from aiorocketmq.store.dispatch_pacing import CHUNK_RECORDS, StepPacing
from aiorocketmq.store.dispatch_request import DispatchRequest
from aiorocketmq.store.dispatch_runs import newest_arrivals, put_runs
from aiorocketmq.store.errors import StoreError
from aiorocketmq.store.index_service import IndexService
from aiorocketmq.store.running_flags import RunningFlags
from aiorocketmq.store.store_stats import StoreStats

__all__ = ["ArrivalListener", "ReputMessageService"]

log = logging.getLogger(__name__)

ArrivalListener = Callable[[str, int, int, int, int, str], None]
"""``(topic, queue_id, max_offset, tags_code, store_timestamp, properties)``, called on
the loop after records were dispatched: once per queue and tagsCode of a chunk, for
the newest such record; ``max_offset`` is its queue offset + 1. ``properties`` is the
stored properties string: a listener that needs the map parses it
(``string_to_properties``); none of ours does, so no dispatch builds it."""

_SAFETY_WAKE_S: Final = 1.0
_HEAD: Final = struct.Struct(">ii")
_TRANSACTION_BITS: Final = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE  # sysFlag & 0xC
_ROLLBACK: Final = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE  # its keys are not indexed
_NO_UNIT_BIT: Final = MessageSysFlag.TRANSACTION_PREPARED_TYPE  # PREPARED, ROLLBACK: no unit


@dataclass(slots=True)
class _NeedFile:
    """A record could not be fully dispatched until a file exists."""

    request: DispatchRequest
    queue: ConsumeQueue | None  # None: the index needs a new file


_CONTINUE: Final = "continue"
_STOP: Final = "stop"


class ReputMessageService(Service):
    """Dispatches CommitLog records into ConsumeQueues and the index; see the module docstring.

    Args:
        config: role, delay levels, ``messageIndexEnable``.
        commit_log: the source.
        cq_table: where units go.
        index_service: where keys go.
        checkpoint: its logics (and, on a slave, physic) timestamp follows dispatch.
        flags: error bits set when a queue or index write fails for good.
        stats: counts dispatched records (per topic on a slave).
        chunk_records: records per step before yielding (tests use small values).

    Attributes:
        reput_from: the next CommitLog offset to dispatch.
    """

    def __init__(
        self,
        config: MessageStoreConfig,
        commit_log: CommitLog,
        cq_table: ConsumeQueueTable,
        index_service: IndexService,
        checkpoint: StoreCheckpoint,
        *,
        flags: RunningFlags | None = None,
        stats: StoreStats | None = None,
        chunk_records: int = CHUNK_RECORDS,
    ) -> None:
        super().__init__("reput")
        self._commit_log = commit_log
        self._cq_table = cq_table
        self._index = index_service
        self._checkpoint = checkpoint
        self._flags = flags if flags is not None else RunningFlags()
        self._stats = stats if stats is not None else StoreStats()
        self._pacing = StepPacing(chunk_records)
        self._slave = config.broker_role is BrokerRole.SLAVE
        self._index_enabled = config.message_index_enable
        self._verify = config.verify_writes
        self._builder = DispatchRequestBuilder(parse_delay_levels(config.message_delay_level))
        self._listeners: list[ArrivalListener] = []
        self._wake = asyncio.Event()
        self._safety: asyncio.TimerHandle | None = None
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []
        self._waiter_seq = 0
        self._files = DispatchFiles(self, index_service, self._flags)
        self._replay_from = self._replay_counted = 0  # reput_from and count at start
        self._busy = False  # a step is under way (the loop's or an inline one)
        self._inline_ok = False  # dispatch_now may dispatch: started, not failed
        self.reput_from = 0

    # -- public --------------------------------------------------------------------------

    def wakeup(self) -> None:
        """New data may be in the CommitLog: dispatch it now (plain def, cheap)."""
        self._wake.set()

    def dispatch_now(self) -> None:
        """Dispatch what a put just appended, inline, when the service is idle.

        A master's put path calls this after every append: dispatch then keeps pace
        with puts record for record (a loop task woken once per iteration fell
        further behind a saturated broker each round, which consumers saw as delay
        and a crash as replay), and a single send costs no extra loop wake. With a
        backlog, a file to create or the loop task already at work, it only wakes the
        loop. A failure here is the loop task's failure, never the put's: the record
        is stored whatever happens to its dispatch.
        """
        if self._busy or not self._inline_ok:
            self._wake.set()
            return
        self._busy = True
        try:
            outcome = self._reput_step()
            self._resolve_waiters()
        except Exception as exc:
            self._inline_failed("dispatch_now", exc)
            return
        finally:
            self._busy = False
        if outcome != _STOP and self.reput_from < self._commit_log.max_offset:
            self._wake.set()  # a file to create, or more than one chunk: the loop's work

    def dispatch_fields(  # noqa: PLR0917 - a put's fields, positional on the hot path
        self, topic: str, queue_id: int, sys_flag: int, prepared_offset: int,
        properties: str, physical_offset: int, size: int, queue_offset: int, stamp: int,
    ) -> None:  # fmt: skip
        """``dispatch_now`` for the one record a single put just appended at
        ``reput_from``, given by the put's fields as ``DispatchSoon`` notes them.

        The put knows the record's fields, so nothing is read back from the file: no
        scan, no decode of the fixed part, topic and properties bytes (a record's
        strings are the put's strings: encoded with surrogateescape, decoded with it),
        and no ``DispatchRequest``: the fields go to the ConsumeQueue unit (NOT_TYPE and
        COMMIT records), the index keys (all but ROLLBACK) and the arrival notice;
        ``properties`` is parsed with the scanner's rules. Anything else (a backlog, a
        schedule-topic record, a file to create) takes ``dispatch_now``'s scanning way.
        With ``verify_writes`` the request the scan would build is built and checked
        against the record in the file, field by field.
        """
        if (
            self._busy or not self._inline_ok or physical_offset != self.reput_from
            or topic == RMQ_SYS_SCHEDULE_TOPIC
        ):  # fmt: skip
            self.dispatch_now()
            return
        code, keys, uniq_key = self._builder.put_fields(properties)
        transaction = sys_flag & _TRANSACTION_BITS
        self._busy = True
        try:
            if self._verify:
                self._check_against_file(
                    DispatchRequest(
                        topic, queue_id, physical_offset, size, code, stamp, queue_offset,
                        keys, uniq_key, sys_flag, prepared_offset, properties,
                    )
                )  # fmt: skip
            status = PutUnitStatus.OK
            if not transaction & _NO_UNIT_BIT:  # NOT_TYPE or COMMIT: a unit
                queue = self._cq_table.find_or_create(topic, queue_id)
                status = queue.put(physical_offset, size, code, queue_offset, stamp)
                if status is PutUnitStatus.OK:
                    self._checkpoint.logics_msg_timestamp = stamp  # a master's: no physic
                elif status is PutUnitStatus.ERROR:
                    self._unit_failed(f"{topic}/{queue_id}@{queue_offset} at {physical_offset}")
            if status is not PutUnitStatus.NEED_FILE and (
                transaction == _ROLLBACK
                or self._index_put(topic, keys, uniq_key, physical_offset, stamp)
            ):
                self._stats.dispatched_messages += 1  # a master's: no slave counting
                for listener in self._listeners:
                    listener(topic, queue_id, queue_offset + 1, code, stamp, properties)
                self.reput_from = physical_offset + size
                if self._waiters:
                    self._resolve_waiters()
        except Exception as exc:
            self._inline_failed("dispatch_fields", exc)
            return
        finally:
            self._busy = False
        if self.reput_from < self._commit_log.max_offset:
            self._wake.set()  # a file to create: the loop scans this record again

    def _index_put(
        self, topic: str, keys: str | None, uniq_key: str | None, offset: int, stamp: int
    ) -> bool:
        """``_index_all`` of one plain put given by its fields: whether it is done."""
        if not self._index_enabled:
            return True
        if self._files.index_down_since_ms and self._files.skips_keys(1):
            return True  # no index file: skip the keys, try again in a while
        return self._index.index_put(topic, keys, uniq_key, offset, stamp)

    def _inline_failed(self, what: str, exc: Exception) -> None:
        log.exception("inline dispatch failed; the store stops taking puts")
        self._inline_ok = False
        self._flags.make_logics_queue_error()
        self.failures.append(TaskFailure(what, exc))
        self._release_waiters()

    def _check_against_file(self, request: DispatchRequest) -> None:
        """``verify_writes``: the put's request equals the one the file's record gives."""
        selected = self._commit_log.get_data(request.commit_log_offset)
        if selected is None:
            raise StoreError(f"dispatch_fields: nothing stored at {request.commit_log_offset}")
        with selected:
            self._builder.check_put(request, selected.view)

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        """Call ``listener`` for every dispatched record (never on a SLAVE)."""
        self._listeners.append(listener)

    def remove_arrival_listener(self, listener: ArrivalListener) -> None:
        """Stop calling ``listener``."""
        self._listeners.remove(listener)

    def behind(self) -> int:
        """CommitLog bytes not dispatched yet (``dispatchBehindBytes``); <= 0 when caught up."""
        return self._commit_log.max_offset - self.reput_from

    async def wait_dispatched(self, offset: int) -> bool:
        """Wait until everything below ``offset`` is dispatched.

        Returns:
            True once ``reput_from >= offset``; False if the service stopped first.
        """
        if self.reput_from >= offset:
            return True
        if self.stopping.is_set() or self.failures:
            return False  # stopped, or its loop died: it will never get there
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiter_seq += 1
        heapq.heappush(self._waiters, (offset, self._waiter_seq, future))
        self._wake.set()
        return await future

    async def replay_until(self, offset: int) -> None:
        """Wait for the start-time redispatch to reach ``offset``, then log what it did.

        Raises:
            StoreError: the service stopped (or its loop died) first.
        """
        began = time.monotonic()
        self._pacing.replaying(True)
        try:
            if not await self.wait_dispatched(offset):
                raise StoreError("the start-time redispatch did not finish")
        finally:
            self._pacing.replaying(False)
        log.info(
            "replayed %d records (%d bytes) into the queues in %.2f s",
            self._stats.dispatched_messages - self._replay_counted,
            offset - self._replay_from, time.monotonic() - began,
        )  # fmt: skip

    # -- lifecycle -----------------------------------------------------------------------

    async def on_start(self) -> None:
        self._replay_from, self._replay_counted = self.reput_from, self._stats.dispatched_messages
        self._inline_ok = not self._slave
        self._wake.set()  # dispatch whatever the CommitLog already holds
        self.spawn(self._reput_loop(), name="dispatch")

    def on_task_failed(self, task: asyncio.Task[Any], exc: BaseException) -> None:
        # Without dispatch, stored messages never reach their queues: stop taking
        # puts (the owner sees ``failures``) and let nobody wait for it forever.
        super().on_task_failed(task, exc)
        self._inline_ok = False
        self._flags.make_logics_queue_error()
        self._release_waiters()

    async def on_shutdown(self) -> None:
        self._inline_ok = False
        self._release_waiters()
        log.info(
            "reput stopped reput_from=%s max_offset=%s behind=%s",
            self.reput_from, self._commit_log.max_offset, self.behind(),
        )  # fmt: skip

    # -- the loop ------------------------------------------------------------------------

    async def _reput_loop(self) -> None:
        # The safety net is one timer a second setting the event, not a timeout armed
        # and cancelled around every wait (one wait per put on a lightly loaded broker).
        loop = asyncio.get_running_loop()
        self._safety = loop.call_later(_SAFETY_WAKE_S, self._safety_wake, loop)
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                await self._do_reput()
        finally:
            if self._safety is not None:
                self._safety.cancel()
                self._safety = None

    def _safety_wake(self, loop: asyncio.AbstractEventLoop) -> None:
        self._wake.set()
        self._safety = loop.call_later(_SAFETY_WAKE_S, self._safety_wake, loop)

    async def _do_reput(self) -> None:
        self._busy = True
        try:
            await self._reput_all()
        finally:
            self._busy = False

    async def _reput_all(self) -> None:
        commit_log = self._commit_log
        min_offset = commit_log.min_offset
        if self.reput_from < min_offset:
            # The files it pointed into expired before they were dispatched.
            log.warning("reput_from=%s below min offset %s: jumping", self.reput_from, min_offset)
            self.reput_from = min_offset
        while self.reput_from < commit_log.max_offset:
            outcome = self._reput_step()
            self._resolve_waiters()
            if outcome == _STOP:
                break
            if isinstance(outcome, _NeedFile):
                await self._files.provide(outcome.request, outcome.queue)
            elif self.reput_from < commit_log.max_offset:
                # Bounded chunk done, more to come: let puts and pulls run first.
                await asyncio.sleep(0)
        self._resolve_waiters()

    def _release_waiters(self) -> None:
        for _offset, _seq, future in self._waiters:
            if not future.done():
                future.set_result(False)
        self._waiters.clear()

    def _resolve_waiters(self) -> None:
        waiters = self._waiters
        while waiters and waiters[0][0] <= self.reput_from:
            future = heapq.heappop(waiters)[2]
            if not future.done():
                future.set_result(True)

    # -- one bounded step (plain def: no await) ------------------------------------------

    def _reput_step(self) -> str | _NeedFile:
        """Dispatch up to ``chunk_records`` records of the slice at ``reput_from``.

        The chunk's units go in per queue (``_put_units``), its index keys in one
        batch (hashed together), and only then are its records announced.
        """
        selected = self._commit_log.get_data(self.reput_from)
        if selected is None:
            return _STOP
        with selected:
            base = selected.start_offset
            self.reput_from = base
            walk = RecordWalk()
            budget = self._pacing.records
            started = perf_counter()
            deadline = self._pacing.walk_deadline(started)  # units and keys come after
            done: list[DispatchRequest] = []
            ends: list[int] = []  # where each record ends in the slice
            outcome: str | _NeedFile | None = None
            for requests, run_ends in self._builder.walk(selected.view, walk):
                if len(requests) >= budget:  # the run's fresh lists: cut them to the cap
                    del requests[budget:], run_ends[budget:]
                done += requests
                ends += run_ends
                budget -= len(requests)
                if budget == 0 or perf_counter() > deadline:
                    outcome = _CONTINUE
                    break
            walked = perf_counter()
            need = self._put_units(done)
            if need is not None:
                outcome = need  # done was cut at the record that waits for a file
            indexed = self._index_all(done)
            self._notify_all(done[:indexed])
            self._pacing.learn(started, walked, len(done))
            if indexed:
                self.reput_from = base + ends[indexed - 1]
            if indexed < len(done):
                return _NeedFile(done[indexed], None)  # reput_from points at it
            if outcome is not None:
                return outcome
            assert walk.scanner is not None and walk.scanner.stop is not None
            return self._after_stop(walk.scanner.stop, base, selected.size, selected.view)

    def _put_units(self, requests: list[DispatchRequest]) -> _NeedFile | None:
        """The chunk's ConsumeQueue units, one run per queue (``dispatch_runs``).

        If a unit waits for a file, ``requests`` is cut before that record and its
        _NeedFile returned (the step redoes it once the file exists).
        """
        outcome = put_runs(self._cq_table, requests)
        for failed in outcome.failed:
            self._unit_failed(failed)
        if outcome.newest is not None:
            self._unit_written(outcome.newest)
        need = outcome.need
        if need is None:
            return None
        del requests[next(i for i, request in enumerate(requests) if request is need) :]
        return _NeedFile(need, outcome.need_queue)

    def _unit_written(self, request: DispatchRequest) -> None:
        self._checkpoint.logics_msg_timestamp = request.store_timestamp
        if self._slave:
            self._checkpoint.physic_msg_timestamp = request.store_timestamp

    def _unit_failed(self, request: DispatchRequest | str) -> None:
        # The unit could not be written: stop taking puts and say so loudly;
        # dispatch goes on so the other queues stay current.
        self._flags.make_logics_queue_error()
        log.error("consume queue write failed; store no longer writeable %s", request)

    def _index_all(self, requests: list[DispatchRequest]) -> int:
        """Index keys of ``requests``: how many are done (the rest wait for a file)."""
        if not self._index_enabled:
            return len(requests)
        if self._files.index_down_since_ms and self._files.skips_keys(len(requests)):
            return len(requests)  # no index file: skip the keys, try again in a while
        return self._index.build_indexes(requests)

    def _notify_all(self, requests: list[DispatchRequest]) -> None:
        """Announce a chunk's records: one notice per queue and tagsCode (``dispatch_runs``)."""
        self._stats.dispatched_messages += len(requests)
        if self._slave:  # a slave's puts arrive through replication: count them here
            for request in requests:
                self._stats.count_put(request.topic, 1, request.msg_size)
        elif self._listeners:
            for request in newest_arrivals(requests):
                self._notify(request)

    def _notify(self, request: DispatchRequest) -> None:
        for listener in self._listeners:
            listener(
                request.topic,
                request.queue_id,
                request.consume_queue_offset + 1,
                request.tags_code,
                request.store_timestamp,
                request.properties_raw,
            )

    def _after_stop(self, stop: ScanStop, base: int, size: int, view: memoryview) -> str:
        """Where to go once the scanner stopped inside the slice."""
        if stop.reason is StopReason.END:
            return _CONTINUE
        if stop.reason is StopReason.BLANK:
            self.reput_from = self._commit_log.roll_next_file(base + stop.offset)
            return _CONTINUE
        where = base + stop.offset
        total = _sound_header_size(view, stop.offset, size)
        if stop.reason is StopReason.CORRUPT and total:
            log.error("[BUG] record at %s does not add up (%s): skipping it", where, stop.message)
            self.reput_from = where + total
            return _CONTINUE
        if self._slave:
            # Half a record replicated so far: wait for the rest.
            return _STOP
        log.error("[BUG] dispatch stopped at %s: %s; skipping the slice", where, stop.message)
        self.reput_from = base + size
        return _CONTINUE


def _sound_header_size(view: memoryview, pos: int, size: int) -> int:
    """TOTALSIZE of a v1 header at ``pos`` whose size fits the slice, else 0."""
    if size - pos < _HEAD.size:
        return 0
    total, magic = _HEAD.unpack_from(view, pos)
    sound = magic in (MESSAGE_MAGIC_CODE, MESSAGE_MAGIC_CODE_V2)
    return int(total) if sound and MIN_RECORD_SIZE <= total <= size - pos else 0
