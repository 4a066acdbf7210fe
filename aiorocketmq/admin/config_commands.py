"""mqadmin getNamesrvConfig, updateNamesrvConfig, updateKvConfig, deleteKvConfig and
updateTopicPerm: settings of name servers and topics, changed at runtime.

Owns: the five commands as RocketMQ 4.9.8's ``GetNamesrvConfigCommand``,
``UpdateNamesrvConfigCommand``, ``UpdateKvConfigCommand``, ``DeleteKvConfigCommand``
and ``UpdateTopicPermSubCommand``: the requests (GET_NAMESRV_CONFIG 319,
UPDATE_NAMESRV_CONFIG 318, PUT_KV_CONFIG 100, DELETE_KV_CONFIG 102 to every name
server; UPDATE_AND_CREATE_TOPIC 17 to brokers) and Java's text, or ``--json``.

JSON shapes:

* getNamesrvConfig: ``{"<namesrvAddr>": {key: value}}`` (values as the server's text).
* updateNamesrvConfig: ``{"key", "value", "updated": [namesrvAddr]}``.
* updateKvConfig / deleteKvConfig: ``{"namespace", "key", "value"?}``.
* updateTopicPerm: ``{"topic", "perm", "oldPerm", "updated": [brokerAddr],
  "unchanged": bool, "topicConfig": {...}}``.

Differences from Java, on purpose: a ``-b`` that is no master of the topic exits 1
(Java prints a line and exits 0), and ``-p`` must be 2, 4 or 6 (Java takes any int).

Must not: parse the command line (``aiorocketmq.cli.admin``).
"""

from __future__ import annotations

from argparse import Namespace
from typing import Final

from aiorocketmq.admin import json_render as jr
from aiorocketmq.admin import render
from aiorocketmq.admin.commands import Command, UsageError, Write
from aiorocketmq.admin.mq_admin import MQAdmin, MQAdminError
from aiorocketmq.common.constants import MASTER_ID
from aiorocketmq.common.topic_config import TopicConfig

__all__ = [
    "CONFIG_COMMANDS",
    "delete_kv_config",
    "get_namesrv_config",
    "update_kv_config",
    "update_namesrv_config",
    "update_topic_perm",
]

#: ``-p``: write only, read only, read and write (``PermName``).
TOPIC_PERMS: Final = (2, 4, 6)


async def get_namesrv_config(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``getNamesrvConfig``: every name server's settings (sorted by key)."""
    configs = {a: await admin.namesrv.get_namesrv_config(a) for a in admin.namesrv.addresses}
    if jr.wants_json(args):
        write(jr.dump({a: dict(sorted(c.items())) for a, c in configs.items()}))
        return
    lines: list[str] = []
    for address, config in configs.items():
        lines.append(f"============{address}============\n")
        lines.extend(f"{key:<50}=  {value}\n" for key, value in sorted(config.items()))
    write("".join(lines))


async def update_namesrv_config(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``updateNamesrvConfig -k -v``: on every name server."""
    key, value = args.key.strip(), args.value.strip()
    servers = admin.namesrv.addresses
    await admin.namesrv.update_namesrv_config({key: value}, servers)
    if jr.wants_json(args):
        write(jr.dump({"key": key, "value": value, "updated": servers}))
    else:
        # Java prints -n's list (a java.util.List), nothing when it came from the env.
        shown = f"[{', '.join(servers)}]" if args.namesrvAddr else ""
        write(f"update name server config success!{shown}\n{key} : {value}\n")


async def update_kv_config(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``updateKvConfig -s -k -v``: on every name server."""
    namespace, key, value = args.namespace.strip(), args.key.strip(), args.value.strip()
    await admin.namesrv.put_kv_config(namespace, key, value)
    write(jr.dump({"namespace": namespace, "key": key, "value": value}) if jr.wants_json(args)
          else "create or update kv config to namespace success.\n")  # fmt: skip


async def delete_kv_config(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``deleteKvConfig -s -k``: on every name server."""
    namespace, key = args.namespace.strip(), args.key.strip()
    await admin.namesrv.delete_kv_config(namespace, key)
    write(jr.dump({"namespace": namespace, "key": key}) if jr.wants_json(args)
          else "delete kv config from namespace success.\n")  # fmt: skip


async def update_topic_perm(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``updateTopicPerm -t -p (-b | -c)``: the topic's queues as routed, a new perm.

    Raises:
        UsageError: neither -b nor -c, or -p not 2, 4 or 6.
        MQAdminError: -b is not a master of the topic.
    """
    topic, perm = args.topic.strip(), args.perm
    if perm not in TOPIC_PERMS:
        raise UsageError(f"-p: the topic's permission is 2 (W), 4 (R) or 6 (RW), not {perm}")
    if not args.brokerAddr and not args.clusterName:
        raise UsageError("-b brokerAddr or -c clusterName is required")
    route = await admin.examine_topic_route(topic)
    if not route.queue_datas:
        raise MQAdminError(f"topic {topic} has no queues in its route")
    first = route.queue_datas[0]
    config = TopicConfig(
        topic_name=topic,
        read_queue_nums=first.read_queue_nums,
        write_queue_nums=first.write_queue_nums,
        perm=perm,
        topic_sys_flag=first.topic_sys_flag,
    )
    updated: list[str] = []
    lines: list[str] = []
    old_perm: int | None = first.perm
    if args.brokerAddr:
        address = args.brokerAddr.strip()
        name = next(
            (b.broker_name for b in route.broker_datas
             if b.broker_addrs.get(MASTER_ID) == address),
            None,
        )  # fmt: skip
        if name is None:
            raise MQAdminError(
                "updateTopicPerm error broker not exit or broker is not master!"
                f" ({address} is no master of {topic})"
            )
        old_perm = next((q.perm for q in route.queue_datas if q.broker_name == name), 0)
        if old_perm == perm:
            lines.append("new perm equals to the old one!\n")
        else:
            await admin.create_topic(address, config)
            updated.append(address)
            lines.append(f"update topic perm from {old_perm} to {perm} in {address} success.\n")
            lines.append(f"{render.topic_config_text(config)}.\n")
    else:
        for address in await admin.master_addrs(args.clusterName.strip()):
            await admin.create_topic(address, config)
            updated.append(address)
            lines.append(f"update topic perm from {first.perm} to {perm} in {address} success.\n")
    if jr.wants_json(args):
        doc = {"topic": topic, "perm": perm, "oldPerm": old_perm, "updated": updated,
               "unchanged": not updated, "topicConfig": config.to_json_dict()}  # fmt: skip
        write(jr.dump(doc))
    else:
        write("".join(lines))


CONFIG_COMMANDS: Final[dict[str, Command]] = {
    "getNamesrvConfig": get_namesrv_config,
    "updateNamesrvConfig": update_namesrv_config,
    "updateKvConfig": update_kv_config,
    "deleteKvConfig": delete_kv_config,
    "updateTopicPerm": update_topic_perm,
}
"""The commands of this module by their Java names."""
