"""mqadmin sendMessage, clusterSendMsgRT, sendMsgStatus and checkMsgSendRT: messages through
a real producer, as RocketMQ 4.9.8's ``SendMessageCommand``, ``CLusterSendMsgRTCommand``,
``SendMsgStatusCommand`` and ``CheckMsgSendRTCommand`` (see each function).

clusterSendMsgRT (``-a`` amount 100, ``-s`` size 128, ``-c`` cluster (default all),
``-p`` print as tlog, ``-m`` machine room, ``-i`` interval 10 s): for every broker
set, ``amount`` sync sends to the topic named after the broker set; RT is the mean of
all but the first send (Java's warm-up rule). Java repeats every ``-i`` seconds
forever; ``--rounds N`` (ours) stops after N rounds. ``--json``: one object per
broker set and round ``{"clusterName", "brokerName", "rtMs", "successCount",
"failCount"}``.

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

import asyncio
import time
from argparse import Namespace
from collections.abc import Sequence
from typing import Any, Final

from aiorocketmq.admin import json_render as jr
from aiorocketmq.admin.commands import Command, UsageError, Write
from aiorocketmq.admin.mq_admin import MQAdmin, MQAdminError
from aiorocketmq.client import Message, MessageQueue, MQClientError, Producer, SendResult

__all__ = [
    "SEND_COMMANDS",
    "check_msg_send_rt",
    "cluster_send_msg_rt",
    "send_message",
    "send_msg_status",
]

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
    if jr.wants_json(args):
        doc = {
            "brokerName": queue.broker_name, "queueId": queue.queue_id,
            "sendStatus": result.status.name, "msgId": result.msg_id,
            "offsetMsgId": result.offset_msg_id, "queueOffset": result.queue_offset,
        }  # fmt: skip
        write(jr.dump(doc))
        return
    write(_ROW % ("#Broker Name", "#QID", "#Send Result", "#MsgId"))
    write(_ROW % (queue.broker_name, queue.queue_id, result.status.name, result.msg_id))


async def _rt_round(
    producer: Producer, broker: str, amount: int, body: bytes
) -> tuple[float, int, int]:
    """(mean RT in ms of all but the first send, successes, failures) for one broker set."""
    elapsed_ms, ok, failed = 0.0, 0, 0
    for i in range(amount):
        start = time.monotonic()
        try:
            await producer.send(Message(broker, body))
            ok += 1
        except MQClientError:
            failed += 1
        if i:
            elapsed_ms += (time.monotonic() - start) * 1000
    return (elapsed_ms / (amount - 1) if amount > 1 else 0.0), ok, failed


def _rt_line(args: Namespace, cluster: str, broker: str, result: tuple[float, int, int]) -> str:
    rt, ok, bad = result
    if jr.wants_json(args):
        doc = {"clusterName": cluster, "brokerName": broker, "rtMs": round(rt, 2),
               "successCount": ok, "failCount": bad}  # fmt: skip
        return jr.dump(doc)
    if args.printLog:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        return f"{stamp}|{args.machineRoom or 'noname'}|{cluster}|{broker}|{round(rt)}\n"
    return "%-24s  %-24s  %-8s  %-16s  %-16s\n" % (cluster, broker, f"{rt:.2f}", ok, bad)  # noqa: UP031


async def cluster_send_msg_rt(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``clusterSendMsgRT [-a 100] [-s 128] [-c cluster] [-p] [-m room] [-i 10]``."""
    amount, size = args.amount or 100, args.size if args.size is not None else 128
    if amount < 1 or size < 0:
        raise UsageError("-a must be >= 1 and -s >= 0")
    info = await admin.examine_cluster_info()
    clusters = [args.cluster.strip()] if args.cluster else sorted(info.cluster_addr_table)
    if not args.printLog and not jr.wants_json(args):
        write("%-24s  %-24s  %-4s  %-8s  %-8s\n" % ("#Cluster Name", "#Broker Name", "#RT",  # noqa: UP031
                                                 "#successCount", "#failCount"))  # fmt: skip
    body = b"a" * size
    rounds = 0
    async with Producer(str(int(time.time() * 1000)), ";".join(admin.namesrv.addresses)) as p:
        while True:
            for cluster in clusters:
                brokers = info.cluster_addr_table.get(cluster)
                if brokers is None:
                    raise MQAdminError(f"cluster [{cluster}] not exist")
                for broker in sorted(brokers):
                    result = await _rt_round(p, broker, amount, body)
                    write(_rt_line(args, cluster, broker, result))
            rounds += 1
            if args.rounds and rounds >= args.rounds:
                return
            await asyncio.sleep(args.interval if args.interval is not None else 10)


def _java_send_result(result: SendResult) -> str:
    """Java's ``SendResult.toString()``."""
    mq = result.message_queue
    return (
        f"SendResult [sendStatus={result.status.name}, msgId={result.msg_id}, "
        f"offsetMsgId={result.offset_msg_id}, messageQueue=MessageQueue [topic={mq.topic}, "
        f"brokerName={mq.broker_name}, queueId={mq.queue_id}], queueOffset={result.queue_offset}]"
    )


async def send_msg_status(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``sendMsgStatus -b brokerName [-s 128] [-c 50]``: sends to the broker's own topic.

    Java's ``SendMsgStatusCommand``: one 16-byte warm-up send, then ``-c`` sends of
    ``-s`` bytes to the topic named after the broker, each line ``rt=<ms>ms,
    SendResult=...``; ``--json`` ``[{"rtMs", "sendStatus", "msgId", "queueId"}]``.
    """
    broker = args.brokerName.strip()
    size = 128 if args.messageSize is None else args.messageSize
    count = 50 if args.count is None else args.count
    if size < 0 or count < 0:
        raise UsageError("-s and -c must not be negative")
    docs = []
    async with Producer(f"PID_SMSC_{int(time.time() * 1000)}",
                        ";".join(admin.namesrv.addresses)) as producer:  # fmt: skip
        await producer.send(Message(broker, b"a" * 16))
        for _ in range(count):
            start = time.monotonic()
            result = await producer.send(Message(broker, b"a" * size))
            rt_ms = round((time.monotonic() - start) * 1000)
            if jr.wants_json(args):
                docs.append({"rtMs": rt_ms, "sendStatus": result.status.name,
                             "msgId": result.msg_id,
                             "queueId": result.message_queue.queue_id})  # fmt: skip
            else:
                write(f"rt={rt_ms}ms, SendResult={_java_send_result(result)}\n")
    if jr.wants_json(args):
        write(jr.dump(docs))


async def check_msg_send_rt(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``checkMsgSendRT -t topic [-a 100] [-s 128]``: each send's queue and RT, then the mean.

    Java's ``CheckMsgSendRTCommand``: send ``i`` goes to queue ``i % queues``; the
    mean leaves out the first send. ``--json`` ``{"sends": [{"brokerName",
    "queueId", "success", "rtMs"}], "avgRtMs"}``.
    """
    topic = args.topic.strip()
    amount = 100 if args.amount is None else args.amount
    size = 128 if args.size is None else args.size
    if amount < 1 or size < 0:
        raise UsageError("-a must be >= 1 and -s >= 0")
    as_json = jr.wants_json(args)
    if not as_json:
        write(_ROW % ("#Broker Name", "#QID", "#Send Result", "#RT"))
    sends: list[dict[str, Any]] = []
    elapsed_ms = 0
    chosen: list[MessageQueue] = []  # the queue each send went to, as the selector chose

    def pick(mqs: Sequence[MessageQueue], _msg: Message, arg: Any) -> MessageQueue:
        chosen.append(mqs[int(arg) % len(mqs)])
        return chosen[-1]

    async with Producer(str(int(time.time() * 1000)), ";".join(admin.namesrv.addresses)) as p:
        for i in range(amount):
            before = len(chosen)
            start = time.monotonic()
            try:
                await p.send(Message(topic, b"a" * size), selector=pick, arg=i)
                success = True
            except MQClientError:
                success = False
            rt_ms = round((time.monotonic() - start) * 1000)
            elapsed_ms += rt_ms if i else 0
            mq = chosen[-1] if len(chosen) > before else None
            row = {"brokerName": mq.broker_name if mq else None,
                   "queueId": mq.queue_id if mq else None,
                   "success": success, "rtMs": rt_ms}  # fmt: skip
            sends.append(row)
            if not as_json:
                write(_ROW % (row["brokerName"], row["queueId"], str(success).lower(), rt_ms))
    avg = elapsed_ms / (amount - 1) if amount > 1 else 0.0
    write(
        jr.dump({"sends": sends, "avgRtMs": round(avg, 2)}) if as_json else f"Avg RT: {avg:.2f}\n"
    )


SEND_COMMANDS: Final[dict[str, Command]] = {
    "sendMessage": send_message,
    "clusterSendMsgRT": cluster_send_msg_rt,
    "sendMsgStatus": send_msg_status,
    "checkMsgSendRT": check_msg_send_rt,
}
