"""What a running cluster says about itself, over the remoting protocol.

Owns: GET_BROKER_CLUSTER_INFO on name servers (is every broker registered with
every name server?), GET_BROKER_RUNTIME_INFO on brokers (CommitLog max offset,
the HA keys) and UPDATE_AND_CREATE_TOPIC (test topics), each on a short-lived
connection with a short timeout; a node that does not answer reads as ``None``, never as an error.

Must not: start or stop processes (``aiorocketmq.deploy.launcher``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

from aiorocketmq.common.route import ClusterInfo, KVTable
from aiorocketmq.common.topic_config import TopicConfigSerializeWrapper
from aiorocketmq.remoting.broker_admin_headers import CreateTopicRequestHeader
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.errors import RemotingError

__all__ = [
    "cluster_info",
    "create_topic",
    "has_topic",
    "missing_registrations",
    "runtime_info",
    "runtime_infos",
]

log = logging.getLogger("aiorocketmq.deploy.probe")

TIMEOUT_MS = 3000


async def _call(addr: str, request: RemotingCommand) -> RemotingCommand | None:
    client = RemotingClient()
    try:
        return await client.invoke(addr, request, TIMEOUT_MS)
    except (OSError, TimeoutError, RemotingError) as exc:
        log.debug("no answer addr=%s error=%r", addr, exc)
        return None
    finally:
        await client.close()


async def cluster_info(namesrv: str) -> ClusterInfo | None:
    """GET_BROKER_CLUSTER_INFO of one name server; None when it does not answer."""
    reply = await _call(namesrv, RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
    if reply is None or reply.code != ResponseCode.SUCCESS or not reply.body:
        return None
    return ClusterInfo.decode(reply.body)


async def runtime_info(addr: str) -> dict[str, str] | None:
    """GET_BROKER_RUNTIME_INFO's table; None when the broker does not answer."""
    reply = await _call(addr, RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO))
    if reply is None or reply.code != ResponseCode.SUCCESS or not reply.body:
        return None
    return KVTable.decode(reply.body).table


async def runtime_infos(addrs: Sequence[str]) -> dict[str, dict[str, str] | None]:
    """``runtime_info`` of several brokers at once."""
    infos = await asyncio.gather(*(runtime_info(a) for a in addrs))
    return dict(zip(addrs, infos, strict=True))


async def missing_registrations(
    namesrvs: Sequence[str], brokers: Mapping[str, tuple[str, int]]
) -> list[str]:
    """What is not registered yet: ``"<broker addr> on <namesrv>"`` per gap.

    Args:
        namesrvs: Name-server addresses.
        brokers: Broker address -> (brokerName, brokerId).
    """
    infos = await asyncio.gather(*(cluster_info(ns) for ns in namesrvs))
    missing = []
    for ns, info in zip(namesrvs, infos, strict=True):
        for addr, (name, broker_id) in brokers.items():
            data = info.broker_addr_table.get(name) if info is not None else None
            if data is None or data.broker_addrs.get(broker_id) != addr:
                missing.append(f"{addr} on {ns}")
    return missing


async def create_topic(addr: str, topic: str, queues: int = 4, perm: int = 6) -> str | None:
    """UPDATE_AND_CREATE_TOPIC on one broker; None on success, else the reason."""
    header = CreateTopicRequestHeader(topic, "TBW102", queues, queues, perm, "SINGLE_TAG")
    request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields())
    reply = await _call(addr, request)
    if reply is None:
        return f"{addr}: no answer"
    if reply.code != ResponseCode.SUCCESS:
        return f"{addr}: code {reply.code} {reply.remark}"
    return None


async def has_topic(addr: str, topic: str) -> bool:
    """Whether the broker's topic table (GET_ALL_TOPIC_CONFIG) has ``topic``."""
    reply = await _call(addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG))
    if reply is None or reply.code != ResponseCode.SUCCESS or not reply.body:
        return False
    return topic in TopicConfigSerializeWrapper.decode(reply.body).topic_config_table
