"""BrokerMetrics: the broker's Prometheus ``/metrics`` endpoint.

Owns: the request observer behind the broker's processor table (RPC latency per
request code; messages and bytes handed to pulls per topic and group), and a
custom collector that reads the live counters at scrape time, under RocketMQ 5's
names (``BrokerMetricsConstant``, ``DefaultStoreMetricsConstant``,
``RemotingMetricsConstant``) and labels (``cluster, node_type, node_id`` on every
series):

* ``rocketmq_messages_in_total``, ``rocketmq_throughput_in_total`` (topic): the
  store's per-topic put counters (every stored message, internal topics too);
* ``rocketmq_messages_out_total``, ``rocketmq_throughput_out_total`` (topic,
  consumer_group): messages and stored bytes in successful pull replies;
* ``rocketmq_message_size`` histogram: one observation per put, of its stored
  bytes per message (RocketMQ 5's buckets);
* ``rocketmq_consumer_lag_messages`` / ``rocketmq_consumer_lag_latency`` (ms)
  (consumer_group, topic): max offset minus committed offset, summed over queues;
  age of the oldest unconsumed message;
* ``rocketmq_rpc_latency`` histogram (ms) by request_code;
* storage: ``rocketmq_storage_size``, ``rocketmq_storage_flush_behind_bytes``,
  ``rocketmq_storage_dispatch_behind_bytes``; ours:
  ``rocketmq_storage_disk_usage_ratio`` and ``rocketmq_replication_lag_bytes``.

``metricsPort`` 0 turns the endpoint off, -1 picks a free port (logged and
readable from ``port``); a port that cannot be bound is logged, never fatal.

Must not: change broker state, start threads, or block the loop (the disk
ratio is read in the executor before rendering).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from aiorocketmq.common.constants import RETRY_GROUP_TOPIC_PREFIX
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable
from aiorocketmq.remoting.metrics_http import (
    RPC_LATENCY_BUCKETS_MS,
    TEXT_CONTENT_TYPE,
    BucketHistogram,
    MetricsHttpServer,
    ObservedProcessorTable,
    histogram_family,
)
from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.runtime.loop_lag import LoopLagProbe
from aiorocketmq.store.cleanup import disk_used_ratio_blocking
from aiorocketmq.store.store_stats import PUT_SIZE_BUCKETS

if TYPE_CHECKING:
    from aiorocketmq.broker.config import BrokerSettings
    from aiorocketmq.broker.context import BrokerContext
    from aiorocketmq.broker.forced_clean import ForcedCleanLosses
    from aiorocketmq.broker.ha.service import HAService

__all__ = ["BrokerMetrics"]

log = logging.getLogger(__name__)

_SIZE = struct.Struct(">i")
_PULL: Final = int(RequestCode.PULL_MESSAGE)
_SUCCESS: Final = int(ResponseCode.SUCCESS)
_NODE_LABELS: Final = ("cluster", "node_type", "node_id")


class BrokerMetrics:
    """Counters the store does not keep, the collector and the HTTP endpoint.

    Args:
        settings: The broker's settings (``metricsPort``, names, store paths).
        ctx: The processors' shared context (store, offsets, clock).
        ha: The HA service (replication lag).
        forced_clean: Messages groups lost to forced cleaning (None: not counted).

    Attributes:
        table: The processor table to register the broker's processors in (timed
            only when metrics are on).
        port: The bound metrics port once started (0 when off).
    """

    def __init__(
        self,
        settings: BrokerSettings,
        ctx: BrokerContext,
        ha: HAService,
        forced_clean: ForcedCleanLosses | None = None,
    ) -> None:
        self._settings = settings
        self._ctx = ctx
        self._ha = ha
        self.forced_clean = forced_clean
        # Off (metricsPort 0): a plain table, so requests pay nothing for metrics.
        self.rpc = BucketHistogram(RPC_LATENCY_BUCKETS_MS)
        self.table: ProcessorTable = (
            ObservedProcessorTable(self.rpc, self.observe_pull, (_PULL,))
            if settings.broker.metrics_port
            else ProcessorTable()
        )
        self.out_messages: dict[tuple[str, str], int] = {}
        self.out_bytes: dict[tuple[str, str], int] = {}
        self.disk_ratio = -1.0
        cfg = settings.broker
        self.node = (cfg.broker_cluster_name, "broker", cfg.broker_name)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(BrokerCollector(self))
        self._executor: BlockingExecutor | None = None
        self._http = MetricsHttpServer(self.render, TEXT_CONTENT_TYPE, name="broker")
        self.loop_lag = LoopLagProbe()
        self.port = 0

    # -- hook --------------------------------------------------------------------------

    def observe_pull(
        self, request: RemotingCommand, reply: RemotingCommand | bytes | None, secs: float
    ) -> None:
        """The table's hook for PULL_MESSAGE (the table counts every request's latency):
        the pull traffic of a successful reply."""
        if type(reply) is not RemotingCommand or reply.code != _SUCCESS:
            return
        body = reply.body_parts
        if body is not None and body.records:
            # Counted by the pull as it read them: a walk of a 2 MiB reply's headers
            # held the loop about 0.3 ms.
            count, size = body.records, len(body)
        else:
            try:
                count, size = _count_records(reply)
            except (ValueError, struct.error):
                return  # not stored records (cannot happen for our pull replies)
        fields = request.ext_fields
        key = (str(fields.get("topic", "")), str(fields.get("consumerGroup", "")))
        self.out_messages[key] = self.out_messages.get(key, 0) + count
        self.out_bytes[key] = self.out_bytes.get(key, 0) + size

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Serve ``/metrics`` on ``metricsPort`` (0: off); a bind failure is only logged."""
        port = self._settings.broker.metrics_port
        if port == 0:
            return
        self.loop_lag.start()
        self._executor = BlockingExecutor("broker-metrics", max_workers=1)
        try:
            await self._http.start(self._settings.remoting.listen_host, port)
        except OSError as exc:
            log.warning("broker metrics not served: port %d: %s", port, exc)
            return
        self.port = self._http.port

    async def shutdown(self) -> None:
        """Stop serving (idempotent)."""
        self.loop_lag.stop()
        await self._http.shutdown()
        executor, self._executor = self._executor, None
        if executor is not None:
            await executor.shutdown()

    async def render(self) -> bytes:
        """One scrape: refresh the file-system figure off the loop, then render."""
        if self._executor is not None:
            path = Path(self._settings.store.commit_log_dir)
            self.disk_ratio = await self._executor.run(_disk_ratio_blocking, path)
        return generate_latest(self.registry)


def _disk_ratio_blocking(path: Path) -> float:
    try:
        return disk_used_ratio_blocking(path)
    except OSError:
        return -1.0


def _count_records(reply: RemotingCommand) -> tuple[int, int]:
    """Stored records in a pull reply body (each starts with its total size)."""
    parts = reply.body_parts.parts if reply.body_parts is not None else [memoryview(reply.body)]
    count = total = 0
    unpack = _SIZE.unpack_from
    for part in parts:
        offset, end = 0, part.nbytes
        while offset < end:
            size = unpack(part, offset)[0]
            if size <= 0:
                raise ValueError("bad record size")
            offset += size
            count += 1
        total += end
    return count, total


class BrokerCollector(Collector):
    """Reads the broker's live counters at scrape time (no copies kept between scrapes)."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self._m = metrics

    def collect(self) -> Iterator[Metric]:
        """Every family, in a stable order."""
        yield from self._traffic()
        yield self._message_size()
        yield from self._lag()
        yield self._forced_clean()
        yield self._rpc()
        yield self._loop_lag()
        yield from self._storage()

    def _labels(self, *names: str) -> list[str]:
        return [*_NODE_LABELS, *names]

    def _traffic(self) -> Iterator[Metric]:
        m, node = self._m, self._m.node
        stats = m._ctx.store.stats
        msgs_in = CounterMetricFamily(
            "rocketmq_messages_in_total", "Messages stored.", labels=self._labels("topic")
        )
        bytes_in = CounterMetricFamily(
            "rocketmq_throughput_in_total", "Bytes stored.", labels=self._labels("topic")
        )
        for topic, count in list(stats.topic_put_times.items()):
            msgs_in.add_metric([*node, topic], count)
            bytes_in.add_metric([*node, topic], stats.topic_put_size.get(topic, 0))
        group_labels = self._labels("topic", "consumer_group")
        msgs_out = CounterMetricFamily(
            "rocketmq_messages_out_total", "Messages returned by pulls.", labels=group_labels
        )
        bytes_out = CounterMetricFamily(
            "rocketmq_throughput_out_total", "Stored bytes returned by pulls.", labels=group_labels
        )
        for (topic, group), count in list(m.out_messages.items()):
            msgs_out.add_metric([*node, topic, group], count)
            bytes_out.add_metric([*node, topic, group], m.out_bytes.get((topic, group), 0))
        yield from (msgs_in, bytes_in, msgs_out, bytes_out)

    def _message_size(self) -> Metric:
        stats = self._m._ctx.store.stats
        row = (self._m.node, list(stats.put_size_counts), float(stats.put_size_sum))
        return histogram_family(
            "rocketmq_message_size",
            "Stored bytes per message, one observation per put.",
            _NODE_LABELS,
            PUT_SIZE_BUCKETS,
            [row],
        )

    def _lag(self) -> Iterator[Metric]:
        ctx, node = self._m._ctx, self._m.node
        labels = self._labels("consumer_group", "topic", "is_retry")
        lag_msgs = GaugeMetricFamily(
            "rocketmq_consumer_lag_messages",
            "Messages stored but not committed by the group.",
            labels=labels,
        )
        lag_ms = GaugeMetricFamily(
            "rocketmq_consumer_lag_latency",
            "Age (ms) of the group's oldest unconsumed message.",
            labels=labels,
        )
        now = ctx.clock.now_ms()
        for topic, group in ctx.offsets.groups_and_topics():
            messages, latency = _group_lag(ctx, group, topic, now)
            values = [*node, group, topic, str(topic.startswith(RETRY_GROUP_TOPIC_PREFIX)).lower()]
            lag_msgs.add_metric(values, messages)
            lag_ms.add_metric(values, latency)
        yield from (lag_msgs, lag_ms)

    def _rpc(self) -> Metric:
        rows = [
            ((*self._m.node, "remoting", str(code)), counts, total)
            for code, counts, total in self._m.rpc.items()
        ]
        return histogram_family(
            "rocketmq_rpc_latency",
            "Time (ms) from a request's dispatch to its reply.",
            self._labels("protocol_type", "request_code"),
            RPC_LATENCY_BUCKETS_MS,
            rows,
        )

    def _forced_clean(self) -> Metric:
        family = CounterMetricFamily(
            "aiorocketmq_forced_clean_lost_messages_total",
            "Messages deleted by forced cleaning (full disk) before the group consumed them.",
            labels=self._labels("consumer_group", "topic"),
        )
        losses = self._m.forced_clean
        for (group, topic), count in list(losses.lost.items() if losses is not None else ()):
            family.add_metric([*self._m.node, group, topic], count)
        return family

    def _loop_lag(self) -> Metric:
        probe = self._m.loop_lag
        return histogram_family(
            "aiorocketmq_event_loop_lag",
            "How late (ms) a 10 ms timer ran: time the loop was held by other work.",
            _NODE_LABELS,
            probe.bounds,
            [(self._m.node, probe.counts, probe.total_ms)],
        )

    def _storage(self) -> Iterator[Metric]:
        m, node = self._m, self._m.node
        store = m._ctx.store
        figures = (
            (
                "rocketmq_storage_size",
                "CommitLog bytes held.",
                store.max_phy_offset - store.min_phy_offset,
            ),
            (
                "rocketmq_storage_flush_behind_bytes",
                "CommitLog bytes not flushed yet.",
                max(store.max_phy_offset - store.commit_log.flushed_where, 0),
            ),
            (
                "rocketmq_storage_dispatch_behind_bytes",
                "CommitLog bytes not dispatched to queues yet.",
                max(store.dispatch_behind_bytes(), 0),
            ),
            (
                "rocketmq_storage_disk_usage_ratio",
                "Used share of the CommitLog's file system (-1: unknown).",
                m.disk_ratio,
            ),
        )
        for name, doc, value in figures:
            family = GaugeMetricFamily(name, doc, labels=list(_NODE_LABELS))
            family.add_metric(list(node), float(value))
            yield family
        replication = GaugeMetricFamily(
            "rocketmq_replication_lag_bytes",
            "CommitLog bytes a slave has not acknowledged (master: per slave; slave: own).",
            labels=self._labels("peer"),
        )
        for peer, lag in _replication_lags(m._ha.runtime_info()):
            replication.add_metric([*node, peer], float(lag))
        yield replication


def _group_lag(ctx: BrokerContext, group: str, topic: str, now_ms: int) -> tuple[int, int]:
    """(messages behind, age in ms of the oldest unconsumed one) over the group's queues."""
    store = ctx.store
    messages = latency = 0
    for queue_id, committed in (ctx.offsets.query_offsets(group, topic) or {}).items():
        if committed < 0:
            continue
        behind = store.get_max_offset_in_queue(topic, queue_id) - committed
        if behind <= 0:
            continue
        messages += behind
        stored = store.get_message_store_timestamp(topic, queue_id, committed)
        if stored > 0:
            latency = max(latency, now_ms - stored)
    return messages, latency


def _replication_lags(info: dict[str, str]) -> Iterator[tuple[str, int]]:
    """Per-peer lag from the HA runtime keys (``haSlaveAddr_i``/``haSlaveLag_i`` or a slave's)."""
    if "haMasterOffset" in info:
        master, own = int(info["haMasterOffset"]), int(info.get("haSlaveMaxOffset", "0"))
        yield info.get("masterAddr", ""), max(master - own, 0) if master >= 0 else 0
        return
    index = 0
    while f"haSlaveAddr_{index}" in info:
        lag = int(info.get(f"haSlaveLag_{index}", "-1"))
        if lag >= 0:
            yield info[f"haSlaveAddr_{index}"], lag
        index += 1
