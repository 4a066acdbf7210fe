"""AdminStatsProcessor on a real store, server and client: runtime info, topic and
consume stats after real sends and pulls, and connection listings after real heartbeats."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.processors.admin_stats import (
    AdminStatsProcessor,
    BrokerStats,
    StoreStatsSampler,
    format_runtime,
    human_readable_byte_count,
    java_double,
)
from aiorocketmq.broker.processors.client_manage import ClientManageProcessor
from aiorocketmq.broker.processors.send import SendProcessor
from aiorocketmq.common.admin_bodies import ConsumeStats, OffsetWrapper, TopicStatsTable
from aiorocketmq.common.clock import ManualClock
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.protocol_bodies import (
    ConsumerConnection,
    ConsumerData,
    HeartbeatData,
    ProducerConnection,
    ProducerData,
    build_subscription_data,
)
from aiorocketmq.common.route import KVTable
from aiorocketmq.remoting.codes import LanguageCode, RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable
from aiorocketmq.store.store_stats import StoreStats
from tests.unit.broker.broker_support import GROUP, TOPIC, Harness, harness, pull_request
from tests.unit.broker.processor_support import send_request
from tests.unit.store.store_support import dispatched

R = RequestCode
BOOT_MS = 1_690_000_000_000

#: Every key 4.9.8's prepareRuntimeInfo and DefaultMessageStore.getRuntimeInfo give
#: on a broker without a transient pool or schedule levels (the per-path disk key aside).
JAVA_KEYS = {
    "bootTimestamp", "runtime", "putMessageEntireTimeMax", "putMessageTimesTotal",
    "putMessageFailedTimes", "putMessageSizeTotal", "putMessageDistributeTime",
    "putMessageAverageSize", "dispatchMaxBuffer", "getMessageEntireTimeMax", "putTps",
    "getFoundTps", "getMissTps", "getTotalTps", "getTransferedTps", "putLatency99",
    "putLatency999", "commitLogDiskRatio", "consumeQueueDiskRatio", "commitLogMinOffset",
    "commitLogMaxOffset", "brokerVersionDesc", "brokerVersion", "msgPutTotalYesterdayMorning",
    "msgPutTotalTodayMorning", "msgPutTotalTodayNow", "msgGetTotalYesterdayMorning",
    "msgGetTotalTodayMorning", "msgGetTotalTodayNow", "sendThreadPoolQueueSize",
    "sendThreadPoolQueueCapacity", "pullThreadPoolQueueSize", "pullThreadPoolQueueCapacity",
    "queryThreadPoolQueueSize", "queryThreadPoolQueueCapacity", "EndTransactionQueueSize",
    "EndTransactionThreadPoolQueueCapacity", "dispatchBehindBytes", "pageCacheLockTimeMills",
    "sendThreadPoolQueueHeadWaitTimeMills", "pullThreadPoolQueueHeadWaitTimeMills",
    "queryThreadPoolQueueHeadWaitTimeMills", "earliestMessageTimeStamp",
    "startAcceptSendRequestTimeStamp", "remainTransientStoreBufferNumbs",
    "remainHowManyDataToFlush", "commitLogDirCapacity",
}  # fmt: skip


@contextlib.asynccontextmanager
async def stats_harness(tmp_path: Path, **kwargs: Any) -> AsyncIterator[Harness]:
    def extra(ctx: BrokerContext, table: ProcessorTable) -> None:
        SendProcessor(ctx).register(table)
        ClientManageProcessor(ctx).register(table)
        AdminStatsProcessor(ctx, boot_timestamp_ms=BOOT_MS, **kwargs).register(table)

    async with harness(tmp_path, extra=extra) as h:
        yield h


def request(code: int, **fields: str) -> RemotingCommand:
    return RemotingCommand.request(code, dict(fields))


async def runtime_info(h: Harness) -> dict[str, str]:
    reply = await h.invoke(request(R.GET_BROKER_RUNTIME_INFO))
    assert (reply.code, reply.remark) == (ResponseCode.SUCCESS, None)
    return KVTable.decode(reply.body).table


async def send(h: Harness, count: int, queue_id: int = 0, topic: str = TOPIC) -> None:
    for _ in range(count):
        reply = await h.invoke(send_request(topic=topic, queue_id=queue_id))
        assert reply.code == ResponseCode.SUCCESS, reply.remark
    await dispatched(h.ctx.store)


# -- runtime info --------------------------------------------------------------------------


async def test_runtime_info_of_a_fresh_broker(tmp_path: Path) -> None:
    async with stats_harness(tmp_path) as h:
        info = await runtime_info(h)
        commit_log_dir = h.ctx.store_config.commit_log_dir
        assert set(info) == JAVA_KEYS | {f"commitLogDiskRatio_{commit_log_dir}"}
        assert all(isinstance(v, str) for v in info.values())
        assert (info["brokerVersionDesc"], info["brokerVersion"]) == ("V4_9_8", "409")
        assert info["bootTimestamp"] == str(BOOT_MS)
        assert re.fullmatch(
            r"\[ [\d,]+ days, \d+ hours, \d+ minutes, \d+ seconds \]", info["runtime"]
        )
        # Java's quirk: the put count reads 1 before the first put
        assert (info["putMessageTimesTotal"], info["msgPutTotalTodayNow"]) == ("1", "0")
        assert info["putMessageAverageSize"] == "0.0"
        # no sampler: the values a Java broker gives before it has samples
        assert (info["putTps"], info["getTotalTps"]) == ("  ", "0.0 0.0 0.0")
        assert info["putMessageDistributeTime"] == "null"
        assert info["remainTransientStoreBufferNumbs"] == "2147483647"
        assert info["sendThreadPoolQueueCapacity"] == str(
            h.ctx.config.send_thread_pool_queue_capacity
        )
        assert info["earliestMessageTimeStamp"] == "-1"
        ratio = float(info["commitLogDiskRatio"])
        assert (
            0.0 < ratio <= 1.0
            and info[f"commitLogDiskRatio_{commit_log_dir}"] == info["commitLogDiskRatio"]
        )
        assert 0.0 < float(info["consumeQueueDiskRatio"]) <= 1.0
        assert re.fullmatch(
            r"Total : \d+\.\d [KMGTPE]iB, Free : (\d+\.\d [KMGTPE]iB|\d+ B)\.",
            info["commitLogDirCapacity"],
        )


async def test_runtime_info_counts_real_sends_and_pulls(tmp_path: Path) -> None:
    async with stats_harness(tmp_path) as h:
        await send(h, 5)
        pulled = await h.invoke(pull_request(0, max_msgs=3))
        assert pulled.code == ResponseCode.SUCCESS
        info = await runtime_info(h)
        store = h.ctx.store
        assert info["putMessageTimesTotal"] == info["msgPutTotalTodayNow"] == "5"
        size_total = store.stats.put_message_size_total
        assert size_total > 0 and info["putMessageSizeTotal"] == str(size_total)
        assert info["putMessageAverageSize"] == java_double(size_total / 5)
        assert info["msgGetTotalTodayNow"] == "3"
        assert info["commitLogMaxOffset"] == str(store.max_phy_offset) and store.max_phy_offset > 0
        assert info["commitLogMinOffset"] == "0"
        assert info["dispatchBehindBytes"] == "0"
        earliest = store.get_earliest_store_time()
        assert earliest > 0 and info["earliestMessageTimeStamp"] == str(earliest)
        assert info["msgPutTotalTodayMorning"] == "0"


async def test_runtime_info_with_sampler_daily_stats_and_extension(tmp_path: Path) -> None:
    clock = ManualClock()
    stats = StoreStats()
    sampler = StoreStatsSampler(stats, clock)
    daily = BrokerStats(stats, clock)
    for second in range(11):
        if second:
            clock.advance(1000)
        stats.put_message_times_total = 50 * second
        stats.get_message_times_total_found = 2 * second
        stats.get_message_times_total_miss = second
        stats.get_message_transfered_msg_count = 20 * second
        sampler.sample()
    stats.put_message_times_total, stats.get_message_transfered_msg_count = 100, 40
    daily.record()
    stats.put_message_times_total, stats.get_message_transfered_msg_count = 130, 70
    daily.record()
    extension = {"masterAddr": "127.0.0.1:10912"}
    async with stats_harness(
        tmp_path, sampler=sampler, broker_stats=daily, extra_runtime_info=lambda: extension
    ) as h:
        info = await runtime_info(h)
    # 11 samples: the 10 s window has a figure, 1 min and 10 min do not yet
    assert info["putTps"] == "50.0  "
    assert info["getFoundTps"] == "2.0  "
    assert info["getMissTps"] == "1.0  "
    assert info["getTotalTps"] == "3.0 0.0 0.0"
    assert info["getTransferedTps"] == "20.0  "
    assert (info["msgPutTotalYesterdayMorning"], info["msgPutTotalTodayMorning"]) == ("100", "130")
    assert (info["msgGetTotalYesterdayMorning"], info["msgGetTotalTodayMorning"]) == ("40", "70")
    assert info["masterAddr"] == "127.0.0.1:10912"


async def test_sampler_service_samples_at_start(tmp_path: Path) -> None:
    clock = ManualClock()
    stats = StoreStats(put_message_times_total=7)
    sampler = StoreStatsSampler(stats, clock, interval_ms=60_000)
    await sampler.start()
    try:
        assert sampler.runtime_info()["putTps"] == "  "
        for _ in range(10):
            clock.advance(500)
            stats.put_message_times_total += 1
            sampler.sample()
        assert sampler.runtime_info()["putTps"] == "2.0  "
    finally:
        await sampler.shutdown()


async def test_broker_stats_service_waits_for_midnight() -> None:
    clock = ManualClock()
    stats = StoreStats(put_message_times_total=9)
    daily = BrokerStats(stats, clock)
    await daily.start()
    try:
        # started, but nothing recorded before the first midnight (as Java)
        assert daily.running and daily.msg_put_total_today_morning == 0
    finally:
        await daily.shutdown()
    assert daily.failures == []


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0.0"),
        (3.0, "3.0"),
        (12.5, "12.5"),
        (0.001, "0.001"),
        (1e7, "1.0E7"),
        (123456789.0, "1.23456789E8"),
        (0.0001, "1.0E-4"),
        (-2.5e-5, "-2.5E-5"),
    ],
)
def test_java_double(value: float, text: str) -> None:
    assert java_double(value) == text


def test_human_readable_and_runtime_text() -> None:
    assert [human_readable_byte_count(n) for n in (0, 1023, 1024, 1536, 5 * 1024**3)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "1.5 KiB",
        "5.0 GiB",
    ]
    assert format_runtime(90_061_001) == "[ 1 days, 1 hours, 1 minutes, 1 seconds ]"
    assert format_runtime(1000 * 86_400_000) == "[ 1,000 days, 0 hours, 0 minutes, 0 seconds ]"


# -- topic stats -------------------------------------------------------------------------------


async def test_topic_stats_after_sends(tmp_path: Path) -> None:
    async with stats_harness(tmp_path) as h:
        await send(h, 3, queue_id=0)
        await send(h, 1, queue_id=2)
        reply = await h.invoke(request(R.GET_TOPIC_STATS_INFO, topic=TOPIC))
        assert (reply.code, reply.remark) == (ResponseCode.SUCCESS, None)
        assert reply.body.startswith(b'{"offsetTable":{{"brokerName":')  # fastjson's object keys
        table = TopicStatsTable.decode(reply.body).offset_table
        name = h.ctx.config.broker_name
        assert set(table) == {MessageQueue(TOPIC, name, q) for q in range(4)}
        store = h.ctx.store
        q0, q2 = table[MessageQueue(TOPIC, name, 0)], table[MessageQueue(TOPIC, name, 2)]
        assert (q0.min_offset, q0.max_offset) == (0, 3)
        assert q0.last_update_timestamp == store.get_message_store_timestamp(TOPIC, 0, 2) > 0
        assert (q2.min_offset, q2.max_offset) == (0, 1)
        q1 = table[MessageQueue(TOPIC, name, 1)]
        assert (q1.min_offset, q1.max_offset, q1.last_update_timestamp) == (0, 0, 0)


async def test_topic_stats_unknown_topic_and_bad_header(tmp_path: Path) -> None:
    async with stats_harness(tmp_path) as h:
        reply = await h.invoke(request(R.GET_TOPIC_STATS_INFO, topic="Nope"))
        assert (reply.code, reply.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[Nope] not exist")
        reply = await h.invoke(request(R.GET_TOPIC_STATS_INFO))
        assert (reply.code, reply.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "the custom field <topic> is null",
        )


# -- consume stats -------------------------------------------------------------------------------


async def consume_stats(h: Harness, **fields: str) -> ConsumeStats:
    reply = await h.invoke(request(R.GET_CONSUME_STATS, **fields))
    assert (reply.code, reply.remark) == (ResponseCode.SUCCESS, None)
    return ConsumeStats.decode(reply.body)


async def test_consume_stats_from_offsets(tmp_path: Path) -> None:
    async with stats_harness(tmp_path, group_get_tps=lambda group, topic: 2.5) as h:
        await send(h, 3, queue_id=0)
        await send(h, 1, queue_id=1)
        h.ctx.offsets.commit_offset("client", GROUP, TOPIC, 0, 2)
        name = h.ctx.config.broker_name
        stats = await consume_stats(h, consumerGroup=GROUP, topic=TOPIC)
        assert set(stats.offset_table) == {MessageQueue(TOPIC, name, q) for q in range(4)}
        stored_at = h.ctx.store.get_message_store_timestamp(TOPIC, 0, 1)
        assert stats.offset_table[MessageQueue(TOPIC, name, 0)] == OffsetWrapper(3, 2, stored_at)
        assert stats.offset_table[MessageQueue(TOPIC, name, 1)] == OffsetWrapper(1, 0, 0)
        assert stats.compute_total_diff() == 2
        assert stats.consume_tps == 2.5
        # no topic: the topics the group has offsets in
        assert await consume_stats(h, consumerGroup=GROUP) == stats
        assert await consume_stats(h, consumerGroup=GROUP, topic=" ") == stats
        # unknown group or topic: an empty table, as Java answers
        assert (await consume_stats(h, consumerGroup="CID_none")).offset_table == {}
        assert (await consume_stats(h, consumerGroup=GROUP, topic="Nope")).offset_table == {}
        reply = await h.invoke(request(R.GET_CONSUME_STATS, topic=TOPIC))
        assert (reply.code, reply.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "the custom field <consumerGroup> is null",
        )


async def test_consume_stats_skip_topics_online_clients_do_not_subscribe(tmp_path: Path) -> None:
    async with stats_harness(tmp_path) as h:
        h.ctx.offsets.commit_offset("client", GROUP, TOPIC, 0, 1)
        assert (await h.invoke(heartbeat("c1", subscribe="OtherTopic"))).code == 0
        assert (await consume_stats(h, consumerGroup=GROUP, topic=TOPIC)).offset_table == {}
        assert (await h.invoke(heartbeat("c1", subscribe=TOPIC))).code == 0
        stats = await consume_stats(h, consumerGroup=GROUP, topic=TOPIC)
        assert len(stats.offset_table) == 4


# -- connections -------------------------------------------------------------------------------


def heartbeat(client_id: str, *, subscribe: str = TOPIC) -> RemotingCommand:
    data = HeartbeatData(
        client_id,
        producers=[ProducerData("PID_test")],
        consumers=[ConsumerData(GROUP, subscriptions=[build_subscription_data(subscribe, "*")])],
    )
    # sent as the C++ client does: its language is what the listing shows
    return RemotingCommand(
        code=RequestCode.HEART_BEAT, language=LanguageCode.CPP, body=data.encode()
    )


async def test_connection_lists_after_heartbeat(tmp_path: Path) -> None:
    async with stats_harness(tmp_path) as h:
        assert (await h.invoke(heartbeat("127.0.0.1@42"))).code == ResponseCode.SUCCESS
        (server_side,) = h.server.connections
        reply = await h.invoke(request(R.GET_CONSUMER_CONNECTION_LIST, consumerGroup=GROUP))
        assert (reply.code, reply.remark) == (ResponseCode.SUCCESS, None)
        consumer = ConsumerConnection.decode(reply.body)
        assert [(c.client_id, c.client_addr, c.language) for c in consumer.connections] == [
            ("127.0.0.1@42", server_side.remote_address, "CPP")
        ]
        assert list(consumer.subscriptions) == [TOPIC]
        assert b'"consumeType":"CONSUME_PASSIVELY"' in reply.body

        reply = await h.invoke(request(R.GET_PRODUCER_CONNECTION_LIST, producerGroup="PID_test"))
        assert (reply.code, reply.remark) == (ResponseCode.SUCCESS, None)
        producer = ProducerConnection.decode(reply.body)
        assert [(c.client_id, c.client_addr) for c in producer.connections] == [
            ("127.0.0.1@42", server_side.remote_address)
        ]


async def test_connection_lists_of_unknown_groups_and_bad_headers(tmp_path: Path) -> None:
    async with stats_harness(tmp_path) as h:
        reply = await h.invoke(request(R.GET_CONSUMER_CONNECTION_LIST, consumerGroup="CID_x"))
        assert (reply.code, reply.remark) == (
            ResponseCode.CONSUMER_NOT_ONLINE,
            "the consumer group[CID_x] not online",
        )
        reply = await h.invoke(request(R.GET_PRODUCER_CONNECTION_LIST, producerGroup="PID_x"))
        assert (reply.code, reply.remark) == (
            ResponseCode.SYSTEM_ERROR,
            "the producer group[PID_x] not exist",
        )
        for code, name in (
            (R.GET_CONSUMER_CONNECTION_LIST, "consumerGroup"),
            (R.GET_PRODUCER_CONNECTION_LIST, "producerGroup"),
        ):
            reply = await h.invoke(request(code))
            assert (reply.code, reply.remark) == (
                ResponseCode.SYSTEM_ERROR,
                f"the custom field <{name}> is null",
            )
