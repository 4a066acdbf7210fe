"""The text mqadmin prints, as RocketMQ 4.9.8's tools print it: pure functions.

Owns: each command's table or line format (Java's ``printf`` widths and headers
from ``tools/command/**``), fastjson's ``PrettyFormat`` text (``topicRoute``),
``TopicConfig`` / ``SubscriptionGroupConfig`` ``toString``, ``MQVersion``'s
ordinal -> name table, and ``UtilAll``'s time and truncation helpers. Where Java
prints ``null`` (a missing value through ``%s``) we print ``null`` too: scripts
that scrape mqadmin output see the same text.

Must not: do I/O or talk to servers; every function takes values and returns text
(lines end with ``\\n`` as Java's ``%n``).
"""

# Java's printf formats are kept verbatim (``%-32s  %-4d``...) so each line can be
# checked against the Java source by eye; f-strings would hide the widths.
# ruff: noqa: UP031

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from typing import Any, Final

from aiorocketmq.common import fastjson as fj
from aiorocketmq.common.admin_bodies import ConsumeStats, TopicStatsTable
from aiorocketmq.common.constants import perm_to_string
from aiorocketmq.common.protocol_bodies import (
    ConsumerConnection,
    ConsumeType,
    ProducerConnection,
)
from aiorocketmq.common.route import TopicRouteData
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.topic_config import TopicConfig

__all__ = [
    "broker_status_lines",
    "cluster_base_header",
    "cluster_base_row",
    "consumer_connection_text",
    "consumer_progress_text",
    "group_summary_header",
    "group_summary_row",
    "human_time_ms",
    "java_pretty_json",
    "leading_float",
    "lines_of",
    "producer_connection_text",
    "subscription_group_text",
    "topic_config_text",
    "topic_list_cluster_header",
    "topic_list_cluster_row",
    "topic_route_json",
    "topic_route_list",
    "topic_status_text",
    "version_desc",
]


# -- MQVersion ------------------------------------------------------------------------


def _version_names() -> tuple[str, ...]:
    """``MQVersion.Version``'s constants in declaration order (4.9.8: 612 of them).

    The enum is regular after its 3.0.0 pre-releases: a ``_SNAPSHOT`` and a release
    for each version, except that 3.3 to 3.9 start at patch 1.
    """
    names = ["V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1"] + [f"V3_0_0_BETA{i}" for i in range(1, 6)]
    for i in range(6, 10):
        names += [f"V3_0_0_BETA{i}_SNAPSHOT", f"V3_0_0_BETA{i}"]
    names.append("V3_0_0_FINAL")
    for patch in range(1, 16):
        names += [f"V3_0_{patch}_SNAPSHOT", f"V3_0_{patch}"]
    for major in (3, 4, 5):
        for minor in range(10):
            if major == 3 and minor == 0:
                continue
            first = 1 if major == 3 and minor >= 3 else 0
            for patch in range(first, 10):
                names += [f"V{major}_{minor}_{patch}_SNAPSHOT", f"V{major}_{minor}_{patch}"]
    return tuple(names)


VERSION_NAMES: Final = _version_names()


def version_desc(ordinal: int) -> str:
    """``MQVersion.getVersionDesc``: the name, the last one for ordinals past the end."""
    if ordinal < 0:
        return str(ordinal)  # Java would throw; show the raw number instead
    return VERSION_NAMES[min(ordinal, len(VERSION_NAMES) - 1)]


# -- UtilAll helpers ------------------------------------------------------------------


def human_time_ms(ms: int, millis: bool = True) -> str:
    """Local time as ``timeMillisToHumanString2`` (``2026-11-22 06:30:00,123``), or
    ``formatDate(..., "yyyy-MM-dd HH:mm:ss")`` without ``millis``."""
    text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))
    return f"{text},{ms % 1000:03d}" if millis else text


def _front(text: str | None, size: int) -> str:
    """``UtilAll.frontStringAtLeast``: cut to ``size`` characters (None prints "null")."""
    return "null" if text is None else text[:size]


def _j(value: object) -> str:
    """Java's ``%s`` of a possibly-null value."""
    return "null" if value is None else str(value)


def _jbool(value: bool) -> str:
    return "true" if value else "false"


# -- fastjson PrettyFormat ----------------------------------------------------------------


def java_pretty_json(value: Any) -> str:
    """fastjson 1.2.69's ``toJSONString(obj, true)`` of decoded JSON values.

    Objects and maps put each string-keyed entry on its own line, one tab deeper;
    integer keys (``HashMap<Long, String>``) stay on the line, bare; a non-empty
    object closes on its own line. Non-empty arrays put each item on its own line;
    empty ones are ``[]``.
    """
    out: list[str] = []
    _pretty(value, out, 0)
    return "".join(out)


def _pretty(value: Any, out: list[str], indent: int) -> None:
    if isinstance(value, dict):
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append(",")
            if isinstance(key, int) and not isinstance(key, bool):
                out.append(f"{key}:")
            else:
                out.append("\n" + "\t" * (indent + 1) + fj.dumps(str(key)) + ":")
            _pretty(item, out, indent + 1)
        if value:
            out.append("\n" + "\t" * indent)
        out.append("}")
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            out.append("\n" + "\t" * (indent + 1))
            _pretty(item, out, indent + 1)
        out.append("\n" + "\t" * indent + "]")
    else:
        out.append(fj.dumps(value))


def topic_route_json(route: TopicRouteData) -> str:
    """``topicRoute``'s output: ``topicRouteData.toJson(true)`` and a newline."""
    return java_pretty_json(route.to_json_dict()) + "\n"


_ROUTE_FORMAT: Final = "%-45s %-32s %-50s %-10s %-11s %-5s\n"


def topic_route_list(route: TopicRouteData) -> str:
    """``topicRoute -l``: one line per brokerName, a rule of 158 dashes, the totals.

    Addresses print as Java's ``HashMap.toString`` (``{0=127.0.0.1:10911}``).
    """
    queues = {q.broker_name: q for q in route.queue_datas}
    lines = [
        _ROUTE_FORMAT
        % ("#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm")
    ]
    total_read = total_write = 0
    for broker in sorted(route.broker_datas, key=lambda b: b.broker_name):
        queue = queues.get(broker.broker_name)
        if queue is None:  # Java would stop on a NullPointerException here
            continue
        total_read += queue.read_queue_nums
        total_write += queue.write_queue_nums
        addrs = ", ".join(f"{k}={broker.broker_addrs[k]}" for k in sorted(broker.broker_addrs))
        lines.append(
            _ROUTE_FORMAT
            % (
                broker.cluster,
                broker.broker_name,
                "{" + addrs + "}",
                queue.read_queue_nums,
                queue.write_queue_nums,
                queue.perm,
            )
        )
    lines.append("-" * 158 + "\n")
    lines.append(_ROUTE_FORMAT % ("Total:", len(queues), "", total_read, total_write, ""))
    return "".join(lines)


# -- configs -----------------------------------------------------------------------------


def topic_config_text(config: TopicConfig) -> str:
    """``TopicConfig.toString()``."""
    return (
        f"TopicConfig [topicName={config.topic_name}, readQueueNums={config.read_queue_nums}, "
        f"writeQueueNums={config.write_queue_nums}, perm={perm_to_string(config.perm)}, "
        f"topicFilterType={config.topic_filter_type}, topicSysFlag={config.topic_sys_flag}, "
        f"order={_jbool(config.order)}]"
    )


def subscription_group_text(config: SubscriptionGroupConfig) -> str:
    """``SubscriptionGroupConfig.toString()``."""
    return (
        f"SubscriptionGroupConfig [groupName={config.group_name}, "
        f"consumeEnable={_jbool(config.consume_enable)}, "
        f"consumeFromMinEnable={_jbool(config.consume_from_min_enable)}, "
        f"consumeBroadcastEnable={_jbool(config.consume_broadcast_enable)}, "
        f"retryQueueNums={config.retry_queue_nums}, retryMaxTimes={config.retry_max_times}, "
        f"brokerId={config.broker_id}, "
        f"whichBrokerWhenConsumeSlowly={config.which_broker_when_consume_slowly}, "
        f"notifyConsumerIdsChangedEnable={_jbool(config.notify_consumer_ids_changed_enable)}]"
    )


# -- topics ------------------------------------------------------------------------------


def topic_status_text(stats: TopicStatsTable) -> str:
    """``topicStatus``: one line per queue, sorted as ``MessageQueue.compareTo``."""
    lines = [
        "%-32s  %-4s  %-20s  %-20s    %s\n"
        % ("#Broker Name", "#QID", "#Min Offset", "#Max Offset", "#Last Updated")
    ]
    for mq in sorted(stats.offset_table):
        offset = stats.offset_table[mq]
        last = offset.last_update_timestamp
        lines.append(
            "%-32s  %-4d  %-20d  %-20d    %s\n"
            % (
                _front(mq.broker_name, 32),
                mq.queue_id,
                offset.min_offset,
                offset.max_offset,
                human_time_ms(last) if last > 0 else "",
            )
        )
    return "".join(lines)


def topic_list_cluster_header() -> str:
    """``topicList -c``'s header line."""
    return "%-20s  %-48s  %-48s\n" % ("#Cluster Name", "#Topic", "#Consumer Group")


def topic_list_cluster_row(cluster: str | None, topic: str, group: str) -> str:
    """One ``topicList -c`` line (the cluster prints ``null`` when none was found)."""
    return "%-20s  %-64s  %-64s\n" % (_front(cluster, 20), _front(topic, 64), _front(group, 64))


# -- cluster and broker -------------------------------------------------------------------

_CLUSTER_FORMAT: Final = "%-16s  %-22s  %-4s  %-22s %-16s %19s %19s %10s %5s %6s\n"


def cluster_base_header() -> str:
    """``clusterList``'s header line."""
    return _CLUSTER_FORMAT % (
        "#Cluster Name",
        "#Broker Name",
        "#BID",
        "#Addr",
        "#Version",
        "#InTPS(LOAD)",
        "#OutTPS(LOAD)",
        "#PCWait(ms)",
        "#Hour",
        "#SPACE",
    )


def leading_float(text: str | None) -> float | None:
    """The first space-separated number of a broker's text ("12.5 11.0 10.2" -> 12.5);
    None when absent, not a number, or not finite."""
    try:
        value = float(text.split(" ")[0]) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def cluster_base_row(
    cluster: str,
    *,
    broker_name: str,
    broker_id: int,
    address: str,
    runtime: Mapping[str, str] | None,
    now_ms: int,
) -> str:
    """One ``clusterList`` line from a broker's runtime table (None: unreachable).

    As Java: an unreachable broker shows zeros and empty fields; a reachable one
    lacking a key shows ``null`` for it.
    """
    get = (lambda _key: "") if runtime is None else runtime.get
    tps_in = leading_float(get("putTps")) or 0.0
    tps_out = leading_float(get("getTransferedTps")) or 0.0
    hour = 0.0
    earliest = get("earliestMessageTimeStamp")
    if earliest:
        try:
            hour = (now_ms - int(earliest)) / 1000.0 / 60.0 / 60.0
        except ValueError:
            pass
    space = 0.0
    ratio = get("commitLogDiskRatio")
    if ratio:
        try:
            space = float(ratio)
        except ValueError:
            pass
    send_load = "%9.2f(%s,%sms)" % (
        tps_in,
        _j(get("sendThreadPoolQueueSize")),
        _j(get("sendThreadPoolQueueHeadWaitTimeMills")),
    )
    pull_load = "%9.2f(%s,%sms)" % (
        tps_out,
        _j(get("pullThreadPoolQueueSize")),
        _j(get("pullThreadPoolQueueHeadWaitTimeMills")),
    )
    return _CLUSTER_FORMAT % (
        cluster,
        broker_name,
        broker_id,
        address,
        _j(get("brokerVersionDesc")),
        send_load,
        pull_load,
        _j(get("pageCacheLockTimeMills")),
        "%2.2f" % hour,
        "%.4f" % space,
    )


def broker_status_lines(runtime: Mapping[str, str], address: str | None = None) -> str:
    """``brokerStatus``: ``key : value`` sorted by key; with ``address`` (``-c``), the
    address first on every line."""
    lines = []
    for key in sorted(runtime):
        if address is None:
            lines.append("%-32s: %s\n" % (key, runtime[key]))
        else:
            lines.append("%-24s %-32s: %s\n" % (address, key, runtime[key]))
    return "".join(lines)


# -- consumers and producers -------------------------------------------------------------


def consumer_progress_text(stats: ConsumeStats, client_ips: Mapping[Any, str] | None = None) -> str:
    """``consumerProgress -g``: per queue offsets and lag, then TPS and total diff.

    Args:
        stats: the group's merged consume stats.
        client_ips: with ``-s true``, the client IP per ``MessageQueue`` (missing: N/A).
    """
    show_ip = client_ips is not None
    if show_ip:
        header = "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s  %s\n" % (
            "#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset",
            "#Client IP", "#Diff", "#LastTime",
        )  # fmt: skip
    else:
        header = "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s  %s\n" % (
            "#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset",
            "#Diff", "#LastTime",
        )  # fmt: skip
    lines = [header]
    diff_total = 0
    for mq in sorted(stats.offset_table):
        wrapper = stats.offset_table[mq]
        diff = wrapper.broker_offset - wrapper.consumer_offset
        diff_total += diff
        last = (
            "N/A" if wrapper.last_timestamp == 0 else human_time_ms(wrapper.last_timestamp, False)
        )
        head = (_front(mq.topic, 64), _front(mq.broker_name, 32), mq.queue_id)
        offsets = (wrapper.broker_offset, wrapper.consumer_offset)
        if client_ips is not None:
            ip = client_ips.get(mq) or "N/A"
            fmt = "%-64s  %-32s  %-4d  %-20d  %-20d  %-20s %-20d  %s\n"
            lines.append(fmt % (*head, *offsets, ip, diff, last))
        else:
            fmt = "%-64s  %-32s  %-4d  %-20d  %-20d  %-20d  %s\n"
            lines.append(fmt % (*head, *offsets, diff, last))
    lines.append("\n")
    lines.append("Consume TPS: %.2f\n" % stats.consume_tps)
    lines.append("Diff Total: %d\n" % diff_total)
    return "".join(lines)


def group_summary_header() -> str:
    """``consumerProgress`` (no ``-g``): the group list header."""
    return "%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s\n" % (
        "#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total",
    )  # fmt: skip


def group_summary_row(
    group: str, stats: ConsumeStats | None, connection: ConsumerConnection | None
) -> str:
    """One group's summary line (``GroupConsumeInfo``); None for what was not found."""
    tps = int(stats.consume_tps) if stats is not None else 0  # Java's (int) truncation
    diff = stats.compute_total_diff() if stats is not None else 0
    count = len(connection.connections) if connection is not None else 0
    version = type_desc = model_desc = ""
    if connection is not None and count:
        version = version_desc(min(c.version for c in connection.connections))
        active = connection.consume_type == ConsumeType.CONSUME_ACTIVELY
        type_desc = "PULL" if active else "PUSH"
        model_desc = "" if active else connection.message_model.name
    return "%-64s  %-6d  %-24s %-5s  %-14s  %-7d  %d\n" % (
        _front(group, 64),
        count,
        version if count > 0 else "OFFLINE",
        type_desc,
        model_desc,
        tps,
        diff,
    )


def consumer_connection_text(connection: ConsumerConnection) -> str:
    """``consumerConnection``: clients, subscriptions, then type, model and start point."""
    lines = ["%-36s %-22s %-10s %s\n" % ("#ClientId", "#ClientAddr", "#Language", "#Version")]
    for conn in connection.connections:
        lines.append(
            "%-36s %-22s %-10s %s\n"
            % (conn.client_id, conn.client_addr, conn.language, version_desc(conn.version))
        )
    lines.append("\nBelow is subscription:\n")
    lines.append("%-20s %s\n" % ("#Topic", "#SubExpression"))
    for sub in connection.subscriptions.values():
        lines.append("%-20s %s\n" % (sub.topic, sub.sub_string))
    lines.append("\n")
    lines.append(f"ConsumeType: {connection.consume_type.name}\n")
    lines.append(f"MessageModel: {connection.message_model.name}\n")
    lines.append(f"ConsumeFromWhere: {connection.consume_from_where.name}\n")
    return "".join(lines)


def producer_connection_text(connection: ProducerConnection) -> str:
    """``producerConnection``: one numbered line per client."""
    return "".join(
        "%04d  %-32s %-22s %-8s %s\n"
        % (i, conn.client_id, conn.client_addr, conn.language, version_desc(conn.version))
        for i, conn in enumerate(connection.connections, start=1)
    )


def lines_of(items: Iterable[str]) -> str:
    """One item per line (``topicList``)."""
    return "".join(f"{item}\n" for item in items)
