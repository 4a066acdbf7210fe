"""Small builders the store's file-layer tests share (plain functions, no fixtures).

Owns: a small-file ``MessageStoreConfig`` in a temp dir, encoded CommitLog records of
a chosen size, and a one-call way to get a started CommitLog whose next file is ready.

Must not: hide what a test checks: every builder returns real objects on real files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiorocketmq.common.message_codec import MIN_RECORD_SIZE, encode_record
from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.store.commit_log import AppendResult, AppendStatus, CommitLog
from aiorocketmq.store.config import MessageStoreConfig

SMALL_COMMIT_LOG = 64 * 1024
STORE_HOST = ("10.0.0.7", 10911)
BORN_HOST = ("192.168.1.20", 50123)


def small_config(root: Path, **overrides: Any) -> MessageStoreConfig:
    """A config with 64 KiB CommitLog files and tiny ConsumeQueue/index files."""
    values: dict[str, Any] = {
        "store_path_root_dir": str(root),
        "mapped_file_size_commit_log": SMALL_COMMIT_LOG,
        "mapped_file_size_consume_queue": 20 * 50,
        "max_hash_slot_num": 16,
        "max_index_num": 40,
        "warm_commit_log_files": True,
        "preallocate_commit_log_blocks": True,
        "verify_writes": True,
    }
    values.update(overrides)
    return MessageStoreConfig(**values)


def make_record(
    *,
    topic: str = "TopicTest",
    queue_id: int = 0,
    body: bytes = b"hello",
    properties: str = "",
    sys_flag: int = 0,
    born_host: tuple[str, int] = BORN_HOST,
    born_timestamp: int = 1_700_000_000_000,
) -> bytearray:
    """One encoded v1 record, offsets and store time left at 0 for the append."""
    return encode_record(
        topic=topic,
        body=body,
        properties=properties,
        queue_id=queue_id,
        sys_flag=sys_flag,
        born_timestamp=born_timestamp,
        born_host=born_host,
        store_timestamp=0,
        store_host=STORE_HOST,
    )


def record_of_size(total: int, *, topic: str = "TopicTest", queue_id: int = 0) -> bytearray:
    """A record of exactly ``total`` bytes (IPv4 hosts, no properties)."""
    body_len = total - MIN_RECORD_SIZE - len(topic.encode())
    assert body_len >= 0, f"{total} bytes cannot hold topic {topic!r}"
    record = make_record(topic=topic, queue_id=queue_id, body=bytes([7]) * body_len)
    assert len(record) == total
    return record


async def started_commit_log(config: MessageStoreConfig, executor: BlockingExecutor) -> CommitLog:
    """A CommitLog (loaded if files exist) with its allocator running and idle."""
    commit_log = CommitLog(config, executor)
    commit_log.load_blocking()
    await commit_log.start()
    await commit_log.allocator.idle()
    return commit_log


async def append(
    commit_log: CommitLog, record: bytearray, key: str, store_timestamp: int
) -> AppendResult:
    """Append as the put path does: on NEED_FILE await the next file, then again."""
    result = commit_log.append(record, key, store_timestamp)
    if result.status is AppendStatus.NEED_FILE:
        await commit_log.allocate_next_file()
        result = commit_log.append(record, key, store_timestamp)
    return result


async def append_batch(
    commit_log: CommitLog, records: bytearray, key: str, store_timestamp: int
) -> AppendResult:
    """``append_batch`` with the same NEED_FILE handling."""
    result = commit_log.append_batch(records, key, store_timestamp)
    if result.status is AppendStatus.NEED_FILE:
        await commit_log.allocate_next_file()
        result = commit_log.append_batch(records, key, store_timestamp)
    return result
