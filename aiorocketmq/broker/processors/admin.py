"""Topic and group administration, and the config dumps, of RocketMQ 4.9.8's AdminBrokerProcessor.

Owns: UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215),
GET_ALL_TOPIC_CONFIG (21), UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200),
DELETE_SUBSCRIPTIONGROUP (207), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201),
GET_ALL_CONSUMER_OFFSET (43) and GET_ALL_DELAY_OFFSET (45): the checks Java makes,
the manager calls, and the bodies in fastjson's shapes.

Must not: register with name servers (a topic change calls the topic manager's
change listeners; the controller re-registers), write files on the loop (the
managers persist in the executor), or answer the stats codes (``admin_stats``).

Java's rules kept:

* On a SLAVE the four changing codes answer SYSTEM_ERROR "Can't modify topic or
  subscription group from slave broker, please execute it from master broker."
* A topic name is checked blank / characters / length (``TopicValidator``), then
  refused if it is a system topic (including this broker's cluster- and
  broker-name topics); both answer SYSTEM_ERROR with Java's remark.
* A new topic takes the header's queue numbers, perm, filter type and sysFlag;
  ``order`` stays false (Java ignores the header's ``order`` here).
* DELETE_TOPIC_IN_BROKER removes the config, then destroys the consume queues of
  every topic no longer configured (``cleanUnusedTopic``); consumer offsets stay,
  as in 4.9.8.
* UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with no body is a no-op SUCCESS (Java decodes
  null); DELETE_SUBSCRIPTIONGROUP of an unknown group is SUCCESS too (Java logs
  and answers SUCCESS), and drops the group's offsets when ``removeOffset``.
* GET_ALL_DELAY_OFFSET without a schedule service answers ``{"offsetTable":{}}``,
  what a 4.9.8 broker whose ScheduleMessageService has no level yet sends.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.common.admin_bodies import DelayOffsetSerializeWrapper
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.subscription_group import SubscriptionGroupConfig
from aiorocketmq.common.topic_attributes import alter_attributes
from aiorocketmq.common.topic_config import TopicConfig, TopicFilterType
from aiorocketmq.common.validators import validate_topic
from aiorocketmq.remoting.broker_admin_headers import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
)
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.errors import ProcessorError

__all__ = ["SLAVE_REMARK", "AdminProcessor", "DelayOffsetSource"]

log = logging.getLogger(__name__)

SLAVE_REMARK: Final = (
    "Can't modify topic or subscription group from slave broker, "
    "please execute it from master broker."
)
_FILTER_TYPES: Final[tuple[TopicFilterType, ...]] = ("SINGLE_TAG", "MULTI_TAG")

#: Returns ``delayOffset.json``'s content (the schedule service's ``encode()``).
DelayOffsetSource = Callable[[], str]


class AdminProcessor:
    """Topic/group changes and config dumps for one broker.

    Args:
        ctx: the broker's parts.
        delay_offsets: the schedule service's ``encode()``; None until a broker
            has one (the reply is then Java's empty table).
    """

    def __init__(self, ctx: BrokerContext, *, delay_offsets: DelayOffsetSource | None = None):
        self._ctx = ctx
        self._delay_offsets = delay_offsets
        # Java's deleteTopic is synchronized; ours awaits file deletion, so two
        # deletes must not interleave over the same queues.
        self._delete_lock = asyncio.Lock()

    def register(self, table: ProcessorTable) -> None:
        """Route the eight codes here."""
        table.register(RequestCode.UPDATE_AND_CREATE_TOPIC, self.update_and_create_topic)
        table.register(RequestCode.DELETE_TOPIC_IN_BROKER, self.delete_topic)
        table.register(RequestCode.GET_ALL_TOPIC_CONFIG, self.get_all_topic_config)
        table.register(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
            self.update_and_create_subscription_group,
        )
        table.register(RequestCode.DELETE_SUBSCRIPTIONGROUP, self.delete_subscription_group)
        table.register(
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self.get_all_subscription_group
        )
        table.register(RequestCode.GET_ALL_CONSUMER_OFFSET, self.get_all_consumer_offset)
        table.register(RequestCode.GET_ALL_DELAY_OFFSET, self.get_all_delay_offset)

    # -- checks ------------------------------------------------------------------------

    def _check_master(self) -> None:
        if self._ctx.is_slave:
            raise ProcessorError(ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)

    def _check_topic(self, topic: str) -> None:
        remark = validate_topic(topic)
        if remark is None and self._ctx.topics.is_system_topic(topic):
            remark = f"The topic[{topic}] is conflict with system topic."
        if remark is not None:
            raise ProcessorError(ResponseCode.SYSTEM_ERROR, remark)

    # -- topics --------------------------------------------------------------------------

    def update_and_create_topic(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_AND_CREATE_TOPIC: create or replace one topic's config."""
        self._check_master()
        header = CreateTopicRequestHeader.from_ext_fields(request.ext_fields)
        log.info("updateAndCreateTopic called by %s topic=%s", conn.remote_address, header.topic)
        self._check_topic(header.topic)
        filter_type = header.topic_filter_type
        if filter_type not in _FILTER_TYPES:
            # Java's TopicFilterType.valueOf throws; its processor answers with the text.
            raise ProcessorError(
                ResponseCode.SYSTEM_ERROR,
                f"No enum constant org.apache.rocketmq.common.TopicFilterType.{filter_type}",
            )
        existing = self._ctx.topics.select_topic_config(header.topic)
        try:  # RocketMQ 5's attributes: changed by the request, else kept
            attributes = alter_attributes(
                existing is None,
                existing.attributes_map if existing is not None else {},
                header.attributes,
            )
        except ValueError as exc:
            raise ProcessorError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        config = TopicConfig(
            topic_name=header.topic,
            read_queue_nums=header.read_queue_nums,
            write_queue_nums=header.write_queue_nums,
            perm=header.perm,
            topic_filter_type=filter_type,
            topic_sys_flag=header.topic_sys_flag or 0,
            attributes=tuple(sorted(attributes.items())),
        )
        self._ctx.topics.update_topic_config(config)
        return request.response_to(ResponseCode.SUCCESS)

    async def delete_topic(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """DELETE_TOPIC_IN_BROKER: drop the config and the unconfigured topics' queues."""
        self._check_master()
        header = DeleteTopicRequestHeader.from_ext_fields(request.ext_fields)
        log.info("deleteTopic called by %s topic=%s", conn.remote_address, header.topic)
        self._check_topic(header.topic)
        async with self._delete_lock:
            topics = self._ctx.topics
            topics.delete_topic_config(header.topic)
            await self._ctx.store.clean_unused_topic(set(topics.topic_config_table()))
        return request.response_to(ResponseCode.SUCCESS)

    def get_all_topic_config(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_ALL_TOPIC_CONFIG: ``TopicConfigSerializeWrapper`` (the system topics at least)."""
        body = self._ctx.topics.encode().encode()
        return request.response_to(ResponseCode.SUCCESS, body=body)

    # -- subscription groups ----------------------------------------------------------------

    def update_and_create_subscription_group(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: body ``SubscriptionGroupConfig`` JSON."""
        self._check_master()
        log.info("updateAndCreateSubscriptionGroup called by %s", conn.remote_address)
        if not request.body:
            return request.response_to(ResponseCode.SUCCESS)
        try:
            config = SubscriptionGroupConfig.decode(request.body)
        except RemoteProtocolError as exc:
            raise ProcessorError(
                ResponseCode.SYSTEM_ERROR, f"bad SubscriptionGroupConfig body: {exc}"
            ) from None
        self._ctx.groups.update_subscription_group_config(config)
        return request.response_to(ResponseCode.SUCCESS)

    def delete_subscription_group(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """DELETE_SUBSCRIPTIONGROUP: drop the group (and its offsets when asked)."""
        self._check_master()
        header = DeleteSubscriptionGroupRequestHeader.from_ext_fields(request.ext_fields)
        log.info(
            "deleteSubscriptionGroup called by %s group=%s removeOffset=%s",
            conn.remote_address,
            header.group_name,
            header.remove_offset,
        )
        self._ctx.groups.delete_subscription_group_config(header.group_name)
        if header.remove_offset:
            self._ctx.offsets.remove_offset(header.group_name)
        return request.response_to(ResponseCode.SUCCESS)

    def get_all_subscription_group(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: ``SubscriptionGroupWrapper`` JSON."""
        body = self._ctx.groups.encode().encode()
        return request.response_to(ResponseCode.SUCCESS, body=body)

    # -- offset dumps ------------------------------------------------------------------------

    def get_all_consumer_offset(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_ALL_CONSUMER_OFFSET: ``ConsumerOffsetSerializeWrapper`` (bare queue ids)."""
        body = self._ctx.offsets.encode().encode()
        return request.response_to(ResponseCode.SUCCESS, body=body)

    def get_all_delay_offset(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_ALL_DELAY_OFFSET: ``delayOffset.json``'s content."""
        if self._delay_offsets is None:
            body = DelayOffsetSerializeWrapper().encode()
        else:
            text = self._delay_offsets()
            if not text:
                return request.response_to(
                    ResponseCode.SYSTEM_ERROR, "No delay offset in this broker"
                )
            body = text.encode()
        return request.response_to(ResponseCode.SUCCESS, body=body)
