"""SubscriptionGroupConfig: one consumer group's settings on a broker.

Owns: ``SubscriptionGroupConfig`` (RocketMQ 4.9.8's fields and defaults), its
JSON form (an entry of ``subscriptionGroup.json`` and the body of
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP), and the consumer-group names RocketMQ
treats specially (``MixAll``).

Must not: do I/O or keep state; decoding raises ``RemoteProtocolError`` only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aiorocketmq.common import fastjson as fj
from aiorocketmq.common.fastjson import JsonDict

__all__ = [
    "CID_RMQ_SYS_PREFIX",
    "SYSTEM_CONSUMER_GROUPS",
    "SubscriptionGroupConfig",
    "is_sys_consumer_group",
]

TOOLS_CONSUMER_GROUP: Final = "TOOLS_CONSUMER"
FILTERSRV_CONSUMER_GROUP: Final = "FILTERSRV_CONSUMER"
SELF_TEST_CONSUMER_GROUP: Final = "SELF_TEST_C_GROUP"
ONS_HTTP_PROXY_GROUP: Final = "CID_ONS-HTTP-PROXY"
CID_ONSAPI_PULL_GROUP: Final = "CID_ONSAPI_PULL"
CID_ONSAPI_PERMISSION_GROUP: Final = "CID_ONSAPI_PERMISSION"
CID_ONSAPI_OWNER_GROUP: Final = "CID_ONSAPI_OWNER"
CID_RMQ_SYS_PREFIX: Final = "CID_RMQ_SYS_"

SYSTEM_CONSUMER_GROUPS: Final = (
    TOOLS_CONSUMER_GROUP,
    FILTERSRV_CONSUMER_GROUP,
    SELF_TEST_CONSUMER_GROUP,
    ONS_HTTP_PROXY_GROUP,
    CID_ONSAPI_PULL_GROUP,
    CID_ONSAPI_PERMISSION_GROUP,
    CID_ONSAPI_OWNER_GROUP,
)
"""Groups ``SubscriptionGroupManager.init()`` creates, in Java's order."""


def is_sys_consumer_group(group: str) -> bool:
    """``MixAll.isSysConsumerGroup``: auto-created even when auto-create is off."""
    return group.startswith(CID_RMQ_SYS_PREFIX)


@dataclass(slots=True, frozen=True)
class SubscriptionGroupConfig:
    """A consumer group's settings (``SubscriptionGroupConfig``), RocketMQ's defaults."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    consume_message_orderly: bool = False
    """RocketMQ 5's ``consumeMessageOrderly``: gRPC (POP) consumers of the group get
    FIFO delivery, one batch in flight per queue. Not in 4.9: written only when set,
    so a 4.9 group's JSON is unchanged."""

    def to_json_dict(self) -> JsonDict:
        """Fields in fastjson's (alphabetical) order."""
        doc = self._json_4_9()
        if self.consume_message_orderly:
            doc = {"consumeMessageOrderly": True, **doc}
            doc = dict(sorted(doc.items()))
        return doc

    def _json_4_9(self) -> JsonDict:
        return {
            "brokerId": self.broker_id,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "groupName": self.group_name,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": self.retry_queue_nums,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }

    @classmethod
    def from_json_dict(cls, d: object, group_name: str | None = None) -> SubscriptionGroupConfig:
        """Read a decoded object; missing fields take the defaults."""
        obj = fj.as_dict(d, "SubscriptionGroupConfig")
        return cls(
            group_name=fj.get_str(obj, "groupName", group_name),
            consume_enable=fj.get_bool(obj, "consumeEnable", True),
            consume_from_min_enable=fj.get_bool(obj, "consumeFromMinEnable", True),
            consume_broadcast_enable=fj.get_bool(obj, "consumeBroadcastEnable", True),
            retry_queue_nums=fj.get_int(obj, "retryQueueNums", 1),
            retry_max_times=fj.get_int(obj, "retryMaxTimes", 16),
            broker_id=fj.get_int(obj, "brokerId", 0),
            which_broker_when_consume_slowly=fj.get_int(obj, "whichBrokerWhenConsumeSlowly", 1),
            notify_consumer_ids_changed_enable=fj.get_bool(
                obj, "notifyConsumerIdsChangedEnable", True
            ),
            consume_message_orderly=fj.get_bool(obj, "consumeMessageOrderly", False),
        )

    def encode(self) -> bytes:
        """The JSON body (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)."""
        return fj.dumps_bytes(self.to_json_dict())

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview | str) -> SubscriptionGroupConfig:
        """Parse a JSON body. Raises ``RemoteProtocolError``."""
        return cls.from_json_dict(fj.loads_object(data, "SubscriptionGroupConfig"))
