"""Outcomes of store operations, with RocketMQ's names.

Owns: ``PutMessageStatus`` and ``GetMessageStatus`` (the names of
``store/.../PutMessageStatus.java`` and ``GetMessageStatus.java``), and the result
values a put or a get returns.

Must not: map statuses to response codes (the broker's ``status_map`` does, in one
table) or hold references to files beyond what a result hands to its caller.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Self, overload

from aiorocketmq.store.mapped_file import SelectedBuffer


class PutMessageStatus(enum.Enum):
    """How a put ended. Only PUT_OK and the three *_TIMEOUT/SLAVE ones stored the message."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    @property
    def stored(self) -> bool:
        """True when the message is in the CommitLog (a timeout still stored it)."""
        return self in _STORED


_STORED = frozenset(
    {
        PutMessageStatus.PUT_OK,
        PutMessageStatus.FLUSH_DISK_TIMEOUT,
        PutMessageStatus.FLUSH_SLAVE_TIMEOUT,
        PutMessageStatus.SLAVE_NOT_AVAILABLE,
    }
)


class GetMessageStatus(enum.Enum):
    """How a get (pull) ended; see ``specs/store.md`` §9.1 for when each happens."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class PutMessageResult:
    """What a put returns.

    Attributes:
        status: how it ended.
        physical_offset: CommitLog offset of the (first) record, -1 when not stored.
        wrote_bytes: bytes appended (all records of a batch).
        queue_offset: ConsumeQueue offset of the (first) message, -1 when not stored.
        msg_ids: offsetMsgIds of the stored messages, in order.
        store_timestamp: the broker time written into the record(s), ms.
        message_count: messages stored (1, or the batch size).
        remark: why a put was refused, for the client.
    """

    status: PutMessageStatus
    physical_offset: int = -1
    wrote_bytes: int = 0
    queue_offset: int = -1
    msg_ids: list[str] = field(default_factory=list)
    store_timestamp: int = 0
    message_count: int = 0
    remark: str | None = None

    @property
    def ok(self) -> bool:
        """True when the message was stored (possibly with a flush/slave timeout)."""
        return self.status.stored


class RunRecords(Sequence[memoryview]):
    """The records of a run (one held slice of a file) as views into it, made when
    first read. A pull reply never reads them: it writes the run as one view, and a
    view per record cost a 1,000-record pull about 0.3 ms of the loop, made and
    released.

    Args:
        view: the run's slice.
        base: the CommitLog offset ``view`` starts at.
        starts: each record's CommitLog offset.
        sizes: each record's size.
    """

    __slots__ = ("_base", "_sizes", "_starts", "_view", "_views")

    def __init__(self, view: memoryview, base: int, starts: list[int], sizes: list[int]) -> None:
        self._view = view
        self._base = base
        self._starts = starts
        self._sizes = sizes
        self._views: list[memoryview] | None = None

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> memoryview: ...
    @overload
    def __getitem__(self, index: slice) -> list[memoryview]: ...
    def __getitem__(self, index: int | slice) -> memoryview | list[memoryview]:
        return self._made()[index]

    def __iter__(self) -> Iterator[memoryview]:
        return iter(self._made())

    def _made(self) -> list[memoryview]:
        if self._views is None:
            view, base = self._view, self._base  # a released run raises ValueError here
            self._views = [
                view[start - base : start - base + size]
                for start, size in zip(self._starts, self._sizes, strict=True)
            ]
        return self._views

    def release(self) -> None:
        """Release the views made (none, when nobody read them)."""
        for view in self._views or ():
            view.release()


class _HeldRecords:
    """Whole stored records as memoryviews, with the files they live in held.

    A pull or query reply writes ``wire_views()`` (or a ``body()`` copy) and then
    calls ``release()``; until then the files cannot be unmapped under the views.
    A zero-copy reply calls it only once the transport let go of the views (the
    remoting connection does). Use it as a context manager to release on exit.
    After ``release()`` the views are released too: touching one raises
    ``ValueError`` instead of reading a file that may be gone. Releasing twice is
    a no-op.

    Filled by ``add_message``, ``buffers`` starts with one held slice per record, in
    ``messages`` order; ``wire_views()`` may append more (runs of records), released
    with the rest. Filled by ``add_run`` (a pull's vectorised scan), ``buffers`` is the
    one held slice from the first record to the end of the last, the ``messages`` are
    views into it, readable until ``release()``, and ``wire_views()`` only hands out
    the views made up front.
    """

    messages: list[memoryview] | RunRecords
    buffers: list[SelectedBuffer]
    buffer_total_size: int
    run_views: list[memoryview]  # add_run: the body's views into the one held slice

    def add_message(self, selected: SelectedBuffer) -> None:
        """Take ownership of one held record (not on a result made by ``add_run``)."""
        assert isinstance(self.messages, list)
        self.buffers.append(selected)
        self.messages.append(selected.view)
        self.buffer_total_size += selected.size

    def add_run(
        self,
        run: SelectedBuffer,
        starts: list[int],
        sizes: list[int],
        total: int,
        segments: list[tuple[int, int]],
    ) -> None:
        """Take ownership of ``run``, one held slice of the CommitLog, whose records are
        at the CommitLog offsets ``starts`` (increasing) with ``sizes`` (``total``
        bytes), back to back within each of ``segments`` (``(begin, end)`` offsets):
        one hold for a whole pull instead of one per record. Only on an empty result."""
        assert not self.buffers and not self.messages and starts
        view, base = run.view, run.start_offset
        self.buffers.append(run)
        self.messages = RunRecords(view, base, starts, sizes)
        self.buffer_total_size = total
        if run.size == total:
            self.run_views = [view]  # no gap: the slice is the body
            return
        self.run_views = [view[begin - base : end - base] for begin, end in segments]

    @property
    def message_count(self) -> int:
        """Records held (still counted after ``release()``)."""
        return len(self.messages)

    def body(self) -> bytes:
        """The records concatenated (a copy): a PULL_MESSAGE or QUERY_MESSAGE reply body."""
        return b"".join(self.messages)

    def wire_views(self) -> list[memoryview]:
        """The records as few views as possible, for a reply body written without a copy.

        Back-to-back records of one file (a queue's messages written together:
        the usual case) become one view over the run, so the transport gets one
        buffer for them instead of one per record. The run's view is a new held
        slice of the file, released by ``release()`` like the records. Joined,
        the views are exactly ``body()`` as it was before the call.

        When all records form one run, the records' own holds are released at
        once (the run holds the file, and a reply waiting for a slow socket then
        keeps two objects alive instead of two per record): ``messages`` can no
        longer be read, so decode or copy them before, never after.

        Raises:
            ValueError: the records were released.
        """
        if self.run_views:
            if not self.buffers:
                raise ValueError("records already released")
            return list(self.run_views)
        records = self.buffers[: len(self.messages)]
        if len(records) != len(self.messages):
            raise ValueError("records already released")
        if len(records) > 1:
            # Fast path, the common case: one file, no gap. A queue's records lie in
            # increasing CommitLog order, so a span equal to their total size is one run.
            first, last = records[0], records[-1]
            span = last.start_offset + last.size - first.start_offset
            if first.file is last.file and span == self.buffer_total_size:
                run = _select_run(first, first.start_offset + span)
                if run is not None:
                    # The run holds the file: the records' own holds go now, so a
                    # reply waiting for the socket keeps 2 objects alive, not 65.
                    for rec in records:
                        rec.release()
                    self.buffers = [run]
                    return [run.view]
        views: list[memoryview] = []
        i = 0
        while i < len(records):
            first, j = records[i], i + 1
            end = first.start_offset + first.size
            while j < len(records) and records[j].file is first.file:
                if records[j].start_offset != end:
                    break
                end += records[j].size
                j += 1
            run = _select_run(first, end) if j - i > 1 else None
            if run is None:
                views += (rec.view for rec in records[i:j])
            else:
                self.buffers.append(run)
                views.append(run.view)
            i = j
        return views

    def release(self) -> None:
        """Release every record and its file reference (idempotent)."""
        buffers, self.buffers = self.buffers, []
        if self.run_views:
            if isinstance(self.messages, RunRecords):
                self.messages.release()
            for view in self.run_views:
                view.release()  # views of the run: unreadable from now on, as documented
        for selected in buffers:
            selected.release()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _select_run(first: SelectedBuffer, end_offset: int) -> SelectedBuffer | None:
    """A held slice from ``first`` to ``end_offset`` in its file, or None (file gone)."""
    file = first.file
    if file is None:
        return None
    return file.select(first.start_offset - file.file_from_offset, end_offset - first.start_offset)


@dataclass(slots=True)
class GetMessageResult(_HeldRecords):
    """What a get returns: held stored records, ready to be a pull reply body.

    Release it (``release()`` or ``with``) once the reply is written.

    Attributes:
        status: see ``GetMessageStatus``.
        next_begin_offset: where the consumer should pull next.
        min_offset: the queue's min offset.
        max_offset: the queue's max offset (next offset to be written).
        messages: memoryviews of whole stored records, in queue order.
        suggest_pulling_from_slave: the consumer is far behind (data likely on disk).
        message_queue_offsets: queue offset of each returned message.
        buffers: the held slices behind ``messages``.
        buffer_total_size: bytes of all returned records.
    """

    status: GetMessageStatus
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    messages: list[memoryview] | RunRecords = field(default_factory=list)
    suggest_pulling_from_slave: bool = False
    message_queue_offsets: list[int] = field(default_factory=list)
    buffers: list[SelectedBuffer] = field(default_factory=list, repr=False)
    buffer_total_size: int = 0
    run_views: list[memoryview] = field(default_factory=list, repr=False)


@dataclass(slots=True)
class QueryMessageResult(_HeldRecords):
    """What a query by key returns (``QueryMessageResult``); release it when done.

    Attributes:
        messages: memoryviews of whole stored records (hash collisions included:
            the caller checks the real key).
        index_last_update_timestamp: endTimestamp of the newest IndexFile.
        index_last_update_phyoffset: endPhyOffset of the newest IndexFile.
        buffers: the held slices behind ``messages``.
        buffer_total_size: bytes of all returned records.
    """

    messages: list[memoryview] | RunRecords = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0
    buffers: list[SelectedBuffer] = field(default_factory=list, repr=False)
    buffer_total_size: int = 0
    run_views: list[memoryview] = field(default_factory=list, repr=False)
