"""The broker's plain ACL (``aclEnable``, ``plain_acl.yml``) applied to gRPC v2 calls.

The SDKs sign every call in its metadata (rocketmq-clients' ``Signature``):

    authorization: MQv2-HMAC-SHA1 Credential=<accessKey>, SignedHeaders=x-mq-date-time,
                   Signature=<hex HMAC-SHA1(secretKey, x-mq-date-time)>

(Python writes lower-case hex, Node upper case; a ``Credential`` may carry ``/scope``
after the key, which RocketMQ ignores; the date is not checked for skew, as in
RocketMQ.) The order of checks is the remoting gate's (``broker.acl.validator``):
globally white address, known accessKey, the account's white address, the signature,
then the permissions each RPC needs (RocketMQ 5's ``AuthorizationContextBuilder``
for gRPC, in plain-ACL terms; groups as their retry topics, as ``plain.py`` keeps
them):

==================================  ==============================================
SendMessage, EndTransaction         PUB on the topic
QueryRoute                          PUB or SUB on the topic
ReceiveMessage, AckMessage,         SUB on the group and the topic
ForwardMessageToDeadLetterQueue,
QueryAssignment
ChangeInvisibleDuration,            SUB on the group (a consumer's heartbeat; a
NotifyClientTermination, Heartbeat  producer's names none)
Telemetry settings                  PUB on each published topic; SUB on the group
                                    and each subscribed topic
==================================  ==============================================

A refusal is RocketMQ's UNAUTHORIZED (40100, for authentication and authorization
alike) with the remoting gate's text.

Owns: parsing the header, the signature check, the per-RPC resources, ``refusal``.
Must not: hold account state or do I/O (``broker.acl`` loads and reloads the files).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Final

from google.protobuf.message import Message

from aiorocketmq.broker.acl.plain import ANY, PUB, SUB, AclAccounts
from aiorocketmq.common.constants import retry_topic
from aiorocketmq.proxy.v2 import definition_pb2 as pb
from aiorocketmq.proxy.v2 import service_pb2 as rpc

__all__ = [
    "AUTHORIZATION_HEADER",
    "DATE_TIME_HEADER",
    "needed_resources",
    "parse_authorization",
    "refusal",
    "sign",
]

AUTHORIZATION_HEADER: Final = "authorization"
DATE_TIME_HEADER: Final = "x-mq-date-time"
_ALGORITHM: Final = "MQv2-HMAC-SHA1"
_NOT_AN_RPC_CODE: Final = -1  # no v2 RPC is one of the remoting admin codes


def sign(secret_key: str, date_time: str) -> str:
    """The SDKs' signature: hex HMAC-SHA1 of the date-time header under the secret key."""
    mac = hmac.new(secret_key.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1)
    return mac.hexdigest()


def parse_authorization(value: str | None) -> tuple[str, str]:
    """``(accessKey, signature hex)`` of an ``authorization`` header; empty strings for
    what is missing (no header, another scheme, no Credential or Signature)."""
    if not value:
        return "", ""
    scheme, _, rest = value.strip().partition(" ")
    if scheme != _ALGORITHM:
        return "", ""
    fields: dict[str, str] = {}
    for part in rest.split(","):
        key, _, val = part.strip().partition("=")
        fields.setdefault(key, val.strip())
    access_key = fields.get("Credential", "").split("/", 1)[0]
    return access_key, fields.get("Signature", "")


def _signature_ok(secret_key: str, date_time: str, given: str) -> bool:
    if not date_time or not given:
        return False
    expected = sign(secret_key, date_time)
    return hmac.compare_digest(expected.encode("ascii"), given.lower().encode("utf-8", "replace"))


def _sub(needed: dict[str, int], group: str = "", topic: str = "") -> None:
    if group:
        needed[retry_topic(group)] = SUB
    if topic:
        needed[topic] = SUB


def needed_resources(method: str, request: Message) -> dict[str, int]:
    """Resource -> permission ``method``'s ``request`` needs (see the module table)."""
    needed: dict[str, int] = {}
    if isinstance(request, rpc.SendMessageRequest):
        for message in request.messages:
            needed[message.topic.name] = PUB
    elif isinstance(request, rpc.EndTransactionRequest):
        needed[request.topic.name] = PUB
    elif isinstance(request, rpc.QueryRouteRequest):
        needed[request.topic.name] = ANY
    elif isinstance(request, rpc.ReceiveMessageRequest):
        _sub(needed, request.group.name, request.message_queue.topic.name)
    elif isinstance(
        request,
        rpc.AckMessageRequest
        | rpc.ForwardMessageToDeadLetterQueueRequest
        | rpc.QueryAssignmentRequest,
    ):
        _sub(needed, request.group.name, request.topic.name)
    elif isinstance(
        request,
        rpc.ChangeInvisibleDurationRequest
        | rpc.NotifyClientTerminationRequest
        | rpc.HeartbeatRequest,
    ):
        _sub(needed, request.group.name)
    elif isinstance(request, rpc.TelemetryCommand) and request.HasField("settings"):
        settings = request.settings
        for topic in settings.publishing.topics:
            needed[topic.name] = PUB
        subscription = settings.subscription
        _sub(needed, subscription.group.name)
        for entry in subscription.subscriptions:
            _sub(needed, topic=entry.topic.name)
    needed.pop("", None)  # a blank name is the RPC's own problem (its v2 code)
    return needed


def refusal(
    accounts: AclAccounts,
    metadata: Mapping[str, str],
    remote_ip: str,
    method: str,
    request: Message | None,
) -> str | None:
    """Why the call is refused (the remoting gate's words), or None to let it in.
    ``request`` None checks who is calling only (a stream being opened)."""
    if accounts.globally_white(remote_ip):
        return None
    access_key, given = parse_authorization(metadata.get(AUTHORIZATION_HEADER))
    account = accounts.account(access_key or None)
    if isinstance(account, str):
        return account
    if account.white_address(remote_ip):
        return None
    if not _signature_ok(account.secret_key, metadata.get(DATE_TIME_HEADER, ""), given):
        return f"Check signature failed for accessKey={account.access_key}"
    if request is None:
        return None
    needed = needed_resources(method, request)
    if accounts.trace_only(needed):
        return None
    return account.refusal(_NOT_AN_RPC_CODE, needed)


def unauthorized(text: str) -> pb.Status:
    """The status a refused call answers with."""
    return pb.Status(code=pb.Code.UNAUTHORIZED, message=text)
