"""DispatchSoon: a master's puts are dispatched in a callback after their replies.

Owns: the hand-over from the put path to the dispatcher. A put notes what it appended
(``note_put``, or ``note_fields`` of a plain put, for a single message and its append;
``note_batch`` for anything else); one callback per loop iteration, scheduled by the
first note, then runs the dispatcher's inline steps (``dispatch_fields`` for each single,
``dispatch_now`` for the rest; from ``SCAN_FROM_PUTS`` singles on, one ``dispatch_now``
for them all). It runs
after the callback that handled the requests, which wrote their replies on its way
out: a sender no longer waits for its message's queue unit and index keys (RocketMQ
too replies before its ReputMessageService dispatches), and the puts of one read are
dispatched together.

Must not: reorder records (``dispatch_fields`` of a record that is not next falls back
to the scan, which takes every record in CommitLog order), or defer past the loop
iteration (pull long polling and the lag figures count on dispatch right away).
Outside a running loop (a store driven by hand) the dispatch is immediate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final

from aiorocketmq.store.commit_log import AppendResult
from aiorocketmq.store.inner_message import MessageExtBrokerInner

__all__ = ["SCAN_FROM_PUTS", "DispatchSoon"]

_Noted = tuple[str, int, int, int, str, int, int, int, int]
"""A noted single put: topic, queue id, sysFlag, prepared-transaction offset, stored
properties, physical offset, size, queue offset and store time, in the order of
``ReputMessageService.dispatch_fields``'s parameters."""

SCAN_FROM_PUTS: Final = 8
"""From this many single puts in one iteration (pipelined sends: many requests per
read), one scan dispatches them together: units written per queue in runs, keys
hashed in one pass, one notice per queue. A sync sender's lone put keeps
``dispatch_fields``, which reads nothing back. With async sends 256 in flight (about 32
puts per iteration) the scan took the broker from 26-27 to 23-24 µs per message; any
threshold from 2 to 16 measured the same there."""


class DispatchSoon:
    """Collects the puts of one loop iteration for one dispatch callback.

    Args:
        dispatch_fields: the dispatcher's step for one single put's record, given the
            noted fields (``_Noted``) as positional arguments.
        dispatch_now: the dispatcher's step for whatever was appended.
    """

    __slots__ = ("_batch", "_dispatch_fields", "_dispatch_now", "_loop", "_puts", "_scheduled")

    def __init__(
        self,
        dispatch_fields: Callable[..., None],
        dispatch_now: Callable[[], None],
    ) -> None:
        self._dispatch_fields = dispatch_fields
        self._dispatch_now = dispatch_now
        self._puts: list[_Noted] = []
        self._batch = False
        self._scheduled = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def note_put(self, msg: MessageExtBrokerInner, appended: AppendResult) -> None:
        """A single put appended ``msg`` (stored as sent) as ``appended`` says.

        Its fields are noted, not a request: the dispatcher takes the record from them
        (``dispatch_fields``), and a scan reads the record back anyway.
        """
        self._puts.append(
            (msg.topic, msg.queue_id, msg.sys_flag, msg.prepared_transaction_offset,
             msg.stored_properties(), appended.physical_offset, appended.wrote_bytes,
             appended.queue_offset, appended.store_timestamp)
        )  # fmt: skip
        self._schedule()

    def note_fields(  # noqa: PLR0917 - a plain put's fields, positional on the hot path
        self, topic: str, queue_id: int, sys_flag: int, properties: str, physical_offset: int,
        wrote_bytes: int, queue_offset: int, store_timestamp: int,
    ) -> None:  # fmt: skip
        """``note_put`` of a plain put given by its fields (no transaction offset)."""
        self._puts.append(
            (topic, queue_id, sys_flag, 0, properties, physical_offset, wrote_bytes,
             queue_offset, store_timestamp)
        )  # fmt: skip
        self._schedule()

    def note_batch(self) -> None:
        """A put appended records the dispatcher must scan."""
        self._batch = True
        self._schedule()

    def _schedule(self) -> None:
        if self._scheduled:
            return
        loop = self._loop
        if loop is None or not loop.is_running():
            # Asked once per loop: CPython 3.11's get_running_loop is a getpid() call.
            try:
                loop = self._loop = asyncio.get_running_loop()
            except RuntimeError:
                self.run()
                return
        self._scheduled = True
        loop.call_soon(self.run)

    def run(self) -> None:
        """Dispatch what was noted (the callback; also callable directly)."""
        self._scheduled = False
        puts, self._puts = self._puts, []
        batch, self._batch = self._batch, False
        if len(puts) >= SCAN_FROM_PUTS:
            batch = True  # the scan takes them, in CommitLog order
        else:
            dispatch = self._dispatch_fields
            for put in puts:
                dispatch(*put)
        if batch:
            self._dispatch_now()
