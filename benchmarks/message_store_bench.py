"""MessageStore benchmark: puts, pulls and SYNC_FLUSH group commit, in one process.

What it measures, in one run (uvloop; ratios within one run are what mean much on
a noisy machine):

1. *ASYNC_FLUSH puts, 1 KiB records*, one producer awaiting each put and
   yielding to the loop every 64 puts, until the dispatcher has caught up: the
   rate a broker's store sustains. Split into the time spent inside
   ``put_message`` (validation, encoding, the append, the result with its msgId)
   and the rest (the dispatcher's ConsumeQueue units and index keys, and the
   loop). Rows with and without a ``UNIQ_KEY`` (one index key per message, as
   every stock client sends).
2. *get_message*: pulls of 32 records (the in-memory transfer limit) over the
   whole queue, each result released after its body is joined, as a pull reply
   writes it.
3. *SYNC_FLUSH, 64 concurrent producers*, each awaiting its put's group commit,
   beside *one fsync per write* (a plain loop of 4 KiB ``os.write`` + ``fsync`` on
   a file in the same directory), measured in the same run; target ratio >= 5x.

Each row is the median of ``--rounds`` rounds. The process is one event loop plus
the store's pool threads (msync, file warming); the CPU share printed is of one core.

Run: ``python benchmarks/message_store_bench.py [--rounds 3] [--count 100000]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import uvloop

from aiorocketmq.common.properties import properties_to_string
from aiorocketmq.store.config import FlushDiskType, MessageStoreConfig
from aiorocketmq.store.inner_message import MessageExtBrokerInner
from aiorocketmq.store.message_store import MessageStore
from aiorocketmq.store.results import GetMessageStatus

TOPIC = "BenchmarkTest"
HOSTS = {"born_host": ("192.168.1.20", 50123), "store_host": ("10.0.0.7", 10911)}
RECORD = 1024


def config(root: Path, file_mib: int, flush: FlushDiskType) -> MessageStoreConfig:
    return MessageStoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=file_mib * 1024 * 1024,
        flush_disk_type=flush,
    )


def message(n: int, uniq: bool) -> MessageExtBrokerInner:
    props = {"TAGS": "TagA"}
    if uniq:
        props["UNIQ_KEY"] = f"0A0000070000{n:020X}"
    text = properties_to_string(props)
    # Body sized so the whole record is RECORD bytes.
    body = bytes(RECORD - 91 - len(TOPIC) - len(text.encode()))
    return MessageExtBrokerInner(
        TOPIC,
        0,
        body,
        props,
        text,
        born_timestamp=1,
        **HOSTS,  # type: ignore[arg-type]
    )


async def started(root: Path, args: argparse.Namespace, flush: FlushDiskType) -> MessageStore:
    store = MessageStore(config(root, args.file_mib, flush))
    await store.load()
    await store.start()
    await store.commit_log.allocator.idle()
    return store


# ------------------------------------------------------------------------ rows


async def put_rows(workdir: Path, args: argparse.Namespace, uniq: bool) -> dict[str, float]:
    """Seconds for puts and their dispatch interleaved, of which inside put_message."""
    msgs = [message(n, uniq) for n in range(1024)]
    root = Path(tempfile.mkdtemp(dir=workdir))
    store = await started(root, args, FlushDiskType.ASYNC_FLUSH)
    clock = time.perf_counter
    try:
        in_put = 0.0
        start = clock()
        for n in range(args.count):
            before = clock()
            result = await store.put_message(msgs[n & 1023])
            in_put += clock() - before
            assert result.ok
            if n % 64 == 63:
                # A broker's loop runs other work between puts: the dispatcher, the
                # allocator's completions, reads. Without this the next CommitLog file
                # would only start being created at the roll.
                await asyncio.sleep(0)
        await store.dispatcher.wait_dispatched(store.max_phy_offset)
        total = clock() - start
        get_s = pull_all(store, args.count)
    finally:
        await store.shutdown()
        shutil.rmtree(root)
    return {"both": total, "put": in_put, "rest": total - in_put, "get": get_s}


def pull_all(store: MessageStore, count: int) -> float:
    """Seconds to pull every message of the queue, 32 at a time."""
    start = time.perf_counter()
    offset = pulled = 0
    while pulled < count:
        result = store.get_message("bench", TOPIC, 0, offset, 32)
        assert result is not None and result.status is GetMessageStatus.FOUND
        with result:
            result.body()  # what a pull reply sends
            pulled += result.message_count
            offset = result.next_begin_offset
    return time.perf_counter() - start


async def sync_flush_row(workdir: Path, args: argparse.Namespace) -> tuple[float, int, int]:
    """Seconds for ``--sync-count`` puts by 64 concurrent producers, and flush rounds."""
    root = Path(tempfile.mkdtemp(dir=workdir))
    store = await started(root, args, FlushDiskType.SYNC_FLUSH)
    msgs = [message(n, True) for n in range(1024)]
    per_producer = args.sync_count // args.producers

    async def producer(first: int) -> None:
        for n in range(first, first + per_producer):
            result = await store.put_message(msgs[n & 1023])
            assert result.status.name == "PUT_OK", result

    try:
        start = time.perf_counter()
        await asyncio.gather(*(producer(p * per_producer) for p in range(args.producers)))
        elapsed = time.perf_counter() - start
        rounds = store.flush_service.flush_rounds  # type: ignore[union-attr]
    finally:
        await store.shutdown()
        shutil.rmtree(root)
    return elapsed, per_producer * args.producers, rounds


def fsync_per_write(workdir: Path, writes: int) -> float:
    """Seconds for ``writes`` x (4 KiB write + fsync) on one file of ``workdir``."""
    path = workdir / "fsync-probe"
    block = os.urandom(4096)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(writes):
            os.write(fd, block)
            os.fsync(fd)
        return time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink()


# ------------------------------------------------------------------------ report


def line(label: str, seconds: list[float], count: int, size: int = RECORD) -> str:
    s = statistics.median(seconds)
    return f"  {label:<44} {count / s:>10,.0f} msgs/s {count * size / s / 1e6:>8,.1f} MB/s"


async def main(args: argparse.Namespace) -> None:
    cpu0 = os.times()
    workdir = Path(tempfile.mkdtemp(prefix="message-store-bench-", dir=args.dir))
    rows: dict[str, list[float]] = {}
    sync: list[tuple[float, int, int]] = []
    fsyncs: list[float] = []
    try:
        for _ in range(args.rounds):
            for uniq in (True, False):
                tag = "UNIQ_KEY" if uniq else "no keys"
                for key, value in (await put_rows(workdir, args, uniq)).items():
                    rows.setdefault(f"{key}/{tag}", []).append(value)
            sync.append(await sync_flush_row(workdir, args))
            fsyncs.append(fsync_per_write(workdir, args.fsync_writes))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    cpu = os.times()
    busy = (cpu.user - cpu0.user + cpu.system - cpu0.system) / max(cpu.elapsed - cpu0.elapsed, 1e-9)
    print(
        f"MessageStore: {args.count:,} x {RECORD} B records per row, {args.file_mib} MiB "
        f"CommitLog files, median of {args.rounds} rounds; one process (event loop + pool "
        f"threads) used {busy:.0%} of one core over the run"
    )
    for tag in ("UNIQ_KEY", "no keys"):
        props = "TAGS + UNIQ_KEY" if tag == "UNIQ_KEY" else "TAGS"
        print(f"ASYNC_FLUSH, one producer, properties {props}:")
        print(line("put + dispatch, interleaved as on a broker", rows[f"both/{tag}"], args.count))
        print(line("  of which inside put_message", rows[f"put/{tag}"], args.count))
        print(line("  of which dispatch (CQ, index) and loop", rows[f"rest/{tag}"], args.count))
        print(line("get_message, 32 per pull, released", rows[f"get/{tag}"], args.count))
    elapsed = statistics.median(s[0] for s in sync)
    puts = sync[0][1]
    group = puts / elapsed
    single = args.fsync_writes / statistics.median(fsyncs)
    print(f"SYNC_FLUSH, {args.producers} concurrent producers ({puts:,} puts per round):")
    print(line("group commit, every put awaited durable", [s[0] for s in sync], puts))
    flushes = statistics.median(s[2] for s in sync)
    print(f"  {'flushes (msync rounds) per round, median':<44} {flushes:>10,.0f}")
    print(line("one 4 KiB write + fsync per write", fsyncs, args.fsync_writes, 4096))
    print(f"  group commit / fsync-per-write: {group / single:.1f}x (target >= 5x)")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=100_000, help="puts per ASYNC row")
    parser.add_argument("--sync-count", type=int, default=32_000, help="SYNC_FLUSH puts")
    parser.add_argument("--producers", type=int, default=64)
    parser.add_argument("--fsync-writes", type=int, default=2000)
    parser.add_argument("--file-mib", type=int, default=64, help="CommitLog file size (MiB)")
    parser.add_argument("--dir", default=None, help="where the stores live (default: /tmp)")
    return parser.parse_args()


if __name__ == "__main__":
    uvloop.run(main(parse()))
