"""Store file-layer benchmark: CommitLog append and ConsumeQueue rates, in process.

What it measures, in one run, side by side (one process, uvloop; only ratios within
one run mean much on a noisy machine):

1. *Raw ceiling*: a Python loop copying pre-built records into an mmap with a
   memoryview slice assignment, nothing else: into a fresh (sparse, never touched)
   file and into a warmed one (every page faulted in first). Same sizes, same order
   as the CommitLog rows.
2. *CommitLog.append*: pre-encoded records (RocketMQ encodes outside its put lock
   too) appended through the real append section: queue offset, patching
   QUEUEOFFSET/PHYSICALOFFSET/STORETIMESTAMP, the end-of-file rule and rolls
   (files of ``--file-mib``), with the allocator pre-creating the next file and
   warming it (``warm_commit_log_files``), or not. ``waited`` counts rolls whose
   file was not ready. Also ``encode+append``: ``encode_record`` per message first.
3. *ConsumeQueue*: unit puts, pull-sized reads (32 units as a numpy view) and a
   whole-file tag filter (``np.isin`` over tagsCode).

Record sizes: 128 B and 1 KiB (``--sizes``). Each row is the median of ``--rounds``
rounds, and rounds interleave all rows. Target: 1 KiB append >= 300,000 msgs/s.

Run: ``python benchmarks/store_bench.py [--rounds 3] [--mib 192] [--file-mib 64]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import uvloop

from aiorocketmq.common.message_codec import MIN_RECORD_SIZE, encode_record
from aiorocketmq.common.tag_hash import tags_code
from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.store.commit_log import AppendStatus, CommitLog, queue_key
from aiorocketmq.store.config import MessageStoreConfig
from aiorocketmq.store.consume_queue import ConsumeQueue, PutUnitStatus, tags_match
from aiorocketmq.store.mapped_file import MappedFile, offset_to_file_name

TOPIC = "BenchmarkTest"
TS = 1_700_000_000_000
HOSTS = {"born_host": ("192.168.1.20", 50123), "store_host": ("10.0.0.7", 10911)}


def record(size: int) -> bytearray:
    body = bytes(size - MIN_RECORD_SIZE - len(TOPIC))
    out = encode_record(
        topic=TOPIC, body=body, properties="", queue_id=0, born_timestamp=TS,
        store_timestamp=0, **HOSTS,  # type: ignore[arg-type]
    )  # fmt: skip
    assert len(out) == size
    return out


# ------------------------------------------------------------------------ rows


def raw_copy(workdir: Path, size: int, total: int, warm: bool) -> float:
    """Seconds to memoryview-copy ``total`` bytes of ``size``-byte records into an mmap."""
    path = workdir / offset_to_file_name(size * 10 + int(warm))
    mapped = MappedFile.create_blocking(path, total + size)
    if warm:
        mapped.warm_blocking()
    mm, data, count = mapped.buffer, bytes(record(size)), total // size
    view = memoryview(mm)
    start = time.perf_counter()
    pos = 0
    for _ in range(count):
        view[pos : pos + size] = data
        pos += size
    elapsed = time.perf_counter() - start
    view.release()
    mapped.shutdown()
    path.unlink()
    return elapsed


async def commit_log_rows(
    workdir: Path, size: int, total: int, file_size: int, warm: bool, encode: bool
) -> tuple[float, int]:
    """Seconds for ``total // size`` appends, and how many rolls had to wait."""
    root = Path(tempfile.mkdtemp(dir=workdir))
    config = MessageStoreConfig(
        store_path_root_dir=str(root),
        mapped_file_size_commit_log=file_size,
        warm_commit_log_files=warm,
    )
    async with BlockingExecutor("bench-store", 2) as executor:
        log = CommitLog(config, executor)
        await log.start()
        await log.allocator.idle()  # the first file is ready, as in a running broker
        records = [record(size) for _ in range(256)]
        key, count = queue_key(TOPIC, 0), total // size
        start = time.perf_counter()
        for n in range(count):
            rec = records[n & 255]
            if encode:
                rec = record(size)
            result = log.append(rec, key, TS)
            if result.status is AppendStatus.NEED_FILE:
                await log.allocate_next_file()
                result = log.append(rec, key, TS)
            elif n % 4096 == 0:
                await asyncio.sleep(0)  # let allocator completions land, as a serving loop does
        elapsed = time.perf_counter() - start
        waited = log.allocator.waited
        await log.shutdown()
    shutil.rmtree(root)
    return elapsed, waited


async def consume_queue_rows(workdir: Path, units: int) -> dict[str, float]:
    """Seconds for ``units`` puts, for pull-sized reads of all of them, for a tag filter."""
    root = Path(tempfile.mkdtemp(dir=workdir))
    queue = ConsumeQueue(TOPIC, 0, root, 300_000 * 20)
    tags = [tags_code(f"Tag{n % 8}") for n in range(units)]
    start = time.perf_counter()
    for q in range(units):
        if queue.put(q * 1024, 1024, tags[q], q) is PutUnitStatus.NEED_FILE:
            queue.queue.create_last_file_blocking(q * 20)  # creation is not what we time
            queue.put(q * 1024, 1024, tags[q], q)
    put_s = time.perf_counter() - start
    start = time.perf_counter()
    q, seen = 0, 0
    while (sl := queue.get_units(q, 32)) is not None:
        with sl:
            seen += int(sl.units["size"].sum() > 0)  # touch the data, as a pull would
            q += len(sl)
    read_s = time.perf_counter() - start
    with queue.get_units(0) as whole:  # type: ignore[union-attr]
        start = time.perf_counter()
        matched = int(tags_match(whole.units, {tags[1], tags[5]}).sum())
        filter_s = time.perf_counter() - start
        filtered = len(whole)
    assert q == units and matched == filtered // 4
    queue.queue.shutdown()
    shutil.rmtree(root)
    return {"put": put_s, "read32": read_s, "filter": filter_s, "filtered": filtered}


# ------------------------------------------------------------------------ report


def rate(label: str, seconds: list[float], count: int, size: int, extra: str = "") -> str:
    s = statistics.median(seconds)
    return f"  {label:<38} {count / s:>12,.0f} msgs/s {count * size / s / 1e6:>9,.0f} MB/s  {extra}"


async def main(args: argparse.Namespace) -> None:
    started = os.times().elapsed
    workdir = Path(tempfile.mkdtemp(prefix="store-bench-"))
    total = args.mib * 1024 * 1024
    file_size = args.file_mib * 1024 * 1024
    results: dict[tuple[str, int], list[float]] = {}
    waits: dict[tuple[str, int], list[int]] = {}
    rows: list[tuple[str, Callable[[int], Awaitable[float] | float]]] = [
        ("raw mmap copy, fresh file", lambda sz: raw_copy(workdir, sz, total, False)),
        ("raw mmap copy, warmed file", lambda sz: raw_copy(workdir, sz, total, True)),
    ]
    try:
        for _ in range(args.rounds):
            for size in args.sizes:
                for label, fn in rows:
                    out = fn(size)
                    results.setdefault((label, size), []).append(out)  # type: ignore[arg-type]
                for label, warm, encode in (
                    ("CommitLog.append, files warmed", True, False),
                    ("CommitLog.append, files not warmed", False, False),
                    ("encode_record + append, warmed", True, True),
                ):
                    elapsed, waited = await commit_log_rows(
                        workdir, size, total, file_size, warm, encode
                    )
                    results.setdefault((label, size), []).append(elapsed)
                    waits.setdefault((label, size), []).append(waited)
        cq = [await consume_queue_rows(workdir, args.units) for _ in range(args.rounds)]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    cpu = os.times()
    busy = (cpu.user + cpu.system) / max(cpu.elapsed - started, 1e-9)
    print(
        f"store file layer: {args.mib} MiB per row, {args.file_mib} MiB CommitLog files, "
        f"median of {args.rounds} rounds; one process (event loop + 2 pool threads) "
        f"used {busy:.0%} of one core over the run"
    )
    for size in args.sizes:
        print(f"{size} B records ({total // size:,} per row):")
        for (label, sz), secs in results.items():
            if sz == size:
                w = waits.get((label, sz))
                extra = f"rolls waited: {max(w)}" if w is not None else ""
                print(rate(label, secs, total // size, size, extra))
    units = args.units
    print(f"ConsumeQueue ({units:,} units of 20 B, one 6,000,000-byte file per 300,000 units):")
    for key, what in (
        ("put", "put (struct pack into the mmap)"),
        ("read32", "read 32-unit numpy views"),
    ):
        print(rate(what, [r[key] for r in cq], units, 20))
    filtered = int(cq[0]["filtered"])
    print(rate("tag filter, np.isin over one file", [r["filter"] for r in cq], filtered, 20))


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mib", type=int, default=192, help="bytes appended per row (MiB)")
    parser.add_argument("--file-mib", type=int, default=64, help="CommitLog file size (MiB)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[128, 1024])
    parser.add_argument("--units", type=int, default=600_000, help="ConsumeQueue units")
    return parser.parse_args()


if __name__ == "__main__":
    uvloop.run(main(parse()))
