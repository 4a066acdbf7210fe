"""The name server's request processors: one function per request code.

Owns: decoding each request (typed headers, bodies), calling ``RouteInfoManager``
or ``KVConfigManager``, and building the reply RocketMQ 4.9.8's
``DefaultRequestProcessor`` gives, with these rules from ``specs/remoting.md``:

* GET_ROUTEINFO_BY_TOPIC answers fastjson's bare integer keys
  (``"brokerAddrs":{0:"..."}``) to clients below version 401 (V4_9_4) that did not
  send ``acceptStandardJsonOnly=true``, and standard JSON to everyone else;
  TOPIC_NOT_EXIST carries ``No topic route info in name server for the topic:
  <topic>`` (§4.1). GET_BROKER_CLUSTER_INFO follows the same version rule.
* REGISTER_BROKER checks ``bodyCrc32`` (when not 0) against ``CRC32(body) &
  0x7FFFFFFF`` and answers SYSTEM_ERROR ``crc32 not match`` on a mismatch; a
  broker older than V3_0_11 sends a bare TopicConfigSerializeWrapper.
* Encoded routes are cached per (topic, JSON form) until the route tables or the
  KV table change (their ``generation`` counters), since GET_ROUTEINFO_BY_TOPIC
  is by far the most frequent request and most answers repeat.

Must not: hold route state (that is ``RouteInfoManager``'s), block (KV writes go
through ``KVConfigManager.persist``, awaited before the reply as Java persists
before answering), or log per request above DEBUG (a config update, rare and
changing the server, is logged at INFO).
"""

from __future__ import annotations

import asyncio
import logging
import zlib
from collections.abc import Callable
from pathlib import Path

from aiorocketmq.common.config_update import (
    black_listed,
    merge_into_properties_file,
    parse_update_body,
)
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.properties_file import format_properties
from aiorocketmq.common.route import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)
from aiorocketmq.common.settings import ConfigError, model_keys, validate_settings
from aiorocketmq.namesrv.client_network import BrokerAddressBook, LocalNetworks
from aiorocketmq.namesrv.config import NamesrvConfig
from aiorocketmq.namesrv.kv_config import NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigManager
from aiorocketmq.namesrv.route_info import RouteInfoManager
from aiorocketmq.remoting.codes import MQVersion, RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import Handler, ProcessorTable, RemotingConnection
from aiorocketmq.remoting.errors import ProcessorError
from aiorocketmq.remoting.namesrv_headers import (
    AddWritePermOfBrokerResponseHeader,
    BrokerNameHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    RegisterTopicRequestHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)

__all__ = ["REGISTER_TOPIC_IN_NAMESRV", "NamesrvProcessors", "topic_not_exist_remark"]

log = logging.getLogger(__name__)

REGISTER_TOPIC_IN_NAMESRV = 217
"""RocketMQ 5.x's code for adding a topic route directly. 4.9.8 has no 217; our
``RequestCode`` names it GET_KV_CONFIG_BY_VALUE after ali-ons, which defines but
never sends it."""

ROUTE_CACHE_MAX_ENTRIES = 65_536
"""Bound on cached route bodies (two forms per topic); past it new ones are not kept."""

_SUCCESS = ResponseCode.SUCCESS

# Short names for the handler signature (connection, request) -> reply.
Conn = RemotingConnection
Req = RemotingCommand


def topic_not_exist_remark(topic: str) -> str:
    """TOPIC_NOT_EXIST's remark (``specs/remoting.md`` §4.1).

    Java appends a FAQ link; the spec's text, which clients show, stops at the topic.
    """
    return f"No topic route info in name server for the topic: {topic}"


def wants_standard_json(request: RemotingCommand, accept_standard_only: bool | None) -> bool:
    """Java 4.9.4+: standard JSON for version >= 401 or ``acceptStandardJsonOnly``."""
    return request.version >= MQVersion.V4_9_4 or bool(accept_standard_only)


def _persist(config_store_path: str, updates: dict[str, str]) -> None:
    # Blocking (a thread): "~" expands against the environment here.
    merge_into_properties_file(Path(config_store_path).expanduser(), updates)


def _body_crc32(body: bytes | bytearray | memoryview) -> int:
    # UtilAll.crc32: CRC32 of the body, masked to a non-negative int.
    return zlib.crc32(body) & 0x7FFFFFFF


class NamesrvProcessors:
    """Request handlers over one RouteInfoManager and one KVConfigManager.

    Args:
        config: The name server's settings (``orderMessageEnable``...).
        route_info: The route tables.
        kv_config: The KV table.
        config_text: Returns every setting as ``key=value`` lines
            (GET_NAMESRV_CONFIG).
        on_config: Told of the settings an UPDATE_NAMESRV_CONFIG produced (the
            controller keeps them for GET_NAMESRV_CONFIG).
    """

    def __init__(
        self,
        config: NamesrvConfig,
        route_info: RouteInfoManager,
        kv_config: KVConfigManager,
        config_text: Callable[[], str] | None = None,
        on_config: Callable[[NamesrvConfig], None] | None = None,
    ) -> None:
        self.config = config
        self._on_config = on_config
        self.route_info = route_info
        self.kv_config = kv_config
        self._config_text = config_text or (lambda: format_properties(config.model_dump()))
        self._route_cache: dict[tuple[str, bool, bool], bytes] = {}
        self._route_cache_key = (-1, -1, -1)
        #: Second broker addresses for clients on our own networks (routeByClientNetwork).
        self.address_book = BrokerAddressBook(LocalNetworks())

    def _local_client(self, conn: Conn) -> bool:
        """Whether ``conn``'s peer is answered broker addresses on our networks."""
        return self.config.route_by_client_network and self.address_book.for_peer(
            conn.remote_address
        )

    def register(self, table: ProcessorTable) -> None:
        """Put every handler into ``table``."""
        handlers: dict[int, Handler] = {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kv_list_by_namespace,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topic_list,
            RequestCode.GET_UNIT_TOPIC_LIST: self.get_unit_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: self.get_has_unit_sub_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.get_has_unit_sub_ununit_list,
            RequestCode.GET_NAMESRV_CONFIG: self.get_namesrv_config,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_namesrv_config,
            REGISTER_TOPIC_IN_NAMESRV: self.register_topic_in_namesrv,
        }
        for code, handler in handlers.items():
            table.register(code, handler)

    # -- KV config -----------------------------------------------------------------

    async def put_kv_config(self, _conn: Conn, req: Req) -> Req:
        """PUT_KV_CONFIG: set, persist, then answer."""
        header = PutKVConfigRequestHeader.from_ext_fields(req.ext_fields)
        self.kv_config.put(header.namespace, header.key, header.value)
        await self.kv_config.persist()
        return req.response_to(_SUCCESS)

    def get_kv_config(self, _conn: Conn, req: Req) -> Req:
        """GET_KV_CONFIG: the value, or QUERY_NOT_FOUND."""
        header = GetKVConfigRequestHeader.from_ext_fields(req.ext_fields)
        value = self.kv_config.get(header.namespace, header.key)
        if value is None:
            raise ProcessorError(
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {header.namespace} Key: {header.key}",
            )
        reply = GetKVConfigResponseHeader(value)
        return req.response_to(_SUCCESS, ext_fields=reply.to_ext_fields())

    async def delete_kv_config(self, _conn: Conn, req: Req) -> Req:
        """DELETE_KV_CONFIG: remove, persist, then answer (SUCCESS even if absent)."""
        header = GetKVConfigRequestHeader.from_ext_fields(req.ext_fields)
        self.kv_config.delete(header.namespace, header.key)
        await self.kv_config.persist()
        return req.response_to(_SUCCESS)

    def get_kv_list_by_namespace(self, _conn: Conn, req: Req) -> Req:
        """GET_KVLIST_BY_NAMESPACE: ``{"table":{...}}``, or QUERY_NOT_FOUND."""
        header = GetKVListByNamespaceRequestHeader.from_ext_fields(req.ext_fields)
        table = self.kv_config.get_kv_list_by_namespace(header.namespace)
        if table is None:
            raise ProcessorError(
                ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}"
            )
        return req.response_to(_SUCCESS, body=table.encode())

    # -- broker registration -------------------------------------------------------

    def register_broker(self, conn: Conn, req: Req) -> Req:
        """REGISTER_BROKER: record the broker; a slave learns its master's addresses."""
        header = RegisterBrokerRequestHeader.from_ext_fields(req.ext_fields)
        if header.body_crc32 != 0 and _body_crc32(req.body) != header.body_crc32:
            log.warning("register broker crc32 mismatch remote=%s", conn.remote_address)
            raise ProcessorError(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        wrapper, filter_servers = self._register_body(req, header.compressed)
        result = self.route_info.register_broker(
            cluster_name=header.cluster_name,
            broker_addr=header.broker_addr,
            broker_name=header.broker_name,
            broker_id=header.broker_id,
            ha_server_addr=header.ha_server_addr,
            topic_config_wrapper=wrapper,
            filter_server_list=filter_servers,
            channel=conn,
        )
        master = result.master_addr
        if self.config.route_by_client_network:
            self.address_book.learn(header.broker_addr, conn.remote_address)
            if master and self._local_client(conn):
                master = self.address_book.address(master)
        reply = RegisterBrokerResponseHeader(result.ha_server_addr, master)
        orders = self.kv_config.get_kv_list_by_namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
        body = b"" if orders is None else orders.encode()
        return req.response_to(_SUCCESS, ext_fields=reply.to_ext_fields(), body=body)

    @staticmethod
    def _register_body(
        req: RemotingCommand, compressed: bool
    ) -> tuple[TopicConfigSerializeWrapper, list[str] | None]:
        """The topic table and filter servers of a REGISTER_BROKER body.

        No body means an empty table at DataVersion(0, 0), as in Java.
        """
        if not req.body:
            return TopicConfigSerializeWrapper(data_version=DataVersion(0, 0)), (
                [] if req.version >= MQVersion.V3_0_11 else None
            )
        try:
            if req.version >= MQVersion.V3_0_11:
                body = RegisterBrokerBody.decode(req.body, compressed)
                return body.topic_config_serialize_wrapper, body.filter_server_list
            return TopicConfigSerializeWrapper.decode(req.body), None
        except RemoteProtocolError as exc:
            raise ProcessorError(
                ResponseCode.SYSTEM_ERROR, f"Failed to decode RegisterBrokerBody: {exc}"
            ) from exc

    def unregister_broker(self, _conn: Conn, req: Req) -> Req:
        """UNREGISTER_BROKER: a broker's goodbye."""
        header = UnRegisterBrokerRequestHeader.from_ext_fields(req.ext_fields)
        self.route_info.unregister_broker(
            header.cluster_name, header.broker_addr, header.broker_name, header.broker_id
        )
        return req.response_to(_SUCCESS)

    def query_data_version(self, _conn: Conn, req: Req) -> Req:
        """QUERY_DATA_VERSION: did the broker's table change? Unchanged counts as alive."""
        header = QueryDataVersionRequestHeader.from_ext_fields(req.ext_fields)
        try:
            version = DataVersion.decode(req.body)
        except RemoteProtocolError as exc:
            raise ProcessorError(ResponseCode.SYSTEM_ERROR, f"bad DataVersion: {exc}") from exc
        changed = self.route_info.is_broker_topic_config_changed(header.broker_addr, version)
        if not changed:
            self.route_info.update_broker_info_update_timestamp(header.broker_addr)
        ours = self.route_info.query_broker_topic_config(header.broker_addr)
        return req.response_to(
            _SUCCESS,
            ext_fields=QueryDataVersionResponseHeader(changed).to_ext_fields(),
            body=b"" if ours is None else ours.encode(),
        )

    def register_topic_in_namesrv(self, _conn: Conn, req: Req) -> Req:
        """REGISTER_TOPIC_IN_NAMESRV (5.x): add a topic route whose brokers are known."""
        header = RegisterTopicRequestHeader.from_ext_fields(req.ext_fields)
        try:
            route = TopicRouteData.decode(req.body)
        except RemoteProtocolError as exc:
            raise ProcessorError(ResponseCode.SYSTEM_ERROR, f"bad TopicRouteData: {exc}") from exc
        self.route_info.register_topic(header.topic, route.queue_datas)
        return req.response_to(_SUCCESS)

    # -- routes --------------------------------------------------------------------

    def get_route_info_by_topic(self, conn: Conn, req: Req) -> Req:
        """GET_ROUTEINFO_BY_TOPIC: the route in the JSON form the client reads."""
        header = GetRouteInfoRequestHeader.from_ext_fields(req.ext_fields)
        standard = wants_standard_json(req, header.accept_standard_json_only)
        body = self.route_body(header.topic, standard, self._local_client(conn))
        if body is None:
            raise ProcessorError(ResponseCode.TOPIC_NOT_EXIST, topic_not_exist_remark(header.topic))
        return req.response_to(_SUCCESS, body=body)

    def route_body(self, topic: str, standard_json: bool, local: bool = False) -> bytes | None:
        """The encoded route of ``topic`` (cached), or None when there is none.

        ``local``: with the brokers' addresses on our networks (routeByClientNetwork).
        """
        key = (
            self.route_info.generation,
            self.kv_config.generation,
            self.address_book.generation,
        )
        if key != self._route_cache_key:
            self._route_cache.clear()
            self._route_cache_key = key
        cached = self._route_cache.get((topic, standard_json, local))
        if cached is not None:
            return cached
        route = self.route_info.pickup_topic_route_data(topic)
        if route is None:
            return None
        if self.config.order_message_enable:
            route.order_topic_conf = self.kv_config.get(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
        if local:
            route = self.address_book.route(route)
        body = route.encode(standard_json)
        if len(self._route_cache) < ROUTE_CACHE_MAX_ENTRIES:
            self._route_cache[(topic, standard_json, local)] = body
        return body

    def get_broker_cluster_info(self, conn: Conn, req: Req) -> Req:
        """GET_BROKER_CLUSTER_INFO: every broker and cluster."""
        info = self.route_info.get_all_cluster_info()
        if self._local_client(conn):
            info = self.address_book.cluster(info)
        return req.response_to(_SUCCESS, body=info.encode(wants_standard_json(req, None)))

    def wipe_write_perm_of_broker(self, conn: Conn, req: Req) -> Req:
        """WIPE_WRITE_PERM_OF_BROKER: stop producers sending to a broker."""
        header = BrokerNameHeader.from_ext_fields(req.ext_fields)
        count = self.route_info.wipe_write_perm_of_broker(header.broker_name)
        log.info(
            "write perm wiped broker_name=%s topics=%d remote=%s",
            header.broker_name, count, conn.remote_address,
        )  # fmt: skip
        reply = WipeWritePermOfBrokerResponseHeader(count)
        return req.response_to(_SUCCESS, ext_fields=reply.to_ext_fields())

    def add_write_perm_of_broker(self, conn: Conn, req: Req) -> Req:
        """ADD_WRITE_PERM_OF_BROKER: let producers send to a broker again."""
        header = BrokerNameHeader.from_ext_fields(req.ext_fields)
        count = self.route_info.add_write_perm_of_broker(header.broker_name)
        log.info(
            "write perm added broker_name=%s topics=%d remote=%s",
            header.broker_name, count, conn.remote_address,
        )  # fmt: skip
        added = AddWritePermOfBrokerResponseHeader(count)
        return req.response_to(_SUCCESS, ext_fields=added.to_ext_fields())

    def delete_topic_in_namesrv(self, _conn: Conn, req: Req) -> Req:
        """DELETE_TOPIC_IN_NAMESRV: everywhere, or on one cluster's brokers."""
        header = DeleteTopicFromNamesrvRequestHeader.from_ext_fields(req.ext_fields)
        self.route_info.delete_topic(header.topic, header.cluster_name)
        return req.response_to(_SUCCESS)

    # -- topic lists and config ----------------------------------------------------

    @staticmethod
    def _topic_list(req: RemotingCommand, topics: TopicList) -> RemotingCommand:
        return req.response_to(_SUCCESS, body=topics.encode())

    def get_all_topic_list(self, _conn: Conn, req: Req) -> Req:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER."""
        return self._topic_list(req, self.route_info.get_all_topic_list())

    def get_topics_by_cluster(self, _conn: Conn, req: Req) -> Req:
        """GET_TOPICS_BY_CLUSTER."""
        header = GetTopicsByClusterRequestHeader.from_ext_fields(req.ext_fields)
        return self._topic_list(req, self.route_info.get_topics_by_cluster(header.cluster))

    def get_system_topic_list(self, _conn: Conn, req: Req) -> Req:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS."""
        return self._topic_list(req, self.route_info.get_system_topic_list())

    def get_unit_topic_list(self, _conn: Conn, req: Req) -> Req:
        """GET_UNIT_TOPIC_LIST."""
        return self._topic_list(req, self.route_info.get_unit_topics())

    def get_has_unit_sub_topic_list(self, _conn: Conn, req: Req) -> Req:
        """GET_HAS_UNIT_SUB_TOPIC_LIST."""
        return self._topic_list(req, self.route_info.get_has_unit_sub_topic_list())

    def get_has_unit_sub_ununit_list(self, _conn: Conn, req: Req) -> Req:
        """GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST."""
        return self._topic_list(req, self.route_info.get_has_unit_sub_un_unit_topic_list())

    def get_namesrv_config(self, _conn: Conn, req: Req) -> Req:
        """GET_NAMESRV_CONFIG: every setting as ``key=value`` lines."""
        return req.response_to(_SUCCESS, body=self._config_text().encode())

    async def update_namesrv_config(self, _conn: Conn, req: Req) -> Req:
        """UPDATE_NAMESRV_CONFIG: a properties body, as Java's ``updateConfig``.

        A key in ``configBlackList`` is refused (NO_PERMISSION), a value that does
        not fit its setting too (SYSTEM_ERROR naming it); keys no setting has are
        ignored (Java's ``mergeIfExist``). What is read per request
        (``orderMessageEnable``) applies at once, the rest at the next start; the
        accepted keys are merged into ``configStorePath`` before the answer.
        """
        try:
            updates = parse_update_body(req.body)
        except ValueError as exc:
            return req.response_to(ResponseCode.SYSTEM_ERROR, str(exc))
        refused = black_listed(updates, self.config.config_black_list)
        if refused:
            remark = f"Can not update config in black list: {', '.join(refused)}"
            return req.response_to(ResponseCode.NO_PERMISSION, remark)
        known = model_keys(NamesrvConfig)
        accepted = {k: v for k, v in updates.items() if k in known}
        try:
            config = validate_settings(
                NamesrvConfig, {**self.config.model_dump(by_alias=True), **accepted}
            )
        except ConfigError as exc:
            return req.response_to(ResponseCode.SYSTEM_ERROR, str(exc))
        self.config = config
        if self._on_config is not None:
            self._on_config(config)
        log.info("name server config updated keys=%s", ",".join(sorted(accepted)))
        if accepted:
            where = config.config_store_path
            try:
                await asyncio.to_thread(_persist, where, accepted)
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                remark = f"updated, but persisting to {where} failed: {exc}"
                return req.response_to(ResponseCode.SYSTEM_ERROR, remark)
        return req.response_to(_SUCCESS)
