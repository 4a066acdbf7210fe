"""Crash-restart time against store size: SIGKILL a loaded broker, time its return.

For each size (``--sizes``, default 100k, 1M and 2M records): a fresh ``mqnamesrv`` and
``mqbroker`` (the real CLIs, defaults but ASYNC_FLUSH: 1 GiB CommitLog files, the
index on, a 3 s checkpoint), a producer storing that many keyed ~200-byte messages
in batches, then, with sends still under way, ``SIGKILL`` of the broker. The broker
is started again on the same store and timed from ``exec`` to its ready line (the
port serves then: recovery and the start-time redispatch finish before it listens).
Its log says how many records were scanned and how many replayed.

Printed per size: records stored, store size, restart time, records scanned and
replayed, and the clean-shutdown restart time for comparison (SIGTERM, then start).

Run: ``python benchmarks/crash_restart_bench.py [--sizes 100000,1000000,2000000]``.
Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import uvloop

from aiorocketmq.client import Message, Producer
from aiorocketmq.client.config import ProducerConfig

BODY = b"r" * 200
BATCH = 64
IN_FLIGHT = 4
READY = re.compile(r"mqbroker ready address=(?P<addr>\S+)")
NAMESRV_READY = re.compile(r"mqnamesrv ready address=(?P<addr>\S+)")
SCANNED = re.compile(r"end=(?P<end>\d+) records=(?P<n>\d+)")
REPLAYED = re.compile(
    r"replayed (?P<n>\d+) records \((?P<b>\d+) bytes\) into the queues in (?P<s>[\d.]+) s"
)


@dataclass
class Restart:
    """One timed start."""

    seconds: float
    scanned: int
    replayed: int
    data_bytes: int
    replay_seconds: float


def start(
    argv: list[str], log: Path, ready: re.Pattern[str]
) -> tuple[subprocess.Popen[bytes], str, float]:
    """Start ``argv`` with output to ``log``; wait for ``ready`` (120 s): (proc, addr, seconds)."""
    t0 = time.monotonic()
    with log.open("ab") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    size = log.stat().st_size
    while time.monotonic() - t0 < 120:
        text = log.read_bytes()[size:].decode("utf-8", "replace")
        if match := ready.search(text):
            return proc, match["addr"], time.monotonic() - t0
        if proc.poll() is not None:
            break
        time.sleep(0.01)  # a benchmark's start-up poll
    proc.kill()
    raise RuntimeError(f"{argv[2]} did not start:\n{log.read_text('utf-8', 'replace')[-3000:]}")


def broker_argv(directory: Path, namesrv: str) -> list[str]:
    """``mqbroker -c`` with a properties file in ``directory``."""
    values = {
        "brokerClusterName": "BenchCluster",
        "brokerName": "broker-a",
        "brokerRole": "ASYNC_MASTER",
        "flushDiskType": "ASYNC_FLUSH",
        "listenPort": 0,
        "brokerIP1": "127.0.0.1",
        "namesrvAddr": namesrv,
        "storePathRootDir": str(directory / "store"),
        "metricsPort": 0,
    }
    path = directory / "broker.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()), "utf-8")
    return [sys.executable, "-m", "aiorocketmq.cli.broker", "-c", str(path)]


@dataclass
class Load:
    """A producer that stored ``records`` messages and keeps sending until stopped."""

    producer: Producer
    tasks: list[asyncio.Task[None]]
    sent: list[int]

    async def stop(self) -> None:
        """End the send loops (they fail once the broker is gone) and the producer."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.producer.shutdown()


async def fill(namesrv: str, records: int) -> Load:
    """Store ``records`` messages; return with the send loops still running."""
    producer = Producer("bench_crash", namesrv, config=ProducerConfig(default_topic_queue_nums=4))
    await producer.start()
    sent = [0]
    done = asyncio.Event()

    async def worker() -> None:
        while True:
            batch = []
            for _ in range(BATCH):
                msg = Message("CrashTopic", BODY)
                msg.keys = f"key-{sent[0]}"
                sent[0] += 1
                batch.append(msg)
            try:
                await producer.send_batch(batch)
            except Exception:
                return
            if sent[0] >= records:
                done.set()

    tasks = [asyncio.ensure_future(worker()) for _ in range(IN_FLIGHT)]
    await done.wait()
    return Load(producer, tasks, sent)


async def one_size(records: int, root: Path) -> None:
    """Fill a store of ``records``, SIGKILL under load, restart; then SIGTERM and restart."""
    directory = root / f"n{records}"
    directory.mkdir()
    log = directory / "broker.log"
    ns_argv = [
        sys.executable,
        "-m",
        "aiorocketmq.cli.namesrv",
        "--listenPort",
        "0",
        "--bindAddress",
        "127.0.0.1",
    ]
    namesrv, ns_addr, _ = start(ns_argv, directory / "namesrv.log", NAMESRV_READY)
    try:
        argv = broker_argv(directory, ns_addr)
        broker, _, _ = start(argv, log, READY)
        load = await fill(ns_addr, records)
        broker.send_signal(signal.SIGKILL)  # the send loops are still sending
        broker.wait()
        stored = load.sent[0]
        await load.stop()
        crash = restart(argv, log)
        clean = restart(argv, log)  # the crash restart ended with a SIGTERM
        print(
            f"{records:>10,} records  {stored:>10,} sent  {crash.data_bytes / 2**20:>6,.0f} MiB  "
            f"crash restart {crash.seconds:6.2f} s (scanned {crash.scanned:,}, "
            f"replayed {crash.replayed:,} in {crash.replay_seconds:.2f} s)  "
            f"clean restart {clean.seconds:6.2f} s "
            f"(replayed {clean.replayed:,})",
            flush=True,
        )
    finally:
        namesrv.terminate()
        namesrv.wait(30)


def restart(argv: list[str], log: Path) -> Restart:
    """Start the broker on its store, time it, and stop it (SIGTERM) for the next run."""
    mark = log.stat().st_size
    proc, _, seconds = start(argv, log, READY)
    text = log.read_bytes()[mark:].decode("utf-8", "replace")
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)
    scanned = SCANNED.search(text)
    replayed = REPLAYED.search(text)
    return Restart(
        seconds,
        int(scanned["n"]) if scanned else 0,
        int(replayed["n"]) if replayed else 0,
        int(scanned["end"]) if scanned else 0,
        float(replayed["s"]) if replayed else 0.0,
    )


async def main(sizes: list[int]) -> None:
    """Each size in its own directory, one after another."""
    print(f"{os.cpu_count()} cores; sizes {', '.join(f'{s:,}' for s in sizes)}", flush=True)
    with tempfile.TemporaryDirectory(prefix="crash-bench-") as tmp:
        for records in sizes:
            await one_size(records, Path(tmp))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sizes", default="100000,1000000,2000000", help="records, comma-separated"
    )
    options = parser.parse_args()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(main([int(s) for s in options.sizes.split(",")]))
