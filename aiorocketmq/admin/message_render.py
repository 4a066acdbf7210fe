"""The text mqadmin's message and offset commands print, as RocketMQ 4.9.8's tools.

Owns: ``QueryMsgByIdSubCommand.printMsg`` (and the unique-key variant without the
OffsetID line) with its consumer track section, ``QueryMsgByKeySubCommand``'s
table, ``PrintMessageSubCommand``'s lines (``MessageExt.toString`` with Java's
``Arrays.toString`` body and ``HashMap.toString`` properties), the reset-offset
tables, Java's
``MessageClientExt.getMsgId`` (UNIQ_KEY, else the offsetMsgId) and the
``yyyy-MM-dd#HH:mm:ss:SSS`` timestamps the tools accept.

Properties print in stored order; Java prints a ``HashMap`` in hash order, so the
same pairs may come in another order there.

Must not: do I/O or talk to servers.
"""

# Java's printf formats are kept verbatim (``%-20s %s``...) so each line can be
# checked against the Java source by eye.
# ruff: noqa: UP031

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from typing import Final

from aiorocketmq.admin.message_admin import MessageTrack, RollbackStats
from aiorocketmq.admin.render import human_time_ms
from aiorocketmq.common.message import MessageExt, MessageQueue

__all__ = [
    "JAVA_DATE_FORMAT",
    "client_msg_id",
    "java_map",
    "message_ext_text",
    "message_track_text",
    "mq_text",
    "parse_timestamp",
    "print_message_line",
    "print_msg_text",
    "query_by_key_text",
    "reset_offset_old_text",
    "reset_offset_text",
]

JAVA_DATE_FORMAT: Final = "%Y-%m-%d#%H:%M:%S"
"""``UtilAll.YYYY_MM_DD_HH_MM_SS_SSS`` without its ``:SSS`` milliseconds."""
SEPARATOR: Final = "--------------------------------------------------------\n"


def parse_timestamp(text: str) -> int:
    """``timestampFormat``: a millisecond number, else ``yyyy-MM-dd#HH:mm:ss:SSS`` local.

    Raises:
        ValueError: neither form.
    """
    body = text.strip()
    digits = body[1:] if body[:1] in "+-" else body
    if digits.isascii() and digits.isdigit():
        return int(body)
    head, sep, millis = body.rpartition(":")
    if not sep or not (millis.isascii() and millis.isdigit() and len(millis) == 3):
        raise ValueError(f"not a timestamp (millis or yyyy-MM-dd#HH:mm:ss:SSS): {text!r}")
    # Local time, as Java's SimpleDateFormat.
    moment = datetime.datetime.strptime(head, JAVA_DATE_FORMAT)
    return int(moment.timestamp()) * 1000 + int(millis)


def client_msg_id(msg: MessageExt) -> str:
    """``MessageClientExt.getMsgId``: the UNIQ_KEY, else the offsetMsgId."""
    return msg.get_property("UNIQ_KEY") or msg.msg_id


def java_map(values: Mapping[str, str]) -> str:
    """``AbstractMap.toString``: ``{k=v, k2=v2}``."""
    return "{" + ", ".join(f"{k}={v}" for k, v in values.items()) + "}"


def _host(host: tuple[str, int]) -> str:
    return f"{host[0]}:{host[1]}"


def _jstr(value: str | None) -> str:
    return "null" if value is None else value


def mq_text(mq: MessageQueue) -> str:
    """``MessageQueue.toString``."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


def print_msg_text(msg: MessageExt, body_path: str, *, offset_id: bool = True) -> str:
    """``printMsg`` (``offset_id`` False: the unique-key command's ``showMessage``).

    The consumer track section follows (``message_track_text``).
    """
    lines = [("OffsetID:", msg.msg_id)] if offset_id else []
    lines += [
        ("Topic:", msg.topic),
        ("Tags:", f"[{_jstr(msg.get_property('TAGS'))}]"),
        ("Keys:", f"[{_jstr(msg.get_property('KEYS'))}]"),
        ("Queue ID:", str(msg.queue_id)),
        ("Queue Offset:", str(msg.queue_offset)),
        ("CommitLog Offset:", str(msg.commit_log_offset)),
        ("Reconsume Times:", str(msg.reconsume_times)),
        ("Born Timestamp:", human_time_ms(msg.born_timestamp)),
        ("Store Timestamp:", human_time_ms(msg.store_timestamp)),
        ("Born Host:", _host(msg.born_host)),
        ("Store Host:", _host(msg.store_host)),
        ("System Flag:", str(msg.sys_flag)),
        ("Properties:", java_map(msg.properties)),
        ("Message Body Path:", body_path),
    ]
    return "".join("%-20s %s\n" % (name, value) for name, value in lines)


def message_track_text(tracks: list[MessageTrack]) -> str:
    """printMsg's track section: a blank line, then each group's ``MessageTrack``.

    Java prints the tracks back to back and ends without a line end; we end each.
    """
    if not tracks:
        return "\n\nWARN: No Consumer\n"
    return "\n\n" + "".join(f"{track}\n" for track in tracks)


def query_by_key_text(msgs: Iterable[MessageExt]) -> str:
    """``queryMsgByKey``'s table: message id, queue id, queue offset."""
    out = ["%-50s %4s %40s\n" % ("#Message ID", "#QID", "#Offset")]
    out += ["%-50s %4d %40d\n" % (client_msg_id(m), m.queue_id, m.queue_offset) for m in msgs]
    return "".join(out)


def _java_bytes(body: bytes) -> str:
    """``Arrays.toString(byte[])``: signed bytes."""
    return "[" + ", ".join(str(b - 256 if b > 127 else b) for b in body) + "]"


def message_ext_text(msg: MessageExt, broker_name: str | None) -> str:
    """``MessageExt.toString`` (the transaction id is Java's null of a plain message)."""
    return (
        f"MessageExt [brokerName={_jstr(broker_name)}, queueId={msg.queue_id}, "
        f"storeSize={msg.store_size}, queueOffset={msg.queue_offset}, sysFlag={msg.sys_flag}, "
        f"bornTimestamp={msg.born_timestamp}, bornHost=/{_host(msg.born_host)}, "
        f"storeTimestamp={msg.store_timestamp}, storeHost=/{_host(msg.store_host)}, "
        f"msgId={msg.msg_id}, commitLogOffset={msg.commit_log_offset}, bodyCRC={msg.body_crc}, "
        f"reconsumeTimes={msg.reconsume_times}, "
        f"preparedTransactionOffset={msg.prepared_transaction_offset}, "
        f"toString()=Message{{topic='{msg.topic}', flag={msg.flag}, "
        f"properties={java_map(msg.properties)}, body={_java_bytes(bytes(msg.body))}, "
        "transactionId='null'}]"
    )


def print_message_line(
    msg: MessageExt, broker_name: str | None, charset: str, print_body: bool
) -> str:
    """``PrintMessageSubCommand.printMessage``: one message.

    Raises:
        LookupError: ``charset`` is not a known encoding.
    """
    body = bytes(msg.body).decode(charset, errors="replace") if print_body else "NOT PRINT BODY"
    return "MSGID: %s %s BODY: %s\n" % (
        client_msg_id(msg), message_ext_text(msg, broker_name), body,
    )  # fmt: skip


def reset_offset_text(table: Mapping[MessageQueue, int]) -> str:
    """The #brokerName #queueId #offset table of ``resetOffsetByTime`` / ``skipAccumulated``."""
    out = ["%-40s  %-40s  %-40s\n" % ("#brokerName", "#queueId", "#offset")]
    out += [
        "%-40s  %-40d  %-40d\n" % (mq.broker_name[:32], mq.queue_id, offset)
        for mq, offset in sorted(table.items())
    ]
    return "".join(out)


def reset_offset_old_text(rows: Iterable[RollbackStats]) -> str:
    """The old-style reset's table (no client online)."""
    out = [
        "%-20s  %-20s  %-20s  %-20s  %-20s  %-20s\n"
        % ("#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset",
           "#rollbackOffset")
    ]  # fmt: skip
    out += [
        "%-20s  %-20d  %-20d  %-20d  %-20d  %-20d\n"
        % (r.broker_name[:32], r.queue_id, r.broker_offset, r.consumer_offset,
           r.timestamp_offset, r.rollback_offset)
        for r in rows
    ]  # fmt: skip
    return "".join(out)
