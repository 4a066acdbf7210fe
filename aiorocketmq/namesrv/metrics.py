"""NamesrvMetrics: the name server's Prometheus ``/metrics`` endpoint.

Owns: the request observer behind the name server's processor table and a
collector reading the live route tables at scrape time:

* ``rocketmq_rpc_latency`` histogram (ms) by request_code (RocketMQ 5's name);
* ours: ``rocketmq_namesrv_route_requests_total`` (GET_ROUTEINFO_BY_TOPIC by
  result: ``found`` or ``not_found``), ``rocketmq_namesrv_brokers_registered``
  (live broker addresses), ``rocketmq_namesrv_topics`` (topics with routes).

``metricsPort`` 0 turns the endpoint off, -1 picks a free port (logged and
readable from ``port``); a port that cannot be bound is logged, never fatal.

Must not: change route state, start threads, or block the loop.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Final

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from aiorocketmq.namesrv.route_info import RouteInfoManager
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

__all__ = ["NamesrvMetrics"]

log = logging.getLogger(__name__)

_ROUTE: Final = int(RequestCode.GET_ROUTEINFO_BY_TOPIC)
_SUCCESS: Final = int(ResponseCode.SUCCESS)
_LABELS: Final = ("node_type",)
_NODE: Final = ("namesrv",)


class NamesrvMetrics:
    """Route-request counts, the collector and the HTTP endpoint.

    Args:
        route_info: The route tables to report on.
        metrics_port: ``metricsPort`` (0 off, -1 a free port).
        host: Address to bind.

    Attributes:
        table: The processor table to register the name server's processors in
            (timed only when metrics are on).
        port: The bound metrics port once started (0 when off).
    """

    def __init__(self, route_info: RouteInfoManager, metrics_port: int, host: str) -> None:
        self._route_info = route_info
        self._metrics_port = metrics_port
        self._host = host
        # Off (metricsPort 0): a plain table, so requests pay nothing for metrics.
        self.rpc = BucketHistogram(RPC_LATENCY_BUCKETS_MS)
        self.table: ProcessorTable = (
            ObservedProcessorTable(self.rpc, self.observe_route, (_ROUTE,))
            if metrics_port
            else ProcessorTable()
        )
        self.route_found = 0
        self.route_not_found = 0
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(NamesrvCollector(self))
        self._http = MetricsHttpServer(self.render, TEXT_CONTENT_TYPE, name="namesrv")
        self.port = 0

    def observe_route(
        self, request: RemotingCommand, reply: RemotingCommand | bytes | None, secs: float
    ) -> None:
        """The table's hook for GET_ROUTEINFO_BY_TOPIC (the table counts every
        request's latency): found or not."""
        if type(reply) is RemotingCommand and reply.code == _SUCCESS:
            self.route_found += 1
        else:
            self.route_not_found += 1

    async def start(self) -> None:
        """Serve ``/metrics`` (0: off); a bind failure is only logged."""
        if self._metrics_port == 0:
            return
        try:
            await self._http.start(self._host, self._metrics_port)
        except OSError as exc:
            log.warning("name server metrics not served: port %d: %s", self._metrics_port, exc)
            return
        self.port = self._http.port

    async def shutdown(self) -> None:
        """Stop serving (idempotent)."""
        await self._http.shutdown()

    async def render(self) -> bytes:
        """One scrape (all in memory: nothing to move off the loop)."""
        return generate_latest(self.registry)


class NamesrvCollector(Collector):
    """Reads the name server's live figures at scrape time."""

    def __init__(self, metrics: NamesrvMetrics) -> None:
        self._m = metrics

    def collect(self) -> Iterator[Metric]:
        """Every family, in a stable order."""
        m = self._m
        routes = CounterMetricFamily(
            "rocketmq_namesrv_route_requests_total",
            "GET_ROUTEINFO_BY_TOPIC requests by result.",
            labels=[*_LABELS, "result"],
        )
        routes.add_metric([*_NODE, "found"], m.route_found)
        routes.add_metric([*_NODE, "not_found"], m.route_not_found)
        yield routes
        route_info = m._route_info
        for name, doc, value in (
            (
                "rocketmq_namesrv_brokers_registered",
                "Broker addresses registered and alive.",
                len(route_info.broker_live_table),
            ),
            ("rocketmq_namesrv_topics", "Topics with a route.", len(route_info.topic_queue_table)),
        ):
            gauge = GaugeMetricFamily(name, doc, labels=list(_LABELS))
            gauge.add_metric(list(_NODE), value)
            yield gauge
        yield histogram_family(
            "rocketmq_rpc_latency",
            "Time (ms) from a request's dispatch to its reply.",
            [*_LABELS, "protocol_type", "request_code"],
            RPC_LATENCY_BUCKETS_MS,
            [
                ((*_NODE, "remoting", str(code)), counts, total)
                for code, counts, total in m.rpc.items()
            ],
        )
