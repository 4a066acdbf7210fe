"""The broker's and name server's /metrics: collector output parsed back, on real servers.

An in-process broker (real store, real sockets) with ``metricsPort=-1`` takes
sends and pulls over a RemotingClient; each scrape is parsed with
prometheus_client's own parser and every figure is checked against what the test
did (message counts, stored bytes from the CommitLog offset, pull reply bytes).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

from aiorocketmq.broker.metrics import _replication_lags
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.namesrv.config import NamesrvConfig
from aiorocketmq.namesrv.server import NamesrvController
from aiorocketmq.remoting import metrics_http
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import BodyParts, RemotingCommand
from aiorocketmq.remoting.connection import ProcessorTable
from aiorocketmq.remoting.metrics_http import (
    BucketHistogram,
    ObservedProcessorTable,
    histogram_family,
    observed,
)
from tests.support.cluster import in_process_broker
from tests.support.kernels import IMPLEMENTATIONS, use_observe_kernel
from tests.unit.broker.broker_support import pull_request
from tests.unit.broker.processor_support import send_request

TOPIC = "TopicTest"
GROUP = "CID_test"
DONE_GROUP = "CID_done"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def http_get(port: int, path: str = "/metrics") -> tuple[str, str]:
    """One HTTP/1.1 GET on 127.0.0.1; (status line, body)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
        await writer.wait_closed()
    head, _, body = data.partition(b"\r\n\r\n")
    return head.split(b"\r\n", 1)[0].decode(), body.decode()


async def scrape(port: int) -> Samples:
    """Every sample of a scrape, by (name, labels)."""
    status, body = await http_get(port)
    assert status == "HTTP/1.1 200 OK"
    out: Samples = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """The one sample of ``name`` whose labels include ``labels`` (0 when absent)."""
    want = set(labels.items())
    hits = [v for (n, ls), v in samples.items() if n == name and want <= ls]
    assert len(hits) <= 1, f"{name} {labels}: {len(hits)} samples"
    return hits[0] if hits else 0.0


class _One(Collector):
    def __init__(self, metric: Metric) -> None:
        self._metric = metric

    def collect(self) -> Iterator[Metric]:
        yield self._metric


def test_histogram_family_is_cumulative_and_parses_back() -> None:
    hist = BucketHistogram((1.0, 10.0))
    for v in (0.5, 1.0, 5.0, 50.0):
        hist.observe(7, v)
    rows = [(("7",), counts, total) for _key, counts, total in hist.items()]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_One(histogram_family("t_latency", "doc", ["code"], hist.bounds, rows)))
    samples: Samples = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        assert family.type == "histogram"
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    assert value(samples, "t_latency_bucket", le="1.0") == 2  # 0.5 and 1.0 (le is inclusive)
    assert value(samples, "t_latency_bucket", le="10.0") == 3
    assert value(samples, "t_latency_bucket", le="+Inf") == 4
    assert value(samples, "t_latency_count") == 4
    assert value(samples, "t_latency_sum") == 56.5


async def test_broker_metrics_follow_sends_pulls_and_commits(tmp_path: Path) -> None:
    sent, pulled, body = 7, 4, b"m" * 2000
    async with in_process_broker(tmp_path, metricsPort=-1) as broker:
        port = broker.metrics.port
        assert port > 0
        broker.ctx.topics.update_topic_config(TopicConfig(TOPIC, 1, 1))
        client = RemotingClient()
        try:
            before = await scrape(port)
            first_send_ms = int(time.time() * 1000)
            max_before = broker.store.max_phy_offset
            for _ in range(sent):
                reply = await client.invoke(broker.address, send_request(body), 5000)
                assert reply.code == ResponseCode.SUCCESS
            answer = await client.invoke(
                broker.address, pull_request(0, group=GROUP, max_msgs=pulled), 5000
            )
            assert answer.code == ResponseCode.SUCCESS
            pulled_bytes = len(answer.body)
            for group_name, offset in ((GROUP, pulled), (DONE_GROUP, sent)):
                commit = RemotingCommand.request(
                    RequestCode.UPDATE_CONSUMER_OFFSET,
                    {
                        "consumerGroup": group_name,
                        "topic": TOPIC,
                        "queueId": "0",
                        "commitOffset": str(offset),
                    },
                )
                assert (await client.invoke(broker.address, commit, 5000)).code == 0
            after = await scrape(port)
            scraped_ms = int(time.time() * 1000)
        finally:
            await client.close()
        stored = broker.store.max_phy_offset - max_before
    node = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}
    topic = {**node, "topic": TOPIC}
    group = {**topic, "consumer_group": GROUP}

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("rocketmq_messages_in_total", **topic) == sent
    assert delta("rocketmq_throughput_in_total", **topic) == stored
    assert delta("rocketmq_messages_out_total", **group) == pulled
    assert delta("rocketmq_throughput_out_total", **group) == pulled_bytes
    assert pulled_bytes == pulled * (stored // sent)  # equal records: 4 of the 7
    # Each record is ~2.1 KB: every put lands in the 4 KB bucket, none in 1 KB.
    assert delta("rocketmq_message_size_bucket", **node, le="1024.0") == 0
    assert delta("rocketmq_message_size_bucket", **node, le="4096.0") == sent
    assert delta("rocketmq_message_size_count", **node) == sent
    assert delta("rocketmq_message_size_sum", **node) == stored
    assert value(after, "rocketmq_consumer_lag_messages", **group) == sent - pulled
    # The oldest unconsumed message (offset 4) was stored after the first send.
    assert 0 <= value(after, "rocketmq_consumer_lag_latency", **group) <= scraped_ms - first_send_ms
    done = {**topic, "consumer_group": DONE_GROUP}
    assert value(after, "rocketmq_consumer_lag_messages", **done) == 0
    assert value(after, "rocketmq_consumer_lag_latency", **done) == 0
    assert (
        "rocketmq_consumer_lag_messages",
        frozenset({**done, "is_retry": "false"}.items()),
    ) in after
    sends = value(
        after, "rocketmq_rpc_latency_count", request_code=str(int(RequestCode.SEND_MESSAGE))
    )
    assert sends == sent
    pulls = value(
        after, "rocketmq_rpc_latency_count", request_code=str(int(RequestCode.PULL_MESSAGE))
    )
    assert pulls == 1
    assert value(after, "rocketmq_storage_size", **node) == broker.store.max_phy_offset
    assert 0 < value(after, "rocketmq_storage_disk_usage_ratio", **node) <= 1


async def test_pull_traffic_takes_the_pulls_own_count_else_walks_the_records(
    tmp_path: Path,
) -> None:
    async with in_process_broker(tmp_path, metricsPort=-1) as broker:
        broker.ctx.topics.update_topic_config(TopicConfig(TOPIC, 1, 1))
        client = RemotingClient()
        try:
            for _ in range(3):
                reply = await client.invoke(broker.address, send_request(b"m" * 100), 5000)
                assert reply.code == ResponseCode.SUCCESS
            request = pull_request(0, group=GROUP, max_msgs=3)
            answer = await client.invoke(broker.address, request, 5000)
        finally:
            await client.close()
        metrics, key = broker.metrics, (TOPIC, GROUP)
        assert metrics.out_messages[key] == 3
        # A body nobody counted (the client's decoded bytes): its records are walked.
        metrics.observe_pull(request, answer, 0.0)
        assert (metrics.out_messages[key], metrics.out_bytes[key]) == (6, 2 * len(answer.body))
        # A counted one is taken at its word: these bytes are no records at all.
        counted = request.response_to(
            ResponseCode.SUCCESS, None, None, BodyParts([b"\xff" * 8], None, 5)
        )
        metrics.observe_pull(request, counted, 0.0)
        assert metrics.out_messages[key] == 11


async def test_metrics_server_answers_other_paths_with_404(tmp_path: Path) -> None:
    async with in_process_broker(tmp_path, metricsPort=-1) as broker:
        status, _ = await http_get(broker.metrics.port, "/")
        assert status == "HTTP/1.1 404 Not Found"
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.metrics.port)
        writer.write(b"garbage\r\n\r\n")
        data = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        assert data.startswith(b"HTTP/1.1 400 Bad Request")
        status, _ = await http_get(broker.metrics.port)  # still serving
        assert status == "HTTP/1.1 200 OK"


async def test_metrics_port_zero_serves_nothing(tmp_path: Path) -> None:
    async with in_process_broker(tmp_path, metricsPort=0) as broker:
        assert broker.metrics.port == 0
        # Off means off: requests are not even timed.
        assert type(broker.table) is ProcessorTable
        assert type(broker.server._processors) is ProcessorTable


async def test_namesrv_metrics_count_route_requests_and_brokers(tmp_path: Path) -> None:
    config = NamesrvConfig(
        listen_host="127.0.0.1",
        listen_port=0,
        metrics_port=-1,
        kv_config_path=str(tmp_path / "kv.json"),
        broker_scan_interval_millis=3_600_000,
        broker_scan_initial_delay_millis=3_600_000,
    )
    namesrv = NamesrvController(config)
    await namesrv.start()
    try:
        port = namesrv.metrics.port
        before = await scrape(port)
        assert value(before, "rocketmq_namesrv_brokers_registered") == 0
        async with in_process_broker(tmp_path, namesrv=namesrv.address, metricsPort=0):
            client = RemotingClient()
            try:
                for topic in ("TBW102", "TBW102", "NoSuchTopic"):
                    request = RemotingCommand.request(
                        RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}
                    )
                    await client.invoke(namesrv.address, request, 5000)
            finally:
                await client.close()
            after = await scrape(port)
        assert value(after, "rocketmq_namesrv_brokers_registered") == 1
        found = value(after, "rocketmq_namesrv_route_requests_total", result="found")
        missing = value(after, "rocketmq_namesrv_route_requests_total", result="not_found")
        assert (found, missing) == (2, 1)
        registers = str(int(RequestCode.REGISTER_BROKER))
        assert value(after, "rocketmq_rpc_latency_count", request_code=registers) >= 1
    finally:
        await namesrv.shutdown()


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
async def test_observed_table_reports_inline_awaited_and_raising_handlers(
    implementation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_observe_kernel(implementation, monkeypatch)
    seen: list[tuple[int, int | None]] = []
    latency = BucketHistogram((1.0, 3.0, 1000.0))
    table = ObservedProcessorTable(
        latency,
        lambda req, reply, secs: seen.append((req.code, None if reply is None else reply.code)),
        (2, 99),
    )
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, {})

    async def later(_conn: object, req: RemotingCommand) -> RemotingCommand:
        return req.response_to(ResponseCode.SYSTEM_BUSY, "busy")

    def boom(_conn: object, _req: RemotingCommand) -> RemotingCommand:
        raise RuntimeError("boom")

    table.register(1, lambda _conn, req: req.response_to(ResponseCode.SUCCESS, None))
    table.register(2, later)
    table.set_default(boom)
    request.code = 1
    reply = table.get(1)(None, request)  # type: ignore[misc, arg-type]
    assert isinstance(reply, RemotingCommand) and reply.code == ResponseCode.SUCCESS
    request.code = 2
    reply = await table.get(2)(None, request)  # type: ignore[misc, arg-type]
    assert reply is not None and reply.code == ResponseCode.SYSTEM_BUSY
    request.code = 99
    with pytest.raises(RuntimeError, match="boom"):
        table.get(99)(None, request)  # type: ignore[misc, arg-type]
    # Code 1 is timed but not handed over: only 2 and 99 asked for their replies.
    assert seen == [(2, ResponseCode.SYSTEM_BUSY), (99, None)]
    rows = {key: (counts, total) for key, counts, total in latency.items()}
    assert sorted(rows) == [1, 2, 99]
    for counts, total in rows.values():
        assert sum(counts) == 1 and 0.0 <= total < 1000.0


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@settings(max_examples=200, deadline=None)
@given(
    bounds=st.lists(
        st.floats(min_value=0.0, max_value=1e4, allow_nan=False), min_size=1, max_size=12
    ).map(lambda b: tuple(sorted(set(b)))),
    times_ms=st.lists(
        st.tuples(st.integers(0, 3), st.floats(0.0, 2e4, allow_nan=False)), max_size=40
    ),
)
def test_timed_handler_counts_as_the_histogram_does(
    implementation: str,
    bounds: tuple[float, ...],
    times_ms: list[tuple[int, float]],
) -> None:
    """Whichever way times a handler, its rows are those ``BucketHistogram.observe``
    makes of the same times (bucket edges included: ``le`` is inclusive)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_observe_kernel(implementation, monkeypatch)
        clock = iter(x for _, ms in times_ms for x in (0.0, ms / 1000.0))
        monkeypatch.setattr(metrics_http, "perf_counter", lambda: next(clock))
        timed, expected = BucketHistogram(bounds), BucketHistogram(bounds)
        handler = observed(lambda _conn, req: None, timed)
        for code, ms in times_ms:
            request = RemotingCommand.request(code, {})
            handler(None, request)  # type: ignore[arg-type]
            expected.observe(code, (ms / 1000.0 - 0.0) * 1000.0)
        assert list(timed.items()) == list(expected.items())


def test_replication_lag_reads_master_and_slave_runtime_keys() -> None:
    master = {
        "haSlaveNum": "2",
        "haSlaveAddr_0": "10.0.0.2:10912",
        "haSlaveAckOffset_0": "900",
        "haSlaveLag_0": "100",
        "haSlaveAddr_1": "10.0.0.3:10912",
        "haSlaveAckOffset_1": "-1",
        "haSlaveLag_1": "-1",  # no ack yet: no figure rather than a wrong one
    }
    assert list(_replication_lags(master)) == [("10.0.0.2:10912", 100)]
    slave = {"masterAddr": "10.0.0.1:10912", "haMasterOffset": "5000", "haSlaveMaxOffset": "4200"}
    assert list(_replication_lags(slave)) == [("10.0.0.1:10912", 800)]
    assert list(_replication_lags({})) == []
