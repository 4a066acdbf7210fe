"""PlainPutter: a plain single put from its fields, with no message object on the way.

Owns: the usual single put. Its caller (the broker's plain send lane, or
``MessagePutter`` for a ``MessageExtBrokerInner``) has the message's fields at hand; they
go to ``CommitLog.append_fields``, which encodes the record with its final offsets.
What the reply needs (the offset msgId and the queue offset) comes back as a tuple: no
``PutMessageResult`` is built when nobody reads one. The dispatcher is told through
``DispatchSoon.note_fields``; its callback runs after the reply is written.

Plain: stored as sent (the caller has ruled out ``DELAY`` and a transaction offset), no
transaction type, IPv4 hosts, no flush or replica promise to keep (this object exists
only under ASYNC_FLUSH on a master that is not SYNC_MASTER), nothing to refuse.

Must not: refuse or count anything it does not store. None means "not plain": nothing
was written or counted (a BLANK may have closed the current file, as the general way's
append would have), and the general way decides and words any refusal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from aiorocketmq.common.clock import Clock
from aiorocketmq.common.constants import PROPERTIES_MAX_LENGTH, TOPIC_MAX_LENGTH
from aiorocketmq.common.errors import LocalProtocolError
from aiorocketmq.common.message import BytesLike
from aiorocketmq.common.msg_id import pack_ip
from aiorocketmq.common.record_encoder import HOST_V6_BITS
from aiorocketmq.store.commit_log import CommitLog, queue_key
from aiorocketmq.store.results import PutMessageStatus
from aiorocketmq.store.store_stats import StoreStats

__all__ = ["PlainPut", "PlainPutter"]

PlainPut = tuple[str, int, int, int, int]
"""A plain put's outcome: offset msgId, queue offset, physical offset, record size and
store timestamp."""

_HOSTS_MAX: Final = 4096

_NoteFields = Callable[[str, int, int, str, int, int, int, int], None]


def _packed_host(host: tuple[str, int]) -> tuple[bytes, int] | None:
    """An IPv4 ``(ip, port)`` as a record stores it (``pack_ip`` is memoised); None
    for anything else."""
    try:
        raw = pack_ip(host[0])
    except (LocalProtocolError, TypeError):
        return None
    return (raw, host[1]) if len(raw) == 4 and 0 <= host[1] <= 0xFFFF else None


class PlainPutter:
    """Stores plain single puts given by their fields.

    Args:
        commit_log: where records go (its ``appends_fields`` must be true).
        clock: store timestamps.
        stats: put counters.
        note: ``DispatchSoon.note_fields``.
        max_body: ``maxMessageSize``.
        max_record: the largest record the general way takes.
        refused: the store's status check (``MessagePutter.check_store_status``).
        msg_id_prefix: the offset msgId's store-host prefix of a store host.
    """

    __slots__ = (
        "_clock",
        "_commit_log",
        "_hosts",
        "_max_body",
        "_max_record",
        "_msg_id_prefix",
        "_note",
        "_refused",
        "_stats",
    )  # fmt: skip

    def __init__(
        self,
        commit_log: CommitLog,
        clock: Clock,
        stats: StoreStats,
        note: _NoteFields,
        *,
        max_body: int,
        max_record: int,
        refused: Callable[[], PutMessageStatus | None],
        msg_id_prefix: Callable[[tuple[str, int]], str],
    ) -> None:
        self._commit_log = commit_log
        self._clock = clock
        self._stats = stats
        self._note = note
        self._max_body = max_body
        self._max_record = max_record
        self._refused = refused
        self._msg_id_prefix = msg_id_prefix
        self._hosts: dict[tuple[str, int], tuple[bytes, int]] = {}  # packed, as stored

    def put(  # noqa: PLR0917 - a message's fields, positional on the hot path
        self, topic: str, queue_id: int, body: BytesLike, properties: str, flag: int,
        sys_flag: int, born_timestamp: int, born_host: tuple[str, int],
        store_host: tuple[str, int], reconsume_times: int,
    ) -> PlainPut | None:  # fmt: skip
        """Store a plain message if the store takes puts now; None: not plain, or
        refused (the general way asks again and words it)."""
        if self._refused() is not None:
            return None
        hosts = self._hosts
        born, store = hosts.get(born_host), hosts.get(store_host)
        if born is None or store is None:
            born, store = _packed_host(born_host), _packed_host(store_host)
            if born is None or store is None:
                return None
            if len(hosts) >= _HOSTS_MAX:  # a sender's (ip, port) each: bounded
                hosts.clear()
            hosts[born_host], hosts[store_host] = born, store
        try:
            topic_raw = topic.encode("utf-8", "surrogateescape")
            props_raw = properties.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return None
        body_len = body.nbytes if isinstance(body, memoryview) else len(body)
        if (
            len(topic_raw) > TOPIC_MAX_LENGTH or len(props_raw) > PROPERTIES_MAX_LENGTH
            or body_len > self._max_body
        ):  # fmt: skip
            return None
        appended = self._commit_log.append_fields(
            queue_key(topic, queue_id), self._clock.now_ms(), self._max_record, body,
            topic_raw, props_raw, queue_id, flag, sys_flag & ~HOST_V6_BITS, born_timestamp,
            born, store, reconsume_times,
        )  # fmt: skip
        if appended is None:
            return None
        offset, size, queue_offset, stored_at = appended
        self._note(topic, queue_id, sys_flag, properties, offset, size, queue_offset, stored_at)
        self._stats.count_put(topic, 1, size)
        msg_id = f"{self._msg_id_prefix(store_host)}{offset:016X}"
        return msg_id, queue_offset, offset, size, stored_at
