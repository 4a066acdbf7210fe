"""DispatchRequest: what the dispatcher hands the ConsumeQueue and the IndexFile.

Owns: the value object of specs/store.md §8.2 (``DispatchRequest.java``), built once
per CommitLog record by the dispatcher (put path, recovery, slave replication) and
read by ``ConsumeQueue.put`` and ``IndexService.build_index``; and ``pack_units``, a
run of them as the ConsumeQueue units they make (in C when built: the twin is in
``store/_dispatch_kernels.pyx``, and the same tests run against both).

Must not: compute tagsCode (the dispatcher does: a tag hash, or a deliver time for
``SCHEDULE_TOPIC_XXXX``), or keep a reference into a mapped file.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from aiorocketmq.common.constants import MessageSysFlag
from aiorocketmq.common.kernels import load_kernel
from aiorocketmq.common.properties import MessageConst, string_to_properties
from aiorocketmq.common.record_view import RecordView

__all__ = ["CQ_UNIT", "DispatchRequest", "kernel_answer", "pack_units", "py_pack_units"]

CQ_UNIT: Final = struct.Struct(">qiq")
"""A ConsumeQueue unit: physical offset, size, tagsCode (``consume_queue.CQ_UNIT_DTYPE``)."""


@dataclass(slots=True)
class DispatchRequest:
    """One stored record, as the ConsumeQueue and index builders need it.

    Attributes:
        topic: the record's topic.
        queue_id: its queue id.
        commit_log_offset: its physical offset.
        msg_size: its TOTALSIZE.
        tags_code: the ConsumeQueue unit's tagsCode.
        store_timestamp: STORETIMESTAMP (ms).
        consume_queue_offset: QUEUEOFFSET: where its unit goes.
        keys: the ``KEYS`` property (space-separated), if any.
        uniq_key: the ``UNIQ_KEY`` property, if any.
        sys_flag: SYSFLAG (the transaction type decides what is built).
        prepared_transaction_offset: PREPARED TRANSACTION OFFSET.
        properties_raw: the stored properties string.
        properties: ``properties_raw`` parsed, once someone needed the map (the
            record walk leaves it None: ``parsed_properties`` parses on demand).
    """

    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: str | None = None
    uniq_key: str | None = None
    sys_flag: int = 0
    prepared_transaction_offset: int = 0
    properties_raw: str = ""
    properties: dict[str, str] | None = field(default=None, compare=False)

    def parsed_properties(self) -> dict[str, str]:
        """The properties as a map, parsed from ``properties_raw`` on first use."""
        props = self.properties
        if props is None:
            props = self.properties = string_to_properties(self.properties_raw)
        return props

    @property
    def transaction_type(self) -> int:
        """``sys_flag & 0xC``: NOT_TYPE 0, PREPARED 4, COMMIT 8, ROLLBACK 12."""
        return self.sys_flag & MessageSysFlag.TRANSACTION_ROLLBACK_TYPE

    @property
    def builds_consume_queue(self) -> bool:
        """Only NOT_TYPE and COMMIT records get a ConsumeQueue unit."""
        return self.transaction_type in (
            MessageSysFlag.TRANSACTION_NOT_TYPE,
            MessageSysFlag.TRANSACTION_COMMIT_TYPE,
        )

    @classmethod
    def from_record(cls, record: RecordView, tags_code: int) -> DispatchRequest:
        """Build one from a decoded record; ``tags_code`` comes from the caller."""
        props = record.properties
        return cls(
            topic=record.topic,
            queue_id=record.queue_id,
            commit_log_offset=record.physical_offset,
            msg_size=record.total_size,
            tags_code=tags_code,
            store_timestamp=record.store_timestamp,
            consume_queue_offset=record.queue_offset,
            keys=props.get(MessageConst.PROPERTY_KEYS),
            uniq_key=props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            sys_flag=record.sys_flag,
            prepared_transaction_offset=record.prepared_transaction_offset,
            properties_raw=record.properties_raw,
            properties=props,
        )


def kernel_answer(name: str, requests: Sequence[DispatchRequest], *args: Any) -> Any:
    """What the dispatch kernel's ``name`` answers for ``requests``, or NotImplemented
    when the caller's reference must: the kernel is not built, ``requests`` is not a
    list, or it holds a field the kernel cannot read as the reference does."""
    if _KERNEL is None or type(requests) is not list:
        return NotImplemented
    try:
        return getattr(_KERNEL, name)(requests, DispatchRequest, *args)
    except (TypeError, OverflowError):
        return NotImplemented


def pack_units(requests: Sequence[DispatchRequest]) -> bytes | None:
    """The units of a non-empty run of ``requests`` packed back to back; None unless
    their queue offsets are consecutive and each record ends past the one before
    (else ``ConsumeQueue.put`` sees a duplicate). In C when built."""
    packed = kernel_answer("pack_units", requests)
    return py_pack_units(requests) if packed is NotImplemented else packed


def py_pack_units(requests: Sequence[DispatchRequest]) -> bytes | None:
    """``pack_units`` in Python: the reference."""
    pack = CQ_UNIT.pack
    expect, last_end = requests[0].consume_queue_offset, -1
    parts = []
    for request in requests:
        end = request.commit_log_offset + request.msg_size
        if request.consume_queue_offset != expect or end <= last_end:
            return None
        parts.append(pack(request.commit_log_offset, request.msg_size, request.tags_code))
        expect, last_end = expect + 1, end
    return b"".join(parts)


#: ``store/_dispatch_kernels.pyx`` when built and not turned off.
_KERNEL = load_kernel("aiorocketmq.store._dispatch_kernels")
