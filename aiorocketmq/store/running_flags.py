"""RunningFlags: whether the store may be read and written, and why not.

Owns: the store's health bits (``RunningFlags.java``). Puts check ``writeable``
(SERVICE_NOT_AVAILABLE when false), gets check ``readable``. The cleanup service
sets and clears DISK_FULL; the dispatcher sets the two error bits when a
ConsumeQueue or IndexFile write fails for good; shutdown keeps the abort file when
the store is not writeable, so the next start recovers as after a crash.

Must not: decide anything itself (callers set the bits), or hold other state.
"""

from __future__ import annotations

import enum

__all__ = ["RunningFlag", "RunningFlags"]


class RunningFlag(enum.IntFlag):
    """One health bit (RocketMQ's values)."""

    NOT_READABLE = 1
    NOT_WRITEABLE = 2
    WRITE_LOGICS_QUEUE_ERROR = 4
    WRITE_INDEX_FILE_ERROR = 8
    DISK_FULL = 16


# Any of these makes the store refuse puts (RunningFlags.isWriteable). Plain ints:
# the put path reads them on every put, and IntFlag arithmetic is a Python call.
_NOT_WRITEABLE_BITS = int(
    RunningFlag.NOT_WRITEABLE
    | RunningFlag.WRITE_LOGICS_QUEUE_ERROR
    | RunningFlag.DISK_FULL
    | RunningFlag.WRITE_INDEX_FILE_ERROR
)
_NOT_READABLE = int(RunningFlag.NOT_READABLE)


class RunningFlags:
    """The store's health bits; all methods are plain and cheap (the put path reads them).

    Attributes:
        bits: the current ``RunningFlag`` bits, as a plain int.
    """

    __slots__ = ("bits",)

    def __init__(self) -> None:
        self.bits = 0

    @property
    def readable(self) -> bool:
        """Gets are served."""
        return not self.bits & _NOT_READABLE

    @property
    def writeable(self) -> bool:
        """Puts are accepted: no error bit, disk not full."""
        return not self.bits & _NOT_WRITEABLE_BITS

    @property
    def disk_full(self) -> bool:
        """The cleanup service found the disk above the warning ratio."""
        return bool(self.bits & RunningFlag.DISK_FULL)

    def set(self, flag: RunningFlag) -> bool:
        """Set ``flag``; return whether it was already set."""
        before = bool(self.bits & flag)
        self.bits |= int(flag)
        return before

    def clear(self, flag: RunningFlag) -> bool:
        """Clear ``flag``; return whether it was set."""
        before = bool(self.bits & flag)
        self.bits &= ~int(flag)
        return before

    def get_and_make_disk_full(self) -> bool:
        """Mark the disk full (puts refused); True if it was not full before."""
        return not self.set(RunningFlag.DISK_FULL)

    def get_and_make_disk_ok(self) -> bool:
        """Clear the disk-full mark; True if it was full before."""
        return self.clear(RunningFlag.DISK_FULL)

    def make_logics_queue_error(self) -> None:
        """A ConsumeQueue write failed for good (the store stops taking puts)."""
        self.set(RunningFlag.WRITE_LOGICS_QUEUE_ERROR)

    def make_index_file_error(self) -> None:
        """An IndexFile could not be created (the store stops taking puts)."""
        self.set(RunningFlag.WRITE_INDEX_FILE_ERROR)

    def __repr__(self) -> str:
        return f"RunningFlags({RunningFlag(self.bits)!r})"
