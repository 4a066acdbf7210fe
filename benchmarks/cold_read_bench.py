"""A consumer reading records that are not in memory, and what it does to everyone else.

A consumer that catches up after a broker restart, or whose offset was reset to
yesterday, pulls records the page cache no longer holds. This measures whether those
reads hold the broker's event loop (and so every other client) while the disk answers.

Setup: ``mqnamesrv`` and ``mqbroker`` as child processes (``client_bench.py``'s
broker, with 16 MiB CommitLog files so that a restart's recovery reads back only the
last three), ``--messages`` 1 KiB messages produced in batches, the broker stopped,
every store file dropped from the page cache (``posix_fadvise(DONTNEED)``: they are
closed and flushed), the broker started again. With ``--read-mbps`` the restarted
broker's disk reads are throttled to that rate (a cgroup v1 ``blkio`` group; needs
root), as a disk slower than this VM's host-cached one would be.

Then, at once: a pull consumer drains the produced topic from offset 0 (``client_bench``'s
pulls), and a second process sends single messages to another topic one at a time, as
an unrelated producer would. Printed: the drain's rate, the single sends' p50 / p99 /
max latency over the drain, and the broker's loop lag (``/metrics``) over the drain.

Run: ``python benchmarks/cold_read_bench.py [--messages 100000] [--read-mbps 20]``.
Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import client_bench as cb
import uvloop

from aiorocketmq.client import Producer, PullConsumer
from aiorocketmq.client.config import ProducerConfig
from aiorocketmq.runtime.loop_lag import percentile_from_buckets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's tests/
from tests.support.page_cache import drop_from_page_cache

COMMIT_LOG_FILE = 16 * 1024 * 1024
LATENCY_TOPIC = "LatencyTopic"
_THROTTLED = Path("/sys/fs/cgroup/blkio/aiorocketmq-cold-read")

#: The second process: single sends until its stop file appears, then one result line.
_SENDER = """
import asyncio, os, sys, time
import uvloop
sys.path.insert(0, {bench_dir!r})
import client_bench as cb
from aiorocketmq.client import Producer

async def main():
    producer = Producer("latency_producer", {namesrv!r})
    await producer.start()
    for _ in range(300):
        await producer.send(cb.rmq_message({topic!r}))
    print("READY", flush=True)
    times = []
    while not os.path.exists({go!r}):
        await asyncio.sleep(0.001)
    while not os.path.exists({stop!r}):
        began = time.perf_counter()
        await producer.send(cb.rmq_message({topic!r}))
        times.append(time.perf_counter() - began)
    times.sort()
    print(len(times), times[len(times) // 2], times[len(times) * 99 // 100], times[-1], flush=True)
    await producer.shutdown()

with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
    runner.run(main())
"""


def throttle(pid: int, directory: Path, mbps: float) -> str:
    """Put ``pid`` in a blkio group reading ``directory``'s disk at ``mbps``; a note."""
    group = _THROTTLED
    st = os.stat(directory)
    try:
        group.mkdir(exist_ok=True)
        rule = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)} {int(mbps * 1024 * 1024)}"
        (group / "blkio.throttle.read_bps_device").write_text(rule)
        (group / "cgroup.procs").write_text(str(pid))
    except OSError as exc:
        return f"reads NOT throttled ({exc.strerror}: needs root and cgroup v1 blkio)"
    return f"the broker's disk reads throttled to {mbps:g} MiB/s"


async def run(args: argparse.Namespace, tmp: Path) -> None:
    namesrv = cb.spawn_namesrv(tmp)
    metrics_port = cb.free_port()
    config = cb.broker_properties(tmp, namesrv.addr, metrics_port)
    text = config.read_text("utf-8")
    config.write_text(
        text.replace(f"mappedFileSizeCommitLog={128 * 1024 * 1024}",
                     f"mappedFileSizeCommitLog={COMMIT_LOG_FILE}"), "utf-8",
    )  # fmt: skip
    argv = [sys.executable, "-m", "aiorocketmq.cli.broker", "-c", str(config)]
    broker = cb.spawn("mqbroker", argv, tmp / "broker.log", cb.BROKER_READY)
    try:
        await cb.create_topic(broker.addr, namesrv.addr, "BenchTopic")
        producer = Producer(
            "bench_producer", namesrv.addr,
            config=ProducerConfig(default_topic_queue_nums=cb.QUEUES),
        )  # fmt: skip
        await producer.start()
        await cb.rmq_batched(producer, "BenchTopic", args.messages, 64)
        await producer.shutdown()
        broker.stop()
        os.sync()
        files = drop_from_page_cache(tmp / "store")
        broker = cb.spawn("mqbroker", argv, tmp / "broker2.log", cb.BROKER_READY)
        note = throttle(broker.proc.pid, tmp, args.read_mbps) if args.read_mbps else "unthrottled"
        print(f"{args.messages:,} messages, {files} store files out of memory; {note}")
        await cb.create_topic(broker.addr, namesrv.addr, LATENCY_TOPIC)
        await drain_beside_sends(args, tmp, namesrv.addr, metrics_port)
    finally:
        broker.stop()
        namesrv.stop()


async def drain_beside_sends(
    args: argparse.Namespace, tmp: Path, namesrv: str, metrics_port: int
) -> None:
    go, stop = tmp / "go", tmp / "stop"
    code = _SENDER.format(
        bench_dir=str(Path(__file__).parent), namesrv=namesrv, topic=LATENCY_TOPIC,
        go=str(go), stop=str(stop),
    )  # fmt: skip
    sender = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE
    )
    assert sender.stdout is not None
    try:
        if b"READY" not in await asyncio.wait_for(sender.stdout.readline(), 60):
            raise RuntimeError("the latency sender did not start")
        consumer = PullConsumer("cold_consumer", namesrv)
        await consumer.start()
        lag0 = await cb.loop_lag_counts(metrics_port)
        go.touch()
        began = time.perf_counter()
        drained = await cb.rmq_consume(consumer, "BenchTopic")
        wall = time.perf_counter() - began
        stop.touch()
        lag1 = await cb.loop_lag_counts(metrics_port)
        line = (await asyncio.wait_for(sender.stdout.readline(), 60)).split()
        await consumer.shutdown()
    finally:
        stop.touch()
        await sender.wait()
    sends, p50, p99, top = int(line[0]), *map(float, line[1:])
    print(f"drained {drained:,} messages in {wall:.2f} s ({drained / wall:,.0f} msgs/s)")
    print(
        f"beside it, {sends:,} single sends: p50 {p50 * 1e6:.0f} µs, "
        f"p99 {p99 * 1e3:.2f} ms, max {top * 1e3:.1f} ms"
    )
    if lag0 is not None and lag1 is not None:
        counts = [b - a for a, b in zip(lag0, lag1, strict=True)]
        p99_lag = percentile_from_buckets(cb.LOOP_LAG_BUCKETS_MS, counts, 99)
        max_lag = percentile_from_buckets(cb.LOOP_LAG_BUCKETS_MS, counts, 100)
        print(
            f"broker loop lag over the drain: p99 <= {p99_lag:g} ms, max <= {max_lag:g} ms "
            f"({sum(counts)} observations)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000, help="produced, then drained")
    parser.add_argument("--read-mbps", type=float, default=0.0, help="throttle (root)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="cold-read-"))
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(run(args, tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        with contextlib.suppress(OSError):  # the throttled group, empty once the broker is gone
            _THROTTLED.rmdir()


if __name__ == "__main__":
    main()
