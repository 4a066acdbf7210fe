"""Message body compression, as RocketMQ 4.x clients do it (zlib, RFC 1950 streams).

Owns: compressing a body for sending (``compress_body``) and inflating a stored body
for a consumer (``decompress_body``), honouring the sysFlag's COMPRESSED bit and its
compression-type bits, with a hard cap on the inflated size.

Must not: do I/O, or inflate without a bound: a compressed body is peer input, and a
few KiB of zlib can expand to gigabytes.

Facts: C++ and Java compress with level 5 (the stream starts ``78 5E``); ali-ons with
zlib's default (``78 9C``). Clients before 4.9.4 leave the type bits (0x700) at 0,
meaning zlib; Java 4.9.4+ sets 0x300 (ZLIB) as well. LZ4 (0x100) and ZSTD (0x200) are
defined by 4.9.4+ but never produced by the clients we serve, so they are rejected.
"""

from __future__ import annotations

import zlib
from typing import Final

from aiorocketmq.common.constants import (
    COMPRESSION_TYPE_LZ4,
    COMPRESSION_TYPE_ZSTD,
    compression_type,
    is_compressed,
)
from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError

DEFAULT_COMPRESS_LEVEL: Final = 5
"""Level used by the Java (``compressMsgBodyOverHowmuch`` path) and C++ producers."""

DEFAULT_COMPRESS_OVER_BYTES: Final = 4096
"""Producers compress bodies of at least this many bytes (``compressMsgBodyOverHowmuch``)."""

DEFAULT_MAX_INFLATED_BYTES: Final = 64 * 1024 * 1024
"""Cap on an inflated body: 16x the 4 MiB message limit, far beyond any real message."""

_COMPRESSION_NAMES: Final = {COMPRESSION_TYPE_LZ4: "LZ4", COMPRESSION_TYPE_ZSTD: "ZSTD"}


def compress_body(
    body: bytes | bytearray | memoryview, level: int = DEFAULT_COMPRESS_LEVEL
) -> bytes:
    """Deflate a body into a zlib stream, as a producer does before setting bit 0x1.

    Args:
        body: the raw body.
        level: zlib level 0-9 (default 5, as RocketMQ's clients).

    Returns:
        The zlib stream (2-byte header, deflate data, Adler-32 trailer).

    Raises:
        LocalProtocolError: ``level`` is outside 0-9.
    """
    if not 0 <= level <= 9:
        raise LocalProtocolError(f"zlib level must be 0-9, got {level}")
    return zlib.compress(body, level)


def decompress_body(
    body: bytes | bytearray | memoryview,
    sys_flag: int,
    *,
    max_size: int = DEFAULT_MAX_INFLATED_BYTES,
) -> bytes:
    """Return a message body as the producer sent it, inflating it when flagged.

    Args:
        body: the body as stored (compressed when ``sys_flag & 0x1``).
        sys_flag: the record's sysFlag (the store's, which keeps the producer's bits).
        max_size: largest inflated size accepted, in bytes.

    Returns:
        ``bytes(body)`` when bit 0x1 is clear, else the inflated body. Bytes after the
        end of the zlib stream are ignored, as Java's ``InflaterInputStream`` does.

    Raises:
        RemoteProtocolError: unsupported (LZ4, ZSTD) or unknown compression type; not a
            valid zlib stream; stream cut short; inflated size above ``max_size``.
    """
    if not is_compressed(sys_flag):
        return bytes(body)
    kind = compression_type(sys_flag)
    if kind in _COMPRESSION_NAMES:
        raise RemoteProtocolError(
            f"unsupported compression {_COMPRESSION_NAMES[kind]} (sysFlag {sys_flag:#x})"
        )
    return inflate_bounded(body, max_size)


def inflate_bounded(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    """Inflate one zlib stream, refusing to produce more than ``max_size`` bytes.

    Raises:
        RemoteProtocolError: bad stream, truncated stream, or output over ``max_size``.
        LocalProtocolError: ``max_size`` is negative.
    """
    if max_size < 0:
        raise LocalProtocolError(f"max_size must be >= 0, got {max_size}")
    inflater = zlib.decompressobj()
    try:
        # Asking for one byte more than allowed tells "exactly max_size" from "too big"
        # without ever holding more than max_size + 1 bytes.
        out = inflater.decompress(data, max_size + 1)
    except zlib.error as exc:
        raise RemoteProtocolError(f"compressed body is not a valid zlib stream: {exc}") from exc
    if len(out) > max_size:
        raise RemoteProtocolError(f"compressed body inflates beyond {max_size} bytes")
    if not inflater.eof:
        raise RemoteProtocolError("compressed body ends before its zlib stream does")
    return out
