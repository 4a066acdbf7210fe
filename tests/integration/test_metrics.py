"""/metrics of real ``mqnamesrv`` and ``mqbroker`` processes during a produce/consume run.

Both start with ``metricsPort=-1`` (a free port, read from their log). The test
sends N messages of a known size, pulls M of them, commits offset M, and checks
that the scraped counters moved by exactly N and M, the bytes by the CommitLog's
growth and the pull replies' size, and that the lag gauge shows N - M.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from aiorocketmq.remoting.broker_headers import PullMessageResponseHeader
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from tests.support.cluster import (
    NAMESRV_READY,
    commitlog_max_offset,
    create_topic,
    start_broker,
    wait_replicated,
)
from tests.support.procs import ManagedProcess
from tests.support.wait import wait_until
from tests.unit.broker.broker_support import pull_request
from tests.unit.broker.processor_support import send_request

pytestmark = pytest.mark.timeout(90)

StartProcess = Callable[..., ManagedProcess]
TOPIC = "MetricsTopic"
GROUP = "CID_metrics"
SENT = 30
PULLED = 18
BODY = b"p" * 3000  # stored records ~3.1 KB: all in the 4 KB size bucket

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
_PORT_LINE = r"{} metrics listening address=\S+:(\d+) path=/metrics"


async def metrics_port(proc: ManagedProcess, role: str) -> int:
    """The port a process logged for its /metrics (logs go to stderr)."""
    found: list[int] = []

    def logged() -> bool:
        text = proc.stderr_path.read_text("utf-8", "replace")
        match = re.search(_PORT_LINE.format(role), text)
        if match:
            found.append(int(match.group(1)))
        return bool(match)

    await wait_until(logged, timeout=15, what=f"{role} metrics port in the log")
    return found[0]


async def scrape(port: int) -> Samples:
    """GET /metrics; every sample by (name, labels)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
        await writer.wait_closed()
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK"), head
    assert b"Content-Type: text/plain; version=0.0.4" in head
    out: Samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """The one sample of ``name`` whose labels include ``labels`` (0 when absent)."""
    want = set(labels.items())
    hits = [v for (n, ls), v in samples.items() if n == name and want <= ls]
    assert len(hits) <= 1, f"{name} {labels}: {len(hits)} samples"
    return hits[0] if hits else 0.0


async def start_namesrv_with_metrics(
    start_process: StartProcess, tmp_path: Path
) -> tuple[str, int]:
    """``mqnamesrv`` on free ports; its address and metrics port."""
    conf = tmp_path / "namesrv.properties"
    conf.write_text(f"metricsPort=-1\nkvConfigPath={tmp_path / 'kv.json'}\n", "utf-8")
    proc = start_process(
        [
            "-m",
            "aiorocketmq.cli.namesrv",
            "-c",
            str(conf),
            "--listenPort",
            "0",
            "--bindAddress",
            "127.0.0.1",
        ],
        name="namesrv",
        ready=NAMESRV_READY,
        wait=False,
        env={"HOME": str(tmp_path)},
    )
    addr = (await proc.wait_ready_async())["addr"]
    return addr, await metrics_port(proc, "namesrv")


async def pull_all(client: RemotingClient, addr: str, count: int) -> int:
    """Pull ``count`` messages of queue 0 from offset 0; the reply bytes."""
    offset = size = 0
    while offset < count:
        request = pull_request(offset, topic=TOPIC, group=GROUP, max_msgs=count - offset)
        reply = await client.invoke(addr, request, 5000)
        assert reply.code == ResponseCode.SUCCESS, reply.remark
        offset = PullMessageResponseHeader.from_ext_fields(reply.ext_fields).next_begin_offset
        size += len(reply.body)
    assert offset == count
    return size


async def test_counters_move_by_what_was_produced_and_consumed(
    start_process: StartProcess, tmp_path: Path
) -> None:
    namesrv, ns_port = await start_namesrv_with_metrics(start_process, tmp_path)
    broker = await start_broker(start_process, tmp_path, namesrv, metricsPort=-1)
    port = await metrics_port(broker.proc, "broker")
    await create_topic(broker.addr, TOPIC)
    client = RemotingClient()
    try:
        before = await scrape(port)
        ns_before = await scrape(ns_port)
        max_before = await commitlog_max_offset(broker.addr)
        for _ in range(SENT):
            reply = await client.invoke(broker.addr, send_request(BODY, topic=TOPIC), 5000)
            assert reply.code == ResponseCode.SUCCESS, reply.remark
        pulled_bytes = await pull_all(client, broker.addr, PULLED)
        commit = RemotingCommand.request(
            RequestCode.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "commitOffset": str(PULLED)},
        )
        assert (await client.invoke(broker.addr, commit, 5000)).code == ResponseCode.SUCCESS
        for topic in (TOPIC, "NoSuchTopic"):
            route = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            await client.invoke(namesrv, route, 5000)
        stored = await commitlog_max_offset(broker.addr) - max_before
        after = await scrape(port)
        ns_after = await scrape(ns_port)
    finally:
        await client.close()

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    node = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}
    group = {"topic": TOPIC, "consumer_group": GROUP}
    assert delta("rocketmq_messages_in_total", topic=TOPIC) == SENT
    assert delta("rocketmq_throughput_in_total", topic=TOPIC) == stored
    assert delta("rocketmq_messages_out_total", **group) == PULLED
    assert delta("rocketmq_throughput_out_total", **group) == pulled_bytes
    assert pulled_bytes == PULLED * stored // SENT  # equal-size records
    assert delta("rocketmq_message_size_bucket", le="1024.0") == 0
    assert delta("rocketmq_message_size_bucket", le="4096.0") == SENT
    assert delta("rocketmq_message_size_sum") == stored
    assert value(after, "rocketmq_consumer_lag_messages", **group) == SENT - PULLED
    assert value(after, "rocketmq_consumer_lag_latency", **group) >= 0
    send_code = str(int(RequestCode.SEND_MESSAGE))
    assert delta("rocketmq_rpc_latency_count", **node, request_code=send_code) == SENT
    assert value(after, "rocketmq_storage_size", **node) == max_before + stored
    assert not [k for k in after if k[0] == "rocketmq_replication_lag_bytes"]  # no slave
    assert value(ns_after, "rocketmq_namesrv_brokers_registered") == 1
    routes = {
        result: value(ns_after, "rocketmq_namesrv_route_requests_total", result=result)
        - value(ns_before, "rocketmq_namesrv_route_requests_total", result=result)
        for result in ("found", "not_found")
    }
    assert routes == {"found": 1, "not_found": 1}


async def test_replication_lag_and_slave_counters(
    start_process: StartProcess, tmp_path: Path
) -> None:
    namesrv, _ns_port = await start_namesrv_with_metrics(start_process, tmp_path)
    master = await start_broker(start_process, tmp_path, namesrv, metricsPort=-1)
    slave = await start_broker(
        start_process, tmp_path / "s", namesrv, brokerId=1, brokerRole="SLAVE", metricsPort=-1
    )
    master_port = await metrics_port(master.proc, "broker")
    slave_port = await metrics_port(slave.proc, "broker")
    await create_topic(master.addr, TOPIC)
    client = RemotingClient()
    try:
        for _ in range(SENT):
            reply = await client.invoke(master.addr, send_request(BODY, topic=TOPIC), 5000)
            assert reply.code == ResponseCode.SUCCESS, reply.remark
    finally:
        await client.close()
    end = await wait_replicated(master.addr, slave.addr)
    lag_name = "rocketmq_replication_lag_bytes"

    async def acked(port: int) -> bool:
        lags = [v for (n, _ls), v in (await scrape(port)).items() if n == lag_name]
        return lags == [0.0]  # exactly one peer, fully caught up

    await wait_until(lambda: acked(master_port), timeout=15, what="master sees the slave's ack")
    await wait_until(lambda: acked(slave_port), timeout=15, what="slave caught up")
    on_slave = await scrape(slave_port)
    # A slave counts what it dispatched: every replicated message, under its own node id.
    slave_node = {"node_type": "broker", "node_id": "broker-a", "topic": TOPIC}
    assert value(on_slave, "rocketmq_messages_in_total", **slave_node) == SENT
    assert value(on_slave, "rocketmq_storage_size") == end
