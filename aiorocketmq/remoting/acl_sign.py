"""RocketMQ 4.x ACL request signatures (``AclClientRPCHook`` / ``PlainAccessValidator``).

A signed request carries ``AccessKey`` (and optionally ``SecurityToken``) in its
extFields and ``Signature`` = base64(HMAC-SHA1(secretKey, content)), where content
is the UTF-8 text of every extFields *value* except ``Signature``, concatenated in
the order of their sorted keys, followed by the body bytes. The stock C++ client
and ali-ons also sign ``OnsChannel`` (it is one of the fields). Keys are sorted
by code point where Java's ``TreeMap`` sorts by UTF-16 unit; the two orders
differ only for characters above U+FFFF, which no header field name has.

Owns: the field names, computing a signature over a request (the body may be
scatter parts: the HMAC is fed each part, nothing is joined), signing a request
in place, and comparing signatures in constant time.

Must not: decide who may do what (``aiorocketmq.broker.acl``) or do I/O.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from aiorocketmq.remoting.command import RemotingCommand

__all__ = [
    "ACCESS_KEY",
    "ONS_CHANNEL",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "UNIQUE_MSG_QUERY_FLAG",
    "SessionCredentials",
    "calculate_signature",
    "request_signature",
    "sign_request",
    "signatures_equal",
]

ACCESS_KEY: Final = "AccessKey"
SIGNATURE: Final = "Signature"
SECURITY_TOKEN: Final = "SecurityToken"
ONS_CHANNEL: Final = "OnsChannel"
#: QUERY_MESSAGE's unique-key switch. The Java client signs it but the Java broker
#: leaves it out of the content it checks; the validator accepts either form.
UNIQUE_MSG_QUERY_FLAG: Final = "_UNIQUE_KEY_QUERY"


@dataclass(frozen=True, slots=True)
class SessionCredentials:
    """An account's AccessKey/SecretKey pair (Java's ``SessionCredentials``).

    Args:
        access_key: sent in every request as ``AccessKey``.
        secret_key: never sent; keys the HMAC.
        security_token: sent (and signed) as ``SecurityToken`` when set.
    """

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = None

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            raise ValueError("ACL credentials need a non-empty accessKey and secretKey")


def calculate_signature(
    fields: Mapping[str, str],
    body_parts: Iterable[bytes | bytearray | memoryview],
    secret_key: str,
    *, skip: frozenset[str] = frozenset((SIGNATURE,)),
) -> str:  # fmt: skip
    """base64(HMAC-SHA1(secret_key, sorted field values + body)), as RocketMQ computes it."""
    mac = hmac.new(secret_key.encode("utf-8"), digestmod=hashlib.sha1)
    text = "".join(fields[k] for k in sorted(fields) if k not in skip)
    # Java's String.getBytes(UTF-8) writes '?' for a lone surrogate; so do we.
    mac.update(text.encode("utf-8", errors="replace"))
    for part in body_parts:
        mac.update(part)
    return base64.b64encode(mac.digest()).decode("ascii")


def _body_parts(request: RemotingCommand) -> Sequence[bytes | bytearray | memoryview]:
    if request.body_parts is not None:
        return request.body_parts.parts
    body = request.body
    return (body,) if len(body) else ()


def request_signature(
    request: RemotingCommand, secret_key: str, *, skip: frozenset[str] = frozenset((SIGNATURE,))
) -> str:
    """The signature of ``request``'s extFields (minus ``skip``) and body."""
    return calculate_signature(request.ext_fields, _body_parts(request), secret_key, skip=skip)


def sign_request(request: RemotingCommand, credentials: SessionCredentials) -> None:
    """Add ``AccessKey`` (+ ``SecurityToken``) and ``Signature`` to ``request``, in place.

    Signing again (a retry) gives the same fields: the old ``Signature`` is not signed.
    """
    fields = request.ext_fields
    fields[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        fields[SECURITY_TOKEN] = credentials.security_token
    fields[SIGNATURE] = request_signature(request, credentials.secret_key)


def signatures_equal(expected: str, given: str | None) -> bool:
    """Constant-time comparison (Java uses ``String.equals``; timing leaks nothing here)."""
    if given is None:
        return False
    return hmac.compare_digest(expected.encode("ascii"), given.encode("utf-8", errors="replace"))
