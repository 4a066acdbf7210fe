"""The push consumer as a Python user expects it, against real ``mqnamesrv`` + ``mqbroker``.

- A listener that returns None consumed its messages; one returning ``0`` too, with
  one warning; neither sends anything to ``%RETRY%`` (the issue's new user saw 1,010
  of 2,011 messages come back for ``lambda msgs, ctx: 0``). One that raises gets
  the message again, reconsumeTimes 1.
- A blocking ``def`` listener runs on the consume thread pool: many calls at once;
  an orderly one still consumes each queue one call at a time, several queues at once.
- ``deliveries()``: explicit ``ack()`` / ``nack()`` and ``async with delivery``.
- ``messages()`` without ``aclosing``: a ``break`` acknowledges the message in hand
  (it is not consumed again), an exception out of ``async with consumer`` sends it
  back.
- ``NAMESRV_ADDR`` when no address is given, and ``Message(..., tags=, keys=)``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest

from aiorocketmq.client import (
    ClientConfig,
    ConsumeOrderlyStatus,
    Message,
    MessageExt,
    MessageQueue,
    MQBrokerError,
    MQClientError,
    Producer,
    ProducerConfig,
    PullConsumer,
    PushConsumer,
    PushConsumerConfig,
    select_by_hash,
)
from aiorocketmq.common.constants import SCHEDULE_TOPIC_XXXX
from aiorocketmq.remoting.broker_headers import QueryConsumerOffsetRequestHeader
from aiorocketmq.remoting.codes import RequestCode
from aiorocketmq.remoting.command import RemotingCommand
from tests.support.cluster import broker_request, start_broker, start_namesrv
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(120)

StartProcess = Callable[..., ManagedProcess]

FAST_DELAYS = " ".join(["1s"] * 18)
"""Every delay level 1 s, so retries come back quickly."""

FIRST = PushConsumerConfig(consume_from_where="CONSUME_FROM_FIRST_OFFSET")


def client(namesrv: str, name: str) -> ClientConfig:
    """A client whose routes refresh every second (retry topics appear quickly)."""
    return ClientConfig(
        namesrv_addr=namesrv,
        client_ip="127.0.0.1",
        instance_name=name,
        poll_name_server_interval=1_000,
    )


async def send_keys(namesrv: str, topic: str, keys: list[str]) -> None:
    config = ProducerConfig(default_topic_queue_nums=4)
    async with Producer("PG", config=config, client_config=client(namesrv, "p")) as producer:
        for key in keys:
            await producer.send(Message(topic, key.encode(), keys=key))


async def committed_everything(namesrv: str, group: str, topic: str) -> bool:
    """Whether ``group``'s committed offset (on the broker) is at the end of every queue.

    The checker is a client of its own group: a consumer of ``group`` would join it,
    and its arrival makes the group's push consumer rebalance and drop queues whose
    last consume is still finishing, so they are delivered again once taken back.
    """
    async with PullConsumer("CG-offset-checker", client_config=client(namesrv, "check")) as checker:
        mqs = await checker.fetch_subscribe_message_queues(topic)
        await checker.instance.update_topic_route(topic)
        for mq in mqs:
            address = checker.instance.find_broker_address_in_publish(mq.broker_name)
            assert address is not None
            header = QueryConsumerOffsetRequestHeader(group, topic, mq.queue_id)
            try:
                committed = await checker.instance.api.query_consumer_offset(address, header, 3_000)
            except MQBrokerError:  # QUERY_NOT_FOUND: nothing committed yet
                return False
            if committed != await checker.max_offset(mq):
                return False
    return True


async def ever_delayed(broker: str) -> int:
    """Messages the broker ever delayed: every send-back (CONSUMER_SEND_MSG_BACK, or its
    fallback send to ``%RETRY%``) waits in ``SCHEDULE_TOPIC_XXXX`` first."""
    total = 0
    for queue_id in range(18):  # one queue per delay level
        request = RemotingCommand.request(
            RequestCode.GET_MAX_OFFSET, {"topic": SCHEDULE_TOPIC_XXXX, "queueId": str(queue_id)}
        )
        total += int((await broker_request(broker, request)).ext_fields["offset"])
    return total


async def ever_delayed_is(broker: str, count: int) -> bool:
    return await ever_delayed(broker) == count


async def retry_topic_messages(namesrv: str, group: str) -> int:
    """Messages ever sent to ``%RETRY%<group>`` (0 while it has no route)."""
    async with PullConsumer("CG-reader", client_config=client(namesrv, "retry-reader")) as reader:
        try:
            mqs = await reader.fetch_subscribe_message_queues(f"%RETRY%{group}")
        except MQClientError:
            return 0
        return sum([await reader.max_offset(mq) for mq in mqs])


async def consumed_and_committed(
    consumer: PushConsumer, namesrv: str, topic: str, done: Callable[[], bool]
) -> None:
    async def check() -> bool:
        if not done():
            return False
        await consumer.persist_consumer_offset()  # oneway: checked on the broker next
        return await committed_everything(namesrv, consumer.group, topic)

    await wait_until(check, timeout=30, what=f"{consumer.group} consumed and committed {topic}")


async def test_listener_answers_none_zero_and_raise(
    start_process: StartProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(
        start_process, tmp_path, namesrv, "broker-a", messageDelayLevel=FAST_DELAYS
    )
    keys = [f"k{i}" for i in range(10)] + ["boom"]
    await send_keys(namesrv, "PyListen", keys)
    seen: dict[str, Counter[str]] = {"none": Counter(), "zero": Counter()}
    boom: list[int] = []

    def forgets_return(msgs: list[MessageExt], _ctx: object) -> None:
        seen["none"].update(m.keys[0] for m in msgs)

    def returns_zero(msgs: list[MessageExt], _ctx: object) -> int:
        seen["zero"].update(m.keys[0] for m in msgs)
        return 0

    async def raises_once(msgs: list[MessageExt], _ctx: object) -> None:
        for msg in msgs:
            if msg.keys[0] == "boom":
                boom.append(msg.reconsume_times)
                if msg.reconsume_times == 0:
                    raise RuntimeError("first attempt fails")

    consumers = []
    for group, listener in (
        ("CG-none", forgets_return),
        ("CG-zero", returns_zero),
        ("CG-raise", raises_once),
    ):
        consumer = PushConsumer(group, config=FIRST, client_config=client(namesrv, group))
        consumer.subscribe("PyListen", "*")
        consumer.register_message_listener(listener)
        consumers.append(consumer)
    with caplog.at_level(logging.WARNING, "aiorocketmq.client.listener"):
        async with consumers[0], consumers[1], consumers[2]:
            for consumer, name in zip(consumers[:2], ("none", "zero"), strict=True):
                await consumed_and_committed(
                    consumer, namesrv, "PyListen", lambda n=name: set(seen[n]) == set(keys)
                )
            await wait_until(lambda: boom == [0, 1], timeout=30, what="boom consumed again")
    # Committed to the end, each message once, and the broker delayed one message
    # in all (boom): a send-back of CG-none or CG-zero would have come before their
    # offsets moved past it.
    assert seen["none"] == Counter(keys) and seen["zero"] == Counter(keys)
    assert await ever_delayed(broker.addr) == 1
    assert await retry_topic_messages(namesrv, "CG-raise") == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "CG-zero returned 0 (int)" in warnings[0], warnings


async def test_blocking_def_listeners_run_on_the_consume_threads(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv, "broker-a")
    keys = [f"k{i}" for i in range(120)]
    await send_keys(namesrv, "PyBlock", keys)
    lock = threading.Lock()
    inside, most, threads = 0, 0, set()
    seen: Counter[str] = Counter()

    def blocking(msgs: list[MessageExt], _ctx: object) -> None:
        nonlocal inside, most
        with lock:
            inside += 1
            most = max(most, inside)
            threads.add(threading.current_thread().name)
        time.sleep(0.04)  # a database call, as the user had
        with lock:
            inside -= 1
            seen.update(m.keys[0] for m in msgs)

    config = PushConsumerConfig(
        consume_from_where="CONSUME_FROM_FIRST_OFFSET", consume_thread_max=10
    )
    consumer = PushConsumer("CG-block", config=config, client_config=client(namesrv, "b"))
    consumer.subscribe("PyBlock", "*")
    consumer.register_message_listener(blocking)
    async with consumer:
        await wait_until(lambda: set(seen) == set(keys), timeout=60, what="every key consumed")
        info = await consumer.running_info()
    # Before, each call blocked the loop: one at a time (~25 msgs/s at 40 ms each).
    assert most == 10, most
    assert all(name.startswith("ConsumeMessageThread_CG-block") for name in threads)
    assert info.properties["consumeThreadMax"] == "10"
    assert info.properties["consumeThreadMin"] == "10"  # follows max down when unset


async def test_orderly_def_listener_one_call_per_queue_several_queues_at_once(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv, "broker-a")
    config = ProducerConfig(default_topic_queue_nums=4)
    async with Producer("PG", config=config, client_config=client(namesrv, "p")) as producer:
        for seq in range(10):
            for key in ("a", "b", "c", "d", "e", "f"):
                msg = Message("PyOrder", b"o", keys=f"{key}:{seq}")
                await producer.send(msg, selector=select_by_hash, arg=key)
    intervals: dict[MessageQueue, list[tuple[float, float]]] = defaultdict(list)
    by_key: dict[str, list[int]] = defaultdict(list)

    def orderly(msgs: list[MessageExt], ctx: object) -> ConsumeOrderlyStatus:
        start = time.monotonic()
        time.sleep(0.02)
        for msg in msgs:
            key, seq = msg.keys[0].split(":")
            by_key[key].append(int(seq))
        mq = getattr(ctx, "message_queue")  # noqa: B009 - the context's public field
        intervals[mq].append((start, time.monotonic()))
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer("CG-oblock", config=FIRST, client_config=client(namesrv, "o"))
    consumer.subscribe("PyOrder", "*")
    consumer.register_message_listener(orderly, orderly=True)
    async with consumer:
        await wait_until(
            lambda: sum(len(v) for v in by_key.values()) >= 60, timeout=60, what="60 messages"
        )
    assert all(seqs == list(range(10)) for seqs in by_key.values()), dict(by_key)
    spans = [(s, e, mq) for mq, items in intervals.items() for s, e in items]
    for mq, items in intervals.items():  # one call at a time per queue
        ordered = sorted(items)
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(ordered)), mq
    overlapping_queues = {
        (a[2], b[2]) for a in spans for b in spans if a[2] != b[2] and a[0] < b[1] and b[0] < a[1]
    }
    assert overlapping_queues, "no two queues were ever consumed at the same time"


async def test_deliveries_ack_and_nack(start_process: StartProcess, tmp_path: Path) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv, "broker-a", messageDelayLevel=FAST_DELAYS)
    keys = ["a", "b", "c", "nack-me", "raise-in-with"]
    await send_keys(namesrv, "PyAck", keys)
    attempts: dict[str, list[int]] = defaultdict(list)
    acked: set[str] = set()
    consumer = PushConsumer("CG-ack", config=FIRST, client_config=client(namesrv, "a"))
    consumer.subscribe("PyAck", "*")
    async with consumer:
        async with consumer.deliveries() as stream:
            async for delivery in stream:
                key = delivery.message.keys[0]
                attempts[key].append(delivery.message.reconsume_times)
                if key == "nack-me" and delivery.message.reconsume_times == 0:
                    await delivery.nack()
                    continue
                try:
                    async with delivery:  # acks on success, nacks when the block raises
                        if key == "raise-in-with" and delivery.message.reconsume_times == 0:
                            raise ValueError("handler failed")
                except ValueError:
                    assert delivery.settled == "nack"
                    continue
                assert delivery.settled == "ack"
                acked.add(key)
                if acked == set(keys):
                    break
        await consumed_and_committed(consumer, namesrv, "PyAck", lambda: True)
    assert attempts["nack-me"] == [0, 1] and attempts["raise-in-with"] == [0, 1]
    assert attempts["a"] == [0]
    assert await retry_topic_messages(namesrv, "CG-ack") == 2  # both came back through it


async def test_messages_break_acknowledges_and_a_raise_sends_back(
    start_process: StartProcess, tmp_path: Path
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    broker = await start_broker(
        start_process, tmp_path, namesrv, "broker-a", messageDelayLevel=FAST_DELAYS
    )
    await send_keys(namesrv, "PyLoop", ["first"])

    def consumer() -> PushConsumer:
        push = PushConsumer("CG-loop", config=FIRST, client_config=client(namesrv, "l"))
        push.subscribe("PyLoop", "*")
        return push

    # The README's loop, without aclosing: break after the first message.
    async with consumer() as push:
        async for msg in push.messages():
            assert msg.keys == ["first"]
            break
    assert await committed_everything(namesrv, "CG-loop", "PyLoop")
    assert await ever_delayed(broker.addr) == 0  # not sent back

    await send_keys(namesrv, "PyLoop", ["second"])
    with pytest.raises(RuntimeError, match="handler failed"):
        async with consumer() as push:
            async for msg in push.messages():
                assert msg.keys == ["second"]  # "first" was not consumed again
                raise RuntimeError("handler failed")
    # Sent back, on its way to %RETRY%: its unit in the schedule topic's queue (what
    # GET_MAX_OFFSET counts) may follow the consumer's exit by a moment, since that
    # queue's first file is made off the broker's loop.
    await wait_until(
        lambda: ever_delayed_is(broker.addr, 1), timeout=10, what="the message sent back"
    )

    async with consumer() as push:
        async for msg in push.messages():
            again = msg
            break
    assert again.keys == ["second"] and again.reconsume_times == 1


async def test_namesrv_addr_from_the_environment_and_message_keywords(
    start_process: StartProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv, "broker-a")
    monkeypatch.setenv("NAMESRV_ADDR", namesrv)
    async with Producer("PG-env") as producer:  # no address: NAMESRV_ADDR, as Java's
        assert producer.client_config.namesrv_addr == namesrv
        await producer.send(Message("PyEnv", b"skip", tags="TagB"))
        await producer.send(Message("PyEnv", b"hello", tags="TagA", keys=["k1", "k2"]))
    consumer = PushConsumer("CG-env", config=FIRST)
    consumer.subscribe("PyEnv", "TagA")
    async with consumer:
        async for delivery in consumer.deliveries():
            async with delivery:
                got = delivery.message
            break
    assert (got.body, got.tags, got.keys) == (b"hello", "TagA", ["k1", "k2"])
    monkeypatch.delenv("NAMESRV_ADDR")
    with pytest.raises(ValueError, match="NAMESRV_ADDR"):
        Producer("PG-env")


async def test_flow_control_holds_pulls_back_and_consuming_wakes_them(
    start_process: StartProcess, tmp_path: Path
) -> None:
    """A queue at pullThresholdForQueue stops pulling; each consumed message wakes its
    pull loop (an event, not Java's 50 ms poll), and everything is consumed in the end."""
    _, namesrv = await start_namesrv(start_process, tmp_path)
    await start_broker(start_process, tmp_path, namesrv, "broker-a")
    keys = [f"f{i}" for i in range(120)]
    await send_keys(namesrv, "PyFlow", keys)
    gate, seen, most_held = asyncio.Event(), Counter[str](), [0]
    config = FIRST.model_copy(update={"pull_threshold_for_queue": 5, "pull_batch_size": 4})
    consumer = PushConsumer("CG-flow", config=config, client_config=client(namesrv, "flow"))
    consumer.subscribe("PyFlow", "*")

    async def listener(msgs: list[MessageExt], _ctx: object) -> None:
        await gate.wait()
        seen.update(k for m in msgs for k in m.keys)
        most_held[0] = max(most_held[0], *flow_held(consumer))

    consumer.register_message_listener(listener)
    async with consumer:
        await wait_until(
            lambda: len(held := flow_held(consumer)) == 4 and min(held) >= 5,
            timeout=30,
            what="every queue held back at its threshold",
        )
        held = flow_held(consumer)
        assert max(held) <= 5 + 4, held  # the pull that crossed the line was the last
        gate.set()
        await wait_until(lambda: set(seen) == set(keys), timeout=30, what="all consumed")
    assert seen == Counter(keys)
    assert most_held[0] <= 5 + 4


def flow_held(consumer: PushConsumer) -> list[int]:
    """Messages each PyFlow queue holds (the group's retry queue left out)."""
    table = consumer.rebalance.process_queue_table
    return [pq.msg_count for mq, pq in table.items() if mq.topic == "PyFlow"]
