"""Our PushConsumer by listener kind: msgs/s and CPU µs per message, client and broker.

Setup: ``mqnamesrv`` and ``mqbroker`` as child processes, started as
``client_bench.py`` starts them (ASYNC_FLUSH, 128 MiB CommitLog files, a topic of 4
queues). ``--messages`` (100,000) 1 KiB messages, each with a unique key and a tag,
are produced first in batches of 64. Then, for each listener kind in turn, a new
consumer group reads the topic from its first offset until it has seen every
message, with the consumer's defaults (``consumeThreadMax`` 20, one message per
listener call, pulls of 32):

- ``async def``: an ``async def`` listener, run on the event loop;
- ``def``: a plain ``def`` listener, run on the consumer's listener threads (the
  default for ``def``: a listener that blocks stalls only its thread);
- ``def, threaded=False``: the same ``def`` listener on the event loop;
- ``orderly async def`` and ``orderly def``: the first two, registered with
  ``orderly=True`` (each queue consumed in offset order, one call at a time, under
  the broker's queue lock).

Each listener reads every message's body and key and answers success, as an
application would. The rate is from the consumer's start to its last message
(start-up and rebalancing included, the same for every kind). CPU per message is
this process's (the client, listener threads included) and the broker's
(``/proc/<pid>/stat``) over that span; a side at >= 0.85 cores is named saturated.

Run: ``python benchmarks/push_bench.py [--messages 100000]``. Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import client_bench as cb
import uvloop

from aiorocketmq.client import MessageExt, Producer, PushConsumer
from aiorocketmq.client.config import ProducerConfig, PushConsumerConfig

TOPIC = "PushBench"
BATCH = 64
SATURATED = 0.85
KINDS = ("async def", "def", "def, threaded=False", "orderly async def", "orderly def")


def client_cpu_s() -> float:
    """This process's user + system CPU seconds (every thread)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def produce(namesrv: str, count: int) -> None:
    """``count`` messages of ``client_bench.rmq_message`` in batches."""
    config = ProducerConfig(default_topic_queue_nums=cb.QUEUES)
    async with Producer("PushBenchProducer", namesrv, config=config) as producer:
        for start in range(0, count, BATCH):
            batch = [cb.rmq_message(TOPIC) for _ in range(min(BATCH, count - start))]
            await producer.send_batch(batch)


async def consume(namesrv: str, broker: cb.Server, kind: str, count: int) -> str:
    """One group reads the topic with the ``kind`` listener; its line of figures."""
    loop = asyncio.get_running_loop()
    all_read = asyncio.Event()
    read = [0, 0]  # messages, bytes of body and key read

    def note(msgs: list[MessageExt]) -> None:
        for msg in msgs:
            read[1] += len(msg.body) + len(msg.keys[0] if msg.keys else "")
        read[0] += len(msgs)
        if read[0] >= count:
            loop.call_soon_threadsafe(all_read.set)

    async def async_listener(msgs: list[MessageExt], _ctx: object) -> None:
        note(msgs)

    def def_listener(msgs: list[MessageExt], _ctx: object) -> None:
        note(msgs)

    listeners: dict[str, tuple[Callable[..., Any], bool | None]] = {
        "async def": (async_listener, None),
        "def": (def_listener, None),
        "def, threaded=False": (def_listener, False),
        "orderly async def": (async_listener, None),
        "orderly def": (def_listener, None),
    }
    listener, threaded = listeners[kind]
    config = PushConsumerConfig(consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    group = "PushBench_" + kind.replace(" ", "").replace(",", "_").replace("=", "_")
    consumer = PushConsumer(group, namesrv, config=config)
    consumer.subscribe(TOPIC, "*")
    orderly = kind.startswith("orderly")
    consumer.register_message_listener(listener, threaded=threaded, orderly=orderly)
    broker0, client0, started = broker.cpu_s(), client_cpu_s(), time.perf_counter()
    async with consumer:
        await asyncio.wait_for(all_read.wait(), 600)
        seconds = time.perf_counter() - started
        broker_s, client_s = broker.cpu_s() - broker0, client_cpu_s() - client0
    cores = (broker_s / seconds, client_s / seconds)
    sides = zip(("broker", "client"), cores, strict=True)
    saturated = [side for side, used in sides if used >= SATURATED]
    per_msg = f"broker {broker_s / count * 1e6:5.1f} client {client_s / count * 1e6:5.1f}"
    return (
        f"{kind:<22} {count / seconds:>9,.0f} msgs/s | CPU µs/msg {per_msg}"
        f" | cores {cores[0]:.2f} / {cores[1]:.2f}"
        + (f", {' and '.join(saturated)} saturated" if saturated else "")
    )


async def bench(root: Path, count: int) -> None:
    py = [sys.executable]
    namesrv = cb.spawn_namesrv(root)
    broker = None
    try:
        conf = cb.broker_properties(root, namesrv.addr, cb.free_port())
        broker = cb.spawn(
            "mqbroker", [*py, "-m", "aiorocketmq.cli.broker", "-c", str(conf)],
            root / "broker.log", cb.BROKER_READY,
        )  # fmt: skip
        await cb.create_topic(broker.addr, namesrv.addr, TOPIC)
        await produce(namesrv.addr, count)
        for kind in KINDS:
            print(await consume(namesrv.addr, broker, kind, count), flush=True)
    finally:
        codes = [server.stop() for server in (broker, namesrv) if server is not None]
        print(f"servers stopped, exit codes {codes}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    args = parser.parse_args()
    print(
        f"PushConsumer by listener kind; {args.messages} x 1 KiB, 2 CPUs, ASYNC_FLUSH; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    with tempfile.TemporaryDirectory(prefix="push-bench-") as tmp:
        uvloop.run(bench(Path(tmp), args.messages))


if __name__ == "__main__":
    main()
