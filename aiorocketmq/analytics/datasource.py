"""The ``rocketmq`` Spark data source: CommitLog records of one or many store roots.

Owns: ``RocketMQDataSource`` (PySpark 4 ``pyspark.sql.datasource``), its options, its
Spark schema, its partitions (one per chunk of a CommitLog file, see ``scan``) and
``register``. Usage::

    register(spark)
    df = spark.read.format("rocketmq").load("/data/broker-a-store,/data/broker-b-store")

Options (all strings, as Spark passes them):

- ``path``: store roots (or ``commitlog`` directories), comma-separated.
- ``brokers``: broker names for those roots, comma-separated, same order (default:
  each root's directory name, see ``scan.broker_name_of``).
- ``includeBody`` (false): add the ``body`` column (the body as stored).
- ``checkCrc`` (true): fill ``bodyCrcOk``.
- ``chunkSize`` (67108864): bytes of a file per partition.
- ``columns`` (all): comma-separated columns to produce, in the schema's order. Python
  data sources get no column pruning from Spark; naming the columns a job needs saves
  decoding them (the properties are not parsed unless a property column is asked
  for) and moving them into the JVM.
- ``mode`` (``records``): ``stats`` reads the same partitions but yields one row per
  chunk saying how its walk ended (``STATS_SCHEMA``): records, bytes, stop reason and
  offset, skipped bytes (torn or corrupt data) and the problems found.

Must not: import pyspark at module level elsewhere in ``analytics`` (only this module,
the jobs and the CLI need it), or hold open files between calls: partitions are
plain picklable values and each read opens and closes its file.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from aiorocketmq.analytics import scan

__all__ = [
    "RECORD_DDL",
    "STATS_DDL",
    "ChunkPartition",
    "RocketMQDataSource",
    "parse_options",
    "register",
]

RECORD_DDL: Final = (
    "broker string, topic string, queueId int, queueOffset long, physicalOffset long,"
    " sysFlag int, flag int, bornTimestamp long, bornHost string, storeTimestamp long,"
    " storeHost string, reconsumeTimes int, bodySize int, bodyCrcOk boolean, tags string,"
    " keys array<string>, uniqKey string, properties map<string,string>"
)
"""Spark schema of the records; ``, body binary`` is appended with ``includeBody``."""

STATS_DDL: Final = (
    "broker string, file string, chunkStart long, chunkEnd long, records long,"
    " recordBytes long, stopReason string, stopOffset long, skippedBytes long,"
    " problems array<string>"
)
"""Spark schema of ``mode=stats``: one row per chunk."""

_STATS_SCHEMA: Final = pa.schema(
    [
        ("broker", pa.string()), ("file", pa.string()), ("chunkStart", pa.int64()),
        ("chunkEnd", pa.int64()), ("records", pa.int64()), ("recordBytes", pa.int64()),
        ("stopReason", pa.string()), ("stopOffset", pa.int64()), ("skippedBytes", pa.int64()),
        ("problems", pa.list_(pa.string())),
    ]
)  # fmt: skip

_TRUE: Final = frozenset({"true", "1", "yes"})


class ChunkPartition(InputPartition):
    """One chunk of one CommitLog file (picklable)."""

    def __init__(self, chunk: scan.Chunk | None) -> None:
        super().__init__(chunk)
        self.chunk = chunk


def _flag(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = options.get(name)
    return default if value is None else value.strip().lower() in _TRUE


def _split(value: str | None) -> list[str]:
    return [p.strip() for p in (value or "").split(",") if p.strip()]


def parse_options(options: Mapping[str, str]) -> dict[str, Any]:
    """Validated options (keys are matched case-insensitively, as Spark's).

    Raises:
        ValueError: no path, a bad chunk size, a ``brokers`` list of another length,
            or an unknown mode.
    """
    lowered = {k.lower(): v for k, v in options.items()}
    roots = _split(lowered.get("path")) + _split(lowered.get("paths"))
    if not roots:
        raise ValueError("rocketmq data source: give store roots with load(path) or 'path'")
    brokers = _split(lowered.get("brokers") or lowered.get("broker"))
    if brokers and len(brokers) != len(roots):
        raise ValueError(f"'brokers' names {len(brokers)} brokers for {len(roots)} store roots")
    try:
        chunk = int(lowered.get("chunksize", scan.DEFAULT_CHUNK_BYTES))
    except ValueError as exc:
        raise ValueError(f"chunkSize must be an integer: {exc}") from exc
    columns = _columns(lowered)
    mode = lowered.get("mode", "records").strip().lower()
    if mode not in ("records", "stats"):
        raise ValueError(f"mode must be 'records' or 'stats', not {mode!r}")
    return {
        "roots": roots,
        "brokers": brokers or [None] * len(roots),
        "chunk_bytes": chunk,
        "include_body": _flag(lowered, "includebody", False),
        "check_crc": _flag(lowered, "checkcrc", True),
        "mode": mode,
        "columns": columns,
    }


def _ddl_types() -> dict[str, str]:
    return dict(item.split(" ", 1) for item in (RECORD_DDL + ", body binary").split(", "))


def _columns(lowered: Mapping[str, str]) -> frozenset[str] | None:
    names = _split(lowered.get("columns"))
    if not names:
        return None
    known = _ddl_types()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown columns {unknown}; the record columns are {list(known)}")
    if "body" in names and _flag(lowered, "includebody", False) is False:
        raise ValueError("column 'body' needs includeBody=true")
    return frozenset(names)


class RocketMQDataSource(DataSource):
    """``spark.read.format("rocketmq")``: CommitLog records (or per-chunk scan stats)."""

    @classmethod
    def name(cls) -> str:
        """The format name."""
        return "rocketmq"

    def schema(self) -> str:
        """The DDL schema for the options given."""
        opts = parse_options(self.options)
        if opts["mode"] == "stats":
            return STATS_DDL
        ddl = RECORD_DDL + (", body binary" if opts["include_body"] else "")
        if opts["columns"] is None:
            return ddl
        return ", ".join(f"{n} {t}" for n, t in _ddl_types().items()
                         if n in opts["columns"] and n in ddl)  # fmt: skip

    def reader(self, schema: StructType) -> RocketMQReader:
        """A reader for the options given."""
        return RocketMQReader(parse_options(self.options))


class RocketMQReader(DataSourceReader):
    """Plans chunks on the driver; reads one chunk per partition on an executor."""

    def __init__(self, opts: dict[str, Any]) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        """One partition per chunk, files of all roots in order."""
        files: list[scan.CommitLogFile] = []
        for root, broker in zip(self.opts["roots"], self.opts["brokers"], strict=True):
            files.extend(scan.commitlog_files(Path(root), broker))
        chunks = scan.plan_chunks(files, self.opts["chunk_bytes"])
        return [ChunkPartition(c) for c in chunks] or [ChunkPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Arrow batches of the partition's records, or its one stats row."""
        chunk = partition.chunk if isinstance(partition, ChunkPartition) else None
        if chunk is None:  # no CommitLog file at all: Spark still wants a partition
            return
        stats: list[scan.ChunkStats] = []
        records = self.opts["mode"] == "records"
        batches = scan.scan_chunk(
            chunk, include_body=self.opts["include_body"], check_crc=self.opts["check_crc"],
            stats_out=stats, columns=self.opts["columns"] if records else None,
        )  # fmt: skip
        if records:
            yield from batches
            return
        for _ in batches:
            pass
        yield stats_batch(stats)


def stats_batch(stats: Sequence[scan.ChunkStats]) -> pa.RecordBatch:
    """``ChunkStats`` as an Arrow batch of ``STATS_DDL``'s columns."""
    rows = [
        (s.broker, s.file, s.start, s.end, s.records, s.record_bytes, s.stop_reason,
         s.stop_offset, s.skipped_bytes, s.problems)
        for s in stats
    ]  # fmt: skip
    cols = list(zip(*rows, strict=True)) if rows else [()] * len(_STATS_SCHEMA)
    return pa.RecordBatch.from_arrays(
        [pa.array(list(c), f.type) for c, f in zip(cols, _STATS_SCHEMA, strict=True)],
        schema=_STATS_SCHEMA,
    )


def register(spark: SparkSession) -> None:
    """Register the ``rocketmq`` format with a session."""
    spark.dataSource.register(RocketMQDataSource)
