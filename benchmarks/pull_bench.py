"""Pull benchmark: PULL_MESSAGE replies written zero-copy vs joined (copied), side by side.

What it measures, in one run: a child process holds a real MessageStore (``--count``
messages of ``--body`` bytes in one queue, all in the page cache) and two
RemotingServers running the real ``PullProcessor``:

- *zero-copy*: the processor as it is; a FOUND reply's body is ``BodyParts`` over
  the held CommitLog records, written by ``transport.writelines`` straight from the
  mapping and released once the transport let go of it;
- *copy*: the same processor behind a wrapper that rebuilds the old path, a reply
  body joined into new ``bytes`` and the records released before the write. This
  switch exists only here, in the benchmark.

A light load generator in this process keeps ``--window`` pulls of 32 messages in
flight per connection (frames pre-encoded, offsets cycling over the queue; replies
are only framed and counted, not decoded; messages are counted from body bytes,
every record being the same size) and reports messages/s and MB/s of reply bytes
on the wire, and messages per server CPU-second. Both processes run uvloop. CPU
shares of both are reported so it is clear which one saturated; rounds interleave
the two modes (alternating which goes first) and each row is the median round (the
machine is shared and noisy: only ratios within a run mean much, and when the
server does not get a whole core, msgs per server CPU-second is the fairer one).

Run: ``python benchmarks/pull_bench.py [--seconds 3] [--count 20000] [--body 1024]
[--window 16] [--connections 2] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import uvloop

from aiorocketmq.broker.client_registry import ConsumerManager, ProducerManager
from aiorocketmq.broker.config import BrokerConfig
from aiorocketmq.broker.context import BrokerContext
from aiorocketmq.broker.offsets import ConsumerOffsetManager
from aiorocketmq.broker.processors.pull import PullProcessor
from aiorocketmq.broker.subscription_group import SubscriptionGroupManager
from aiorocketmq.broker.topic_config import TopicConfigManager
from aiorocketmq.common.clock import SystemClock
from aiorocketmq.common.properties import properties_to_string
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.remoting.broker_headers import PullMessageRequestHeader
from aiorocketmq.remoting.codes import RequestCode, ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingServerConfig
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.frame import decode_frame_payload, encode_frame
from aiorocketmq.remoting.server import RemotingServer
from aiorocketmq.runtime import BlockingExecutor
from aiorocketmq.store.config import MessageStoreConfig
from aiorocketmq.store.inner_message import MessageExtBrokerInner
from aiorocketmq.store.message_store import MessageStore

TOPIC = "PullBench"
GROUP = "pull_bench_group"
PULL_BATCH = 32
HOSTS = {"born_host": ("127.0.0.1", 50000), "store_host": ("127.0.0.1", 10911)}
_LEN = struct.Struct(">i")
_CLK_TCK = os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------------ server


async def _fill(root: Path, count: int, body_bytes: int) -> MessageStore:
    config = MessageStoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=max(64, count * (body_bytes + 200) // 2**20 + 1) * 2**20,
    )
    store = MessageStore(config)
    await store.load()
    await store.start()
    await store.commit_log.allocator.idle()
    props = {"TAGS": "bench"}
    msg = MessageExtBrokerInner(
        TOPIC, 0, os.urandom(body_bytes), props, properties_to_string(props), **HOSTS
    )  # type: ignore[arg-type]
    for n in range(count):
        assert (await store.put_message(msg)).ok
        if n % 64 == 63:
            await asyncio.sleep(0)  # let the dispatcher run, as a broker's loop would
    await store.dispatcher.wait_dispatched(store.max_phy_offset)
    return store


def _context(root: Path, store: MessageStore, executor: BlockingExecutor) -> BrokerContext:
    clock, cfg = SystemClock(), BrokerConfig()
    topics = TopicConfigManager(root / "topics.json", executor, cfg, clock)
    topics.update_topic_config(TopicConfig(TOPIC, 1, 1))
    return BrokerContext(
        config=cfg,
        store_config=store.config,
        store=store,
        topics=topics,
        groups=SubscriptionGroupManager(root / "subscriptionGroup.json", executor, cfg, clock),
        offsets=ConsumerOffsetManager(root / "consumerOffset.json", executor),
        producers=ProducerManager(clock),
        consumers=ConsumerManager(clock),
        hold=None,
        store_host=HOSTS["store_host"],
        clock=clock,
    )


def _copying(pull: PullProcessor):  # type: ignore[no-untyped-def]
    """The pre-zero-copy reply: body joined into new bytes, records released first."""

    async def handle(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        reply = await pull.handle(conn, request)
        if reply is not None and reply.body_parts is not None:
            parts, reply.body_parts = reply.body_parts, None
            reply.body = bytes(parts)
            parts.release()
        return reply

    return handle


async def _serve(count: int, body_bytes: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="pull_bench_"))
    executor = BlockingExecutor("pull-bench")
    store = await _fill(root / "store", count, body_bytes)
    pull = PullProcessor(_context(root, store, executor))
    servers = []
    for handler in (pull.handle, _copying(pull)):
        table = ProcessorTable()
        table.register(RequestCode.PULL_MESSAGE, handler)
        server = RemotingServer(table, RemotingServerConfig(listen_host="127.0.0.1", listen_port=0))
        await server.start()
        servers.append(server)
    print(f"READY {servers[0].port} {servers[1].port}", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_reader(sys.stdin.fileno(), stop.set)  # parent closes stdin
    await stop.wait()
    for server in servers:
        await server.shutdown()
    await store.shutdown()
    await executor.shutdown()
    shutil.rmtree(root)


# ------------------------------------------------------------------------- load


def _frames(count: int) -> list[bytes]:
    frames = []
    for offset in range(0, count - PULL_BATCH + 1, PULL_BATCH):
        header = PullMessageRequestHeader(
            consumer_group=GROUP,
            topic=TOPIC,
            queue_id=0,
            queue_offset=offset,
            max_msg_nums=PULL_BATCH,
            sys_flag=0x4,  # subscription in the request: no heartbeat needed
            commit_offset=0,
            suspend_timeout_millis=0,
            sub_version=0,
            subscription="*",
        )
        cmd = RemotingCommand(code=RequestCode.PULL_MESSAGE, ext_fields=header.to_ext_fields())
        cmd.opaque = offset + 1
        frames.append(encode_frame(cmd))
    return frames


class _PullLoad(asyncio.Protocol):
    """Keeps ``window`` pulls in flight; counts reply frames and bytes."""

    def __init__(self, frames: list[bytes], window: int, deadline: float) -> None:
        self.frames, self.window, self.deadline = frames, window, deadline
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.buf = bytearray()
        self.replies = self.reply_bytes = self.in_flight = self.next = 0
        self.first: bytes | None = None
        self.body_bytes = 0

    def _send(self, n: int) -> None:
        out = []
        for _ in range(n):
            out.append(self.frames[self.next % len(self.frames)])
            self.next += 1
        self.transport.writelines(out)  # type: ignore[attr-defined]
        self.in_flight += n

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self._send(self.window)

    def data_received(self, data: bytes) -> None:
        self.buf += data
        pos, buf, n = 0, self.buf, 0
        while len(buf) - pos >= 4:
            (length,) = _LEN.unpack_from(buf, pos)
            if len(buf) - pos < 4 + length:
                break
            if self.first is None:
                self.first = bytes(buf[pos + 4 : pos + 4 + length])
            self.reply_bytes += 4 + length
            (info,) = _LEN.unpack_from(buf, pos + 4)
            self.body_bytes += length - 4 - (info & 0xFFFFFF)
            pos += 4 + length
            n += 1
        del buf[:pos]
        self.replies += n
        self.in_flight -= n
        if time.perf_counter() < self.deadline:
            self._send(n)
        elif self.in_flight == 0 and not self.done.done():
            self.done.set_result(None)


async def _load(port: int, frames: list[bytes], args: argparse.Namespace) -> tuple[float, float]:
    """(messages/s, MB/s) of reply bytes over ``args.seconds``."""
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    loads = []
    for _ in range(args.connections):
        _, proto = await loop.create_connection(
            lambda: _PullLoad(frames, args.window, start + args.seconds), "127.0.0.1", port
        )
        loads.append(proto)
    await asyncio.wait_for(asyncio.gather(*(p.done for p in loads)), args.seconds + 30)
    elapsed = time.perf_counter() - start
    for p in loads:
        p.transport.close()
    # Every stored record has the same size: one decoded sample gives it, and the
    # body bytes of all replies (summed from their frame headers) give the count.
    assert loads[0].first is not None
    reply = decode_frame_payload(loads[0].first)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    per_reply = int(reply.ext_fields["nextBeginOffset"]) - (reply.opaque - 1)
    record_bytes = len(reply.body) / per_reply
    messages = sum(p.body_bytes for p in loads) / record_bytes
    return messages / elapsed, sum(p.reply_bytes for p in loads) / elapsed / 1e6


# ------------------------------------------------------------------------ driver


@dataclass
class _Child:
    proc: subprocess.Popen[str]
    ports: tuple[int, int]

    def cpu_s(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _start(args: argparse.Namespace) -> _Child:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--count", str(args.count), "--body", str(args.body)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError(f"pull server did not start: {line!r}")
    _, zero, copy = line.split()
    return _Child(proc, (int(zero), int(copy)))


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--count", type=int, default=20_000, help="messages in the queue")
    parser.add_argument("--body", type=int, default=1024, help="message body bytes")
    parser.add_argument("--window", type=int, default=16, help="pulls in flight per connection")
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="median of this many runs")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        uvloop.run(_serve(args.count, args.body))
        return
    print(
        f"pull benchmark: body={args.body} B batch={PULL_BATCH} count={args.count} "
        f"window={args.window}x{args.connections} seconds={args.seconds} rounds={args.rounds} "
        f"cores={os.cpu_count()} python={sys.version.split()[0]} uvloop={uvloop.__version__}"
    )
    frames = _frames(args.count)
    child = _start(args)
    samples: dict[str, list[tuple[float, float, float, float]]] = {"zero-copy": [], "copy": []}
    try:
        modes = list(zip(samples, child.ports, strict=True))
        for n in range(args.rounds):
            # Alternate which mode goes first: no mode always inherits the other's
            # warm (or cold) state.
            for mode, port in modes if n % 2 == 0 else modes[::-1]:
                s0, c0, w0 = child.cpu_s(), _own_cpu_s(), time.perf_counter()
                msgs, mbs = uvloop.run(_load(port, frames, args))
                wall = time.perf_counter() - w0
                srv, load = (child.cpu_s() - s0) / wall, (_own_cpu_s() - c0) / wall
                samples[mode].append((msgs, mbs, srv, load))
    finally:
        child.stop()
    # msgs per server CPU-second: on a shared machine the server may not get a whole
    # core, and then this says more about the code than msgs/s does.
    print(
        f"{'reply body':<11} {'msgs/s':>10} {'MB/s':>8} {'srv cpu':>8} {'load cpu':>9} "
        f"{'msgs/srv-cpu-s':>15}"
    )
    median = {}
    for mode, rows in samples.items():
        median[mode] = sorted(rows)[len(rows) // 2]
        msgs, mbs, srv, load = median[mode]
        per_cpu = sorted(r[0] / r[2] for r in rows)[len(rows) // 2]
        print(f"{mode:<11} {msgs:>10,.0f} {mbs:>8,.1f} {srv:>7.0%} {load:>9.0%} {per_cpu:>15,.0f}")
    ratio = median["zero-copy"][0] / median["copy"][0]
    print(f"zero-copy vs copy: {ratio:.2f}x msgs/s")


if __name__ == "__main__":
    main()
