"""Producer and consumer channels a broker knows, from heartbeats.

Owns: ``ProducerManager`` and ``ConsumerManager`` (RocketMQ's
``broker/client/{ProducerManager,ConsumerManager,ConsumerGroupInfo,ClientChannelInfo}``):
one ``ClientChannelInfo`` per connection and group, a consumer group's subscription
table and consume type/model/from-where, registration from a heartbeat (reporting
whether the group changed: a new channel, or a topic added or dropped), UNREGISTER_CLIENT,
removal everywhere when a connection closes, the idle scan (no heartbeat for 120 s;
clock injected), the ``(event, group, channels)`` change callback, the lookups the
processors and admin need, and ``notify_consumer_ids_changed_request`` (code 40,
oneway, JSON) that the broker sends to every channel of a changed group.

Must not: do I/O (sending the notifications is the caller's job; closing an idle
channel is a plain ``close()``), check subscription-group configs or create retry
topics (the heartbeat processor does), or trust a heartbeat's ``codeSet``
(``common.protocol_bodies`` recomputes it).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from aiorocketmq.common.clock import Clock
from aiorocketmq.common.protocol_bodies import (
    Connection,
    ConsumeFromWhere,
    ConsumerConnection,
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    ProducerConnection,
    SubscriptionData,
)
from aiorocketmq.remoting.broker_headers import NotifyConsumerIdsChangedRequestHeader
from aiorocketmq.remoting.codes import LanguageCode, RequestCode
from aiorocketmq.remoting.command import RPC_ONEWAY, RemotingCommand

__all__ = [
    "CHANNEL_EXPIRED_MS",
    "ChangeListener",
    "Channel",
    "ClientChannelInfo",
    "ConsumerGroupEvent",
    "ConsumerGroupInfo",
    "ConsumerManager",
    "ProducerManager",
    "notify_consumer_ids_changed_request",
    "register_heartbeat",
]

log = logging.getLogger(__name__)

#: A channel with no heartbeat for this long is closed by the scan (RocketMQ: 120 s).
CHANNEL_EXPIRED_MS = 120_000


class Channel(Hashable, Protocol):
    """What the registry needs of a connection (``RemotingConnection`` fits)."""

    @property
    def remote_address(self) -> str:
        """``host:port`` of the peer, for logs and admin listings."""
        ...

    def close(self) -> None:
        """Close the connection."""
        ...


class ConsumerGroupEvent(enum.Enum):
    """What happened to a consumer group (``ConsumerGroupEvent``)."""

    #: Channels joined or left, or topics were added/dropped: notify the group.
    CHANGE = "CHANGE"
    #: The last channel left; the group is gone.
    UNREGISTER = "UNREGISTER"


#: ``(event, group, channels still in the group)``.
ChangeListener = Callable[[ConsumerGroupEvent, str, list[Channel]], None]


@dataclass(slots=True)
class ClientChannelInfo:
    """One client connection in one group."""

    channel: Channel
    client_id: str
    language: LanguageCode = LanguageCode.JAVA
    version: int = 0
    #: ``clock.monotonic_ms()`` of the last heartbeat.
    last_update_ms: int = 0

    def to_connection(self) -> Connection:
        """The admin listing entry of this channel."""
        return Connection(
            self.client_id, self.channel.remote_address, self.language.name, self.version
        )


def notify_consumer_ids_changed_request(group: str) -> RemotingCommand:
    """NOTIFY_CONSUMER_IDS_CHANGED (40): oneway, JSON, header ``consumerGroup``."""
    return RemotingCommand(
        code=RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
        flag=RPC_ONEWAY,
        language=LanguageCode.JAVA,
        ext_fields=NotifyConsumerIdsChangedRequestHeader(group).to_ext_fields(),
    )


@dataclass(slots=True)
class ConsumerGroupInfo:
    """A consumer group's channels and subscriptions."""

    group_name: str
    consume_type: ConsumeType = ConsumeType.CONSUME_PASSIVELY
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    channels: dict[Channel, ClientChannelInfo] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    last_update_ms: int = 0

    def update_channel(self, info: ClientChannelInfo, data: ConsumerData, now_ms: int) -> bool:
        """Record a heartbeat from ``info``; True when the channel is new to the group."""
        self.consume_type = data.consume_type
        self.message_model = data.message_model
        self.consume_from_where = data.consume_from_where
        old = self.channels.get(info.channel)
        added = old is None
        if old is None or old.client_id != info.client_id:
            if old is not None:
                log.warning(
                    "consumer channel %s of %s changed client id %s -> %s",
                    info.channel.remote_address,
                    self.group_name,
                    old.client_id,
                    info.client_id,
                )
            self.channels[info.channel] = info
            old = info
        old.last_update_ms = now_ms
        self.last_update_ms = now_ms
        return added

    def update_subscriptions(self, subs: Iterable[SubscriptionData], now_ms: int) -> bool:
        """Take a heartbeat's subscriptions; True when a topic was added or dropped.

        A newer ``subVersion`` for a known topic replaces it without counting as a
        change, as in RocketMQ (consumers rebalance on topics and ids, not filters).
        """
        changed = False
        topics: set[str] = set()
        for sub in subs:
            topics.add(sub.topic)
            old = self.subscriptions.get(sub.topic)
            if old is None:
                self.subscriptions[sub.topic] = sub
                changed = True
            elif sub.sub_version > old.sub_version:
                self.subscriptions[sub.topic] = sub
        for topic in [t for t in self.subscriptions if t not in topics]:
            log.warning("consumer group %s dropped topic %s", self.group_name, topic)
            del self.subscriptions[topic]
            changed = True
        self.last_update_ms = now_ms
        return changed

    def remove_channel(self, channel: Channel) -> ClientChannelInfo | None:
        """Drop one channel; the removed info or None."""
        return self.channels.pop(channel, None)

    def client_ids(self) -> list[str]:
        """The client ids of the group's channels, in registration order."""
        return [info.client_id for info in self.channels.values()]

    def find_channel(self, client_id: str) -> ClientChannelInfo | None:
        """The channel of ``client_id`` in this group."""
        for info in self.channels.values():
            if info.client_id == client_id:
                return info
        return None


class ConsumerManager:
    """Consumer groups by name (``ConsumerManager``)."""

    def __init__(
        self,
        clock: Clock,
        listener: ChangeListener | None = None,
        *,
        channel_expired_ms: int = CHANNEL_EXPIRED_MS,
    ) -> None:
        self._clock = clock
        self._listener = listener
        self._expired_ms = channel_expired_ms
        self._groups: dict[str, ConsumerGroupInfo] = {}

    def set_listener(self, listener: ChangeListener | None) -> None:
        """Install the change callback (the broker's notifier)."""
        self._listener = listener

    def register(self, info: ClientChannelInfo, data: ConsumerData, *, notify: bool = True) -> bool:
        """Register one ``ConsumerData`` of a heartbeat; True when the group changed.

        On a change, and when ``notify``, the listener gets ``CHANGE`` with every
        channel of the group (RocketMQ's ``notifyConsumerIdsChangedEnable``).
        """
        now = self._clock.monotonic_ms()
        group = self._groups.get(data.group_name)
        if group is None:
            group = self._groups[data.group_name] = ConsumerGroupInfo(data.group_name)
        new_channel = group.update_channel(info, data, now)
        new_topics = group.update_subscriptions(data.subscriptions, now)
        changed = new_channel or new_topics
        if changed and notify:
            self._fire(ConsumerGroupEvent.CHANGE, group)
        return changed

    def unregister(self, group_name: str, channel: Channel, *, notify: bool = True) -> bool:
        """UNREGISTER_CLIENT for a consumer group; True when the channel was there."""
        group = self._groups.get(group_name)
        if group is None or group.remove_channel(channel) is None:
            return False
        self._after_removal(group, notify)
        return True

    def on_channel_closed(self, channel: Channel) -> list[str]:
        """Remove ``channel`` from every group; the names of the groups it left."""
        left: list[str] = []
        for group in list(self._groups.values()):
            if group.remove_channel(channel) is not None:
                left.append(group.group_name)
                self._after_removal(group, True)
        return left

    def scan_not_active(self) -> list[ClientChannelInfo]:
        """Close and drop channels idle longer than the expiry; the dropped infos."""
        now = self._clock.monotonic_ms()
        dropped: list[ClientChannelInfo] = []
        for group in list(self._groups.values()):
            stale = [
                i for i in group.channels.values() if now - i.last_update_ms > self._expired_ms
            ]
            for info in stale:
                log.warning(
                    "consumer channel %s (%s) of %s expired",
                    info.channel.remote_address,
                    info.client_id,
                    group.group_name,
                )
                group.remove_channel(info.channel)
                info.channel.close()
                dropped.append(info)
            if not group.channels:
                del self._groups[group.group_name]
        return dropped

    def _after_removal(self, group: ConsumerGroupInfo, notify: bool) -> None:
        if not group.channels:
            del self._groups[group.group_name]
            self._fire(ConsumerGroupEvent.UNREGISTER, group)
        elif notify:
            self._fire(ConsumerGroupEvent.CHANGE, group)

    def _fire(self, event: ConsumerGroupEvent, group: ConsumerGroupInfo) -> None:
        if self._listener is None:
            return
        try:
            self._listener(event, group.group_name, list(group.channels))
        except Exception:
            log.exception("consumer change listener failed for %s", group.group_name)

    def get_group(self, group_name: str) -> ConsumerGroupInfo | None:
        """A group's info, or None when no client of it is connected."""
        return self._groups.get(group_name)

    def groups(self) -> list[str]:
        """Every group with a connected client."""
        return list(self._groups)

    def find_subscription(self, group_name: str, topic: str) -> SubscriptionData | None:
        """The group's subscription to ``topic`` from its heartbeats."""
        group = self._groups.get(group_name)
        return None if group is None else group.subscriptions.get(topic)

    def consumer_ids(self, group_name: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP: the client ids of a group (empty if unknown)."""
        group = self._groups.get(group_name)
        return [] if group is None else group.client_ids()

    def find_channel(self, group_name: str, client_id: str) -> ClientChannelInfo | None:
        """The channel of one client of a group."""
        group = self._groups.get(group_name)
        return None if group is None else group.find_channel(client_id)

    def groups_of_topic(self, topic: str) -> set[str]:
        """Groups subscribed to ``topic`` (``queryTopicConsumeByWho``)."""
        return {name for name, g in self._groups.items() if topic in g.subscriptions}

    def connections(self, group_name: str) -> list[ClientChannelInfo]:
        """GET_CONSUMER_CONNECTION_LIST: the group's channels."""
        group = self._groups.get(group_name)
        return [] if group is None else list(group.channels.values())

    def consumer_connection(self, group_name: str) -> ConsumerConnection | None:
        """GET_CONSUMER_CONNECTION_LIST's body, or None when no client is connected."""
        group = self._groups.get(group_name)
        if group is None:
            return None
        return ConsumerConnection(
            [info.to_connection() for info in group.channels.values()],
            dict(group.subscriptions),
            group.consume_type,
            group.message_model,
            group.consume_from_where,
        )


class ProducerManager:
    """Producer groups' channels (``ProducerManager``)."""

    def __init__(self, clock: Clock, *, channel_expired_ms: int = CHANNEL_EXPIRED_MS) -> None:
        self._clock = clock
        self._expired_ms = channel_expired_ms
        self._groups: dict[str, dict[Channel, ClientChannelInfo]] = {}
        self._by_client_id: dict[str, Channel] = {}

    def register(self, group_name: str, info: ClientChannelInfo) -> bool:
        """Record a heartbeat; True when the channel is new to the group."""
        channels = self._groups.setdefault(group_name, {})
        old = channels.get(info.channel)
        if old is None:
            channels[info.channel] = old = info
        old.last_update_ms = self._clock.monotonic_ms()
        self._by_client_id[info.client_id] = info.channel
        return old is info

    def unregister(self, group_name: str, channel: Channel) -> bool:
        """UNREGISTER_CLIENT for a producer group; True when the channel was there."""
        channels = self._groups.get(group_name)
        if channels is None:
            return False
        info = channels.pop(channel, None)
        if not channels:
            del self._groups[group_name]
        if info is None:
            return False
        self._forget_client(info)
        return True

    def on_channel_closed(self, channel: Channel) -> list[str]:
        """Remove ``channel`` from every group; the names of the groups it left."""
        left: list[str] = []
        for name, channels in list(self._groups.items()):
            info = channels.pop(channel, None)
            if info is not None:
                left.append(name)
                self._forget_client(info)
            if not channels:
                del self._groups[name]
        return left

    def scan_not_active(self) -> list[ClientChannelInfo]:
        """Close and drop channels idle longer than the expiry; the dropped infos."""
        now = self._clock.monotonic_ms()
        dropped: list[ClientChannelInfo] = []
        for name, channels in list(self._groups.items()):
            for info in [i for i in channels.values() if now - i.last_update_ms > self._expired_ms]:
                log.warning(
                    "producer channel %s (%s) of %s expired",
                    info.channel.remote_address,
                    info.client_id,
                    name,
                )
                del channels[info.channel]
                self._forget_client(info)
                info.channel.close()
                dropped.append(info)
            if not channels:
                del self._groups[name]
        return dropped

    def _forget_client(self, info: ClientChannelInfo) -> None:
        if self._by_client_id.get(info.client_id) is info.channel:
            del self._by_client_id[info.client_id]

    def groups(self) -> list[str]:
        """Every producer group with a connected client."""
        return list(self._groups)

    def connections(self, group_name: str) -> list[ClientChannelInfo]:
        """GET_PRODUCER_CONNECTION_LIST: the group's channels."""
        return list(self._groups.get(group_name, {}).values())

    def producer_connection(self, group_name: str) -> ProducerConnection:
        """GET_PRODUCER_CONNECTION_LIST's body (empty when none is connected)."""
        return ProducerConnection([i.to_connection() for i in self.connections(group_name)])

    def available_channel(self, group_name: str) -> Channel | None:
        """A channel of the group (for transaction checks), or None."""
        channels = self._groups.get(group_name)
        return next(iter(channels), None) if channels else None

    def find_channel(self, client_id: str) -> Channel | None:
        """The channel of a producer client id."""
        return self._by_client_id.get(client_id)


def register_heartbeat(
    producers: ProducerManager,
    consumers: ConsumerManager,
    channel: Channel,
    heartbeat: HeartbeatData,
    *,
    language: LanguageCode,
    version: int,
) -> list[str]:
    """Register every group of one heartbeat; the consumer groups that changed.

    The HEART_BEAT processor may instead call ``register`` per group, after its own
    subscription-group checks and retry-topic creation.
    """
    changed: list[str] = []
    for consumer in heartbeat.consumers:
        info = ClientChannelInfo(channel, heartbeat.client_id, language, version)
        if consumers.register(info, consumer):
            changed.append(consumer.group_name)
    for producer in heartbeat.producers:
        info = ClientChannelInfo(channel, heartbeat.client_id, language, version)
        producers.register(producer.group_name, info)
    return changed
