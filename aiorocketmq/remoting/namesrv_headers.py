"""Typed headers of the name-server requests and replies.

Owns: one frozen dataclass per RocketMQ 4.9 header class of the name-server
protocol (``common/.../protocol/header/namesrv/*.java``), each listing its fields
explicitly in ``from_ext_fields`` / ``to_ext_fields``, with Java's required-field
rules (``@CFNotNull``) and parsing rules (``remoting/headers.py``). Brokers build
the requests, the name server reads them, admin tools use both: so they live here,
below ``broker``, ``namesrv`` and ``admin``, not in any one of them.

Must not: know what a name server does with them, or use reflection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from aiorocketmq.remoting.headers import (
    ext_bool,
    ext_int,
    ext_long,
    ext_opt_str,
    ext_str,
    to_ext_fields,
)

__all__ = [
    "AddWritePermOfBrokerRequestHeader",
    "AddWritePermOfBrokerResponseHeader",
    "BrokerNameHeader",
    "DeleteKVConfigRequestHeader",
    "DeleteTopicFromNamesrvRequestHeader",
    "GetKVConfigRequestHeader",
    "GetKVConfigResponseHeader",
    "GetKVListByNamespaceRequestHeader",
    "GetRouteInfoRequestHeader",
    "GetTopicsByClusterRequestHeader",
    "PutKVConfigRequestHeader",
    "QueryDataVersionRequestHeader",
    "QueryDataVersionResponseHeader",
    "RegisterBrokerRequestHeader",
    "RegisterBrokerResponseHeader",
    "RegisterTopicRequestHeader",
    "UnRegisterBrokerRequestHeader",
    "WipeWritePermOfBrokerRequestHeader",
    "WipeWritePermOfBrokerResponseHeader",
]

Fields = Mapping[str, str]


@dataclass(slots=True, frozen=True)
class RegisterBrokerRequestHeader:
    """REGISTER_BROKER (103). ``body_crc32`` 0 means "not checked"."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: int
    compressed: bool = False
    body_crc32: int = 0

    @classmethod
    def from_ext_fields(cls, f: Fields) -> RegisterBrokerRequestHeader:
        """Parse; raises ``HeaderFieldError`` for a missing or malformed field."""
        return cls(
            broker_name=ext_str(f, "brokerName"),
            broker_addr=ext_str(f, "brokerAddr"),
            cluster_name=ext_str(f, "clusterName"),
            ha_server_addr=ext_str(f, "haServerAddr"),
            broker_id=ext_long(f, "brokerId"),
            compressed=ext_bool(f, "compressed", False),
            body_crc32=ext_int(f, "bodyCrc32", 0),
        )

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(
            brokerName=self.broker_name,
            brokerAddr=self.broker_addr,
            clusterName=self.cluster_name,
            haServerAddr=self.ha_server_addr,
            brokerId=self.broker_id,
            compressed=self.compressed,
            bodyCrc32=self.body_crc32,
        )


@dataclass(slots=True, frozen=True)
class RegisterBrokerResponseHeader:
    """REGISTER_BROKER's reply: a slave's master and HA addresses, when known."""

    ha_server_addr: str | None = None
    master_addr: str | None = None

    @classmethod
    def from_ext_fields(cls, f: Fields) -> RegisterBrokerResponseHeader:
        """Parse (both fields optional)."""
        return cls(ext_opt_str(f, "haServerAddr"), ext_opt_str(f, "masterAddr"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings (absent fields left out, as Java's nulls)."""
        return to_ext_fields(haServerAddr=self.ha_server_addr, masterAddr=self.master_addr)


@dataclass(slots=True, frozen=True)
class UnRegisterBrokerRequestHeader:
    """UNREGISTER_BROKER (104)."""

    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int

    @classmethod
    def from_ext_fields(cls, f: Fields) -> UnRegisterBrokerRequestHeader:
        """Parse; every field is required."""
        return cls(
            ext_str(f, "brokerName"),
            ext_str(f, "brokerAddr"),
            ext_str(f, "clusterName"),
            ext_long(f, "brokerId"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(
            brokerName=self.broker_name,
            brokerAddr=self.broker_addr,
            clusterName=self.cluster_name,
            brokerId=self.broker_id,
        )


@dataclass(slots=True, frozen=True)
class QueryDataVersionRequestHeader(UnRegisterBrokerRequestHeader):
    """QUERY_DATA_VERSION (322): the same four fields; the body is the DataVersion."""

    @classmethod
    def from_ext_fields(cls, f: Fields) -> QueryDataVersionRequestHeader:
        """Parse; every field is required."""
        return cls(
            ext_str(f, "brokerName"),
            ext_str(f, "brokerAddr"),
            ext_str(f, "clusterName"),
            ext_long(f, "brokerId"),
        )


@dataclass(slots=True, frozen=True)
class QueryDataVersionResponseHeader:
    """QUERY_DATA_VERSION's reply: did the broker's topic table change?"""

    changed: bool

    @classmethod
    def from_ext_fields(cls, f: Fields) -> QueryDataVersionResponseHeader:
        """Parse."""
        return cls(ext_bool(f, "changed"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(changed=self.changed)


@dataclass(slots=True, frozen=True)
class GetRouteInfoRequestHeader:
    """GET_ROUTEINFO_BY_TOPIC (105); ``acceptStandardJsonOnly`` is Java 4.9.4+ only."""

    topic: str
    accept_standard_json_only: bool | None = None

    @classmethod
    def from_ext_fields(cls, f: Fields) -> GetRouteInfoRequestHeader:
        """Parse."""
        standard = f.get("acceptStandardJsonOnly")
        return cls(
            ext_str(f, "topic"),
            None if standard is None else ext_bool(f, "acceptStandardJsonOnly"),
        )

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(
            topic=self.topic, acceptStandardJsonOnly=self.accept_standard_json_only
        )


@dataclass(slots=True, frozen=True)
class PutKVConfigRequestHeader:
    """PUT_KV_CONFIG (100)."""

    namespace: str
    key: str
    value: str

    @classmethod
    def from_ext_fields(cls, f: Fields) -> PutKVConfigRequestHeader:
        """Parse; every field is required."""
        return cls(ext_str(f, "namespace"), ext_str(f, "key"), ext_str(f, "value"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(namespace=self.namespace, key=self.key, value=self.value)


@dataclass(slots=True, frozen=True)
class GetKVConfigRequestHeader:
    """GET_KV_CONFIG (101) and DELETE_KV_CONFIG (102): a namespace and a key."""

    namespace: str
    key: str

    @classmethod
    def from_ext_fields(cls, f: Fields) -> GetKVConfigRequestHeader:
        """Parse; both fields are required."""
        return cls(ext_str(f, "namespace"), ext_str(f, "key"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(namespace=self.namespace, key=self.key)


DeleteKVConfigRequestHeader = GetKVConfigRequestHeader
"""DELETE_KV_CONFIG (102) has the same two fields."""


@dataclass(slots=True, frozen=True)
class GetKVConfigResponseHeader:
    """GET_KV_CONFIG's reply."""

    value: str | None = None

    @classmethod
    def from_ext_fields(cls, f: Fields) -> GetKVConfigResponseHeader:
        """Parse."""
        return cls(ext_opt_str(f, "value"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(value=self.value)


@dataclass(slots=True, frozen=True)
class GetKVListByNamespaceRequestHeader:
    """GET_KVLIST_BY_NAMESPACE (219)."""

    namespace: str

    @classmethod
    def from_ext_fields(cls, f: Fields) -> GetKVListByNamespaceRequestHeader:
        """Parse."""
        return cls(ext_str(f, "namespace"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(namespace=self.namespace)


@dataclass(slots=True, frozen=True)
class DeleteTopicFromNamesrvRequestHeader:
    """DELETE_TOPIC_IN_NAMESRV (216); with a cluster name only that cluster's queues go."""

    topic: str
    cluster_name: str | None = None

    @classmethod
    def from_ext_fields(cls, f: Fields) -> DeleteTopicFromNamesrvRequestHeader:
        """Parse."""
        return cls(ext_str(f, "topic"), ext_opt_str(f, "clusterName"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(topic=self.topic, clusterName=self.cluster_name)


@dataclass(slots=True, frozen=True)
class BrokerNameHeader:
    """WIPE_WRITE_PERM_OF_BROKER (205) and ADD_WRITE_PERM_OF_BROKER (327)."""

    broker_name: str

    @classmethod
    def from_ext_fields(cls, f: Fields) -> BrokerNameHeader:
        """Parse."""
        return cls(ext_str(f, "brokerName"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(brokerName=self.broker_name)


WipeWritePermOfBrokerRequestHeader = BrokerNameHeader
AddWritePermOfBrokerRequestHeader = BrokerNameHeader


@dataclass(slots=True, frozen=True)
class WipeWritePermOfBrokerResponseHeader:
    """WIPE_WRITE_PERM_OF_BROKER's reply: how many topics lost the write bit."""

    wipe_topic_count: int

    @classmethod
    def from_ext_fields(cls, f: Fields) -> WipeWritePermOfBrokerResponseHeader:
        """Parse."""
        return cls(ext_int(f, "wipeTopicCount"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(wipeTopicCount=self.wipe_topic_count)


@dataclass(slots=True, frozen=True)
class AddWritePermOfBrokerResponseHeader:
    """ADD_WRITE_PERM_OF_BROKER's reply: how many topics got read|write back."""

    add_topic_count: int

    @classmethod
    def from_ext_fields(cls, f: Fields) -> AddWritePermOfBrokerResponseHeader:
        """Parse."""
        return cls(ext_int(f, "addTopicCount"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(addTopicCount=self.add_topic_count)


@dataclass(slots=True, frozen=True)
class GetTopicsByClusterRequestHeader:
    """GET_TOPICS_BY_CLUSTER (224)."""

    cluster: str

    @classmethod
    def from_ext_fields(cls, f: Fields) -> GetTopicsByClusterRequestHeader:
        """Parse."""
        return cls(ext_str(f, "cluster"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(cluster=self.cluster)


@dataclass(slots=True, frozen=True)
class RegisterTopicRequestHeader:
    """REGISTER_TOPIC_IN_NAMESRV (RocketMQ 5.x, code 217); the body is a TopicRouteData."""

    topic: str

    @classmethod
    def from_ext_fields(cls, f: Fields) -> RegisterTopicRequestHeader:
        """Parse."""
        return cls(ext_str(f, "topic"))

    def to_ext_fields(self) -> dict[str, str]:
        """The extFields strings."""
        return to_ext_fields(topic=self.topic)
