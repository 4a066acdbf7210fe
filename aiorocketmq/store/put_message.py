"""The put path: validate, redirect delayed messages, encode, append, then keep the mode's promise.

Owns: ``DefaultMessageStore.asyncPutMessage(s)`` plus ``CommitLog.asyncPutMessage(s)``
(specs/store.md §3.7, §3.8, §6.1, §11.4) up to a ``PutMessageResult``:

1. refuse with SERVICE_NOT_AVAILABLE when the store is not accepting puts (not
   started or shutting down), is a SLAVE, or is not writeable (disk full, queue or
   index error); with OS_PAGECACHE_BUSY while appends have been stalled waiting for
   a new CommitLog file for more than ``osPageCacheBusyTimeOutMills`` (our
   analogue of RocketMQ's put lock held too long);
2. validate: topic over 127 chars or a properties string over 32767 chars,
   a body over ``maxMessageSize``, a record over body limit + 64 KiB, or one that
   cannot be encoded -> MESSAGE_ILLEGAL; properties over 32767 bytes once encoded
   -> PROPERTIES_SIZE_EXCEEDED;
3. a NOT_TYPE or COMMIT message with ``DELAY`` > 0 goes to ``SCHEDULE_TOPIC_XXXX``
   queue ``level - 1`` (level clamped to the highest), with ``REAL_TOPIC`` and
   ``REAL_QID`` added and the properties re-serialised from the map;
4. encode outside the append (``common.message_codec``), then append with no await
   in between (``CommitLog.append`` is the critical section); NEED_FILE -> await
   the allocator and append again;
5. wake the dispatcher, then await what the mode promises: SYNC_FLUSH group commit
   unless ``WAIT=false`` (FLUSH_DISK_TIMEOUT when it times out); a SYNC_MASTER's
   replication through ``replica_waiter`` (the HA layer's seam).

Must not: touch ConsumeQueues (the dispatcher does), block, or sleep.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import struct
from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiorocketmq.common.clock import Clock
from aiorocketmq.common.constants import (
    PROPERTIES_MAX_LENGTH,
    RMQ_SYS_SCHEDULE_TOPIC,
    TOPIC_MAX_LENGTH,
    MessageSysFlag,
    parse_delay_levels,
)
from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError
from aiorocketmq.common.message_codec import (
    decode_batch_entries,
    encode_record,
    encode_records,
    merge_batch_properties,
)
from aiorocketmq.common.msg_id import offset_msg_ids, pack_ip
from aiorocketmq.common.properties import MessageConst, properties_to_string
from aiorocketmq.common.record_encoder import batch_kernel_args, batch_placer, encode_batch_args
from aiorocketmq.runtime.lifecycle import ServiceStateError
from aiorocketmq.store.commit_log import AppendResult, AppendStatus, CommitLog, queue_key
from aiorocketmq.store.config import BrokerRole, FlushDiskType, MessageStoreConfig
from aiorocketmq.store.errors import StoreError
from aiorocketmq.store.flush import GroupCommitService
from aiorocketmq.store.inner_message import (
    MessageExtBatch,
    MessageExtBrokerInner,
    parse_delay_level,
)
from aiorocketmq.store.plain_put import PlainPutter
from aiorocketmq.store.results import PutMessageResult, PutMessageStatus
from aiorocketmq.store.running_flags import RunningFlags
from aiorocketmq.store.store_stats import StoreStats

__all__ = ["MessagePutter", "ReplicaWaiter"]

log = logging.getLogger(__name__)

ReplicaWaiter = Callable[[int], Awaitable[PutMessageStatus]]
"""The HA seam: given a put's end offset, wait until a slave has it. Returns PUT_OK,
FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE (``HAService.isSlaveOK`` + GroupTransfer)."""

RECORD_OVERHEAD_MAX: Final = 64 * 1024
"""4.9.5+: a record may exceed the body limit by at most this (``MessageExtEncoder``)."""

# Plain ints: IntFlag arithmetic costs a Python-level call on every put.
_TRAN_MASK: Final = int(MessageSysFlag.TRANSACTION_ROLLBACK_TYPE)
_NOT_TYPE: Final = int(MessageSysFlag.TRANSACTION_NOT_TYPE)
_DELAYABLE: Final = (_NOT_TYPE, int(MessageSysFlag.TRANSACTION_COMMIT_TYPE))
_PORT: Final = struct.Struct(">i")
_OK: Final = PutMessageStatus.PUT_OK
_APPENDED: Final = AppendStatus.PUT_OK
_DELAY: Final = MessageConst.PROPERTY_DELAY_TIME_LEVEL
_TOO_LARGE: Final = (AppendStatus.MESSAGE_SIZE_EXCEEDED, AppendStatus.PROPERTIES_SIZE_EXCEEDED)
_NO_SPACE_RETRY_MS: Final = 1000  # how long a failed allocation for want of space stands


def _refused(status: PutMessageStatus, remark: str | None = None) -> PutMessageResult:
    return PutMessageResult(status, remark=remark)


class MessagePutter:
    """Puts messages into the CommitLog; see the module docstring.

    Args:
        config: limits, role, flush mode, delay levels.
        commit_log: where records go.
        clock: store timestamps and the stall timer.
        flags: writeable or not.
        stats: put counters.
        wakeup: called after an append (``DispatchSoon.note_batch``).
        dispatch_put: called instead after the append (``DispatchSoon.note_put``)
            of a single message stored as sent (None: ``wakeup`` for every put).

    Attributes:
        accepting: the store is started and not shutting down.
        group_commit: SYNC_FLUSH's service, set by the store at start.
        replica_waiter: SYNC_MASTER's wait for a slave; None means no slave can
            confirm, so waiting SYNC_MASTER puts report SLAVE_NOT_AVAILABLE.
        on_out_of_space: called when a CommitLog file cannot be created for want of
            space (the store asks its disk guard to measure now).
    """

    def __init__(
        self,
        config: MessageStoreConfig,
        commit_log: CommitLog,
        *,
        clock: Clock,
        flags: RunningFlags,
        stats: StoreStats,
        wakeup: Callable[[], None],
        dispatch_put: Callable[[MessageExtBrokerInner, AppendResult], None] | None = None,
        note_fields: Callable[[str, int, int, str, int, int, int, int], None] | None = None,
    ) -> None:
        self._commit_log = commit_log
        self._clock = clock
        self._flags = flags
        self._stats = stats
        self._wakeup = wakeup
        self._dispatch_put = dispatch_put
        self._max_body = config.max_message_size
        self._max_record = config.max_message_size + RECORD_OVERHEAD_MAX
        self._sync_flush = config.flush_disk_type is FlushDiskType.SYNC_FLUSH
        self._role = config.broker_role
        self._may_wait = self._sync_flush or self._role is BrokerRole.SYNC_MASTER
        self._busy_timeout_ms = config.os_page_cache_busy_time_out_mills
        self._max_delay_level = len(parse_delay_levels(config.message_delay_level))
        self._msg_id_prefixes: dict[tuple[str, int], str] = {}
        self._stalled_since_ms = 0  # monotonic ms since appends wait for a file; 0: none
        self._waiting_for_file = 0
        self._no_space_until_ms = 0  # monotonic ms: refuse at once until then (disk full)
        self._no_waiters = asyncio.Event()
        self._no_waiters.set()
        self.accepting = False
        self.group_commit: GroupCommitService | None = None
        self.replica_waiter: ReplicaWaiter | None = None
        self.on_out_of_space: Callable[[], None] | None = None
        self.plain: PlainPutter | None = None
        if not self._may_wait and commit_log.appends_fields and note_fields is not None:
            self.plain = PlainPutter(
                commit_log, clock, stats, note_fields, max_body=self._max_body,
                max_record=self._max_record, refused=self.check_store_status,
                msg_id_prefix=self._msg_id_prefix,
            )  # fmt: skip

    # -- checks --------------------------------------------------------------------------

    def check_store_status(self) -> PutMessageStatus | None:
        """Why a put must be refused now, or None (``checkStoreStatus``)."""
        if not self.accepting or self._role is BrokerRole.SLAVE or not self._flags.writeable:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self._no_space_until_ms and self._clock.monotonic_ms() < self._no_space_until_ms:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        stalled = self._stalled_since_ms
        if stalled and self._clock.monotonic_ms() - stalled > self._busy_timeout_ms:
            return PutMessageStatus.OS_PAGECACHE_BUSY
        return None

    async def wait_appends_done(self) -> None:
        """Wait until no put is waiting for a CommitLog file (shutdown, before flushing)."""
        await self._no_waiters.wait()

    # -- single message ------------------------------------------------------------------

    async def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """Store one message; see the module docstring for every status."""
        result = self.put_message_nowait(msg)
        return result if isinstance(result, PutMessageResult) else await result

    def put_message_nowait(
        self, msg: MessageExtBrokerInner
    ) -> PutMessageResult | Awaitable[PutMessageResult]:
        """``put_message`` without a coroutine when nothing must be awaited.

        Returns:
            The result when the put completed inline (the usual case under ASYNC_FLUSH
            on a master); otherwise an awaitable of it (a new CommitLog file, or a
            flush or replica promise to keep). Await it at once: the append is done.
        """
        refused = self.check_store_status()
        if refused is not None:
            return self._failed(_refused(refused))
        plain = self._put_plain(msg)
        if plain is not None:
            return plain
        encoded = self.encode_message(msg)
        if isinstance(encoded, PutMessageResult):
            return self._failed(encoded)
        record, key, topic = encoded
        # A message stored as sent (not redirected to the schedule topic) is dispatched
        # from the put's own fields: its record is not read back.
        single = msg if topic == msg.topic else None
        # WAIT only matters to a flush or replica promise: not read where none is kept.
        wait = self._may_wait and msg.wait_store_msg_ok
        return self._append_and_finish(record, key, topic, msg.store_host, wait, single=single)

    def _put_plain(self, msg: MessageExtBrokerInner) -> PutMessageResult | None:
        """The usual single put in fewer steps (``PlainPutter``): the same record and
        result, or None (nothing stored or counted: the general way decides).

        Plain here also means stored as sent: no ``DELAY``, no transaction offset, the
        properties string given. ``PlainPutter.put`` asks the store's status again
        (this way asked it before): one call on a way the send lane rarely leaves to it.
        """
        plain = self.plain
        props = msg.properties_string
        if (
            plain is None or props is None or _DELAY in msg.properties
            or msg.prepared_transaction_offset
        ):  # fmt: skip
            return None
        put = plain.put(
            msg.topic, msg.queue_id, msg.body, props, msg.flag, msg.sys_flag,
            msg.born_timestamp, msg.born_host, msg.store_host, msg.reconsume_times,
        )  # fmt: skip
        if put is None:
            return None
        msg_id, queue_offset, offset, size, stored_at = put
        return PutMessageResult(_OK, offset, size, queue_offset, [msg_id], stored_at, 1)

    def encode_message(
        self, msg: MessageExtBrokerInner
    ) -> tuple[bytearray, str, str] | PutMessageResult:
        """Validate, redirect if delayed, and encode: ``(record, queue key, topic)``."""
        topic, queue_id = msg.topic, msg.queue_id
        if len(topic) > TOPIC_MAX_LENGTH:
            return _refused(PutMessageStatus.MESSAGE_ILLEGAL, "topic longer than 127")
        try:
            properties = msg.stored_properties()
        except LocalProtocolError as exc:
            return _refused(PutMessageStatus.MESSAGE_ILLEGAL, str(exc))
        if len(properties) > PROPERTIES_MAX_LENGTH:
            return _refused(PutMessageStatus.MESSAGE_ILLEGAL, "properties longer than 32767")
        if msg.sys_flag & _TRAN_MASK in _DELAYABLE and _DELAY in msg.properties:
            level = parse_delay_level(msg.properties)
            if level is None:
                return _refused(PutMessageStatus.MESSAGE_ILLEGAL, "DELAY is not an integer")
            if level > 0:
                redirected = self._redirect_delayed(msg, level)
                if isinstance(redirected, PutMessageResult):
                    return redirected
                topic, queue_id, properties = redirected
        body = msg.body
        if (body.nbytes if isinstance(body, memoryview) else len(body)) > self._max_body:
            return _refused(PutMessageStatus.MESSAGE_ILLEGAL, "body exceeds maxMessageSize")
        try:
            record = encode_record(
                topic=topic, body=body, properties=properties, queue_id=queue_id,
                flag=msg.flag, sys_flag=msg.sys_flag, born_timestamp=msg.born_timestamp,
                born_host=msg.born_host,
                store_timestamp=0,  # patched inside the append
                store_host=msg.store_host, reconsume_times=msg.reconsume_times,
                prepared_transaction_offset=msg.prepared_transaction_offset,
            )  # fmt: skip
        except LocalProtocolError as exc:
            return _encode_failure(properties, exc)
        if len(record) > self._max_record:
            return _refused(PutMessageStatus.MESSAGE_ILLEGAL, "record exceeds body limit + 64 KiB")
        return record, queue_key(topic, queue_id), topic

    def _redirect_delayed(
        self, msg: MessageExtBrokerInner, level: int
    ) -> tuple[str, int, str] | PutMessageResult:
        # The original message is left untouched: a retried put must not nest.
        props = dict(msg.properties)
        if level > self._max_delay_level:
            level = self._max_delay_level
            props[MessageConst.PROPERTY_DELAY_TIME_LEVEL] = str(level)
        props[MessageConst.PROPERTY_REAL_TOPIC] = msg.topic
        props[MessageConst.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        try:
            properties = properties_to_string(props)
        except LocalProtocolError as exc:
            return _refused(PutMessageStatus.MESSAGE_ILLEGAL, str(exc))
        return RMQ_SYS_SCHEDULE_TOPIC, level - 1, properties

    # -- batch ---------------------------------------------------------------------------

    async def put_messages(self, batch: MessageExtBatch) -> PutMessageResult:
        """Store a batch of one queue as consecutive records, never split across files."""
        result = self.put_messages_nowait(batch)
        return result if isinstance(result, PutMessageResult) else await result

    def put_messages_nowait(
        self, batch: MessageExtBatch
    ) -> PutMessageResult | Awaitable[PutMessageResult]:
        """``put_messages`` without a coroutine when nothing must be awaited (as
        ``put_message_nowait``)."""
        refused = self.check_store_status()
        if refused is not None:
            return self._failed(_refused(refused))
        refusal = self._batch_refusal(batch)
        if refusal is not None:
            return self._failed(refusal)
        key = queue_key(batch.topic, batch.queue_id)
        args = _batch_args(batch)  # the kernels' arguments, prepared once; None: Python's
        place = batch_placer(args) if args is not None else None
        if place is not None:
            placed = self._commit_log.append_batch_in_place(key, self._clock.now_ms(), place)
            if placed is not None:  # encoded straight into the file: no copy, no patch
                return self._finish(placed, batch.topic, batch.store_host, batch.wait_store_msg_ok)
        records = self._encode_batch(batch, args)
        if isinstance(records, PutMessageResult):
            return self._failed(records)
        return self._append_and_finish(
            records, key, batch.topic, batch.store_host, batch.wait_store_msg_ok, batch=True
        )

    def _batch_refusal(self, batch: MessageExtBatch) -> PutMessageResult | None:
        """``checkMessages``: what no batch may be (the refusal), else None."""
        illegal = PutMessageStatus.MESSAGE_ILLEGAL
        body = batch.body
        if len(batch.topic) > TOPIC_MAX_LENGTH:
            return _refused(illegal, "topic longer than 127")
        if (body.nbytes if isinstance(body, memoryview) else len(body)) > self._max_body:
            return _refused(illegal, "batch body exceeds maxMessageSize")
        if batch.sys_flag & _TRAN_MASK != _NOT_TYPE:
            return _refused(illegal, "a batch cannot be transactional")
        if parse_delay_level(batch.properties) != 0:
            return _refused(illegal, "a batch cannot be delayed")
        return None

    @staticmethod
    def _encode_batch(
        batch: MessageExtBatch, args: tuple[Any, ...] | None
    ) -> bytearray | PutMessageResult:
        """Encode every entry of a batch ``_batch_refusal`` let through (``encode(batch)``):
        by the C kernel from ``args`` when it takes them, else by the reference, which
        words any refusal."""
        illegal = PutMessageStatus.MESSAGE_ILLEGAL
        body = batch.body
        fast = None if args is None else encode_batch_args(args)
        if fast is not None:
            return fast
        try:
            entries = decode_batch_entries(body)
            batch_props = properties_to_string(batch.properties)
        except (RemoteProtocolError, LocalProtocolError) as exc:
            return _refused(illegal, str(exc))
        if not entries:
            return _refused(illegal, "empty batch")
        try:
            return encode_records(
                ((e.flag, e.body, merge_batch_properties(e.properties_raw, batch_props))
                 for e in entries),
                topic=batch.topic, queue_id=batch.queue_id, sys_flag=batch.sys_flag,
                born_timestamp=batch.born_timestamp, born_host=batch.born_host,
                store_host=batch.store_host, reconsume_times=batch.reconsume_times,
            )  # fmt: skip
        except LocalProtocolError:
            pass  # an entry cannot be encoded: find it, and its status, one by one
        out = bytearray()
        for entry in entries:
            properties = merge_batch_properties(entry.properties_raw, batch_props)
            try:
                out += encode_record(
                    topic=batch.topic, body=entry.body, properties=properties,
                    queue_id=batch.queue_id, flag=entry.flag, sys_flag=batch.sys_flag,
                    born_timestamp=batch.born_timestamp, born_host=batch.born_host,
                    store_timestamp=0, store_host=batch.store_host,
                    reconsume_times=batch.reconsume_times,
                )  # fmt: skip
            except LocalProtocolError as exc:
                return _encode_failure(properties, exc)
        return out

    # -- append and promises -------------------------------------------------------------

    def _append_and_finish(
        self,
        record: bytearray,
        key: str,
        topic: str,
        store_host: tuple[str, int],
        wait: bool,
        *,
        batch: bool = False,
        single: MessageExtBrokerInner | None = None,
    ) -> PutMessageResult | Awaitable[PutMessageResult]:
        """Append (the critical section: no await) and finish, inline when possible."""
        append = self._commit_log.append_batch if batch else self._commit_log.append
        result = append(record, key, self._clock.now_ms())
        if result.status is _APPENDED:
            return self._finish(result, topic, store_host, wait, single)
        if result.status is AppendStatus.NEED_FILE:
            return self._append_after_file(
                append, record, key, topic=topic, store_host=store_host, wait=wait
            )
        return self._failed(_not_appended(result))

    async def _append_after_file(
        self,
        append: Callable[[bytearray, str, int], AppendResult],
        record: bytearray,
        key: str,
        *,
        topic: str,
        store_host: tuple[str, int],
        wait: bool,
    ) -> PutMessageResult:
        """The slow path: await the next CommitLog file, append again, finish."""
        result = AppendResult(AppendStatus.NEED_FILE)
        while result.status is AppendStatus.NEED_FILE:
            failure = await self._wait_for_file()
            if failure is not None:
                return self._failed(failure)
            result = append(record, key, self._clock.now_ms())
        if result.status is not _APPENDED:
            return self._failed(_not_appended(result))
        finished = self._finish(result, topic, store_host, wait)
        return finished if isinstance(finished, PutMessageResult) else await finished

    async def _wait_for_file(self) -> PutMessageResult | None:
        if not self._stalled_since_ms:
            self._stalled_since_ms = self._clock.monotonic_ms()
        self._waiting_for_file += 1
        self._no_waiters.clear()
        try:
            await self._commit_log.allocate_next_file()
        except (StoreError, ServiceStateError) as exc:
            if is_out_of_space(exc):
                return self._out_of_space(exc)
            log.error("creating the next CommitLog file failed: %s", exc)
            return _refused(PutMessageStatus.CREATE_MAPEDFILE_FAILED, str(exc))
        else:
            if self._no_space_until_ms:
                self._no_space_until_ms = 0
                log.warning("disk space is back: a new CommitLog file was created; puts resume")
        finally:
            self._stalled_since_ms = 0
            self._waiting_for_file -= 1
            if not self._waiting_for_file:
                self._no_waiters.set()
        return None

    def _finish(
        self,
        appended: AppendResult,
        topic: str,
        store_host: tuple[str, int],
        wait: bool,
        single: MessageExtBrokerInner | None = None,
    ) -> PutMessageResult | Awaitable[PutMessageResult]:
        # Woken before the flush is asked for, so this burst is dispatched before the
        # msync starts rather than while the msync thread waits for the GIL to finish
        # (under uvloop both orders measured about the same).
        if single is not None and self._dispatch_put is not None:
            self._dispatch_put(single, appended)
        else:
            self._wakeup()
        flushed: asyncio.Future[bool] | None = None
        if self._sync_flush and self.group_commit is not None:
            # WAIT=false still asks (RocketMQ wakes the service); the answer is not awaited.
            flushed = self.group_commit.request(appended.next_offset)
        self._stats.count_put(topic, appended.message_count, appended.wrote_bytes)
        # One lookup for a whole batch's ids.
        prefix = self._msg_id_prefixes.get(store_host) or self._msg_id_prefix(store_host)
        offsets = appended.record_offsets
        result = PutMessageResult(
            _OK,
            appended.physical_offset,
            appended.wrote_bytes,
            appended.queue_offset,
            offset_msg_ids(prefix, offsets)
            if offsets
            else [f"{prefix}{appended.physical_offset:016X}"],
            appended.store_timestamp,
            appended.message_count,
        )
        if wait and (flushed is not None or self._role is BrokerRole.SYNC_MASTER):
            return self._after_promises(result, appended.next_offset, flushed)
        return result

    async def _after_promises(
        self, result: PutMessageResult, next_offset: int, flushed: asyncio.Future[bool] | None
    ) -> PutMessageResult:
        result.status = await self._keep_promises(next_offset, flushed)
        return result

    async def _keep_promises(
        self, next_offset: int, flushed: asyncio.Future[bool] | None
    ) -> PutMessageStatus:
        """Flush and replica results combined: a replica failure wins over a flush one."""
        status = _OK
        if self._role is BrokerRole.SYNC_MASTER:
            waiter = self.replica_waiter
            replica = PutMessageStatus.SLAVE_NOT_AVAILABLE
            if waiter is not None:
                replica = await waiter(next_offset)
            if replica is not _OK:
                status = replica
        if flushed is not None and not await flushed and status is _OK:
            status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        return status

    def _out_of_space(self, exc: BaseException) -> PutMessageResult:
        """No room for the next CommitLog file: refuse (CODE 14) for a second, then retry.

        Logged once per state change, not once per refused put.
        """
        if not self._no_space_until_ms and self.on_out_of_space is not None:
            self.on_out_of_space()  # fresh figures for the refusals' remark
        if not self._no_space_until_ms:
            log.error(
                "disk full: the next CommitLog file cannot be allocated (%s); puts refused", exc
            )
        self._no_space_until_ms = self._clock.monotonic_ms() + _NO_SPACE_RETRY_MS
        return _refused(PutMessageStatus.SERVICE_NOT_AVAILABLE, "disk full")

    def _msg_id_prefix(self, store_host: tuple[str, int]) -> str:
        """offsetMsgId's store ip + port in upper-case hex (cached); the offset's 16
        hex digits follow it."""
        prefix = self._msg_id_prefixes.get(store_host)
        if prefix is None:
            raw = pack_ip(store_host[0]) + _PORT.pack(store_host[1])
            prefix = self._msg_id_prefixes[store_host] = raw.hex().upper()
        return prefix

    def _failed(self, result: PutMessageResult) -> PutMessageResult:
        self._stats.put_message_failed_times += 1
        return result


def _batch_args(batch: MessageExtBatch) -> tuple[Any, ...] | None:
    """``batch_kernel_args`` of a batch put; None: the kernels are not built, or the
    batch holds what the reference must word."""
    try:
        batch_props = properties_to_string(batch.properties)
    except LocalProtocolError:
        return None
    return batch_kernel_args(
        batch.body, batch_props, topic=batch.topic, queue_id=batch.queue_id,
        sys_flag=batch.sys_flag, born_timestamp=batch.born_timestamp,
        born_host=batch.born_host, store_host=batch.store_host,
        reconsume_times=batch.reconsume_times,
    )  # fmt: skip


def is_out_of_space(exc: BaseException) -> bool:
    """Whether a file creation failed for want of disk space (ENOSPC, EDQUOT)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        cause = cause.__cause__
    return False


def _not_appended(result: AppendResult) -> PutMessageResult:
    """The put's refusal for an append that failed (not PUT_OK, not NEED_FILE)."""
    if result.status in _TOO_LARGE:
        return _refused(PutMessageStatus.MESSAGE_ILLEGAL, "record does not fit a file")
    return _refused(PutMessageStatus.UNKNOWN_ERROR, f"append failed: {result.status.value}")


def _encode_failure(properties: str, exc: LocalProtocolError) -> PutMessageResult:
    """PROPERTIES_SIZE_EXCEEDED when the encoded properties are too long, else ILLEGAL."""
    # A lone surrogate (a JSON header may carry one) has no UTF-8 form: ILLEGAL, not a
    # second exception out of the put.
    raw = properties.encode("utf-8", "surrogatepass")
    if len(raw) > PROPERTIES_MAX_LENGTH:
        return _refused(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, str(exc))
    return _refused(PutMessageStatus.MESSAGE_ILLEGAL, str(exc))
