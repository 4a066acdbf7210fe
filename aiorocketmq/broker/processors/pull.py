"""PULL_MESSAGE (11): RocketMQ 4.9.8's ``PullMessageProcessor``.

Owns: the checks a pull goes through (broker and topic read permission,
subscription group lookup / auto-create, queue id range, the subscription from the
request or from the heartbeat registry), the store read with tag-code filtering,
the reply (code from ``status_map``, the four header fields always present as
strings, ``suggestWhichBrokerId`` as ``specs/remoting.md`` §8 and store.md §9.2
describe, slave offset rules), the piggybacked offset commit, and long polling:
a would-be PULL_NOT_FOUND with the suspend bit is held in ``ctx.hold`` and its
reply awaited; the hold service re-runs it through ``rerun`` (no second suspend).

Zero copy: a FOUND reply's body is ``BodyParts`` over the held CommitLog records
(``GetMessageResult.wire_views``), whose release is the result's ``release``; the
connection that writes the reply calls it once the transport let go of the
views (RocketMQ's ``ManyMessageTransfer``). Every other outcome releases the
result here, before returning.

Must not: decide when held pulls wake (``long_polling``), parse heartbeats
(``client_manage``), or keep any state of its own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import cast

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.long_polling import HeldPull, HoldLimitExceededError, PullReply
from aiorocketmq.broker.status_map import pull_response_code
from aiorocketmq.common.constants import is_readable
from aiorocketmq.common.protocol_bodies import (
    EXPRESSION_TYPE_TAG,
    MessageModel,
    SubscriptionData,
    build_subscription_data,
)
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.remoting.broker_headers import PullMessageRequestHeader, PullMessageResponseHeader
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import BodyParts, RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.store.results import GetMessageResult

__all__ = ["PullProcessor", "suggest_broker_id"]

log = logging.getLogger(__name__)

#: Java's ``FAQUrl`` page and ``suggestTodo`` wording.
_FAQ_URL = "http://rocketmq.apache.org/docs/faq/"
_SUGGEST_TODO = f"\nSee {_FAQ_URL} for further details."
MASTER_ID = 0


@dataclass(slots=True)
class _Checked:
    """What the checks found for one pull."""

    group: SubscriptionGroupConfig
    subscription: SubscriptionData


def suggest_broker_id(
    *,
    suggest_pulling_from_slave: bool,
    slave_read_enable: bool,
    group: SubscriptionGroupConfig,
) -> int:
    """``suggestWhichBrokerId`` before the slave offset rule (Java's two blocks).

    Java first sets it from ``isSuggestPullingFromSlave`` and, on a slave without
    ``slaveReadEnable``, to 0; the ``slaveReadEnable`` block right after overwrites
    both, so only that block decides.
    """
    if not slave_read_enable:
        return MASTER_ID
    if suggest_pulling_from_slave:
        return group.which_broker_when_consume_slowly
    return group.broker_id


class PullProcessor:
    """PULL_MESSAGE with long polling."""

    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx

    def register(self, table: ProcessorTable) -> None:
        """Route PULL_MESSAGE here."""
        table.register(RequestCode.PULL_MESSAGE, self.handle)

    async def handle(self, conn: RemotingConnection, request: RemotingCommand) -> PullReply:
        """The network entry: suspension allowed."""
        return await self.process(conn, request, allow_suspend=True)

    async def rerun(self, held: HeldPull) -> PullReply:
        """The hold service's re-run of a held pull: never suspends again."""
        conn = cast(RemotingConnection, held.channel)
        reply = await self.process(conn, held.request, allow_suspend=False)
        if held.future.done() and reply is not None and reply.body_parts is not None:
            # The waiting pull gave up (its connection closed): the hold service
            # drops this reply unwritten, so its records go back now. No await
            # separates this check from the hold service settling the future.
            reply.body_parts.release()
        return reply

    async def process(
        self, conn: RemotingConnection, request: RemotingCommand, *, allow_suspend: bool
    ) -> PullReply:
        """``processRequest(channel, request, brokerAllowSuspend)``."""
        header = PullMessageRequestHeader.from_ext_fields(request.ext_fields)
        checked = self._check(conn, request, header)
        if isinstance(checked, RemotingCommand):
            return checked
        ctx = self._ctx
        sub = checked.subscription
        tag_codes = None if sub.matches_all else sub.code_set
        # What the pull reads that is not in memory is read in a thread first: its
        # page faults would wait for the disk on the loop (store/read_ahead.py).
        read_ahead = ctx.store.read_ahead
        pending = read_ahead.fault_in_units(
            header.topic, header.queue_id, header.queue_offset, header.max_msg_nums
        )
        if pending is not None:
            await pending
        result = ctx.store.get_message(
            header.consumer_group,
            header.topic,
            header.queue_id,
            header.queue_offset,
            header.max_msg_nums,
            tag_codes=tag_codes,
        )
        if result is None:
            self._commit(conn, header, allow_suspend)
            return request.response_to(ResponseCode.SYSTEM_ERROR, "store getMessage return null")
        try:
            pending = read_ahead.fault_in(result)
            if pending is not None:
                await pending
            reply = self._reply(request, header, checked.group, result)
        except BaseException:
            result.release()
            raise
        if reply.body_parts is None:
            result.release()  # nothing of it goes on the wire
        # else: the writer of the reply releases it once the transport let go.
        suspend = (
            reply.code == ResponseCode.PULL_NOT_FOUND
            and allow_suspend
            and header.has_suspend
            and ctx.hold is not None
        )
        self._commit(conn, header, allow_suspend)
        if not suspend:
            return reply
        return await self._suspend(conn, request, header, tag_codes)

    def _commit(
        self, conn: RemotingConnection, header: PullMessageRequestHeader, allow_suspend: bool
    ) -> None:
        if allow_suspend and header.has_commit_offset and not self._ctx.is_slave:
            self._ctx.offsets.commit_offset(
                conn.remote_address,
                header.consumer_group,
                header.topic,
                header.queue_id,
                header.commit_offset,
            )

    async def _suspend(
        self,
        conn: RemotingConnection,
        request: RemotingCommand,
        header: PullMessageRequestHeader,
        tag_codes: frozenset[int] | None,
    ) -> PullReply:
        hold = self._ctx.hold
        assert hold is not None
        try:
            held = hold.suspend(
                request,
                conn,
                topic=header.topic,
                queue_id=header.queue_id,
                pull_from_offset=header.queue_offset,
                timeout_ms=hold.hold_time_ms(header.suspend_timeout_millis),
                tag_codes=tag_codes,
                context=header,
            )
        except HoldLimitExceededError as exc:
            return request.response_to(ResponseCode.SYSTEM_BUSY, str(exc))
        return await held.future

    def _reply(
        self,
        request: RemotingCommand,
        header: PullMessageRequestHeader,
        group: SubscriptionGroupConfig,
        result: GetMessageResult,
    ) -> RemotingCommand:
        """Code, remark and the four fields from the store's answer."""
        ctx = self._ctx
        code = pull_response_code(result.status, header.queue_offset)
        suggest = suggest_broker_id(
            suggest_pulling_from_slave=result.suggest_pulling_from_slave,
            slave_read_enable=ctx.config.slave_read_enable,
            group=group,
        )
        if code == ResponseCode.PULL_OFFSET_MOVED:
            if ctx.is_slave and not ctx.store_config.offset_check_in_slave:
                suggest = group.broker_id
                code = ResponseCode.PULL_RETRY_IMMEDIATELY
            else:
                log.warning(
                    "PULL_OFFSET_MOVED: topic=%s group=%s queueId=%s offset=%s -> %s",
                    header.topic,
                    header.consumer_group,
                    header.queue_id,
                    header.queue_offset,
                    result.next_begin_offset,
                )
        fields = PullMessageResponseHeader(
            suggest_which_broker_id=suggest,
            next_begin_offset=result.next_begin_offset,
            min_offset=result.min_offset,
            max_offset=result.max_offset,
        ).to_ext_fields()
        if code != ResponseCode.SUCCESS or not result.message_count:
            return request.response_to(code, result.status.name, fields)
        body = BodyParts(result.wire_views(), result.release, result.message_count)
        return request.response_to(code, result.status.name, fields, body)

    def _check(
        self, conn: RemotingConnection, request: RemotingCommand, header: PullMessageRequestHeader
    ) -> _Checked | RemotingCommand:
        """The permission, group, topic and queue checks, then the subscription."""
        ctx = self._ctx
        fail = request.response_to
        if not is_readable(ctx.config.broker_permission):
            ip = ctx.config.broker_ip1 or ctx.store_host[0]
            return fail(
                ResponseCode.NO_PERMISSION, f"the broker[{ip}] pulling message is forbidden"
            )
        group = ctx.groups.find_subscription_group_config(header.consumer_group)
        if group is None:
            return fail(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{header.consumer_group}] does not exist, {_SUGGEST_TODO}",
            )
        if not group.consume_enable:
            return fail(
                ResponseCode.NO_PERMISSION,
                f"subscription group no permission, {header.consumer_group}",
            )
        topic = ctx.topics.select_topic_config(header.topic)
        if topic is None:
            return fail(
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{header.topic}] not exist, apply first please! {_SUGGEST_TODO}",
            )
        if not is_readable(topic.perm):
            return fail(
                ResponseCode.NO_PERMISSION,
                f"the topic[{header.topic}] pulling message is forbidden",
            )
        if header.queue_id < 0 or header.queue_id >= topic.read_queue_nums:
            return fail(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                f"topicConfig.readQueueNums:[{topic.read_queue_nums}] "
                f"consumer:[{conn.remote_address}]",
            )
        sub = self._subscription(request, header, group)
        if isinstance(sub, RemotingCommand):
            return sub
        if sub.expression_type != EXPRESSION_TYPE_TAG and not ctx.config.enable_property_filter:
            return fail(
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {sub.expression_type}",
            )
        return _Checked(group, sub)

    def _subscription(
        self,
        request: RemotingCommand,
        header: PullMessageRequestHeader,
        group: SubscriptionGroupConfig,
    ) -> SubscriptionData | RemotingCommand:
        """From the request (subscription bit; C++ pull consumers never heartbeat)
        or from the consumer registry."""
        fail = request.response_to
        if header.has_subscription:
            try:
                sub = build_subscription_data(header.topic, header.subscription, header.sub_version)
            except Exception:
                log.warning("parse the consumer's subscription[%s] failed", header.subscription)
                return fail(
                    ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                    "parse the consumer's subscription failed",
                )
            if header.expression_type:
                sub.expression_type = header.expression_type
            return sub
        info = self._ctx.consumers.get_group(header.consumer_group)
        if info is None:
            return fail(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's group info not exist{_SUGGEST_TODO}",
            )
        if not group.consume_broadcast_enable and info.message_model is MessageModel.BROADCASTING:
            return fail(
                ResponseCode.NO_PERMISSION,
                f"the consumer group[{header.consumer_group}] can not consume by broadcast way",
            )
        found = info.subscriptions.get(header.topic)
        if found is None:
            return fail(
                ResponseCode.SUBSCRIPTION_NOT_EXIST,
                f"the consumer's subscription not exist{_SUGGEST_TODO}",
            )
        if found.sub_version < header.sub_version:
            return fail(
                ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
            )
        return found
