"""HeldBodies: zero-copy bodies a transport may still reference, released once it lets go.

Owns: for one connection, the bodies (``BodyParts``) handed to a transport that keeps
references to what it is given (uvloop's), with the stream byte count each one's
frame ends at, and their release in order once the transport wrote past them. Why a
drain poll in the timers phase and a ``call_soon`` after it is the right moment is in
``connection.py``'s module docstring.

Must not: release a body the transport may still read, or keep one past the close's
next loop iteration.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Final

from aiorocketmq.remoting.command import BodyParts

__all__ = ["HeldBodies", "release_all"]

#: First and largest interval of the poll that waits for a non-empty transport
#: buffer to drain before zero-copy bodies written into it are released. Backing
#: off keeps a peer that stopped reading from costing more than ~20 wake-ups/s.
_DRAIN_POLL_MIN_S: Final = 0.001
_DRAIN_POLL_MAX_S: Final = 0.05


def release_all(parts: Iterable[BodyParts]) -> None:
    """Give every body's records back."""
    for body in parts:
        body.release()


class HeldBodies:
    """The bodies one connection's transport may still reference.

    Args:
        loop: the connection's loop.

    Attributes:
        transport: the connection's transport while it is open (set by the
            connection; None once closed).
        submitted: bytes handed to the transport, in stream order.
    """

    __slots__ = (
        "_loop",
        "_marks",
        "_poll_handle",
        "_poll_s",
        "_unreleased",
        "submitted",
        "transport",
    )  # fmt: skip

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.transport: asyncio.WriteTransport | None = None
        self.submitted = 0
        #: (the stream byte count its frame ends at, the body), oldest first.
        self._unreleased: deque[tuple[int, BodyParts]] = deque()
        #: ``submitted`` as seen at drain-poll ticks, oldest first.
        self._marks: deque[int] = deque()
        self._poll_handle: asyncio.Handle | None = None
        self._poll_s = _DRAIN_POLL_MIN_S

    def __len__(self) -> int:
        """Bodies handed over and not released yet."""
        return len(self._unreleased)

    def wrote(self, size: int, parts: Sequence[BodyParts] = ()) -> None:
        """``size`` bytes were handed to the transport, holding ``parts``."""
        self.submitted += size
        if not parts:
            return
        self._unreleased.extend((self.submitted, p) for p in parts)
        transport = self.transport
        if transport is not None and not transport.get_write_buffer_size():
            # All sent: release from the next iteration's idle phase.
            self._loop.call_soon(self._release_written, self.submitted)
        self._arm()

    def close(self) -> None:
        """The connection closed: release every body on the next loop iteration."""
        if self._poll_handle is not None:
            self._poll_handle.cancel()
            self._poll_handle = None
        if self._unreleased:
            written = [p for _, p in self._unreleased]
            self._unreleased.clear()
            self._loop.call_soon(release_all, written)
        self.transport = None

    def _arm(self) -> None:
        """Start the drain poll unless it runs or nothing waits."""
        if self._poll_handle is None and self._unreleased and self.transport is not None:
            self._poll_handle = self._loop.call_later(self._poll_s, self._poll_drained)

    def _poll_drained(self) -> None:
        """Timers phase: what the transport wrote decides which bodies it let go of.

        ``_marks`` are byte counts handed to the transport as seen at earlier ticks,
        each at the start of a loop iteration, which is where uvloop's write
        requests end (it queues a loop iteration's writes into one ``uv_write``).
        Once the transport wrote past a mark, every request holding bytes before it
        completed, so bodies ending before it are free, after this iteration's
        pending phase runs deferred completions: hence the ``call_soon``.
        """
        self._poll_handle = None
        transport = self.transport
        if transport is None or not self._unreleased:
            return
        marks = self._marks
        if not marks or marks[-1] != self.submitted:
            marks.append(self.submitted)
        written = self.submitted - transport.get_write_buffer_size()
        limit = -1
        while marks and marks[0] <= written:
            limit = marks.popleft()
        if limit >= self._unreleased[0][0]:
            self._poll_s = _DRAIN_POLL_MIN_S
            self._loop.call_soon(self._release_written, limit)
        else:
            self._poll_s = min(self._poll_s * 2, _DRAIN_POLL_MAX_S)
        self._arm()

    def _release_written(self, limit: int) -> None:
        """Release bodies that end at or before byte ``limit`` of the stream."""
        unreleased = self._unreleased
        while unreleased and unreleased[0][0] <= limit:
            unreleased.popleft()[1].release()
