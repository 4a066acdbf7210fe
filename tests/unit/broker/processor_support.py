"""The send and offset processors on a real store and a real server, for component tests.

Owns: ``send_harness`` (``broker_support.harness`` with ``SendProcessor`` and
``ConsumerManageProcessor`` registered) and the send request builder.

Must not: fake the store or the network: every part is the real one.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.processors.consumer_manage import ConsumerManageProcessor
from aiorocketmq.broker.processors.send import SendProcessor
from aiorocketmq.remoting.broker_headers import SendMessageRequestHeader
from aiorocketmq.remoting.codes import RequestCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable
from tests.unit.broker.broker_support import STORE_HOST, TOPIC, Harness, harness

__all__ = ["STORE_HOST", "TOPIC", "SendHarness", "send_harness", "send_request"]


#: The send tests talk to the shared broker harness.
SendHarness = Harness


def _register_send_and_offsets(ctx: BrokerContext, table: ProcessorTable) -> None:
    SendProcessor(ctx).register(table)
    ConsumerManageProcessor(ctx).register(table)


@contextlib.asynccontextmanager
async def send_harness(
    tmp_path: Path,
    *,
    broker: dict[str, Any] | None = None,
    store: dict[str, Any] | None = None,
) -> AsyncIterator[Harness]:
    """The shared harness with the send and consumer-offset processors registered."""
    async with harness(tmp_path, broker=broker, store=store, extra=_register_send_and_offsets) as h:
        yield h


def send_request(
    body: bytes = b"hello",
    *,
    topic: str = TOPIC,
    queue_id: int = 0,
    properties: str = "TAGS\x01TagA\x02WAIT\x01true\x02",
    code: int = RequestCode.SEND_MESSAGE,
    **fields: Any,
) -> RemotingCommand:
    """A SEND_MESSAGE (or another code) as a Java client builds it."""
    values: dict[str, Any] = {
        "producer_group": "PID_test",
        "topic": topic,
        "default_topic": "TBW102",
        "default_topic_queue_nums": 4,
        "queue_id": queue_id,
        "sys_flag": 0,
        "born_timestamp": 1_700_000_000_000,
        "flag": 0,
        "properties": properties,
    }
    values.update(fields)
    header = SendMessageRequestHeader(**values)
    ext = (
        header.to_ext_fields_v2() if code == RequestCode.SEND_MESSAGE_V2 else header.to_ext_fields()
    )
    return RemotingCommand.request(code, ext, body)
