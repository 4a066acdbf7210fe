"""Option helpers of ``mqadmin``'s command line, and the sub-parsers of the commands
added after the first wave (name-server config, updateTopicPerm, ``lag``).

Owns: Java's number parsing for option values (``Integer.parseInt`` /
``Long.parseLong``: ``java_int``, ``java_long``), one option as Java's ``new
Option(short, long, hasArg, description)`` (``add_option``), the ``-n`` parent every
command takes (``common_parent``), and ``add_config_commands`` / ``add_lag_command``.

Must not: run commands (``aiorocketmq.cli.admin``) or hold admin logic.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Final

from aiorocketmq.admin.lag import DEFAULT_POINTS, DEFAULT_SINCE

__all__ = [
    "NAMESRV_ADDR_ENV",
    "add_config_commands",
    "add_lag_command",
    "add_option",
    "common_parent",
    "java_int",
    "java_long",
]

NAMESRV_ADDR_ENV: Final = "NAMESRV_ADDR"

_INT32: Final = (-(2**31), 2**31 - 1)
_INT64: Final = (-(2**63), 2**63 - 1)


def _java_number(bounds: tuple[int, int], kind: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        """``Integer.parseInt`` / ``Long.parseLong`` of the trimmed text."""
        body = text.strip()
        digits = body[1:] if body[:1] in "+-" else body
        if not digits.isascii() or not digits.isdigit():
            raise argparse.ArgumentTypeError(f"not a valid {kind}: {text!r}")
        value = int(body)
        if not bounds[0] <= value <= bounds[1]:
            raise argparse.ArgumentTypeError(f"out of {kind} range: {text!r}")
        return value

    return parse


java_int = _java_number(_INT32, "int")
java_long = _java_number(_INT64, "long")


def add_option(
    parser: argparse.ArgumentParser,
    short: str,
    long: str,
    help_text: str,
    *,
    required: bool = False,
    flag: bool = False,
    kind: Callable[[str], int] | None = None,
) -> None:
    """One option as Java's ``new Option(short, long, hasArg, description)``."""
    if flag:
        parser.add_argument(f"-{short}", f"--{long}", action="store_true", help=help_text)
    else:
        parser.add_argument(
            f"-{short}", f"--{long}", dest=long, required=required, type=kind or str, help=help_text
        )


def common_parent() -> argparse.ArgumentParser:
    """``-n``, which every command takes (Java's ``ServerUtil`` options)."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "-n",
        "--namesrvAddr",
        help=f"Name server address list, eg: '192.168.0.1:9876;192.168.0.2:9876' "
        f"(default: ${NAMESRV_ADDR_ENV})",
    )
    return parent


def add_config_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = common_parent()
    sub.add_parser("getNamesrvConfig", parents=[common], help="Get configs of name server.")
    p = sub.add_parser(
        "updateNamesrvConfig", parents=[common], help="Update configs of name server."
    )
    add_option(p, "k", "key", "config key", required=True)
    add_option(p, "v", "value", "config value", required=True)
    p = sub.add_parser("updateKvConfig", parents=[common], help="Create or update KV config.")
    add_option(p, "s", "namespace", "set the namespace", required=True)
    add_option(p, "k", "key", "set the key name", required=True)
    add_option(p, "v", "value", "set the key value", required=True)
    p = sub.add_parser("deleteKvConfig", parents=[common], help="Delete KV config.")
    add_option(p, "s", "namespace", "set the namespace", required=True)
    add_option(p, "k", "key", "set the key name", required=True)
    p = sub.add_parser("updateTopicPerm", parents=[common], help="Update topic perm")
    add_option(p, "b", "brokerAddr", "create topic to which broker")
    add_option(p, "c", "clusterName", "create topic to which cluster")
    add_option(p, "t", "topic", "topic name", required=True)
    add_option(
        p, "p", "perm", "set topic's permission(2|4|6), intro[2:W; 4:R; 6:RW]",
        required=True, kind=java_int,
    )  # fmt: skip


def add_lag_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "lag",
        parents=[common_parent()],
        help="A consumer group's lag now and over time, with a trend (aiorocketmq)",
    )
    add_option(p, "g", "groupName", "consumer group name", required=True)
    add_option(p, "t", "topic", "only this topic")
    add_option(
        p, "s", "since",
        f"history start: 30m, 6h, 2d, or a timestamp (millis or yyyy-MM-dd#HH:mm:ss:SSS); "
        f"default {DEFAULT_SINCE}",
    )  # fmt: skip
    add_option(
        p, "p", "points", f"at most this many snapshots per broker (default {DEFAULT_POINTS})",
        kind=java_int,
    )  # fmt: skip


def add_maintenance_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """cleanExpiredCQ, cleanUnusedTopic, deleteExpiredCommitLog, cloneGroupOffset and
    queryCq (Java 4.9.8's flags)."""
    common = common_parent()
    for name, help_text in (
        ("cleanExpiredCQ", "Clean expired ConsumeQueue on broker."),
        ("cleanUnusedTopic", "Clean unused topic on broker."),
        ("deleteExpiredCommitLog", "Delete expired CommitLog files"),
    ):
        p = sub.add_parser(name, parents=[common], help=help_text)
        add_option(p, "b", "brokerAddr", "Broker address")
        add_option(p, "c", "cluster", "clustername")
    p = sub.add_parser("cloneGroupOffset", parents=[common], help="clone offset from other group.")
    add_option(p, "s", "srcGroup", "set source consumer group", required=True)
    add_option(p, "d", "destGroup", "set destination consumer group", required=True)
    add_option(p, "t", "topic", "set the topic", required=True)
    add_option(p, "o", "offline", "the group or the topic is offline")
    p = sub.add_parser("queryCq", parents=[common], help="Query cq command.")
    add_option(p, "t", "topic", "topic name", required=True)
    add_option(p, "q", "queueId", "queue num, ie. 1", required=True, kind=java_int)
    add_option(p, "i", "index", "start queue index.", required=True, kind=java_long)
    add_option(p, "c", "count", "how many.", kind=java_int)
    add_option(p, "b", "brokerAddr", "broker address.")
    add_option(p, "g", "consumerGroup", "consumer group.")


def add_assignment_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """sendMsgStatus, checkMsgSendRT, exportMetadata, statsAll, brokerConsumeStats,
    updateOrderConf, allocateMQ and getConsumerConfig (Java 4.9.8's flags)."""
    common = common_parent()
    p = sub.add_parser("sendMsgStatus", parents=[common], help="send msg to broker.")
    add_option(p, "b", "brokerName", "Broker Name", required=True)
    add_option(p, "s", "messageSize", "Message Size, Default: 128", kind=java_int)
    add_option(p, "c", "count", "send message count, Default: 50", kind=java_int)
    p = sub.add_parser("checkMsgSendRT", parents=[common], help="check message send response time")
    add_option(p, "t", "topic", "topic name", required=True)
    add_option(p, "a", "amount", "message amount | default 100", kind=java_long)
    add_option(p, "s", "size", "message size | default 128 Byte", kind=java_long)
    p = sub.add_parser("exportMetadata", parents=[common], help="export metadata")
    add_option(p, "c", "clusterName", "choose a cluster to export")
    add_option(p, "b", "brokerAddr", "choose a broker to export")
    add_option(p, "f", "filePath", "export metadata.json path | default /tmp/rocketmq/export")
    add_option(p, "t", "topic", "only export topic metadata", flag=True)
    add_option(p, "g", "subscriptionGroup", "only export subscriptionGroup metadata", flag=True)
    add_option(p, "s", "specialTopic", "need retryTopic and dlqTopic", flag=True)
    p = sub.add_parser("statsAll", parents=[common], help="Topic and Consumer tps stats")
    add_option(p, "a", "activeTopic", "print active topic only", flag=True)
    add_option(p, "t", "topic", "print select topic only")
    p = sub.add_parser(
        "brokerConsumeStats", parents=[common], help="Fetch broker consume stats data"
    )
    add_option(p, "b", "brokerAddr", "Broker address", required=True)
    add_option(p, "t", "timeoutMillis", "request timeout Millis", kind=java_long)
    add_option(p, "l", "level", "threshold of print diff", kind=java_long)
    add_option(p, "o", "order", "order topic")
    p = sub.add_parser(
        "updateOrderConf", parents=[common], help="Create or update or delete order conf"
    )
    add_option(p, "t", "topic", "topic name", required=True)
    add_option(p, "v", "orderConf", "set order conf [eg. brokerName1:num;brokerName2:num]")
    add_option(p, "m", "method", "option type [eg. put|get|delete", required=True)
    p = sub.add_parser("allocateMQ", parents=[common], help="Allocate MQ")
    add_option(p, "t", "topic", "topic name", required=True)
    add_option(p, "i", "ipList", "ipList", required=True)
    p = sub.add_parser(
        "getConsumerConfig",
        parents=[common],
        help="Get consumer config by subscription group name!",
    )
    add_option(p, "g", "groupName", "subscription group name", required=True)
