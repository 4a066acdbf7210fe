"""Remoting benchmark: pipelined requests/s, our server against a bare echo ceiling.

What it measures, in one run, side by side (the machine is noisy; only ratios
within one run mean much):

1. *Server throughput*: a light load generator keeps ``--window`` requests of
   ``--body`` bytes in flight on one connection (frames pre-encoded, replies only
   counted) against
   - the aiorocketmq RemotingServer, once per header type (JSON, ROCKETMQ, MSGPACK),
     with a processor that answers each request with its body;
   - a bare asyncio length-prefixed echo server (the ceiling: framing, no decoding).
2. *End to end*: our RemotingClient (``--window`` concurrent ``invoke`` calls) against
   the same server, per header type. This decides our client's default header type.

Servers run in a child process and the load in this one, each on uvloop. CPU time of
both processes is reported so it is clear which one saturated.

Run: ``python benchmarks/remoting_bench.py [--seconds 3] [--body 1024] [--window 128]
[--rounds 3]``; every row is the median of its rounds, and rounds interleave all rows.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import subprocess
import sys
import time
from dataclasses import dataclass

import uvloop

from aiorocketmq.remoting.client import RemotingClient
from aiorocketmq.remoting.codes import RequestCode, SerializeType
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingClientConfig, RemotingServerConfig
from aiorocketmq.remoting.connection import ProcessorTable
from aiorocketmq.remoting.frame import encode_frame
from aiorocketmq.remoting.server import RemotingServer

_LEN = struct.Struct(">i")
_CLK_TCK = os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------------ servers


class _EchoProtocol(asyncio.Protocol):
    """Length-prefixed echo: the least a framed server can do."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buf = bytearray()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        out = []
        pos, buf = 0, self.buf
        while len(buf) - pos >= 4:
            (length,) = _LEN.unpack_from(buf, pos)
            end = pos + 4 + length
            if end > len(buf):
                break
            out.append(bytes(buf[pos:end]))
            pos = end
        del buf[:pos]
        if out:
            self.transport.writelines(out)  # type: ignore[attr-defined]


async def _serve(kind: str) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    if kind == "echo":
        server = await loop.create_server(_EchoProtocol, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
    else:
        table = ProcessorTable()
        table.register(RequestCode.SEND_MESSAGE, lambda _c, r: r.response_to(0, body=r.body))
        remoting = RemotingServer(
            table, RemotingServerConfig(listen_host="127.0.0.1", listen_port=0)
        )
        await remoting.start()
        port = remoting.port
    print(f"READY {port}", flush=True)
    loop.add_reader(sys.stdin.fileno(), stop.set)  # parent closes stdin to stop us
    await stop.wait()


# ------------------------------------------------------------------------- loads


class _CountingProtocol(asyncio.Protocol):
    """Counts reply frames; keeps ``window`` requests in flight."""

    def __init__(self, frame: bytes, window: int, deadline: float, done: asyncio.Future[int]):
        self.frame, self.window, self.deadline, self.done = frame, window, deadline, done
        self.buf = bytearray()
        self.replies = 0
        self.in_flight = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.transport.write(self.frame * self.window)  # type: ignore[attr-defined]
        self.in_flight = self.window

    def data_received(self, data: bytes) -> None:
        self.buf += data
        pos, buf, n = 0, self.buf, 0
        while len(buf) - pos >= 4:
            (length,) = _LEN.unpack_from(buf, pos)
            if len(buf) - pos < 4 + length:
                break
            pos += 4 + length
            n += 1
        del buf[:pos]
        self.replies += n
        self.in_flight -= n
        if time.perf_counter() < self.deadline:
            self.transport.write(self.frame * n)  # type: ignore[attr-defined]
            self.in_flight += n
        elif self.in_flight == 0 and not self.done.done():
            self.done.set_result(self.replies)


async def _raw_load(port: int, frame: bytes, seconds: float, window: int) -> float:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[int] = loop.create_future()
    start = time.perf_counter()
    transport, _ = await loop.create_connection(
        lambda: _CountingProtocol(frame, window, start + seconds, done), "127.0.0.1", port
    )
    replies = await asyncio.wait_for(done, seconds + 30)
    elapsed = time.perf_counter() - start
    transport.close()
    return replies / elapsed


async def _client_load(port: int, mode: str, body: bytes, seconds: float, window: int):
    client = RemotingClient(RemotingClientConfig(serialize_type=mode))
    address = f"127.0.0.1:{port}"
    deadline = time.perf_counter() + seconds
    count = 0

    async def worker() -> None:
        nonlocal count
        while time.perf_counter() < deadline:
            req = RemotingCommand.request(
                RequestCode.SEND_MESSAGE, {"topic": "BenchTopic", "queueId": "0"}, body
            )
            reply = await client.invoke(address, req, 10_000)
            assert reply.code == 0 and len(reply.body) == len(body)
            count += 1

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(window)))
    elapsed = time.perf_counter() - start
    await client.close()
    return count / elapsed


# ------------------------------------------------------------------------ driver


@dataclass
class _Child:
    proc: subprocess.Popen[str]
    port: int

    def cpu_s(self) -> float:
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _start(kind: str) -> _Child:
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", kind],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError(f"{kind} server did not start: {line!r}")
    return _Child(proc, int(line.split()[1]))


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def _measure(kind: str, run) -> tuple[float, float, float]:
    """(rate, server CPU share, load CPU share) of one run against a fresh server."""
    child = _start(kind)
    try:
        s0, c0, w0 = child.cpu_s(), _own_cpu_s(), time.perf_counter()
        rate = uvloop.run(run(child.port))
        wall = time.perf_counter() - w0
        return rate, (child.cpu_s() - s0) / wall, (_own_cpu_s() - c0) / wall
    finally:
        child.stop()


def _frame(st: SerializeType, body: bytes) -> bytes:
    cmd = RemotingCommand.request(
        RequestCode.SEND_MESSAGE, {"topic": "BenchTopic", "queueId": "0"}, body, serialize_type=st
    )
    cmd.opaque = 1
    return encode_frame(cmd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--window", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3, help="median of this many runs")
    parser.add_argument("--serve", choices=["echo", "remoting"])
    args = parser.parse_args()
    if args.serve:
        uvloop.run(_serve(args.serve))
        return
    body = os.urandom(args.body)
    print(
        f"remoting benchmark: body={args.body} B window={args.window} "
        f"seconds={args.seconds} rounds={args.rounds} cores={os.cpu_count()} "
        f"python={sys.version.split()[0]}"
    )
    print(
        f"{'load':<10} {'server':<18} {'req/s':>10} {'vs echo':>8} {'srv cpu':>8} {'load cpu':>9}"
    )
    configs: list[tuple[str, str, str, object]] = []
    echo_frame = _frame(SerializeType.JSON, body)
    configs.append(
        ("raw", "bare echo", "echo", lambda p: _raw_load(p, echo_frame, args.seconds, args.window))
    )
    for st in SerializeType:
        frame = _frame(st, body)
        configs.append(
            (
                "raw",
                f"remoting {st.name}",
                "remoting",
                lambda p, f=frame: _raw_load(p, f, args.seconds, args.window),
            )
        )
    for mode in [*(st.name for st in SerializeType), "AUTO"]:
        configs.append(
            (
                "client",
                f"remoting {mode}",
                "remoting",
                lambda p, m=mode: _client_load(p, m, body, args.seconds, args.window),
            )
        )
    # Rounds interleave every configuration, and each row reports its median round,
    # so a noisy moment on this shared machine skews one sample, not one row.
    samples: dict[int, list[tuple[float, float, float]]] = {i: [] for i in range(len(configs))}
    for _ in range(args.rounds):
        for i, (_load, _server, kind, run) in enumerate(configs):
            samples[i].append(_measure(kind, run))
    rows = []
    for i, (load, server, _kind, _run) in enumerate(configs):
        ordered = sorted(samples[i])
        rows.append((load, server, *ordered[len(ordered) // 2]))
    ceiling = rows[0][2]
    for load, server, rate, srv_cpu, load_cpu in rows:
        print(
            f"{load:<10} {server:<18} {rate:>10,.0f} {rate / ceiling:>8.2f} "
            f"{srv_cpu:>7.0%} {load_cpu:>9.0%}"
        )
    e2e = {r[1]: r[2] for r in rows if r[0] == "client"}
    for mode in ("ROCKETMQ", "MSGPACK", "AUTO"):
        print(f"end to end, {mode} vs JSON: {e2e[f'remoting {mode}'] / e2e['remoting JSON']:.2f}x")


if __name__ == "__main__":
    main()
