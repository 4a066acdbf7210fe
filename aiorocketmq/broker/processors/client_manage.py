"""HEART_BEAT (34), UNREGISTER_CLIENT (35) and GET_CONSUMER_LIST_BY_GROUP (38).

Owns: RocketMQ 4.9.8's ``ClientManageProcessor`` (heartbeats from both client
styles: per consumer group the subscription group config (auto-created), the
``%RETRY%<group>`` topic, registration honouring the group's
``notifyConsumerIdsChangedEnable``; producer groups registered), the consumer list
of ``ConsumerManageProcessor``, and ``ConsumerIdsChangedNotifier``, the
``ConsumerManager`` listener that sends NOTIFY_CONSUMER_IDS_CHANGED (40, oneway)
to every channel of a changed group.

Must not: keep client state (``client_registry`` does) or pull messages.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from aiorocketmq.broker.client_registry import (
    Channel,
    ClientChannelInfo,
    ConsumerGroupEvent,
    notify_consumer_ids_changed_request,
)
from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.common.constants import PERM_READ, PERM_WRITE, retry_topic
from aiorocketmq.common.protocol_bodies import ConsumerData, ConsumerListBody, HeartbeatData
from aiorocketmq.remoting.broker_headers import (
    GetConsumerListByGroupRequestHeader,
    UnregisterClientRequestHeader,
)
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.server import RemotingServer

__all__ = ["ClientManageProcessor", "ConsumerIdsChangedNotifier"]

log = logging.getLogger(__name__)

#: ``TopicSysFlag.buildSysFlag(false, true)``: a unit-mode consumer's retry topic.
_FLAG_UNIT_SUB = 0x2

#: Called with a consumer group a heartbeat changed (for logs / the controller).
ChangedCallback = Callable[[str], None]


class ClientManageProcessor:
    """Client heartbeats, unregistration and the consumer list."""

    def __init__(self, ctx: BrokerContext, notify: ChangedCallback | None = None) -> None:
        self._ctx = ctx
        self._notify = notify

    def register(self, table: ProcessorTable) -> None:
        """Route codes 34, 35 and 38 here."""
        table.register(RequestCode.HEART_BEAT, self.heart_beat)
        table.register(RequestCode.UNREGISTER_CLIENT, self.unregister_client)
        table.register(RequestCode.GET_CONSUMER_LIST_BY_GROUP, self.get_consumer_list_by_group)

    def heart_beat(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Register every consumer and producer group of the heartbeat; SUCCESS."""
        heartbeat = HeartbeatData.decode(request.body)
        for data in heartbeat.consumers:
            info = self._channel_info(conn, heartbeat.client_id, request)
            notify = self._prepare_consumer_group(data)
            if self._ctx.consumers.register(info, data, notify=notify):
                log.info("consumer group %s changed by %s", data.group_name, heartbeat.client_id)
                if self._notify is not None:
                    self._notify(data.group_name)
        for producer in heartbeat.producers:
            info = self._channel_info(conn, heartbeat.client_id, request)
            self._ctx.producers.register(producer.group_name, info)
        return request.response_to(ResponseCode.SUCCESS)

    def _prepare_consumer_group(self, data: ConsumerData) -> bool:
        """Group config (auto-create) and retry topic; whether to notify changes."""
        group = self._ctx.groups.find_subscription_group_config(data.group_name)
        if group is None:
            return True
        self._ctx.topics.create_topic_in_send_message_back_method(
            retry_topic(data.group_name),
            group.retry_queue_nums,
            PERM_WRITE | PERM_READ,
            _FLAG_UNIT_SUB if data.unit_mode else 0,
        )
        return group.notify_consumer_ids_changed_enable

    @staticmethod
    def _channel_info(
        conn: RemotingConnection, client_id: str, request: RemotingCommand
    ) -> ClientChannelInfo:
        return ClientChannelInfo(conn, client_id, request.language, request.version)

    def unregister_client(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """Drop the channel from the named producer and/or consumer group; SUCCESS."""
        header = UnregisterClientRequestHeader.from_ext_fields(request.ext_fields)
        if header.producer_group is not None:
            self._ctx.producers.unregister(header.producer_group, conn)
        if header.consumer_group is not None:
            group = self._ctx.groups.find_subscription_group_config(header.consumer_group)
            notify = group.notify_consumer_ids_changed_enable if group is not None else True
            self._ctx.consumers.unregister(header.consumer_group, conn, notify=notify)
        return request.response_to(ResponseCode.SUCCESS)

    def get_consumer_list_by_group(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """The client ids of a group; SYSTEM_ERROR when it has none."""
        header = GetConsumerListByGroupRequestHeader.from_ext_fields(request.ext_fields)
        ids = self._ctx.consumers.consumer_ids(header.consumer_group)
        if ids:
            body = ConsumerListBody(ids).encode()
            return request.response_to(ResponseCode.SUCCESS, body=body)
        log.warning("no consumer of %s (asked by %s)", header.consumer_group, conn.remote_address)
        return request.response_to(
            ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {header.consumer_group}"
        )


class ConsumerIdsChangedNotifier:
    """``DefaultConsumerIdsChangeListener``: NOTIFY_CONSUMER_IDS_CHANGED on CHANGE.

    Install it with ``ConsumerManager.set_listener``; it sends one oneway request per
    channel of the group through ``RemotingServer.invoke_oneway`` (failures logged).
    """

    def __init__(self, server: RemotingServer, *, enabled: bool = True) -> None:
        self._server = server
        self.enabled = enabled
        self._tasks: set[asyncio.Task[None]] = set()

    def __call__(self, event: ConsumerGroupEvent, group: str, channels: list[Channel]) -> None:
        """The listener: on CHANGE, notify every channel of ``group``."""
        if event is not ConsumerGroupEvent.CHANGE or not self.enabled:
            return
        loop = asyncio.get_running_loop()
        for channel in channels:
            if not isinstance(channel, RemotingConnection) or channel.is_closed:
                continue
            task = loop.create_task(self._send(channel, group))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, conn: RemotingConnection, group: str) -> None:
        try:
            await self._server.invoke_oneway(conn, notify_consumer_ids_changed_request(group))
        except Exception as exc:
            log.warning(
                "notifyConsumerIdsChanged of %s to %s failed: %s", group, conn.remote_address, exc
            )

    async def wait_sent(self) -> None:
        """Wait for notifications in flight (tests, shutdown)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
