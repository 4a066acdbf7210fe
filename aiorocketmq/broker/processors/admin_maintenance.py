"""Maintenance requests of RocketMQ 4.9.8's AdminBrokerProcessor: the store and offsets by hand.

Owns: CLEAN_EXPIRED_CONSUMEQUEUE (306), CLEAN_UNUSED_TOPIC (316),
DELETE_EXPIRED_COMMITLOG (329), CLONE_GROUP_OFFSET (314) and QUERY_CONSUME_QUEUE
(321), what ``mqadmin cleanExpiredCQ``, ``cleanUnusedTopic``,
``deleteExpiredCommitLog``, ``cloneGroupOffset`` and ``queryCq`` send.

Java's rules kept:

* cleanExpiredCQ removes the queues whose last unit points below the CommitLog's
  first offset; cleanUnusedTopic the queues of topics no longer configured (the
  store keeps ``SCHEDULE_TOPIC_XXXX``, the transaction op topic and LMQ topics);
  deleteExpiredCommitLog asks the cleanup service for a manual delete (20 passes
  that delete expired files whatever ``deleteWhen`` says). All three answer SUCCESS.
* cloneGroupOffset copies the source group's committed offsets; without a topic,
  for every topic the source group has offsets in; unless ``offline``, a topic
  the broker has no config for is skipped (Java checks the topic exists).
* queryCq reads ``count`` units from ``index`` (``minQueueIndex`` / ``maxQueueIndex``
  bound it); with a consumer group, its subscription is included and ``eval`` says
  whether each unit's tagsCode matches it. A queue that does not exist answers
  SYSTEM_ERROR "<topic>-<queueId> not exist!", as Java.

Must not: delete files on the loop (the store's executor does) or change topic
configs (``admin``).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.errors import ProcessorError

__all__ = ["MaintenanceProcessor"]

log = logging.getLogger(__name__)

MAX_QUERY_CQ_UNITS = 10_000
"""Units one queryCq may ask for (Java has no bound; a reply must stay small)."""


def _field(request: RemotingCommand, name: str, *, required: bool = True) -> str:
    value = (request.ext_fields or {}).get(name)
    if value is None or (required and not str(value).strip()):
        if required:
            raise ProcessorError(ResponseCode.SYSTEM_ERROR, f"the header field {name} is missing")
        return ""
    return str(value).strip()


def _int_field(request: RemotingCommand, name: str) -> int:
    text = _field(request, name)
    try:
        return int(text)
    except ValueError:
        raise ProcessorError(
            ResponseCode.SYSTEM_ERROR, f"the header field {name} is not an integer: {text!r}"
        ) from None


class MaintenanceProcessor:
    """The five maintenance codes for one broker (see the module docstring).

    Args:
        ctx: the broker's parts.
    """

    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx

    def register(self, table: ProcessorTable) -> None:
        """Route codes 306, 316, 329, 314 and 321 here."""
        table.register(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, self.clean_expired_consume_queue)
        table.register(RequestCode.CLEAN_UNUSED_TOPIC, self.clean_unused_topic)
        table.register(RequestCode.DELETE_EXPIRED_COMMITLOG, self.delete_expired_commit_log)
        table.register(RequestCode.CLONE_GROUP_OFFSET, self.clone_group_offset)
        table.register(RequestCode.QUERY_CONSUME_QUEUE, self.query_consume_queue)

    async def clean_expired_consume_queue(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """CLEAN_EXPIRED_CONSUMEQUEUE: drop queues wholly below the CommitLog's start."""
        log.warning("cleanExpiredConsumeQueue called by %s", conn.remote_address)
        removed = await self._ctx.store.clean_expired_consume_queue()
        log.info("cleanExpiredConsumeQueue removed queues=%d", removed)
        return request.response_to(ResponseCode.SUCCESS)

    async def clean_unused_topic(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """CLEAN_UNUSED_TOPIC: drop the queues of topics no longer configured."""
        log.warning("cleanUnusedTopic called by %s", conn.remote_address)
        configured = set(self._ctx.topics.topic_config_table())
        removed = await self._ctx.store.clean_unused_topic(configured)
        log.info("cleanUnusedTopic removed topics=%d", removed)
        return request.response_to(ResponseCode.SUCCESS)

    def delete_expired_commit_log(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """DELETE_EXPIRED_COMMITLOG: a manual delete (``executeDeleteFilesManually``)."""
        log.warning("deleteExpiredCommitLog called by %s", conn.remote_address)
        self._ctx.store.cleanup_service.trigger_delete()
        return request.response_to(ResponseCode.SUCCESS)

    def clone_group_offset(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """CLONE_GROUP_OFFSET: ``srcGroup``'s offsets become ``destGroup``'s."""
        src, dest = _field(request, "srcGroup"), _field(request, "destGroup")
        topic = _field(request, "topic", required=False)
        offline = _field(request, "offline", required=False).lower() == "true"
        offsets = self._ctx.offsets
        topics = {topic} if topic else offsets.which_topic_by_consumer(src)
        cloned = []
        for name in sorted(topics):
            if not offline and self._ctx.topics.select_topic_config(name) is None:
                log.warning("cloneGroupOffset: topic %s has no config here; skipped", name)
                continue
            offsets.clone_offset(src, dest, name)
            cloned.append(name)
        log.info(
            "cloneGroupOffset by %s src=%s dest=%s topics=%s",
            conn.remote_address, src, dest, cloned,
        )  # fmt: skip
        return request.response_to(ResponseCode.SUCCESS)

    def query_consume_queue(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """QUERY_CONSUME_QUEUE: units of one queue, as ``QueryConsumeQueueResponseBody``."""
        topic, queue_id = _field(request, "topic"), _int_field(request, "queueId")
        index, count = _int_field(request, "index"), _int_field(request, "count")
        group = _field(request, "consumerGroup", required=False)
        if not 0 < count <= MAX_QUERY_CQ_UNITS:
            raise ProcessorError(
                ResponseCode.SYSTEM_ERROR, f"count must be 1..{MAX_QUERY_CQ_UNITS}, not {count}"
            )
        queue = self._ctx.store.cq_table.get(topic, queue_id)
        if queue is None:
            raise ProcessorError(ResponseCode.SYSTEM_ERROR, f"{topic}-{queue_id} not exist!")
        subscription = self._ctx.consumers.find_subscription(group, topic) if group else None
        body: dict[str, Any] = {
            "maxQueueIndex": queue.max_offset,
            "minQueueIndex": queue.min_offset,
            "queueData": [],
        }
        if subscription is not None:
            body["subscriptionData"] = subscription.to_json_dict()
        units = queue.get_units(index, count)
        if units is not None:
            with units:
                for unit in units.units:
                    tags_code = int(unit["tags"])
                    body["queueData"].append({
                        "physicOffset": int(unit["offset"]),
                        "physicSize": int(unit["size"]),
                        "tagsCode": tags_code,
                        "eval": subscription.matches_tags_code(tags_code)
                        if subscription is not None else False,
                    })  # fmt: skip
        return request.response_to(ResponseCode.SUCCESS, body=json.dumps(body).encode())
