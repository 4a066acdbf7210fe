"""Analytics benchmark: the ``rocketmq`` Spark data source against a plain decode loop.

What it measures, in one run, over the same CommitLog files (``--gib`` GiB, default 1,
in ``--file-mib`` MiB files ending with a BLANK record, as a broker rolls them):

1. *Plain loop*: one Python process, ``iter_records(check_crc=True)`` over an mmap of
   each file, reading every field the data source gives (topic, queue, offsets,
   flags, timestamps, both hosts, reconsume times, body size, CRC, tags, keys,
   uniqKey, the properties dict).
2. *Data source*: ``spark.read.format("rocketmq").load(dir).count()`` on
   ``local[2]`` (``--master``), chunks of ``--chunk-mib`` MiB: every partition
   decodes every column into Arrow batches, which Spark then counts. The session is
   started (and one warm-up job run) before the clock starts. Then the same with
   ``columns=topic,queueId,storeTimestamp,bodySize`` (what a throughput job needs).

Records are generated, not sent (a broker would take minutes per GiB here): a block of
1,000 varied records (8 topics, 4 queues each, 5 tags, 2 keys, bodies 100-2,000 bytes,
properties as a Java client writes them) is encoded with the codec once, then copied
with each copy's PHYSICALOFFSET and QUEUEOFFSET patched (numpy), so every record is
valid and sits at its own address. The page cache is warmed before each measurement.
Target: data source >= 2x the plain loop.

``--breakdown`` adds count() runs with column groups left out (no CRC check, no
properties map, no keys, no string column): where the full schema's time goes; the
same decode in one process without Spark; and Spark alone: already-decoded batches
(Arrow IPC files written beforehand) replayed through a trivial Python data source,
which is what Spark's row conversion costs on its own.

Run: ``python benchmarks/analytics_bench.py [--gib 1] [--dir /tmp/x] [--keep] [--breakdown]``
"""

from __future__ import annotations

import argparse
import mmap
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from aiorocketmq.analytics.datasource import RECORD_DDL
from aiorocketmq.common.message_codec import blank_record, encode_record, iter_records
from aiorocketmq.common.properties import properties_to_string

BLOCK_RECORDS = 1000
NARROW = "topic,queueId,storeTimestamp,bodySize"
ALL_COLUMNS = (
    "broker", "topic", "queueId", "queueOffset", "physicalOffset", "sysFlag", "flag",
    "bornTimestamp", "bornHost", "storeTimestamp", "storeHost", "reconsumeTimes", "bodySize",
    "bodyCrcOk", "tags", "keys", "uniqKey", "properties",
)  # fmt: skip
#: --breakdown: (label, columns left out, checkCrc).
_GROUPS = (
    ("all columns, no CRC check", (), "false"),
    ("without properties", ("properties",), "true"),
    ("without properties, keys", ("properties", "keys"), "true"),
    ("without any string column", ("properties", "keys", "tags", "uniqKey", "topic", "broker",
                                   "bornHost", "storeHost"), "true"),
)  # fmt: skip


def _block(rng: random.Random) -> tuple[bytes, np.ndarray, np.ndarray]:
    """1,000 encoded records back to back; their positions and (topic, queue) slots."""
    parts, positions, slots = [], [], []
    pos = 0
    for i in range(BLOCK_RECORDS):
        topic, queue = i % 8, (i // 8) % 4
        props = {
            "TAGS": f"Tag{i % 5}", "KEYS": f"order-{rng.randrange(10**9)} user-{i % 97}",
            "UNIQ_KEY": f"7F000001{rng.randrange(16**24):024X}", "WAIT": "true",
        }  # fmt: skip
        record = encode_record(
            topic=f"BenchTopic{topic}", body=rng.randbytes(rng.randint(100, 2000)),
            properties=properties_to_string(props), queue_id=queue,
            born_timestamp=1_700_000_000_000 + i, born_host=(f"10.0.0.{i % 16}", 40000 + i % 4),
            store_timestamp=1_700_000_000_005 + i, store_host=("10.0.1.1", 10911),
        )  # fmt: skip
        parts.append(record)
        positions.append(pos)
        slots.append(topic * 4 + queue)
        pos += len(record)
    return b"".join(parts), np.array(positions, np.int64), np.array(slots, np.int64)


def _patch(buf: np.ndarray, at: np.ndarray, field: int, values: np.ndarray) -> None:
    raw = values.astype(">i8").view(np.uint8).reshape(-1, 8)
    buf[at[:, None] + field + np.arange(8)] = raw


def generate(directory: Path, total_bytes: int, file_bytes: int) -> tuple[int, int]:
    """Write CommitLog files under ``directory/commitlog``; (records, bytes of records)."""
    block, positions, slots = _block(random.Random(7))
    commitlog = directory / "commitlog"
    commitlog.mkdir(parents=True, exist_ok=True)
    next_queue = np.zeros(32, np.int64)
    records = used = 0
    base = 0
    while base < total_bytes:
        out = np.zeros(file_bytes, np.uint8)
        pos = 0
        while pos + len(block) + 8 <= file_bytes and base + pos < total_bytes:
            out[pos : pos + len(block)] = np.frombuffer(block, np.uint8)
            at = positions + pos
            _patch(out, at, 28, base + at)  # PHYSICALOFFSET: the record's own address
            counts = np.bincount(slots, minlength=32)
            rank = np.zeros(len(slots), np.int64)  # QUEUEOFFSET: per (topic, queue) order
            for s in np.unique(slots):
                rank[slots == s] = np.arange(counts[s])
            _patch(out, at, 20, next_queue[slots] + rank)
            next_queue += counts
            pos += len(block)
            records += BLOCK_RECORDS
        used += pos
        out[pos : pos + 8] = np.frombuffer(blank_record(file_bytes - pos), np.uint8)
        out.tofile(commitlog / f"{base:020d}")
        base += file_bytes
    return records, used


def _warm(directory: Path) -> None:
    for path in sorted((directory / "commitlog").iterdir()):
        with path.open("rb") as fh:
            while fh.read(1 << 24):
                pass


def plain_loop(directory: Path) -> int:
    """The single-process baseline; returns the records read."""
    n = 0
    for path in sorted((directory / "commitlog").iterdir()):
        with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            for v in iter_records(mm, check_crc=True):
                _row = (v.topic, v.queue_id, v.queue_offset, v.physical_offset, v.sys_flag,
                        v.flag, v.born_timestamp, v.born_host, v.store_timestamp, v.store_host,
                        v.reconsume_times, v.body_len, v.tags, v.keys, v.uniq_key,
                        v.properties)  # fmt: skip
                n += 1
            del v
    return n


def main() -> None:
    """Generate, measure both readers, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--file-mib", type=int, default=256)
    parser.add_argument("--chunk-mib", type=int, default=64)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--dir", type=Path)
    parser.add_argument("--rounds", type=int, default=3, help="measured runs of each reader")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument(
        "--breakdown", action="store_true", help="also count() with column groups left out"
    )
    args = parser.parse_args()
    directory = args.dir or Path(tempfile.mkdtemp(prefix="analytics-bench-"))
    total = int(args.gib * (1 << 30))
    t0 = time.perf_counter()
    records, used = generate(directory, total, args.file_mib << 20)
    print(f"generated {records:,} records, {used / 2**20:,.0f} MiB of records in "
          f"{time.perf_counter() - t0:.1f} s under {directory}")  # fmt: skip
    try:
        _measure(directory, records, used, args)
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(directory, ignore_errors=True)


def _timed(fn: Callable[[], int], records: int, rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        n = fn()
        times.append(time.perf_counter() - t0)
        assert n == records, (n, records)
    return times


def _line(label: str, times: list[float], mib: float, records: int) -> str:
    med = statistics.median(times)
    runs = ", ".join(f"{t:.2f}" for t in times)
    return (f"{label:<26}: median {med:6.2f} s  {mib / med:7.1f} MiB/s "
            f"{records / med:11,.0f} records/s  (runs: {runs} s)")  # fmt: skip


def _breakdown(
    spark: Any, directory: Path, records: int, args: argparse.Namespace
) -> list[tuple[str, list[float]]]:
    """count() with column groups left out: where the full schema's time goes.

    Spark 4 turns a Python data source's Arrow batches into rows (its reader has no
    columnar path), copying every column of every row, so each left-out group saves
    its decode in Python and its copy in the JVM.
    """
    out = []
    for label, left_out, crc in _GROUPS:
        cols = ",".join(c for c in ALL_COLUMNS if c not in left_out)
        reader = spark.read.format("rocketmq").option("chunkSize", str(args.chunk_mib << 20))
        df = reader.option("columns", cols).option("checkCrc", crc).load(str(directory))
        df.count()
        out.append((label, _timed(df.count, records, args.rounds)))
    return out


class _ReplayPartition(InputPartition):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class _Replay(DataSource):
    """Arrow IPC files of decoded batches, yielded as they are (no decoding)."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq-replay"

    def schema(self) -> str:
        return RECORD_DDL

    def reader(self, schema: Any) -> DataSourceReader:
        return _ReplayReader(self.options["path"].split(","))


class _ReplayReader(DataSourceReader):
    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def partitions(self) -> list[InputPartition]:
        return [_ReplayPartition(p) for p in self.paths]

    def read(self, partition: Any) -> Any:
        import pyarrow as pa

        with pa.memory_map(partition.path) as source:
            reader = pa.ipc.open_file(source)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)


def _decoded(directory: Path, chunk_mib: int) -> tuple[list[str], list[float]]:
    """Decode every chunk in this process (timed, one round) into Arrow IPC files."""
    import pyarrow as pa

    from aiorocketmq.analytics import scan

    files = scan.commitlog_files(directory, "bench")
    paths, elapsed = [], 0.0
    for i, chunk in enumerate(scan.plan_chunks(files, chunk_mib << 20)):
        start = time.perf_counter()
        batches = list(scan.scan_chunk(chunk))
        elapsed += time.perf_counter() - start
        path = directory / f"decoded-{i}.arrow"
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, batches[0].schema) as w:
            for batch in batches:
                w.write_batch(batch)
        paths.append(str(path))
    return paths, [elapsed]


def _measure(directory: Path, records: int, used: int, args: argparse.Namespace) -> None:
    from aiorocketmq.analytics.session import spark_session

    _warm(directory)
    plain = _timed(lambda: plain_loop(directory), records, args.rounds)
    spark = spark_session(args.master, app_name="analytics-bench")
    df = (spark.read.format("rocketmq").option("chunkSize", str(args.chunk_mib << 20))
          .load(str(directory)))  # fmt: skip
    df.count()  # one whole unmeasured job: Python workers started, modules imported
    _warm(directory)
    spark_times = _timed(df.count, records, args.rounds)
    # What a throughput job needs; the properties are then not parsed at all.
    narrow = df.sparkSession.read.format("rocketmq").option("chunkSize", str(args.chunk_mib << 20))
    narrow_df = narrow.option("columns", NARROW).load(str(directory))
    narrow_df.count()
    narrow_times = _timed(narrow_df.count, records, args.rounds)
    breakdown = _breakdown(spark, directory, records, args) if args.breakdown else []
    if args.breakdown:
        paths, in_process = _decoded(directory, args.chunk_mib)
        breakdown.append(("decode, 1 process, no Spark", in_process))
        spark.dataSource.register(_Replay)
        replay = spark.read.format("rocketmq-replay").option("path", ",".join(paths)).load()
        try:
            replay.count()
            breakdown.append(("Spark alone (replay)", _timed(replay.count, records, args.rounds)))
        finally:
            for path in paths:
                Path(path).unlink(missing_ok=True)
    spark.stop()
    mib = used / 2**20
    print(_line("plain loop (1 process)", plain, mib, records))
    print(_line(f"data source ({args.master})", spark_times, mib, records))
    print(_line(f"  columns={NARROW}", narrow_times, mib, records))
    ratio = statistics.median(plain) / statistics.median(spark_times)
    narrow_ratio = statistics.median(plain) / statistics.median(narrow_times)
    print(f"ratio with those columns: {narrow_ratio:.2f}x")
    for label, times in breakdown:
        print(_line(f"  {label}", times, mib, records))
    version = sys.version.split()[0]
    print(f"ratio data source / plain: {ratio:.2f}x (target >= 2x); chunks of "
          f"{args.chunk_mib} MiB; cores: {os.cpu_count()}, python {version}")  # fmt: skip


if __name__ == "__main__":
    main()
