"""Python work per single send, counted: bytecodes and calls on each side, noise-free.

``client_bench.py`` reports CPU µs per single send, which moves by 10-20 % between runs
on a shared VM: a change worth 2-5 µs cannot be told from noise there. This counts
what CPU time only estimates, the Python bytecodes executed per send, which do not
depend on the machine or its load (``sys.settrace`` with opcode events; tracing slows
the run, the counts stay exact). Two sides:

- **broker**: a ``BrokerController`` started in this process (ASYNC_FLUSH master, no
  name server, ``client_bench.py``'s file sizes) and one of its remoting connections
  over an in-memory transport. The bytes of one SEND_MESSAGE_V2, as our producer
  frames it (``single_send_floor.send_request_frame``), are fed to the connection
  ``--sends`` times; each send's reply is encoded and handed to the transport, and
  its dispatch (ConsumeQueue unit, index keys, arrival notices) runs before the next.
  What uvloop's socket read and write cost is not here: that is C.
- **client**: our ``Producer.send`` of ``client_bench.py``'s message against the real
  ``mqnamesrv`` + ``mqbroker`` CLIs, counted in this process from the call to the
  result (the messages are built before counting starts).

Per side it prints bytecodes and Python calls per send and the functions that execute
most of them; for the broker also the part until its reply is written, which a sync
sender's round trip waits for (the dispatch runs after it). Speed is still measured by
the other benchmarks; this says where the Python work is and whether a change removed
some. Fewer bytecodes is not always less time on this kind of VM: between requests the
caches go cold, and what a send costs there follows what it touches as much as what it
executes (the hot modules compiled as they are by Cython ran 23 % fewer instructions in
process here, and cost the broker more CPU per send in place). Confirm a change with
paired runs of ``single_send_floor.py``.

Run: ``python benchmarks/send_path_ops.py [--sends 2000] [--top 25] [--side both]``.
Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any

import client_bench as cb
import uvloop
from single_send_floor import send_request_frame

from aiorocketmq.broker.config import load_broker_settings
from aiorocketmq.broker.controller import BrokerController
from aiorocketmq.client import Producer
from aiorocketmq.client.config import ProducerConfig
from aiorocketmq.common.topic_config import TopicConfig
from aiorocketmq.remoting.connection import RemotingConnection

_Key = tuple[str, str]

#: The harness's own frames, left out of the counts: this file and the
#: ``asyncio.sleep(0)`` that lets the broker's dispatch callback run.
_HARNESS = frozenset({("tasks.py", "sleep"), ("tasks.py", "__sleep0")})
_THIS_FILE = Path(__file__).name


class OpCounter:
    """Bytecodes and calls per function of this thread, inside the steps ``count`` runs."""

    def __init__(self) -> None:
        self.ops: Counter[_Key] = Counter()
        self.calls: Counter[_Key] = Counter()

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        code = frame.f_code
        key = (code.co_filename.rsplit("/", 1)[-1], code.co_name)
        if key[0] == _THIS_FILE or key in _HARNESS:
            return self._trace
        if event == "call":
            frame.f_trace_opcodes = True
            self.calls[key] += 1
        elif event == "opcode":
            self.ops[key] += 1
        return self._trace

    async def count(self, times: int, step: Callable[[], Awaitable[None]]) -> None:
        """Run ``step`` ``times`` times, counting only inside it."""
        for _ in range(times):
            sys.settrace(self._trace)
            try:
                await step()
            finally:
                sys.settrace(None)

    def call(self, fn: Callable[[bytes], None], arg: bytes) -> None:
        """Run ``fn(arg)``, counting inside it."""
        sys.settrace(self._trace)
        try:
            fn(arg)
        finally:
            sys.settrace(None)

    def totals(self, sends: int) -> tuple[float, float]:
        """Bytecodes and calls per send."""
        return sum(self.ops.values()) / sends, sum(self.calls.values()) / sends

    def report(self, side: str, sends: int, top: int) -> None:
        """Totals and the ``top`` functions by bytecodes, per send."""
        ops, calls = self.totals(sends)
        print(f"\n{side}: {ops:,.0f} bytecodes and {calls:.1f} Python calls per send")
        for key, count in self.ops.most_common(top):
            per_call = self.calls[key] / sends
            print(f"  {count / sends:7.1f}  {per_call:5.2f} calls  {key[0]}:{key[1]}")


class MemoryTransport(asyncio.Transport):
    """Takes what a connection writes and drops it; never pauses, never closes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, data: Any) -> None:
        self.writes += 1

    def writelines(self, list_of_data: Any) -> None:
        self.writes += 1

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name == "peername" else default

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def broker_side(args: argparse.Namespace, directory: Path) -> None:
    """Feed one send's bytes to a broker connection; count its side."""
    properties = {
        "brokerClusterName": "BenchCluster",
        "brokerName": "broker-a",
        "brokerRole": "ASYNC_MASTER",
        "flushDiskType": "ASYNC_FLUSH",
        "listenPort": "0",
        "grpcListenPort": "-1",
        "brokerIP1": "127.0.0.1",
        "storePathRootDir": str(directory / "store"),
        "mappedFileSizeCommitLog": str(128 * 1024 * 1024),
    }
    broker = BrokerController(load_broker_settings(properties))
    await broker.start()
    try:
        broker.ctx.topics.update_topic_config(
            TopicConfig(
                topic_name="BenchTopic", read_queue_nums=cb.QUEUES, write_queue_nums=cb.QUEUES
            )
        )
        conn = RemotingConnection(broker.metrics.table)
        transport = MemoryTransport()
        conn.connection_made(transport)
        frame = send_request_frame()

        async def send() -> None:
            conn.data_received(frame)
            await asyncio.sleep(0)  # the dispatch callback the put scheduled

        for _ in range(args.warmup):
            await send()
        await _caught_up(broker)  # a file created in the warm-up: its dispatch goes on
        before = transport.writes
        counter = OpCounter()
        await counter.count(args.sends, send)
        assert transport.writes - before == args.sends, "a send got no reply"
        counter.report("broker (in-process connection, reply and dispatch)", args.sends, args.top)
        # The same sends again, counting only the read that ends with the reply written:
        # the part a sync sender's round trip waits for (the dispatch runs after it).
        reply = OpCounter()
        for _ in range(args.sends):
            reply.call(conn.data_received, frame)
            await asyncio.sleep(0)
        ops, calls = reply.totals(args.sends)
        print(f"  of which until the reply is written: {ops:,.0f} bytecodes, {calls:.1f} calls")
    finally:
        await broker.shutdown()


async def _caught_up(broker: BrokerController, within_s: float = 30.0) -> None:
    """Wait until the dispatch has reached the CommitLog's end: a step that waited for a
    file in the warm-up is over, and the counted puts take the inline way."""
    deadline = time.monotonic() + within_s
    while broker.store.dispatch_behind_bytes() > 0:
        if time.monotonic() > deadline:
            raise TimeoutError("the broker's dispatch did not catch up")
        await asyncio.sleep(0.01)


async def client_side(args: argparse.Namespace, directory: Path) -> None:
    """Count our ``Producer.send`` against the real CLIs."""
    py = [sys.executable]
    namesrv = cb.spawn_namesrv(directory)
    servers = [namesrv]
    try:
        config = cb.broker_properties(directory, namesrv.addr, cb.free_port())
        broker = cb.spawn(
            "mqbroker",
            [*py, "-m", "aiorocketmq.cli.broker", "-c", str(config)],
            directory / "broker.log",
            cb.BROKER_READY,
        )
        servers.append(broker)
        await cb.create_topic(broker.addr, namesrv.addr, "BenchTopic")
        producer = Producer(
            "bench_producer",
            namesrv.addr,
            config=ProducerConfig(default_topic_queue_nums=cb.QUEUES),
        )
        await producer.start()
        try:
            for _ in range(args.warmup):
                await producer.send(cb.rmq_message("BenchTopic"))
            messages = iter([cb.rmq_message("BenchTopic") for _ in range(args.sends)])

            async def send() -> None:
                await producer.send(next(messages))

            counter = OpCounter()
            await counter.count(args.sends, send)
            counter.report("client (Producer.send, real broker)", args.sends, args.top)
        finally:
            await producer.shutdown()
    finally:
        for server in reversed(servers):
            server.stop()


async def main(args: argparse.Namespace) -> None:
    """The sides asked for, one after the other."""
    with tempfile.TemporaryDirectory(prefix="send-path-ops-") as tmp:
        if args.side in ("both", "broker"):
            await broker_side(args, Path(tmp) / "broker")
        if args.side in ("both", "client"):
            await client_side(args, Path(tmp) / "client")


def parse_args() -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sends", type=int, default=2_000, help="sends counted per side")
    parser.add_argument("--warmup", type=int, default=2_000, help="sends before counting")
    parser.add_argument("--top", type=int, default=25, help="functions shown per side")
    parser.add_argument("--side", choices=("both", "broker", "client"), default="both")
    return parser.parse_args()


if __name__ == "__main__":
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main(parse_args()))
