# The compiled twin of client.mq_client_api.py_send_result (_produce_kernels.pyx).
from typing import Any

from aiorocketmq.client.results import SendResult, SendStatus
from aiorocketmq.common.message import MessageQueue

def send_result(
    cls: type[SendResult],
    status: SendStatus,
    msg_id: str | None,
    fields: dict[str, Any],
    sent: MessageQueue | None,
    topic: str,
    broker_name: str,
) -> SendResult | None: ...
