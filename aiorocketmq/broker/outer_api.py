"""BrokerOuterAPI: what a broker asks of its name servers.

Owns: REGISTER_BROKER and UNREGISTER_BROKER to every name server at once (each call
has its own timeout, a failure of one name server never stops the others), the body
(JSON or zlib, ``compressedRegister``) with its CRC32 in ``bodyCrc32``, and the
replies a slave needs (its master's address and HA address) plus the name
server's order-topic KV table.

Must not: know about topics or the store (the controller hands it the wrapper), or
import ``aiorocketmq.client`` (brokers keep their own small outer API).
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.route import KVTable
from aiorocketmq.common.topic_config import RegisterBrokerBody, TopicConfigSerializeWrapper
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingClientConfig
from aiorocketmq.remoting.errors import RemotingError
from aiorocketmq.remoting.namesrv_headers import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnRegisterBrokerRequestHeader,
)

__all__ = ["BrokerIdentity", "BrokerOuterAPI", "RegisterResult"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    """Who registers: the header fields shared by register and unregister."""

    cluster_name: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_server_addr: str


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """One name server's answer to REGISTER_BROKER.

    Attributes:
        namesrv_addr: Which name server answered.
        master_addr: The master's address (slaves; None when no master is known).
        ha_server_addr: The master's HA address (slaves).
        order_topics: The name server's ORDER_TOPIC_CONFIG namespace (may be empty).
    """

    namesrv_addr: str
    master_addr: str | None
    ha_server_addr: str | None
    order_topics: dict[str, str]


def _body_crc32(body: bytes) -> int:
    # UtilAll.crc32 masks to a non-negative int; 0 would mean "not checked".
    return zlib.crc32(body) & 0x7FFFFFFF


class BrokerOuterAPI:
    """Calls from a broker to its name servers.

    Args:
        client_config: Timeouts and limits of the outgoing connections.
    """

    def __init__(self, client_config: RemotingClientConfig | None = None) -> None:
        self._client = RemotingClient(client_config)

    async def close(self) -> None:
        """Close every connection (idempotent)."""
        await self._client.close()

    async def register_broker_all(
        self,
        namesrv_addrs: Sequence[str],
        identity: BrokerIdentity,
        wrapper: TopicConfigSerializeWrapper,
        *,
        timeout_ms: int,
        compressed: bool = False,
    ) -> list[RegisterResult]:
        """REGISTER_BROKER to every name server concurrently.

        Returns:
            One result per name server that answered SUCCESS, in ``namesrv_addrs``
            order; failures are logged and left out.
        """
        body = RegisterBrokerBody(wrapper).encode(compressed)
        header = RegisterBrokerRequestHeader(
            broker_name=identity.broker_name,
            broker_addr=identity.broker_addr,
            cluster_name=identity.cluster_name,
            ha_server_addr=identity.ha_server_addr,
            broker_id=identity.broker_id,
            compressed=compressed,
            body_crc32=_body_crc32(body),
        )
        calls = [self._register_one(a, header, body, timeout_ms) for a in namesrv_addrs]
        answers = await asyncio.gather(*calls)
        return [a for a in answers if a is not None]

    async def _register_one(
        self, addr: str, header: RegisterBrokerRequestHeader, body: bytes, timeout_ms: int
    ) -> RegisterResult | None:
        request = RemotingCommand.request(
            RequestCode.REGISTER_BROKER, ext_fields=header.to_ext_fields(), body=body
        )
        try:
            reply = await self._client.invoke(addr, request, timeout_ms)
        except (RemotingError, OSError) as exc:
            log.warning("register broker to name server %s failed: %s", addr, exc)
            return None
        if reply.code != ResponseCode.SUCCESS:
            log.warning(
                "register broker to name server %s refused: code=%s remark=%s",
                addr,
                reply.code,
                reply.remark,
            )
            return None
        answer = RegisterBrokerResponseHeader.from_ext_fields(reply.ext_fields)
        return RegisterResult(addr, answer.master_addr, answer.ha_server_addr, _kv(addr, reply))

    async def unregister_broker_all(
        self, namesrv_addrs: Sequence[str], identity: BrokerIdentity, *, timeout_ms: int
    ) -> int:
        """UNREGISTER_BROKER to every name server; how many acknowledged."""
        header = UnRegisterBrokerRequestHeader(
            broker_name=identity.broker_name,
            broker_addr=identity.broker_addr,
            cluster_name=identity.cluster_name,
            broker_id=identity.broker_id,
        )
        calls = [self._unregister_one(a, header, timeout_ms) for a in namesrv_addrs]
        return sum(await asyncio.gather(*calls))

    async def _unregister_one(
        self, addr: str, header: UnRegisterBrokerRequestHeader, timeout_ms: int
    ) -> bool:
        request = RemotingCommand.request(
            RequestCode.UNREGISTER_BROKER, ext_fields=header.to_ext_fields()
        )
        try:
            reply = await self._client.invoke(addr, request, timeout_ms)
        except (RemotingError, OSError) as exc:
            log.warning("unregister broker from name server %s failed: %s", addr, exc)
            return False
        return reply.code == ResponseCode.SUCCESS


def _kv(addr: str, reply: RemotingCommand) -> dict[str, str]:
    if not reply.body:
        return {}
    try:
        return dict(KVTable.decode(reply.body).table)
    except RemoteProtocolError as exc:
        log.warning("name server %s sent an unreadable order-topic table: %s", addr, exc)
        return {}
