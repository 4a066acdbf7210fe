"""The broker's stats answers of RocketMQ 4.9.8's AdminBrokerProcessor, and their samplers.

Owns: GET_BROKER_RUNTIME_INFO (28: a ``KVTable`` with Java's keys),
GET_TOPIC_STATS_INFO (202), GET_CONSUME_STATS (208), GET_CONSUMER_CONNECTION_LIST
(203) and GET_PRODUCER_CONNECTION_LIST (204); ``StoreStatsSampler`` (Java
``StoreStatsService``'s once-a-second snapshots that give the TPS figures over 10 s,
1 min and 10 min) and ``BrokerStats`` (the daily put/get totals recorded at
midnight). The controller starts both services and passes them in.

Must not: change anything (``admin`` does), block the loop (disk figures are read
in the store's executor), or invent a figure: a key Java has that we do not
measure gets the value a Java broker gives when it has no data (see
``AdminStatsProcessor.runtime_info``).
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from collections import deque
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Final, NamedTuple

from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.common.admin_bodies import (
    ConsumeStats,
    OffsetWrapper,
    TopicOffset,
    TopicStatsTable,
)
from aiorocketmq.common.clock import Clock
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.common.route import KVTable
from aiorocketmq.remoting.broker_admin_headers import (
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
)
from aiorocketmq.remoting.codes import CURRENT_VERSION, MQVersion, RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.runtime import Service
from aiorocketmq.store.cleanup import disk_used_ratio_blocking
from aiorocketmq.store.store_stats import StoreStats

__all__ = [
    "AdminStatsProcessor",
    "BrokerStats",
    "GroupGetTps",
    "RuntimeInfoExtension",
    "StoreStatsSampler",
    "format_runtime",
    "human_readable_byte_count",
    "java_double",
]

log = logging.getLogger(__name__)

#: ``StoreStatsService.FREQUENCY_OF_SAMPLING``.
SAMPLING_INTERVAL_MS: Final = 1000
#: ``MAX_RECORDS_OF_SAMPLING``: 10 minutes of one-second samples.
MAX_RECORDS_OF_SAMPLING: Final = 600
#: The TPS windows Java reports, in samples (10 s, 1 min, 10 min).
_TPS_WINDOWS: Final = (10, 60, 600)
_DAY_MS: Final = 86_400_000
#: ``Integer.MAX_VALUE``: Java's ``availableBufferNums()`` without a transient pool.
_NO_TRANSIENT_POOL: Final = str(2**31 - 1)

#: Keys a master/slave setup adds (HA figures); called on every runtime-info request.
RuntimeInfoExtension = Callable[[], dict[str, str]]
#: ``BrokerStatsManager.tpsGroupGetNums(group, topic)``: a group's get TPS.
GroupGetTps = Callable[[str, str], float]


def java_double(value: float) -> str:
    """``String.valueOf(double)``: ``0.0``, ``12.5``, ``1.0E7``, ``1.0E-4``."""
    if value == 0:
        return "0.0"
    if math.isnan(value) or math.isinf(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    mantissa = "".join(map(str, digits))
    scale = len(mantissa) - 1 + exponent
    body = mantissa[0] + "." + (mantissa[1:] or "0")
    return f"{'-' if sign else ''}{body}E{scale}"


def human_readable_byte_count(size: int) -> str:
    """``MixAll.humanReadableByteCount(bytes, false)``: ``"512 B"``, ``"1.5 KiB"``."""
    if size < 1024:
        return f"{size} B"
    exp = int(math.log(size) / math.log(1024))
    return f"{size / 1024**exp:.1f} {'KMGTPE'[exp - 1]}iB"


def format_runtime(elapsed_ms: int) -> str:
    """``StoreStatsService.getFormatRuntime``'s ``MessageFormat`` text (grouped digits)."""
    elapsed_ms = max(elapsed_ms, 0)
    days, rest = divmod(elapsed_ms, _DAY_MS)
    hours, rest = divmod(rest, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    return f"[ {days:,} days, {hours:,} hours, {minutes:,} minutes, {rest // 1000:,} seconds ]"


class _Sample(NamedTuple):
    at_ms: int
    put: int
    get_found: int
    get_miss: int
    transfered: int


# Field positions in ``_Sample``.
_PUT, _FOUND, _MISS, _TRANSFERED = 1, 2, 3, 4


class StoreStatsSampler(Service):
    """Snapshots of the store's counters once a second (``StoreStatsService.sampling``).

    Args:
        stats: the store's counters.
        clock: gives the sample times (``monotonic_ms``).
        interval_ms: between samples (Java: 1000).
    """

    def __init__(
        self, stats: StoreStats, clock: Clock, *, interval_ms: int = SAMPLING_INTERVAL_MS
    ) -> None:
        super().__init__("StoreStatsSampler")
        self._stats = stats
        self._clock = clock
        self._interval_s = interval_ms / 1000
        # One more than the longest window: a 600-sample window needs 601 points.
        self._samples: deque[_Sample] = deque(maxlen=MAX_RECORDS_OF_SAMPLING + 1)

    async def on_start(self) -> None:
        """Take the first sample now, then one per interval."""
        self.sample()
        self.periodic(self._interval_s, self.sample, name="store-stats-sampling")

    def sample(self) -> None:
        """Record the counters now."""
        s = self._stats
        self._samples.append(
            _Sample(
                self._clock.monotonic_ms(),
                s.put_message_times_total,
                s.get_message_times_total_found,
                s.get_message_times_total_miss,
                s.get_message_transfered_msg_count,
            )
        )

    def _tps(self, field: int, window: int) -> float | None:
        # Java: needs more than ``window`` samples; the rate between the last one
        # and the one ``window`` samples before it.
        if len(self._samples) <= window:
            return None
        last, first = self._samples[-1], self._samples[-(window + 1)]
        elapsed = last.at_ms - first.at_ms
        if elapsed <= 0:
            return None
        return (last[field] - first[field]) * 1000 / elapsed

    def _tps_text(self, field: int) -> str:
        parts = [self._tps(field, w) for w in _TPS_WINDOWS]
        return " ".join("" if p is None else java_double(p) for p in parts)

    def runtime_info(self) -> dict[str, str]:
        """putTps, getFoundTps, getMissTps, getTotalTps, getTransferedTps as Java writes
        them: three figures (10 s, 1 min, 10 min), each empty until enough samples
        exist (getTotalTps reads 0.0 then)."""
        total = []
        for window in _TPS_WINDOWS:
            found = self._tps(_FOUND, window) or 0.0
            miss = self._tps(_MISS, window) or 0.0
            total.append(java_double(found + miss))
        return {
            "putTps": self._tps_text(_PUT),
            "getFoundTps": self._tps_text(_FOUND),
            "getMissTps": self._tps_text(_MISS),
            "getTotalTps": " ".join(total),
            "getTransferedTps": self._tps_text(_TRANSFERED),
        }


#: getTotalTps etc. with no sampler: what a Java broker reports before its first samples.
_UNSAMPLED: Final = {
    "putTps": "  ",
    "getFoundTps": "  ",
    "getMissTps": "  ",
    "getTotalTps": "0.0 0.0 0.0",
    "getTransferedTps": "  ",
}


class BrokerStats(Service):
    """Daily put/get totals (``BrokerStats``): recorded at each local midnight.

    Before the first midnight the morning figures are 0, as in Java.

    Args:
        stats: the store's counters.
        clock: for the delay to the next midnight.
    """

    def __init__(self, stats: StoreStats, clock: Clock) -> None:
        super().__init__("BrokerStats")
        self._stats = stats
        self._clock = clock
        self.msg_put_total_yesterday_morning = 0
        self.msg_put_total_today_morning = 0
        self.msg_get_total_yesterday_morning = 0
        self.msg_get_total_today_morning = 0

    async def on_start(self) -> None:
        """Schedule ``record`` at the next local midnight, then daily."""
        now_s = self._clock.now_ms() / 1000
        local = time.localtime(now_s)
        since_midnight = local.tm_hour * 3600 + local.tm_min * 60 + local.tm_sec
        delay_s = max(86_400 - since_midnight - (now_s % 1), 0.0)
        self.periodic(86_400, self.record, name="broker-stats-record", initial_delay_s=delay_s)

    def record(self) -> None:
        """Roll today's morning figures into yesterday's and take new ones."""
        self.msg_put_total_yesterday_morning = self.msg_put_total_today_morning
        self.msg_get_total_yesterday_morning = self.msg_get_total_today_morning
        self.msg_put_total_today_morning = self._stats.put_message_times_total
        self.msg_get_total_today_morning = self._stats.get_message_transfered_msg_count
        log.info(
            "yesterday put message total: %d, get message total: %d",
            self.msg_put_total_today_morning - self.msg_put_total_yesterday_morning,
            self.msg_get_total_today_morning - self.msg_get_total_yesterday_morning,
        )


def _disk_figures_blocking(commit_log_dir: Path, cq_dir: Path, root: Path) -> dict[str, str]:
    """The figures a Java broker reads from the file system (executor only)."""
    out: dict[str, str] = {}

    def ratio(path: Path) -> float:
        try:
            return disk_used_ratio_blocking(path)
        except OSError:
            return -1.0

    cl_ratio = ratio(commit_log_dir)
    out[f"commitLogDiskRatio_{commit_log_dir}"] = java_double(cl_ratio)
    out["commitLogDiskRatio"] = java_double(cl_ratio)
    out["consumeQueueDiskRatio"] = java_double(ratio(cq_dir))
    # Java adds the key only when the root directory exists.
    try:
        usage = shutil.disk_usage(root)
    except OSError:
        return out
    out["commitLogDirCapacity"] = (
        f"Total : {human_readable_byte_count(usage.total)}, "
        f"Free : {human_readable_byte_count(usage.free)}."
    )
    return out


class AdminStatsProcessor:
    """Runtime info, topic and consume stats, and connection listings for one broker.

    Args:
        ctx: the broker's parts.
        boot_timestamp_ms: when the store started (``bootTimestamp``); default: now.
        sampler: the TPS sampler (None: Java's figures before its first samples).
        broker_stats: the daily totals (None: the morning figures read 0).
        extra_runtime_info: more keys (a master's or slave's HA figures).
        group_get_tps: a group's get TPS for GET_CONSUME_STATS (None: 0.0, what
            Java's stats manager answers for a group it has no figures of).
    """

    def __init__(
        self,
        ctx: BrokerContext,
        *,
        boot_timestamp_ms: int | None = None,
        sampler: StoreStatsSampler | None = None,
        broker_stats: BrokerStats | None = None,
        extra_runtime_info: RuntimeInfoExtension | None = None,
        group_get_tps: GroupGetTps | None = None,
    ) -> None:
        self._ctx = ctx
        self._boot_ms = ctx.clock.now_ms() if boot_timestamp_ms is None else boot_timestamp_ms
        self._sampler = sampler
        self._broker_stats = broker_stats
        self._extra = extra_runtime_info
        self._group_get_tps = group_get_tps

    def register(self, table: ProcessorTable) -> None:
        """Route codes 28, 202, 203, 204 and 208 here."""
        table.register(RequestCode.GET_BROKER_RUNTIME_INFO, self.get_broker_runtime_info)
        table.register(RequestCode.GET_TOPIC_STATS_INFO, self.get_topic_stats_info)
        table.register(RequestCode.GET_CONSUMER_CONNECTION_LIST, self.get_consumer_connection_list)
        table.register(RequestCode.GET_PRODUCER_CONNECTION_LIST, self.get_producer_connection_list)
        table.register(RequestCode.GET_CONSUME_STATS, self.get_consume_stats)

    # -- runtime info ---------------------------------------------------------------------

    async def get_broker_runtime_info(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_BROKER_RUNTIME_INFO: ``KVTable`` of ``runtime_info()``."""
        info = await self.runtime_info()
        return request.response_to(ResponseCode.SUCCESS, body=KVTable(info).encode())

    async def runtime_info(self) -> dict[str, str]:
        """Java's ``prepareRuntimeInfo`` keys.

        Not measured here, so given Java's no-data value: putMessageEntireTimeMax
        and getMessageEntireTimeMax "0", putMessageDistributeTime "null", the put
        latency percentiles "0.00", dispatchMaxBuffer "0" (never set in 4.9.8).
        There are no thread pools: their queue sizes and head waits are "0", their
        capacities the configured ones. pageCacheLockTimeMills is "0": an append
        never holds the CommitLog across an await, so none is under way while we
        answer. No transient store pool: remainTransientStoreBufferNumbs is
        ``Integer.MAX_VALUE``, as Java reports without one.
        """
        ctx = self._ctx
        info = self._store_info()
        info.update(self._broker_info())
        cfg = ctx.store_config
        disk = await ctx.store.executor.run(
            _disk_figures_blocking, cfg.commit_log_dir, cfg.consume_queue_dir, cfg.root_dir
        )
        info.update(disk)
        if self._extra is not None:
            info.update(self._extra())
        return info

    def _store_info(self) -> dict[str, str]:
        store = self._ctx.store
        stats = store.stats
        # Java divides by the put count and reports 1 when nothing was put yet.
        total = stats.put_message_times_total or 1
        info = {
            "bootTimestamp": str(self._boot_ms),
            "runtime": format_runtime(self._ctx.clock.now_ms() - self._boot_ms),
            "putMessageEntireTimeMax": "0",
            "putMessageTimesTotal": str(total),
            "putMessageFailedTimes": str(stats.put_message_failed_times),
            "putMessageSizeTotal": str(stats.put_message_size_total),
            "putMessageDistributeTime": "null",
            "putMessageAverageSize": java_double(stats.put_message_size_total / total),
            "dispatchMaxBuffer": "0",
            "getMessageEntireTimeMax": "0",
            "putLatency99": "0.00",
            "putLatency999": "0.00",
            "commitLogMinOffset": str(store.min_phy_offset),
            "commitLogMaxOffset": str(store.max_phy_offset),
            "dispatchBehindBytes": str(store.dispatch_behind_bytes()),
            "pageCacheLockTimeMills": "0",
            "earliestMessageTimeStamp": str(store.get_earliest_store_time()),
            "remainTransientStoreBufferNumbs": _NO_TRANSIENT_POOL,
            "remainHowManyDataToFlush": human_readable_byte_count(
                max(store.max_phy_offset - store.commit_log.flushed_where, 0)
            ),
        }
        info.update(_UNSAMPLED if self._sampler is None else self._sampler.runtime_info())
        return info

    def _broker_info(self) -> dict[str, str]:
        ctx = self._ctx
        cfg = ctx.config
        stats = ctx.store.stats
        daily = self._broker_stats
        return {
            "brokerVersionDesc": MQVersion(CURRENT_VERSION).name,
            "brokerVersion": str(CURRENT_VERSION),
            "msgPutTotalYesterdayMorning": str(
                daily.msg_put_total_yesterday_morning if daily else 0
            ),
            "msgPutTotalTodayMorning": str(daily.msg_put_total_today_morning if daily else 0),
            "msgPutTotalTodayNow": str(stats.put_message_times_total),
            "msgGetTotalYesterdayMorning": str(
                daily.msg_get_total_yesterday_morning if daily else 0
            ),
            "msgGetTotalTodayMorning": str(daily.msg_get_total_today_morning if daily else 0),
            "msgGetTotalTodayNow": str(stats.get_message_transfered_msg_count),
            "sendThreadPoolQueueSize": "0",
            "sendThreadPoolQueueCapacity": str(cfg.send_thread_pool_queue_capacity),
            "pullThreadPoolQueueSize": "0",
            "pullThreadPoolQueueCapacity": str(cfg.pull_thread_pool_queue_capacity),
            "queryThreadPoolQueueSize": "0",
            "queryThreadPoolQueueCapacity": str(cfg.query_thread_pool_queue_capacity),
            "EndTransactionQueueSize": "0",
            "EndTransactionThreadPoolQueueCapacity": str(cfg.end_transaction_pool_queue_capacity),
            "sendThreadPoolQueueHeadWaitTimeMills": "0",
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0",
            "startAcceptSendRequestTimeStamp": str(cfg.start_accept_send_request_time_stamp),
        }

    # -- topic and consume stats -------------------------------------------------------------

    def get_topic_stats_info(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_TOPIC_STATS_INFO: per write queue min/max offset and last store time."""
        header = GetTopicStatsInfoRequestHeader.from_ext_fields(request.ext_fields)
        ctx = self._ctx
        topic = header.topic
        config = ctx.topics.select_topic_config(topic)
        if config is None:
            return request.response_to(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        table = TopicStatsTable()
        store = ctx.store
        for queue_id in range(config.write_queue_nums):
            min_offset = max(store.get_min_offset_in_queue(topic, queue_id), 0)
            max_offset = max(store.get_max_offset_in_queue(topic, queue_id), 0)
            timestamp = 0
            if max_offset > 0:
                timestamp = store.get_message_store_timestamp(topic, queue_id, max_offset - 1)
            mq = MessageQueue(topic, ctx.config.broker_name, queue_id)
            table.offset_table[mq] = TopicOffset(min_offset, max_offset, timestamp)
        return request.response_to(ResponseCode.SUCCESS, body=table.encode())

    def get_consume_stats(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_CONSUME_STATS: a group's offsets per read queue of its topics, and its TPS.

        Topics: the header's, or every topic the group has offsets in. A topic
        without config is skipped, and so is one the group's online clients do not
        subscribe to (when they subscribe to anything), as Java does.
        """
        header = GetConsumeStatsRequestHeader.from_ext_fields(request.ext_fields)
        group = header.consumer_group
        if header.topic is None or not header.topic.strip():
            topics = sorted(self._ctx.offsets.which_topic_by_consumer(group))
        else:
            topics = [header.topic]
        stats = self.consume_stats(group, topics)
        return request.response_to(ResponseCode.SUCCESS, body=stats.encode())

    def consume_stats(
        self, group: str, topics: list[str], *, order_only: bool = False
    ) -> ConsumeStats:
        """``group``'s offsets over the read queues of ``topics`` (the rules above);
        ``order_only`` skips topics not configured as ordered (brokerConsumeStats -o)."""
        ctx = self._ctx
        online = ctx.consumers.get_group(group)
        subscribed = 0 if online is None else len(online.subscriptions)
        stats = ConsumeStats()
        for topic in topics:
            config = ctx.topics.select_topic_config(topic)
            if config is None:
                log.warning("consumeStats, topic config not exist, %s", topic)
                continue
            if order_only and not config.order:
                continue
            if subscribed and ctx.consumers.find_subscription(group, topic) is None:
                log.warning(
                    "consumeStats, the consumer group[%s], topic[%s] not exist", group, topic
                )
                continue
            for queue_id in range(config.read_queue_nums):
                mq = MessageQueue(topic, ctx.config.broker_name, queue_id)
                stats.offset_table[mq] = self._offset_wrapper(group, topic, queue_id)
            if self._group_get_tps is not None:
                stats.consume_tps += self._group_get_tps(group, topic)
        return stats

    def _offset_wrapper(self, group: str, topic: str, queue_id: int) -> OffsetWrapper:
        store = self._ctx.store
        broker_offset = max(store.get_max_offset_in_queue(topic, queue_id), 0)
        consumer_offset = max(self._ctx.offsets.query_offset(group, topic, queue_id), 0)
        last_timestamp = 0
        if consumer_offset >= 1:
            stored_at = store.get_message_store_timestamp(topic, queue_id, consumer_offset - 1)
            if stored_at > 0:
                last_timestamp = stored_at
        return OffsetWrapper(broker_offset, consumer_offset, last_timestamp)

    # -- connections ------------------------------------------------------------------------

    def get_consumer_connection_list(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_CONSUMER_CONNECTION_LIST: ``ConsumerConnection``, or CONSUMER_NOT_ONLINE."""
        header = GetConsumerConnectionListRequestHeader.from_ext_fields(request.ext_fields)
        body = self._ctx.consumers.consumer_connection(header.consumer_group)
        if body is None:
            return request.response_to(
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"the consumer group[{header.consumer_group}] not online",
            )
        return request.response_to(ResponseCode.SUCCESS, body=body.encode())

    def get_producer_connection_list(
        self, conn: RemotingConnection, request: RemotingCommand
    ) -> RemotingCommand:
        """GET_PRODUCER_CONNECTION_LIST: ``ProducerConnection``, or SYSTEM_ERROR."""
        header = GetProducerConnectionListRequestHeader.from_ext_fields(request.ext_fields)
        producers = self._ctx.producers
        # The manager drops a group with its last channel: no channel, no group.
        if not producers.connections(header.producer_group):
            return request.response_to(
                ResponseCode.SYSTEM_ERROR,
                f"the producer group[{header.producer_group}] not exist",
            )
        body = producers.producer_connection(header.producer_group)
        return request.response_to(ResponseCode.SUCCESS, body=body.encode())
