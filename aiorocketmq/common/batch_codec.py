"""The batch body of SEND_BATCH_MESSAGE (and of C++ batch sends with ``batch=1``).

Owns: encoding a list of messages into a batch body (``MessageDecoder.encodeMessages``),
decoding and bounds-checking one (``decodeMessages``), and the rule by which the broker
appends the batch-level properties to each inner message's own properties
(``CommitLog.MessageExtEncoder.encode(MessageExtBatch)``).

Must not: do I/O, or build CommitLog records (``message_codec`` does, per entry).

Layout of one entry (big-endian; entries are concatenated, nothing between them)::

    off   size  field
      0     4   TOTALSIZE   = 22 + B + P
      4     4   MAGICCODE   0 from clients; ignored on read
      8     4   BODYCRC     0 from clients; ignored on read (the broker computes it)
     12     4   FLAG        the message's user flag
     16     4   BODY length B, then B bytes
   20+B     2   PROPERTIES length P (signed short), then P bytes (the properties
                string of this message; stock clients end it with a \\x02)

Java's reader ignores TOTALSIZE; we require it to match (both stock clients write it
exactly), so a framing error is caught at the entry where it happens.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError
from aiorocketmq.common.kernels import load_kernel
from aiorocketmq.common.message import BytesLike, Message
from aiorocketmq.common.properties import (
    PROPERTY_SEPARATOR,
    properties_to_string,
    string_to_properties,
)

BATCH_ENTRY_MIN_SIZE: Final = 22
"""TOTALSIZE of an entry with an empty body and no properties."""

DEFAULT_MAX_BATCH_MESSAGES: Final = 65_536
"""Cap on entries in one batch body: a 4 MiB body of the smallest realistic entries
(22 bytes + a UNIQ_KEY property, about 64 bytes) holds about this many."""

_ENTRY_HEAD: Final = struct.Struct(">iiiii")  # TOTALSIZE, MAGIC, BODYCRC, FLAG, BODY length
_SHORT: Final = struct.Struct(">h")
_INT: Final = struct.Struct(">i")
_PROPERTIES_MAX: Final = 32767


@dataclass(frozen=True, slots=True)
class BatchEntry:
    """One message of a batch body, pointing into the body (no copy).

    Attributes:
        flag: the user flag.
        body: a view of the message body inside the batch body.
        properties_raw: the properties string exactly as sent.
    """

    flag: int
    body: memoryview
    properties_raw: str

    @property
    def properties(self) -> dict[str, str]:
        """The properties parsed with the 4.9.8 rules."""
        return string_to_properties(self.properties_raw)

    def to_message(self, topic: str = "") -> Message:
        """Copy into a ``Message`` (batch entries carry no topic: pass the header's)."""
        return Message(
            topic=topic,
            body=bytes(self.body),
            flag=self.flag,
            properties=self.properties,
        )


def encode_batch(messages: Iterable[Message]) -> bytes:
    """Encode messages into a batch body, as a Java or C++ producer does.

    Only ``flag``, ``body`` and ``properties`` of each message are encoded; topic and
    queue travel in the request header.

    Raises:
        LocalProtocolError: properties that cannot be serialised or exceed 32767 bytes,
            or a flag or body length that does not fit an int32.
    """
    parts: list[BytesLike] = []
    for index, message in enumerate(messages):
        try:
            props = properties_to_string(message.properties).encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as exc:
            raise LocalProtocolError(f"batch message {index}: bad properties: {exc}") from exc
        body = message.body
        body_len = body.nbytes if isinstance(body, memoryview) else len(body)
        props_len = len(props)
        if props_len > _PROPERTIES_MAX:
            raise LocalProtocolError(
                f"batch message {index}: properties are {props_len} bytes, max {_PROPERTIES_MAX}"
            )
        total = BATCH_ENTRY_MIN_SIZE + body_len + props_len
        try:
            parts.append(_ENTRY_HEAD.pack(total, 0, 0, message.flag, body_len))
        except struct.error as exc:
            raise LocalProtocolError(f"batch message {index} does not fit: {exc}") from exc
        parts.append(body)
        parts.append(_SHORT.pack(props_len))
        parts.append(props)
    return b"".join(parts)


def count_batch_entries(body: BytesLike, *, stop_after: int) -> int:
    """Entries of a batch body by their TOTALSIZE fields alone, counting at most
    ``stop_after + 1`` (a cheap bound check; ``decode_batch_entries`` validates).

    A malformed body counts up to where it stops making sense. In C when built
    (``common/_record_kernels.pyx``).
    """
    if _KERNEL is not None:
        try:
            return _KERNEL.count_batch_entries(body, stop_after)  # type: ignore[no-any-return]
        except (BufferError, TypeError, OverflowError):
            pass  # a body the kernel cannot read flat: the reference reads it
    return py_count_batch_entries(body, stop_after=stop_after)


def py_count_batch_entries(body: BytesLike, *, stop_after: int) -> int:
    """``count_batch_entries`` in Python: the reference."""
    view = memoryview(body).cast("B") if isinstance(body, memoryview) else memoryview(body)
    size = len(view)
    pos = count = 0
    while pos + 4 <= size and count <= stop_after:
        total = _INT.unpack_from(view, pos)[0]
        if total <= 0:
            break
        pos += total
        count += 1
    return count


def decode_batch_entries(
    body: BytesLike, *, max_messages: int = DEFAULT_MAX_BATCH_MESSAGES
) -> list[BatchEntry]:
    """Split a batch body into entries, checking every bound before returning any.

    Args:
        body: the request body.
        max_messages: most entries accepted.

    Returns:
        The entries in order (empty for an empty body).

    Raises:
        RemoteProtocolError: an entry runs past the body, has a negative length, a
            TOTALSIZE that does not match its fields, or there are too many entries.
    """
    view = memoryview(body).cast("B") if isinstance(body, memoryview) else memoryview(body)
    size = len(view)
    entries: list[BatchEntry] = []
    pos = 0
    while pos < size:
        index = len(entries)
        if index >= max_messages:
            raise RemoteProtocolError(f"batch body holds more than {max_messages} messages")
        left = size - pos
        if left < BATCH_ENTRY_MIN_SIZE:
            raise RemoteProtocolError(
                f"batch entry {index} at {pos}: {left} bytes left, an entry needs at least 22"
            )
        total, _magic, _crc, flag, body_len = _ENTRY_HEAD.unpack_from(view, pos)
        if body_len < 0 or body_len > left - BATCH_ENTRY_MIN_SIZE:
            raise RemoteProtocolError(f"batch entry {index} at {pos}: body length {body_len}")
        props_len_pos = pos + 20 + body_len
        props_len = _SHORT.unpack_from(view, props_len_pos)[0]
        if props_len < 0 or props_len_pos + 2 + props_len > size:
            raise RemoteProtocolError(
                f"batch entry {index} at {pos}: properties length {props_len}"
            )
        if total != BATCH_ENTRY_MIN_SIZE + body_len + props_len:
            raise RemoteProtocolError(
                f"batch entry {index} at {pos}: totalSize {total} does not match its fields "
                f"({BATCH_ENTRY_MIN_SIZE + body_len + props_len})"
            )
        props_raw = str(
            view[props_len_pos + 2 : props_len_pos + 2 + props_len], "utf-8", "surrogateescape"
        )
        entries.append(BatchEntry(flag, view[pos + 20 : props_len_pos].toreadonly(), props_raw))
        pos += total
    return entries


def decode_batch(
    body: BytesLike, *, topic: str = "", max_messages: int = DEFAULT_MAX_BATCH_MESSAGES
) -> list[Message]:
    """Decode a batch body into messages (bodies copied).

    Args:
        body: the request body.
        topic: set on every message (the request header's topic).
        max_messages: most entries accepted.

    Raises:
        RemoteProtocolError: as ``decode_batch_entries``.
    """
    return [
        entry.to_message(topic) for entry in decode_batch_entries(body, max_messages=max_messages)
    ]


def merge_batch_properties(inner: str, batch: str) -> str:
    """Append the batch-level properties to an inner message's own, as the broker stores them.

    RocketMQ 4.9 adds a ``\\x02`` between them only when both are non-empty and the
    inner string does not already end with one.

    Args:
        inner: the entry's properties string as sent.
        batch: the batch-level properties string (``WAIT``, ``CLUSTER``...).
    """
    if inner and batch and not inner.endswith(PROPERTY_SEPARATOR):
        return f"{inner}{PROPERTY_SEPARATOR}{batch}"
    return inner + batch


#: ``common/_record_kernels.pyx`` when built and not turned off.
_KERNEL = load_kernel("aiorocketmq.common._record_kernels")
