"""The HA wire format, sans-IO: slave offset reports and master transfer frames.

Owns: encoding and incremental decoding of the two streams of RocketMQ 4.x's
classic HA connection (``HAConnection`` / ``HAService.HAClient``; specs/store.md
§11.2-11.3). Bytes in, values out; any chunking of a valid stream decodes to the
same values.

Slave -> master (``ReportDecoder``), one record per report::

    offset  width  type   meaning
    0       8      int64  the slave's max CommitLog (physical) offset, big-endian

Master -> slave (``TransferDecoder``), one frame per transfer::

    offset  width  type   meaning
    0       8      int64  masterPhyOffset: physical offset of the body's first byte
    8       4      int32  bodySize: body bytes that follow (0 = heartbeat)
    12      n      bytes  raw CommitLog bytes, not message-aligned, never spanning
                          two CommitLog files

There is no magic, version or checksum: a peer that sends a negative offset or
size, or a body larger than the decoder's limit, is not speaking this protocol,
and the decoder raises ``HAProtocolError`` (and stays broken: the frame
boundaries are lost for good).

Must not: touch sockets, the event loop or the store, or log (codecs raise).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError

__all__ = [
    "HEADER_SIZE",
    "MAX_BODY_SIZE",
    "REPORT_SIZE",
    "HAProtocolError",
    "ReportDecoder",
    "TransferDecoder",
    "TransferFrame",
    "encode_header",
    "encode_report",
]

REPORT_SIZE: Final = 8
"""Bytes of one slave offset report (``reportOffset``, a Java long)."""

HEADER_SIZE: Final = 12
"""Bytes of a transfer frame's header: int64 offset + int32 body size."""

MAX_BODY_SIZE: Final = 64 * 1024 * 1024
"""Default largest body a slave accepts. The master sends at most
``haTransferBatchSize`` (32 KiB by default); anything near a CommitLog file's size
is a corrupt header, and buffering it would only waste memory."""

_INT64_MAX: Final = (1 << 63) - 1
_INT32_MAX: Final = (1 << 31) - 1
_REPORT: Final = struct.Struct(">q")
_HEADER: Final = struct.Struct(">qi")


class HAProtocolError(RemoteProtocolError):
    """The HA peer sent bytes that are not a valid report or transfer stream."""


@dataclass(slots=True, frozen=True)
class TransferFrame:
    """One master -> slave frame.

    Attributes:
        master_offset: physical offset of ``body[0]`` on the master.
        body: the CommitLog bytes (empty for a heartbeat).
    """

    master_offset: int
    body: bytes

    @property
    def end_offset(self) -> int:
        """Physical offset just after the body."""
        return self.master_offset + len(self.body)


def encode_report(offset: int) -> bytes:
    """The 8-byte report of a slave's max physical offset.

    Raises:
        LocalProtocolError: ``offset`` is negative or beyond an int64.
    """
    if not 0 <= offset <= _INT64_MAX:
        raise LocalProtocolError(f"HA report offset out of range: {offset}")
    return _REPORT.pack(offset)


def encode_header(master_offset: int, body_size: int) -> bytes:
    """The 12-byte header of a transfer frame (``body_size`` 0 = heartbeat).

    Raises:
        LocalProtocolError: a negative or out-of-range offset or size.
    """
    if not 0 <= master_offset <= _INT64_MAX:
        raise LocalProtocolError(f"HA frame offset out of range: {master_offset}")
    if not 0 <= body_size <= _INT32_MAX:
        raise LocalProtocolError(f"HA frame body size out of range: {body_size}")
    return _HEADER.pack(master_offset, body_size)


class ReportDecoder:
    """Incremental decoder of the slave -> master stream of 8-byte offsets.

    The master only needs the newest report (Java reads the last complete long of
    its buffer), but every complete report is returned so a caller can check them.
    """

    __slots__ = ("_buf", "_error")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._error: HAProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete report held back."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[int]:
        """Add bytes; return every offset they complete, oldest first.

        Raises:
            HAProtocolError: a negative offset (then every later call raises it too).
        """
        if self._error is not None:
            raise self._error
        buf = self._buf
        buf += data
        whole = len(buf) - len(buf) % REPORT_SIZE
        offsets = [value for (value,) in _REPORT.iter_unpack(buf[:whole])] if whole else []
        del buf[:whole]
        for value in offsets:
            if value < 0:
                self._error = HAProtocolError(f"negative HA report offset {value}")
                raise self._error
        return offsets


class TransferDecoder:
    """Incremental decoder of the master -> slave stream of transfer frames.

    Args:
        max_body_size: largest body accepted; checked as soon as a header is
            complete, so a hostile size never makes the decoder buffer.
    """

    __slots__ = ("_buf", "_error", "_max_body")

    def __init__(self, max_body_size: int = MAX_BODY_SIZE) -> None:
        self._buf = bytearray()
        self._max_body = max_body_size
        self._error: HAProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes of an incomplete frame held back."""
        return len(self._buf)

    @property
    def error(self) -> HAProtocolError | None:
        """The error found after the frames last returned (the next ``feed`` raises it)."""
        return self._error

    def feed(self, data: bytes | bytearray | memoryview) -> list[TransferFrame]:
        """Add bytes; return every frame they complete, in stream order.

        The frames before a bad header are still returned; the error is then kept
        in ``error`` and raised by the next call, so a caller applies everything
        valid first and whole or chunked feeding yields the same frames.

        Raises:
            HAProtocolError: a negative offset, or a body size that is negative or
                above ``max_body_size``, with no valid frame before it in this call
                (then every later call raises it too).
        """
        if self._error is not None:
            raise self._error
        buf = self._buf
        buf += data
        frames: list[TransferFrame] = []
        pos = 0
        end = len(buf)
        while end - pos >= HEADER_SIZE:
            offset, size = _HEADER.unpack_from(buf, pos)
            error = self._check(offset, size)
            if error is not None:
                self._error = error
                self._buf = bytearray()
                if frames:
                    return frames
                raise error
            body_end = pos + HEADER_SIZE + size
            if body_end > end:
                break
            frames.append(TransferFrame(offset, bytes(buf[pos + HEADER_SIZE : body_end])))
            pos = body_end
        del buf[:pos]
        return frames

    def _check(self, offset: int, size: int) -> HAProtocolError | None:
        if offset < 0:
            return HAProtocolError(f"negative HA frame offset {offset}")
        if size < 0:
            return HAProtocolError(f"negative HA frame body size {size}")
        if size > self._max_body:
            return HAProtocolError(
                f"HA frame body of {size} bytes exceeds the limit of {self._max_body}"
            )
        return None
