"""mqadmin cleanExpiredCQ, cleanUnusedTopic, deleteExpiredCommitLog, cloneGroupOffset, queryCq,
brokerConsumeStats.

Owns: the commands as RocketMQ 4.9.8's ``CleanExpiredCQSubCommand``,
``CleanUnusedTopicCommand``, ``DeleteExpiredCommitLogSubCommand``,
``CloneGroupOffsetCommand`` and ``QueryConsumeQueueCommand``: which brokers, the
requests (codes 306, 316, 329, 314, 321; ``broker.processors.admin_maintenance``
answers them; 317 ``broker_consume_stats``) and the output.

- cleanExpiredCQ / cleanUnusedTopic / deleteExpiredCommitLog (``-b`` one broker, or
  ``-c`` cluster; neither: every master of every cluster, as Java): Java prints
  ``success`` or ``false`` (false when any broker refused); ``--json``
  ``{"success": bool, "brokers": [{"brokerAddr", "success", "error"}]}``.
- cloneGroupOffset (``-s`` source, ``-d`` destination, ``-t`` topic, ``-o`` offline):
  every master of the topic's route; Java's line ``clone group offset success.
  srcGroup[..], destGroup=[..], topic[..]``; ``--json`` ``{"srcGroup", "destGroup",
  "topic", "brokers": [addresses]}``.
- queryCq (``-t`` topic, ``-q`` queue id, ``-i`` index, ``-c`` count (10), ``-b``
  broker address (default: the route's master of the queue's first broker), ``-g``
  consumer group): Java's text blocks, or ``--json`` the broker's
  ``QueryConsumeQueueResponseBody`` with ``brokerAddr`` added.

Must not: parse the command line (``aiorocketmq.cli.admin``).
"""

from __future__ import annotations

import json
import time
from argparse import Namespace
from typing import Any, Final

from aiorocketmq.admin import json_render as jr
from aiorocketmq.admin.commands import Command, UsageError, Write
from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.client.errors import MQBrokerError, MQClientError
from aiorocketmq.common.constants import MASTER_ID
from aiorocketmq.common.consume_stats_list import ConsumeStatsList
from aiorocketmq.remoting.codes import RequestCode, ResponseCode

__all__ = ["MAINTENANCE_COMMANDS", "broker_consume_stats", "clone_group_offset", "query_cq"]

_RULE: Final = "======================================\n"


async def _masters(admin: MQAdmin, args: Namespace) -> list[str]:
    """``-b``, else the masters of ``-c``, else every cluster's masters (Java's order)."""
    if getattr(args, "brokerAddr", None):
        return [args.brokerAddr.strip()]
    cluster = (getattr(args, "cluster", None) or "").strip()
    if cluster:
        return await admin.master_addrs(cluster)
    info = await admin.examine_cluster_info()
    addresses = []
    for name in sorted(info.broker_addr_table):
        master = info.broker_addr_table[name].broker_addrs.get(MASTER_ID)
        if master is not None:
            addresses.append(master)
    return addresses


def _maintenance(code: int) -> Command:
    """A command sending ``code`` (no header) to each chosen master."""

    async def run(admin: MQAdmin, args: Namespace, write: Write) -> None:
        rows: list[dict[str, Any]] = []
        for address in await _masters(admin, args):
            try:
                reply = await admin.broker.invoke(address, code)
                error = (
                    None if reply.code == ResponseCode.SUCCESS else f"{reply.code} {reply.remark}"
                )
            except MQClientError as exc:
                error = str(exc)
            rows.append({"brokerAddr": address, "success": error is None, "error": error})
        success = bool(rows) and all(row["success"] for row in rows)
        if jr.wants_json(args):
            write(jr.dump({"success": success, "brokers": rows}))
        else:
            write("success\n" if success else "false\n")

    return run


async def clone_group_offset(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``cloneGroupOffset -s src -d dest -t topic [-o offline]``."""
    src, dest, topic = args.srcGroup.strip(), args.destGroup.strip(), args.topic.strip()
    if not (src and dest and topic):
        raise UsageError("-s srcGroup, -d destGroup and -t topic must not be empty")
    offline = str(args.offline or "false").strip().lower() == "true"
    route = await admin.examine_topic_route(topic)
    fields = {"srcGroup": src, "destGroup": dest, "topic": topic, "offline": str(offline).lower()}
    done = []
    for broker in route.broker_datas:
        address = broker.broker_addrs.get(MASTER_ID)
        if address is None:
            continue
        reply = await admin.broker.invoke(address, RequestCode.CLONE_GROUP_OFFSET, fields)
        if reply.code != ResponseCode.SUCCESS:
            raise MQBrokerError(reply.code, reply.remark, address=address)
        done.append(address)
    if jr.wants_json(args):
        write(jr.dump({"srcGroup": src, "destGroup": dest, "topic": topic, "brokers": done}))
    else:
        write(f"clone group offset success. srcGroup[{src}], destGroup=[{dest}], topic[{topic}]\n")


async def _queue_broker(admin: MQAdmin, topic: str) -> str:
    route = await admin.examine_topic_route(topic)
    for broker in sorted(route.broker_datas, key=lambda b: b.broker_name):
        address = broker.broker_addrs.get(MASTER_ID)
        if address is not None:
            return address
    raise UsageError(f"no master in the route of {topic}: give -b brokerAddr")


async def query_cq(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``queryCq -t topic -q queueId -i index [-c count] [-b addr] [-g group]``."""
    topic = args.topic.strip()
    count = 10 if args.count is None else args.count
    if count <= 0:
        raise UsageError("-c count must be positive")
    address = (args.brokerAddr or "").strip() or await _queue_broker(admin, topic)
    fields = {"topic": topic, "queueId": str(args.queueId), "index": str(args.index),
              "count": str(count)}  # fmt: skip
    if args.consumerGroup:
        fields["consumerGroup"] = args.consumerGroup.strip()
    reply = await admin.broker.invoke(address, RequestCode.QUERY_CONSUME_QUEUE, fields)
    if reply.code != ResponseCode.SUCCESS:
        raise MQBrokerError(reply.code, reply.remark, address=address)
    body = json.loads(reply.body_bytes() or b"{}")
    if jr.wants_json(args):
        write(jr.dump({"brokerAddr": address, **body}))
        return
    if body.get("subscriptionData") is not None:
        write(f"Subscription data: \n{json.dumps(body['subscriptionData'], indent=4)}\n{_RULE}")
    write(f"Queue data: \nmax: {body.get('maxQueueIndex')}, min: {body.get('minQueueIndex')}\n")
    write(_RULE)
    for i, unit in enumerate(body.get("queueData") or []):
        write(f"idx: {args.index + i}\n")
        write(
            f"ConsumeQueueData{{physicOffset={unit['physicOffset']}, "
            f"physicSize={unit['physicSize']}, tagsCode={unit['tagsCode']}, "
            f"extendDataJson='null', bitMap='null', eval={str(unit['eval']).lower()}, "
            f"msg='null'}}\n"
        )
        write(_RULE)


async def broker_consume_stats(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``brokerConsumeStats -b addr [-t timeoutMillis] [-l diffLevel] [-o isOrder]``.

    Java's ``BrokerConsumeStatsSubCommad``: one row per queue of every group's
    topics whose diff is at least ``-l`` (0), then ``Diff Total``; ``--json`` the
    broker's ``ConsumeStatsList`` as ``{"brokerAddr", "totalDiff", "rows": [{"topic",
    "group", "brokerName", "queueId", "brokerOffset", "consumerOffset", "diff",
    "lastTimestamp"}]}``.
    """
    address = args.brokerAddr.strip()
    order = str(args.order or "false").strip().lower() == "true"
    timeout_ms = 50_000 if args.timeoutMillis is None else args.timeoutMillis
    level = 0 if args.level is None else args.level
    reply = await admin.broker.invoke(
        address, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": str(order).lower()},
        timeout_ms=timeout_ms,
    )  # fmt: skip
    if reply.code != ResponseCode.SUCCESS:
        raise MQBrokerError(reply.code, reply.remark, address=address)
    stats_list = ConsumeStatsList.decode(reply.body_bytes())
    rows: list[dict[str, Any]] = []
    for group, per_topic in stats_list.groups:
        for stats in per_topic:
            for mq, wrapper in sorted(stats.offset_table.items()):
                diff = wrapper.broker_offset - wrapper.consumer_offset
                if diff < level:
                    continue
                rows.append({"topic": mq.topic, "group": group, "brokerName": mq.broker_name,
                             "queueId": mq.queue_id, "brokerOffset": wrapper.broker_offset,
                             "consumerOffset": wrapper.consumer_offset, "diff": diff,
                             "lastTimestamp": wrapper.last_timestamp})  # fmt: skip
    if jr.wants_json(args):
        write(jr.dump({"brokerAddr": stats_list.broker_addr or address,
                       "totalDiff": stats_list.total_diff, "rows": rows}))  # fmt: skip
        return
    row = "%-64s  %-64s  %-32s  %-4s  %-20s  %-20s  %-20s  %s\n"
    write(row % ("#Topic", "#Group", "#Broker Name", "#QID", "#Broker Offset",
                 "#Consumer Offset", "#Diff", "#LastTime"))  # fmt: skip
    for r in rows:
        stamp = r["lastTimestamp"]
        last = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp / 1000)) if stamp else "N/A"
        write(row % (r["topic"][:64], r["group"][:64], r["brokerName"][:32], r["queueId"],
                     r["brokerOffset"], r["consumerOffset"], r["diff"], last))  # fmt: skip
    write(f"\nDiff Total: {stats_list.total_diff}\n")


MAINTENANCE_COMMANDS: Final[dict[str, Command]] = {
    "cleanExpiredCQ": _maintenance(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE),
    "cleanUnusedTopic": _maintenance(RequestCode.CLEAN_UNUSED_TOPIC),
    "deleteExpiredCommitLog": _maintenance(RequestCode.DELETE_EXPIRED_COMMITLOG),
    "cloneGroupOffset": clone_group_offset,
    "queryCq": query_cq,
    "brokerConsumeStats": broker_consume_stats,
}
