"""Sans-IO framing and header serialization for RocketMQ remoting.

Owns: turning ``RemotingCommand`` values into frame bytes and an incremental
``FrameDecoder`` that turns any chunking of a byte stream back into commands.

Must not: touch sockets, the event loop or logging. Bad input raises
``RemoteProtocolError``; a command that cannot be encoded raises
``LocalProtocolError``. Nothing else escapes (``struct.error``, ``ValueError``,
``UnicodeError``... are all translated).

Frame layout (big-endian, ``specs/remoting.md`` §1.1)::

    offset  size  field
    0       4     length = 4 + header length + body length (not counting itself)
    4       4     header info: bits 31..24 serialize type, bits 23..0 header length
    8       h     header (JSON text, ROCKETMQ binary, or MSGPACK)
    8+h     rest  body

Header serializations, chosen by the type byte:

* 0 JSON: a UTF-8 object with ``code, language (name), version, opaque, flag,
  remark?, extFields?``. Stock clients send it, the C++ one with a trailing newline
  counted in the header length; extFields values may be strings, numbers or
  booleans and are normalised to strings (numbers as decimal text, booleans as
  ``"true"``/``"false"``).
* 1 ROCKETMQ (``RocketMQSerializable``): ``short code | byte language | short
  version | int opaque | int flag | int remarkLen, remark | int extLen, {short
  keyLen, key, int valLen, val}*``. A zero remark length means no remark.
* 2 MSGPACK (this project's extension): an array ``[code, language, version,
  opaque, flag, remark|nil, {extFields}]``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from typing import Any, Final, cast

import msgpack

from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError
from aiorocketmq.common.kernels import load_kernel
from aiorocketmq.remoting.body_pool import thread_body_pool
from aiorocketmq.remoting.codes import LanguageCode, SerializeType
from aiorocketmq.remoting.command import Body, BodyParts, RemotingCommand
from aiorocketmq.remoting.header_values import (
    INT32_MAX,
    INT32_MIN,
    LANGUAGE_BY_NAME,
    LANGUAGE_BY_VALUE,
    HeaderFields,
    as_int,
    check_encodable,
    language_of,
    normalize_ext_fields,
    normalize_ext_value,
)
from aiorocketmq.remoting.rocketmq_header import decode_rocketmq_header, encode_rocketmq_header

#: Largest frame accepted or sent, length field included (``com.rocketmq.remoting.frameMaxLength``).
DEFAULT_MAX_FRAME_LENGTH = 16 * 1024 * 1024
#: The header length has 24 bits.
MAX_HEADER_LENGTH = 0xFFFFFF

_PREFIX = struct.Struct(">iI")
_LENGTH = struct.Struct(">i")
_HEADER_INFO = struct.Struct(">I")

_SERIALIZE_TYPES = {st.value: st for st in SerializeType}


# ----------------------------------------------------------------------------- JSON


def _reject_constant(name: str) -> object:
    raise RemoteProtocolError(f"JSON constant {name} is not allowed")


# Built once: json.dumps/json.loads with keyword arguments build a new codec per call,
# which costs as much as the encoding itself on the hot path. Both are stateless.
_JSON_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
#: How ``_JSON_ENCODER`` writes a string (ensure_ascii=False): quoted, escaped.
_JSON_QUOTE: Final[Callable[[str], str]] = json.encoder.encode_basestring
_JSON_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """The JSON header as fastjson writes it: sorted keys, null fields left out.

    Written directly (a reply per stock-client request comes through here): the same
    text as ``json_header_by_encoder``, the reference.
    """
    check_encodable(cmd, INT32_MIN, INT32_MAX)  # extFields are str -> str from here
    quote = _JSON_QUOTE
    fields = [f"{quote(key)}:{quote(value)}" for key, value in cmd.ext_fields.items()]
    ext = f',"extFields":{{{",".join(fields)}}}' if fields else ""
    remark = "" if cmd.remark is None else f',"remark":{quote(cmd.remark)}'
    text = (
        f'{{"code":{int(cmd.code)}{ext},"flag":{int(cmd.flag)},'
        f'"language":{quote(cmd.language.name)},"opaque":{int(cmd.opaque)}{remark},'
        f'"serializeTypeCurrentRPC":"JSON","version":{int(cmd.version)}}}'
    )
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LocalProtocolError(f"header text is not encodable as UTF-8: {exc}") from exc


def json_header_by_encoder(cmd: RemotingCommand) -> bytes:
    """``encode_json_header`` through ``json.JSONEncoder``: the reference."""
    check_encodable(cmd, INT32_MIN, INT32_MAX)
    header: dict[str, Any] = {"code": cmd.code}
    if cmd.ext_fields:
        header["extFields"] = cmd.ext_fields
    header["flag"] = cmd.flag
    header["language"] = cmd.language.name
    header["opaque"] = cmd.opaque
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    header["serializeTypeCurrentRPC"] = "JSON"
    header["version"] = cmd.version
    try:
        return _JSON_ENCODER.encode(header).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LocalProtocolError(f"header text is not encodable as UTF-8: {exc}") from exc


def decode_json_header(data: Body) -> HeaderFields:
    """Parse a JSON header into ``RemotingCommand``'s leading fields, in order."""
    if _JSON_KERNEL is not None:
        fields: HeaderFields | None = _JSON_KERNEL.decode_json_header(
            data, LANGUAGE_BY_VALUE, LANGUAGE_BY_NAME, LanguageCode.OTHER, LanguageCode.JAVA
        )
        if fields is not None:  # the usual header; anything else is answered below
            return fields
    return py_decode_json_header(data)


def py_decode_json_header(data: Body) -> HeaderFields:
    """``decode_json_header`` in Python: the reference, and every unusual header."""
    try:
        obj = _JSON_DECODER.decode(bytes(data).decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise RemoteProtocolError(f"bad JSON header: {exc}") from exc
    if not isinstance(obj, dict):
        raise RemoteProtocolError("JSON header is not an object")
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        remark = normalize_ext_value(remark)
    return (
        as_int(obj.get("code"), "code"),
        as_int(obj.get("opaque", 0), "opaque"),
        as_int(obj.get("flag", 0), "flag"),
        language_of(obj.get("language")),
        as_int(obj.get("version", 0), "version"),
        remark,
        normalize_ext_fields(obj.get("extFields")),
    )


# -------------------------------------------------------------------------- MSGPACK


def encode_msgpack_header(cmd: RemotingCommand) -> bytes:
    """The MSGPACK header: one array, strings as msgpack str."""
    check_encodable(cmd, INT32_MIN, INT32_MAX)
    try:
        packed: bytes = msgpack.packb(
            (
                cmd.code,
                cmd.language.value,
                cmd.version,
                cmd.opaque,
                cmd.flag,
                cmd.remark,
                cmd.ext_fields,
            ),
            use_bin_type=True,
        )
    except (ValueError, TypeError, OverflowError, UnicodeEncodeError) as exc:
        raise LocalProtocolError(f"cannot encode MSGPACK header: {exc}") from exc
    return packed


def decode_msgpack_header(data: Body) -> HeaderFields:
    """Parse a MSGPACK header; anything but the 7-item array is a protocol error."""
    if _KERNEL is not None:
        fields = _KERNEL.decode_msgpack_header(data)
        if fields is not None:  # the usual shape; anything else is answered below
            code, opaque, flag, language, version, remark, ext = fields
            return code, opaque, flag, language_of(language), version, remark, ext
    return py_decode_msgpack_header(data)


def py_decode_msgpack_header(data: Body) -> HeaderFields:
    """``decode_msgpack_header`` in Python: the reference, and every unusual header."""
    try:
        obj = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except Exception as exc:  # msgpack raises a zoo of types for bad input
        raise RemoteProtocolError(f"bad MSGPACK header: {exc}") from exc
    if not isinstance(obj, list) or len(obj) != 7:
        raise RemoteProtocolError("MSGPACK header is not a 7-item array")
    code, language, version, opaque, flag, remark, ext = obj
    if remark is not None and not isinstance(remark, str):
        raise RemoteProtocolError("MSGPACK remark is not a string")
    return (
        as_int(code, "code"),
        as_int(opaque, "opaque"),
        as_int(flag, "flag"),
        language_of(language),
        as_int(version, "version"),
        remark,
        normalize_ext_fields(ext),
    )


_ENCODERS: dict[int, Callable[[RemotingCommand], bytes]] = {
    SerializeType.JSON: encode_json_header,
    SerializeType.ROCKETMQ: encode_rocketmq_header,
    SerializeType.MSGPACK: encode_msgpack_header,
}
#: The MSGPACK kernels (``_frame_kernels.pyx``) when built and not turned off.
_KERNEL = load_kernel("aiorocketmq.remoting._frame_kernels")
#: The JSON kernels (``_json_kernels.pyx``): the stock clients' headers.
_JSON_KERNEL = load_kernel("aiorocketmq.remoting._json_kernels")
_LANGUAGE_NAMES: Final = {lang: lang.name for lang in LanguageCode}

_DECODERS: dict[int, Callable[[Body], HeaderFields]] = {
    SerializeType.JSON: decode_json_header,
    SerializeType.ROCKETMQ: decode_rocketmq_header,
    SerializeType.MSGPACK: decode_msgpack_header,
}


# ---------------------------------------------------------------------------- frames


def encode_frame_parts(
    cmd: RemotingCommand, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH
) -> tuple[bytes, Body | BodyParts]:
    """Encode ``cmd`` as (length prefix + header, body) for a gather write.

    The body is returned as it is, never copied: ``cmd.body_parts`` when set,
    else ``cmd.body``.

    Raises:
        LocalProtocolError: the header cannot be encoded or the frame is too long.
    """
    head = cast(bytes, frame_buffers(cmd, max_frame_length)[0][0])  # the head is bytes
    return head, cmd.body_parts if cmd.body_parts is not None else cmd.body


def kernel_head(  # noqa: PLR0917 - a command's fields, positional on every frame
    serialize_type: SerializeType, code: int, language: LanguageCode, version: int,
    opaque: int, flag: int, remark: str | None, ext: dict[str, str], body_length: int,
    max_frame_length: int,
) -> bytes | None:  # fmt: skip
    """The head (length prefix, header info, header) of the frame of a command with
    these fields, from the C kernel of its serialize type; None when no kernel takes
    it (the reference then encodes, or refuses, the command)."""
    if serialize_type is SerializeType.MSGPACK:
        if _KERNEL is not None:  # the language as the IntEnum it is: an int to the kernel
            return _KERNEL.encode_msgpack_head(  # type: ignore[no-any-return]
                SerializeType.MSGPACK, code, language, version, opaque, flag, remark, ext,
                body_length, max_frame_length,
            )  # fmt: skip
    elif _JSON_KERNEL is not None and serialize_type is SerializeType.JSON:
        name = _LANGUAGE_NAMES.get(language)
        if name is not None:
            return _JSON_KERNEL.encode_json_head(  # type: ignore[no-any-return]
                code, name, version, opaque, flag, remark, ext, body_length, max_frame_length
            )
    return None


def py_encode_frame_head(cmd: RemotingCommand, max_frame_length: int) -> bytes:
    """Length prefix + header info + header in Python: the reference, and every
    command the MSGPACK kernel leaves to it."""
    header = _ENCODERS[cmd.serialize_type](cmd)
    header_len = len(header)
    if header_len > MAX_HEADER_LENGTH:
        raise LocalProtocolError(f"header of {header_len} bytes exceeds 24 bits")
    length = 4 + header_len + cmd.body_length
    if length + 4 > max_frame_length:
        raise LocalProtocolError(f"frame of {length + 4} bytes exceeds {max_frame_length}")
    info = (int(cmd.serialize_type) << 24) | header_len
    return _PREFIX.pack(length, info) + header


def encode_frame_buffers(
    cmd: RemotingCommand, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH
) -> list[Body]:
    """Encode ``cmd`` as the items of one ``transport.writelines`` call.

    The first item is the length prefix and header, then the body: one item, or
    one per part of ``cmd.body_parts`` (a pull reply's held CommitLog records go
    to the socket straight from the mapping: no join, no copy). An empty body
    adds no item.

    Raises:
        LocalProtocolError: as ``encode_frame_parts``.
    """
    return frame_buffers(cmd, max_frame_length)[0]


def frame_buffers(cmd: RemotingCommand, max_frame_length: int) -> tuple[list[Body], int]:
    """``encode_frame_buffers`` and the frame's size in bytes: a connection's write
    (every request and reply) counts what it holds from the one body length."""
    parts = cmd.body_parts
    if parts is not None:
        body_length = len(parts)
    else:
        body = cmd.body
        body_length = body.nbytes if isinstance(body, memoryview) else len(body)
    head = kernel_head(
        cmd.serialize_type, cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag,
        cmd.remark, cmd.ext_fields, body_length, max_frame_length,
    )  # fmt: skip
    if head is None:
        head = py_encode_frame_head(cmd, max_frame_length)
    size = len(head) + body_length
    if parts is not None:
        return [head, *parts.parts], size
    return ([head, body] if body_length else [head]), size


def encode_frame(cmd: RemotingCommand, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> bytes:
    """Encode ``cmd`` as one contiguous frame (copies the body)."""
    head, body = encode_frame_parts(cmd, max_frame_length)
    return head + bytes(body) if body else head


def decode_frame_payload(data: Body) -> RemotingCommand:
    """Decode a frame without its 4-byte length prefix (header info, header, body)."""
    view = memoryview(data)
    if len(view) < 4:
        raise RemoteProtocolError("frame shorter than its header-info field")
    (info,) = _HEADER_INFO.unpack_from(view, 0)
    serialize_type, header_len = info >> 24, info & MAX_HEADER_LENGTH
    if 4 + header_len > len(view):
        raise RemoteProtocolError(f"header length {header_len} exceeds frame length {len(view)}")
    decoder = _DECODERS.get(serialize_type)
    if decoder is None:
        raise RemoteProtocolError(f"unknown serialize type {serialize_type}")
    return _command(
        serialize_type, decoder(view[4 : 4 + header_len]), bytes(view[4 + header_len :])
    )


def _command(serialize_type: int, fields: HeaderFields, body: Body) -> RemotingCommand:
    code, opaque, flag, language, version, remark, ext = fields
    return RemotingCommand(
        code, opaque, flag, language, version, remark, ext, body, _SERIALIZE_TYPES[serialize_type]
    )


#: A frame at least this long that a read leaves incomplete is received into buffers of
#: its own (header and body apart), not appended to the stream buffer and copied out.
LARGE_FRAME = 64 * 1024


class _LargeFrame:
    """One large frame being received: its payload goes straight to where it ends up.

    The body is a ``bytearray`` of exactly the body's size, handed over as the
    command's body without a further copy (a 2 MiB pull reply was copied twice
    before: appended read by read to the stream buffer, then sliced out as bytes).
    It comes from the thread's ``BodyPool``, which reuses one once nothing
    references it.
    """

    __slots__ = ("_body", "_body_fill", "_head", "_head_fill", "_serialize_type")

    def __init__(self, length: int, info: int) -> None:
        serialize_type, header_len = info >> 24, info & MAX_HEADER_LENGTH
        if 4 + header_len > length:
            raise RemoteProtocolError(f"header length {header_len} exceeds frame length {length}")
        if serialize_type not in _DECODERS:
            raise RemoteProtocolError(f"unknown serialize type {serialize_type}")
        self._serialize_type = serialize_type
        self._head = bytearray(header_len)
        self._body = thread_body_pool().take(length - 4 - header_len)
        self._head_fill = self._body_fill = 0

    def fill(self, data: memoryview) -> int:
        """Copy what ``data`` holds of this frame; how many bytes of it were taken."""
        taken = 0
        want = len(self._head) - self._head_fill
        if want:
            taken = min(want, len(data))
            self._head[self._head_fill : self._head_fill + taken] = data[:taken]
            self._head_fill += taken
        more = min(len(self._body) - self._body_fill, len(data) - taken)
        if more:
            self._body[self._body_fill : self._body_fill + more] = data[taken : taken + more]
            self._body_fill += more
        return taken + more

    @property
    def complete(self) -> bool:
        return self._body_fill == len(self._body) and self._head_fill == len(self._head)

    def command(self) -> RemotingCommand:
        fields = _DECODERS[self._serialize_type](self._head)
        return _command(self._serialize_type, fields, self._body)


def _split_usual(buf: Body, pos: int, max_len: int) -> tuple[list[RemotingCommand], int]:
    """The kernels' commands of the usual frames from ``pos`` on (JSON ones, then
    MSGPACK ones, while either takes a frame), and where they stopped. JSON first:
    ``feed`` calls this where the MSGPACK kernel has just stopped."""
    commands: list[RemotingCommand] = []
    size = len(buf)
    while size - pos >= 4:
        start = pos
        if _JSON_KERNEL is not None:
            run, pos = _JSON_KERNEL.split_json(
                buf, pos, max_len, RemotingCommand, LANGUAGE_BY_VALUE, LANGUAGE_BY_NAME,
                LanguageCode.OTHER, LanguageCode.JAVA, SerializeType.JSON,
            )  # fmt: skip
            commands += run
        if _KERNEL is not None and size - pos >= 4:
            run, pos = _KERNEL.split_msgpack(
                buf, pos, max_len, RemotingCommand, LANGUAGE_BY_VALUE, LanguageCode.OTHER,
                SerializeType.MSGPACK,
            )  # fmt: skip
            commands += run
        if pos == start:
            break
    return commands, pos


class FrameDecoder:
    """Incremental frame decoder: feed any chunking, get whole commands back.

    After a protocol error the decoder stays broken: every later ``feed`` raises the
    same error, because the stream's frame boundaries are lost for good.

    Args:
        max_frame_length: largest frame accepted, length field included. Checked as
            soon as the 4 length bytes arrive, so a hostile length never makes us buffer.
    """

    __slots__ = ("_buf", "_error", "_large", "_large_received", "_max")

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self._buf = bytearray()
        self._max = max_frame_length
        self._error: RemoteProtocolError | None = None
        self._large: _LargeFrame | None = None
        self._large_received = 0

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a whole frame."""
        return len(self._buf) + self._large_received

    def feed(self, data: Body) -> list[RemotingCommand]:
        """Add bytes; return every command they complete (possibly none)."""
        if self._error is not None:
            raise self._error
        try:
            if not self._buf and self._large is None:
                # The usual read: whole usual frames, nothing held from the last one.
                run: list[RemotingCommand] = []
                pos = 0
                if _KERNEL is not None:  # our peers' MSGPACK frames: one call
                    run, pos = _KERNEL.split_msgpack(
                        data, 0, self._max, RemotingCommand, LANGUAGE_BY_VALUE,
                        LanguageCode.OTHER, SerializeType.MSGPACK,
                    )  # fmt: skip
                    if pos == len(data):
                        return run
                if _JSON_KERNEL is not None:  # a stock client's JSON frames
                    more, pos = _split_usual(data, pos, self._max)
                    run += more
                    if pos == len(data):
                        return run
                if pos:
                    return run + self._feed(memoryview(data)[pos:])
            return self._feed(data)
        except RemoteProtocolError as exc:
            self._error = exc
            self._buf = bytearray()
            self._large = None
            raise

    def _feed(self, data: Body) -> list[RemotingCommand]:
        commands: list[RemotingCommand] = []
        large = self._large
        if large is not None:
            view = memoryview(data)
            taken = large.fill(view)
            self._large_received += taken
            if not large.complete:
                return commands
            commands.append(large.command())
            self._large, self._large_received = None, 0
            if taken == len(view):
                return commands
            data = view[taken:]
        if self._buf:
            self._buf += data
            buf: Body = self._buf
        else:
            buf = data
        split, consumed = self._split(buf)
        commands += split
        if buf is self._buf:
            del self._buf[:consumed]
        elif consumed < len(buf):
            self._buf = bytearray(memoryview(buf)[consumed:])
        if len(self._buf) >= 8:
            self._start_large()
        return commands

    def _start_large(self) -> None:
        """Receive the incomplete frame the buffer begins with apart, if it is large."""
        length, info = _PREFIX.unpack_from(self._buf, 0)
        if length < LARGE_FRAME or length + 4 > self._max:
            return  # small, or refused by _split on the next feed
        large = _LargeFrame(length, info)
        rest = memoryview(self._buf)[8:]
        try:
            self._large_received = 8 + large.fill(rest)
        finally:
            rest.release()
        self._large = large
        self._buf = bytearray()

    def _split(self, buf: Body) -> tuple[list[RemotingCommand], int]:
        commands: list[RemotingCommand] = []
        pos, size = 0, len(buf)
        view = memoryview(buf)
        try:
            while size - pos >= 4:
                if _KERNEL is not None or _JSON_KERNEL is not None:  # usual frames first
                    run, pos = _split_usual(buf, pos, self._max)
                    commands += run
                    if size - pos < 4:
                        break
                (length,) = _LENGTH.unpack_from(buf, pos)
                if length < 4 or length + 4 > self._max:
                    raise RemoteProtocolError(f"frame length {length} outside [4, {self._max - 4}]")
                end = pos + 4 + length
                if end > size:
                    break
                commands.append(decode_frame_payload(view[pos + 4 : end]))
                pos = end
        finally:
            view.release()
        return commands, pos
