"""Traffic for chaos tests: producers that record every acknowledgement, a push
consumer that records every delivery, and the broker queries the checks need.

Owns: ``Traffic`` (send loops that keep going through failures, recording each
SEND_OK's key, broker and time), ``Deliveries`` (a push consumer's Counter of
keys), the fast client settings chaos tests use (1 s route refresh, heartbeat
and offset persistence), and ``committed_offsets`` (QUERY_CONSUMER_OFFSET).

Must not: sleep to wait for something (waits are ``wait_until`` on these
records), or hide a send failure (they are counted by kind).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from dataclasses import dataclass, field

from aiorocketmq.client.config import ClientConfig, ProducerConfig, PushConsumerConfig
from aiorocketmq.client.consume_service import ConsumeConcurrentlyStatus
from aiorocketmq.client.errors import MQClientError
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.push_consumer import PushConsumer
from aiorocketmq.client.results import SendStatus
from aiorocketmq.common.message import Message, MessageExt
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand

__all__ = ["Deliveries", "Traffic", "client_config", "committed_offsets"]

#: A failed send is retried after this pause, so a dead cluster is not spun on.
_ERROR_PAUSE_S = 0.02


def client_config(namesrv: str, name: str) -> ClientConfig:
    """Loopback client with 1 s route refresh, heartbeats and offset persistence."""
    return ClientConfig(
        namesrv_addr=namesrv,
        client_ip="127.0.0.1",
        instance_name=name,
        poll_name_server_interval=1_000,
        heartbeat_broker_interval=1_000,
        persist_consumer_offset_interval=1_000,
    )


@dataclass
class Traffic:
    """``loops`` concurrent send loops on ``topic`` until ``stop``.

    Attributes:
        acked: key -> broker name of every SEND_OK.
        ok_times: (monotonic time, broker name) of every SEND_OK, in order.
        statuses: non-OK results by status name, errors by exception class name.
    """

    namesrv: str
    topic: str
    prefix: str = "m"
    loops: int = 2
    producer_config: ProducerConfig = field(default_factory=ProducerConfig)
    acked: dict[str, str] = field(default_factory=dict)
    ok_times: list[tuple[float, str]] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _stopping: bool = False
    _producer: Producer | None = None

    async def start(self) -> Traffic:
        """Start the producer and its send loops."""
        config = client_config(self.namesrv, f"{self.prefix}-producer")
        self._producer = Producer(
            f"PG_{self.prefix}", config=self.producer_config, client_config=config
        )
        await self._producer.start()
        self._tasks = [asyncio.ensure_future(self._loop(i)) for i in range(self.loops)]
        return self

    async def stop(self) -> None:
        """End the loops after their current send and shut the producer down."""
        self._stopping = True
        await asyncio.gather(*self._tasks)
        if self._producer is not None:
            await self._producer.shutdown()

    def acked_on(self, broker: str) -> set[str]:
        """Keys acknowledged by ``broker``."""
        return {k for k, b in self.acked.items() if b == broker}

    def oks_since(self, moment: float, broker: str | None = None) -> int:
        """SEND_OKs after ``moment`` (on ``broker`` when given)."""
        return sum(1 for t, b in self.ok_times if t > moment and broker in (None, b))

    def max_gap(self, start: float, end: float) -> float:
        """Longest time without a SEND_OK between ``start`` and ``end``."""
        times = [start, *(t for t, _ in self.ok_times if start < t < end), end]
        return max(b - a for a, b in itertools.pairwise(times))

    async def _loop(self, index: int) -> None:
        assert self._producer is not None
        for n in range(10**9):
            if self._stopping:
                return
            key = f"{self.prefix}-{index}-{n}"
            msg = Message(self.topic, b"c" * 128, properties={"KEYS": key})
            try:
                result = await self._producer.send(msg)
            except MQClientError as exc:
                self.statuses[type(exc).__name__] += 1
                await asyncio.sleep(_ERROR_PAUSE_S)
                continue
            if result.status is SendStatus.SEND_OK:
                self.acked[key] = result.message_queue.broker_name
                self.ok_times.append((time.monotonic(), result.message_queue.broker_name))
            else:
                self.statuses[result.status.name] += 1


class Deliveries:
    """A push consumer (from the first offset) counting every delivered key."""

    def __init__(self, namesrv: str, topic: str, group: str) -> None:
        config = PushConsumerConfig(
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            pull_time_delay_millis_when_exception=200,
            broker_suspend_max_time_millis=1_000,
            consumer_timeout_millis_when_suspend=3_000,
        )
        self.seen: Counter[str] = Counter()
        self.consumer = PushConsumer(
            group, config=config, client_config=client_config(namesrv, f"{group}-c")
        )
        self.consumer.subscribe(topic, "*")
        self.consumer.register_message_listener(self._on_messages)

    def _on_messages(self, msgs: list[MessageExt], _ctx: object) -> ConsumeConcurrentlyStatus:
        for msg in msgs:
            self.seen[msg.keys[0]] += 1
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def missing(self, keys: set[str]) -> set[str]:
        """Keys of ``keys`` not delivered yet."""
        return keys - self.seen.keys()


async def committed_offsets(addr: str, group: str, topic: str, queues: int = 4) -> list[int]:
    """The committed offset of ``group`` on each queue of ``topic`` at broker ``addr``
    (-1 where it has none)."""
    client = RemotingClient()
    offsets = []
    try:
        for queue_id in range(queues):
            request = RemotingCommand.request(
                RequestCode.QUERY_CONSUMER_OFFSET,
                {"consumerGroup": group, "topic": topic, "queueId": str(queue_id)},
            )
            reply = await client.invoke(addr, request, 5000)
            if reply.code == ResponseCode.SUCCESS:
                offsets.append(int(reply.ext_fields["offset"]))
            else:
                offsets.append(-1)
    finally:
        await client.close()
    return offsets
