"""aiorocketmq.client: an asyncio RocketMQ 4.x client (producer, pull consumer, admin calls).

Owns: the public names users import (re-exported from the modules below); the
modules own the behaviour (``producer``, ``transaction_producer``,
``pull_consumer``, ``lite_pull_consumer``, ``push_consumer``, ``listener``, ``message_stream``,
``instance``, ``namesrv_api``, ``mq_client_api``, ``pull_wrapper``,
``offset_store``, ``allocate``, ``selectors``, ``errors``).

Every exception the client raises is importable from here, from the root
``RocketMQError`` down (the tree is in ``errors``); ``MQTimeoutError`` is also a
``TimeoutError`` and ``InvalidArgumentError`` a ``ValueError``.

Must not: hold code or state of its own, or import anything above ``remoting``
(import-linter enforces the layers).

Example::

    from aiorocketmq.client import Message, Producer, PullConsumer

    async with Producer("my-group", namesrv_addr="127.0.0.1:9876") as producer:
        result = await producer.send(Message("TopicTest", b"hello"))
"""

from __future__ import annotations

from aiorocketmq.client.allocate import (
    allocate_averagely,
    allocate_averagely_by_circle,
    allocate_consistent_hash,
)
from aiorocketmq.client.config import (
    ClientConfig,
    LitePullConsumerConfig,
    ProducerConfig,
    PullConsumerConfig,
    PushConsumerConfig,
)
from aiorocketmq.client.errors import (
    BrokerNotFoundError,
    ClientStateError,
    InvalidArgumentError,
    MQBrokerError,
    MQClientError,
    MQConnectError,
    MQNamesrvError,
    MQRemotingError,
    MQResponseError,
    MQSendRequestError,
    MQTimeoutError,
    MQTooMuchRequestError,
    NoNameServerError,
    NoRouteError,
    SendFailedError,
)
from aiorocketmq.client.instance import ClientInstance, ClientManager
from aiorocketmq.client.listener import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
)
from aiorocketmq.client.lite_pull_consumer import LitePullConsumer
from aiorocketmq.client.message_stream import Delivery, DeliveryStream, MessageStream
from aiorocketmq.client.namesrv_api import NamesrvAPI
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.pull_consumer import PullConsumer
from aiorocketmq.client.push_consumer import PushConsumer
from aiorocketmq.client.results import PullResult, PullStatus, SendResult, SendStatus
from aiorocketmq.client.selectors import RoundRobinSelector, select_by_hash, select_by_random
from aiorocketmq.client.transaction_producer import (
    LocalTransactionState,
    TransactionChecker,
    TransactionProducer,
    TransactionSendResult,
)
from aiorocketmq.common.errors import (
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
    RocketMQError,
)
from aiorocketmq.common.message import Message, MessageExt, MessageQueue

__all__ = [
    "BrokerNotFoundError",
    "ClientConfig",
    "ClientInstance",
    "ClientManager",
    "ClientStateError",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "Delivery",
    "DeliveryStream",
    "InvalidArgumentError",
    "LitePullConsumer",
    "LitePullConsumerConfig",
    "LocalProtocolError",
    "LocalTransactionState",
    "MQBrokerError",
    "MQClientError",
    "MQConnectError",
    "MQNamesrvError",
    "MQRemotingError",
    "MQResponseError",
    "MQSendRequestError",
    "MQTimeoutError",
    "MQTooMuchRequestError",
    "Message",
    "MessageExt",
    "MessageQueue",
    "MessageStream",
    "NamesrvAPI",
    "NoNameServerError",
    "NoRouteError",
    "Producer",
    "ProducerConfig",
    "ProtocolError",
    "PullConsumer",
    "PullConsumerConfig",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "PushConsumerConfig",
    "RemoteProtocolError",
    "RocketMQError",
    "RoundRobinSelector",
    "SendFailedError",
    "SendResult",
    "SendStatus",
    "TransactionChecker",
    "TransactionProducer",
    "TransactionSendResult",
    "allocate_averagely",
    "allocate_averagely_by_circle",
    "allocate_consistent_hash",
    "select_by_hash",
    "select_by_random",
]
