"""``mqcluster`` as users run it: separate processes, one command each.

The 2m-2s-async layout comes up on a free port base (small store files through
``--set``); ``status`` shows every node running with its PID, and a slave's lag
as its master's CommitLog max offset minus its own; the image's healthcheck
(``docker-entrypoint.sh health``) answers for a live name server and broker and
fails for a dead one; ``kill`` SIGKILLs a slave by its PID file, messages written
meanwhile are replicated after ``restart`` (lag back to 0 at equal offsets);
``kill``/``restart`` of a master brings it back registered at the same address;
``down`` stops everything and a second ``up`` in the same directory refuses while
nodes run. ``up --foreground`` stops its nodes on SIGTERM, and even when it is
SIGKILLed itself (their parent-death signal).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from aiorocketmq.client.config import ClientConfig
from aiorocketmq.client.producer import Producer
from aiorocketmq.client.results import SendStatus
from aiorocketmq.common.message import Message
from aiorocketmq.deploy.cluster import Cluster, free_layout_base
from aiorocketmq.deploy.layout import load_layout
from aiorocketmq.deploy.process import pid_alive
from aiorocketmq.proxy.v2 import definition_pb2 as pb
from aiorocketmq.proxy.v2 import service_pb2 as rpc
from tests.support.cluster import create_topic, has_topic
from tests.support.grpc_v2 import V2Client
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(240)

REPO = Path(__file__).resolve().parents[2]
SMALL = ["--set", "mappedFileSizeCommitLog=4194304", "--set", "mappedFileSizeConsumeQueue=120000"]


async def mqcluster(run_dir: Path, *args: str) -> tuple[int, str, str]:
    """Run ``mqcluster --dir run_dir *args``; exit code, stdout, stderr."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aiorocketmq.cli.cluster", "--dir", str(run_dir), *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=REPO,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def status(run_dir: Path) -> dict[str, dict[str, Any]]:
    code, out, err = await mqcluster(run_dir, "status", "--json")
    assert code == 0, err
    return {row["name"]: row for row in map(json.loads, out.splitlines())}


async def health(tmp_path: Path, role: str, addr: str) -> int:
    # The ready line the node would have written in its container.
    ready = tmp_path / f"ready-{role}"
    ready.write_text(f"mq{role} ready address={addr} pid=1\n")
    env = {**os.environ, "AIOROCKETMQ_READY_FILE": str(ready)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    proc = await asyncio.create_subprocess_exec(
        "sh", str(REPO / "deploy" / "docker-entrypoint.sh"), "health", env=env
    )
    return await asyncio.wait_for(proc.wait(), 60)


@pytest.fixture
async def run_dir(tmp_path: Path) -> AsyncIterator[Path]:
    """The run directory; whatever still runs at the end is stopped by PID."""
    directory = tmp_path / "cluster"
    yield directory
    if (directory / "cluster.json").exists():
        await asyncio.to_thread(Cluster.open(directory).down)


async def _send(namesrv: str, topic: str, count: int) -> None:
    config = ClientConfig(namesrv_addr=namesrv, client_ip="127.0.0.1", instance_name="mqc")
    async with Producer("PG_mqcluster", client_config=config) as producer:
        for i in range(count):
            result = await producer.send(Message(topic, b"x" * 512, properties={"KEYS": f"{i}"}))
            assert result.status is SendStatus.SEND_OK


async def _grpc_route_brokers(port: int, topic: str) -> set[str]:
    """The broker names QueryRoute at 127.0.0.1:``port`` answers for ``topic``."""
    client = V2Client(f"127.0.0.1:{port}")
    try:
        request = rpc.QueryRouteRequest(topic=pb.Resource(name=topic))
        reply = await client.call("QueryRoute", request)
        assert reply.status.code == pb.Code.OK, reply.status
        return {q.broker.name for q in reply.message_queues}
    finally:
        await client.close()


async def test_up_status_kill_restart_down(run_dir: Path, tmp_path: Path) -> None:
    layout = load_layout("2m-2s-async")
    low = min(layout.ports())
    base = free_layout_base(layout)  # metrics and gRPC ports free too
    code, out, err = await mqcluster(
        run_dir, "up", "--layout", "2m-2s-async", "--port-base", str(base), *SMALL
    )
    assert code == 0, err
    namesrv = f"127.0.0.1:{base};127.0.0.1:{base + 1}"
    assert f"NAMESRV_ADDR={namesrv}" in out
    rows = await status(run_dir)
    assert [(r["role"], r["running"]) for r in rows.values()] == [
        ("NAMESRV", True), ("NAMESRV", True), ("ASYNC_MASTER", True), ("SLAVE", True),
        ("ASYNC_MASTER", True), ("SLAVE", True),
    ]  # fmt: skip
    assert all(pid_alive(r["pid"]) for r in rows.values())
    master, slave = rows["broker-a"]["address"], rows["broker-a-s"]["address"]
    assert await health(tmp_path, "namesrv", rows["namesrv-1"]["address"]) == 0
    assert await health(tmp_path, "broker", slave) == 0

    await create_topic(master, "MqcTopic")
    await wait_until(lambda: has_topic(slave, "MqcTopic"), timeout=30, what="topic on slave")
    # Every broker its own RocketMQ 5 gRPC endpoint (8081..8084, moved with the rest),
    # each answering for its own broker.
    grpc_ports = {name: r["grpc_port"] for name, r in rows.items()}
    names = ("a", "a-s", "b", "b-s")
    moved = {n: p + base - low for n, p in zip(names, range(8081, 8085), strict=True)}
    assert grpc_ports == {
        "namesrv-1": 0, "namesrv-2": 0, "broker-a": moved["a"], "broker-a-s": moved["a-s"],
        "broker-b": moved["b"], "broker-b-s": moved["b-s"],
    }  # fmt: skip
    answers = [await _grpc_route_brokers(grpc_ports[f"broker-{n}"], "MqcTopic") for n in names]
    assert answers == [{"broker-a"}, {"broker-a"}, {"broker-b"}, {"broker-b"}]
    slave_pid = rows["broker-a-s"]["pid"]
    code, _, err = await mqcluster(run_dir, "kill", "broker-a-s")
    assert code == 0, err
    assert not pid_alive(slave_pid)
    assert await health(tmp_path, "broker", slave) == 1
    await _send(namesrv, "MqcTopic", 300)  # some go to broker-a while its slave is down
    rows = await status(run_dir)
    assert not rows["broker-a-s"]["running"] and rows["broker-a-s"]["pid"] is None
    assert rows["broker-a-s"]["lag"] is None  # nothing to compare with
    assert rows["broker-a"]["max_offset"] > 0

    code, _, err = await mqcluster(run_dir, "restart", "broker-a-s")
    assert code == 0, err

    async def caught_up() -> bool:
        rows = await status(run_dir)
        a, s = rows["broker-a"], rows["broker-a-s"]
        return s["running"] and s["max_offset"] == a["max_offset"] and s["lag"] == 0

    await wait_until(caught_up, timeout=60, what="restarted slave caught up (status lag 0)")
    rows = await status(run_dir)
    assert rows["broker-a-s"]["pid"] != slave_pid
    assert (
        rows["broker-b-s"]["lag"]
        == rows["broker-b"]["max_offset"] - rows["broker-b-s"]["max_offset"]
    )

    code, _, err = await mqcluster(run_dir, "kill", "broker-a")
    assert code == 0, err
    assert not (await status(run_dir))["broker-a"]["running"]
    code, _, err = await mqcluster(run_dir, "restart", "broker-a")  # waits until registered
    assert code == 0, err
    rows = await status(run_dir)
    assert rows["broker-a"]["running"] and rows["broker-a"]["address"] == master

    code, _, err = await mqcluster(run_dir, "up", "--layout", "1m")
    assert code == 1 and "already running" in err
    pids = [r["pid"] for r in rows.values()]
    code, _, err = await mqcluster(run_dir, "down")
    assert code == 0, err
    assert [p for p in pids if pid_alive(p)] == []
    assert not any(r["running"] for r in (await status(run_dir)).values())
    # Every node stopped cleanly on SIGTERM: its log ends with the shutdown line.
    for name in ("broker-a", "broker-b-s"):
        log = (run_dir / "logs" / f"{name}.log").read_text("utf-8")
        assert "broker stopped" in log.splitlines()[-1], log[-2000:]


async def _foreground(run_dir: Path) -> tuple[asyncio.subprocess.Process, list[int]]:
    base = free_layout_base(load_layout("1m"))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aiorocketmq.cli.cluster", "--dir", str(run_dir), "up",
        "--layout", "1m", "--port-base", str(base), "--foreground", *SMALL,
        stdout=asyncio.subprocess.PIPE, cwd=REPO,
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    while not lines or "Ctrl-C stops" not in lines[-1]:
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line, f"mqcluster exited early: {lines}"
        lines.append(line.decode())
    return proc, [r["pid"] for r in (await status(run_dir)).values()]


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
async def test_foreground_stops_the_cluster_when_it_goes(run_dir: Path, sig: str) -> None:
    """SIGTERM (or Ctrl-C): an orderly down, exit 0. SIGKILL of the launcher itself:
    its nodes get SIGTERM from the kernel (parent-death signal) and stop cleanly."""
    proc, pids = await _foreground(run_dir)
    assert len(pids) == 2 and all(pid_alive(p) for p in pids)
    proc.send_signal(getattr(signal, sig))
    code = await asyncio.wait_for(proc.wait(), 60)
    assert code == (0 if sig == "SIGTERM" else -signal.SIGKILL)
    await wait_until(lambda: not any(pid_alive(p) for p in pids), timeout=30, what="nodes gone")
    log = (run_dir / "logs" / "broker-a.log").read_text("utf-8")
    assert "broker stopped" in log.splitlines()[-1], log[-2000:]
