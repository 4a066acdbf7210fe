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
==========  =========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiorocketmq.remoting.codes import CURRENT_VERSION, LanguageCode, SerializeType

#: flag bit 0: this command is a response.
RPC_RESPONSE = 1
#: flag bit 1: the requester expects no reply.
RPC_ONEWAY = 2

Body = bytes | bytearray | memoryview


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
        return cls(
            code=code,
            ext_fields=ext_fields if ext_fields is not None else {},
            body=body,
            serialize_type=serialize_type,
            language=language,
            version=version,
        )

    def response_to(
        self,
        code: int,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: Body = b"",
    ) -> RemotingCommand:
        """A reply to this request: same opaque and serialization, response flag set.

        RocketMQ replies in the serialize type of the request (``specs/remoting.md``
        §1.4); a JSON request therefore always gets a JSON reply.
        """
        return RemotingCommand(
            code=code,
            opaque=self.opaque,
            flag=RPC_RESPONSE,
            language=LanguageCode.JAVA,
            version=CURRENT_VERSION,
            remark=remark,
            ext_fields=ext_fields if ext_fields is not None else {},
            body=body,
            serialize_type=self.serialize_type,
        )

    def describe(self) -> str:
        """A short one-line description for logs (never the body)."""
        kind = "response" if self.is_response else "request"
        return (
            f"{kind} code={self.code} opaque={self.opaque} flag={self.flag} body={len(self.body)}B"
        )
