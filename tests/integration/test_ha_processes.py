"""Master/slave replication between real ``mqbroker`` processes (issue 7).

- SYNC_MASTER + slave: after 100,000 messages the slave's CommitLog bytes equal the
  master's over the written range and its ConsumeQueue files are identical.
- SIGKILL the master mid-produce: every acknowledged message is read from the slave,
  the consumer reads from the slave within 5 s, and once the master is back no
  committed consumer offset has gone backwards.
- A slave started empty against a master with several CommitLog files catches up
  (from the master's last file, as RocketMQ does) and serves pulls.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.errors import MQClientError
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.pull_consumer import PullConsumer
from aiorocketmq.client.results import PullStatus, SendStatus
from aiorocketmq.common.message import Message, MessageQueue
from aiorocketmq.common.message_codec import decode_pull_body
from aiorocketmq.remoting.broker_headers import PullMessageResponseHeader
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from tests.support.cluster import (
    BrokerProcess,
    commitlog_max_offset,
    create_topic,
    has_topic,
    runtime_info,
    start_broker,
    start_namesrv,
    wait_replicated,
)
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until
from tests.unit.broker.broker_support import pull_request

pytestmark = pytest.mark.timeout(240)

StartProcess = Callable[..., ManagedProcess]
FILE_SIZE = 8 * 1024 * 1024
MASTER: dict[str, Any] = {"brokerRole": "SYNC_MASTER", "mappedFileSizeCommitLog": FILE_SIZE}
SLAVE: dict[str, Any] = {
    "brokerRole": "SLAVE",
    "brokerId": 1,
    "slaveReadEnable": True,
    "mappedFileSizeCommitLog": FILE_SIZE,
}


def _client(namesrv: str, name: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name=name)


def _store(broker: BrokerProcess) -> Path:
    for line in broker.config.read_text("utf-8").splitlines():
        if line.startswith("storePathRootDir="):
            return Path(line.split("=", 1)[1])
    raise AssertionError("no storePathRootDir")


def _commitlog_digest(store: Path, end: int) -> str:
    digest = hashlib.sha256()
    left = end
    for path in sorted((store / "commitlog").iterdir()):
        if left <= 0:
            break
        data = path.read_bytes()[:left]
        digest.update(data)
        left -= len(data)
    assert left == 0, f"CommitLog files end {left} bytes short of {end}"
    return digest.hexdigest()


def _queue_files(store: Path, topic: str) -> dict[str, bytes]:
    root = store / "consumequeue" / topic
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


async def _produce_batches(namesrv: str, topic: str, total: int, prefix: str) -> None:
    async with Producer("PG_ha", client_config=_client(namesrv, f"p-{prefix}")) as producer:
        for start in range(0, total, 400):
            batches = [
                [
                    Message(topic, b"z" * 1024, properties={"KEYS": f"{prefix}{i}"})
                    for i in range(first, min(first + 100, total))
                ]
                for first in range(start, min(start + 400, total), 100)
            ]
            results = await asyncio.gather(*[producer.send_batch(b) for b in batches])
            assert all(r.status is SendStatus.SEND_OK for r in results), results


async def test_slave_is_byte_identical_after_100k_messages(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    master = await start_broker(start_process, tmp_path, namesrv, "broker-a", **MASTER)
    slave = await start_broker(start_process, tmp_path / "s", namesrv, "broker-a", **SLAVE)
    # A SYNC_MASTER answers SLAVE_NOT_AVAILABLE until its slave has connected.
    await wait_until(
        lambda: _slave_connected(master.addr), timeout=30, what="the slave's HA connection"
    )
    await _produce_batches(namesrv, "HATopic", 100_000, "m")
    end = await wait_replicated(master.addr, slave.addr)
    assert end > 100_000 * 1024
    # Queues on the slave are built by its own dispatcher: wait until it has all.
    client = RemotingClient()
    try:
        await wait_until(
            lambda: _slave_queue_total(client, slave.addr, "HATopic", 100_000),
            timeout=60,
            what="slave queues dispatched",
        )
    finally:
        await client.close()
    assert master.proc.stop() == 0
    assert slave.proc.stop() == 0
    assert _commitlog_digest(_store(master), end) == _commitlog_digest(_store(slave), end)
    master_queues = _queue_files(_store(master), "HATopic")
    assert master_queues and master_queues == _queue_files(_store(slave), "HATopic")


async def _slave_connected(master: str) -> bool:
    return (await runtime_info(master)).get("haSlaveNum") == "1"


async def _slave_queue_total(client: RemotingClient, addr: str, topic: str, total: int) -> bool:
    found = 0
    for queue_id in range(4):
        request = RemotingCommand.request(
            RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)}
        )
        reply = await client.invoke(addr, request, 5000)
        if reply.code != ResponseCode.SUCCESS:
            return False
        found += int(reply.ext_fields["offset"])
    return found == total


async def _read_keys(consumer: PullConsumer, mqs: list[MessageQueue]) -> tuple[set[str], dict]:
    keys: set[str] = set()
    ends: dict[MessageQueue, int] = {}
    for mq in mqs:
        offset = 0
        while True:
            result = await consumer.pull(mq, "*", offset, 32)
            if result.status is not PullStatus.FOUND:
                break
            keys.update(m.keys[0] for m in result.msg_found_list)
            offset = result.next_begin_offset
        ends[mq] = offset
    return keys, ends


def _free_ports(count: int) -> list[int]:
    """Ports free now (the restarted master must come back at the same address)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


async def _first_pull_from_slave(consumer: PullConsumer, mq: MessageQueue) -> None:
    async def found() -> bool:
        try:
            return (await consumer.pull(mq, "*", 0, 1)).status is PullStatus.FOUND
        except MQClientError:
            return False  # the dead master's pull; the route refresh follows it

    await wait_until(found, timeout=5.0, interval=0.05, what="a pull answered by the slave")


async def test_master_killed_mid_produce_loses_no_acknowledged_message(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    port, ha_port = _free_ports(2)
    master = await start_broker(
        start_process, tmp_path, namesrv, "broker-a", listenPort=port, haListenPort=ha_port,
        **MASTER,
    )  # fmt: skip
    slave = await start_broker(start_process, tmp_path / "s", namesrv, "broker-a", **SLAVE)
    # A slave knows a topic once its 10 s metadata sync copied it (as in RocketMQ,
    # where a slave answers TOPIC_NOT_EXIST before that): create it first.
    await create_topic(master.addr, "KillTopic")
    await wait_until(
        lambda: has_topic(slave.addr, "KillTopic"), timeout=15, what="topic synced to slave"
    )
    acked: set[str] = set()
    consumer = PullConsumer("CG_ha", client_config=_client(namesrv, "consumer"))
    await consumer.start()
    try:
        mqs = await consumer.fetch_subscribe_message_queues("TBW102")
        async with Producer("PG_ha", client_config=_client(namesrv, "producer")) as producer:

            async def produce() -> None:
                for i in range(1_000_000):
                    msg = Message("KillTopic", b"k" * 256, properties={"KEYS": f"k{i}"})
                    try:
                        result = await producer.send(msg)
                    except MQClientError:
                        return  # the master is gone
                    if result.status is SendStatus.SEND_OK:
                        acked.add(f"k{i}")

            task = asyncio.ensure_future(produce())
            await wait_until(lambda: len(acked) >= 2_000, timeout=60, what="2,000 acknowledged")
            mqs = await consumer.fetch_subscribe_message_queues("KillTopic")
            master.proc.kill()
            # Within 5 s of the kill our consumer reads from the slave.
            await _first_pull_from_slave(consumer, mqs[0])
            await asyncio.wait_for(task, 60)
        keys, ends = await _read_keys(consumer, mqs)
        assert acked <= keys, f"{len(acked - keys)} acknowledged messages missing"
        # Offsets committed while the master is down go to the slave.
        for mq, end in ends.items():
            consumer.update_consume_offset(mq, end)
        await consumer.persist_offsets_now()
        restarted = start_process(
            ["-m", "aiorocketmq.cli.broker", "-c", str(master.config)],
            name="master-again",
            ready=r"mqbroker ready address=(?P<addr>\S+)",
            wait=False,
        )
        syncs_before = int((await runtime_info(slave.addr))["slaveSyncTimes"])
        master_addr = (await restarted.wait_ready_async())["addr"]
        assert master_addr == master.addr
        await wait_replicated(master_addr, slave.addr)

        # The slave's sync from the returned master must not roll its offsets back.
        async def synced_again() -> bool:
            return int((await runtime_info(slave.addr))["slaveSyncTimes"]) > syncs_before

        await wait_until(synced_again, timeout=15, what="a slave sync round")
        for mq, end in ends.items():
            assert await _query_offset(slave.addr, "CG_ha", mq) >= end
        # The client's next route refresh finds the master again and its next persist
        # (every 5 s; forced here) gives the master the offsets committed meanwhile.
        await consumer.instance.update_topic_route("KillTopic")
        await consumer.persist_offsets_now()
        for mq, end in ends.items():
            assert await _query_offset(master_addr, "CG_ha", mq) >= end
            assert await consumer.fetch_consume_offset(mq, from_store=True) >= end
    finally:
        await consumer.shutdown()


async def _query_offset(addr: str, group: str, mq: MessageQueue) -> int:
    client = RemotingClient()
    try:
        request = RemotingCommand.request(
            RequestCode.QUERY_CONSUMER_OFFSET,
            {"consumerGroup": group, "topic": mq.topic, "queueId": str(mq.queue_id)},
        )
        reply = await client.invoke(addr, request, 5000)
    finally:
        await client.close()
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    return int(reply.ext_fields["offset"])


async def test_empty_slave_catches_up_with_a_master_of_several_files(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    master = await start_broker(start_process, tmp_path, namesrv, "broker-a", **MASTER | {
        "brokerRole": "ASYNC_MASTER"})  # fmt: skip
    await _produce_batches(namesrv, "EarlyTopic", 30_000, "early")  # ~4 files of 8 MiB
    assert await commitlog_max_offset(master.addr) > 3 * FILE_SIZE
    await create_topic(master.addr, "LateTopic")
    slave = await start_broker(start_process, tmp_path / "s", namesrv, "broker-a", **SLAVE)
    await wait_until(
        lambda: has_topic(slave.addr, "LateTopic"), timeout=15, what="topic synced to slave"
    )
    await _produce_batches(namesrv, "LateTopic", 2_000, "late")
    await wait_replicated(master.addr, slave.addr)
    client = RemotingClient()
    try:
        await wait_until(
            lambda: _slave_queue_total(client, slave.addr, "LateTopic", 2_000),
            timeout=30,
            what="late messages dispatched on the slave",
        )
    finally:
        await client.close()
    # Read every late message from the slave itself.
    keys: set[str] = set()
    client = RemotingClient()
    try:
        for queue_id in range(4):
            offset = 0
            while True:
                request = pull_request(
                    offset, topic="LateTopic", queue_id=queue_id, sys_flag=0x4, suspend_ms=0
                )
                reply = await client.invoke(slave.addr, request, 5000)
                if reply.code != ResponseCode.SUCCESS:
                    assert reply.code == ResponseCode.PULL_NOT_FOUND, (reply.code, reply.remark)
                    break
                records = decode_pull_body(bytes(reply.body))
                keys.update(r.properties["KEYS"] for r in records)
                offset = PullMessageResponseHeader.from_ext_fields(
                    reply.ext_fields
                ).next_begin_offset
    finally:
        await client.close()
    assert keys == {f"late{i}" for i in range(2_000)}
