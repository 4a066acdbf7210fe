"""Route bodies that name servers give to clients and admin tools.

Owns: the JSON bodies of the name server's answers as value objects, each with
``to_json_dict`` / ``from_json_dict`` and ``encode`` / ``decode``:

==================  ============================================================
``QueueData``       a topic's queues on one brokerName
``BrokerData``      a brokerName's addresses by brokerId (0 = master)
``TopicRouteData``  GET_ROUTEINFO_BY_TOPIC's body
``ClusterInfo``     GET_BROKER_CLUSTER_INFO's body
``TopicList``       ``{"brokerAddr"?,"topicList"}``
``KVTable``         ``{"table"}``: one KV-config namespace
==================  ============================================================

The broker-side bodies (``DataVersion``, ``TopicConfig``,
``TopicConfigSerializeWrapper``, ``RegisterBrokerBody``) live in
``common/topic_config.py`` and are re-exported here, so ``common.route`` is the one
import for everything the name-server protocol carries.

Must not: do I/O or keep state; decoding peer bytes raises ``RemoteProtocolError``
and nothing else.

Java field names and fastjson's habits are kept: fields sorted by name, nulls left
out, ``brokerAddrs`` keyed by ``Long`` (so written with bare integer keys in the
fastjson form, ``specs/remoting.md`` §5.1). Readers are lenient the way fastjson is:
numbers may arrive as strings, and QueueData's pre-4.9 ``topicSynFlag`` (sic) is
accepted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiorocketmq.common import fastjson as fj
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.fastjson import JsonDict
from aiorocketmq.common.topic_config import (
    DEFAULT_QUEUE_NUMS,
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicFilterType,
)

__all__ = [
    "DEFAULT_QUEUE_NUMS",
    "BrokerData",
    "ClusterInfo",
    "DataVersion",
    "KVTable",
    "QueueData",
    "RegisterBrokerBody",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "TopicFilterType",
    "TopicList",
    "TopicRouteData",
]


@dataclass(slots=True, frozen=True)
class QueueData:
    """A topic's queues on one brokerName (``QueueData``)."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json_dict(self) -> JsonDict:
        """Fields in fastjson's order."""
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json_dict(cls, d: object) -> QueueData:
        """Read a decoded object (``topicSynFlag``, the pre-4.9 spelling, too)."""
        obj = fj.as_dict(d, "QueueData")
        return cls(
            broker_name=fj.get_str(obj, "brokerName"),
            read_queue_nums=fj.get_int(obj, "readQueueNums", 0),
            write_queue_nums=fj.get_int(obj, "writeQueueNums", 0),
            perm=fj.get_int(obj, "perm", 0),
            topic_sys_flag=fj.get_int(obj, "topicSysFlag", fj.get_int(obj, "topicSynFlag", 0)),
        )

    @classmethod
    def from_topic_config(cls, broker_name: str, tc: TopicConfig) -> QueueData:
        """What a name server records for ``tc`` on ``broker_name``."""
        return cls(broker_name, tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag)


@dataclass(slots=True)
class BrokerData:
    """A brokerName's addresses by brokerId (0 = master), and its cluster."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_json_dict(self) -> JsonDict:
        """Fields in fastjson's order; ids ascending, as Java's HashMap of small Longs."""
        return {
            "brokerAddrs": {bid: self.broker_addrs[bid] for bid in sorted(self.broker_addrs)},
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    @classmethod
    def from_json_dict(cls, d: object) -> BrokerData:
        """Read a decoded object; ``brokerAddrs`` keys (quoted or bare) become ints."""
        obj = fj.as_dict(d, "BrokerData")
        addrs: dict[int, str] = {}
        for key, addr in fj.as_dict(obj.get("brokerAddrs") or {}, "brokerAddrs").items():
            try:
                broker_id = int(key)
            except ValueError:
                raise RemoteProtocolError(f"brokerAddrs key {key!r} is not a number") from None
            if not isinstance(addr, str):
                raise RemoteProtocolError(f"brokerAddrs[{key}] is not a string")
            addrs[broker_id] = addr
        return cls(fj.get_str(obj, "cluster", ""), fj.get_str(obj, "brokerName"), addrs)

    def copy(self) -> BrokerData:
        """An independent copy (the address map is not shared)."""
        return BrokerData(self.cluster, self.broker_name, dict(self.broker_addrs))


@dataclass(slots=True)
class TopicRouteData:
    """GET_ROUTEINFO_BY_TOPIC's body (``TopicRouteData``)."""

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None

    def to_json_dict(self) -> JsonDict:
        """Fields in fastjson's order; ``orderTopicConf`` left out when None."""
        d: JsonDict = {
            "brokerDatas": [b.to_json_dict() for b in self.broker_datas],
            "filterServerTable": {k: list(v) for k, v in self.filter_server_table.items()},
        }
        if self.order_topic_conf is not None:
            d["orderTopicConf"] = self.order_topic_conf
        d["queueDatas"] = [q.to_json_dict() for q in self.queue_datas]
        return d

    @classmethod
    def from_json_dict(cls, d: object) -> TopicRouteData:
        """Read a decoded object."""
        obj = fj.as_dict(d, "TopicRouteData")
        table = fj.as_dict(obj.get("filterServerTable") or {}, "filterServerTable")
        return cls(
            queue_datas=[
                QueueData.from_json_dict(q) for q in fj.as_list(obj.get("queueDatas"), "queueDatas")
            ],
            broker_datas=[
                BrokerData.from_json_dict(b)
                for b in fj.as_list(obj.get("brokerDatas"), "brokerDatas")
            ],
            filter_server_table={
                k: fj.get_str_list(v, "filterServerTable") for k, v in table.items()
            },
            order_topic_conf=fj.get_opt_str(obj, "orderTopicConf"),
        )

    def encode(self, standard_json: bool = True) -> bytes:
        """The body: standard JSON, or fastjson's bare integer keys (for clients < 4.9.4)."""
        return fj.dumps_bytes(
            self.to_json_dict(), unquoted_int_keys=not standard_json, ascii_only=standard_json
        )

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str) -> TopicRouteData:
        """Parse either form. Raises ``RemoteProtocolError``."""
        return cls.from_json_dict(fj.loads_object(data, "TopicRouteData"))


@dataclass(slots=True)
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO's body: brokers by name, brokerNames by cluster."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)

    def to_json_dict(self) -> JsonDict:
        """Fields in fastjson's order; sets as sorted arrays."""
        return {
            "brokerAddrTable": {k: v.to_json_dict() for k, v in self.broker_addr_table.items()},
            "clusterAddrTable": {k: sorted(v) for k, v in self.cluster_addr_table.items()},
        }

    @classmethod
    def from_json_dict(cls, d: object) -> ClusterInfo:
        """Read a decoded object."""
        obj = fj.as_dict(d, "ClusterInfo")
        brokers = fj.as_dict(obj.get("brokerAddrTable") or {}, "brokerAddrTable")
        clusters = fj.as_dict(obj.get("clusterAddrTable") or {}, "clusterAddrTable")
        return cls(
            {k: BrokerData.from_json_dict(v) for k, v in brokers.items()},
            {k: set(fj.get_str_list(v, "clusterAddrTable")) for k, v in clusters.items()},
        )

    def encode(self, standard_json: bool = True) -> bytes:
        """The body, in either JSON form (see ``TopicRouteData.encode``)."""
        return fj.dumps_bytes(self.to_json_dict(), unquoted_int_keys=not standard_json)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str) -> ClusterInfo:
        """Parse either form. Raises ``RemoteProtocolError``."""
        return cls.from_json_dict(fj.loads_object(data, "ClusterInfo"))


@dataclass(slots=True)
class TopicList:
    """A list of topic names, and for the system list one broker address."""

    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None

    def to_json_dict(self) -> JsonDict:
        """Fields in fastjson's order; ``brokerAddr`` left out when None."""
        d: JsonDict = {} if self.broker_addr is None else {"brokerAddr": self.broker_addr}
        d["topicList"] = list(self.topic_list)
        return d

    @classmethod
    def from_json_dict(cls, d: object) -> TopicList:
        """Read a decoded object."""
        obj = fj.as_dict(d, "TopicList")
        return cls(
            fj.get_str_list(obj.get("topicList"), "topicList"), fj.get_opt_str(obj, "brokerAddr")
        )

    def encode(self) -> bytes:
        """The JSON body."""
        return fj.dumps_bytes(self.to_json_dict())

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str) -> TopicList:
        """Parse a JSON body. Raises ``RemoteProtocolError``."""
        return cls.from_json_dict(fj.loads_object(data, "TopicList"))


@dataclass(slots=True)
class KVTable:
    """One KV-config namespace, ``{"table":{key:value}}``."""

    table: dict[str, str] = field(default_factory=dict)

    def to_json_dict(self) -> JsonDict:
        """The object."""
        return {"table": dict(self.table)}

    @classmethod
    def from_json_dict(cls, d: object) -> KVTable:
        """Read a decoded object; values must be strings."""
        table = fj.as_dict(fj.as_dict(d, "KVTable").get("table") or {}, "table")
        if not all(isinstance(v, str) for v in table.values()):
            raise RemoteProtocolError("KVTable values must be strings")
        return cls(dict(table))

    def encode(self) -> bytes:
        """The JSON body."""
        return fj.dumps_bytes(self.to_json_dict())

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str) -> KVTable:
        """Parse a JSON body. Raises ``RemoteProtocolError``."""
        return cls.from_json_dict(fj.loads_object(data, "KVTable"))
