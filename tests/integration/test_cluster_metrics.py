"""Every node of ``make run``'s layout answers ``/metrics`` on its own port.

The ``rocketmq_cluster`` fixture starts 2m-2s-sync (two name servers, two masters,
two slaves) on free ports. ``mqcluster status`` (the CLI, in-process) must list six
distinct metrics ports; each must answer ``GET /metrics`` with its role's metrics
(brokers: their store size under their broker name; name servers: the four brokers
registered), and the socket listening on it must belong to that node's PID (read
from ``/proc``), so no node answers for another.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from aiorocketmq.cli.cluster import main as mqcluster
from aiorocketmq.testing import ClusterHandle
from aiorocketmq.testing.handle import ClusterFactory
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(120)

_TCP_LISTEN = "0A"


def listening_ports(pid: int) -> set[int]:
    """TCP ports (IPv4 and IPv6) that process ``pid`` listens on, from ``/proc``."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):  # an fd closed meanwhile
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    ports = set()
    for table in ("tcp", "tcp6"):
        lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == _TCP_LISTEN and inode in inodes:
                ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


async def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    """GET /metrics on 127.0.0.1:``port``; samples by metric name."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
        await writer.wait_closed()
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK"), head
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            samples.setdefault(s.name, []).append((s.labels, s.value))
    return samples


def status_rows(cluster: ClusterHandle) -> dict[str, dict[str, object]]:
    """``mqcluster status --json`` on the cluster's run directory, by node name."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = mqcluster(["--dir", str(cluster.directory), "status", "--json"])
    assert code == 0
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    return {str(r["name"]): r for r in rows}


async def test_every_node_serves_metrics_on_its_own_port(
    rocketmq_cluster: ClusterFactory,
) -> None:
    cluster = await asyncio.to_thread(rocketmq_cluster, "2m-2s-sync")
    rows = await asyncio.to_thread(status_rows, cluster)
    ports = {name: int(str(row["metrics_port"])) for name, row in rows.items()}
    assert set(ports) == {
        "namesrv-1", "namesrv-2", "broker-a", "broker-a-s", "broker-b", "broker-b-s",
    }  # fmt: skip
    assert len(set(ports.values())) == 6 and all(ports.values()), ports

    for name, port in ports.items():
        pid = cluster.pid(name)
        assert pid is not None and rows[name]["pid"] == pid
        # The endpoint starts with the node; a slow start is waited for, not slept on.
        await wait_until(
            lambda pid=pid, port=port: port in listening_ports(pid),
            timeout=30,
            what=f"{name} (pid {pid}) listening on its metrics port {port}",
            interval=0.05,
        )
        samples = await scrape(port)
        node = cluster.layout.node(name)
        if node.is_namesrv:
            # Registration is periodic after start: wait for all four brokers.
            async def registered(port: int = port) -> bool:
                found = (await scrape(port)).get("rocketmq_namesrv_brokers_registered", [])
                return sum(value for _, value in found) == 4

            await wait_until(registered, timeout=30, what=f"{name}: 4 brokers", interval=0.1)
        else:
            sizes = samples.get("rocketmq_storage_size", [])
            assert {labels["node_id"] for labels, _ in sizes} == {node.broker_name}, sizes

    others = {name: listening_ports(pid) for name in ports if (pid := cluster.pid(name))}
    for name, port in ports.items():
        assert [n for n, held in others.items() if port in held] == [name]
