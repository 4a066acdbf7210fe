"""PullAPIWrapper: which broker node each queue is pulled from, and what a pull found.

Owns (Java's ``PullAPIWrapper`` 4.9.8):

- ``pull_from_which_node``: per queue, the broker id the last pull reply suggested
  (``suggestWhichBrokerId``: 0 = master; a slave id when the master finds the
  consumer lagging beyond ``accessMessageInMemoryMaxRatio`` of memory, or when the
  master is unreadable), recorded by ``update_pull_from_which_node`` after every
  pull and read back by ``recalculate_pull_from_which_node`` before the next one,
  unless ``connect_broker_by_user`` pins every pull to ``default_broker_id``;
- ``pull_kernel``: the address (``ClientInstance.find_broker_address_in_subscribe``
  with ``only_this_broker`` false, so a missing master falls back to a slave, after
  one route refresh if the broker is unknown), the request header (the commit-offset
  bit cleared when the node is a slave, which cannot store offsets), the request;
- ``process_pull_result``: records the suggestion, decodes the records (bodies
  inflated when compressed), filters them by tag again on the client (the broker
  filtered by tag *hash*, which can collide), sets the MIN_OFFSET / MAX_OFFSET
  properties and, for prepared transaction messages, the transaction id.

Must not: choose offsets, hold messages, or retry.
"""

from __future__ import annotations

import logging
from typing import TypeVar

from aiorocketmq.client.errors import BrokerNotFoundError, MQBrokerError
from aiorocketmq.client.instance import ClientInstance, FindBrokerResult
from aiorocketmq.client.results import PullResult, PullStatus
from aiorocketmq.common.compression import decompress_body
from aiorocketmq.common.constants import MASTER_ID
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import MessageExt, MessageQueue
from aiorocketmq.common.message_codec import decode_pull_body
from aiorocketmq.common.properties import MessageConst
from aiorocketmq.common.protocol_bodies import SubscriptionData
from aiorocketmq.common.pulled_message import pulled_messages
from aiorocketmq.remoting.broker_headers import PullMessageRequestHeader, PullSysFlag
from aiorocketmq.remoting.codes import ResponseCode

__all__ = ["PullAPIWrapper", "build_pull_sys_flag", "decode_messages", "filter_by_tags"]

log = logging.getLogger(__name__)

_C = MessageConst
_M = TypeVar("_M", bound=MessageExt)


def build_pull_sys_flag(
    commit_offset: bool, suspend: bool, subscription: bool, class_filter: bool = False
) -> int:
    """``PullSysFlag.buildSysFlag``."""
    flag = PullSysFlag.COMMIT_OFFSET if commit_offset else 0
    flag |= PullSysFlag.SUSPEND if suspend else 0
    flag |= PullSysFlag.SUBSCRIPTION if subscription else 0
    return flag | (PullSysFlag.CLASS_FILTER if class_filter else 0)


def decode_messages(body: bytes | bytearray | memoryview) -> list[MessageExt]:
    """Decode a pull body into messages with inflated bodies (Java's ``MessageDecoder.decodes``).

    Raises:
        RemoteProtocolError: the body is not whole records, or a body does not inflate.
    """
    out: list[MessageExt] = []
    for view in decode_pull_body(body):
        msg = view.to_message_ext(copy_body=True)
        msg.body = decompress_body(msg.body, msg.sys_flag)
        out.append(msg)
    return out


def filter_by_tags(msgs: list[_M], subscription: SubscriptionData) -> list[_M]:
    """Keep messages whose tag is subscribed; all of them for ``*`` or class-filter mode.

    A message without a tag never matches a tag subscription (as Java).
    """
    if not subscription.tags_set or subscription.class_filter_mode:
        return msgs
    tags = set(subscription.tags_set)
    return [msg for msg in msgs if msg.tags is not None and msg.tags in tags]


class PullAPIWrapper:
    """Pulls for one consumer group (see the module docstring).

    Args:
        instance: the client instance (routes, broker addresses, requests).
        consumer_group: the group pulls are made for.
        unit_mode: the consumer's unit mode (reserved; sent nowhere in 4.9 pulls).
    """

    def __init__(
        self, instance: ClientInstance, consumer_group: str, unit_mode: bool = False
    ) -> None:
        self.instance = instance
        self.consumer_group = consumer_group
        self.unit_mode = unit_mode
        self.pull_from_which_node: dict[MessageQueue, int] = {}
        self.connect_broker_by_user = False
        self.default_broker_id = MASTER_ID

    # -- pullFromWhichNodeTable ---------------------------------------------------------

    def update_pull_from_which_node(self, mq: MessageQueue, broker_id: int) -> None:
        """Remember the broker id the last reply for ``mq`` suggested."""
        self.pull_from_which_node[mq] = broker_id

    def recalculate_pull_from_which_node(self, mq: MessageQueue) -> int:
        """The broker id to pull ``mq`` from next: the user's pin, the suggestion, or master."""
        if self.connect_broker_by_user:
            return self.default_broker_id
        return self.pull_from_which_node.get(mq, MASTER_ID)

    # -- pulling ------------------------------------------------------------------------

    async def find_broker(self, mq: MessageQueue) -> FindBrokerResult:
        """Where ``mq`` is pulled from now (one route refresh if the broker is unknown).

        Raises:
            BrokerNotFoundError: no address of the broker is known even after a refresh.
        """
        node = self.recalculate_pull_from_which_node(mq)
        found = self.instance.find_broker_address_in_subscribe(mq.broker_name, node, False)
        if found is None:
            await self.instance.update_topic_route(mq.topic)
            node = self.recalculate_pull_from_which_node(mq)
            found = self.instance.find_broker_address_in_subscribe(mq.broker_name, node, False)
        if found is None:
            raise BrokerNotFoundError(mq.broker_name)
        return found

    async def pull_kernel(
        self,
        mq: MessageQueue,
        subscription: SubscriptionData,
        offset: int,
        max_nums: int,
        *,
        sys_flag: int,
        commit_offset: int = 0,
        suspend_timeout_ms: int = 0,
        timeout_ms: int,
    ) -> PullResult:
        """One PULL_MESSAGE for ``mq`` from ``offset``; the result is not yet processed.

        Raises:
            BrokerNotFoundError: see ``find_broker``.
            MQBrokerError: an error reply. MQRemotingError: a transport failure.
        """
        found = await self.find_broker(mq)
        if found.slave:
            sys_flag = PullSysFlag.clear_commit_offset(sys_flag)
        header = PullMessageRequestHeader(
            consumer_group=self.consumer_group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=sys_flag,
            commit_offset=commit_offset,
            suspend_timeout_millis=suspend_timeout_ms,
            sub_version=subscription.sub_version,
            subscription=subscription.sub_string,
            expression_type=subscription.expression_type,
        )
        return await self.instance.api.pull_message(found.address, header, timeout_ms)

    def process_pull_result(
        self, mq: MessageQueue, result: PullResult, subscription: SubscriptionData
    ) -> PullResult:
        """Record the suggestion; for FOUND, decode, re-filter by tag and annotate.

        Raises:
            MQBrokerError: the FOUND body is malformed (SYSTEM_ERROR, not retriable).
        """
        self.update_pull_from_which_node(mq, result.suggest_which_broker_id)
        if result.status is PullStatus.FOUND and result.message_binary is not None:
            try:
                msgs = pulled_messages(
                    result.message_binary,
                    min_offset=result.min_offset,
                    max_offset=result.max_offset,
                )
            except RemoteProtocolError as exc:
                raise MQBrokerError(
                    ResponseCode.SYSTEM_ERROR, f"malformed pull body: {exc}", retriable=False
                ) from exc
            kept = filter_by_tags(msgs, subscription)
            for msg in kept:
                if msg.is_prepared:
                    msg.transaction_id = msg.uniq_key
            result.msg_found_list = list(kept)
        result.message_binary = None
        return result
