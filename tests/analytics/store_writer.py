"""Stores written by a real in-process broker, with the ground truth the tests check.

Owns: ``write_store`` (topics, queues, tags, keys, a compressed > 4 KiB body, 64 KiB
CommitLog files so the log rolls, a message sent back and redelivered to
``%RETRY%<group>``, committed offsets) and ``Sent`` (what each send asked for and what
the broker answered).

Must not: write CommitLog bytes itself: every record comes from the broker's own path.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from aiorocketmq.broker.offset_history import HISTORY_FILE, append_offset_snapshot
from aiorocketmq.common.compression import compress_body
from aiorocketmq.common.constants import MessageSysFlag
from aiorocketmq.common.properties import properties_to_string
from aiorocketmq.remoting.broker_headers import (
    ConsumerSendMsgBackRequestHeader,
    SendMessageResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from tests.support.cluster import create_topic, in_process_broker
from tests.support.wait import wait_until
from tests.unit.broker.processor_support import send_request

GROUP = "analytics_group"
RETRY_TOPIC = f"%RETRY%{GROUP}"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TAGS = ("TagA", "TagB", "TagC")
COMMITLOG_FILE = 64 * 1024


@dataclass
class Sent:
    """One message as sent, and the broker's answer."""

    topic: str
    queue_id: int
    tags: str
    keys: list[str]
    stored_size: int  # body bytes as stored (compressed when flagged)
    sys_flag: int
    born_ms: int
    before_ms: int
    after_ms: int
    queue_offset: int
    msg_id: str


@dataclass
class StoreTruth:
    """A finished store and what went into it."""

    root: Path
    broker: str
    sent: list[Sent] = field(default_factory=list)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    retried_msg: Sent | None = None

    def committed_by_queue(self, topic: str) -> dict[int, int]:
        """queueId -> committed offset of ``GROUP`` in ``topic``."""
        return {q: o for (t, q), o in self.committed.items() if t == topic}


async def _send(
    client: RemotingClient, addr: str, truth: StoreTruth, i: int,
    topic: str, queue_id: int, body: bytes, sys_flag: int,
) -> Sent:  # fmt: skip
    tags, keys = TAGS[i % 3], [f"key-{truth.broker}-{i}", f"batch-{i % 5}"]
    born = 1_700_000_000_000 + i * 1000
    props = properties_to_string({"TAGS": tags, "KEYS": " ".join(keys), "WAIT": "true"})
    request = send_request(
        body, topic=topic, queue_id=queue_id, properties=props, sys_flag=sys_flag,
        born_timestamp=born, producer_group="analytics_producer",
    )  # fmt: skip
    before = int(time.time() * 1000)
    reply = await client.invoke(addr, request, 5000)
    after = int(time.time() * 1000)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    header = SendMessageResponseHeader.from_ext_fields(reply.ext_fields)
    sent = Sent(topic, queue_id, tags, keys, len(body), sys_flag, born, before, after,
                header.queue_offset, header.msg_id)  # fmt: skip
    truth.sent.append(sent)
    return sent


async def _commit(
    client: RemotingClient, addr: str, topic: str, queue_id: int, offset: int
) -> None:
    header = UpdateConsumerOffsetRequestHeader(GROUP, topic, queue_id, offset)
    request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext_fields())
    reply = await client.invoke(addr, request, 5000)
    assert reply.code == ResponseCode.SUCCESS, reply.remark


async def _max_offset(client: RemotingClient, addr: str, topic: str, queue_id: int) -> int:
    request = RemotingCommand.request(
        RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)}
    )
    reply = await client.invoke(addr, request, 5000)
    return int(reply.ext_fields.get("offset", "0")) if reply.code == ResponseCode.SUCCESS else 0


async def write_store(
    directory: Path, broker: str, topics: tuple[str, ...], count: int, *, retry: bool
) -> StoreTruth:
    """Run a broker, send ``count`` messages over ``topics`` (4 queues each), stop it.

    Message 0 has a compressible 20 KiB body sent compressed (sysFlag COMPRESSED);
    with ``retry`` it is sent back by ``GROUP`` and waited for in ``RETRY_TOPIC``.
    """
    rng = random.Random(broker)
    truth = StoreTruth(directory / f"{broker}-store", broker)
    settings = {"mappedFileSizeCommitLog": COMMITLOG_FILE, "messageDelayLevel": "1s 1s 1s 1s"}
    async with in_process_broker(directory, broker, **settings) as controller:
        addr = controller.address
        client = RemotingClient()
        try:
            for topic in topics:
                await create_topic(addr, topic)
            for i in range(count):
                topic = topics[i % len(topics)]
                if i == 0:
                    raw = b"analytics compressed body line\n" * 700  # 21,700 bytes
                    body = compress_body(raw)
                    flag = MessageSysFlag.COMPRESSED_FLAG
                else:
                    body, flag = rng.randbytes(rng.randint(50, 3000)), 0
                sent = await _send(client, addr, truth, i, topic, i % 4, body, flag)
                if i == 0:
                    # The first history snapshot is stamped with this send's end: later
                    # messages must be stored in a later millisecond to stay out of it.
                    first_end = sent.after_ms
                    await wait_until(
                        lambda: int(time.time() * 1000) > first_end,  # noqa: B023 - awaited here
                        timeout=1,
                        what="the clock past the first send",
                    )
            for q in range(4):
                truth.committed[(topics[0], q)] = q
                await _commit(client, addr, topics[0], q, q)
            if retry:
                first = truth.sent[0]
                truth.retried_msg = first
                header = ConsumerSendMsgBackRequestHeader(
                    offset=int(first.msg_id[16:], 16), group=GROUP, delay_level=0,
                    origin_msg_id=first.msg_id, origin_topic=first.topic,
                )  # fmt: skip
                back = RemotingCommand.request(
                    RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext_fields()
                )
                reply = await client.invoke(addr, back, 5000)
                assert reply.code == ResponseCode.SUCCESS, reply.remark

                async def redelivered() -> bool:
                    return await _max_offset(client, addr, RETRY_TOPIC, 0) >= 1

                await wait_until(redelivered, timeout=30, what="the retried message")
        finally:
            await client.close()
    _write_history(truth, topics[0])
    return truth


def _write_history(truth: StoreTruth, topic: str) -> None:
    """Offset snapshots as the broker's history service writes them: start, middle, end."""
    stamps = sorted(s.after_ms for s in truth.sent)
    key = f"{topic}@{GROUP}"
    path = truth.root / "config" / HISTORY_FILE
    append_offset_snapshot(path, {key: dict.fromkeys(range(4), 0)}, stamps[0])
    append_offset_snapshot(path, {key: {0: 1, 1: 1, 2: 1, 3: 1}}, stamps[len(stamps) // 2])
    append_offset_snapshot(path, {key: dict(truth.committed_by_queue(topic))}, stamps[-1] + 1)
