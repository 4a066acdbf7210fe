"""The ROCKETMQ header serialization (type 1, Java's ``RocketMQSerializable``).

Owns: encoding a command's header in the binary layout and decoding it back, every
length bounds-checked: ``short code | byte language | short version | int opaque |
int flag | int remarkLen, remark | int extLen, {short keyLen, key, int valLen, val}*``
(big-endian; a zero remark length means no remark). ``frame`` chooses it by the
header-info type byte.

Must not: touch sockets, the event loop or logging. Bad input raises
``RemoteProtocolError``; a command that cannot be encoded raises ``LocalProtocolError``.
"""

from __future__ import annotations

import struct

from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError
from aiorocketmq.remoting.command import Body, RemotingCommand
from aiorocketmq.remoting.header_values import (
    INT16_MAX,
    INT16_MIN,
    HeaderFields,
    check_encodable,
    language_of,
)

__all__ = ["decode_rocketmq_header", "encode_rocketmq_header"]

_BIN_FIXED = struct.Struct(">hbhii")
_BIN_INT = struct.Struct(">i")
_BIN_SHORT = struct.Struct(">h")


def encode_rocketmq_header(cmd: RemotingCommand) -> bytes:
    """The binary header of ``RocketMQSerializable`` (code and version are shorts)."""
    check_encodable(cmd, INT16_MIN, INT16_MAX)
    try:
        parts = [_BIN_FIXED.pack(cmd.code, cmd.language.value, cmd.version, cmd.opaque, cmd.flag)]
        remark = cmd.remark.encode("utf-8") if cmd.remark else b""
        parts += (_BIN_INT.pack(len(remark)), remark)
        entries: list[bytes] = []
        for key, value in cmd.ext_fields.items():
            kb, vb = key.encode("utf-8"), value.encode("utf-8")
            entries += (_BIN_SHORT.pack(len(kb)), kb, _BIN_INT.pack(len(vb)), vb)
    except (struct.error, UnicodeEncodeError) as exc:
        raise LocalProtocolError(f"cannot encode ROCKETMQ header: {exc}") from exc
    ext = b"".join(entries)
    parts += (_BIN_INT.pack(len(ext)), ext)
    return b"".join(parts)


def _take(data: memoryview, pos: int, size: int, what: str) -> int:
    end = pos + size
    if size < 0 or end > len(data):
        raise RemoteProtocolError(f"ROCKETMQ header truncated in {what}")
    return end


def decode_rocketmq_header(data: Body) -> HeaderFields:
    """Parse a ROCKETMQ binary header; every length is bounds-checked."""
    view = memoryview(data)
    pos = _take(view, 0, _BIN_FIXED.size, "fixed part")
    code, language, version, opaque, flag = _BIN_FIXED.unpack_from(view, 0)
    try:
        (remark_len,) = _BIN_INT.unpack_from(view, pos)
        pos = _take(view, pos + 4, remark_len, "remark")
        remark = bytes(view[pos - remark_len : pos]).decode("utf-8") if remark_len > 0 else None
        (ext_len,) = _BIN_INT.unpack_from(view, pos)
        pos = _take(view, pos + 4, ext_len, "extFields")
        ext_fields = _decode_bin_map(view[pos - ext_len : pos])
    except (struct.error, UnicodeDecodeError) as exc:
        raise RemoteProtocolError(f"bad ROCKETMQ header: {exc}") from exc
    if pos != len(view):
        raise RemoteProtocolError("ROCKETMQ header has trailing bytes")
    return code, opaque, flag, language_of(language), version, remark, ext_fields


def _decode_bin_map(view: memoryview) -> dict[str, str]:
    out: dict[str, str] = {}
    pos = 0
    while pos < len(view):
        (key_len,) = _BIN_SHORT.unpack_from(view, pos)
        pos = _take(view, pos + 2, key_len, "extFields key")
        key = bytes(view[pos - key_len : pos]).decode("utf-8")
        (val_len,) = _BIN_INT.unpack_from(view, pos)
        pos = _take(view, pos + 4, val_len, "extFields value")
        out[key] = bytes(view[pos - val_len : pos]).decode("utf-8")
    return out
