"""RemotingCommand: one request or response of RocketMQ's remoting protocol.

Owns: the command value object, its flag bits, and the small helpers that read
typed values out of ``extFields`` (which Java models as ``Map<String, String>``).

Must not: encode or decode bytes (``frame.py`` does), hold global state (no static
opaque counter: each connection numbers its own requests), or do I/O.

Field meanings (``specs/remoting.md`` §1.2, §2):

==========  =========================================================================
code        request code for requests, response code for responses (plain ``int``;
            compare with ``RequestCode`` / ``ResponseCode``)
language    sender's ``LanguageCode`` (a name in JSON headers, a byte in ROCKETMQ ones)
version     ordinal of the sender's ``MQVersion.Version``
opaque      request id chosen by the requester; the response echoes it
flag        bit 0 = response, bit 1 = oneway (stock clients never set bit 1)
remark      optional text; error text in error responses
ext_fields  custom header fields, always ``str -> str`` once decoded
body        raw bytes after the header (may be a memoryview over stored data)
body_parts  an outgoing body given as several buffers instead (``body`` is then
            empty); never set on a command decoded from the wire
==========  =========================================================================

``BodyParts`` is how a reply hands stored bytes to the transport without joining
them (RocketMQ's ``ManyMessageTransfer``): the frame encoder emits each part as its
own gather-write item, and the connection calls ``release()`` once the transport
no longer references the parts. It is a field of its own, not a kind of ``body``,
so that every reader of ``body`` (processors, the client, codecs) keeps a plain
bytes-like value: only commands we build to send can carry parts, and code that
needs the whole body of either form calls ``body_length`` or ``body_bytes()``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from aiorocketmq.common.kernels import load_kernel
from aiorocketmq.remoting.codes import CURRENT_VERSION, LanguageCode, SerializeType

#: flag bit 0: this command is a response.
RPC_RESPONSE = 1
#: flag bit 1: the requester expects no reply.
RPC_ONEWAY = 2

log = logging.getLogger(__name__)

#: The MSGPACK kernels (``_frame_kernels.pyx``) when built: ``request`` builds in place.
_KERNEL = load_kernel("aiorocketmq.remoting._frame_kernels")

#: A contiguous body, or one buffer of a ``BodyParts``.
Body = bytes | bytearray | memoryview


class BodyParts:
    """A body made of several buffers, sent back to back without being joined.

    The parts are typically memoryviews over mapped store files: whoever holds
    them (the ``on_release`` callback's owner) must keep them valid until
    ``release()``. The writer of the frame owns the body once it takes the
    command: ``RemotingConnection.write_command`` calls ``release()`` when the
    transport no longer references the parts, or at once if the frame is never
    written. After ``release()`` the parts must not be touched.

    Args:
        parts: the buffers, in wire order (empty ones are skipped).
        on_release: called once by the first ``release()`` (e.g. a
            ``GetMessageResult.release`` dropping the file references).
        records: how many stored records the parts hold, when their maker counted
            them (a pull reply's); 0 when nobody did.
    """

    __slots__ = ("_nbytes", "_on_release", "_parts", "records")

    def __init__(
        self,
        parts: Iterable[Body],
        on_release: Callable[[], None] | None = None,
        records: int = 0,
    ) -> None:
        views = [p if isinstance(p, memoryview) else memoryview(p) for p in parts]
        self._parts: list[memoryview] | None = [v for v in views if v.nbytes]
        self._nbytes = sum(v.nbytes for v in self._parts)
        self._on_release = on_release
        self.records = records

    @property
    def parts(self) -> list[memoryview]:
        """The buffers, in order. Raises ``ValueError`` after ``release()``."""
        if self._parts is None:
            raise ValueError("BodyParts used after release()")
        return self._parts

    @property
    def released(self) -> bool:
        """True once ``release()`` ran."""
        return self._parts is None

    def __len__(self) -> int:
        """Total bytes of all parts (known after release too, for logs)."""
        return self._nbytes

    def __bool__(self) -> bool:
        return self._nbytes > 0

    def __bytes__(self) -> bytes:
        """A contiguous copy: for decoding and tests, never for the write path."""
        return b"".join(self.parts)

    def __eq__(self, other: object) -> bool:
        # Content equality, so a RemotingCommand compares the same whatever form its
        # body takes (a decoded reply has bytes, a built one may have parts).
        if isinstance(other, BodyParts):
            return bytes(self) == bytes(other)
        if isinstance(other, (bytes, bytearray, memoryview)):
            return bytes(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable holder: unhashable, like bytearray

    def release(self) -> None:
        """Drop the parts and run ``on_release`` (idempotent)."""
        if self._parts is None:
            return
        self._parts = None
        callback, self._on_release = self._on_release, None
        if callback is not None:
            callback()

    def __del__(self) -> None:
        # Safety net only: every path that drops a command is meant to release its
        # body. A body lost anyway (a task cancelled while holding its reply) must
        # not pin mapped files forever, so give the references back here, loudly.
        if self._parts is None or self._on_release is None:
            return
        try:
            log.warning("BodyParts of %d bytes collected unreleased; releasing", self._nbytes)
            self.release()
        except Exception:  # a finalizer must never raise
            pass

    def __repr__(self) -> str:
        state = "released" if self._parts is None else f"{len(self._parts)} parts"
        return f"BodyParts({self._nbytes}B, {state})"


@dataclass(slots=True, eq=True)
class RemotingCommand:
    """A request or response. Build requests with ``request`` and replies with ``response_to``."""

    code: int
    opaque: int = 0
    flag: int = 0
    language: LanguageCode = LanguageCode.PYTHON
    version: int = CURRENT_VERSION
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: Body = b""
    serialize_type: SerializeType = SerializeType.JSON
    body_parts: BodyParts | None = field(default=None, repr=False)

    @property
    def body_length(self) -> int:
        """Bytes of the body in whichever form it is, without copying."""
        if self.body_parts is not None:
            return len(self.body_parts)
        body = self.body
        return body.nbytes if isinstance(body, memoryview) else len(body)

    def body_bytes(self) -> bytes:
        """The whole body as one ``bytes`` (a copy; for tests and rare callers)."""
        if self.body_parts is not None:
            return bytes(self.body_parts)
        return bytes(self.body)

    @property
    def is_response(self) -> bool:
        """True when flag bit 0 is set."""
        return bool(self.flag & RPC_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        """True when the wire carries the oneway bit (stock clients never set it)."""
        return bool(self.flag & RPC_ONEWAY)

    @classmethod
    def request(
        cls,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: Body = b"",
        *,
        serialize_type: SerializeType = SerializeType.JSON,
        language: LanguageCode = LanguageCode.PYTHON,
        version: int = CURRENT_VERSION,
    ) -> RemotingCommand:
        """A new request; the connection that sends it assigns ``opaque``."""
        ext = ext_fields if ext_fields is not None else {}
        if _KERNEL is not None and cls is RemotingCommand:  # in place: no __init__ frame
            return _KERNEL.new_command(  # type: ignore[no-any-return]
                cls, code, 0, 0, language, version, None, ext, body, serialize_type
            )
        # Positional (the fields' order): half the cost of keywords.
        return cls(code, 0, 0, language, version, None, ext, body, serialize_type, None)

    def response_to(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: Body | BodyParts = b"",
    ) -> RemotingCommand:
        """A reply to this request: same opaque and serialization, response flag set.

        RocketMQ replies in the serialize type of the request (``specs/remoting.md``
        §1.4); a JSON request therefore always gets a JSON reply. A ``BodyParts``
        body goes to ``body_parts`` (the reply's writer then owns its release).
        """
        parts: BodyParts | None = None  # built positionally below, as in ``request``
        if isinstance(body, BodyParts):
            parts, body = body, b""
        return RemotingCommand(
            code, self.opaque, RPC_RESPONSE, LanguageCode.JAVA, CURRENT_VERSION, remark,
            ext_fields if ext_fields is not None else {}, body, self.serialize_type, parts,
        )  # fmt: skip

    def describe(self) -> str:
        """A short one-line description for logs (never the body)."""
        kind = "response" if self.is_response else "request"
        return (
            f"{kind} code={self.code} opaque={self.opaque} flag={self.flag} "
            f"body={self.body_length}B"
        )
