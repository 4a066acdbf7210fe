"""The revive log: where POP checkpoints and acks are written and read back.

Owns: the system topic ``rmq_sys_REVIVE_LOG_<cluster>`` (one queue, created at
start), writing CK and ack records into it through the store (so they are as
durable as any message: the CommitLog, its flush and its replication), reading
them back at start from the revive position, and that position itself: the
offset of group ``CID_RMQ_SYS_REVIVE_GROUP`` on the revive topic, kept in
``consumerOffset.json`` and never moved past the record of a CK still in flight.

Must not: decide what a record means for the in-flight state (``pop`` does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any, Final

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.stored_copy import join_properties
from aiorocketmq.common.constants import PERM_READ, PERM_WRITE
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message_codec import decode_record
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.common.tag_hash import tags_code
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.proxy.pop_records import decode_record_body
from aiorocketmq.proxy.status import ProxyError
from aiorocketmq.proxy.v2 import definition_pb2 as pb
from aiorocketmq.store.inner_message import MessageExtBrokerInner

__all__ = ["REVIVE_GROUP", "ReviveLog", "revive_topic_name"]

log = logging.getLogger(__name__)

REVIVE_GROUP: Final = "CID_RMQ_SYS_REVIVE_GROUP"
_READ_BATCH: Final = 256
_CLIENT_HOST: Final = "proxy"


def revive_topic_name(cluster: str) -> str:
    """RocketMQ 5's ``PopAckConstants.buildClusterReviveTopic``."""
    return f"rmq_sys_REVIVE_LOG_{cluster}"


class ReviveLog:
    """Writes and replays revive records of one broker.

    Args:
        ctx: the broker's parts (store, topics, offsets).
    """

    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx
        self.topic = revive_topic_name(ctx.config.broker_cluster_name)

    def ensure_topic(self) -> None:
        """Create the revive topic (1 queue, RW) unless it exists."""
        if self._ctx.topics.select_topic_config(self.topic) is None:
            self._ctx.topics.update_topic_config(
                TopicConfig(self.topic, 1, 1, PERM_READ | PERM_WRITE)
            )

    async def write(self, tag: str, body: bytes) -> int:
        """Put one record; its queue offset in the revive topic.

        Raises:
            ProxyError: the store refused it (the caller's request fails with it).
        """
        ctx = self._ctx
        props = {MessageConst.PROPERTY_TAGS: tag}
        msg = MessageExtBrokerInner(
            topic=self.topic,
            queue_id=0,
            body=body,
            properties=props,
            properties_string=join_properties(props),
            born_timestamp=ctx.clock.now_ms(),
            born_host=ctx.store_host,
            store_host=ctx.store_host,
            tags_code=tags_code(tag),
        )
        result = await ctx.store.put_message(msg)
        if not result.ok:
            raise ProxyError(
                pb.Code.INTERNAL_SERVER_ERROR, f"pop state not stored: {result.status.name}"
            )
        return result.queue_offset

    @property
    def position(self) -> int:
        """Where a replay starts: the committed revive position, else the queue's start."""
        ctx = self._ctx
        committed = ctx.offsets.query_offset(REVIVE_GROUP, self.topic, 0)
        return committed if committed >= 0 else ctx.store.get_min_offset_in_queue(self.topic, 0)

    def commit(self, position: int) -> None:
        """Move the revive position (persisted with the consumer offsets)."""
        self._ctx.offsets.commit_offset(_CLIENT_HOST, REVIVE_GROUP, self.topic, 0, position)

    @property
    def end(self) -> int:
        """The revive topic's next queue offset."""
        return self._ctx.store.get_max_offset_in_queue(self.topic, 0)

    async def replay(self, apply: Callable[[str, dict[str, Any], int], None]) -> int:
        """Call ``apply(tag, doc, queue_offset)`` for every record from the revive
        position on, in order, once the store dispatched all it recovered; how many."""
        store = self._ctx.store
        await store.dispatcher.wait_dispatched(store.max_phy_offset)
        count = 0
        for tag, doc, offset in self._records(self.position, self.end):
            apply(tag, doc, offset)
            count += 1
        return count

    def _records(self, start: int, end: int) -> Iterator[tuple[str, dict[str, Any], int]]:
        store = self._ctx.store
        pos = start
        while pos < end:
            result = store.get_message(REVIVE_GROUP, self.topic, 0, pos, _READ_BATCH)
            if result is None:
                return
            try:
                decoded = []
                for view, offset in zip(result.messages, result.message_queue_offsets, strict=True):
                    try:
                        record = decode_record(view)
                    except RemoteProtocolError as exc:
                        log.error("revive log: bad record at offset %d: %s", offset, exc)
                        continue
                    doc = decode_record_body(record.body)
                    if doc is None:
                        log.error("revive log: not a revive record at offset %d", offset)
                        continue
                    decoded.append((record.tags or "", doc, offset))
            finally:
                result.release()
            yield from decoded
            if result.next_begin_offset <= pos:
                return
            pos = result.next_begin_offset
