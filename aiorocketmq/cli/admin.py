"""``mqadmin``: RocketMQ's admin commands, with its command names and short flags.

Usage::

    mqadmin <command> [-n "host:9876;host2:9876"] [options]
    mqadmin                      # the commands, one line each (as Java's)
    mqadmin help <command>       # one command's flags (also: mqadmin <command> -h)

Commands (flags as RocketMQ 4.9.8's ``tools/command/**``): updateTopic,
deleteTopic, topicList, topicRoute, topicStatus, clusterList, brokerStatus,
updateSubGroup, deleteSubGroup, consumerProgress, consumerConnection,
producerConnection, queryMsgByKey, queryMsgById, queryMsgByUniqueKey,
queryMsgByOffset, printMsg, resetOffsetByTime, skipAccumulatedMessage,
getBrokerConfig, updateBrokerConfig, wipeWritePerm, addWritePerm,
topicClusterList, sendMessage, clusterRT (also under its older name
clusterSendMsgRT), consumeMessage, consumerStatus,
haStatus (ours), cleanExpiredCQ, cleanUnusedTopic, deleteExpiredCommitLog,
cloneGroupOffset, queryCq, brokerConsumeStats, printMsgByQueue, statsAll,
sendMsgStatus, checkMsgSendRT, exportMetadata, updateOrderConf, allocateMQ,
getConsumerConfig, the ACL
commands updateAclConfig, deleteAclConfig,
updateGlobalWhiteAddr and clusterAclConfigVersion; ``doctor`` (ours: what is wrong
with the cluster as seen from here, exit 1 when a check fails,
``aiorocketmq.admin.doctor``) and ``dashboard`` (ours: a read-only web dashboard,
served until interrupted). ``mqadmin <command> -h`` lists
a command's flags.

Every command but ``dashboard`` takes ``--json``: one standard JSON document on
stdout instead of Java's text (``printMsg``: JSON Lines). The shapes are documented
where each command is (``aiorocketmq.admin.commands``, ``message_commands``,
``broker_commands``, ``send_commands``, ``consume_commands``, ``acl_commands``,
``ha_status``) and built in ``aiorocketmq.admin.json_render``.

Read-only commands (``WATCHABLE``) take ``-i SECONDS`` / ``--watch SECONDS``: the
command runs again every SECONDS until Ctrl-C (exit 130); ``clusterList -i`` is
Java's own interval, the same thing. None of these commands has an ``-i`` of its own
in Java (queryMsgById's ``-i`` is an id, so the message commands do not watch).

Without ``-n`` the name servers come from the ``NAMESRV_ADDR`` environment
variable, as Java's tools fall back to it. With ACL on the brokers, requests are
signed with the ``accessKey``/``secretKey`` of ``$ROCKETMQ_HOME/conf/tools.yml``, as
Java's tools sign them.

Exit codes (Java's mqadmin has none; scripts can rely on these): 0 done; 1 the
command failed (the reason on stderr, e.g. ``CODE: 17 DESC: topic not exist``, an
unreachable server, an unknown cluster); 2 bad usage (a missing or malformed flag).

Owns: the command line (argparse, one sub-parser per command), reading
``NAMESRV_ADDR``, logging to stderr, running the command on an event loop, and
turning errors into a message and an exit code.

Must not: hold admin logic or output formats (``aiorocketmq.admin``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Final

from aiorocketmq.admin.acl_commands import ACL_COMMANDS
from aiorocketmq.admin.assignment_commands import ASSIGNMENT_COMMANDS
from aiorocketmq.admin.broker_commands import BROKER_COMMANDS
from aiorocketmq.admin.commands import COMMANDS, UsageError
from aiorocketmq.admin.config_commands import CONFIG_COMMANDS
from aiorocketmq.admin.consume_commands import CONSUME_COMMANDS
from aiorocketmq.admin.credentials import ROCKETMQ_HOME_ENV, tools_credentials
from aiorocketmq.admin.doctor import doctor
from aiorocketmq.admin.export_commands import EXPORT_COMMANDS
from aiorocketmq.admin.ha_status import ha_status
from aiorocketmq.admin.lag import lag
from aiorocketmq.admin.maintenance_commands import MAINTENANCE_COMMANDS
from aiorocketmq.admin.message_commands import MESSAGE_COMMANDS
from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.admin.send_commands import SEND_COMMANDS
from aiorocketmq.cli.admin_help import admin_help, canonical_command, unique_commands
from aiorocketmq.cli.admin_options import (
    NAMESRV_ADDR_ENV,
    add_assignment_commands,
    add_config_commands,
    add_lag_command,
    add_maintenance_commands,
    java_int,
    java_long,
)
from aiorocketmq.cli.admin_options import add_option as _add
from aiorocketmq.cli.admin_options import common_parent as _common_parent
from aiorocketmq.common.errors import RocketMQError
from aiorocketmq.dashboard.server import DEFAULT_PORT, dashboard

__all__ = ["build_parser", "main"]

EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
WATCHABLE: Final = (
    "topicList", "topicRoute", "topicStatus", "topicClusterList", "brokerStatus", "haStatus",
    "getBrokerConfig", "consumerProgress", "consumerConnection", "producerConnection", "lag",
    "getNamesrvConfig",
)  # fmt: skip
"""Read-only commands that take ``-i``/``--watch SECONDS`` (clusterList has Java's own ``-i``)."""
NO_JSON: Final = ("dashboard",)
"""Commands without ``--json`` (every other one has it)."""


def _topic_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = _common_parent()
    p = sub.add_parser("updateTopic", parents=[common], help="Update or create topic")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("-b", "--brokerAddr", help="create topic to which broker")
    where.add_argument("-c", "--clusterName", help="create topic to which cluster")
    _add(p, "t", "topic", "topic name", required=True)
    _add(p, "r", "readQueueNums", "set read queue nums", kind=java_int)
    _add(p, "w", "writeQueueNums", "set write queue nums", kind=java_int)
    _add(p, "p", "perm", "set topic's permission(2|4|6), intro[2:W 4:R; 6:RW]", kind=java_int)
    _add(p, "o", "order", "set topic's order(true|false)")
    _add(p, "u", "unit", "is unit topic (true|false)")
    _add(p, "s", "hasUnitSub", "has unit sub (true|false)")
    _add(p, "a", "attributes", "attribute(+a=b,+c=d,-e), RocketMQ 5: +message.type=FIFO")

    p = sub.add_parser(
        "deleteTopic", parents=[common], help="Delete topic from broker and NameServer."
    )
    _add(p, "t", "topic", "topic name", required=True)
    _add(p, "c", "clusterName", "delete topic from which cluster", required=True)

    p = sub.add_parser("topicList", parents=[common], help="Fetch all topic list from name server")
    _add(p, "c", "clusterModel", "clusterModel", flag=True)

    p = sub.add_parser("topicRoute", parents=[common], help="Examine topic route info")
    _add(p, "t", "topic", "topic name", required=True)
    _add(p, "l", "list", "Use list format to print data", flag=True)

    p = sub.add_parser("topicStatus", parents=[common], help="Examine topic Status info")
    _add(p, "t", "topic", "topic name", required=True)


def _cluster_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = _common_parent()
    p = sub.add_parser("clusterList", parents=[common], help="List all of clusters")
    _add(p, "m", "moreStats", "Print more stats", flag=True)
    _add(p, "i", "interval", "specify intervals numbers, it is in seconds", kind=java_long)

    p = sub.add_parser("brokerStatus", parents=[common], help="Fetch broker runtime status data")
    _add(p, "b", "brokerAddr", "Broker address")
    _add(p, "c", "clusterName", "which cluster")

    p = sub.add_parser(
        "haStatus", parents=[common], help="Replication state of master/slave sets (aiorocketmq)"
    )
    _add(p, "c", "clusterName", "which cluster", required=True)
    _add(p, "b", "brokerName", "only this broker set")


def _broker_config_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = _common_parent()
    p = sub.add_parser(
        "getBrokerConfig", parents=[common], help="Get broker config by cluster or special broker!"
    )
    _add(p, "b", "brokerAddr", "get which broker")
    _add(p, "c", "clusterName", "get which cluster")

    p = sub.add_parser("updateBrokerConfig", parents=[common], help="Update broker's config")
    _add(p, "b", "brokerAddr", "update which broker")
    _add(p, "c", "clusterName", "update which cluster")
    _add(p, "k", "key", "config key", required=True)
    _add(p, "v", "value", "config value", required=True)

    for name, help_text in (
        ("wipeWritePerm", "Wipe write perm of broker in all name server"),
        ("addWritePerm", "Add write perm of broker in all name server"),
    ):
        p = sub.add_parser(name, parents=[common], help=help_text)
        _add(p, "b", "brokerName", "broker name", required=True)

    p = sub.add_parser("topicClusterList", parents=[common], help="get cluster info for topic")
    _add(p, "t", "topic", "topic name", required=True)


def _send_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("sendMessage", parents=[_common_parent()], help="Send a message")
    _add(p, "t", "topic", "Topic name", required=True)
    _add(p, "p", "body", "UTF-8 string format of the message body", required=True)
    _add(p, "k", "key", "Message keys")
    _add(p, "c", "tags", "Message tags")
    _add(p, "b", "broker", "Send message to target broker")
    _add(p, "i", "qid", "Send message to target queue", kind=java_int)

    p = sub.add_parser(
        "clusterRT",
        aliases=["clusterSendMsgRT"],  # this tool's first name for it
        parents=[_common_parent()],
        help="List All clusters Message Send RT",
    )
    _add(p, "a", "amount", "message amount | default 100", kind=java_long)
    _add(p, "s", "size", "message size | default 128 Byte", kind=java_long)
    _add(p, "c", "cluster", "cluster name | default display all cluster")
    p.add_argument("-p", "--printLog", type=lambda v: v.strip().lower() == "true",
                   default=False, help="print as tlog | default false")  # fmt: skip
    _add(p, "m", "machineRoom", "machine room name | default noname")
    _add(p, "i", "interval", "print interval | default 10 seconds", kind=java_long)
    p.add_argument("--rounds", type=int, default=0, help="stop after N rounds (0: never; ours)")


def _group_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = _common_parent()
    p = sub.add_parser(
        "updateSubGroup", parents=[common], help="Update or create subscription group"
    )
    _add(p, "b", "brokerAddr", "create subscription group to which broker")
    _add(p, "c", "clusterName", "create subscription group to which cluster")
    _add(p, "g", "groupName", "consumer group name", required=True)
    _add(p, "s", "consumeEnable", "consume enable")
    _add(p, "m", "consumeFromMinEnable", "from min offset")
    _add(p, "d", "consumeBroadcastEnable", "broadcast")
    _add(p, "q", "retryQueueNums", "retry queue nums", kind=java_int)
    _add(p, "r", "retryMaxTimes", "retry max times", kind=java_int)
    _add(p, "i", "brokerId", "consumer from which broker id", kind=java_long)
    _add(
        p, "w", "whichBrokerWhenConsumeSlowly", "which broker id when consume slowly",
        kind=java_long,
    )  # fmt: skip
    _add(p, "a", "notifyConsumerIdsChanged", "notify consumerId changed")

    p = sub.add_parser(
        "deleteSubGroup", parents=[common], help="Delete subscription group from broker."
    )
    _add(p, "b", "brokerAddr", "delete subscription group from which broker")
    _add(p, "c", "clusterName", "delete subscription group from which cluster")
    _add(p, "g", "groupName", "subscription group name", required=True)
    _add(p, "r", "removeOffset", "remove offset")

    p = sub.add_parser(
        "consumerProgress", parents=[common], help="Query consumers's progress, speed"
    )
    _add(p, "g", "groupName", "consumer group name")
    _add(p, "s", "showClientIP", "Show Client IP per Queue")

    p = sub.add_parser(
        "consumerConnection",
        parents=[common],
        help="Query consumer's socket connection, client version and subscription",
    )
    _add(p, "g", "consumerGroup", "consumer group name", required=True)
    _add(p, "b", "brokerAddr", "broker address")

    p = sub.add_parser(
        "producerConnection",
        parents=[common],
        help="Query producer's socket connection and client version",
    )
    _add(p, "g", "producerGroup", "producer group name", required=True)
    _add(p, "t", "topic", "topic name", required=True)


def _body_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bodyDir",
        "--body-dir",
        dest="bodyDir",
        help="where message bodies are written (default: /tmp/rocketmq/msgbodys, as Java)",
    )


def _message_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = _common_parent()
    stamp = "[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"
    p = sub.add_parser("queryMsgByKey", parents=[common], help="Query Message by Key")
    _add(p, "t", "topic", "topic name", required=True)
    _add(p, "k", "msgKey", "Message Key", required=True)
    _add(p, "b", "beginTimestamp", f"Begin timestamp{stamp}")
    _add(p, "e", "endTimestamp", f"End timestamp{stamp}")
    _add(p, "c", "maxNum", "The maximum number of messages returned (default 64)", kind=java_int)

    p = sub.add_parser("queryMsgById", parents=[common], help="Query Message by Id")
    _add(p, "i", "msgId", "Message Id (offsetMsgId), several separated by ','", required=True)
    _body_dir(p)

    p = sub.add_parser("queryMsgByUniqueKey", parents=[common], help="Query Message by Unique key")
    _add(p, "i", "msgId", "Message Id (the unique key)", required=True)
    _add(p, "t", "topic", "The topic of msg", required=True)
    _add(p, "a", "showAll", "Print all message, the limit is 32", flag=True)
    _body_dir(p)

    p = sub.add_parser("queryMsgByOffset", parents=[common], help="Query Message by offset")
    _add(p, "t", "topic", "topic name", required=True)
    _add(p, "b", "brokerName", "Broker Name", required=True)
    _add(p, "i", "queueId", "Queue Id", required=True, kind=java_int)
    _add(p, "o", "offset", "Queue Offset", required=True, kind=java_long)
    _body_dir(p)

    p = sub.add_parser("printMsg", parents=[common], help="Print Message Detail")
    _add(p, "t", "topic", "topic name", required=True)
    _add(p, "c", "charsetName", "CharsetName(eg: UTF-8,GBK)")
    _add(p, "s", "subExpression", "Subscribe Expression(eg: TagA || TagB)")
    _add(p, "b", "beginTimestamp", f"Begin timestamp{stamp}")
    _add(p, "e", "endTimestamp", f"End timestamp{stamp}")
    _add(p, "d", "printBody", "print body")

    p = sub.add_parser("printMsgByQueue", parents=[common], help="Print Message Detail")
    _add(p, "t", "topic", "topic name", required=True)
    _add(p, "a", "brokerName", "broker name", required=True)
    _add(p, "i", "queueId", "queue id", required=True, kind=java_int)
    _add(p, "c", "charsetName", "CharsetName(eg: UTF-8,GBK)")
    _add(p, "s", "subExpression", "Subscribe Expression(eg: TagA || TagB)")
    _add(p, "b", "beginTimestamp", f"Begin timestamp{stamp}")
    _add(p, "e", "endTimestamp", f"End timestamp{stamp}")
    _add(p, "p", "printMsg", "print msg. eg: true | false(default)")
    _add(p, "d", "printBody", "print body. eg: true | false(default)")
    _add(p, "f", "calculateByTag", "calculate by tag. eg: true | false(default)")


def _offset_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    common = _common_parent()
    p = sub.add_parser(
        "resetOffsetByTime",
        parents=[common],
        help="Reset consumer offset by timestamp(without client restart).",
    )
    _add(p, "g", "group", "set the consumer group", required=True)
    _add(p, "t", "topic", "set the topic", required=True)
    _add(
        p, "s", "timestamp",
        "set the timestamp[now|currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]", required=True,
    )  # fmt: skip
    _add(p, "f", "force", "set the force rollback by timestamp switch[true|false]")
    _add(p, "c", "cplus", "reset c++ client offset", flag=True)

    p = sub.add_parser(
        "skipAccumulatedMessage",
        parents=[common],
        help="Skip all messages that are accumulated (not consumed) currently",
    )
    _add(p, "g", "group", "set the consumer group", required=True)
    _add(p, "t", "topic", "set the topic", required=True)
    _add(p, "f", "force", "set the force rollback by timestamp switch[true|false]")


def _consume_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("consumeMessage", parents=[_common_parent()], help="Consume message")
    p.add_argument("-t", "--topic", required=True, help="Topic name")
    p.add_argument("-b", "--brokerName", help="Broker name")
    p.add_argument("-i", "--queueId", type=java_int, help="Queue Id")
    p.add_argument("-o", "--offset", type=java_long, help="Queue offset")
    p.add_argument("-g", "--consumerGroup", help="Consumer group name")
    p.add_argument(
        "-s", "--beginTimestamp", help="Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"
    )
    p.add_argument(
        "-e", "--endTimestamp", help="End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"
    )
    p.add_argument(
        "-c", "--messageNumber", type=java_long,
        help="Number of message to be consumed",
    )  # fmt: skip
    p = sub.add_parser(
        "consumerStatus",
        parents=[_common_parent()],
        help="Query consumer's internal data structure",
    )
    p.add_argument("-g", "--consumerGroup", required=True, help="consumer group name")
    p.add_argument("-i", "--clientId", help="The consumer's client id")
    p.add_argument("-b", "--brokerAddr", help="broker address")
    p.add_argument(
        "-s", "--jstack", action="store_true", help="Run jstack command in the consumer progress"
    )
    p.add_argument(
        "--outDir", default=".",
        help="where the per-client reports go, as <outDir>/<now ms>/<clientId> (aiorocketmq)",
    )  # fmt: skip


def _acl_target(parser: argparse.ArgumentParser, what: str) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("-b", "--brokerAddr", help=f"{what} which broker")
    group.add_argument("-c", "--clusterName", help=f"{what} which cluster")


def _acl_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "updateAclConfig", parents=[_common_parent()], help="Update acl config yaml file in broker"
    )
    _acl_target(p, "update acl config file to")
    p.add_argument("-a", "--accessKey", required=True, help="set accessKey in acl config file")
    p.add_argument("-s", "--secretKey", help="set secretKey in acl config file")
    p.add_argument("-w", "--whiteRemoteAddress", help="set white ip Address for account")
    p.add_argument("-i", "--defaultTopicPerm", help="set default topicPerm in acl config file")
    p.add_argument("-u", "--defaultGroupPerm", help="set default GroupPerm in acl config file")
    p.add_argument("-t", "--topicPerms", help="set topicPerms list,eg: topicA=DENY,topicD=SUB")
    p.add_argument("-g", "--groupPerms", help="set groupPerms list,eg: groupD=DENY,groupD=SUB")
    p.add_argument("-m", "--admin", help="set admin flag in acl config file")
    p = sub.add_parser(
        "deleteAclConfig", parents=[_common_parent()], help="Delete Acl Config Account in broker"
    )
    _acl_target(p, "delete acl config account from")
    p.add_argument("-a", "--accessKey", required=True, help="the account to delete")
    p = sub.add_parser(
        "updateGlobalWhiteAddr",
        parents=[_common_parent()],
        help="Update global white address for acl Config File in broker",
    )
    _acl_target(p, "update global white address to")
    p.add_argument(
        "-g", "--globalWhiteRemoteAddresses", required=True,
        help="set globalWhiteRemoteAddress list,eg: 10.10.103.*,192.168.0.*",
    )  # fmt: skip
    p.add_argument("-p", "--aclFileFullPath", help="update the white list of this acl file")
    p = sub.add_parser(
        "clusterAclConfigVersion",
        parents=[_common_parent()],
        help="List all of acl config version information in cluster",
    )
    _acl_target(p, "query acl config version for")


def _doctor_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub.add_parser(
        "doctor",
        parents=[_common_parent()],
        help="Check name servers, broker addresses, disks and replication (aiorocketmq)",
    )


def _dashboard_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "dashboard", parents=[_common_parent()], help="Serve the web dashboard (aiorocketmq)"
    )
    p.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"0 = a free port (default {DEFAULT_PORT})"
    )
    p.add_argument(
        "--sampleInterval", type=float, default=5.0, help="seconds between TPS samples (default 5)"
    )
    p.add_argument(
        "--refresh", type=int, default=10, help="cluster page reload seconds (0: off; default 10)"
    )


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``mqadmin``."""
    parser = argparse.ArgumentParser(
        prog="mqadmin",
        description="aiorocketmq admin tool: RocketMQ 4.x mqadmin commands and flags.",
    )
    sub = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    _topic_commands(sub)
    _cluster_commands(sub)
    _broker_config_commands(sub)
    _send_commands(sub)
    _group_commands(sub)
    _message_commands(sub)
    _offset_commands(sub)
    _consume_commands(sub)
    _acl_commands(sub)
    _doctor_command(sub)
    add_lag_command(sub)
    add_config_commands(sub)
    add_maintenance_commands(sub)
    add_assignment_commands(sub)
    _dashboard_command(sub)
    for name, command in unique_commands(sub).items():
        if name not in NO_JSON:
            command.add_argument(
                "--json", action="store_true", help="machine-readable JSON output (aiorocketmq)"
            )
    for name in WATCHABLE:
        sub.choices[name].add_argument(
            "-i",
            "--watch",
            type=float,
            metavar="SECONDS",
            help="run again every SECONDS until interrupted (aiorocketmq)",
        )
    return parser


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


async def watch(once: Callable[[], Awaitable[None]], every_s: float | None) -> None:
    """Run ``once``; with ``every_s``, again every ``every_s`` seconds until cancelled
    or interrupted (each run starts ``every_s`` after the previous one ended)."""
    while True:
        await once()
        if not every_s:
            return
        await asyncio.sleep(every_s)


async def _run(args: argparse.Namespace, namesrv_addr: str | None) -> int:
    command = {
        **COMMANDS,
        **MESSAGE_COMMANDS,
        **BROKER_COMMANDS,
        **SEND_COMMANDS,
        "clusterRT": SEND_COMMANDS["clusterSendMsgRT"],
        **CONSUME_COMMANDS,
        **ACL_COMMANDS,
        **CONFIG_COMMANDS,
        **MAINTENANCE_COMMANDS,
        **EXPORT_COMMANDS,
        **ASSIGNMENT_COMMANDS,
        "haStatus": ha_status,
        "doctor": doctor,
        "lag": lag,
        "dashboard": dashboard,
    }[args.command]
    try:
        credentials = await asyncio.to_thread(tools_credentials, os.environ.get(ROCKETMQ_HOME_ENV))
        async with MQAdmin(namesrv_addr, credentials=credentials) as admin:
            await watch(lambda: command(admin, args, _write), getattr(args, "watch", None))
    except UsageError as exc:
        print(f"mqadmin {args.command}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RocketMQError as exc:
        print(f"mqadmin {args.command}: command failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return 0


def namesrv_addr_of(args: argparse.Namespace, environ: Mapping[str, str]) -> str | None:
    """``-n``, else ``NAMESRV_ADDR``, else None (blank counts as absent)."""
    for value in (args.namesrvAddr, environ.get(NAMESRV_ADDR_ENV)):
        if value and value.strip():
            return str(value).strip()
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mqadmin``; returns the exit code."""
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    if not words or words[0] == "help":
        return admin_help(parser, words[1:], _write)
    words[0] = canonical_command(parser, words[0])
    args = parser.parse_args(words)
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        return asyncio.run(_run(args, namesrv_addr_of(args, os.environ)))
    except KeyboardInterrupt:  # clusterList -i, --watch and dashboard run until interrupted
        return 130
    except BrokenPipeError:
        # The reader went away (``mqadmin topicList | head``): stop quietly, and keep
        # the interpreter's final flush from raising again on the closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
