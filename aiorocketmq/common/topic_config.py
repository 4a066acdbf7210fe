"""A broker's topic table as it travels to name servers (and sits in ``topics.json``).

Owns: ``DataVersion``, ``TopicConfig`` (RocketMQ's fields and defaults: 16 read and
16 write queues, perm 6 = read|write, ``SINGLE_TAG``, sysFlag 0, not ordered),
``TopicConfigSerializeWrapper`` (``{"dataVersion","topicConfigTable"}``) and
``RegisterBrokerBody`` (REGISTER_BROKER's body, plain JSON or the zlib form), each
with ``to_json_dict`` / ``from_json_dict`` and ``encode`` / ``decode``.

Must not: do I/O or keep state; decoding peer bytes raises ``RemoteProtocolError``
and nothing else.

Fields come out in fastjson's order (sorted by name); readers are as lenient as
fastjson (see ``common/fastjson.py``).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Final, Literal, cast

from aiorocketmq.common import fastjson as fj
from aiorocketmq.common.constants import PERM_READ, PERM_WRITE
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.fastjson import JsonDict

__all__ = [
    "DEFAULT_QUEUE_NUMS",
    "DataVersion",
    "RegisterBrokerBody",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "TopicFilterType",
]

TopicFilterType = Literal["SINGLE_TAG", "MULTI_TAG"]
_FILTER_TYPES: Final = ("SINGLE_TAG", "MULTI_TAG")

DEFAULT_QUEUE_NUMS: Final = 16
"""``TopicConfig.defaultReadQueueNums`` / ``defaultWriteQueueNums``."""

MAX_INFLATED_REGISTER_BODY: Final = 64 * 1024 * 1024
"""Cap on an inflated compressed REGISTER_BROKER body: peer input, so bounded.
64 MiB holds a few hundred thousand topic lines, far past any real broker."""

_INT32: Final = struct.Struct(">i")


@dataclass(slots=True, frozen=True)
class DataVersion:
    """Version of a broker's topic table: a name server re-reads topics when it changes.

    Equality is Java's: same timestamp and same counter.
    """

    timestamp: int = 0
    counter: int = 0

    def next_version(self, now_ms: int) -> DataVersion:
        """The version after one change at ``now_ms`` (``DataVersion.nextVersion``)."""
        return DataVersion(now_ms, self.counter + 1)

    def to_json_dict(self) -> JsonDict:
        """Fields in fastjson's order."""
        return {"counter": self.counter, "timestamp": self.timestamp}

    @classmethod
    def from_json_dict(cls, d: object) -> DataVersion:
        """Read a decoded JSON object; missing fields are 0."""
        obj = fj.as_dict(d, "DataVersion")
        return cls(timestamp=fj.get_int(obj, "timestamp", 0), counter=fj.get_int(obj, "counter", 0))

    def encode(self) -> bytes:
        """The JSON body (QUERY_DATA_VERSION)."""
        return fj.dumps_bytes(self.to_json_dict())

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str) -> DataVersion:
        """Parse a JSON body. Raises ``RemoteProtocolError``."""
        return cls.from_json_dict(fj.loads_object(data, "DataVersion"))


@dataclass(slots=True, frozen=True)
class TopicConfig:
    """One topic as a broker holds it (``TopicConfig``), with RocketMQ's defaults."""

    topic_name: str
    read_queue_nums: int = DEFAULT_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_QUEUE_NUMS
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: TopicFilterType = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    #: RocketMQ 5's attributes (``message.type``), as sorted pairs (the config is
    #: hashable); JSON ``"attributes"`` only when there are some, so a 4.9 table
    #: reads back byte for byte.
    attributes: tuple[tuple[str, str], ...] = ()

    @property
    def attributes_map(self) -> dict[str, str]:
        """``attributes`` as a dict."""
        return dict(self.attributes)

    def to_json_dict(self) -> JsonDict:
        """Fields in fastjson's (alphabetical) order."""
        out: JsonDict = {"attributes": dict(self.attributes)} if self.attributes else {}
        return out | {
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": self.topic_filter_type,
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json_dict(cls, d: object, topic_name: str | None = None) -> TopicConfig:
        """Read a decoded object; ``topic_name`` fills in a missing ``topicName``."""
        obj = fj.as_dict(d, "TopicConfig")
        filter_type = fj.get_str(obj, "topicFilterType", "SINGLE_TAG")
        if filter_type not in _FILTER_TYPES:
            raise RemoteProtocolError(f"unknown topicFilterType {filter_type!r}")
        return cls(
            topic_name=fj.get_str(obj, "topicName", topic_name),
            read_queue_nums=fj.get_int(obj, "readQueueNums", DEFAULT_QUEUE_NUMS),
            write_queue_nums=fj.get_int(obj, "writeQueueNums", DEFAULT_QUEUE_NUMS),
            perm=fj.get_int(obj, "perm", PERM_READ | PERM_WRITE),
            topic_filter_type=cast(TopicFilterType, filter_type),
            topic_sys_flag=fj.get_int(obj, "topicSysFlag", 0),
            order=fj.get_bool(obj, "order", False),
            attributes=_attributes(obj.get("attributes")),
        )

    def encode_line(self) -> str:
        """``TopicConfig.encode()``: ``"name read write perm filterType"``.

        The compressed register body uses this form; it carries neither
        ``topicSysFlag`` nor ``order``, which then read back as their defaults.
        """
        return (
            f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} "
            f"{self.perm} {self.topic_filter_type}"
        )

    @classmethod
    def decode_line(cls, line: str) -> TopicConfig:
        """Parse ``encode_line``'s form. Raises ``RemoteProtocolError``."""
        parts = line.split(" ")
        if len(parts) != 5 or parts[4] not in _FILTER_TYPES:
            raise RemoteProtocolError(f"bad topic config line {line!r}")
        try:
            read, write, perm = int(parts[1]), int(parts[2]), int(parts[3])
        except ValueError:
            raise RemoteProtocolError(f"bad topic config line {line!r}") from None
        return cls(parts[0], read, write, perm, cast(TopicFilterType, parts[4]))


def _attributes(raw: object) -> tuple[tuple[str, str], ...]:
    """``"attributes"`` of a TopicConfig: a string map; anything else reads as none."""
    if not isinstance(raw, dict):
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in raw.items() if v is not None))


@dataclass(slots=True)
class TopicConfigSerializeWrapper:
    """A broker's topic table and its version (the broker's ``topics.json`` too)."""

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json_dict(self) -> JsonDict:
        """Fields in fastjson's order."""
        return {
            "dataVersion": self.data_version.to_json_dict(),
            "topicConfigTable": {k: v.to_json_dict() for k, v in self.topic_config_table.items()},
        }

    @classmethod
    def from_json_dict(cls, d: object) -> TopicConfigSerializeWrapper:
        """Read a decoded object; a missing table or version reads as empty / 0."""
        obj = fj.as_dict(d, "TopicConfigSerializeWrapper")
        table_obj = fj.as_dict(obj.get("topicConfigTable") or {}, "topicConfigTable")
        table = {name: TopicConfig.from_json_dict(tc, name) for name, tc in table_obj.items()}
        version = obj.get("dataVersion")
        return cls(table, DataVersion() if version is None else DataVersion.from_json_dict(version))

    def encode(self) -> bytes:
        """The JSON body (a bare wrapper: REGISTER_BROKER from brokers before V3_0_11)."""
        return fj.dumps_bytes(self.to_json_dict())

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str) -> TopicConfigSerializeWrapper:
        """Parse a JSON body. Raises ``RemoteProtocolError``."""
        return cls.from_json_dict(fj.loads_object(data, "TopicConfigSerializeWrapper"))


@dataclass(slots=True)
class RegisterBrokerBody:
    """REGISTER_BROKER's body: the topic table plus filter servers.

    Two wire forms (``RegisterBrokerBody.encode(boolean)``): JSON, or, when the
    header says ``compressed=true``, a zlib stream of ``int32 len + DataVersion
    JSON``, ``int32 topicCount``, per topic ``int32 len + TopicConfig line``, and
    ``int32 len + filterServerList JSON`` (big-endian ints).
    """

    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = field(
        default_factory=TopicConfigSerializeWrapper
    )
    filter_server_list: list[str] = field(default_factory=list)

    def to_json_dict(self) -> JsonDict:
        """Fields in fastjson's order."""
        return {
            "filterServerList": list(self.filter_server_list),
            "topicConfigSerializeWrapper": self.topic_config_serialize_wrapper.to_json_dict(),
        }

    @classmethod
    def from_json_dict(cls, d: object) -> RegisterBrokerBody:
        """Read a decoded object."""
        obj = fj.as_dict(d, "RegisterBrokerBody")
        wrapper = obj.get("topicConfigSerializeWrapper")
        return cls(
            TopicConfigSerializeWrapper()
            if wrapper is None
            else TopicConfigSerializeWrapper.from_json_dict(wrapper),
            fj.get_str_list(obj.get("filterServerList"), "filterServerList"),
        )

    def encode(self, compressed: bool = False) -> bytes:
        """The body bytes, JSON or (``compressed``) the zlib form at level 9 as Java."""
        if not compressed:
            return fj.dumps_bytes(self.to_json_dict())
        wrapper = self.topic_config_serialize_wrapper
        parts = [_framed(wrapper.data_version.encode())]
        parts.append(_INT32.pack(len(wrapper.topic_config_table)))
        parts += [_framed(tc.encode_line().encode()) for tc in wrapper.topic_config_table.values()]
        parts.append(_framed(fj.dumps_bytes(self.filter_server_list)))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode(
        cls, data: bytes | bytearray | memoryview, compressed: bool = False
    ) -> RegisterBrokerBody:
        """Parse either form. Raises ``RemoteProtocolError``."""
        if not compressed:
            return cls.from_json_dict(fj.loads_object(data, "RegisterBrokerBody"))
        reader = _Reader(_inflate(data, MAX_INFLATED_REGISTER_BODY))
        version = DataVersion.decode(reader.framed())
        count = reader.int32()
        table: dict[str, TopicConfig] = {}
        for _ in range(count):
            tc = TopicConfig.decode_line(reader.framed().decode("utf-8", "replace"))
            table[tc.topic_name] = tc
        servers = fj.get_str_list(fj.loads(reader.framed()), "filterServerList")
        return cls(TopicConfigSerializeWrapper(table, version), servers)


def _framed(payload: bytes) -> bytes:
    return _INT32.pack(len(payload)) + payload


def _inflate(data: bytes | bytearray | memoryview, limit: int) -> bytes:
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(bytes(data), limit)
    except zlib.error as exc:
        raise RemoteProtocolError(f"compressed register body: {exc}") from None
    if inflater.unconsumed_tail:
        raise RemoteProtocolError(f"compressed register body inflates past {limit} bytes")
    return out


class _Reader:
    """Reads the length-prefixed pieces of the inflated register body."""

    __slots__ = ("_buf", "_pos")

    def __init__(self, buf: bytes) -> None:
        self._buf = buf
        self._pos = 0

    def int32(self) -> int:
        if self._pos + 4 > len(self._buf):
            raise RemoteProtocolError("compressed register body ends inside a length")
        (value,) = _INT32.unpack_from(self._buf, self._pos)
        self._pos += 4
        if value < 0:
            raise RemoteProtocolError(f"compressed register body: negative length {value}")
        return int(value)

    def framed(self) -> bytes:
        length = self.int32()
        end = self._pos + length
        if end > len(self._buf):
            raise RemoteProtocolError("compressed register body ends inside an item")
        chunk = self._buf[self._pos : end]
        self._pos = end
        return chunk
