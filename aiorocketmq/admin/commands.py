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

from aiorocketmq.admin import json_render as jr
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
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.protocol_bodies import ConsumerConnection
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.topic_config import TopicConfig

__all__ = ["COMMANDS", "Command", "UsageError", "Write", "java_bool"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

Write = Callable[[str], object]
Command = Callable[[MQAdmin, Namespace, Write], Awaitable[None]]

#: ``TopicSysFlag``: unit topic and has-unit-subscription bits.
FLAG_UNIT: Final = 0x1
FLAG_UNIT_SUB: Final = 0x2


class UsageError(MQClientError):
    """The options do not make a runnable command (e.g. neither -b nor -c)."""


def _discard(_text: str) -> None:
    """Where the table's lines go under ``--json``."""


def _text_writer(args: Namespace, write: Write) -> Write:
    """``write`` for the human lines, or a sink when the command prints a JSON document."""
    return _discard if jr.wants_json(args) else write


def java_bool(text: str | None, default: bool) -> bool:
    """``Boolean.parseBoolean(text.trim())``: "true" in any case, anything else false."""
    return default if text is None else text.strip().lower() == "true"


# -- topics ------------------------------------------------------------------------------


def _topic_config(args: Namespace) -> TopicConfig:
    sys_flag = (FLAG_UNIT if java_bool(args.unit, False) else 0) | (
        FLAG_UNIT_SUB if java_bool(args.hasUnitSub, False) else 0
    )
    return TopicConfig(
        topic_name=args.topic.strip(),
        read_queue_nums=8 if args.readQueueNums is None else args.readQueueNums,
        write_queue_nums=8 if args.writeQueueNums is None else args.writeQueueNums,
        perm=6 if args.perm is None else args.perm,
        topic_sys_flag=sys_flag,
        order=java_bool(args.order, False),
    )


async def update_topic(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``updateTopic``: create or update on one broker (-b) or every master of -c.

    JSON: ``{"topicConfig": {...}, "updated": [addresses], "orderConf": text | null}``.
    """
    config = _topic_config(args)
    text = _text_writer(args, write)
    updated: list[str] = []
    conf: str | None = None
    if args.brokerAddr:
        addr = args.brokerAddr.strip()
        await admin.create_topic(addr, config, args.attributes)
        updated.append(addr)
        if config.order:
            broker_name = await admin.broker_name_by_addr(addr)
            conf = f"{broker_name}:{config.write_queue_nums}"
            await admin.create_or_update_order_conf(config.topic_name, conf, False)
            text(f"set broker orderConf. isOrder=true, orderConf=[{conf}]")
        text(f"create topic to {addr} success.\n")
    else:
        cluster = args.clusterName.strip()
        for addr in await admin.master_addrs(cluster):
            await admin.create_topic(addr, config, args.attributes)
            updated.append(addr)
            text(f"create topic to {addr} success.\n")
        if config.order:
            brokers = await admin.cluster_brokers(cluster)
            conf = ";".join(f"{b.broker_name}:{config.write_queue_nums}" for b in brokers)
            await admin.create_or_update_order_conf(config.topic_name, conf, True)
            text(f"set cluster orderConf. isOrder=true, orderConf=[{conf}]")
    text(render.topic_config_text(config) + "\n")
    if jr.wants_json(args):
        write(jr.dump({"topicConfig": config.to_json_dict(), "updated": updated,
                       "orderConf": conf}))  # fmt: skip


async def _delete_topic(admin: MQAdmin, cluster: str, topic: str, write: Write) -> list[str]:
    """``DeleteTopicSubCommand.deleteTopic``: the cluster's masters, then name servers.

    Returns the masters it was deleted from."""
    masters = await admin.master_addrs(cluster)
    await admin.delete_topic_in_brokers(masters, topic)
    write(f"delete topic [{topic}] from cluster [{cluster}] success.\n")
    await admin.delete_topic_in_namesrv(topic, cluster)
    write(f"delete topic [{topic}] from NameServer success.\n")
    return masters


async def delete_topic(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``deleteTopic -t -c``.

    JSON: ``{"topic", "clusterName", "brokers": [masters deleted from]}`` (the name
    servers too, or the command fails).
    """
    cluster, topic = args.clusterName.strip(), args.topic.strip()
    masters = await _delete_topic(admin, cluster, topic, _text_writer(args, write))
    if jr.wants_json(args):
        write(jr.dump({"topic": topic, "clusterName": cluster, "brokers": masters}))


async def topic_list(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``topicList``: names; with -c, cluster and consumer groups per topic.

    JSON: ``["topic", ...]``; with -c ``[{"topic", "clusterName", "consumerGroups"}]``
    (retry and DLQ topics left out, as the table).
    """
    as_json = jr.wants_json(args)
    if not args.clusterModel:
        topics = await admin.fetch_all_topic_list()
        write(jr.dump(topics) if as_json else render.lines_of(topics))
        return
    info = await admin.examine_cluster_info()
    rows: list[jr.JsonObject] = []
    if not as_json:
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
        if as_json:
            rows.append({"topic": topic, "clusterName": cluster, "consumerGroups": groups})
            continue
        for group in groups or [""]:
            write(render.topic_list_cluster_row(cluster, topic, group))
    if as_json:
        write(jr.dump(rows))


async def topic_route(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``topicRoute -t [-l]``: the route as pretty JSON (fastjson's), or the list form.

    ``--json``: the route as standard JSON (``TopicRouteData``'s fields; broker ids
    as string keys).
    """
    route = await admin.examine_topic_route(args.topic.strip())
    if jr.wants_json(args):
        write(jr.dump(route.to_json_dict()))
        return
    write(render.topic_route_list(route) if args.list else render.topic_route_json(route))


async def topic_status(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``topicStatus -t``: min/max offset and last store time per queue.

    JSON: ``{"topic", "queues": [{"topic", "brokerName", "queueId", "minOffset",
    "maxOffset", "lastUpdateTimestamp"}]}``.
    """
    topic = args.topic.strip()
    stats = await admin.examine_topic_stats(topic)
    write(jr.dump(jr.topic_stats_json(topic, stats)) if jr.wants_json(args)
          else render.topic_status_text(stats))  # fmt: skip


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


def _more_stats(runtime: dict[str, str] | None) -> list[int]:
    """``clusterList -m``: [in yesterday, out yesterday, in today, out today]."""
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
    return totals


def _cluster_json(
    row: tuple[str, str, int, str], runtime: dict[str, str] | None, more: bool
) -> jr.JsonObject:
    cluster, name, bid, addr = row
    doc: jr.JsonObject = {"clusterName": cluster, "brokerName": name, "brokerId": bid,
                          "brokerAddr": addr, "reachable": runtime is not None}  # fmt: skip
    if more:
        keys = ("inTotalYest", "outTotalYest", "inTotalToday", "outTotalToday")
        return doc | dict(zip(keys, _more_stats(runtime), strict=True))
    get = {} if runtime is None else runtime
    return doc | {
        "version": get.get("brokerVersionDesc"),
        "inTps": render.leading_float(get.get("putTps")),
        "outTps": render.leading_float(get.get("getTransferedTps")),
        "sendThreadPoolQueueSize": jr.int_or_none(get.get("sendThreadPoolQueueSize")),
        "pullThreadPoolQueueSize": jr.int_or_none(get.get("pullThreadPoolQueueSize")),
        "pageCacheLockTimeMills": jr.int_or_none(get.get("pageCacheLockTimeMills")),
        "earliestMessageTimeStamp": jr.int_or_none(get.get("earliestMessageTimeStamp")),
        "commitLogDiskRatio": render.leading_float(get.get("commitLogDiskRatio")),
    }


async def _print_cluster(admin: MQAdmin, more: bool, write: Write, as_json: bool) -> None:
    rows = await _cluster_rows(admin)
    runtimes = await asyncio.gather(*(_runtime_or_none(admin, row[3]) for row in rows))
    if as_json:
        write(jr.dump([_cluster_json(r, rt, more) for r, rt in zip(rows, runtimes, strict=True)]))
        return
    if more:
        write(
            "%-16s  %-32s %14s %14s %14s %14s\n"
            % ("#Cluster Name", "#Broker Name", "#InTotalYest", "#OutTotalYest",
               "#InTotalToday", "#OutTotalToday")
        )  # fmt: skip
        for (cluster, name, _bid, _addr), runtime in zip(rows, runtimes, strict=True):
            in_yest, out_yest, in_today, out_today = _more_stats(runtime)
            write("%-16s  %-32s %14d %14d %14d %14d\n" % (
                cluster, name, in_yest, out_yest, in_today, out_today,
            ))  # fmt: skip
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
    """``clusterList [-m] [-i seconds]``: every broker with its load (repeat with -i).

    JSON (one line per round): ``[{"clusterName", "brokerName", "brokerId",
    "brokerAddr", "reachable", "version", "inTps", "outTps", ...}]``; with -m the
    four put/get totals instead of the load.
    """
    as_json = jr.wants_json(args)
    await _print_cluster(admin, args.moreStats, write, as_json)
    while args.interval is not None:
        await asyncio.sleep(args.interval)  # Java's print interval; Ctrl-C ends it
        await _print_cluster(admin, args.moreStats, write, as_json)


async def broker_status(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``brokerStatus -b addr | -c cluster``: the runtime table, sorted by key.

    JSON: ``[{"brokerAddr", "runtime": {key: the broker's text}}]`` (with -c, the
    brokers that answered).
    """
    as_json = jr.wants_json(args)
    if args.brokerAddr:
        addr = args.brokerAddr.strip()
        runtime = await admin.fetch_broker_runtime_stats(addr)
        write(jr.dump([{"brokerAddr": addr, "runtime": dict(sorted(runtime.items()))}])
              if as_json else render.broker_status_lines(runtime))  # fmt: skip
        return
    if not args.clusterName:
        raise UsageError("brokerStatus needs -b brokerAddr or -c clusterName")
    docs = []
    for addr in await admin.master_and_slave_addrs(args.clusterName.strip()):
        found = await _runtime_or_none(admin, addr)
        if found is not None and as_json:
            docs.append({"brokerAddr": addr, "runtime": dict(sorted(found.items()))})
        elif found is not None:
            write(render.broker_status_lines(found, addr))
    if as_json:
        write(jr.dump(docs))


# -- subscription groups ----------------------------------------------------------------


def _group_config(args: Namespace) -> SubscriptionGroupConfig:
    # As Java's command: broadcast and from-min default to false, unlike the class.
    return SubscriptionGroupConfig(
        group_name=args.groupName.strip(),
        consume_enable=java_bool(args.consumeEnable, True),
        consume_from_min_enable=java_bool(args.consumeFromMinEnable, False),
        consume_broadcast_enable=java_bool(args.consumeBroadcastEnable, False),
        retry_queue_nums=1 if args.retryQueueNums is None else args.retryQueueNums,
        retry_max_times=16 if args.retryMaxTimes is None else args.retryMaxTimes,
        broker_id=0 if args.brokerId is None else args.brokerId,
        which_broker_when_consume_slowly=(
            1 if args.whichBrokerWhenConsumeSlowly is None else args.whichBrokerWhenConsumeSlowly
        ),
        notify_consumer_ids_changed_enable=java_bool(args.notifyConsumerIdsChanged, True),
    )


async def update_sub_group(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``updateSubGroup -g (-b | -c) ...``: create or update a consumer group.

    JSON: ``{"subscriptionGroupConfig": {...}, "updated": [addresses]}``.
    """
    config = _group_config(args)
    if args.brokerAddr:
        addresses = [args.brokerAddr.strip()]
    elif args.clusterName:
        addresses = await admin.master_addrs(args.clusterName.strip())
    else:
        raise UsageError("updateSubGroup needs -b brokerAddr or -c clusterName")
    text = _text_writer(args, write)
    for addr in addresses:
        await admin.create_subscription_group(addr, config)
        text(f"create subscription group to {addr} success.\n")
    text(render.subscription_group_text(config) + "\n")
    if jr.wants_json(args):
        write(jr.dump({"subscriptionGroupConfig": config.to_json_dict(), "updated": addresses}))


async def delete_sub_group(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``deleteSubGroup -g (-b | -c) [-r]``; with -c also its retry and DLQ topics.

    JSON: ``{"groupName", "removeOffset", "deleted": [addresses], "deletedTopics":
    [the retry/DLQ topics deleted (-c)]}``.
    """
    group = args.groupName.strip()
    remove_offset = java_bool(args.removeOffset, False)
    text = _text_writer(args, write)
    doc: jr.JsonObject = {"groupName": group, "removeOffset": remove_offset, "deleted": [],
                          "deletedTopics": []}  # fmt: skip
    if args.brokerAddr:
        addr = args.brokerAddr.strip()
        await admin.delete_subscription_group(addr, group, remove_offset)
        doc["deleted"].append(addr)
        text(f"delete subscription group [{group}] from broker [{addr}] success.\n")
    elif not args.clusterName:
        raise UsageError("deleteSubGroup needs -b brokerAddr or -c clusterName")
    else:
        cluster = args.clusterName.strip()
        for addr in await admin.master_addrs(cluster):
            await admin.delete_subscription_group(addr, group, remove_offset)
            doc["deleted"].append(addr)
            text(
                f"delete subscription group [{group}] from broker [{addr}] in cluster "
                f"[{cluster}] success.\n"
            )
        try:
            for topic in (retry_topic(group), dlq_topic(group)):
                await _delete_topic(admin, cluster, topic, text)
                doc["deletedTopics"].append(topic)
        except MQClientError as exc:  # Java prints the trace and still succeeds
            log.warning("deleting the group's retry/DLQ topics failed: %s", exc)
    if jr.wants_json(args):
        write(jr.dump(doc))


# -- consumers and producers ------------------------------------------------------------


async def _or_none(what: Awaitable[_T]) -> _T | None:
    try:
        return await what
    except MQClientError as exc:
        log.debug("look-up failed: %s", exc)
        return None


async def _queue_holders(admin: MQAdmin, group: str) -> dict[MessageQueue, str]:
    """Which client IP holds each queue, from every client's running info.

    As Java's ``getMessageQueueAllocationResult``: a failure leaves what was found so
    far (the queues without a holder print N/A)."""
    holders: dict[MessageQueue, str] = {}
    try:
        connection = await admin.examine_consumer_connection_info(group)
        for conn in connection.connections:
            info = await admin.get_consumer_running_info(group, conn.client_id)
            ip = conn.client_id.split("@")[0]
            holders.update(dict.fromkeys(info.mq_table, ip))
    except MQClientError as exc:
        log.debug("consumerProgress -s: running info failed group=%s error=%s", group, exc)
    return holders


async def consumer_progress(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``consumerProgress [-g group] [-s true]``: a group's lag, or every group's summary.

    JSON: with -g ``consume_stats_json``'s document; without, a list of
    ``group_summary_json``'s (see ``json_render``).
    """
    as_json = jr.wants_json(args)
    if args.groupName:
        group = args.groupName.strip()
        stats = await admin.examine_consume_stats(group)
        show_ip = (args.showClientIP or "").strip().lower() == "true"
        ips = await _queue_holders(admin, group) if show_ip else None
        write(jr.dump(jr.consume_stats_json(group, stats, ips)) if as_json
              else render.consumer_progress_text(stats, ips))  # fmt: skip
        return
    summaries: list[jr.JsonObject] = []
    if not as_json:
        write(render.group_summary_header())
    for topic in await admin.fetch_all_topic_list():
        if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            continue
        group = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        group_stats: ConsumeStats | None = await _or_none(admin.examine_consume_stats(group))
        conn: ConsumerConnection | None = await _or_none(
            admin.examine_consumer_connection_info(group)
        )
        if as_json:
            summaries.append(jr.group_summary_json(group, group_stats, conn))
        else:
            write(render.group_summary_row(group, group_stats, conn))
    if as_json:
        write(jr.dump(summaries))


async def consumer_connection(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``consumerConnection -g [-b addr]``: clients and subscriptions of a group.

    JSON: ``consumer_connection_json``'s document.
    """
    group = args.consumerGroup.strip()
    broker = args.brokerAddr.strip() if args.brokerAddr else None
    connection = await admin.examine_consumer_connection_info(group, broker)
    write(jr.dump(jr.consumer_connection_json(group, connection)) if jr.wants_json(args)
          else render.consumer_connection_text(connection))  # fmt: skip


async def producer_connection(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``producerConnection -g -t``: clients of a producer group.

    JSON: ``{"producerGroup", "topic", "connections": [...]}``.
    """
    group, topic = args.producerGroup.strip(), args.topic.strip()
    connection = await admin.examine_producer_connection_info(group, topic)
    write(jr.dump(jr.producer_connection_json(group, topic, connection)) if jr.wants_json(args)
          else render.producer_connection_text(connection))  # fmt: skip


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
