"""The ``rocketmq`` data source over stores written by real brokers, against ground truth."""

from __future__ import annotations

import shutil
import zlib
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from aiorocketmq.analytics import offsets, scan
from aiorocketmq.analytics.datasource import parse_options
from aiorocketmq.common.compression import decompress_body
from aiorocketmq.common.message_codec import RecordScanner
from tests.analytics.conftest import Stores
from tests.analytics.store_writer import GROUP, RETRY_TOPIC, SCHEDULE_TOPIC, StoreTruth

# The first test also waits for the session and the stores (~1 min on a busy machine).
pytestmark = [pytest.mark.spark, pytest.mark.timeout(240)]


def _read(spark: SparkSession, *roots: Path, **options: str) -> DataFrame:
    reader = spark.read.format("rocketmq")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(",".join(str(r) for r in roots))


def _records(spark: SparkSession, truth: StoreTruth, **options: str) -> list[dict[str, object]]:
    rows = _read(spark, truth.root, **options).orderBy("physicalOffset").collect()
    return [r.asDict(recursive=True) for r in rows]


def _last_record(root: Path) -> tuple[Path, int, int]:
    """The last CommitLog file, its last record's position and size (by the codec)."""
    last = scan.commitlog_files(root)[-1]
    views = list(RecordScanner(Path(last.path).read_bytes()))
    return Path(last.path), views[-1].position, views[-1].total_size


def test_records_match_what_the_broker_was_sent(spark: SparkSession, stores: Stores) -> None:
    truth = stores.a
    rows = _records(spark, truth)
    user = [r for r in rows if r["topic"] not in (RETRY_TOPIC, SCHEDULE_TOPIC)]
    assert len(user) == len(truth.sent) == 90
    assert Counter((r["topic"], r["queueId"]) for r in user) == Counter(
        (s.topic, s.queue_id) for s in truth.sent
    )
    assert Counter((r["topic"], r["tags"]) for r in user) == Counter(
        (s.topic, s.tags) for s in truth.sent
    )
    by_slot = {(r["topic"], r["queueId"], r["queueOffset"]): r for r in user}
    for s in truth.sent:
        row = by_slot[(s.topic, s.queue_id, s.queue_offset)]
        assert row["keys"] == s.keys and row["bodySize"] == s.stored_size
        assert row["bornTimestamp"] == s.born_ms and row["sysFlag"] & 1 == s.sys_flag
        assert s.before_ms <= row["storeTimestamp"] <= s.after_ms
        assert row["broker"] == "broker-a" and row["bodyCrcOk"] is True
        assert row["bornHost"].startswith("127.0.0.1:") and row["properties"]["KEYS"]
    # The log rolled (64 KiB files) and every file contributed records.
    files = {r["physicalOffset"] // (64 * 1024) for r in rows}
    assert files == set(range(len(scan.commitlog_files(truth.root)))) and len(files) >= 2
    assert {k for r in user for k in r["keys"]} == {k for s in truth.sent for k in s.keys}


def test_compressed_body_and_the_retried_message(spark: SparkSession, stores: Stores) -> None:
    truth = stores.a
    rows = _records(spark, truth, includeBody="true")
    first = truth.sent[0]
    original = next(r for r in rows if r["topic"] == first.topic and r["queueOffset"] == 0
                    and r["queueId"] == 0)  # fmt: skip
    assert original["sysFlag"] & 1 and original["bodySize"] == len(original["body"])
    inflated = decompress_body(original["body"], original["sysFlag"])
    assert inflated == b"analytics compressed body line\n" * 700 and len(inflated) > 4096
    retried = [r for r in rows if r["topic"] == RETRY_TOPIC]
    scheduled = [r for r in rows if r["topic"] == SCHEDULE_TOPIC]
    assert len(retried) == 1 and len(scheduled) == 1
    (retry,) = retried
    assert retry["reconsumeTimes"] == 1 and retry["body"] == original["body"]
    assert retry["properties"]["RETRY_TOPIC"] == first.topic
    assert retry["properties"]["ORIGIN_MESSAGE_ID"] == first.msg_id
    assert retry["keys"] == first.keys and retry["tags"] == first.tags
    assert scheduled[0]["properties"]["REAL_TOPIC"] == RETRY_TOPIC
    assert scheduled[0]["physicalOffset"] < retry["physicalOffset"]


def test_chunks_split_at_record_boundaries_and_match_the_codec(
    spark: SparkSession, stores: Stores
) -> None:
    truth = stores.a
    whole = _records(spark, truth)
    chunked = _records(spark, truth, chunkSize="12000")
    assert chunked == whole
    # Every column equals the codec's own decoding of the same bytes.
    expected = []
    for f in scan.commitlog_files(truth.root):
        data = Path(f.path).read_bytes()
        for v in RecordScanner(data):
            crc_ok = zlib.crc32(v.body_view) & 0x7FFFFFFF == v.body_crc
            host = f"{v.store_host[0]}:{v.store_host[1]}"
            expected.append((v.physical_offset, v.topic, v.queue_id, v.queue_offset, v.sys_flag,
                             v.store_timestamp, host, v.body_len, crc_ok, v.tags, v.keys,
                             v.uniq_key, v.properties))  # fmt: skip
    got = [(r["physicalOffset"], r["topic"], r["queueId"], r["queueOffset"], r["sysFlag"],
            r["storeTimestamp"], r["storeHost"], r["bodySize"], r["bodyCrcOk"], r["tags"],
            r["keys"], r["uniqKey"], r["properties"]) for r in whole]  # fmt: skip
    assert got == expected


def test_columns_option_produces_only_the_columns_asked_for(
    spark: SparkSession, stores: Stores
) -> None:
    wanted = ["topic", "queueId", "bodySize", "tags"]
    projected = _read(spark, stores.a.root, columns=",".join(wanted))
    assert projected.columns == wanted
    full = _read(spark, stores.a.root).select(*wanted)
    assert sorted(map(tuple, projected.collect())) == sorted(map(tuple, full.collect()))
    with pytest.raises(ValueError, match="unknown columns"):
        parse_options({"path": "x", "columns": "topic,nope"})
    with pytest.raises(ValueError, match="includeBody"):
        parse_options({"path": "x", "columns": "body"})
    with pytest.raises(ValueError, match="2 brokers for 1 store roots"):
        parse_options({"path": "x", "brokers": "a,b"})


@pytest.mark.parametrize("damage", ["truncate", "corrupt"])
def test_torn_tail_is_skipped_and_reported(
    spark: SparkSession, stores: Stores, tmp_path: Path, damage: str
) -> None:
    root = tmp_path / "broker-a-store"
    shutil.copytree(stores.a.root / "commitlog", root / "commitlog")
    path, pos, size = _last_record(root)
    total = _read(spark, stores.a.root).count()
    if damage == "truncate":
        with path.open("r+b") as fh:
            fh.truncate(pos + size // 2)
    else:
        with path.open("r+b") as fh:  # a bad magic code over the last record
            fh.seek(pos + 4)
            fh.write(b"\xde\xad\xbe\xef")
    assert _read(spark, root).count() == total - 1
    stats = _read(spark, root, mode="stats").collect()
    bad = [s for s in stats if s["stopReason"] in ("truncated", "corrupt")]
    assert len(bad) == 1
    assert bad[0]["stopReason"] == ("truncated" if damage == "truncate" else "corrupt")
    assert bad[0]["stopOffset"] == int(path.name) + pos
    assert bad[0]["skippedBytes"] == (size // 2 if damage == "truncate" else size)
    assert bad[0]["problems"] and str(pos) in bad[0]["problems"][0]
    assert sum(s["records"] for s in stats) == total - 1


def test_two_brokers_read_together(spark: SparkSession, stores: Stores) -> None:
    df = _read(spark, stores.a.root, stores.b.root)
    counts = {
        (r["broker"], r["topic"]): r["count"]
        for r in df.groupBy("broker", "topic").count().collect()
    }
    for truth in (stores.a, stores.b):
        for topic, n in Counter(s.topic for s in truth.sent).items():
            assert counts[(truth.broker, topic)] == n
    assert counts[("broker-a", "PayTopic")] == 30 and counts[("broker-b", "PayTopic")] == 12
    assert sum(counts.values()) == len(stores.a.sent) + 2 + len(stores.b.sent)
    named = _read(spark, stores.a.root, stores.b.root, brokers="east,west")
    assert {r["broker"] for r in named.select("broker").distinct().collect()} == {"east", "west"}
    hosts = df.groupBy("broker").agg(F.countDistinct("storeHost").alias("n")).collect()
    assert all(h["n"] == 1 for h in hosts)


def test_lag_joins_committed_offsets_with_queue_ends(stores: Stores) -> None:
    truth = stores.a
    ends = Counter((s.topic, s.queue_id) for s in truth.sent)
    lag = offsets.consumer_lag(truth.root, truth.broker)
    assert {(r["topic"], r["queueId"]): (r["offset"], r["maxOffset"], r["lag"]) for r in lag} == {
        key: (offset, ends[key], ends[key] - offset) for key, offset in truth.committed.items()
    }
    assert {r["group"] for r in lag} == {GROUP}
    cq = {(r["topic"], r["queueId"]): r["maxOffset"] for r in offsets.queue_max_offsets(
        truth.root, truth.broker)}  # fmt: skip
    assert cq[(RETRY_TOPIC, 0)] == 1
    assert all(cq[key] == n for key, n in ends.items())
