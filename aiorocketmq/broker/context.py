"""BrokerContext: the parts a broker's request processors work with.

Owns: one value object that names the broker's parts, so every processor takes the
same thing and the controller builds it once (the processors never reach into the
controller, which only wires and orders lifecycles).

Must not: create or start anything (the controller does), or hold logic.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiorocketmq.broker.client_registry import ConsumerManager, ProducerManager
from aiorocketmq.broker.config import BrokerConfig
from aiorocketmq.broker.long_polling import PullRequestHoldService
from aiorocketmq.broker.offsets import ConsumerOffsetManager
from aiorocketmq.broker.subscription_group import SubscriptionGroupManager
from aiorocketmq.broker.topic_config import TopicConfigManager
from aiorocketmq.common.clock import Clock
from aiorocketmq.store.config import BrokerRole, MessageStoreConfig
from aiorocketmq.store.message_store import MessageStore

__all__ = ["BrokerContext"]


@dataclass(slots=True)
class BrokerContext:
    """Everything a processor may use.

    Attributes:
        config: the broker's settings.
        store_config: the store's settings (role, flush type, sizes).
        store: the message store (started).
        topics: topic configs (topics.json, auto-create).
        groups: subscription groups (subscriptionGroup.json, auto-create).
        offsets: consumer offsets (consumerOffset.json).
        producers: producer channels from heartbeats.
        consumers: consumer groups, channels and subscriptions from heartbeats.
        hold: the long-polling service (None: never suspend pulls).
        store_host: ``(brokerIP1, listenPort)``: what records and msgIds carry.
        clock: the broker's clock.
    """

    config: BrokerConfig
    store_config: MessageStoreConfig
    store: MessageStore
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    producers: ProducerManager
    consumers: ConsumerManager
    hold: PullRequestHoldService | None
    store_host: tuple[str, int]
    clock: Clock

    @property
    def broker_id(self) -> int:
        """0 for a master."""
        return self.config.broker_id

    @property
    def is_slave(self) -> bool:
        """The store's role is SLAVE."""
        return self.store_config.broker_role is BrokerRole.SLAVE
