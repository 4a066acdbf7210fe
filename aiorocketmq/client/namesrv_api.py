"""Name-server requests of the client, with failover across several name servers.

Owns: ``NamesrvAPI``: the name-server address list (``"a:9876;b:9876"``, as
RocketMQ's ``namesrvAddr``), which one is in use, moving to the next one when a
request fails at the transport level, and the requests clients and admin tools send
to name servers, mapped to typed results and ``errors``.

Failover follows Java's ``NettyRemotingClient``: one name server is chosen at random
and kept while it answers; when a request to it fails to connect, times out or loses
its connection, the next one in the list is chosen and the request is sent there,
until every name server was tried once. A reply with an error code is an answer, not
a failure: it is not sent elsewhere. Writes Java sends to every name server
(KV config put/delete, topic delete) go to each of them in turn.

Must not: cache routes (``instance.py`` does) or talk to brokers.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TypeVar

from aiorocketmq.client.errors import (
    MQClientError,
    MQNamesrvError,
    NoNameServerError,
    NoRouteError,
    from_remoting,
)
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.properties_file import format_properties, parse_properties
from aiorocketmq.common.route import ClusterInfo, KVTable, TopicList, TopicRouteData
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingClientConfig
from aiorocketmq.remoting.errors import RemotingError
from aiorocketmq.remoting.namesrv_headers import (
    BrokerNameHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
)

__all__ = ["DEFAULT_NAMESRV_TIMEOUT_MS", "NamesrvAPI", "parse_namesrv_addr"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

DEFAULT_NAMESRV_TIMEOUT_MS = 3_000
"""Per-attempt timeout of a name-server request (Java MQClientAPIImpl callers use 3 s)."""


def parse_namesrv_addr(namesrv_addr: str | Sequence[str]) -> list[str]:
    """``"a:9876;b:9876"`` (or a sequence) -> unique addresses in order.

    Raises:
        NoNameServerError: no address given.
    """
    parts = namesrv_addr.split(";") if isinstance(namesrv_addr, str) else list(namesrv_addr)
    out: list[str] = []
    for part in parts:
        address = part.strip()
        if address and address not in out:
            out.append(address)
    if not out:
        raise NoNameServerError(f"no name server address in {namesrv_addr!r}")
    return out


class NamesrvAPI:
    """Requests to the name servers of one ``namesrvAddr`` list.

    Args:
        namesrv_addr: ``"host:port;host:port"`` or a sequence of addresses.
        remoting: the client to send through (shared with broker requests); None
            creates one (JSON headers), which ``close`` then closes.
        timeout_ms: per-attempt timeout of each request.
        rng: random source for the first choice (tests pass a seeded one).
    """

    def __init__(
        self,
        namesrv_addr: str | Sequence[str],
        remoting: RemotingClient | None = None,
        *,
        timeout_ms: int = DEFAULT_NAMESRV_TIMEOUT_MS,
        rng: random.Random | None = None,
    ) -> None:
        self._addresses = parse_namesrv_addr(namesrv_addr)
        self._owns_remoting = remoting is None
        self.remoting = remoting or RemotingClient(RemotingClientConfig(serialize_type="JSON"))
        self.timeout_ms = timeout_ms
        self._rng = rng or random.Random()
        self._index = self._rng.randrange(len(self._addresses))

    @property
    def addresses(self) -> list[str]:
        """The configured name-server addresses, in order."""
        return list(self._addresses)

    @property
    def chosen(self) -> str:
        """The name server requests go to first."""
        return self._addresses[self._index]

    def update_addresses(self, namesrv_addr: str | Sequence[str]) -> None:
        """Replace the list; keep the chosen one if it is still listed."""
        addresses = parse_namesrv_addr(namesrv_addr)
        current = self.chosen
        self._addresses = addresses
        if current in addresses:
            self._index = addresses.index(current)
        else:
            self._index = self._rng.randrange(len(addresses))

    async def close(self) -> None:
        """Close the remoting client if this object created it (idempotent)."""
        if self._owns_remoting:
            await self.remoting.close()

    async def __aenter__(self) -> NamesrvAPI:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- sending -----------------------------------------------------------------------

    async def invoke(
        self,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
        *,
        address: str | None = None,
        timeout_ms: int | None = None,
    ) -> RemotingCommand:
        """Send one request and return the reply, whatever its code.

        Args:
            code: the request code.
            ext_fields: header fields.
            body: request body.
            address: one name server to ask (no failover); None = the chosen one,
                then the others on transport failures.
            timeout_ms: per-attempt timeout (default: the object's).

        Raises:
            MQRemotingError: ``address`` was given and the request failed.
            NoNameServerError: every name server failed at the transport level.
        """
        timeout = self.timeout_ms if timeout_ms is None else timeout_ms
        if address is not None:
            try:
                return await self.remoting.invoke(
                    address, RemotingCommand.request(code, dict(ext_fields or {}), body), timeout
                )
            except RemotingError as exc:
                raise from_remoting(exc) from exc
        last: RemotingError | None = None
        for _ in range(len(self._addresses)):
            target = self.chosen
            request = RemotingCommand.request(code, dict(ext_fields or {}), body)
            try:
                return await self.remoting.invoke(target, request, timeout)
            except RemotingError as exc:
                last = exc
                self._move_on(target, exc)
        raise NoNameServerError(
            f"no name server answered request code {code}: tried {self._addresses}, last: {last}"
        ) from last

    def _move_on(self, failed: str, exc: RemotingError) -> None:
        # Another caller may have moved on already; only advance past the one that failed.
        if self.chosen == failed:
            self._index = (self._index + 1) % len(self._addresses)
        log.warning(
            "name server request failed address=%s error=%s next=%s", failed, exc, self.chosen
        )

    async def _call(
        self,
        code: int,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
        *,
        address: str | None = None,
        timeout_ms: int | None = None,
    ) -> RemotingCommand:
        """``invoke``, raising ``MQNamesrvError`` for a non-success reply."""
        reply = await self.invoke(code, ext_fields, body, address=address, timeout_ms=timeout_ms)
        if reply.code != ResponseCode.SUCCESS:
            raise MQNamesrvError(reply.code, reply.remark, address=address or self.chosen)
        return reply

    async def _each(
        self,
        code: int,
        ext_fields: dict[str, str],
        timeout_ms: int | None,
        body: bytes = b"",
        addresses: Sequence[str] | None = None,
    ) -> None:
        """Send to every name server (Java's putKVConfigValue and friends), or to
        ``addresses``.

        Every server is tried even after a failure; the first failure is raised.
        """
        first: MQClientError | None = None
        for target in self.addresses if addresses is None else addresses:
            try:
                await self._call(code, ext_fields, body, address=target, timeout_ms=timeout_ms)
            except MQClientError as exc:  # the other servers still get the write
                log.warning("name server write failed address=%s error=%s", target, exc)
                first = first or exc
        if first is not None:
            raise first

    # -- routes and topics -------------------------------------------------------------

    async def get_route(
        self, topic: str, *, address: str | None = None, timeout_ms: int | None = None
    ) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC.

        Raises:
            NoRouteError: the name server knows no route for ``topic`` (TOPIC_NOT_EXIST).
            MQNamesrvError: any other error reply, or a body that does not parse.
        """
        fields = GetRouteInfoRequestHeader(topic).to_ext_fields()
        reply = await self.invoke(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, fields, address=address, timeout_ms=timeout_ms
        )
        if reply.code == ResponseCode.TOPIC_NOT_EXIST:
            raise NoRouteError(topic, reply.remark)
        if reply.code != ResponseCode.SUCCESS:
            raise MQNamesrvError(reply.code, reply.remark, address=address or self.chosen)
        return _decode(TopicRouteData.decode, reply)

    async def get_cluster_info(
        self, *, address: str | None = None, timeout_ms: int | None = None
    ) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO: brokers by name, brokerNames by cluster."""
        reply = await self._call(
            RequestCode.GET_BROKER_CLUSTER_INFO, address=address, timeout_ms=timeout_ms
        )
        return _decode(ClusterInfo.decode, reply)

    async def get_all_topic_list(
        self, *, address: str | None = None, timeout_ms: int | None = None
    ) -> TopicList:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER."""
        reply = await self._call(
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, address=address, timeout_ms=timeout_ms
        )
        return _decode(TopicList.decode, reply)

    async def get_topics_by_cluster(
        self, cluster: str, *, address: str | None = None, timeout_ms: int | None = None
    ) -> TopicList:
        """GET_TOPICS_BY_CLUSTER: the topics on the cluster's brokers."""
        fields = GetTopicsByClusterRequestHeader(cluster).to_ext_fields()
        reply = await self._call(
            RequestCode.GET_TOPICS_BY_CLUSTER, fields, address=address, timeout_ms=timeout_ms
        )
        return _decode(TopicList.decode, reply)

    async def get_system_topic_list(
        self, *, address: str | None = None, timeout_ms: int | None = None
    ) -> TopicList:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS: cluster and broker names plus one broker address."""
        reply = await self._call(
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS, address=address, timeout_ms=timeout_ms
        )
        return _decode(TopicList.decode, reply)

    async def delete_topic_in_namesrv(
        self,
        topic: str,
        cluster_name: str | None = None,
        *,
        address: str | None = None,
        timeout_ms: int | None = None,
    ) -> None:
        """DELETE_TOPIC_IN_NAMESRV on ``address``, or on every name server when None.

        Args:
            topic: the topic whose routes go.
            cluster_name: only that cluster's brokers' queues go (4.9.x name servers).
        """
        fields = DeleteTopicFromNamesrvRequestHeader(topic, cluster_name).to_ext_fields()
        if address is not None:
            await self._call(
                RequestCode.DELETE_TOPIC_IN_NAMESRV, fields, address=address, timeout_ms=timeout_ms
            )
            return
        await self._each(RequestCode.DELETE_TOPIC_IN_NAMESRV, fields, timeout_ms)

    async def wipe_write_perm_of_broker(
        self, broker_name: str, *, address: str, timeout_ms: int | None = None
    ) -> int:
        """WIPE_WRITE_PERM_OF_BROKER on one name server; returns wipeTopicCount."""
        reply = await self._call(
            RequestCode.WIPE_WRITE_PERM_OF_BROKER,
            BrokerNameHeader(broker_name).to_ext_fields(),
            address=address,
            timeout_ms=timeout_ms,
        )
        return _int_field(reply, "wipeTopicCount")

    async def add_write_perm_of_broker(
        self, broker_name: str, *, address: str, timeout_ms: int | None = None
    ) -> int:
        """ADD_WRITE_PERM_OF_BROKER on one name server; returns addTopicCount."""
        reply = await self._call(
            RequestCode.ADD_WRITE_PERM_OF_BROKER,
            BrokerNameHeader(broker_name).to_ext_fields(),
            address=address,
            timeout_ms=timeout_ms,
        )
        return _int_field(reply, "addTopicCount")

    # -- KV config ---------------------------------------------------------------------

    async def put_kv_config(
        self, namespace: str, key: str, value: str, *, timeout_ms: int | None = None
    ) -> None:
        """PUT_KV_CONFIG on every name server (as Java's putKVConfigValue)."""
        fields = PutKVConfigRequestHeader(namespace, key, value).to_ext_fields()
        await self._each(RequestCode.PUT_KV_CONFIG, fields, timeout_ms)

    async def delete_kv_config(
        self, namespace: str, key: str, *, timeout_ms: int | None = None
    ) -> None:
        """DELETE_KV_CONFIG on every name server (as Java's deleteKVConfigValue)."""
        fields = GetKVConfigRequestHeader(namespace, key).to_ext_fields()
        await self._each(RequestCode.DELETE_KV_CONFIG, fields, timeout_ms)

    # -- name server settings -----------------------------------------------------------

    async def get_namesrv_config(
        self, address: str, *, timeout_ms: int | None = None
    ) -> dict[str, str]:
        """GET_NAMESRV_CONFIG of one name server: its settings."""
        reply = await self._call(
            RequestCode.GET_NAMESRV_CONFIG, address=address, timeout_ms=timeout_ms
        )
        try:
            return parse_properties(reply.body_bytes().decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise MQNamesrvError(
                ResponseCode.SYSTEM_ERROR, f"malformed config body: {exc}", address=address
            ) from exc

    async def update_namesrv_config(
        self,
        updates: Mapping[str, str],
        addresses: Sequence[str] | None = None,
        *,
        timeout_ms: int | None = None,
    ) -> None:
        """UPDATE_NAMESRV_CONFIG on ``addresses`` (every name server when None), as
        Java's ``updateNameServerConfig``."""
        body = format_properties(updates).encode("utf-8")
        await self._each(RequestCode.UPDATE_NAMESRV_CONFIG, {}, timeout_ms, body, addresses)

    async def get_kv_config(
        self,
        namespace: str,
        key: str,
        *,
        address: str | None = None,
        timeout_ms: int | None = None,
    ) -> str | None:
        """GET_KV_CONFIG: the value, or None when the name server has none (QUERY_NOT_FOUND)."""
        fields = GetKVConfigRequestHeader(namespace, key).to_ext_fields()
        reply = await self.invoke(
            RequestCode.GET_KV_CONFIG, fields, address=address, timeout_ms=timeout_ms
        )
        if reply.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        if reply.code != ResponseCode.SUCCESS:
            raise MQNamesrvError(reply.code, reply.remark, address=address or self.chosen)
        return GetKVConfigResponseHeader.from_ext_fields(reply.ext_fields).value

    async def get_kv_list_by_namespace(
        self, namespace: str, *, address: str | None = None, timeout_ms: int | None = None
    ) -> dict[str, str]:
        """GET_KVLIST_BY_NAMESPACE: the namespace's table ({} when QUERY_NOT_FOUND)."""
        fields = GetKVListByNamespaceRequestHeader(namespace).to_ext_fields()
        reply = await self.invoke(
            RequestCode.GET_KVLIST_BY_NAMESPACE, fields, address=address, timeout_ms=timeout_ms
        )
        if reply.code == ResponseCode.QUERY_NOT_FOUND:
            return {}
        if reply.code != ResponseCode.SUCCESS:
            raise MQNamesrvError(reply.code, reply.remark, address=address or self.chosen)
        return _decode(KVTable.decode, reply).table


def _decode(decoder: Callable[[bytes], _T], reply: RemotingCommand) -> _T:
    """Parse a reply body; a malformed one is the server's error, not a crash."""
    try:
        return decoder(bytes(reply.body))
    except RemoteProtocolError as exc:
        raise MQNamesrvError(
            ResponseCode.SYSTEM_ERROR, f"malformed reply body: {exc}", retriable=False
        ) from exc


def _int_field(reply: RemotingCommand, name: str) -> int:
    """An integer reply header field (0 when absent, as Java's unboxing of a default)."""
    text = reply.ext_fields.get(name)
    try:
        return 0 if text is None else int(text)
    except ValueError as exc:
        raise MQNamesrvError(
            ResponseCode.SYSTEM_ERROR, f"malformed {name}: {text!r}", retriable=False
        ) from exc
