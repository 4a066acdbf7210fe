# The compiled kernels of the producer (_produce_kernels.pyx).
from collections.abc import Callable
from typing import Any, TypeVar

from aiorocketmq.client.results import SendResult, SendStatus
from aiorocketmq.common.message import Message, MessageQueue

_T = TypeVar("_T")

# The compiled twin of client.mq_client_api.py_send_result for a usual reply.
def send_result(
    cls: type[SendResult],
    status: SendStatus,
    msg_id: str | None,
    fields: dict[str, Any],
    sent: MessageQueue | None,
    topic: str,
    broker_name: str,
) -> SendResult | None: ...

# The compiled twin of Producer._check_message + Producer._prepare for a usual message.
def plain_outgoing(
    cls: type[_T],
    msg: Message,
    checked_topics: set[str],
    max_size: int,
    compress_over: int,
    next_id: Callable[[], str],
    to_string: Callable[[dict[str, str]], str],
) -> _T | None: ...

# The compiled twin of client.mq_client_api.v2_fields (any arguments).
def v2_fields(
    producer_group: str,
    topic: str,
    default_topic: str,
    default_topic_queue_nums: int,
    queue_id: int,
    sys_flag: int,
    born_timestamp: int,
    flag: int,
    properties: str | None,
    reconsume_times: int | None,
    unit_mode: bool,
    batch: bool,
    max_reconsume_times: int | None,
    broker_name: str | None,
) -> dict[str, str]: ...
