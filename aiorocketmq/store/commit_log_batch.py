"""A batch of records on its way into the CommitLog: framing, patching, verifying.

Owns: the steps ``CommitLog.append_batch`` takes on records encoded elsewhere: their
sizes (``frame_batch``), the QUEUEOFFSET, PHYSICALOFFSET and STORETIMESTAMP the
append assigns (``patch_batch``), and ``verify_writes``'s check that records decode
with their CRCs before they reach a file (``verify_records``). In C when built
(``common/_record_kernels.pyx``), with the codec's functions as the reference.

Must not: touch files or the queue-offset table (the CommitLog does).
"""

from __future__ import annotations

import struct
from typing import Final

from aiorocketmq.common.errors import ProtocolError
from aiorocketmq.common.kernels import load_kernel
from aiorocketmq.common.message_codec import MIN_RECORD_SIZE, decode_record, patch_record
from aiorocketmq.store.errors import StoreError

__all__ = ["frame_batch", "patch_batch", "verify_records"]

_INT: Final = struct.Struct(">i")


def frame_batch(records: bytearray) -> list[int] | None:
    """TOTALSIZE of each record back to back, or None if they do not fill ``records``."""
    if _KERNEL is not None:
        framed: list[int] | None = _KERNEL.frame_records(records, MIN_RECORD_SIZE)
        return framed
    sizes = []
    pos, end = 0, len(records)
    while pos < end:
        if end - pos < MIN_RECORD_SIZE:
            return None
        total = _INT.unpack_from(records, pos)[0]
        if total < MIN_RECORD_SIZE or pos + total > end:
            return None
        sizes.append(total)
        pos += total
    return sizes or None


def patch_batch(
    records: bytearray, sizes: list[int], base: int, first_queue_offset: int, store_timestamp: int
) -> list[int]:
    """Patch every record of a batch placed at ``base``; return their offsets."""
    if _KERNEL is not None:
        try:
            patched: list[int] = _KERNEL.patch_records(
                records, sizes, base, first_queue_offset, store_timestamp
            )
            return patched
        except OverflowError:
            pass  # a value past int64: the loop below says so in patch_record's words
    offsets = []
    pos = 0
    for index, record_size in enumerate(sizes):
        offsets.append(base + pos)
        patch_record(
            records,
            pos,
            queue_offset=first_queue_offset + index,
            physical_offset=base + pos,
            store_timestamp=store_timestamp,
        )
        pos += record_size
    return offsets


def verify_records(records: bytearray, count: int) -> None:
    """``verify_writes``: every record decodes, with its CRC, and they fill the buffer."""
    pos = 0
    try:
        for _ in range(count):
            view = decode_record(records, pos, check_crc=True)
            pos = view.end
    except ProtocolError as exc:
        raise StoreError(f"refusing to write a record that does not verify: {exc}") from exc
    if pos != len(records):
        raise StoreError(f"records end at {pos}, the buffer at {len(records)}")


#: The record kernels (``common/_record_kernels.pyx``) when built and not turned off.
_KERNEL = load_kernel("aiorocketmq.common._record_kernels")
