"""The operator's report: Spark jobs over the ``rocketmq`` data source, then files.

Owns: ``build_tables`` (the report's tables as pandas frames: per-topic messages and
bytes per minute, body size histogram, top keys and tags, producer hosts, retry/DLQ
share, consumer lag now and over time, and how every CommitLog chunk's scan ended)
and ``write_report`` (Parquet tables, PNG plots and the HTML page into a directory).

Must not: stop the SparkSession it is given, or read anything but store files.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd  # type: ignore[import-untyped]
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from aiorocketmq.analytics import offsets, render, scan

__all__ = ["ReportResult", "StoreRoot", "build_tables", "read_records", "write_report"]

_REPORT_COLUMNS = ("broker", "topic", "queueId", "queueOffset", "storeTimestamp", "bodySize",
                   "bornHost", "tags", "keys")  # fmt: skip
_SIZE_BUCKETS = (64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304)


@dataclass(frozen=True)
class StoreRoot:
    """A store root and the broker name its rows carry."""

    path: str
    broker: str

    @classmethod
    def of(cls, path: str, broker: str | None = None) -> StoreRoot:
        """``broker`` or the name derived from the directory (``scan.broker_name_of``)."""
        return cls(path, broker or scan.broker_name_of(Path(path)))


@dataclass
class ReportResult:
    """What ``write_report`` wrote."""

    tables: dict[str, pd.DataFrame]
    parquet: list[Path]
    plots: list[Path]
    html: Path


def read_records(
    spark: SparkSession,
    stores: Sequence[StoreRoot],
    *,
    mode: str = "records",
    chunk_bytes: int = scan.DEFAULT_CHUNK_BYTES,
    columns: Sequence[str] = (),
) -> DataFrame:
    """The data source over ``stores`` (records, or per-chunk stats with ``mode``;
    only ``columns`` when given)."""
    reader = (
        spark.read.format("rocketmq")
        .option("brokers", ",".join(s.broker for s in stores))
        .option("mode", mode)
        .option("chunkSize", str(chunk_bytes))
    )
    if columns:
        reader = reader.option("columns", ",".join(columns))
    return reader.load(",".join(s.path for s in stores))


def _kind(topic: Column) -> Column:
    return (
        F.when(topic.startswith("%RETRY%"), "retry")
        .when(topic.startswith("%DLQ%"), "dlq")
        .when(topic == "SCHEDULE_TOPIC_XXXX", "scheduled")
        .when(topic == "RMQ_SYS_TRANS_HALF_TOPIC", "transaction half")
        .otherwise("normal")
    )


def _size_bucket(size: Column) -> Column:
    expr = F.when(size <= _SIZE_BUCKETS[0], f"<= {_SIZE_BUCKETS[0]} B")
    for low, high in itertools.pairwise(_SIZE_BUCKETS):
        expr = expr.when(size <= high, f"{_human(low)}-{_human(high)}")
    return expr.otherwise(f"> {_human(_SIZE_BUCKETS[-1])}")


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n} {unit}"
        n //= 1024
    return f"{n} GiB"


def _lag_history(spark: SparkSession, df: DataFrame, stores: Sequence[StoreRoot]) -> pd.DataFrame:
    # The queue's end at each snapshot is the number of its records stored by then.
    rows = [r for s in stores for r in offsets.offset_history(s.path, s.broker).rows]
    if not rows:
        return pd.DataFrame(columns=["broker", "timestamp", "topic", "group", "queueId",
                                     "offset", "maxOffset", "lag"])  # fmt: skip
    hist = spark.createDataFrame(pd.DataFrame(rows))
    ends = df.select("broker", "topic", "queueId", "queueOffset", "storeTimestamp")
    cond = [
        hist["broker"] == ends["broker"],
        hist["topic"] == ends["topic"],
        hist["queueId"] == ends["queueId"],
        ends["storeTimestamp"] <= hist["timestamp"],
    ]
    keys = [hist[c] for c in ("broker", "timestamp", "topic", "group", "queueId", "offset")]
    joined = hist.join(ends, cond, "left").groupBy(*keys)
    out = joined.agg(F.coalesce(F.max(ends["queueOffset"]) + 1, F.lit(0)).alias("maxOffset"))
    out = out.withColumn("lag", F.greatest(F.col("maxOffset") - F.col("offset"), F.lit(0)))
    return out.orderBy("timestamp", "topic", "group", "queueId").toPandas()


def _progress(step: str) -> None:
    print(f"mqanalytics: {step}", file=sys.stderr, flush=True)


def _distributions(df: DataFrame, top: int) -> dict[str, pd.DataFrame]:
    """Topics, sizes, top keys and tags, producer hosts and the retry/DLQ share."""
    tables: dict[str, pd.DataFrame] = {}
    tables["topics"] = (
        df.groupBy("broker", "topic", _kind(F.col("topic")).alias("kind"))
        .agg(F.count("*").alias("messages"), F.sum("bodySize").alias("bytes"),
             F.min("storeTimestamp").alias("firstStored"),
             F.max("storeTimestamp").alias("lastStored"))
        .orderBy(F.desc("messages"), "broker", "topic").toPandas()
    )  # fmt: skip
    bucket = _size_bucket(F.col("bodySize")).alias("bucket")
    tables["sizes"] = (
        df.groupBy(bucket).agg(F.count("*").alias("messages"), F.min("bodySize").alias("min"))
        .orderBy("min").toPandas()
    )  # fmt: skip
    tables["top_keys"] = (
        df.select(F.explode("keys").alias("key")).groupBy("key").count()
        .orderBy(F.desc("count"), "key").limit(top).toPandas()
    )  # fmt: skip
    tables["top_tags"] = (
        df.where(F.col("tags").isNotNull()).groupBy("topic", "tags").count()
        .orderBy(F.desc("count"), "topic", "tags").limit(top).toPandas()
    )  # fmt: skip
    tables["producers"] = (
        df.groupBy(F.split("bornHost", ":")[0].alias("host"))
        .agg(F.count("*").alias("messages"), F.sum("bodySize").alias("bytes"))
        .orderBy(F.desc("messages")).toPandas()
    )  # fmt: skip
    tables["retry_share"] = (
        df.groupBy(_kind(F.col("topic")).alias("kind")).count().orderBy(F.desc("count")).toPandas()
    )
    return tables


def build_tables(
    spark: SparkSession,
    stores: Sequence[StoreRoot],
    *,
    from_ms: int | None = None,
    to_ms: int | None = None,
    top: int = 20,
) -> dict[str, pd.DataFrame]:
    """Run the report's jobs; every table is small (aggregated) and comes back to pandas.

    Args:
        spark: a session with the data source registered (``session.spark_session``).
        stores: the store roots (one per broker).
        from_ms, to_ms: keep records stored in ``[from_ms, to_ms)`` (ms since the epoch).
        top: rows of the top-N tables.
    """
    df = read_records(spark, stores, columns=_REPORT_COLUMNS)
    if from_ms is not None:
        df = df.where(F.col("storeTimestamp") >= from_ms)
    if to_ms is not None:
        df = df.where(F.col("storeTimestamp") < to_ms)
    df = df.cache()
    tables: dict[str, pd.DataFrame] = {}
    _progress("per-topic throughput")
    minute = (F.floor(F.col("storeTimestamp") / 60000) * 60000).cast("long").alias("minute")
    tables["throughput"] = (
        df.groupBy("broker", "topic", minute)
        .agg(F.count("*").alias("messages"), F.sum("bodySize").alias("bytes"))
        .orderBy("minute", "broker", "topic").toPandas()
    )  # fmt: skip
    _progress("topics, sizes, keys, tags, producers")
    tables.update(_distributions(df, top))
    _progress("consumer lag")
    lag = [r for s in stores for r in offsets.consumer_lag(s.path, s.broker)]
    tables["lag"] = pd.DataFrame(
        lag, columns=["broker", "topic", "group", "queueId", "offset", "maxOffset", "lag"]
    )
    tables["lag_history"] = _lag_history(spark, df, stores)
    _progress("scan report (torn tails, skipped bytes)")
    tables["scan"] = (
        read_records(spark, stores, mode="stats").orderBy("file", "chunkStart").toPandas()
    )
    df.unpersist()
    return tables


def write_report(
    tables: dict[str, pd.DataFrame], out: Path, *, title: str = "RocketMQ CommitLog report"
) -> ReportResult:
    """Write ``tables/<name>.parquet``, ``plots/<name>.png`` and ``report.html`` under ``out``."""
    (out / "tables").mkdir(parents=True, exist_ok=True)
    parquet = []
    for name, frame in tables.items():
        path = out / "tables" / f"{name}.parquet"
        frame.to_parquet(path, index=False)
        parquet.append(path)
    plots = render.write_plots(tables, out / "plots")
    html = render.write_html(tables, plots, out / "report.html", title=title)
    return ReportResult(tables, parquet, plots, html)
