"""StoreCheckpoint: the 4096-byte ``checkpoint`` file recovery starts from.

Owns: the three timestamps and their file (``specs/store.md`` §7.1)::

    offset  size  field                 updated by
    0       8     physicMsgTimestamp    CommitLog flush: store time of the last flushed record
    8       8     logicsMsgTimestamp    every ConsumeQueue write (in memory)
    16      8     indexMsgTimestamp     an IndexFile filling up (its endTimestamp)
    24..4095      zero

Values live in memory; ``encode()`` snapshots them on the loop and
``write_checkpoint_blocking`` writes and fsyncs the snapshot from an executor (on the
periodic ConsumeQueue flush, when an index file fills, and at shutdown).

Must not: decide recovery (``recovery.py`` reads ``min_timestamp`` and decides).
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

CHECKPOINT_FILE_SIZE = 4096
_FIELDS = struct.Struct(">qqq")
#: RocketMQ subtracts 3 s from the checkpoint's minimum time before trusting it,
#: so a record stored just before the checkpoint was taken is rescanned too.
_SAFETY_MARGIN_MS = 3000


class StoreCheckpoint:
    """The checkpoint file's values, loaded at start and written by ``flush_blocking``."""

    __slots__ = ("index_msg_timestamp", "logics_msg_timestamp", "path", "physic_msg_timestamp")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0

    @classmethod
    def load_blocking(cls, path: Path) -> StoreCheckpoint:
        """Read ``path`` if it exists (a missing or short file reads as zeros)."""
        checkpoint = cls(path)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return checkpoint
        if len(data) >= _FIELDS.size:
            (
                checkpoint.physic_msg_timestamp,
                checkpoint.logics_msg_timestamp,
                checkpoint.index_msg_timestamp,
            ) = _FIELDS.unpack_from(data, 0)
        return checkpoint

    def min_timestamp(self) -> int:
        """``min(physic, logics) - 3000``, floored at 0 (``getMinTimestamp``)."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - _SAFETY_MARGIN_MS)

    def min_timestamp_index(self) -> int:
        """``min(min_timestamp(), indexMsgTimestamp)`` (``getMinTimestampIndex``)."""
        return min(self.min_timestamp(), self.index_msg_timestamp)

    def encode(self) -> bytes:
        """The whole 4096-byte file."""
        head = _FIELDS.pack(
            self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp
        )
        return head + bytes(CHECKPOINT_FILE_SIZE - len(head))


def write_checkpoint_blocking(path: Path, data: bytes) -> None:
    """Write an encoded checkpoint in place and fsync it (run in the store's executor).

    In place like RocketMQ's mapped page: the 24 meaningful bytes sit in one disk
    sector, so a crash leaves either the old or the new values, never a mix.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, data, 0)
        os.fsync(fd)
    finally:
        os.close(fd)
