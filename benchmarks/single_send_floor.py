"""Single sync sends against three servers, alternating in one run: where the time goes.

Issue 19's single-send targets compare our round trip with Redis's. This splits ours:

- **mqbroker**: the real ``mqnamesrv`` + ``mqbroker`` CLIs, as ``client_bench.py``
  starts them (ASYNC_FLUSH, a topic of 4 queues), and our ``Producer.send`` of a 1 KiB
  message with a key and a tag;
- **canned broker**: the same, but the broker answers each plain send at once with a
  stored reply (``canned_broker.py``): no send handler, no store, no dispatch. What is
  left is our client, both ends' remoting and the event loops;
- **mqbroker, bare client**: the real broker again, but the client is a bare asyncio
  protocol replaying the bytes of one of our SEND_MESSAGE_V2 requests (built by the
  functions our producer uses) and waiting for each reply frame: the broker's share
  of the round trip, with no client library;
- **bare uvloop echo**: ``echo_floor.py``, the same bytes with no library at all;
- **Redis Streams**: ``XADD`` of the same fields as ``client_bench.py`` sends, to
  ``valkey-server`` (AOF everysec) through redis-py asyncio: the peer the targets name.

Each round starts every server afresh (Redis and its client installed by
``client_bench.py`` when missing), in a rotating order, and times ``--single``
sends after 3,000 warm-up ones. Per server the table shows each round's sends/s, p50
and p99 latency, and CPU µs per request of the server and of this (client) process
(from ``/proc``; the server's includes the work a phase leaves behind). The gaps
between rows, paired within rounds, are steadier than any row against the peers of
another run.

Run: ``python benchmarks/single_send_floor.py [--single 20000] [--rounds 3]``.
Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import client_bench as cb
import uvloop

from aiorocketmq.client import Producer
from aiorocketmq.client.config import ProducerConfig
from aiorocketmq.client.mq_client_api import v2_fields
from aiorocketmq.common.properties import MessageConst, properties_to_string
from aiorocketmq.remoting.codes import RequestCode, SerializeType
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.frame import encode_frame

WARM_UP = 3000
BROKER = "mqbroker"
CANNED = "canned broker"
BARE = "mqbroker, bare client"
ECHO = "bare uvloop echo"
REDIS = "Redis Streams"
Run = Callable[[argparse.Namespace, Path], Awaitable[cb.Result]]


async def broker_round(system: str, args: argparse.Namespace, tmp: Path) -> cb.Result:
    """Name server + broker (the real one or the canned one), then the timed sends."""
    py = sys.executable
    namesrv = cb.spawn_namesrv(tmp)
    servers = [namesrv]
    try:
        config = cb.broker_properties(tmp, namesrv.addr, cb.free_port())
        entry = ["-m", "aiorocketmq.cli.broker"]
        if system == CANNED:
            entry = [str(Path(__file__).with_name("canned_broker.py"))]
        broker = cb.spawn(
            "mqbroker", [py, *entry, "-c", str(config)], tmp / "broker.log", cb.BROKER_READY
        )
        servers.insert(0, broker)
        await cb.create_topic(broker.addr, namesrv.addr, "BenchTopic")
        if system == BARE:
            return await _bare_sends(args, servers, broker.addr)
        return await _sends(system, args, servers, namesrv.addr)
    finally:
        for server in servers:
            server.stop()


async def _sends(
    system: str, args: argparse.Namespace, servers: list[cb.Server], namesrv: str
) -> cb.Result:
    producer = Producer(
        "bench_producer", namesrv, config=ProducerConfig(default_topic_queue_nums=cb.QUEUES)
    )
    await producer.start()
    try:
        send = lambda: producer.send(cb.rmq_message("BenchTopic"))  # noqa: E731
        return await _timed(system, args, servers, send)
    finally:
        await producer.shutdown()


async def _timed(
    system: str,
    args: argparse.Namespace,
    servers: list[cb.Server],
    send: Callable[[], Awaitable[object]],
) -> cb.Result:
    """``WARM_UP`` sends, then ``--single`` timed ones as ``client_bench``'s phase."""
    for _ in range(WARM_UP):
        await send()
    result = cb.Result(system)
    run = lambda: cb.single_sync(result, args.single, send)  # noqa: E731
    await cb.run_phases(result, servers, [("single sync", run)])
    return result


class FrameClient(asyncio.Protocol):
    """Resolves ``waiter`` at each whole length-prefixed frame (a reply)."""

    def __init__(self) -> None:
        self.waiter: asyncio.Future[None] | None = None
        self.transport: asyncio.Transport | None = None
        self._buf = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        while len(buf) >= 4:
            end = 4 + int.from_bytes(buf[:4], "big")
            if len(buf) < end:
                return
            del buf[:end]
            waiter, self.waiter = self.waiter, None
            if waiter is not None:
                waiter.set_result(None)


def send_request_frame() -> bytes:
    """One SEND_MESSAGE_V2 as our producer frames it: 1 KiB body, key, tag, UNIQ_KEY."""
    msg = cb.rmq_message("BenchTopic")
    msg.put_property(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "0" * 32)
    fields = v2_fields(
        "bench_producer", msg.topic, "TBW102", cb.QUEUES, 0, 0, int(time.time() * 1000), 0,
        properties_to_string(msg.properties), 0, False, False, None, "broker-a",
    )  # fmt: skip
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, fields, msg.body)
    request.serialize_type, request.opaque = SerializeType.MSGPACK, 1
    return encode_frame(request)


async def _bare_sends(
    args: argparse.Namespace, servers: list[cb.Server], address: str
) -> cb.Result:
    host, port = address.rsplit(":", 1)
    loop = asyncio.get_running_loop()
    transport, client = await loop.create_connection(FrameClient, host, int(port))
    frame = send_request_frame()

    async def send() -> None:
        client.waiter = loop.create_future()
        transport.write(frame)
        await client.waiter

    try:
        return await _timed(BARE, args, servers, send)
    finally:
        transport.close()


async def echo_round(args: argparse.Namespace, tmp: Path) -> cb.Result:
    """The bare echo's round trips, as ``client_bench.py`` runs them."""
    result = await cb.bench_floor(args, tmp)
    result.system = ECHO
    return result


async def redis_round(args: argparse.Namespace, tmp: Path) -> cb.Result:
    """``valkey-server`` as ``client_bench.py`` starts it; single ``XADD`` s only."""
    import redis.asyncio as aioredis

    port = cb.free_port()
    conf = f"--port {port} --bind 127.0.0.1 --dir {tmp} --appendonly yes --appendfsync everysec"
    argv = [cb.valkey_server_path(), *conf.split(), "--daemonize", "no", "--save", ""]
    server = cb.spawn("valkey-server", argv, tmp / "valkey.log", port=port)
    client = aioredis.Redis(host="127.0.0.1", port=port)
    try:
        xadd = lambda: client.xadd("bench", cb.redis_fields())  # noqa: E731
        return await _timed(REDIS, args, [server], xadd)
    finally:
        await client.aclose()
        server.stop()


def _runs() -> dict[str, Run]:
    return {
        BROKER: lambda args, tmp: broker_round(BROKER, args, tmp),
        CANNED: lambda args, tmp: broker_round(CANNED, args, tmp),
        BARE: lambda args, tmp: broker_round(BARE, args, tmp),
        ECHO: echo_round,
        REDIS: redis_round,
    }


def report(rounds: list[list[cb.Result]]) -> None:
    """Per system, one line per round; then the paired gaps between the rows."""
    head = f"{'system':<18}{'sends/s':>10}{'p50 µs':>8}{'p99 µs':>8}"
    print(f"\n{head}  CPU µs/request server/client")
    by_system: dict[str, list[cb.Result]] = {}
    for results in rounds:
        for result in results:
            by_system.setdefault(result.system, []).append(result)
    for system, results in by_system.items():
        for r in results:
            phase = r.phases["single sync"]
            print(
                f"{system:<18}{phase.rate:>10,.0f}{r.pct(50) or 0:>8.0f}{r.pct(99) or 0:>8.0f}"
                f"  {phase.server_us:.0f}/{phase.client_us:.0f}"
            )
    print("\nPaired gaps per round (p50 µs; server CPU µs per request)")
    for results in rounds:
        got = {r.system: r for r in results}
        full, canned, echo, redis = got[BROKER], got[CANNED], got[ECHO], got[REDIS]
        bare = got[BARE]
        print(
            f"  send handler + store: {_p50(full) - _p50(canned):+.0f} µs p50,"
            f" {_cpu(full) - _cpu(canned):+.0f} µs CPU;"
            f"  client + remoting over the echo: {_p50(canned) - _p50(echo):+.0f} µs p50;"
            f"  sends/s against Redis: ours {_rate(full) / _rate(redis):.2f}x,"
            f" canned {_rate(canned) / _rate(redis):.2f}x"
        )
        print(
            f"    our client over a bare one (same broker): {_p50(full) - _p50(bare):+.0f} µs"
            f" p50, {_client_cpu(full) - _client_cpu(bare):+.0f} µs client CPU;"
            f"  the broker over the echo: {_p50(bare) - _p50(echo):+.0f} µs p50;"
            f"  the bare client's sends/s against Redis: {_rate(bare) / _rate(redis):.2f}x"
        )


def _p50(result: cb.Result) -> float:
    return result.pct(50) or 0.0


def _rate(result: cb.Result) -> float:
    return result.phases["single sync"].rate


def _cpu(result: cb.Result) -> float:
    return result.phases["single sync"].server_us


def _client_cpu(result: cb.Result) -> float:
    return result.phases["single sync"].client_us


async def main(args: argparse.Namespace) -> None:
    """``--rounds`` rounds, each server once per round, the order rotating."""
    cb.ensure_packages()
    runs = list(_runs().items())
    rounds: list[list[cb.Result]] = []
    with tempfile.TemporaryDirectory(prefix="single-floor-") as tmp:
        for n in range(args.rounds):
            order = runs[n % len(runs) :] + runs[: n % len(runs)]
            results = []
            for system, run in order:
                results.append(await run(args, Path(tmp) / f"round{n}-{system.replace(' ', '-')}"))
            rounds.append(results)
    report(rounds)


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--single", type=int, default=20_000, help="timed sends per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (each server once)")
    return parser.parse_args()


if __name__ == "__main__":
    uvloop.run(main(parse_args()))
