"""mqadmin getBrokerConfig, updateBrokerConfig, wipeWritePerm, addWritePerm and
topicClusterList (the commands about brokers and where topics live).

Owns: the two commands as RocketMQ 4.9.8's ``GetBrokerConfigCommand`` and
``UpdateBrokerConfigSubCommand``: which brokers (``-b`` one address, ``-c`` every
master of a cluster; getBrokerConfig also each master's slaves), the requests
(GET_BROKER_CONFIG 26, UPDATE_BROKER_CONFIG 25) and the output: Java's text, or
with ``--json`` one JSON document.

JSON of getBrokerConfig: ``[{"brokerAddr": ..., "role": "MASTER"|"SLAVE"|null,
"masterAddr": ... (slaves), "version": {"counter", "timestamp"} | null,
"properties": {key: value}}]`` (values as the broker's text). JSON of
updateBrokerConfig: ``{"key": ..., "value": ..., "updated": [addresses]}``.
wipeWritePerm / addWritePerm (``WipeWritePermSubCommand`` / ``AddWritePermSubCommand``:
every name server, one line each, a failure on one does not stop the others; the
exit code is 1 when any failed): ``[{"namesrvAddr": ..., "brokerName": ...,
"wipeTopicCount" | "addTopicCount": n | null, "error": null | text}]``.

Must not: parse the command line (``aiorocketmq.cli.admin``).
"""

from __future__ import annotations

import json
from argparse import Namespace
from typing import Final

from aiorocketmq.admin import json_render as jr
from aiorocketmq.admin.commands import Command, UsageError, Write
from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.client.errors import MQBrokerError, MQClientError
from aiorocketmq.common.constants import MASTER_ID
from aiorocketmq.common.errors import RocketMQError
from aiorocketmq.common.properties_file import format_properties, parse_properties
from aiorocketmq.remoting.codes import RequestCode, ResponseCode

__all__ = [
    "BROKER_COMMANDS",
    "add_write_perm",
    "get_broker_config",
    "topic_cluster_list",
    "update_broker_config",
    "wipe_write_perm",
]


async def fetch_broker_config(admin: MQAdmin, address: str) -> tuple[dict[str, str], object]:
    """GET_BROKER_CONFIG of one broker: its properties and its data version (JSON or None).

    Raises:
        MQBrokerError: the broker refused.
    """
    reply = await admin.broker.invoke(address, RequestCode.GET_BROKER_CONFIG)
    if reply.code != ResponseCode.SUCCESS:
        raise MQBrokerError(reply.code, reply.remark, address=address)
    properties = parse_properties(reply.body_bytes().decode("utf-8"))
    version_text = (reply.ext_fields or {}).get("version")
    try:
        version = json.loads(version_text) if version_text else None
    except ValueError:
        version = None  # an old or foreign broker's header: keep the properties
    return properties, version


async def _targets(admin: MQAdmin, args: Namespace) -> list[tuple[str, str | None, str | None]]:
    """``(address, role, masterAddr)`` in Java's order: each master, then its slaves."""
    if args.brokerAddr:
        return [(args.brokerAddr.strip(), None, None)]
    if not args.clusterName:
        raise UsageError("one of -b brokerAddr or -c clusterName is required")
    result: list[tuple[str, str | None, str | None]] = []
    for broker in await admin.cluster_brokers(args.clusterName.strip()):
        master = broker.broker_addrs.get(MASTER_ID)
        if master is None:
            continue  # Java's fetchMasterAndSlaveDistinguish skips a set without master
        result.append((master, "MASTER", None))
        for bid in sorted(broker.broker_addrs):
            if bid != MASTER_ID:
                result.append((broker.broker_addrs[bid], "SLAVE", master))
    return result


_TEXT_PREFIX: Final = {
    None: "============{addr}============\n",
    "MASTER": "============Master: {addr}============\n",
    "SLAVE": "============My Master: {master}=====Slave: {addr}============\n",
}


async def get_broker_config(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``getBrokerConfig -b addr | -c cluster``."""
    docs: list[dict[str, object]] = []
    for addr, role, master in await _targets(admin, args):
        properties, version = await fetch_broker_config(admin, addr)
        doc: dict[str, object] = {"brokerAddr": addr, "role": role}
        if master is not None:
            doc["masterAddr"] = master
        doc.update(version=version, properties=properties)
        docs.append(doc)
        if not jr.wants_json(args):
            write(_TEXT_PREFIX[role].format(addr=addr, master=master))
            write("".join(f"{k:<50}=  {v}\n" for k, v in properties.items()) + "\n")
    if jr.wants_json(args):
        write(jr.dump(docs))


async def update_broker_config(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``updateBrokerConfig -b addr | -c cluster -k key -v value`` (masters only with -c)."""
    key, value = args.key.strip(), args.value.strip()
    if not key:
        raise UsageError("-k key must not be empty")
    if args.brokerAddr:
        addresses = [args.brokerAddr.strip()]
    elif args.clusterName:
        addresses = await admin.master_addrs(args.clusterName.strip())
    else:
        raise UsageError("one of -b brokerAddr or -c clusterName is required")
    body = format_properties([(key, value)]).encode("utf-8")
    updated: list[str] = []
    for addr in addresses:
        reply = await admin.broker.invoke(addr, RequestCode.UPDATE_BROKER_CONFIG, body=body)
        if reply.code != ResponseCode.SUCCESS:
            raise MQBrokerError(reply.code, reply.remark, address=addr)
        updated.append(addr)
        if not jr.wants_json(args):
            write(f"update broker config success, {addr}\n")
    if jr.wants_json(args):
        write(jr.dump({"key": key, "value": value, "updated": updated}))


async def _write_perm(admin: MQAdmin, args: Namespace, write: Write, wipe: bool) -> None:
    """Java's loop over every name server: one line (or JSON entry) per server."""
    name = args.brokerName.strip()
    verb, count_key = ("wipe", "wipeTopicCount") if wipe else ("add", "addTopicCount")
    call = (
        admin.namesrv.wipe_write_perm_of_broker if wipe else admin.namesrv.add_write_perm_of_broker
    )
    docs: list[dict[str, object]] = []
    for addr in admin.namesrv.addresses:
        doc: dict[str, object] = {"namesrvAddr": addr, "brokerName": name, count_key: None}
        try:
            doc[count_key] = count = await call(name, address=addr)
            doc["error"] = None
            line = f"{verb} write perm of broker[{name}] in name server[{addr}] OK, {count}\n"
        except RocketMQError as exc:
            doc["error"] = str(exc)
            line = f"{verb} write perm of broker[{name}] in name server[{addr}] Failed\n"
        docs.append(doc)
        if not jr.wants_json(args):
            write(line)
    if jr.wants_json(args):
        write(jr.dump(docs))
    failed = [d for d in docs if d["error"] is not None]
    if failed:
        raise MQClientError(
            f"{len(failed)} of {len(docs)} name servers failed: {failed[0]['error']}"
        )


async def wipe_write_perm(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``wipeWritePerm -b brokerName``: the broker's topics lose W on every name server."""
    await _write_perm(admin, args, write, wipe=True)


async def add_write_perm(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``addWritePerm -b brokerName``: the broker's topics get W back on every name server."""
    await _write_perm(admin, args, write, wipe=False)


async def topic_cluster_list(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``topicClusterList -t topic``: the clusters holding the topic's brokers, one a line.

    As ``DefaultMQAdminExtImpl.getTopicClusterList``: every cluster whose broker
    set contains a broker of the topic's route. JSON: ``{"topic", "clusters": [...]}``.
    """
    topic = args.topic.strip()
    info = await admin.examine_cluster_info()
    route = await admin.examine_topic_route(topic)
    names = {b.broker_name for b in route.broker_datas}
    clusters = sorted(c for c, members in info.cluster_addr_table.items() if members & names)
    if jr.wants_json(args):
        write(jr.dump({"topic": topic, "clusters": clusters}))
    else:
        write("".join(f"{c}\n" for c in clusters))


BROKER_COMMANDS: Final[dict[str, Command]] = {
    "getBrokerConfig": get_broker_config,
    "updateBrokerConfig": update_broker_config,
    "wipeWritePerm": wipe_write_perm,
    "addWritePerm": add_write_perm,
    "topicClusterList": topic_cluster_list,
}
