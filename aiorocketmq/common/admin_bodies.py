"""JSON bodies of the broker's admin replies, as RocketMQ 4.9.8's fastjson writes them.

Owns: ``TopicStatsTable`` / ``TopicOffset`` (GET_TOPIC_STATS_INFO), ``ConsumeStats`` /
``OffsetWrapper`` (GET_CONSUME_STATS), ``SubscriptionGroupWrapper``
(GET_ALL_SUBSCRIPTIONGROUP_CONFIG), ``ConsumerOffsetSerializeWrapper``
(GET_ALL_CONSUMER_OFFSET), ``DelayOffsetSerializeWrapper`` (GET_ALL_DELAY_OFFSET),
each with ``encode`` (the broker's side) and ``decode`` (mqadmin's side), plus the
reader and writer of fastjson's *object-keyed* maps. ``TopicConfigSerializeWrapper``
(GET_ALL_TOPIC_CONFIG) and ``KVTable`` (GET_BROKER_RUNTIME_INFO) live in
``common.topic_config`` / ``common.route`` and are re-exported here, so an admin tool
finds every admin body in one module.

Must not: do I/O; decoding peer bytes raises ``RemoteProtocolError`` and nothing else.

Quirks kept (fastjson 1.2.69, ``RemotingSerializable.encode``):

* ``HashMap<MessageQueue, X>`` is written with the *bean* as the key:
  ``{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":0,
  "maxOffset":3,"minOffset":0}}}``. That is not JSON; stock mqadmin/dashboard parse it
  with fastjson, so we write it the same way, and ``loads_object_keys`` reads it back.
* ``Map<Integer, Long>`` keys are written bare (``{0:250,1:250}``): consumer offsets,
  delay offsets. Readers accept quoted keys too.
* Bean fields come out sorted by name; ``double`` as ``0.0``.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from aiorocketmq.common import fastjson as fj
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.route import KVTable
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.topic_config import DataVersion, TopicConfigSerializeWrapper

__all__ = [
    "ConsumeStats",
    "ConsumerOffsetSerializeWrapper",
    "DelayOffsetSerializeWrapper",
    "KVTable",
    "ObjectKey",
    "OffsetWrapper",
    "ResetOffsetBody",
    "SubscriptionGroupWrapper",
    "TopicConfigSerializeWrapper",
    "TopicOffset",
    "TopicStatsTable",
    "dumps_mq_map",
    "loads_object_keys",
    "mq_table_entries",
]

Body = bytes | bytearray | memoryview | str

#: An object used as a map key, as ``loads_object_keys`` returns it: its (key, value)
#: pairs sorted by key, so it is hashable. ``dict(key)`` gives the object back.
ObjectKey = tuple[tuple[str, Any], ...]

#: Nesting bound of the object-key reader: admin bodies nest 3-4 deep; peer input
#: deeper than this is refused instead of recursing without bound.
MAX_NESTING: Final = 64

_WS: Final = re.compile(r"[ \t\n\r]*")
_SCALARS: Final = json.JSONDecoder()
_NUMBER: Final = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_LITERALS: Final = (("true", True), ("false", False), ("null", None))

# A flat object used as a map key, right after "{" or "," (fastjson's MessageQueue
# keys). String literals match first, so text inside a string is never touched.
_FLAT_OBJECT_KEY: Final = re.compile(
    r'"(?:[^"\\]|\\.)*"|([{,]\s*)(\{(?:[^{}"\[\]]|"(?:[^"\\]|\\.)*")*\})(\s*:)', re.DOTALL
)
_quote: Final = json.encoder.encode_basestring
#: Prefix of a key object turned into a string for the C parser.
_KEY_MARK: Final = "\x00aiorocketmq-object-key:"


# -- fastjson's object-keyed maps -------------------------------------------------------


def loads_object_keys(data: Body) -> Any:
    """Parse fastjson text whose maps may have object keys (and bare integer keys).

    Standard JSON (and fastjson's bare integer keys) goes through the C parser, and
    so does text whose object keys are flat (each key object turned into a marked
    string first); anything else (nested key objects, object and bare integer
    keys mixed) takes the slower reader here, which gives the same values.

    Returns:
        Decoded values; a map keyed by objects comes back as a dict keyed by
        ``ObjectKey`` tuples; bare integer keys come back as strings (``"0"``), as
        ``fastjson.loads`` gives them.

    Raises:
        RemoteProtocolError: not UTF-8, or not (tolerant) JSON, or nested too deeply.
    """
    if isinstance(data, str):
        text = data
    else:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RemoteProtocolError(f"JSON body is not UTF-8: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    except RecursionError:
        raise RemoteProtocolError("JSON nested too deeply") from None
    fast = _loads_flat_object_keys(text)
    if fast is not None:
        return fast
    with contextlib.suppress(RemoteProtocolError):
        return fj.loads(text)  # fastjson's bare integer keys
    parser = _ObjectKeyParser(text)
    value = parser.value(0)
    parser.skip_ws()
    if parser.pos != len(text):
        raise RemoteProtocolError(f"not JSON: trailing data at {parser.pos}")
    return value


def _quote_object_key(match: re.Match[str]) -> str:
    if match.group(2) is None:
        return match.group(0)
    return match.group(1) + json.dumps(_KEY_MARK + match.group(2)) + match.group(3)


def _object_pairs(pairs: list[tuple[str, Any]]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for key, value in pairs:
        if key.startswith(_KEY_MARK):
            obj = json.loads(key[len(_KEY_MARK) :])
            if not isinstance(obj, dict):
                raise ValueError("object key is not an object")
            items = tuple(sorted(obj.items()))
            hash(items)  # TypeError for a non-scalar value: the caller falls back
            out[items] = value
        else:
            out[key] = value
    return out


def _loads_flat_object_keys(text: str) -> Any | None:
    """The C parser over ``text`` with flat key objects quoted; None if that fails."""
    quoted = _FLAT_OBJECT_KEY.sub(_quote_object_key, text)
    if quoted == text:
        return None
    try:
        return json.loads(quoted, object_pairs_hook=_object_pairs)
    except (ValueError, TypeError, RecursionError):
        return None  # the slow reader decides, with its own error


class _ObjectKeyParser:
    """Recursive descent over one text; strings and numbers use json's own scanners."""

    __slots__ = ("pos", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> RemoteProtocolError:
        return RemoteProtocolError(f"not JSON: {what} at {self.pos}")

    def skip_ws(self) -> None:
        match = _WS.match(self.text, self.pos)
        assert match is not None  # the pattern matches the empty string
        self.pos = match.end()

    def value(self, depth: int) -> Any:
        if depth > MAX_NESTING:
            raise self.fail("nested too deeply")
        self.skip_ws()
        ch = self.text[self.pos : self.pos + 1]
        if ch == "{":
            return self.obj(depth + 1)
        if ch == "[":
            return self.array(depth + 1)
        if ch == '"':
            return self.string()
        for literal, result in _LITERALS:
            if self.text.startswith(literal, self.pos):
                self.pos += len(literal)
                return result
        return self.number()

    def string(self) -> str:
        try:
            text, self.pos = _SCALARS.raw_decode(self.text, self.pos)
        except json.JSONDecodeError as exc:
            raise self.fail(exc.msg) from None
        return str(text)

    def number(self) -> int | float:
        match = _NUMBER.match(self.text, self.pos)
        if match is None:
            raise self.fail("expected a value")
        self.pos = match.end()
        if match.group(1) or match.group(2):
            return float(match.group(0))
        return int(match.group(0))

    def key(self, depth: int) -> str | ObjectKey:
        ch = self.text[self.pos : self.pos + 1]
        if ch == '"':
            return self.string()
        if ch == "{":
            obj = self.obj(depth + 1)
            try:
                items = tuple(sorted(obj.items()))
                hash(items)
            except TypeError:
                raise self.fail("object key holding a non-scalar value") from None
            return items
        number = self.number()
        if not isinstance(number, int):
            raise self.fail("non-integer bare key")
        return str(number)

    def obj(self, depth: int) -> dict[Any, Any]:
        self.pos += 1  # "{"
        out: dict[Any, Any] = {}
        self.skip_ws()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return out
        while True:
            self.skip_ws()
            key = self.key(depth)
            self.skip_ws()
            if not self.text.startswith(":", self.pos):
                raise self.fail("expected ':'")
            self.pos += 1
            out[key] = self.value(depth)
            self.skip_ws()
            ch = self.text[self.pos : self.pos + 1]
            self.pos += 1
            if ch == "}":
                return out
            if ch != ",":
                raise self.fail("expected ',' or '}'")

    def array(self, depth: int) -> list[Any]:
        self.pos += 1  # "["
        out: list[Any] = []
        self.skip_ws()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return out
        while True:
            out.append(self.value(depth))
            self.skip_ws()
            ch = self.text[self.pos : self.pos + 1]
            self.pos += 1
            if ch == "]":
                return out
            if ch != ",":
                raise self.fail("expected ',' or ']'")


def _mq_key_json(mq: MessageQueue) -> str:
    # fastjson's bean order: brokerName, queueId, topic (built by hand: this runs
    # once per queue of a stats reply).
    return (
        f'{{"brokerName":{_quote(mq.broker_name)},"queueId":{int(mq.queue_id)},'
        f'"topic":{_quote(mq.topic)}}}'
    )


def dumps_mq_map(table: Mapping[MessageQueue, Mapping[str, Any]]) -> str:
    """fastjson's text of a ``HashMap<MessageQueue, bean>``: each key the queue's bean."""
    parts = [f"{_mq_key_json(mq)}:{fj.dumps(dict(value))}" for mq, value in table.items()]
    return "{" + ",".join(parts) + "}"


def _mq_from_key(key: object, what: str) -> MessageQueue:
    if isinstance(key, tuple):
        return MessageQueue.from_json_dict(dict(key))
    if isinstance(key, str):
        # A writer that quoted the key object (standard JSON): take it too.
        return MessageQueue.from_json_dict(fj.loads_object(key, what))
    raise RemoteProtocolError(f"{what}: bad MessageQueue key {key!r}")


def mq_table_entries(value: object, what: str) -> list[tuple[MessageQueue, fj.JsonDict]]:
    """A decoded ``Map<MessageQueue, bean>`` (``loads_object_keys``) as (queue, bean) pairs."""
    table = fj.as_dict({} if value is None else value, what)
    return [(_mq_from_key(k, what), fj.as_dict(v, what)) for k, v in table.items()]


def _int_keyed(value: object, what: str) -> dict[int, int]:
    entries = fj.as_dict(value or {}, what)
    try:
        return {int(k): fj.get_int(entries, k, 0) for k in entries}
    except ValueError:
        raise RemoteProtocolError(f"{what}: non-integer key") from None


# -- GET_TOPIC_STATS_INFO -------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class TopicOffset:
    """One queue's offsets in ``TopicStatsTable`` (``TopicOffset``)."""

    min_offset: int = 0
    max_offset: int = 0
    #: Store time of the queue's last message; 0 for an empty queue.
    last_update_timestamp: int = 0

    def to_json_dict(self) -> fj.JsonDict:
        """fastjson's (sorted) field order."""
        return {
            "lastUpdateTimestamp": self.last_update_timestamp,
            "maxOffset": self.max_offset,
            "minOffset": self.min_offset,
        }

    @classmethod
    def from_json_dict(cls, d: fj.JsonDict) -> TopicOffset:
        """Read one entry; missing fields are 0."""
        return cls(
            fj.get_int(d, "minOffset", 0),
            fj.get_int(d, "maxOffset", 0),
            fj.get_int(d, "lastUpdateTimestamp", 0),
        )


@dataclass(slots=True)
class TopicStatsTable:
    """GET_TOPIC_STATS_INFO's reply body: per write queue, min/max offset and last time."""

    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)

    def encode(self) -> bytes:
        """fastjson's text (object keys)."""
        table = {mq: off.to_json_dict() for mq, off in self.offset_table.items()}
        return ('{"offsetTable":' + dumps_mq_map(table) + "}").encode()

    @classmethod
    def decode(cls, data: Body) -> TopicStatsTable:
        """Parse fastjson's text. Raises ``RemoteProtocolError``."""
        d = fj.as_dict(loads_object_keys(data), "TopicStatsTable")
        rows = mq_table_entries(d.get("offsetTable"), "offsetTable")
        return cls({mq: TopicOffset.from_json_dict(v) for mq, v in rows})


# -- GET_CONSUME_STATS ----------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class OffsetWrapper:
    """One queue of ``ConsumeStats`` (``OffsetWrapper``)."""

    #: The queue's max offset in the store.
    broker_offset: int = 0
    #: The group's committed offset (0 when none).
    consumer_offset: int = 0
    #: Store time of the last consumed message (0 when unknown).
    last_timestamp: int = 0

    def to_json_dict(self) -> fj.JsonDict:
        """fastjson's (sorted) field order."""
        return {
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "lastTimestamp": self.last_timestamp,
        }

    @classmethod
    def from_json_dict(cls, d: fj.JsonDict) -> OffsetWrapper:
        """Read one entry; missing fields are 0."""
        return cls(
            fj.get_int(d, "brokerOffset", 0),
            fj.get_int(d, "consumerOffset", 0),
            fj.get_int(d, "lastTimestamp", 0),
        )


@dataclass(slots=True)
class ConsumeStats:
    """GET_CONSUME_STATS's reply body: a group's offsets per queue and its TPS."""

    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def compute_total_diff(self) -> int:
        """Messages not yet consumed over all queues (``computeTotalDiff``)."""
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())

    def encode(self) -> bytes:
        """fastjson's text (object keys; ``consumeTps`` first, as sorted)."""
        table = {mq: w.to_json_dict() for mq, w in self.offset_table.items()}
        tps = fj.dumps(float(self.consume_tps))
        return ('{"consumeTps":' + tps + ',"offsetTable":' + dumps_mq_map(table) + "}").encode()

    @classmethod
    def decode(cls, data: Body) -> ConsumeStats:
        """Parse fastjson's text. Raises ``RemoteProtocolError``."""
        return cls.from_json_dict(loads_object_keys(data))

    @classmethod
    def from_json_dict(cls, data: object) -> ConsumeStats:
        """From ``loads_object_keys``' value. Raises ``RemoteProtocolError``."""
        d = fj.as_dict(data, "ConsumeStats")
        rows = mq_table_entries(d.get("offsetTable"), "offsetTable")
        tps = d.get("consumeTps", 0.0)
        if isinstance(tps, str):
            try:
                tps = float(tps)
            except ValueError:
                raise RemoteProtocolError(f"consumeTps is not a number: {tps!r}") from None
        if not isinstance(tps, int | float) or isinstance(tps, bool):
            raise RemoteProtocolError(f"consumeTps is not a number: {tps!r}")
        return cls({mq: OffsetWrapper.from_json_dict(v) for mq, v in rows}, float(tps))


# -- config dumps -----------------------------------------------------------------------------


@dataclass(slots=True)
class SubscriptionGroupWrapper:
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG's body (``SubscriptionGroupManager.encode()``)."""

    subscription_group_table: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)

    def to_json_dict(self) -> fj.JsonDict:
        """fastjson's (sorted) field order."""
        return {
            "dataVersion": self.data_version.to_json_dict(),
            "subscriptionGroupTable": {
                k: v.to_json_dict() for k, v in self.subscription_group_table.items()
            },
        }

    def encode(self) -> bytes:
        """The JSON body."""
        return fj.dumps_bytes(self.to_json_dict())

    @classmethod
    def decode(cls, data: Body) -> SubscriptionGroupWrapper:
        """Parse a body. Raises ``RemoteProtocolError``."""
        d = fj.loads_object(data, "SubscriptionGroupWrapper")
        raw = fj.as_dict(d.get("subscriptionGroupTable") or {}, "subscriptionGroupTable")
        table = {g: SubscriptionGroupConfig.from_json_dict(c, g) for g, c in raw.items()}
        version = d.get("dataVersion")
        return cls(table, DataVersion() if version is None else DataVersion.from_json_dict(version))


@dataclass(slots=True)
class ConsumerOffsetSerializeWrapper:
    """GET_ALL_CONSUMER_OFFSET's body: ``"topic@group" -> {queueId: offset}``."""

    offset_table: dict[str, dict[int, int]] = field(default_factory=dict)

    def encode(self) -> bytes:
        """fastjson's text: queue ids bare (``{0:250}``), as a Java broker sends it."""
        return fj.dumps_bytes({"offsetTable": self.offset_table}, unquoted_int_keys=True)

    @classmethod
    def decode(cls, data: Body) -> ConsumerOffsetSerializeWrapper:
        """Parse a body (bare or quoted queue ids). Raises ``RemoteProtocolError``."""
        d = fj.loads_object(data, "ConsumerOffsetSerializeWrapper")
        raw = fj.as_dict(d.get("offsetTable") or {}, "offsetTable")
        return cls({key: _int_keyed(q, f"offsetTable[{key}]") for key, q in raw.items()})


@dataclass(slots=True)
class DelayOffsetSerializeWrapper:
    """GET_ALL_DELAY_OFFSET's body (``delayOffset.json``): delay level -> queue offset.

    A broker whose schedule service has no level yet sends ``{"offsetTable":{}}``.
    """

    offset_table: dict[int, int] = field(default_factory=dict)

    def encode(self) -> bytes:
        """fastjson's text: levels bare (``{1:0,2:5}``)."""
        return fj.dumps_bytes({"offsetTable": self.offset_table}, unquoted_int_keys=True)

    @classmethod
    def decode(cls, data: Body) -> DelayOffsetSerializeWrapper:
        """Parse a body (bare or quoted levels). Raises ``RemoteProtocolError``."""
        d = fj.loads_object(data, "DelayOffsetSerializeWrapper")
        return cls(_int_keyed(d.get("offsetTable"), "offsetTable"))


def _mq_key(mq: MessageQueue) -> str:
    # fastjson writes a bean map key as the bean itself, fields sorted.
    return (
        f'{{"brokerName":{fj.dumps(mq.broker_name)},"queueId":{int(mq.queue_id)},'
        f'"topic":{fj.dumps(mq.topic)}}}'
    )


@dataclass(slots=True)
class ResetOffsetBody:
    """``ResetOffsetBody``: ``{"offsetTable":{MessageQueue: offset}}``."""

    offset_table: dict[MessageQueue, int]

    def encode(self) -> bytes:
        """fastjson's text (queue objects as keys)."""
        rows = ",".join(f"{_mq_key(mq)}:{int(v)}" for mq, v in self.offset_table.items())
        return f'{{"offsetTable":{{{rows}}}}}'.encode()

    def encode_for_c(self) -> bytes:
        """``ResetOffsetBodyForC``: a list of ``MessageQueueForC`` (the C++ client's)."""
        items = [
            {
                "brokerName": mq.broker_name,
                "offset": int(v),
                "queueId": mq.queue_id,
                "topic": mq.topic,
            }
            for mq, v in self.offset_table.items()
        ]
        return fj.dumps_bytes({"offsetTable": items})

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str) -> ResetOffsetBody:
        """Parse fastjson's text. Raises ``RemoteProtocolError``."""
        d = fj.as_dict(loads_object_keys(data), "ResetOffsetBody")
        table: dict[MessageQueue, int] = {}
        for key, value in fj.as_dict(d.get("offsetTable") or {}, "offsetTable").items():
            if isinstance(key, tuple):
                mq = MessageQueue.from_json_dict(dict(key))
            elif isinstance(key, str):
                mq = MessageQueue.from_json_dict(fj.loads_object(key, "offsetTable key"))
            else:
                raise RemoteProtocolError(f"offsetTable: bad MessageQueue key {key!r}")
            if isinstance(value, bool) or not isinstance(value, int):
                raise RemoteProtocolError(f"offsetTable: offset {value!r} is not a number")
            table[mq] = value
        return cls(table)
