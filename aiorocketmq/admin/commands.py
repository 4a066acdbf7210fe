"""mqadmin's commands: what each one asks for and prints, as RocketMQ 4.9.8's tools.

Owns: one coroutine per command (``updateTopic``, ``deleteTopic``, ``topicList``,
``topicRoute``, ``topicStatus``, ``clusterList``, ``brokerStatus``,
``updateSubGroup``, ``deleteSubGroup``, ``consumerProgress``,
``consumerConnection``, ``producerConnection``), each taking an ``MQAdmin``, the
parsed options (attribute names are the Java options' long names) and a ``write``
function, and the ``COMMANDS`` table by Java command name. The order of requests
and the lines printed follow each Java ``SubCommand.execute``; the formats are in
``render``.

Where Java prints ``[error] ...`` and carries on with nothing (an unknown cluster)
or prints help and exits 0 (neither ``-b`` nor ``-c``), these raise instead, so
the command exits non-zero with the reason.

Java prints ``TopicConfig`` / ``SubscriptionGroupConfig`` with ``printf("%s", ...)``
and no line end; we end that line, so a shell prompt does not follow it.

Must not: parse command lines or touch ``sys`` (``cli/admin.py`` does).
"""

# Java's printf formats are kept verbatim (``%-32s  %-4d``...) so each line can be
# checked against the Java source by eye; f-strings would hide the widths.
# ruff: noqa: UP031

from __future__ import annotations

import asyncio
import logging
import time
from argparse import Namespace
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from aiorocketmq.admin import render
from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.client.errors import MQClientError
from aiorocketmq.common.admin_bodies import ConsumeStats
from aiorocketmq.common.constants import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    dlq_topic,
    retry_topic,
)
from aiorocketmq.common.protocol_bodies import ConsumerConnection
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.topic_config import TopicConfig

__all__ = ["COMMANDS", "Command", "UsageError", "Write"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

Write = Callable[[str], object]
Command = Callable[[MQAdmin, Namespace, Write], Awaitable[None]]

#: ``TopicSysFlag``: unit topic and has-unit-subscription bits.
FLAG_UNIT: Final = 0x1
FLAG_UNIT_SUB: Final = 0x2


class UsageError(MQClientError):
    """The options do not make a runnable command (e.g. neither -b nor -c)."""


def _java_bool(text: str | None, default: bool) -> bool:
    """``Boolean.parseBoolean(text.trim())``: "true" in any case, anything else false."""
    return default if text is None else text.strip().lower() == "true"


# -- topics ------------------------------------------------------------------------------


def _topic_config(args: Namespace) -> TopicConfig:
    sys_flag = (FLAG_UNIT if _java_bool(args.unit, False) else 0) | (
        FLAG_UNIT_SUB if _java_bool(args.hasUnitSub, False) else 0
    )
    return TopicConfig(
        topic_name=args.topic.strip(),
        read_queue_nums=8 if args.readQueueNums is None else args.readQueueNums,
        write_queue_nums=8 if args.writeQueueNums is None else args.writeQueueNums,
        perm=6 if args.perm is None else args.perm,
        topic_sys_flag=sys_flag,
        order=_java_bool(args.order, False),
    )


async def update_topic(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``updateTopic``: create or update on one broker (-b) or every master of -c."""
    config = _topic_config(args)
    if args.brokerAddr:
        addr = args.brokerAddr.strip()
        await admin.create_topic(addr, config)
        if config.order:
            broker_name = await admin.broker_name_by_addr(addr)
            conf = f"{broker_name}:{config.write_queue_nums}"
            await admin.create_or_update_order_conf(config.topic_name, conf, False)
            write(f"set broker orderConf. isOrder=true, orderConf=[{conf}]")
        write(f"create topic to {addr} success.\n")
    else:
        cluster = args.clusterName.strip()
        for addr in await admin.master_addrs(cluster):
            await admin.create_topic(addr, config)
            write(f"create topic to {addr} success.\n")
        if config.order:
            brokers = await admin.cluster_brokers(cluster)
            conf = ";".join(f"{b.broker_name}:{config.write_queue_nums}" for b in brokers)
            await admin.create_or_update_order_conf(config.topic_name, conf, True)
            write(f"set cluster orderConf. isOrder=true, orderConf=[{conf}]")
    write(render.topic_config_text(config) + "\n")


async def _delete_topic(admin: MQAdmin, cluster: str, topic: str, write: Write) -> None:
    """``DeleteTopicSubCommand.deleteTopic``: the cluster's masters, then name servers."""
    masters = await admin.master_addrs(cluster)
    await admin.delete_topic_in_brokers(masters, topic)
    write(f"delete topic [{topic}] from cluster [{cluster}] success.\n")
    await admin.delete_topic_in_namesrv(topic, cluster)
    write(f"delete topic [{topic}] from NameServer success.\n")


async def delete_topic(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``deleteTopic -t -c``."""
    await _delete_topic(admin, args.clusterName.strip(), args.topic.strip(), write)


async def topic_list(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``topicList``: names; with -c, cluster and consumer groups per topic."""
    if not args.clusterModel:
        write(render.lines_of(await admin.fetch_all_topic_list()))
        return
    info = await admin.examine_cluster_info()
    write(render.topic_list_cluster_header())
    for topic in await admin.fetch_all_topic_list():
        if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
            continue
        cluster: str | None = ""
        groups: list[str] = []
        try:  # as Java: a topic whose look-ups fail still gets its line
            cluster = await admin.find_topic_cluster(topic, info)
            groups = await admin.query_topic_consume_by_who(topic)
        except MQClientError as exc:
            log.debug("topicList -c: look-up failed topic=%s error=%s", topic, exc)
        for group in groups or [""]:
            write(render.topic_list_cluster_row(cluster, topic, group))


async def topic_route(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``topicRoute -t [-l]``: the route as pretty JSON, or the list form."""
    route = await admin.examine_topic_route(args.topic.strip())
    write(render.topic_route_list(route) if args.list else render.topic_route_json(route))


async def topic_status(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``topicStatus -t``: min/max offset and last store time per queue."""
    write(render.topic_status_text(await admin.examine_topic_stats(args.topic.strip())))


# -- cluster and brokers -------------------------------------------------------------------


async def _runtime_or_none(admin: MQAdmin, addr: str) -> dict[str, str] | None:
    try:
        return await admin.fetch_broker_runtime_stats(addr)
    except MQClientError as exc:  # Java prints the trace and still prints the row
        log.warning("broker runtime info failed address=%s error=%s", addr, exc)
        return None


async def _cluster_rows(admin: MQAdmin) -> list[tuple[str, str, int, str]]:
    """(cluster, brokerName, brokerId, address) in Java's order (names sorted)."""
    info = await admin.examine_cluster_info()
    rows = []
    for cluster in sorted(info.cluster_addr_table):
        for name in sorted(info.cluster_addr_table[cluster]):
            data = info.broker_addr_table.get(name)
            if data is not None:
                rows += [
                    (cluster, name, bid, data.broker_addrs[bid])
                    for bid in sorted(data.broker_addrs)
                ]
    return rows


def _more_stats_row(cluster: str, name: str, runtime: dict[str, str] | None) -> str:
    """``clusterList -m``: yesterday's and today's put/get totals."""
    totals: list[int] = [0, 0, 0, 0]
    if runtime is not None:
        try:
            put = [
                int(runtime[f"msgPutTotal{k}"])
                for k in ("YesterdayMorning", "TodayMorning", "TodayNow")
            ]
            get = [
                int(runtime[f"msgGetTotal{k}"])
                for k in ("YesterdayMorning", "TodayMorning", "TodayNow")
            ]
            totals = [put[1] - put[0], get[1] - get[0], put[2] - put[1], get[2] - get[1]]
        except (KeyError, ValueError):
            pass  # Java swallows the exception and prints zeros
    in_yest, out_yest, in_today, out_today = totals
    return "%-16s  %-32s %14d %14d %14d %14d\n" % (
        cluster, name, in_yest, out_yest, in_today, out_today,
    )  # fmt: skip


async def _print_cluster(admin: MQAdmin, more: bool, write: Write) -> None:
    rows = await _cluster_rows(admin)
    runtimes = await asyncio.gather(*(_runtime_or_none(admin, row[3]) for row in rows))
    if more:
        write(
            "%-16s  %-32s %14s %14s %14s %14s\n"
            % ("#Cluster Name", "#Broker Name", "#InTotalYest", "#OutTotalYest",
               "#InTotalToday", "#OutTotalToday")
        )  # fmt: skip
        for (cluster, name, _bid, _addr), runtime in zip(rows, runtimes, strict=True):
            write(_more_stats_row(cluster, name, runtime))
        return
    write(render.cluster_base_header())
    now_ms = int(time.time() * 1000)
    for (cluster, name, bid, addr), runtime in zip(rows, runtimes, strict=True):
        write(
            render.cluster_base_row(
                cluster,
                broker_name=name,
                broker_id=bid,
                address=addr,
                runtime=runtime,
                now_ms=now_ms,
            )
        )


async def cluster_list(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``clusterList [-m] [-i seconds]``: every broker with its load (repeat with -i)."""
    await _print_cluster(admin, args.moreStats, write)
    while args.interval is not None:
        await asyncio.sleep(args.interval)  # Java's print interval; Ctrl-C ends it
        await _print_cluster(admin, args.moreStats, write)


async def broker_status(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``brokerStatus -b addr | -c cluster``: the runtime table, sorted by key."""
    if args.brokerAddr:
        addr = args.brokerAddr.strip()
        write(render.broker_status_lines(await admin.fetch_broker_runtime_stats(addr)))
        return
    if not args.clusterName:
        raise UsageError("brokerStatus needs -b brokerAddr or -c clusterName")
    for addr in await admin.master_and_slave_addrs(args.clusterName.strip()):
        runtime = await _runtime_or_none(admin, addr)
        if runtime is not None:
            write(render.broker_status_lines(runtime, addr))


# -- subscription groups ----------------------------------------------------------------


def _group_config(args: Namespace) -> SubscriptionGroupConfig:
    # As Java's command: broadcast and from-min default to false, unlike the class.
    return SubscriptionGroupConfig(
        group_name=args.groupName.strip(),
        consume_enable=_java_bool(args.consumeEnable, True),
        consume_from_min_enable=_java_bool(args.consumeFromMinEnable, False),
        consume_broadcast_enable=_java_bool(args.consumeBroadcastEnable, False),
        retry_queue_nums=1 if args.retryQueueNums is None else args.retryQueueNums,
        retry_max_times=16 if args.retryMaxTimes is None else args.retryMaxTimes,
        broker_id=0 if args.brokerId is None else args.brokerId,
        which_broker_when_consume_slowly=(
            1 if args.whichBrokerWhenConsumeSlowly is None else args.whichBrokerWhenConsumeSlowly
        ),
        notify_consumer_ids_changed_enable=_java_bool(args.notifyConsumerIdsChanged, True),
    )


async def update_sub_group(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``updateSubGroup -g (-b | -c) ...``: create or update a consumer group."""
    config = _group_config(args)
    if args.brokerAddr:
        addr = args.brokerAddr.strip()
        await admin.create_subscription_group(addr, config)
        write(f"create subscription group to {addr} success.\n")
    elif args.clusterName:
        for addr in await admin.master_addrs(args.clusterName.strip()):
            await admin.create_subscription_group(addr, config)
            write(f"create subscription group to {addr} success.\n")
    else:
        raise UsageError("updateSubGroup needs -b brokerAddr or -c clusterName")
    write(render.subscription_group_text(config) + "\n")


async def delete_sub_group(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``deleteSubGroup -g (-b | -c) [-r]``; with -c also its retry and DLQ topics."""
    group = args.groupName.strip()
    remove_offset = _java_bool(args.removeOffset, False)
    if args.brokerAddr:
        addr = args.brokerAddr.strip()
        await admin.delete_subscription_group(addr, group, remove_offset)
        write(f"delete subscription group [{group}] from broker [{addr}] success.\n")
        return
    if not args.clusterName:
        raise UsageError("deleteSubGroup needs -b brokerAddr or -c clusterName")
    cluster = args.clusterName.strip()
    for addr in await admin.master_addrs(cluster):
        await admin.delete_subscription_group(addr, group, remove_offset)
        write(
            f"delete subscription group [{group}] from broker [{addr}] in cluster "
            f"[{cluster}] success.\n"
        )
    try:
        await _delete_topic(admin, cluster, retry_topic(group), write)
        await _delete_topic(admin, cluster, dlq_topic(group), write)
    except MQClientError as exc:  # Java prints the trace and still succeeds
        log.warning("deleting the group's retry/DLQ topics failed: %s", exc)


# -- consumers and producers ------------------------------------------------------------


async def _or_none(what: Awaitable[_T]) -> _T | None:
    try:
        return await what
    except MQClientError as exc:
        log.debug("look-up failed: %s", exc)
        return None


async def consumer_progress(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``consumerProgress [-g group] [-s true]``: a group's lag, or every group's summary."""
    if args.groupName:
        stats = await admin.examine_consume_stats(args.groupName.strip())
        show_ip = (args.showClientIP or "").lower() == "true"
        # Client IPs come from each client's running info (GET_CONSUMER_RUNNING_INFO),
        # which aiorocketmq brokers do not relay yet: every queue shows N/A, as Java
        # does when that look-up fails.
        write(render.consumer_progress_text(stats, {} if show_ip else None))
        return
    write(render.group_summary_header())
    for topic in await admin.fetch_all_topic_list():
        if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            continue
        group = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        group_stats: ConsumeStats | None = await _or_none(admin.examine_consume_stats(group))
        conn: ConsumerConnection | None = await _or_none(
            admin.examine_consumer_connection_info(group)
        )
        write(render.group_summary_row(group, group_stats, conn))


async def consumer_connection(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``consumerConnection -g [-b addr]``: clients and subscriptions of a group."""
    broker = args.brokerAddr.strip() if args.brokerAddr else None
    write(
        render.consumer_connection_text(
            await admin.examine_consumer_connection_info(args.consumerGroup.strip(), broker)
        )
    )


async def producer_connection(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``producerConnection -g -t``: clients of a producer group."""
    connection = await admin.examine_producer_connection_info(
        args.producerGroup.strip(), args.topic.strip()
    )
    write(render.producer_connection_text(connection))


COMMANDS: Final[dict[str, Command]] = {
    "updateTopic": update_topic,
    "deleteTopic": delete_topic,
    "topicList": topic_list,
    "topicRoute": topic_route,
    "topicStatus": topic_status,
    "clusterList": cluster_list,
    "brokerStatus": broker_status,
    "updateSubGroup": update_sub_group,
    "deleteSubGroup": delete_sub_group,
    "consumerProgress": consumer_progress,
    "consumerConnection": consumer_connection,
    "producerConnection": producer_connection,
}
"""Every command by its Java name."""
