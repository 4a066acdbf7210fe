"""mqadmin consumeMessage and consumerStatus, as RocketMQ 4.9.8's
``ConsumeMessageCommand`` and ``ConsumerStatusSubCommand``.

consumerStatus asks a group's clients for their running info through a broker
(GET_CONSUMER_RUNNING_INFO): with ``-i`` one client's report in Java's layout,
without it the index of clients (each report written to a file) and Java's checks
(same subscriptions, queues that cannot lock or consume). ``--json`` gives the
reports as standard JSON (``mqTable`` as a list of queues).

consumeMessage reads messages of a topic with a pull consumer that commits nothing.

Modes, chosen by the flags: DEFAULT (``-t`` only: every readable queue, in order,
``-c`` messages in all, 128 by default), BYQUEUE (``-b`` broker name and ``-i`` queue
id) and BYOFFSET (also ``-o`` offset). ``-s``/``-e`` narrow each queue to the
offsets stored between two times (milliseconds or ``yyyy-MM-dd#HH:mm:ss:SSS``);
``-g`` names the consumer group of the pulls (Java's TOOLS_CONSUMER by default).

Output: Java's lines (``Consume ok``, then ``MSGID: <id> MessageExt [...] BODY: ...``
per message, ``<queue> print msg finished. status=NO_NEW_MSG, offset=N`` and the
"older N messages" notices). With ``--json``: one JSON document, a list of the
messages read, each ``{"topic", "brokerName", "queueId", "queueOffset", "msgId",
"offsetMsgId", "tags", "keys", "bornTimestamp", "storeTimestamp", "reconsumeTimes",
"properties", "body"}`` (``body`` as text when it is UTF-8, else ``bodyBase64``).

Where Java differs: it treats a queue's max offset (the next offset to be written)
as the last message, so it asks for one message too many and, with ``-c``, can
print one more than asked; here every queue stops at its max offset and ``-c`` is
exact. Java prints a usage mistake and exits 0; this raises ``UsageError`` (exit 2).

Must not: parse the command line (``aiorocketmq.cli.admin``).
"""

# ruff: noqa: UP031

from __future__ import annotations

import asyncio
import time
from argparse import Namespace
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from aiorocketmq.admin import json_render as jr
from aiorocketmq.admin import message_render as mr
from aiorocketmq.admin.commands import Command, UsageError, Write
from aiorocketmq.admin.json_render import message_json
from aiorocketmq.admin.message_admin import TOOLS_CONSUMER_GROUP, MessageAdmin
from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.admin.render import version_desc
from aiorocketmq.client.results import PullStatus
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.running_info import ConsumerRunningInfo, same_subscriptions

__all__ = [
    "CONSUME_COMMANDS",
    "DEFAULT_MESSAGE_COUNT",
    "consume_message",
    "consumer_status",
    "running_info_json",
]

DEFAULT_MESSAGE_COUNT: Final = 128
PULL_BATCH: Final = 32
_INDEX_ROW: Final = "%-10s %-40s %-20s %s\n"


@dataclass(slots=True)
class _Reader:
    """Pulls queue ranges and writes what they hold (text or collected for JSON)."""

    messages: MessageAdmin
    write: Write
    group: str
    as_json: bool
    found: list[dict[str, Any]] = field(default_factory=list)

    async def bounds(
        self, mq: MessageQueue, address: str, begin: int | None, end: int | None
    ) -> tuple[int, int]:
        """[min, max) of ``mq``, narrowed to the store times when given."""
        low = await self.messages.min_offset(address, mq)
        high = await self.messages.max_offset(address, mq)
        if begin is not None:
            low = await self.messages.search_offset(address, mq, begin)
        if end is not None:
            high = await self.messages.search_offset(address, mq, end)
        return low, high

    def say(self, text: str) -> None:
        if not self.as_json:
            self.write(text)

    async def read(self, mq: MessageQueue, address: str, low: int, high: int) -> None:
        """Every message of ``mq`` in [low, high), Java's lines around them."""
        offset = low
        while offset < high:
            result = await self.messages.pull(
                address, mq, "*", offset, min(PULL_BATCH, high - offset), group=self.group
            )
            status = result.status
            if status is PullStatus.FOUND:
                msgs = [m for m in result.msg_found_list if m.queue_offset < high]
                self.say("Consume ok\n")
                if self.as_json:
                    self.found += [message_json(m, mq.broker_name) for m in msgs]
                else:
                    self.write("".join(
                        mr.print_message_line(m, mq.broker_name, "UTF-8", True) for m in msgs
                    ))  # fmt: skip
            elif status is PullStatus.NO_MATCHED_MSG:
                self.say(
                    "%s no matched msg. status=%s, offset=%s\n"
                    % (mr.mq_text(mq), status.value, result.next_begin_offset)
                )
            else:
                self.say(
                    "%s print msg finished. status=%s, offset=%s\n"
                    % (mr.mq_text(mq), status.value, result.next_begin_offset)
                )
                return
            if result.next_begin_offset <= offset:
                return  # a broker that does not move on: stop instead of spinning
            offset = result.next_begin_offset


def _options(args: Namespace) -> tuple[int, int | None, int | None]:
    """``-c``, ``-s``, ``-e`` checked as Java checks them."""
    count = DEFAULT_MESSAGE_COUNT if args.messageNumber is None else args.messageNumber
    if count <= 0:
        raise UsageError("Please input a positive messageNumber!")
    if args.queueId is not None and not args.brokerName:
        raise UsageError("Please set the brokerName before queueId!")
    if args.offset is not None and args.queueId is None:
        raise UsageError("Please set queueId before offset!")
    now = int(time.time() * 1000)
    begin = end = None
    try:
        if args.beginTimestamp is not None:
            begin = mr.parse_timestamp(args.beginTimestamp)
        if args.endTimestamp is not None:
            end = mr.parse_timestamp(args.endTimestamp)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    if begin is not None and begin > now:
        raise UsageError("Please set the beginTimestamp before now!")
    if end is not None and end > now:
        raise UsageError("Please set the endTimestamp before now!")
    if begin is not None and end is not None and begin > end:
        raise UsageError(
            "Please make sure that the beginTimestamp is less than or equal to the endTimestamp"
        )
    return count, begin, end


async def consume_message(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``consumeMessage -t [-b -i [-o]] [-g] [-s] [-e] [-c]`` (module docstring)."""
    count, begin, end = _options(args)
    topic = args.topic.strip()
    as_json = jr.wants_json(args)
    messages = MessageAdmin(admin)
    reader = _Reader(messages, write, (args.consumerGroup or TOOLS_CONSUMER_GROUP).strip(), as_json)
    if args.queueId is None:
        left = count
        for mq, address in await messages.fetch_subscribe_queues(topic):
            if left == 0:
                break
            low, high = await reader.bounds(mq, address, begin, end)
            if high - low > left:
                reader.say(
                    "The older %d message of the %d queue will be provided\n" % (left, mq.queue_id)
                )
                high = low + left
            left -= max(0, high - low)
            await reader.read(mq, address, low, high)
    else:
        broker = args.brokerName.strip()
        mq = MessageQueue(topic, broker, args.queueId)
        address = await messages.broker_addr(topic, broker)
        low, high = await reader.bounds(mq, address, begin, end)
        start = args.offset or 0
        if start > high:
            reader.say("%s no matched msg, offset=%s\n" % (mr.mq_text(mq), start))
        else:
            low = max(low, start)
            if high - low > count:
                reader.say("The oldler %d message will be provided\n" % count)  # Java's typo
                high = low + count
            await reader.read(mq, address, low, high)
    if as_json:
        write(jr.dump(reader.found))


# -- consumerStatus --------------------------------------------------------------------


def running_info_json(info: ConsumerRunningInfo) -> dict[str, Any]:
    """A client's running info as standard JSON (``mqTable`` as a list of queues)."""
    return {
        "properties": dict(sorted(info.properties.items())),
        "subscriptionSet": [
            {"topic": s.topic, "subString": s.sub_string, "expressionType": s.expression_type}
            for s in sorted(info.subscription_set, key=lambda s: s.topic)
        ],
        "mqTable": [
            {**mq.to_json_dict(), **info.mq_table[mq].to_json_dict()}
            for mq in sorted(info.mq_table)
        ],
        "statusTable": {t: info.status_table[t].to_json_dict() for t in sorted(info.status_table)},
        "jstack": info.jstack,
    }


def _write_file(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")


async def consumer_status(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``consumerStatus -g [-i clientId] [-b brokerAddr] [-s]``, as Java's.

    Without ``-i`` every client of the group is asked; each answer goes to the file
    ``<outDir>/<now ms>/<clientId>`` (Java: relative to the working directory) and
    the group is checked for differing subscriptions and stuck queues.
    """
    group = args.consumerGroup.strip()
    broker = args.brokerAddr.strip() if args.brokerAddr else None
    as_json = jr.wants_json(args)
    if args.clientId:
        info = await admin.get_consumer_running_info(
            group, args.clientId.strip(), args.jstack, broker_addr=broker
        )
        write(jr.dump(running_info_json(info)) if as_json else info.format_string())
        return
    connections = await admin.examine_consumer_connection_info(group, broker)
    now = int(time.time() * 1000)
    infos: dict[str, ConsumerRunningInfo] = {}
    rows = []
    for conn in sorted(connections.connections, key=lambda c: c.client_id):
        info = await admin.get_consumer_running_info(
            group, conn.client_id, args.jstack, broker_addr=broker
        )
        infos[conn.client_id] = info
        path = Path(args.outDir or ".") / str(now) / conn.client_id
        await asyncio.to_thread(_write_file, path, info.format_string())
        rows.append((conn, str(path)))
    same = same_subscriptions(infos, now)
    warnings = [w for cid, info in infos.items() for w in info.process_queue_warnings(cid, now)]
    if as_json:
        doc = {
            "clients": [
                {"clientId": c.client_id, "version": version_desc(c.version), "file": file,
                 "runningInfo": running_info_json(infos[c.client_id])}
                for c, file in rows
            ],
            "sameSubscription": same,
            "rebalanceOK": same,
            "warnings": warnings if same else [],
        }  # fmt: skip
        write(jr.dump(doc))
        return
    write(
        "%-10s %-40s %-20s %s\n" % ("#Index", "#ClientId", "#Version", "#ConsumerRunningInfoFile")
    )
    for i, (conn, file) in enumerate(rows, 1):
        write(_INDEX_ROW % (i, conn.client_id, version_desc(conn.version), file))
    if not infos:
        return
    if same:
        write("\n\nSame subscription in the same group of consumer")
        write("\n\nRebalance OK\n")  # Java's analyzeRebalance always says OK
        write("".join(line + "\n" for line in warnings))
    else:
        write("\n\nWARN: Different subscription in the same group of consumer!!!")


CONSUME_COMMANDS: Final[dict[str, Command]] = {
    "consumeMessage": consume_message,
    "consumerStatus": consumer_status,
}
"""mqadmin command name -> coroutine."""
