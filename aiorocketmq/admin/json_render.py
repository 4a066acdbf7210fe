"""mqadmin's ``--json`` documents: standard JSON (RFC 8259) for scripts, not fastjson.

Owns: the shape of every command's machine output, built from the same values the
tables are printed from. Keys are RocketMQ's own Java field names (``brokerName``,
``queueId``, ``consumerOffset``...), so a user who knows the Java classes knows the
documents. Unlike fastjson's text, object keys are always quoted strings (a
``brokerAddrs`` map of broker id to address has keys ``"0"``, ``"1"``), numbers are
numbers, and a missing value is ``null``.

One document per command run, written as one line. ``printMsg`` is the exception:
it can walk a whole topic, so it writes JSON Lines as it goes (one object per
queue start, message and queue end, told apart by ``"kind"``).

Must not: do I/O or talk to servers.
"""

from __future__ import annotations

import base64
import json
from argparse import Namespace
from collections.abc import Iterable, Mapping
from typing import Any

from aiorocketmq.admin.message_admin import MessageTrack, RollbackStats
from aiorocketmq.admin.message_render import client_msg_id
from aiorocketmq.admin.render import version_desc
from aiorocketmq.common.admin_bodies import ConsumeStats, TopicStatsTable
from aiorocketmq.common.message import MessageExt, MessageQueue
from aiorocketmq.common.protocol_bodies import Connection, ConsumerConnection, ProducerConnection

__all__ = [
    "connection_json",
    "consume_stats_json",
    "consumer_connection_json",
    "dump",
    "group_summary_json",
    "int_or_none",
    "message_json",
    "producer_connection_json",
    "queue_json",
    "reset_offset_json",
    "rollback_json",
    "topic_stats_json",
    "track_json",
    "wants_json",
]

JsonObject = dict[str, Any]


def wants_json(args: Namespace) -> bool:
    """Whether the command was given ``--json`` (commands without the flag: never)."""
    return bool(getattr(args, "json", False))


def dump(doc: object) -> str:
    """One document as one line (non-ASCII kept as is: the output is UTF-8)."""
    return json.dumps(doc, ensure_ascii=False) + "\n"


def int_or_none(text: str | None) -> int | None:
    """A broker's decimal text as a number; None when absent or not a number."""
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _host(host: tuple[str, int]) -> str:
    return f"{host[0]}:{host[1]}"


def message_json(msg: MessageExt, broker_name: str | None) -> JsonObject:
    """One message: its ids, place, times, hosts, properties and body.

    The body is ``"body"`` (text) when it is UTF-8, else ``"bodyBase64"``.
    """
    doc: JsonObject = {
        "topic": msg.topic,
        "brokerName": broker_name,
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "commitLogOffset": msg.commit_log_offset,
        "msgId": client_msg_id(msg),
        "offsetMsgId": msg.msg_id,
        "tags": msg.get_property("TAGS"),
        "keys": msg.get_property("KEYS"),
        "flag": msg.flag,
        "sysFlag": msg.sys_flag,
        "bornTimestamp": msg.born_timestamp,
        "bornHost": _host(msg.born_host),
        "storeTimestamp": msg.store_timestamp,
        "storeHost": _host(msg.store_host),
        "storeSize": msg.store_size,
        "bodyCRC": msg.body_crc,
        "reconsumeTimes": msg.reconsume_times,
        "preparedTransactionOffset": msg.prepared_transaction_offset,
        "properties": dict(msg.properties),
    }
    body = bytes(msg.body)
    try:
        doc["body"] = body.decode("utf-8")
    except UnicodeDecodeError:
        doc["bodyBase64"] = base64.b64encode(body).decode("ascii")
    return doc


def track_json(track: MessageTrack) -> JsonObject:
    """One consumer group's state for a message."""
    return {
        "consumerGroup": track.consumer_group,
        "trackType": track.track_type.value,
        "exceptionDesc": track.exception_desc,
    }


def queue_json(mq: MessageQueue) -> JsonObject:
    """``MessageQueue``'s three fields."""
    return {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id}


def topic_stats_json(topic: str, stats: TopicStatsTable) -> JsonObject:
    """``topicStatus``: each queue's min/max offset and last store time, sorted."""
    return {
        "topic": topic,
        "queues": [
            {
                **queue_json(mq),
                "minOffset": stats.offset_table[mq].min_offset,
                "maxOffset": stats.offset_table[mq].max_offset,
                "lastUpdateTimestamp": stats.offset_table[mq].last_update_timestamp,
            }
            for mq in sorted(stats.offset_table)
        ],
    }


def consume_stats_json(
    group: str, stats: ConsumeStats, client_ips: Mapping[MessageQueue, str] | None
) -> JsonObject:
    """``consumerProgress -g``: offsets and lag per queue, TPS and the total lag.

    With ``client_ips`` (``-s true``) each queue has ``clientIP`` (null: no client
    holds it).
    """
    queues = []
    for mq in sorted(stats.offset_table):
        wrapper = stats.offset_table[mq]
        row: JsonObject = {
            **queue_json(mq),
            "brokerOffset": wrapper.broker_offset,
            "consumerOffset": wrapper.consumer_offset,
            "diff": wrapper.broker_offset - wrapper.consumer_offset,
            "lastTimestamp": wrapper.last_timestamp,
        }
        if client_ips is not None:
            row["clientIP"] = client_ips.get(mq)
        queues.append(row)
    return {
        "group": group,
        "queues": queues,
        "consumeTps": stats.consume_tps,
        "diffTotal": stats.compute_total_diff(),
    }


def connection_json(conn: Connection) -> JsonObject:
    """One client connection, with its version's name (``V4_9_8``)."""
    return {
        "clientId": conn.client_id,
        "clientAddr": conn.client_addr,
        "language": conn.language,
        "version": conn.version,
        "versionDesc": version_desc(conn.version),
    }


def consumer_connection_json(group: str, connection: ConsumerConnection) -> JsonObject:
    """``consumerConnection``: clients, subscriptions, type, model and start point."""
    return {
        "consumerGroup": group,
        "connections": [connection_json(c) for c in connection.connections],
        "subscriptions": [
            {"topic": s.topic, "subString": s.sub_string, "expressionType": s.expression_type}
            for s in connection.subscriptions.values()
        ],
        "consumeType": connection.consume_type.name,
        "messageModel": connection.message_model.name,
        "consumeFromWhere": connection.consume_from_where.name,
    }


def producer_connection_json(group: str, topic: str, connection: ProducerConnection) -> JsonObject:
    """``producerConnection``: the group's clients."""
    return {
        "producerGroup": group,
        "topic": topic,
        "connections": [connection_json(c) for c in connection.connections],
    }


def group_summary_json(
    group: str, stats: ConsumeStats | None, connection: ConsumerConnection | None
) -> JsonObject:
    """``consumerProgress`` without ``-g``: one group's line (``count`` 0: offline)."""
    conns = connection.connections if connection is not None else []
    doc: JsonObject = {
        "group": group,
        "count": len(conns),
        "version": version_desc(min(c.version for c in conns)) if conns else None,
        "consumeType": None,
        "messageModel": None,
        "consumeTps": stats.consume_tps if stats is not None else 0.0,
        "diffTotal": stats.compute_total_diff() if stats is not None else 0,
    }
    if connection is not None and conns:
        doc["consumeType"] = connection.consume_type.name
        doc["messageModel"] = connection.message_model.name
    return doc


def reset_offset_json(table: Mapping[MessageQueue, int]) -> list[JsonObject]:
    """The new offset of each queue after a reset or skip, sorted."""
    return [{**queue_json(mq), "offset": offset} for mq, offset in sorted(table.items())]


def rollback_json(rows: Iterable[RollbackStats]) -> list[JsonObject]:
    """The old-style reset's rows (no client online)."""
    return [
        {
            "brokerName": r.broker_name,
            "queueId": r.queue_id,
            "brokerOffset": r.broker_offset,
            "consumerOffset": r.consumer_offset,
            "timestampOffset": r.timestamp_offset,
            "rollbackOffset": r.rollback_offset,
        }
        for r in rows
    ]
