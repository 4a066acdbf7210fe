"""PullConsumer against real in-process brokers: every message exactly once, tag
filtering, a held pull woken by a send, committed offsets, broadcasting offsets file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from aiorocketmq.client.config import ClientConfig, PullConsumerConfig
from aiorocketmq.client.errors import ClientStateError, InvalidArgumentError, NoRouteError
from aiorocketmq.client.instance import ClientManager
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.pull_consumer import PullConsumer
from aiorocketmq.client.results import PullStatus
from aiorocketmq.common.message import Message, MessageQueue
from aiorocketmq.namesrv.server import NamesrvController
from aiorocketmq.remoting.config import RemotingClientConfig
from tests.support.wait import wait_until
from tests.unit.client.conftest import StartBroker

pytestmark = pytest.mark.timeout(60)


def _client(namesrv: NamesrvController, instance: str = "DEFAULT") -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv.address, client_ip="127.0.0.1", instance_name=instance)


async def _produce(namesrv: NamesrvController, topic: str, count: int) -> dict[str, str]:
    """Send ``count`` messages with keys k0.. and alternating tags; key -> tag."""
    sent: dict[str, str] = {}
    async with Producer("PG", client_config=_client(namesrv, "producer")) as producer:
        for i in range(count):
            tag = "TagA" if i % 2 == 0 else "TagB"
            msg = Message(topic, f"body-{i}".encode())
            msg.keys, msg.tags = f"k{i}", tag
            await producer.send(msg)
            sent[f"k{i}"] = tag
    return sent


async def test_every_queue_from_zero_gives_each_message_once_with_tag_filter(
    namesrv: NamesrvController, start_broker: StartBroker
) -> None:
    await start_broker("broker-a")
    sent = await _produce(namesrv, "PullTopic", 40)
    async with PullConsumer("CG", client_config=_client(namesrv)) as consumer:
        mqs = await consumer.fetch_subscribe_message_queues("PullTopic")
        assert [mq.queue_id for mq in mqs] == [0, 1, 2, 3]

        async def dispatched() -> bool:
            return sum([await consumer.max_offset(mq) for mq in mqs]) == len(sent)

        # A send is answered once stored; queues are written by the dispatcher just after.
        await wait_until(dispatched, what="every message in the queues")
        seen: list[str] = []
        tag_a: list[str] = []
        for mq in mqs:
            offset = 0
            while True:
                result = await consumer.pull(mq, "*", offset, 7)
                if result.status is not PullStatus.FOUND:
                    assert result.status is PullStatus.NO_NEW_MSG
                    break
                seen += [m.keys[0] for m in result.msg_found_list]
                assert all(m.body.startswith(b"body-") for m in result.msg_found_list)
                offset = result.next_begin_offset
            assert offset == await consumer.max_offset(mq)
            filtered = await consumer.pull(mq, "TagA", 0, 32)
            tag_a += [m.keys[0] for m in filtered.msg_found_list]
            assert all(m.get_property("MAX_OFFSET") == str(offset) for m in filtered.msg_found_list)
        assert sorted(seen) == sorted(sent) and len(seen) == len(set(seen))
        assert sorted(tag_a) == sorted(k for k, t in sent.items() if t == "TagA")
        assert await consumer.min_offset(mqs[0]) == 0
        with pytest.raises(InvalidArgumentError, match="offset < 0"):
            await consumer.pull(mqs[0], "*", -1, 1)
        with pytest.raises(InvalidArgumentError, match="maxNums <= 0"):
            await consumer.pull(mqs[0], "*", 0, 0)
        with pytest.raises(NoRouteError):
            await consumer.fetch_subscribe_message_queues("NoSuchTopic")
        assert consumer.subscriptions["PullTopic"].sub_string == "*"


async def test_pull_block_if_not_found_returns_when_a_message_arrives(
    namesrv: NamesrvController, start_broker: StartBroker
) -> None:
    broker = await start_broker("broker-a")
    mq = MessageQueue("HoldTopic", "broker-a", 0)
    async with (
        PullConsumer("CG", client_config=_client(namesrv)) as consumer,
        Producer("PG2", client_config=_client(namesrv, "p2")) as producer,
    ):
        # The topic is created by a send to another queue; queue 0 stays empty.
        other = MessageQueue("HoldTopic", "broker-a", 1)
        await producer.send(Message("HoldTopic", b"other"), mq=other)
        held = asyncio.ensure_future(consumer.pull_block_if_not_found(mq, "*", 0, 32))
        await wait_until(lambda: broker.hold.held_count == 1, what="the pull held by the broker")
        assert not held.done()
        await producer.send(Message("HoldTopic", b"wake"), mq=mq)
        result = await asyncio.wait_for(held, 15)
        assert result.status is PullStatus.FOUND
        assert [m.body for m in result.msg_found_list] == [b"wake"]


async def test_offsets_committed_and_read_back(
    namesrv: NamesrvController, start_broker: StartBroker
) -> None:
    await start_broker("broker-a")
    await _produce(namesrv, "OffTopic", 8)
    mq = MessageQueue("OffTopic", "broker-a", 1)
    async with PullConsumer("CG", client_config=_client(namesrv)) as consumer:
        consumer.update_consume_offset(mq, 2)
        await consumer.persist_offsets_now()
        assert await consumer.fetch_consume_offset(mq, from_store=True) == 2
        consumer.update_consume_offset(mq, 1)  # only persisted at shutdown
    async with PullConsumer("CG", client_config=_client(namesrv, "again")) as again:
        assert await again.fetch_consume_offset(mq) == 1


async def test_broadcasting_offsets_live_in_a_local_file(
    namesrv: NamesrvController, start_broker: StartBroker, tmp_path: Path
) -> None:
    await start_broker("broker-a")
    config = PullConsumerConfig(message_model="BROADCASTING", offset_store_dir=tmp_path / "offs")
    mq = MessageQueue("T", "broker-a", 0)
    client = _client(namesrv, "bc")
    async with PullConsumer("CG", client_config=client, config=config) as consumer:
        consumer.update_consume_offset(mq, 5)
        assert consumer.consumer_data().message_model.name == "BROADCASTING"
    path = tmp_path / "offs" / client.client_id() / "CG" / "offsets.json"
    assert '"queueId":0,"topic":"T"}:5' in path.read_text("utf-8")
    async with PullConsumer("CG", client_config=client, config=config) as consumer:
        assert await consumer.fetch_consume_offset(mq) == 5


async def test_one_group_per_instance_and_state_errors(namesrv: NamesrvController) -> None:
    with pytest.raises(ClientStateError):
        _ = PullConsumer("CG", client_config=_client(namesrv)).offset_store
    with pytest.raises(InvalidArgumentError, match="can not equal DEFAULT_CONSUMER"):
        PullConsumer("DEFAULT_CONSUMER", namesrv.address)
    with pytest.raises(InvalidArgumentError, match="namesrv_addr or client_config"):
        PullConsumer("CG")
    manager = ClientManager()
    async with PullConsumer("CG", client_config=_client(namesrv), manager=manager) as first:
        assert first.consumer_data().consume_type.name == "CONSUME_ACTIVELY"
        with pytest.raises(ClientStateError, match="has been created before"):
            await PullConsumer("CG", client_config=_client(namesrv), manager=manager).start()
    await manager.close()


async def test_json_headers_only_as_with_a_stock_broker(
    namesrv: NamesrvController, start_broker: StartBroker
) -> None:
    """Apache brokers read JSON (and ROCKETMQ) headers only: the client works that way too."""
    await start_broker("broker-a")
    json_only = RemotingClientConfig(serialize_type="JSON")
    producer_cfg = ClientConfig(
        namesrv_addr=namesrv.address, client_ip="127.0.0.1", instance_name="pj", remoting=json_only
    )
    consumer_cfg = ClientConfig(
        namesrv_addr=namesrv.address, client_ip="127.0.0.1", instance_name="cj", remoting=json_only
    )
    mq = MessageQueue("JsonTopic", "broker-a", 2)
    async with Producer("PG", client_config=producer_cfg) as producer:
        sent = [
            await producer.send(Message("JsonTopic", f"j{i}".encode()), mq=mq) for i in range(5)
        ]
        batch = await producer.send_batch(
            [Message("JsonTopic", b"b1"), Message("JsonTopic", b"b2")], mq=mq
        )
    assert [r.queue_offset for r in sent] == [0, 1, 2, 3, 4] and batch.queue_offset == 5
    async with PullConsumer("CG", client_config=consumer_cfg) as consumer:

        async def all_there() -> bool:
            return await consumer.max_offset(mq) == 7

        await wait_until(all_there, what="7 messages dispatched")
        result = await consumer.pull(mq, "*", 0, 32)
        assert [m.body for m in result.msg_found_list] == [
            b"j0",
            b"j1",
            b"j2",
            b"j3",
            b"j4",
            b"b1",
            b"b2",
        ]
        consumer.update_consume_offset(mq, 7)
        await consumer.persist_offsets_now()
        assert await consumer.fetch_consume_offset(mq, from_store=True) == 7
