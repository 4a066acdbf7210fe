"""GET_CONSUMER_RUNNING_INFO's body: what one consumer client says about one group.

Java's ``ConsumerRunningInfo`` as fastjson writes it: ``properties`` (the consumer's
settings plus ``PROP_*`` keys), ``subscriptionSet``, ``mqTable`` (a map keyed by
``MessageQueue`` objects, not JSON, see ``admin_bodies``) of ``ProcessQueueInfo``,
``statusTable`` (per topic ``ConsumeStatus``: pull and consume RT and TPS over the
last minute, failures over the last hour) and ``jstack`` (thread dump, when asked).

Owns: the three beans, their fastjson text both ways, Java's ``formatString`` (the
``mqadmin consumerStatus -i`` text) and its analysis helpers.

Must not: collect the figures (the client does) or do I/O.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, Final

from aiorocketmq.common import fastjson as fj
from aiorocketmq.common.admin_bodies import dumps_mq_map, loads_object_keys, mq_table_entries
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.protocol_bodies import SubscriptionData

__all__ = [
    "PROP_CLIENT_VERSION",
    "PROP_CONSUMER_START_TIMESTAMP",
    "PROP_CONSUME_ORDERLY",
    "PROP_CONSUME_TYPE",
    "PROP_NAMESERVER_ADDR",
    "PROP_THREADPOOL_CORE_SIZE",
    "ConsumeStatus",
    "ConsumerRunningInfo",
    "ProcessQueueInfo",
    "human_millis",
]

PROP_NAMESERVER_ADDR: Final = "PROP_NAMESERVER_ADDR"
PROP_THREADPOOL_CORE_SIZE: Final = "PROP_THREADPOOL_CORE_SIZE"
PROP_CONSUME_ORDERLY: Final = "PROP_CONSUMEORDERLY"
PROP_CONSUME_TYPE: Final = "PROP_CONSUME_TYPE"
PROP_CLIENT_VERSION: Final = "PROP_CLIENT_VERSION"
PROP_CONSUMER_START_TIMESTAMP: Final = "PROP_CONSUMER_START_TIMESTAMP"

Body = bytes | bytearray | memoryview | str


def human_millis(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString``: ``yyyyMMddHHmmssSSS`` in local time.

    Outside the years Python dates cover (the C++ client reports uninitialized
    timestamps) the number itself.
    """
    try:
        moment = datetime.fromtimestamp(ms / 1000)
    except (ValueError, OverflowError, OSError):
        return str(ms)
    return moment.strftime("%Y%m%d%H%M%S") + f"{ms % 1000:03d}"


def _mq_text(mq: MessageQueue) -> str:
    """Java's ``MessageQueue.toString``."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


@dataclass(slots=True)
class ProcessQueueInfo:
    """One queue a consumer holds (``ProcessQueue.fillProcessQueueInfo``)."""

    commit_offset: int = 0
    cached_msg_min_offset: int = 0
    cached_msg_max_offset: int = 0
    cached_msg_count: int = 0
    cached_msg_size_in_mib: int = 0
    transaction_msg_min_offset: int = 0
    transaction_msg_max_offset: int = 0
    transaction_msg_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: int = 0
    droped: bool = False  # Java's spelling, kept on the wire
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0

    def to_json_dict(self) -> fj.JsonDict:
        """fastjson's sorted bean (``cachedMsgSizeInMiB`` keeps Java's capitals)."""
        out = {_camel(f.name): getattr(self, f.name) for f in fields(self)}
        out["cachedMsgSizeInMiB"] = out.pop("cachedMsgSizeInMib")
        return dict(sorted(out.items()))

    @classmethod
    def from_json_dict(cls, d: fj.JsonDict) -> ProcessQueueInfo:
        """Read a bean; absent fields keep their defaults."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            key = "cachedMsgSizeInMiB" if f.name == "cached_msg_size_in_mib" else _camel(f.name)
            if f.type == "bool":
                values[f.name] = fj.get_bool(d, key, False)
            else:
                values[f.name] = fj.get_int(d, key, 0)
        return cls(**values)

    def __str__(self) -> str:
        """Java's ``toString`` (mqadmin prints it in ``#Consumer MQ Detail#``)."""
        return (
            f"ProcessQueueInfo [commitOffset={self.commit_offset}, "
            f"cachedMsgMinOffset={self.cached_msg_min_offset}, "
            f"cachedMsgMaxOffset={self.cached_msg_max_offset}, "
            f"cachedMsgCount={self.cached_msg_count}, "
            f"cachedMsgSizeInMiB={self.cached_msg_size_in_mib}, "
            f"transactionMsgMinOffset={self.transaction_msg_min_offset}, "
            f"transactionMsgMaxOffset={self.transaction_msg_max_offset}, "
            f"transactionMsgCount={self.transaction_msg_count}, "
            f"locked={str(self.locked).lower()}, tryUnlockTimes={self.try_unlock_times}, "
            f"lastLockTimestamp={human_millis(self.last_lock_timestamp)}, "
            f"droped={str(self.droped).lower()}, "
            f"lastPullTimestamp={human_millis(self.last_pull_timestamp)}, "
            f"lastConsumeTimestamp={human_millis(self.last_consume_timestamp)}]"
        )


#: ConsumeStatus's fields and their JSON names, in fastjson's (sorted) order.
_STATUS_KEYS: Final = (
    ("consume_failed_msgs", "consumeFailedMsgs"),
    ("consume_failed_tps", "consumeFailedTPS"),
    ("consume_ok_tps", "consumeOKTPS"),
    ("consume_rt", "consumeRT"),
    ("pull_rt", "pullRT"),
    ("pull_tps", "pullTPS"),
)


@dataclass(slots=True)
class ConsumeStatus:
    """One topic's figures (``ConsumerStatsManager.consumeStatus``)."""

    pull_rt: float = 0.0
    pull_tps: float = 0.0
    consume_rt: float = 0.0
    consume_ok_tps: float = 0.0
    consume_failed_tps: float = 0.0
    consume_failed_msgs: int = 0

    def to_json_dict(self) -> fj.JsonDict:
        """fastjson's sorted bean (doubles as ``0.0``)."""
        return {
            key: (
                getattr(self, name) if name == "consume_failed_msgs" else float(getattr(self, name))
            )
            for name, key in _STATUS_KEYS
        }

    @classmethod
    def from_json_dict(cls, d: fj.JsonDict) -> ConsumeStatus:
        """Read a bean; absent fields are 0."""
        out = cls()
        for name, key in _STATUS_KEYS:
            value = d.get(key, 0)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                value = 0
            setattr(out, name, int(value) if name == "consume_failed_msgs" else float(value))
        return out


_CPP_EMPTY_MQ_TABLE: Final = b'{"mqTable":}'
"""How the C++ client's running info begins while it holds no queue (not JSON)."""


@dataclass(slots=True)
class ConsumerRunningInfo:
    """A consumer client's view of one group (see the module docstring)."""

    properties: dict[str, str] = field(default_factory=dict)
    subscription_set: list[SubscriptionData] = field(default_factory=list)
    mq_table: dict[MessageQueue, ProcessQueueInfo] = field(default_factory=dict)
    status_table: dict[str, ConsumeStatus] = field(default_factory=dict)
    jstack: str | None = None

    def encode(self) -> bytes:
        """fastjson's text (sorted fields; ``mqTable`` keyed by queue objects)."""
        mq_table = {mq: self.mq_table[mq].to_json_dict() for mq in sorted(self.mq_table)}
        parts = []
        if self.jstack is not None:
            parts.append('"jstack":' + fj.dumps(self.jstack))
        parts.append('"mqTable":' + dumps_mq_map(mq_table))
        parts.append('"properties":' + fj.dumps(dict(sorted(self.properties.items()))))
        status = {t: self.status_table[t].to_json_dict() for t in sorted(self.status_table)}
        parts.append('"statusTable":' + fj.dumps(status))
        subs = sorted(self.subscription_set, key=lambda s: (s.topic, s.sub_string))
        parts.append('"subscriptionSet":' + fj.dumps([s.to_json_dict() for s in subs]))
        return ("{" + ",".join(parts) + "}").encode()

    @classmethod
    def decode(cls, data: Body) -> ConsumerRunningInfo:
        """Parse fastjson's text, or the C++ client's. Raises ``RemoteProtocolError``."""
        raw = data.encode() if isinstance(data, str) else bytes(data)
        if raw.startswith(_CPP_EMPTY_MQ_TABLE):
            # The C++ client writes its mqTable by hand in front of the rest and, with no
            # queue yet, erases the table's "{" instead of a trailing comma.
            raw = b'{"mqTable":{}' + raw[len(_CPP_EMPTY_MQ_TABLE) :]
        d = fj.as_dict(loads_object_keys(raw), "ConsumerRunningInfo")
        props = fj.as_dict(d.get("properties") or {}, "properties")
        status = fj.as_dict(d.get("statusTable") or {}, "statusTable")
        return cls(
            properties={str(k): "" if v is None else str(v) for k, v in props.items()},
            subscription_set=[
                SubscriptionData.from_json_dict(s)
                for s in fj.as_list(d.get("subscriptionSet") or [], "subscriptionSet")
            ],
            mq_table={
                mq: ProcessQueueInfo.from_json_dict(v)
                for mq, v in mq_table_entries(d.get("mqTable"), "mqTable")
            },
            status_table={
                str(t): ConsumeStatus.from_json_dict(fj.as_dict(v, "ConsumeStatus"))
                for t, v in status.items()
            },
            jstack=fj.get_opt_str(d, "jstack"),
        )

    # -- Java's analysis (ConsumerStatusSubCommand) ------------------------------------

    @property
    def is_push(self) -> bool:
        """``PROP_CONSUME_TYPE`` is CONSUME_PASSIVELY."""
        return self.properties.get(PROP_CONSUME_TYPE) == "CONSUME_PASSIVELY"

    @property
    def is_orderly(self) -> bool:
        """``PROP_CONSUMEORDERLY`` is true."""
        return self.properties.get(PROP_CONSUME_ORDERLY, "").lower() == "true"

    def subscription_key(self) -> frozenset[tuple[str, str]]:
        """What ``analyzeSubscription`` compares: (topic, expression) pairs."""
        return frozenset((s.topic, s.sub_string) for s in self.subscription_set)

    def format_string(self) -> str:
        """Java's ``formatString`` (``mqadmin consumerStatus -i``)."""
        out = ["#Consumer Properties#\n"]
        out += [f"{k:<40}: {v}\n" for k, v in sorted(self.properties.items())]
        out.append("\n\n#Consumer Subscription#\n")
        subs = sorted(self.subscription_set, key=lambda s: (s.topic, s.sub_string))
        for i, sub in enumerate(subs, 1):
            out.append(
                f"{i:03d} Topic: {sub.topic:<40} ClassFilter: "
                f"{str(sub.class_filter_mode).lower():<8} SubExpression: {sub.sub_string}\n"
            )
        out.append("\n\n#Consumer Offset#\n")
        out.append(f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Consumer Offset':<20}\n")
        queues = sorted(self.mq_table)
        for mq in queues:
            offset = self.mq_table[mq].commit_offset
            out.append(f"{mq.topic:<32}  {mq.broker_name:<32}  {mq.queue_id:<4}  {offset:<20}\n")
        out.append("\n\n#Consumer MQ Detail#\n")
        out.append(
            f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#ProcessQueueInfo':<20}\n"
        )
        for mq in queues:
            out.append(
                f"{mq.topic:<64}  {mq.broker_name:<32}  {mq.queue_id:<4}  {self.mq_table[mq]}\n"
            )
        out.append("\n\n#Consumer RT&TPS#\n")
        out.append(
            f"{'#Topic':<64}  {'#Pull RT':>14} {'#Pull TPS':>14} {'#Consume RT':>14} "
            f"{'#ConsumeOK TPS':>14} {'#ConsumeFailed TPS':>18} {'#ConsumeFailedMsgsInHour':>25}\n"
        )
        for topic in sorted(self.status_table):
            s = self.status_table[topic]
            out.append(
                f"{topic:<32}  {s.pull_rt:14.2f} {s.pull_tps:14.2f} {s.consume_rt:14.2f} "
                f"{s.consume_ok_tps:14.2f} {s.consume_failed_tps:18.2f} "
                f"{s.consume_failed_msgs:25d}\n"
            )
        if self.jstack is not None:
            out.append("\n\n#Consumer jstack#\n")
            out.append(self.jstack)
        return "".join(out)

    def process_queue_warnings(self, client_id: str, now_ms: int | None = None) -> list[str]:
        """``analyzeProcessQueue``: queues that cannot lock, unlock or consume."""
        if not self.is_push:
            return []
        now = int(time.time() * 1000) if now_ms is None else now_ms
        lines = []
        for mq in sorted(self.mq_table):
            pq, where = self.mq_table[mq], f"{client_id} {_mq_text(mq)}"
            if self.is_orderly:
                if not pq.locked:
                    lines.append(
                        f"{where} can't lock for a while, {now - pq.last_lock_timestamp}ms"
                    )
                elif pq.droped and pq.try_unlock_times > 0:
                    lines.append(f"{where} unlock {pq.try_unlock_times} times, still failed")
            else:
                idle = now - pq.last_consume_timestamp
                if idle > 60_000 and pq.cached_msg_count > 0:
                    lines.append(f"{where} can't consume for a while, maybe blocked, {idle}ms")
        return lines


def same_subscriptions(infos: Mapping[str, ConsumerRunningInfo], now_ms: int | None = None) -> bool:
    """``analyzeSubscription``: push clients up over 2 minutes must subscribe alike."""
    if not infos:
        return True
    first = infos[min(infos)]
    now = int(time.time() * 1000) if now_ms is None else now_ms
    started = int(first.properties.get(PROP_CONSUMER_START_TIMESTAMP, "0") or 0)
    if not (first.is_push and now - started > 120_000):
        return True
    keys = {info.subscription_key() for info in infos.values()}
    return len(keys) == 1 and bool(next(iter(keys)))
