"""mqadmin updateOrderConf, allocateMQ, getConsumerConfig and statsAll: queues, groups, traffic.

Owns: the commands as RocketMQ 4.9.8's ``UpdateOrderConfCommand``,
``AllocateMQSubCommand``, ``GetConsumerConfigSubCommand`` and ``StatsAllSubCommand``
(see ``stats_all``), and their output.

- updateOrderConf (``-t`` topic, ``-m`` get|put|delete, ``-v`` ``brokerName:queueNums;...``
  for put): the name servers' ``ORDER_TOPIC_CONFIG`` KV entry, which fills a
  route's ``orderTopicConf`` when ``orderMessageEnable`` is on. Java's lines
  (``update orderConf success. topic=[..], orderConf=[..]`` ...); ``--json``
  ``{"topic", "method", "orderConf"}`` (null once deleted or when unset).
- allocateMQ (``-t`` topic, ``-i`` ``ip1,ip2``): the topic's readable queues split
  among those client ids by ``allocate_averagely`` (Java's default strategy);
  Java prints ``RebalanceResult`` as JSON, ``{"result": {cid: [queues]}}``, so the
  text and ``--json`` forms are that same document. Queues are sorted first, as a
  consumer's rebalance sorts them (Java's command skips that and follows a
  HashSet's order, which no consumer sees).
- getConsumerConfig (``-g`` group): the group's subscription group config on each
  broker set that has it (asked of its master, else any member), under Java's
  ``=====...<cluster>:<brokerName>=====...`` headers, one ``name = value`` line per
  setting; ``--json`` ``[{"clusterName", "brokerName", "brokerAddr", "config"}]``.

Must not: parse the command line (``aiorocketmq.cli.admin``).
"""

from __future__ import annotations

import json
from argparse import Namespace
from typing import Any, Final

from aiorocketmq.admin import json_render as jr
from aiorocketmq.admin.commands import Command, UsageError, Write
from aiorocketmq.admin.mq_admin import NAMESPACE_ORDER_TOPIC_CONFIG, MQAdmin
from aiorocketmq.client.allocate import allocate_averagely
from aiorocketmq.client.errors import MQClientError
from aiorocketmq.client.publish_info import route_to_subscribe_info
from aiorocketmq.common.constants import MASTER_ID
from aiorocketmq.remoting.codes import RequestCode, ResponseCode

__all__ = [
    "ASSIGNMENT_COMMANDS",
    "allocate_mq",
    "get_consumer_config",
    "stats_all",
    "update_order_conf",
]

_BANNER: Final = "============================="
_STATS_HEAD: Final = "%-32s  %-32s %12s %11s %11s %14s %14s\n"
_STATS_ROW: Final = "%-64s  %-64s %12d %11.2f %11.2f %14d %14d\n"
_STATS_NO_CONSUMER: Final = "%-64s  %-32s %12d %11.2f %11s %14d %14s\n"


async def update_order_conf(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``updateOrderConf -t topic -m get|put|delete [-v brokerName:queueNums;...]``."""
    topic, method = args.topic.strip(), args.method.strip().lower()
    conf: str | None
    if method == "put":
        conf = (args.orderConf or "").strip()
        if not conf:
            raise UsageError("please set orderConf with option -v.")
        for entry in conf.split(";"):
            name, _, nums = entry.partition(":")
            if not name.strip() or not nums.strip().isdigit():
                raise UsageError(f"orderConf entries are brokerName:queueNums, not {entry!r}")
        await admin.create_or_update_order_conf(topic, conf, True)
        text = f"update orderConf success. topic=[{topic}], orderConf=[{conf}]"
    elif method == "get":
        conf = await admin.namesrv.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
        text = f"get orderConf success. topic=[{topic}], orderConf=[{conf}] "
    elif method == "delete":
        await admin.namesrv.delete_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
        conf, text = None, f"delete orderConf success. topic=[{topic}]"
    else:
        raise UsageError(f"-m must be get, put or delete, not {args.method!r}")
    if jr.wants_json(args):
        write(jr.dump({"topic": topic, "method": method, "orderConf": conf}))
    else:
        write(text + "\n")


async def allocate_mq(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``allocateMQ -t topic -i ip1,ip2``: the averagely allocation among those ids."""
    topic = args.topic.strip()
    ids = [cid.strip() for cid in args.ipList.split(",") if cid.strip()]
    if not ids:
        raise UsageError("-i ipList must name at least one client")
    queues = sorted(route_to_subscribe_info(topic, await admin.examine_topic_route(topic)))
    result = {
        cid: [mq.to_json_dict() for mq in allocate_averagely(cid, queues, ids)] for cid in ids
    }
    write(jr.dump({"result": result}))


async def get_consumer_config(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``getConsumerConfig -g group``: its settings on every broker set that has it."""
    group = args.groupName.strip()
    info = await admin.examine_cluster_info()
    cluster_of = {b: c for c, names in info.cluster_addr_table.items() for b in names}
    found: list[dict[str, Any]] = []
    for name in sorted(info.broker_addr_table):
        addrs = info.broker_addr_table[name].broker_addrs
        address = addrs.get(MASTER_ID) or next(iter(addrs.values()), None)
        if address is None:
            continue
        try:
            wrapper = await admin.broker.get_all_subscription_group(address)
        except MQClientError:
            continue  # Java skips a broker it cannot ask
        config = wrapper.subscription_group_table.get(group)
        if config is not None:
            found.append({"clusterName": cluster_of.get(name), "brokerName": name,
                          "brokerAddr": address, "config": config.to_json_dict()})  # fmt: skip
    if jr.wants_json(args):
        write(jr.dump(found))
        return
    for entry in found:
        write(f"{_BANNER}{entry['clusterName']}:{entry['brokerName']}{_BANNER}\n")
        for key, value in entry["config"].items():
            shown = str(value).lower() if isinstance(value, bool) else value
            write(f"{key:<40}=  {shown}\n")


async def _window_stats(
    admin: MQAdmin, route_masters: list[str], name: str, key: str
) -> tuple[float, int]:
    """(minute TPS, 24-hour sum) of one stats item over the masters (Java skips failures)."""
    tps, day = 0.0, 0
    for address in route_masters:
        try:
            reply = await admin.broker.invoke(
                address, RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key}
            )
        except MQClientError:
            continue
        if reply.code != ResponseCode.SUCCESS:
            continue
        data = json.loads(reply.body_bytes() or b"{}")
        tps += float(data.get("statsMinute", {}).get("tps", 0.0))
        # Java's compute24HourSum: the day's sum, else the hour's, else the minute's.
        for window in ("statsDay", "statsHour", "statsMinute"):
            total = int(data.get(window, {}).get("sum", 0))
            if total:
                day += total
                break
    return tps, day


async def stats_all(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``statsAll [-a] [-t topic]``: per topic and group, accumulation, TPS in/out, 24 h counts.

    Java's ``StatsAllSubCommand`` over VIEW_BROKER_STATS_DATA (TOPIC_PUT_NUMS,
    GROUP_GET_NUMS) and the groups' consume stats; retry and DLQ topics are left
    out; ``-a`` keeps topics that moved in the last 24 hours only. ``--json``:
    ``[{"topic", "group" (null: no consumer), "accumulation", "inTps", "outTps",
    "inMsg24Hour", "outMsg24Hour"}]``.
    """
    selected = (args.topic or "").strip()
    rows: list[dict[str, Any]] = []
    for topic in sorted(await admin.fetch_all_topic_list()):
        if topic.startswith(("%RETRY%", "%DLQ%")) or (selected and topic != selected):
            continue
        try:
            route = await admin.examine_topic_route(topic)
            groups = sorted(await admin.query_topic_consume_by_who(topic))
        except MQClientError:
            continue  # Java skips a topic it cannot describe
        masters = [a for b in route.broker_datas if (a := b.broker_addrs.get(MASTER_ID))]
        in_tps, in_day = await _window_stats(admin, masters, "TOPIC_PUT_NUMS", topic)
        consumers: list[str | None] = [*groups] or [None]
        for group in consumers:
            out_tps, out_day, accumulation = 0.0, 0, 0
            if group is not None:
                key = f"{topic}@{group}"
                out_tps, out_day = await _window_stats(admin, masters, "GROUP_GET_NUMS", key)
                try:
                    stats = await admin.examine_consume_stats(group, topic)
                    accumulation = max(0, stats.compute_total_diff())
                except MQClientError:
                    pass
            if args.activeTopic and not (in_day or out_day):
                continue
            rows.append({"topic": topic, "group": group, "accumulation": accumulation,
                         "inTps": in_tps, "outTps": out_tps, "inMsg24Hour": in_day,
                         "outMsg24Hour": out_day})  # fmt: skip
    if jr.wants_json(args):
        write(jr.dump(rows))
        return
    write(_STATS_HEAD % ("#Topic", "#Consumer Group", "#Accumulation", "#InTPS", "#OutTPS",
                         "#InMsg24Hour", "#OutMsg24Hour"))  # fmt: skip
    for r in rows:
        if r["group"] is None:
            write(_STATS_NO_CONSUMER % (r["topic"], "", 0, r["inTps"], "", r["inMsg24Hour"],
                                        "NO_CONSUMER"))  # fmt: skip
        else:
            write(_STATS_ROW % (r["topic"], r["group"], r["accumulation"], r["inTps"],
                                r["outTps"], r["inMsg24Hour"], r["outMsg24Hour"]))  # fmt: skip


ASSIGNMENT_COMMANDS: Final[dict[str, Command]] = {
    "updateOrderConf": update_order_conf,
    "allocateMQ": allocate_mq,
    "getConsumerConfig": get_consumer_config,
    "statsAll": stats_all,
}
