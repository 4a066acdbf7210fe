"""The floor of a single request on this machine: a bare uvloop framed echo.

A server process that answers every length-prefixed request with a fixed reply, and a
client loop that sends one request at a time, with the bytes of one of our single
sends (a 1 KiB body plus a header) and of its reply. No broker, no client library:
what any asyncio Protocol pays per round trip here, in CPU (both processes) and
latency. ``client_bench.py`` runs it beside the systems it compares, so a per-request
figure can be read against what Python and the kernel cost before any broker work.

Run alone: ``python benchmarks/echo_floor.py [--requests 5000]``; ``serve PORT`` is
the server process (prints ``echo ready address=...``).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import struct
import subprocess
import sys
import time

import uvloop

#: One of our single sends is ~1.4 KB on the wire (1 KiB body, key, tag, header);
#: its reply ~0.3 KB.
REQUEST = struct.pack(">i", 1400) + bytes(1400)
REPLY = struct.pack(">i", 300) + bytes(300)
READY = r"echo ready address=(?P<addr>\S+)"
_LENGTH = struct.Struct(">i")


class EchoServer(asyncio.Protocol):
    """Answers each whole length-prefixed request with ``REPLY``."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport) or hasattr(transport, "write")
        self._transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        while len(buf) >= 4:
            (length,) = _LENGTH.unpack_from(buf)
            if len(buf) < 4 + length:
                return
            del buf[: 4 + length]
            assert self._transport is not None
            self._transport.write(REPLY)


class EchoClient(asyncio.Protocol):
    """Resolves ``waiter`` when a whole reply has arrived."""

    def __init__(self) -> None:
        self.waiter: asyncio.Future[None] | None = None
        self.transport: asyncio.Transport | None = None
        self._got = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._got += len(data)
        if self._got >= len(REPLY) and self.waiter is not None:
            self._got -= len(REPLY)
            self.waiter.set_result(None)


async def connect(address: str) -> EchoClient:
    """A connected client (TCP_NODELAY, as our remoting sockets)."""
    host, port = address.rsplit(":", 1)
    loop = asyncio.get_running_loop()
    transport, client = await loop.create_connection(EchoClient, host, int(port))
    transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return client


async def round_trip(client: EchoClient) -> None:
    """One request, awaited until its whole reply is in."""
    client.waiter = asyncio.get_running_loop().create_future()
    assert client.transport is not None
    client.transport.write(REQUEST)
    await client.waiter


async def _serve(port: int) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(EchoServer, "127.0.0.1", port)
    bound = server.sockets[0].getsockname()[1]
    print(f"echo ready address=127.0.0.1:{bound}", flush=True)
    await asyncio.Event().wait()


async def _measure(address: str, requests: int) -> None:
    client = await connect(address)
    for _ in range(1000):
        await round_trip(client)
    latencies = []
    started = time.perf_counter()
    for _ in range(requests):
        t0 = time.perf_counter()
        await round_trip(client)
        latencies.append(time.perf_counter() - t0)
    wall = time.perf_counter() - started
    latencies.sort()
    p50, p99 = latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99)]
    print(f"{requests / wall:,.0f} round trips/s, p50 {p50 * 1e6:.0f} µs, p99 {p99 * 1e6:.0f} µs")


def _alone(requests: int) -> None:
    argv = [sys.executable, __file__, "serve", "0"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().split("address=")[1].strip()
        uvloop.run(_measure(address, requests))
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("mode", nargs="?", default="alone", choices=["alone", "serve"])
    parser.add_argument("port", nargs="?", type=int, default=0)
    parser.add_argument("--requests", type=int, default=5000)
    options = parser.parse_args()
    if options.mode == "serve":
        uvloop.run(_serve(options.port))
    else:
        _alone(options.requests)
