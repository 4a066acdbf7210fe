"""mqadmin sendMessage: one message through a real producer, as RocketMQ 4.9.8's
``SendMessageCommand``.

Owns: the command (``-t`` topic, ``-p`` body as UTF-8, ``-k`` keys, ``-c`` tags, ``-b``
broker name and ``-i`` queue id for a chosen queue) and its output: Java's table
(``#Broker Name  #QID  #Send Result  #MsgId``), or with ``--json`` one object
``{"brokerName", "queueId", "sendStatus", "msgId", "offsetMsgId", "queueOffset"}``.
The producer group is the current time in milliseconds, as Java's.

Where Java prints "Broker name must be set if the queue is chosen!" and exits 0, this
raises ``UsageError`` (exit 2); a failed send raises (exit 1) instead of Java's
"Failed" row.

Must not: parse the command line (``aiorocketmq.cli.admin``).
"""

from __future__ import annotations

import json
import time
from argparse import Namespace
from typing import Final

from aiorocketmq.admin.commands import Command, UsageError, Write
from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.client import Message, MessageQueue, Producer

__all__ = ["SEND_COMMANDS", "send_message"]

_ROW: Final = "%-32s  %-4s  %-20s    %s\n"


async def send_message(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``sendMessage -t topic -p body [-k keys] [-c tags] [-b broker [-i queueId]]``."""
    topic, body = args.topic.strip(), args.body.strip()
    if args.qid is not None and not args.broker:
        raise UsageError("Broker name must be set if the queue is chosen!")
    msg = Message(topic, body.encode("utf-8"))
    if args.key:
        msg.keys = args.key.strip()
    if args.tags:
        msg.tags = args.tags.strip()
    mq = MessageQueue(topic, args.broker.strip(), args.qid) if args.qid is not None else None
    group = str(int(time.time() * 1000))
    async with Producer(group, ";".join(admin.namesrv.addresses)) as producer:
        result = await producer.send(msg, mq=mq)
    queue = result.message_queue
    if getattr(args, "json", False):
        doc = {
            "brokerName": queue.broker_name, "queueId": queue.queue_id,
            "sendStatus": result.status.name, "msgId": result.msg_id,
            "offsetMsgId": result.offset_msg_id, "queueOffset": result.queue_offset,
        }  # fmt: skip
        write(json.dumps(doc) + "\n")
        return
    write(_ROW % ("#Broker Name", "#QID", "#Send Result", "#MsgId"))
    write(_ROW % (queue.broker_name, queue.queue_id, result.status.name, result.msg_id))


SEND_COMMANDS: Final[dict[str, Command]] = {"sendMessage": send_message}
