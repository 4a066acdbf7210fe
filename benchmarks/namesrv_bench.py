"""Name-server benchmark: GET_ROUTEINFO_BY_TOPIC requests/s with a realistic route table.

Setup: ``mqnamesrv`` runs in a child process (the real CLI, ``--listenPort 0``); this process
registers ``--brokers`` masters (8), each holding the same ``--topics`` topics
(1,000), over one connection per broker, which stays open for the whole run (a
closed one would evict its broker). Every route therefore lists 8 queue datas and 8
broker datas (~1.3 KiB of JSON).

Rows, each the median of ``--rounds`` interleaved rounds:

1. *raw, 4.9.8 client*: a light load generator keeps ``--window`` pre-encoded
   requests (version 409: standard JSON routes) in flight on one connection and
   only counts replies: the server's ceiling.
2. *raw, C++ 1.2 client*: the same with version 63 (fastjson's bare-key routes).
3. *client*: our ``RemotingClient`` (``AUTO`` header: MSGPACK against our server),
   ``--window`` concurrent ``invoke`` calls over random topics, decoding nothing.

Then, in this process, what one uncached route costs to build and encode (the
name server caches encoded routes until the tables change; this is the cost of a
miss). CPU of both processes is reported so it is clear which one saturated.

Run: ``python benchmarks/namesrv_bench.py [--seconds 3] [--window 128] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import uvloop

# The remoting benchmark's load generator and CPU accounting (same directory).
from remoting_bench import _Child, _own_cpu_s, _raw_load

from aiorocketmq.common.clock import SystemClock
from aiorocketmq.common.route import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from aiorocketmq.namesrv.route_info import RouteInfoManager
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import MQVersion, RequestCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingClientConfig
from aiorocketmq.remoting.frame import encode_frame
from aiorocketmq.remoting.namesrv_headers import RegisterBrokerRequestHeader

TIMEOUT_MS = 10_000


def _topics(count: int) -> list[str]:
    return [f"BenchTopic-{i:04d}" for i in range(count)]


def _wrapper(topics: list[str]) -> TopicConfigSerializeWrapper:
    table = {t: TopicConfig(t, 8, 8) for t in topics}
    return TopicConfigSerializeWrapper(table, DataVersion(int(time.time() * 1000), 1))


def _broker_addr(i: int) -> str:
    return f"10.0.{i // 250}.{i % 250 + 1}:10911"


def _start_namesrv(workdir: Path) -> _Child:
    conf = workdir / "namesrv.properties"
    conf.write_text(f"kvConfigPath={workdir / 'kvConfig.json'}\n")
    argv = [
        "-m",
        "aiorocketmq.cli.namesrv",
        "--listenPort",
        "0",
        "--bindAddress",
        "127.0.0.1",
        "-c",
        str(conf),
    ]
    proc = subprocess.Popen(
        [sys.executable, *argv, "--log-level", "WARNING"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("mqnamesrv ready address="):
        proc.kill()
        raise RuntimeError(f"mqnamesrv did not start: {line!r}")
    port = int(line.split()[2].split("=")[1].rsplit(":", 1)[1])
    return _Child(proc, port)


def _route_frame(topic: str, version: int) -> bytes:
    cmd = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
    cmd.version = version
    cmd.opaque = 1
    return encode_frame(cmd)


async def _client_load(port: int, topics: list[str], seconds: float, window: int) -> float:
    client = RemotingClient(RemotingClientConfig(serialize_type="AUTO"))
    address = f"127.0.0.1:{port}"
    deadline = time.perf_counter() + seconds
    count = 0

    async def worker(rng: random.Random) -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            request = RemotingCommand.request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": rng.choice(topics)}
            )
            reply = await client.invoke(address, request, TIMEOUT_MS)
            assert reply.code == 0 and reply.body
            count += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker(random.Random(i)) for i in range(window)))
    elapsed = time.perf_counter() - start
    await client.close()
    return count / elapsed


def _measure(child: _Child, run) -> tuple[float, float, float]:
    s0, c0, w0 = child.cpu_s(), _own_cpu_s(), time.perf_counter()
    rate = uvloop.run(run())
    wall = time.perf_counter() - w0
    return rate, (child.cpu_s() - s0) / wall, (_own_cpu_s() - c0) / wall


def _uncached_route_us(brokers: int, topics: list[str]) -> tuple[float, int]:
    """Mean µs to pick up and encode one route (no cache), and the body size."""
    rim = RouteInfoManager(SystemClock())
    wrapper = _wrapper(topics)
    for i in range(brokers):
        rim.register_broker(
            cluster_name="BenchCluster",
            broker_addr=_broker_addr(i),
            broker_name=f"broker-{i}",
            broker_id=0,
            ha_server_addr="h:1",
            topic_config_wrapper=wrapper,
            filter_server_list=[],
            channel=object(),
        )
    start = time.perf_counter()
    size = 0
    for topic in topics:
        route = rim.pickup_topic_route_data(topic)
        assert route is not None
        size = len(route.encode(False))
    return (time.perf_counter() - start) / len(topics) * 1e6, size


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--window", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3, help="median of this many runs")
    parser.add_argument("--brokers", type=int, default=8)
    parser.add_argument("--topics", type=int, default=1000)
    return parser.parse_args()


def main() -> None:
    args = _parse_args()
    topics = _topics(args.topics)
    print(
        f"namesrv benchmark: GET_ROUTEINFO_BY_TOPIC, {args.topics} topics x {args.brokers} "
        f"brokers, window={args.window} seconds={args.seconds} rounds={args.rounds} "
        f"cores={os.cpu_count()} python={sys.version.split()[0]}"
    )
    topic = random.Random(7).choice(topics)
    configs = [
        ("raw", "4.9.8 client (standard JSON)", _route_frame(topic, MQVersion.V4_9_8)),
        ("raw", "C++ 1.2 client (fastjson keys)", _route_frame(topic, MQVersion.V3_1_8)),
        ("client", "RemotingClient AUTO, random topics", None),
    ]
    with tempfile.TemporaryDirectory(prefix="namesrv-bench-") as tmp:
        child = _start_namesrv(Path(tmp))
        samples: list[list[tuple[float, float, float]]] = [[] for _ in configs]
        try:
            registrar = _Registrar(child.port, args.brokers, topics)
            registrar.start()
            for _ in range(args.rounds):
                for i, (load, _name, frame) in enumerate(configs):
                    if load == "raw":
                        run = lambda f=frame: _raw_load(child.port, f, args.seconds, args.window)  # noqa: E731
                    else:
                        run = lambda: _client_load(child.port, topics, args.seconds, args.window)  # noqa: E731
                    samples[i].append(_measure(child, run))
        finally:
            child.proc.send_signal(signal.SIGTERM)
            code = child.proc.wait(10)
            registrar.stop()
    print(f"{'load':<7} {'request form':<36} {'req/s':>10} {'srv cpu':>8} {'load cpu':>9}")
    for (load, name, _frame), rows in zip(configs, samples, strict=True):
        rate, srv_cpu, load_cpu = sorted(rows)[len(rows) // 2]
        print(f"{load:<7} {name:<36} {rate:>10,.0f} {srv_cpu:>7.0%} {load_cpu:>9.0%}")
    per_route_us, size = _uncached_route_us(args.brokers, topics)
    print(
        f"uncached route build+encode (in-process): {per_route_us:.1f} us/route, "
        f"{size} B body; mqnamesrv exit code on SIGTERM: {code}"
    )


class _Registrar:
    """A helper process that registers the brokers and keeps their connections open.

    The broker connections must outlive every measurement round (a closed one evicts
    its broker), while each round runs on a fresh event loop here; so they live in a
    process of their own, idle during the rounds. Closing its stdin stops it.
    """

    def __init__(self, port: int, brokers: int, topics: list[str]) -> None:
        self.args = [str(port), str(brokers), str(len(topics))]
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--register", *self.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != "REGISTERED":
            raise RuntimeError(f"registration failed: {line!r}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
            self.proc.wait(10)


async def _register_and_hold(port: int, brokers: int, topic_count: int) -> None:
    clients = [RemotingClient(RemotingClientConfig(serialize_type="JSON")) for _ in range(brokers)]
    topics = _topics(topic_count)
    namesrv = f"127.0.0.1:{port}"
    for i, client in enumerate(clients):
        await _register_one(client, namesrv, i, topics)
    print("REGISTERED", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_reader(sys.stdin.fileno(), stop.set)
    await stop.wait()
    for client in clients:
        await client.close()


async def _register_one(client: RemotingClient, namesrv: str, i: int, topics: list[str]):
    body = RegisterBrokerBody(_wrapper(topics)).encode()
    header = RegisterBrokerRequestHeader(
        broker_name=f"broker-{i}",
        broker_addr=_broker_addr(i),
        cluster_name="BenchCluster",
        ha_server_addr=_broker_addr(i).replace("10911", "10912"),
        broker_id=0,
    )
    request = RemotingCommand.request(RequestCode.REGISTER_BROKER, header.to_ext_fields(), body)
    reply = await client.invoke(namesrv, request, TIMEOUT_MS)
    assert reply.code == 0, reply.remark


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--register":
        port, brokers, topic_count = (int(a) for a in sys.argv[2:5])
        uvloop.run(_register_and_hold(port, brokers, topic_count))
    else:
        main()
