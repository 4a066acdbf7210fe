"""docker-compose.yml for real: the image built, the cluster up, clients on both sides,
a master killed under load.

What a user does, in order, on one engine (``engine.py`` gets or starts it):

- build the image from deploy/Dockerfile on a local base (no registry here) with the
  project's wheels, then ``docker compose up -d --wait`` on docker-compose.yml itself
  (a separate project name; the host ports are the file's own);
- from the host: a topic created with mqadmin, 5,000 messages from our client,
  1,000 from the stock C++ client and 200 from the official RocketMQ 5 SDK over gRPC
  (broker-a's published endpoint), all consumed;
- from a client container on the compose network, through the name servers' service
  names: the same;
- broker-a's master ``docker kill``ed under load: every acknowledged message is
  consumed, the group's pulls are served by the slave within 5 s of the kill, and
  after ``docker start`` the master is back, its slave replicating again and the
  group's offsets (consumed from the slave meanwhile) on the master;
- ``docker compose down -v``, and dockerd stopped when the test started it.

The figures a README quotes (image size, build time, time to healthy) are printed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from aiorocketmq.client import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    MessageExt,
    PushConsumer,
    PushConsumerConfig,
)
from aiorocketmq.deploy import probe
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from tests.chaos.workload import Traffic, committed_offsets
from tests.docker.engine import (
    COMPOSE_BIN,
    REPO,
    DockerEngine,
    EngineUnavailable,
    base_image,
    build_project_image,
)
from tests.interop.rmq5.sdk_venv import ensure_sdk_python, run_sdk
from tests.support.cluster import get_route, wait_route
from tests.support.wait import wait_until, wait_until_sync

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

PROJECT = "aiorocketmq-compose-test"
IMAGE = "aiorocketmq:compose-test"
CLIENT_IMAGE = "aiorocketmq-client:compose-test"
NETWORK = f"{PROJECT}_default"
HOST_NAMESRV = "127.0.0.1:9876;127.0.0.1:9877"
NET_NAMESRV = "namesrv1:9876;namesrv2:9876"
SERVICES = {"namesrv1", "namesrv2", "broker-a", "broker-a-s", "broker-b", "broker-b-s",
            "dashboard"}  # fmt: skip
#: Host ports docker-compose.yml publishes (remoting, VIP, metrics, dashboard).
HOST_PORTS = (9876, 9877, 10909, 10911, 10913, 10915, 10919, 10921, 10923, 10925,
              5557, 5558, 5559, 5560, 5561, 5562, 8080, 8081, 8082, 8083, 8084)  # fmt: skip
METRICS_PORTS = range(5557, 5563)
BROKER_A_MASTER = "127.0.0.1:10911"
BROKER_A_SLAVE = "127.0.0.1:10915"
MASTERS = (BROKER_A_MASTER, "127.0.0.1:10921")
BROKER_A_SLAVE_METRICS = "http://127.0.0.1:5558/metrics"
CPP_SCRIPT = REPO / "tests" / "interop" / "cpp_client.py"
JOB_SCRIPT = REPO / "tests" / "docker" / "network_client.py"


@dataclass
class Cluster:
    """A compose project on one file, and the figures of bringing it up."""

    engine: DockerEngine
    env: dict[str, str]
    workdir: Path
    project: str = PROJECT
    file: Path = REPO / "docker-compose.yml"
    figures: dict[str, float] = field(default_factory=dict)

    def compose(self, *args: str, timeout: float = 300, check: bool = True) -> str:
        result = subprocess.run(
            [str(COMPOSE_BIN), "-p", self.project, "-f", str(self.file), *args],
            capture_output=True, text=True, timeout=timeout, env=self.env, check=False,
        )  # fmt: skip
        if check and result.returncode != 0:
            raise AssertionError(f"compose {' '.join(args)}: {result.stderr[-3000:]}")
        return result.stdout

    def container(self, service: str) -> str:
        return f"{self.project}-{service}-1"

    def health(self, service: str) -> str:
        return self.engine.run(
            "inspect", "-f", "{{.State.Health.Status}}", self.container(service)
        ).strip()

    def down(self) -> None:
        """Keep the last logs beside the test's files, then remove everything."""
        logs = self.compose("logs", "--no-color", "--tail", "200", timeout=60, check=False)
        (self.workdir / f"{self.project}.log").write_text(logs)
        self.compose("down", "-v", "--timeout", "30", timeout=300, check=False)


@dataclass
class Image:
    """The project image built for this module, and how long that took."""

    engine: DockerEngine
    base: str
    build_s: float
    size_mb: float

    def cluster(self, workdir: Path, **kw: object) -> Cluster:
        env = {**os.environ, "AIOROCKETMQ_IMAGE": IMAGE, "AIOROCKETMQ_BASE_IMAGE": self.base}
        env.pop("BROKER_IP", None)
        return Cluster(self.engine, env, workdir, **kw)  # type: ignore[arg-type]


def _port_in_use(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DockerEngine]:
    try:
        docker = DockerEngine.obtain(tmp_path_factory.mktemp("dockerd"))
    except EngineUnavailable as exc:
        pytest.skip(f"no Docker engine: {exc}")
    try:
        yield docker
    finally:
        docker.close()


@pytest.fixture(scope="module")
def image(engine: DockerEngine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Image]:
    # /metrics ports are left to _up: other tests' nodes may hold one for a moment.
    busy = [p for p in HOST_PORTS if p not in METRICS_PORTS and _port_in_use(p)]
    assert not busy, f"host ports the compose files use are in use: {busy}"
    base = base_image(engine)
    build_s = build_project_image(engine, base, IMAGE, tmp_path_factory.mktemp("wheels"))
    size = engine.run("image", "inspect", "-f", "{{.Size}}", IMAGE)
    try:
        yield Image(engine, base, build_s, int(size) / 1e6)
    finally:
        # The base image stays: it is the cache (also saved under .venv/docker-cache).
        engine.run("image", "rm", "-f", CLIENT_IMAGE, IMAGE, check=False)


@pytest.fixture(scope="module")
def cluster(image: Image, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = image.cluster(tmp_path_factory.mktemp("compose"))
    cluster.figures.update(build_s=image.build_s, image_mb=image.size_mb)
    try:
        cluster.figures["healthy_s"] = _up(cluster)
        yield cluster
    finally:
        cluster.down()


def _up(cluster: Cluster, attempts: int = 3) -> float:
    """``compose up -d --wait``; its seconds. Tests on the other xdist worker start
    name servers and brokers whose default /metrics ports (5557, 5558) the file
    publishes too: a port one of them holds for a moment is waited for, then retried."""
    for attempt in range(attempts):
        started = time.monotonic()
        try:
            cluster.compose("up", "-d", "--wait", "--no-build", timeout=300)
            return time.monotonic() - started
        except AssertionError as exc:
            held = re.search(r"listen tcp4? [^ ]*:(\d+): bind: address already in use", str(exc))
            if held is None or attempt == attempts - 1:
                raise
            port = int(held.group(1))
        wait_until_sync(
            lambda port=port: not _port_in_use(port), timeout=60, interval=0.2,  # type: ignore[misc]
            what=f"host port {port} free again",
        )  # fmt: skip
    raise AssertionError("unreachable")


async def _slaves_connected() -> None:
    """Wait until each SYNC_MASTER has its slave connected: before that a send is
    answered SLAVE_NOT_AVAILABLE, which healthy (the node answers) does not cover."""
    for master in MASTERS:

        async def connected(addr: str = master) -> bool:
            info = await probe.runtime_info(addr)
            return info is not None and "haSlaveAddr_0" in info

        await wait_until(connected, timeout=60, interval=0.2, what=f"{master}'s slave connected")


def _client_image(cluster: Cluster) -> str:
    """The project image plus the stock C++ client, for client containers."""
    context = cluster.workdir / "client-image"
    context.mkdir(exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(context),
         "rocketmq==0.4.4"],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    (context / "Dockerfile").write_text(
        f"FROM {IMAGE}\nUSER 0\nCOPY rocketmq-*.whl /tmp/\n"
        "RUN pip install --no-index /tmp/rocketmq-*.whl && rm /tmp/rocketmq-*.whl\nUSER 10001\n"
    )
    cluster.engine.run("build", "-q", "-t", CLIENT_IMAGE, str(context), timeout=300)
    return CLIENT_IMAGE


async def _run(*argv: str, limit_s: float = 180) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), limit_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode or 0, out.decode(), err.decode()


def _in_container(image: str, *argv: str) -> list[str]:
    mounts = [
        f"{CPP_SCRIPT}:/opt/job/cpp_client.py:ro",
        f"{JOB_SCRIPT}:/opt/job/network_client.py:ro",
    ]
    volumes = [arg for m in mounts for arg in ("-v", m)]
    return ["docker", "run", "--rm", "--network", NETWORK, "-e", "HOME=/tmp", *volumes, image,
            *argv]  # fmt: skip


async def _create_topic(topic: str, queues: int = 8, image: str | None = None) -> None:
    """mqadmin updateTopic on the cluster (from the host, or from a container of
    ``image``), then wait until both name servers route it to both brokers: each
    broker registers the new topic with each name server on its own."""
    args = ["updateTopic", "-c", "DefaultCluster", "-t", topic, "-r", str(queues),
            "-w", str(queues)]  # fmt: skip
    if image is None:
        argv = [sys.executable, "-m", "aiorocketmq.cli.admin", *args, "-n", HOST_NAMESRV]
    else:
        argv = _in_container(image, "mqadmin", *args, "-n", NET_NAMESRV)
    code, out, err = await _run(*argv)
    assert code == 0 and out.count("success") == 2, out + err
    for namesrv in HOST_NAMESRV.split(";"):
        await wait_route(namesrv, topic, lambda route: len(route.queue_datas) == 2)


async def _routes(topic: str) -> str:
    """What each name server answers the host for ``topic`` (a failure's context)."""
    lines = []
    for namesrv in HOST_NAMESRV.split(";"):
        route = await get_route(namesrv, topic)
        lines.append(f"\n{namesrv}: {route}")
    return "".join(lines)


def _check_job(code: int, out: str, err: str, expected: int) -> dict[str, object]:
    assert code == 0, err[-3000:]
    report: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    assert report["send_errors"] == 0, err[-3000:]
    assert report["consumed"] == report["expected"] == expected, report
    return report


async def test_host_network_variant(image: Image, tmp_path: Path) -> None:
    """deploy/docker-compose.host.yml: up, a client on the host and one in a container
    on the host's network, down. First, while the bridge cluster's ports are free."""
    host = image.cluster(tmp_path, project=f"{PROJECT}-host",
                         file=REPO / "deploy" / "docker-compose.host.yml")  # fmt: skip
    try:
        print(f"\nhost-network variant healthy in {_up(host):.1f} s")
        await _slaves_connected()
        code, out, err = await _run(
            sys.executable, str(JOB_SCRIPT), HOST_NAMESRV, "HostNetTopic", "host-group",
            "--produce", "2000", "--prefix", "h",
        )  # fmt: skip
        _check_job(code, out, err, expected=2000)
        job = await _run(
            "docker", "run", "--rm", "--network", "host", "-v",
            f"{JOB_SCRIPT}:/opt/job/network_client.py:ro", IMAGE, "python",
            "/opt/job/network_client.py", HOST_NAMESRV, "HostNetTopic", "container-group",
            "--produce", "2000", "--prefix", "c", "--expect", "h:2000",
        )  # fmt: skip
        _check_job(*job, expected=4000)
    finally:
        host.down()


def test_image_builds_and_the_cluster_becomes_healthy(cluster: Cluster) -> None:
    for service in SERVICES:
        assert cluster.health(service) == "healthy", service
    user = cluster.engine.run("image", "inspect", "-f", "{{.Config.User}}", IMAGE).strip()
    assert user == "10001"
    # The healthcheck followed the ready line the broker wrote, in the container's /tmp.
    ready = cluster.engine.run(
        "exec", cluster.container("broker-a"), "cat", "/tmp/aiorocketmq-ready"
    )
    assert ready.startswith("mqbroker ready address=127.0.0.1:10911 name=broker-a")
    print(
        f"\ncompose figures: image {cluster.figures['image_mb']:.0f} MB, "
        f"build {cluster.figures['build_s']:.1f} s, healthy {cluster.figures['healthy_s']:.1f} s"
    )
    page = urllib.request.urlopen("http://127.0.0.1:8080/", timeout=10).read().decode()
    assert "broker-a" in page and "broker-b" in page


async def test_host_clients_produce_and_consume(cluster: Cluster) -> None:
    await _slaves_connected()
    await _create_topic("HostTopic")
    cpp_home = cluster.workdir / "cpp-host"
    cpp_home.mkdir()
    code, out, err = await _run(
        "env", f"HOME={cpp_home}", sys.executable, str(CPP_SCRIPT), "produce", HOST_NAMESRV,
        "HostTopic", "sync", "1000", "--prefix", "cpp",
    )  # fmt: skip
    assert code == 0 and "errors=0" in out, out + err[-2000:] + await _routes("HostTopic")
    # A RocketMQ 5 client over gRPC, at broker-a's published endpoint.
    sdk = await run_sdk(
        ensure_sdk_python(), cluster.workdir / "sdk-host", "produce", "--endpoint",
        "127.0.0.1:8081", "--topic", "HostTopic", "--count", "200", "--prefix", "g",
    )  # fmt: skip
    assert len(sdk["sent"]) == 200 and all("id" in s for s in sdk["sent"]), sdk
    job = await _run(
        sys.executable, str(JOB_SCRIPT), HOST_NAMESRV, "HostTopic", "host-group",
        "--produce", "5000", "--prefix", "py", "--expect", "cpp:1000",
        "--expect-plain", "key-g:200",
    )  # fmt: skip
    _check_job(*job, expected=6200)


async def test_network_clients_produce_and_consume(cluster: Cluster) -> None:
    image = _client_image(cluster)
    await _create_topic("NetTopic", image=image)
    code, out, err = await _run(
        *_in_container(image, "python", "/opt/job/cpp_client.py", "produce", NET_NAMESRV,
                       "NetTopic", "sync", "1000", "--prefix", "cpp"),
    )  # fmt: skip
    assert code == 0 and "errors=0" in out, out + err[-2000:] + await _routes("NetTopic")
    job = await _run(
        *_in_container(image, "python", "/opt/job/network_client.py", NET_NAMESRV, "NetTopic",
                       "net-group", "--produce", "5000", "--prefix", "py", "--expect", "cpp:1000"),
    )  # fmt: skip
    _check_job(*job, expected=6000)


def _slave_out(topic: str, group: str) -> float:
    """Messages broker-a's slave returned to ``group``'s pulls (its /metrics)."""
    text = urllib.request.urlopen(BROKER_A_SLAVE_METRICS, timeout=5).read().decode()
    total = 0.0
    for line in text.splitlines():
        if (
            line.startswith("rocketmq_messages_out_total{")
            and f'topic="{topic}"' in line
            and f'consumer_group="{group}"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_master_kill_under_load_loses_nothing(cluster: Cluster) -> None:
    topic, group = "FailoverTopic", "failover-group"
    await _create_topic(topic, queues=4)
    # broker-a's messages are held in the listener until the kill, and few are cached
    # per queue: what is left must be pulled after the kill, from the slave.
    killed = asyncio.Event()
    seen: dict[str, int] = {}

    async def on_messages(
        msgs: list[MessageExt], ctx: ConsumeConcurrentlyContext
    ) -> ConsumeConcurrentlyStatus:
        if ctx.message_queue.broker_name == "broker-a":
            await killed.wait()
        for msg in msgs:
            seen[msg.keys[0]] = seen.get(msg.keys[0], 0) + 1
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    config = PushConsumerConfig(
        consume_from_where="CONSUME_FROM_FIRST_OFFSET", pull_threshold_for_queue=16
    )
    consumer = PushConsumer(group, namesrv_addr=HOST_NAMESRV, config=config)
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(on_messages)
    await consumer.start()
    try:
        await _kill_master_under_load(cluster, topic, group, killed, seen)
        # Caught up: back, and the group's offsets on the master cover all of broker-a's
        # messages, consumed from the slave while it was down.
        cluster.engine.run("start", cluster.container("broker-a"))
        await wait_until(
            lambda: cluster.health("broker-a") == "healthy", timeout=90, interval=0.5,
            what="broker-a's master healthy again",
        )  # fmt: skip
        ends = await _max_offsets(BROKER_A_MASTER, topic)
        await wait_until(
            lambda: _offsets_reach(BROKER_A_MASTER, group, topic, ends), timeout=60,
            interval=0.5, what="the group's broker-a offsets on the returned master",
        )  # fmt: skip
    finally:
        killed.set()
        await consumer.shutdown()


async def _kill_master_under_load(
    cluster: Cluster, topic: str, group: str, killed: asyncio.Event, seen: dict[str, int]
) -> None:
    """Send until broker-a acked 1,500, kill its master, check the slave serves the
    group within 5 s, send until broker-b acked 1,500 more, then wait until every
    acknowledged message was consumed."""
    # A slave learns a new topic at its next metadata sync from its master (10 s), and
    # refuses pulls of a topic it does not know, as Java's does.
    await wait_until(
        lambda: _knows_topic(BROKER_A_SLAVE, topic), timeout=30, interval=0.5,
        what=f"broker-a's slave syncing {topic} from its master",
    )  # fmt: skip
    traffic = await Traffic(HOST_NAMESRV, topic, prefix="fo", loops=4).start()
    try:
        await wait_until(
            lambda: len(traffic.acked_on("broker-a")) >= 1500, timeout=120,
            what="1,500 acks from broker-a", describe=lambda: traffic.statuses,
        )  # fmt: skip
        before = _slave_out(topic, group)
        cluster.engine.run("kill", cluster.container("broker-a"))
        kill_time = time.monotonic()
        killed.set()
        await wait_until(
            lambda: _slave_out(topic, group) > before, timeout=5, interval=0.1,
            what="broker-a's slave serving the group's pulls within 5 s of the kill",
        )  # fmt: skip
        served_after = time.monotonic() - kill_time
        await wait_until(
            lambda: traffic.oks_since(kill_time, "broker-b") >= 1500, timeout=120,
            what="1,500 acks from broker-b after the kill", describe=lambda: traffic.statuses,
        )  # fmt: skip
    finally:
        await traffic.stop()
    acked = set(traffic.acked)
    await wait_until(
        lambda: acked <= seen.keys(), timeout=90, interval=0.2,
        what="every acknowledged message consumed",
        describe=lambda: (len(acked - seen.keys()), sorted(acked - seen.keys())[:5]),
    )  # fmt: skip
    print(f"\nslave served the group {served_after:.2f} s after the kill; "
          f"acked {len(acked)} ({len(traffic.acked_on('broker-a'))} on broker-a)")  # fmt: skip


async def _knows_topic(addr: str, topic: str) -> bool:
    """Whether the broker at ``addr`` has ``topic`` (GET_ALL_TOPIC_CONFIG)."""
    client = RemotingClient()
    try:
        reply = await client.invoke(
            addr, RemotingCommand.request(RequestCode.GET_ALL_TOPIC_CONFIG, {}), 5000
        )
    finally:
        await client.close()
    return reply.code == ResponseCode.SUCCESS and f'"{topic}"'.encode() in reply.body


async def _max_offsets(addr: str, topic: str) -> list[int]:
    client = RemotingClient()
    try:
        ends = []
        for queue_id in range(4):
            request = RemotingCommand.request(
                RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)}
            )
            reply = await client.invoke(addr, request, 5000)
            ends.append(int(reply.ext_fields["offset"]))
        return ends
    finally:
        await client.close()


async def _offsets_reach(addr: str, group: str, topic: str, ends: list[int]) -> bool:
    return await committed_offsets(addr, group, topic, queues=4) == ends
