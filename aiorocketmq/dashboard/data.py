"""The dashboard's data builders: one plain, JSON-ready dict per page.

Owns: gathering what each page shows from the admin API (cluster info and every
node's runtime info, topic stats, consume stats, consumer connections, message
queries) and shaping it into dicts of str/int/float/list. The HTML page and its
``/api/...`` JSON twin are both built from these dicts, so the two never disagree.

Must not: render HTML, speak HTTP, or change anything on a broker (the dashboard
is read-only).

Errors: ``NotFound`` (HTTP 404) for an unknown topic, group or message, and
``BadInput`` (HTTP 400) for a malformed request; transport failures stay the
client's own ``MQClientError`` types (the server answers them with 502).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable
from typing import Any, Final, TypeVar

from aiorocketmq.admin.ha_status import ha_rows
from aiorocketmq.admin.lag import fetch_series, merge_series
from aiorocketmq.admin.message_admin import MessageAdmin
from aiorocketmq.admin.mq_admin import MQAdmin, MQAdminError
from aiorocketmq.client.errors import MQClientError, NoRouteError
from aiorocketmq.common.admin_bodies import ConsumeStats
from aiorocketmq.common.constants import MASTER_ID, RETRY_GROUP_TOPIC_PREFIX
from aiorocketmq.common.message import MessageExt, MessageQueue
from aiorocketmq.common.protocol_bodies import ConsumerConnection
from aiorocketmq.common.validators import is_system_topic, validate_group, validate_topic

__all__ = [
    "BODY_PREVIEW_CHARS",
    "BadInput",
    "DashboardError",
    "NotFound",
    "cluster_view",
    "group_detail",
    "groups_view",
    "message_by_id",
    "message_by_key",
    "topic_detail",
    "topics_view",
    "tps_of",
]

BODY_PREVIEW_CHARS: Final = 512
"""How much of a body a message page shows (decoded as UTF-8, errors replaced)."""
#: How long the group page waits for one client's running info.
RUNNING_INFO_TIMEOUT_S: Final = 3.0
#: The group page's lag chart: the last hour, at most 60 snapshots per broker.
LAG_HISTORY_MS: Final = 3_600_000
LAG_HISTORY_POINTS: Final = 60

_REPLY_TOPIC_POSTFIX: Final = "_REPLY_TOPIC"
"""``MixAll.REPLY_TOPIC_POSTFIX``: a cluster's request-reply topic ends with it."""
_HEX_ID = re.compile(r"^[0-9A-Fa-f]{24,64}$")  # IPv4 and IPv6 ids, offset or unique
_T = TypeVar("_T")


class DashboardError(Exception):
    """A request the dashboard answers with an error page.

    Args:
        message: what the user reads.
        status: the HTTP status of that page.
    """

    status = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadInput(DashboardError):
    """Malformed input: a name with illegal characters, an id that is not hex."""

    status = 400


class NotFound(DashboardError):
    """An unknown topic, group or message."""

    status = 404


def _check_name(kind: str, value: str) -> str:
    """The broker's topic rule or the client's group rule, else ``BadInput`` with its text."""
    value = value.strip()
    problem = validate_topic(value) if kind == "topic" else validate_group(value)
    if problem is not None:
        raise BadInput(problem)
    return value


async def _or_none(what: Awaitable[_T]) -> _T | None:
    """``what``'s result, or None when the cluster could not answer it."""
    try:
        return await what
    except (MQClientError, DashboardError):
        return None


def tps_of(runtime: dict[str, str] | None, key: str) -> float:
    """The 10-second figure of a runtime TPS triple (``"1.5 1.2 0.9"``); 0.0 when absent."""
    text = (runtime or {}).get(key, "").strip()
    try:
        return float(text.split()[0]) if text else 0.0
    except ValueError:
        return 0.0


def _int(runtime: dict[str, str] | None, key: str) -> int | None:
    try:
        return int((runtime or {}).get(key, ""))
    except ValueError:
        return None


def _float(runtime: dict[str, str] | None, key: str) -> float | None:
    try:
        return float((runtime or {}).get(key, ""))
    except ValueError:
        return None


async def _runtimes(admin: MQAdmin, addrs: list[str]) -> dict[str, dict[str, str] | None]:
    found = await asyncio.gather(*(_or_none(admin.fetch_broker_runtime_stats(a)) for a in addrs))
    return dict(zip(addrs, found, strict=True))


async def cluster_view(admin: MQAdmin) -> dict[str, Any]:
    """Clusters -> broker sets -> nodes with role, version, TPS, offsets, lag, disk."""
    info = await admin.examine_cluster_info()
    addrs = sorted(a for b in info.broker_addr_table.values() for a in b.broker_addrs.values())
    runtimes = await _runtimes(admin, addrs)
    clusters = []
    for cluster in sorted(info.cluster_addr_table):
        sets = []
        for name in sorted(info.cluster_addr_table[cluster]):
            data = info.broker_addr_table.get(name)
            if data is None:
                continue
            lags = {row.addr: row.lag for row in ha_rows(data, runtimes)}
            nodes = []
            for broker_id in sorted(data.broker_addrs):
                addr = data.broker_addrs[broker_id]
                rt = runtimes.get(addr)
                nodes.append(
                    {
                        "brokerId": broker_id,
                        "role": "master" if broker_id == MASTER_ID else "slave",
                        "address": addr,
                        "online": rt is not None,
                        "version": (rt or {}).get("brokerVersionDesc", "-"),
                        "putTps": tps_of(rt, "putTps"),
                        "getTps": tps_of(rt, "getTransferedTps"),
                        "commitLogMaxOffset": _int(rt, "commitLogMaxOffset"),
                        "replicationLag": None if broker_id == MASTER_ID else lags.get(addr, "-"),
                        "diskRatio": _float(rt, "commitLogDiskRatio"),
                    }
                )
            sets.append({"brokerName": name, "nodes": nodes})
        clusters.append({"cluster": cluster, "brokerSets": sets})
    return {"clusters": clusters, "generatedAt": int(time.time() * 1000)}


def _queue_rows(table: dict[Any, Any]) -> list[dict[str, Any]]:
    rows = []
    for mq in sorted(table):
        off = table[mq]
        rows.append(
            {
                "brokerName": mq.broker_name,
                "queueId": mq.queue_id,
                "minOffset": off.min_offset,
                "maxOffset": off.max_offset,
                "lastUpdateTimestamp": off.last_update_timestamp,
            }
        )
    return rows


async def topic_detail(admin: MQAdmin, topic: str) -> dict[str, Any]:
    """One topic's queues with min/max offsets; ``totalMessages`` sums max - min."""
    topic = _check_name("topic", topic)
    try:
        stats = await admin.examine_topic_stats(topic)
    except (NoRouteError, MQAdminError) as exc:
        raise NotFound(f"topic {topic!r} not found: {exc}") from exc
    queues = _queue_rows(stats.offset_table)
    return {
        "topic": topic,
        "system": is_system_topic(topic),
        "queues": queues,
        "totalMessages": sum(q["maxOffset"] - q["minOffset"] for q in queues),
        "lastUpdateTimestamp": max((q["lastUpdateTimestamp"] for q in queues), default=0),
    }


async def topics_view(admin: MQAdmin, show_system: bool = False) -> dict[str, Any]:
    """Every topic's queue count, total messages and last update (system ones on request)."""
    names = sorted(await admin.fetch_all_topic_list())
    info = await admin.examine_cluster_info()
    # As rocketmq-dashboard: each cluster's and broker set's own topic (a broker
    # registers one named after each), reply topics and %RETRY%/%DLQ% count as system.
    internal = set(info.cluster_addr_table) | set(info.broker_addr_table)
    shown = [
        t
        for t in names
        if show_system
        or not (
            is_system_topic(t)
            or t in internal
            or t.startswith("%")
            or t.endswith(_REPLY_TOPIC_POSTFIX)
        )
    ]
    details = await asyncio.gather(*(_or_none(topic_detail(admin, t)) for t in shown))
    topics = []
    for name, detail in zip(shown, details, strict=True):
        topics.append(
            {
                "topic": name,
                "queues": len(detail["queues"]) if detail else 0,
                "totalMessages": detail["totalMessages"] if detail else None,
                "lastUpdateTimestamp": detail["lastUpdateTimestamp"] if detail else 0,
            }
        )
    return {"topics": topics, "showSystem": show_system, "hidden": len(names) - len(shown)}


def _group_names(topics: list[str]) -> list[str]:
    prefix = RETRY_GROUP_TOPIC_PREFIX
    return sorted(t[len(prefix) :] for t in topics if t.startswith(prefix))


def _lag(stats: ConsumeStats) -> int:
    return sum(max(0, w.broker_offset - w.consumer_offset) for w in stats.offset_table.values())


async def groups_view(admin: MQAdmin) -> dict[str, Any]:
    """Every consumer group (one per retry topic): total lag, consume TPS, clients."""
    groups = _group_names(await admin.fetch_all_topic_list())
    stats = await asyncio.gather(*(_or_none(admin.examine_consume_stats(g)) for g in groups))
    conns = await asyncio.gather(
        *(_or_none(admin.examine_consumer_connection_info(g)) for g in groups)
    )
    rows = []
    for group, st, conn in zip(groups, stats, conns, strict=True):
        rows.append(
            {
                "group": group,
                "lag": _lag(st) if st else None,
                "consumeTps": round(st.consume_tps, 2) if st else None,
                "clients": len(conn.connections) if conn else 0,
            }
        )
    return {"groups": rows}


def _clients(conn: ConsumerConnection | None) -> str:
    if conn is None:
        return "-"
    return ", ".join(sorted(c.client_id for c in conn.connections)) or "-"


async def _queue_owners(
    admin: MQAdmin, group: str, conn: ConsumerConnection | None
) -> dict[MessageQueue, str]:
    """Which client holds each queue, from each client's running info.

    A client that cannot tell (ali-ons does not answer GET_CONSUMER_RUNNING_INFO) is
    given ``RUNNING_INFO_TIMEOUT_S`` and then left out.
    """
    if conn is None:
        return {}

    async def held(client_id: str) -> list[tuple[MessageQueue, str]]:
        try:
            info = await asyncio.wait_for(
                admin.get_consumer_running_info(group, client_id), RUNNING_INFO_TIMEOUT_S
            )
        except TimeoutError:
            return []
        return [(mq, client_id) for mq in info.mq_table]

    answers = await asyncio.gather(*(_or_none(held(c.client_id)) for c in conn.connections))
    return dict(pair for pairs in answers if pairs for pair in pairs)


async def group_detail(admin: MQAdmin, group: str) -> dict[str, Any]:
    """A group's queues: broker offset, consumer offset, lag, and the client holding each
    (from the clients' running info; ``-`` for a queue none holds; the group's clients
    when no client reports its queues, as pull consumers and ali-ons do not)."""
    group = _check_name("group", group)
    try:
        stats = await admin.examine_consume_stats(group)
    except (NoRouteError, MQAdminError) as exc:
        raise NotFound(f"consumer group {group!r} not found: {exc}") from exc
    conn = await _or_none(admin.examine_consumer_connection_info(group))
    clients = _clients(conn)
    owners = await _queue_owners(admin, group, conn)
    queues = []
    for mq in sorted(stats.offset_table):
        w = stats.offset_table[mq]
        queues.append(
            {
                "topic": mq.topic,
                "brokerName": mq.broker_name,
                "queueId": mq.queue_id,
                "brokerOffset": w.broker_offset,
                "consumerOffset": w.consumer_offset,
                "lag": max(0, w.broker_offset - w.consumer_offset),
                "lastTimestamp": w.last_timestamp,
                # No client reports queues (pull consumers, ali-ons): the group's clients.
                "client": owners.get(mq, "-") if owners else clients,
            }
        )
    return {
        "group": group,
        "lag": _lag(stats),
        "consumeTps": round(stats.consume_tps, 2),
        "clients": clients,
        "queues": queues,
        "lagHistory": await _lag_history(admin, group),
    }


async def _lag_history(admin: MQAdmin, group: str) -> list[dict[str, Any]]:
    """The last hour of ``mqadmin lag``'s merged series (empty when it cannot be had:
    the page still shows the live table)."""
    begin_ms = int(time.time() * 1000) - LAG_HISTORY_MS
    series = await _or_none(fetch_series(admin, group, None, begin_ms, LAG_HISTORY_POINTS))
    return [
        {"timestamp": p.timestamp, "topic": p.topic, "diff": p.diff}
        for p in merge_series(series or [])
    ]


def message_dict(msg: MessageExt) -> dict[str, Any]:
    """A message's identity, properties and a body preview."""
    body = bytes(msg.body or b"")
    return {
        "topic": msg.topic,
        "msgId": msg.get_property("UNIQ_KEY") or msg.msg_id,
        "offsetMsgId": msg.msg_id,
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "storeTimestamp": msg.store_timestamp,
        "bornHost": f"{msg.born_host[0]}:{msg.born_host[1]}",
        "storeHost": f"{msg.store_host[0]}:{msg.store_host[1]}",
        "properties": dict(sorted(msg.properties.items())),
        "bodySize": len(body),
        "bodyPreview": body[:BODY_PREVIEW_CHARS].decode("utf-8", errors="replace"),
    }


async def message_by_key(admin: MQAdmin, topic: str, key: str) -> dict[str, Any]:
    """Messages of ``topic`` whose KEYS contain ``key`` (QUERY_MESSAGE on its brokers)."""
    topic = _check_name("topic", topic)
    key = key.strip()
    if not key:
        raise BadInput("a message key is required")
    try:
        found = await MessageAdmin(admin).query_message(topic, key)
    except NoRouteError as exc:
        raise NotFound(f"topic {topic!r} not found: {exc}") from exc
    except MQAdminError as exc:
        raise NotFound(f"no message with key {key!r} in topic {topic!r}") from exc
    return {"topic": topic, "key": key, "messages": [message_dict(m) for m in found]}


async def message_by_id(admin: MQAdmin, msg_id: str, topic: str = "") -> dict[str, Any]:
    """A message by offsetMsgId, else (with ``topic``) by its unique key (UNIQ_KEY)."""
    msg_id = msg_id.strip()
    if not _HEX_ID.match(msg_id):
        raise BadInput(f"malformed message id {msg_id!r}: expected 24-64 hex digits")
    messages = MessageAdmin(admin)
    try:
        return {"msgId": msg_id, "messages": [message_dict(await messages.view_message(msg_id))]}
    except MQClientError as exc:
        if not topic.strip():
            raise NotFound(
                f"no message with offsetMsgId {msg_id!r} ({exc}); give the topic to "
                "look it up as a unique key"
            ) from exc
    topic = _check_name("topic", topic)
    try:
        found = await messages.query_message(topic, msg_id, unique=True)
    except MQClientError as exc:
        raise NotFound(f"no message with id {msg_id!r} in topic {topic!r}") from exc
    return {"msgId": msg_id, "messages": [message_dict(m) for m in found]}
