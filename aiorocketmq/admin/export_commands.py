"""mqadmin exportMetadata: a cluster's (or a broker's) user topics and groups to a JSON file.

Owns: the command as RocketMQ 4.9.8's ``ExportMetadataCommand``: ``-b`` one
broker (with ``-t`` its topics to ``<dir>/topic.json``, with ``-g`` its groups to
``<dir>/subscriptionGroup.json``), or ``-c`` every master of a cluster merged (a
topic's queue numbers and a group's retry queue numbers summed over the brokers)
to ``topic.json``, ``subscriptionGroup.json`` or, with neither flag, both in
``metadata.json`` with ``exportTime``. ``-f`` is the directory
(``/tmp/rocketmq/export``); ``-s`` keeps ``%RETRY%`` / ``%DLQ%`` topics. System
topics and groups are left out, as Java's ``getUserTopicConfig`` /
``getUserSubscriptionGroup`` do. Output: Java's ``export <path> success``, or with
``--json`` ``{"path": ..., "topics": n, "groups": n}``.

Must not: parse the command line (``aiorocketmq.cli.admin``).
"""

from __future__ import annotations

import asyncio
import json
import time
from argparse import Namespace
from pathlib import Path
from typing import Any, Final

from aiorocketmq.admin import json_render as jr
from aiorocketmq.admin.commands import Command, UsageError, Write
from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.common.constants import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from aiorocketmq.common.subscription_group import is_sys_consumer_group
from aiorocketmq.common.validators import is_system_topic

__all__ = ["EXPORT_COMMANDS", "export_metadata"]

DEFAULT_EXPORT_DIR: Final = "/tmp/rocketmq/export"
"""Java's default ``-f``."""


async def _user_topics(
    admin: MQAdmin, address: str, special: bool, system_names: set[str]
) -> dict[str, dict[str, Any]]:
    wrapper = await admin.broker.get_all_topic_config(address)
    topics = {}
    for name, config in wrapper.topic_config_table.items():
        if is_system_topic(name) or name in system_names:
            continue
        if not special and name.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
            continue
        topics[name] = config.to_json_dict()
    return topics


async def _user_groups(admin: MQAdmin, address: str) -> dict[str, dict[str, Any]]:
    wrapper = await admin.broker.get_all_subscription_group(address)
    return {
        name: config.to_json_dict()
        for name, config in wrapper.subscription_group_table.items()
        if not is_sys_consumer_group(name)
    }


def _write_json_blocking(path: Path, doc: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n", "utf-8")


async def export_metadata(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``exportMetadata -c cluster | -b addr [-f dir] [-t] [-g] [-s]``."""
    directory = Path((args.filePath or DEFAULT_EXPORT_DIR).strip())
    doc: dict[str, Any]
    info = await admin.examine_cluster_info()
    # A cluster's and each broker's own name are topics too (Java's system list).
    system_names = set(info.cluster_addr_table) | set(info.broker_addr_table)
    if args.brokerAddr:
        address = args.brokerAddr.strip()
        if args.topic:
            path, doc = (
                directory / "topic.json",
                {
                    "topicConfigTable": await _user_topics(
                        admin, address, args.specialTopic, system_names
                    )
                },
            )
        elif args.subscriptionGroup:
            path, doc = (
                directory / "subscriptionGroup.json",
                {"subscriptionGroupTable": await _user_groups(admin, address)},
            )
        else:
            raise UsageError("with -b, say what to export: -t topics or -g subscription groups")
    elif args.clusterName:
        topics: dict[str, dict[str, Any]] = {}
        groups: dict[str, dict[str, Any]] = {}
        for address in await admin.master_addrs(args.clusterName.strip()):
            for name, config in (
                await _user_topics(admin, address, args.specialTopic, system_names)
            ).items():
                if name in topics:  # the same topic on several brokers: queues add up
                    for key in ("readQueueNums", "writeQueueNums"):
                        config[key] += topics[name][key]
                topics[name] = config
            for name, config in (await _user_groups(admin, address)).items():
                if name in groups:
                    config["retryQueueNums"] += groups[name]["retryQueueNums"]
                groups[name] = config
        if args.topic:
            path, doc = directory / "topic.json", {"topicConfigTable": topics}
        elif args.subscriptionGroup:
            path, doc = directory / "subscriptionGroup.json", {"subscriptionGroupTable": groups}
        else:
            path = directory / "metadata.json"
            doc = {"topicConfigTable": topics, "subscriptionGroupTable": groups}
        doc["exportTime"] = int(time.time() * 1000)
    else:
        raise UsageError("one of -c clusterName or -b brokerAddr is required")
    await asyncio.to_thread(_write_json_blocking, path, doc)
    if jr.wants_json(args):
        write(jr.dump({"path": str(path), "topics": len(doc.get("topicConfigTable", {})),
                       "groups": len(doc.get("subscriptionGroupTable", {}))}))  # fmt: skip
    else:
        write(f"export {path} success\n")


EXPORT_COMMANDS: Final[dict[str, Command]] = {"exportMetadata": export_metadata}
