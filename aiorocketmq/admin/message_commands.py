"""mqadmin's message and offset commands, as RocketMQ 4.9.8's tools.

Owns: ``queryMsgByKey``, ``queryMsgById``, ``queryMsgByUniqueKey``,
``queryMsgByOffset``, ``printMsg``, ``resetOffsetByTime`` and ``skipAccumulatedMessage``
(one coroutine each, same shape as ``commands``: an ``MQAdmin``, the parsed
options by Java's long names, a ``write`` function), the ``MESSAGE_COMMANDS``
table, and writing message bodies to files (``/tmp/rocketmq/msgbodys/<msgId>`` as
Java, or ``--bodyDir``) on a ``BlockingExecutor``.

Left out: queryMsgById's resend to a client (-g/-d) and queryMsgByUniqueKey's
direct consume (-g/-d).

Where Java's reset commands fall back: a CONSUMER_NOT_ONLINE answer to
INVOKE_BROKER_TO_RESET_OFFSET makes them reset from the admin with
UPDATE_CONSUMER_OFFSET and print the old table, as Java; so does
REQUEST_CODE_NOT_SUPPORTED (a broker without the request), where Java fails.

``--json`` (ours), all standard JSON with ``json_render``'s message objects:
queryMsgByKey a list of messages; queryMsgById / ByUniqueKey / ByOffset a list of
messages each with ``bodyPath`` and ``tracks`` (null when the track look-up
failed), ``[]`` when the offset holds no message; printMsg JSON Lines (``{"kind":
"queue", ...minOffset, maxOffset}``, ``{"kind": "message", ...}``, ``{"kind":
"queueEnd", "status", "offset"}``); resetOffsetByTime and skipAccumulatedMessage
``{"group", "topic", "force", ["timestamp"], "offsets": [{"topic", "brokerName",
"queueId", "offset"}]}``, or ``"rollback": [...]`` for the old-style reset.

Must not: parse command lines (``cli/admin.py``) or hold output formats
(``message_render``).
"""

# ruff: noqa: UP031

from __future__ import annotations

import logging
from argparse import Namespace
from pathlib import Path
from typing import Final

from aiorocketmq.admin import json_render as jr
from aiorocketmq.admin import message_render as mr
from aiorocketmq.admin.commands import Command, UsageError, Write, java_bool
from aiorocketmq.admin.message_admin import MessageAdmin, MessageTrack, RollbackStats
from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.client.errors import MQBrokerError, MQClientError
from aiorocketmq.client.results import PullStatus
from aiorocketmq.common.message import MessageExt, MessageQueue
from aiorocketmq.remoting.codes import ResponseCode
from aiorocketmq.runtime import BlockingExecutor

__all__ = ["DEFAULT_BODY_DIR", "MESSAGE_COMMANDS"]

log = logging.getLogger(__name__)

DEFAULT_BODY_DIR: Final = "/tmp/rocketmq/msgbodys"
"""Where Java's queryMsgBy* write message bodies."""
PRINT_MSG_BATCH: Final = 32
"""Messages per pull of ``printMsg`` (Java's)."""
JAVA_LONG_MAX: Final = 2**63 - 1
#: INVOKE_BROKER_TO_RESET_OFFSET answers after which offsets are reset the old way.
_OLD_STYLE_CODES: Final = (
    ResponseCode.CONSUMER_NOT_ONLINE,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
)


def _timestamp(text: str, option: str) -> int:
    try:
        return mr.parse_timestamp(text)
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from exc


def _write_file(directory: str, name: str, body: bytes) -> str:
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    target = path / name
    target.write_bytes(body)
    return str(target)


async def _body_files(directory: str, items: list[tuple[str, bytes]]) -> list[str]:
    """Write each (file name, body); the paths, in order."""
    async with BlockingExecutor("mqadmin-body", max_workers=1) as executor:
        return [await executor.run(_write_file, directory, name, body) for name, body in items]


def _body_dir(args: Namespace) -> str:
    return str(getattr(args, "bodyDir", None) or DEFAULT_BODY_DIR)


# -- queries -------------------------------------------------------------------------


async def query_msg_by_key(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``queryMsgByKey -t -k [-b -e -c]``: every message with the key, from every broker."""
    msgs = await MessageAdmin(admin).query_message(
        args.topic.strip(),
        args.msgKey.strip(),
        64 if args.maxNum is None else args.maxNum,
        0 if args.beginTimestamp is None else _timestamp(args.beginTimestamp, "-b"),
        JAVA_LONG_MAX if args.endTimestamp is None else _timestamp(args.endTimestamp, "-e"),
    )
    write(jr.dump([jr.message_json(m, None) for m in msgs]) if jr.wants_json(args)
          else mr.query_by_key_text(msgs))  # fmt: skip


async def _tracks(messages: MessageAdmin, msg: MessageExt) -> list[MessageTrack] | None:
    try:
        return await messages.message_track_detail(msg)
    except MQClientError as exc:  # Java prints the trace and no track section
        log.warning("message track failed: %s", exc)
        return None


async def _print_msgs(
    messages: MessageAdmin,
    msgs: list[MessageExt],
    args: Namespace,
    write: Write,
    *,
    unique: bool = False,
    broker_name: str | None = None,
) -> None:
    """Write each body to its file, then print each message (Java's two variants)
    with its consumer track section.

    The file is named by the message id; the unique-key variant adds ``_<index>``
    after the first.
    """
    names = [mr.client_msg_id(m) + (f"_{i}" if unique and i else "") for i, m in enumerate(msgs)]
    items = [(n, bytes(m.body)) for n, m in zip(names, msgs, strict=True)]
    paths = await _body_files(_body_dir(args), items)
    docs: list[jr.JsonObject] = []
    for msg, path in zip(msgs, paths, strict=True):
        tracks = await _tracks(messages, msg)
        if jr.wants_json(args):
            docs.append(jr.message_json(msg, broker_name) | {
                "bodyPath": path,
                "tracks": None if tracks is None else [jr.track_json(t) for t in tracks],
            })  # fmt: skip
            continue
        text = mr.print_msg_text(msg, path, offset_id=not unique)
        write(text + ("" if tracks is None else mr.message_track_text(tracks)))
    if jr.wants_json(args):
        write(jr.dump(docs))


async def query_msg_by_id(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``queryMsgById -i offsetMsgId[,offsetMsgId...]``: each message in full."""
    ids = [i.strip() for i in args.msgId.split(",") if i.strip()]
    if not ids:
        raise UsageError("-i needs at least one offset message id")
    messages = MessageAdmin(admin)
    msgs = [await messages.view_message(i) for i in ids]
    await _print_msgs(messages, msgs, args, write)


async def query_msg_by_unique_key(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``queryMsgByUniqueKey -t -i [-a]``: the earliest stored copy of the message."""
    messages = MessageAdmin(admin)
    topic, key = args.topic.strip(), args.msgId.strip()
    # Java's query by unique key keeps only the earliest stored copy, so -a (show
    # all) shows that one too.
    msgs = await messages.query_message(topic, key, 32, unique=True)
    await _print_msgs(messages, msgs, args, write, unique=True)


async def query_msg_by_offset(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``queryMsgByOffset -t -b brokerName -i queueId -o offset``: one message, pulled."""
    messages = MessageAdmin(admin)
    mq = MessageQueue(args.topic.strip(), args.brokerName.strip(), args.queueId)
    address = await messages.broker_addr(mq.topic, mq.broker_name)
    result = await messages.pull(address, mq, "*", args.offset, 1)
    found = result.msg_found_list[:1] if result.status is PullStatus.FOUND else []
    if not found:  # Java prints nothing; say why on the log
        log.warning("no message at %s offset %d: %s", mq, args.offset, result.status.value)
    if found or jr.wants_json(args):
        await _print_msgs(messages, found, args, write, broker_name=mq.broker_name)


def _message_doc(msg: MessageExt, broker_name: str, print_body: bool) -> jr.JsonObject:
    doc = {"kind": "message"} | jr.message_json(msg, broker_name)
    if not print_body:  # -d false: as Java's NOT PRINT BODY, no body at all
        doc.pop("body", None)
        doc.pop("bodyBase64", None)
    return doc


async def _print_queue(
    messages: MessageAdmin, mq: MessageQueue, address: str, args: Namespace, write: Write
) -> tuple[str | None, int]:
    """Print one queue's range; returns the last pull's status (None: no pull, or
    it failed) and the offset where printing stopped."""
    min_offset = await messages.min_offset(address, mq)
    max_offset = await messages.max_offset(address, mq)
    if args.beginTimestamp is not None:
        begin = _timestamp(args.beginTimestamp, "-b")
        min_offset = await messages.search_offset(address, mq, begin)
    if args.endTimestamp is not None:
        end = _timestamp(args.endTimestamp, "-e")
        max_offset = await messages.search_offset(address, mq, end)
    as_json = jr.wants_json(args)
    if as_json:
        write(jr.dump({"kind": "queue", **jr.queue_json(mq), "minOffset": min_offset,
                       "maxOffset": max_offset}))  # fmt: skip
    else:
        write("minOffset=%s, maxOffset=%s, %s\n" % (min_offset, max_offset, mr.mq_text(mq)))
    charset = (args.charsetName or "UTF-8").strip()
    sub = (args.subExpression or "*").strip()
    print_body = java_bool(args.printBody, True)
    offset = min_offset
    status: str | None = None
    while offset < max_offset:
        try:
            result = await messages.pull(address, mq, sub, offset, PRINT_MSG_BATCH)
        except MQClientError as exc:  # Java prints the trace and leaves the queue
            log.warning("printMsg: pull failed queue=%s offset=%d error=%s", mq, offset, exc)
            return None, offset
        offset = result.next_begin_offset
        status = result.status.value
        if result.status is PullStatus.FOUND:
            write("".join(
                jr.dump(_message_doc(m, mq.broker_name, print_body)) if as_json
                else mr.print_message_line(m, mq.broker_name, charset, print_body)
                for m in result.msg_found_list
            ))  # fmt: skip
        elif result.status is PullStatus.NO_MATCHED_MSG:
            if not as_json:
                write("%s no matched msg. status=%s, offset=%s\n" % (mr.mq_text(mq), status,
                                                                      offset))  # fmt: skip
        else:
            if not as_json:
                write("%s print msg finished. status=%s, offset=%s\n" % (mr.mq_text(mq), status,
                                                                          offset))  # fmt: skip
            break
    return status, offset


async def print_msg(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``printMsg -t [-c charset -s subExpression -b begin -e end -d printBody]``."""
    charset = (args.charsetName or "UTF-8").strip()
    try:
        "".encode(charset)
    except LookupError as exc:
        raise UsageError(f"-c: unknown charset {charset!r}") from exc
    messages = MessageAdmin(admin)
    for mq, address in await messages.fetch_subscribe_queues(args.topic.strip()):
        end = await _print_queue(messages, mq, address, args, write)
        if jr.wants_json(args):
            write(jr.dump({"kind": "queueEnd", **jr.queue_json(mq), "status": end[0],
                           "offset": end[1]}))  # fmt: skip
        else:
            write(mr.SEPARATOR)


async def print_msg_by_queue(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``printMsgByQueue -t -a brokerName -i queueId [-c -s -b -e -p -d -f]``.

    Java's ``PrintMessageByQueueCommand``: pulls the queue's range (``-b``/``-e``
    timestamps narrow it), stops at the first pull that finds nothing; ``-p true``
    prints each message (``-d`` its body), ``-f true`` counts messages per tag,
    largest first (``Tag: <tag> Count: <n>``). ``--json``: one document
    ``{"queue", "minOffset", "maxOffset", "messages" (with -p), "tagCounts" (with -f)}``.
    """
    charset = (args.charsetName or "UTF-8").strip()
    try:
        "".encode(charset)
    except LookupError as exc:
        raise UsageError(f"-c: unknown charset {charset!r}") from exc
    messages = MessageAdmin(admin)
    mq = MessageQueue(args.topic.strip(), args.brokerName.strip(), args.queueId)
    address = await messages.broker_addr(mq.topic, mq.broker_name)
    offset = await messages.min_offset(address, mq)
    max_offset = await messages.max_offset(address, mq)
    if args.beginTimestamp is not None:
        offset = await messages.search_offset(address, mq, _timestamp(args.beginTimestamp, "-b"))
    if args.endTimestamp is not None:
        max_offset = await messages.search_offset(address, mq, _timestamp(args.endTimestamp, "-e"))
    first = offset
    print_each, print_body = java_bool(args.printMsg, False), java_bool(args.printBody, False)
    by_tag, tags = java_bool(args.calculateByTag, False), dict[str, int]()
    docs: list[jr.JsonObject] = []
    while offset < max_offset:
        result = await messages.pull(address, mq, (args.subExpression or "*").strip(), offset,
                                     PRINT_MSG_BATCH)  # fmt: skip
        offset = result.next_begin_offset
        if result.status is not PullStatus.FOUND:
            break
        for msg in result.msg_found_list:
            if by_tag:
                tags[msg.tags or ""] = tags.get(msg.tags or "", 0) + 1
            if print_each and jr.wants_json(args):
                docs.append(_message_doc(msg, mq.broker_name, print_body))
            elif print_each:
                write(mr.print_message_line(msg, mq.broker_name, charset, print_body))
    counts = sorted(tags.items(), key=lambda kv: (-kv[1], kv[0]))
    if jr.wants_json(args):
        doc: jr.JsonObject = {"queue": jr.queue_json(mq), "minOffset": first,
                              "maxOffset": max_offset}  # fmt: skip
        if print_each:
            doc["messages"] = docs
        if by_tag:
            doc["tagCounts"] = dict(counts)
        write(jr.dump(doc))
    elif by_tag:
        write("".join("Tag: %-30s Count: %s\n" % (tag, n) for tag, n in counts))


# -- offsets ---------------------------------------------------------------------------


def _reset_timestamp(text: str) -> int:
    """``resetOffsetByTime -s``: ``now`` (-1: the max offset), millis, or a date."""
    return -1 if text == "now" else _timestamp(text, "-s")


async def _reset(
    messages: MessageAdmin, args: Namespace, timestamp: int, force: bool, cplus: bool = False
) -> tuple[dict[MessageQueue, int] | None, list[RollbackStats] | None]:
    """Reset through the brokers (the new offsets), else the old way (its rows)."""
    group, topic = args.group.strip(), args.topic.strip()
    try:
        table = await messages.reset_offset_by_timestamp(topic, group, timestamp, force, cplus)
    except MQBrokerError as exc:
        if exc.code not in _OLD_STYLE_CODES:
            raise
        return None, await messages.reset_offset_by_timestamp_old(group, topic, timestamp, force)
    return table, None


def _reset_json(
    args: Namespace,
    force: bool,
    result: tuple[dict[MessageQueue, int] | None, list[RollbackStats] | None],
    **extra: object,
) -> str:
    table, rows = result
    doc: jr.JsonObject = {"group": args.group.strip(), "topic": args.topic.strip(),
                          "force": force, **extra}  # fmt: skip
    if table is not None:
        doc["offsets"] = jr.reset_offset_json(table)
    else:
        doc["rollback"] = jr.rollback_json(rows or [])
    return jr.dump(doc)


def _reset_text(table: dict[MessageQueue, int] | None, rows: list[RollbackStats] | None) -> str:
    return (
        mr.reset_offset_text(table) if table is not None else mr.reset_offset_old_text(rows or [])
    )


async def reset_offset_by_time(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``resetOffsetByTime -g -t -s [-f] [-c]``: through the brokers, else the old way."""
    group, topic, text = args.group.strip(), args.topic.strip(), args.timestamp.strip()
    timestamp = _reset_timestamp(text)
    force = java_bool(args.force, True)
    table, rows = result = await _reset(MessageAdmin(admin), args, timestamp, force, args.cplus)
    if jr.wants_json(args):
        write(_reset_json(args, force, result, timestamp=timestamp))
        return
    force_text = "true" if force else "false"
    # Java's two paths name the group differently in this line.
    which = "group" if table is not None else "consumerGroup"
    write(
        "rollback consumer offset by specified %s[%s], topic[%s], force[%s], "
        "timestamp(string)[%s], timestamp(long)[%s]\n" % (which, group, topic, force_text, text,
                                                          timestamp)
    )  # fmt: skip
    write(_reset_text(table, rows))


async def skip_accumulated(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``skipAccumulatedMessage -g -t [-f]``: every queue to its max offset."""
    force = java_bool(args.force, True)
    table, rows = result = await _reset(MessageAdmin(admin), args, -1, force)
    if jr.wants_json(args):
        write(_reset_json(args, force, result))
        return
    write(_reset_text(table, rows))


MESSAGE_COMMANDS: Final[dict[str, Command]] = {
    "queryMsgByKey": query_msg_by_key,
    "queryMsgById": query_msg_by_id,
    "queryMsgByUniqueKey": query_msg_by_unique_key,
    "queryMsgByOffset": query_msg_by_offset,
    "printMsg": print_msg,
    "printMsgByQueue": print_msg_by_queue,
    "resetOffsetByTime": reset_offset_by_time,
    "skipAccumulatedMessage": skip_accumulated,
}
"""The message and offset commands by their Java names."""
