"""ConsumeQueueTable: lookup, loading consumequeue/<topic>/<queueId>/, and the store-wide
recovery and expiry passes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.store.consume_queue import PutUnitStatus
from aiorocketmq.store.consume_queue_table import ConsumeQueueTable
from aiorocketmq.store.errors import StoreLoadError
from tests.unit.store.helpers import small_config


@pytest.fixture
async def executor() -> AsyncIterator[BlockingExecutor]:
    pool = BlockingExecutor("test-cqt", 2)
    yield pool
    await pool.shutdown()


def populate(table: ConsumeQueueTable) -> None:
    # TopicA-0: 60 units (two files of 50), TopicA-1: 3 units, TopicB-0: 1 unit.
    physical = 0
    for topic, queue_id, count in (("TopicA", 0, 60), ("TopicA", 1, 3), ("TopicB", 0, 1)):
        queue = table.find_or_create(topic, queue_id)
        for q in range(count):
            assert queue.put_blocking(physical, 10, 0, q) is PutUnitStatus.OK
            physical += 10


async def test_find_or_create_touches_no_file(tmp_path: Path, executor: BlockingExecutor) -> None:
    table = ConsumeQueueTable(small_config(tmp_path), executor)
    queue = table.find_or_create("TopicA", 2)
    assert table.find_or_create("TopicA", 2) is queue and table.get("TopicA", 2) is queue
    assert table.get("TopicA", 3) is None and len(table) == 1 and table.topics() == ["TopicA"]
    assert not (tmp_path / "consumequeue").exists()
    assert table.remove("TopicA", 2) is queue and len(table) == 0 and table.topics() == []
    assert table.remove("TopicA", 2) is None


async def test_load_recover_and_offsets(tmp_path: Path, executor: BlockingExecutor) -> None:
    config = small_config(tmp_path)
    writer = ConsumeQueueTable(config, executor)
    populate(writer)
    await writer.shutdown()
    (tmp_path / "consumequeue" / "TopicA" / "notes").mkdir()  # not a queue id: skipped
    (tmp_path / "consumequeue" / "stray-file").write_bytes(b"x")  # not a topic dir: skipped
    table = ConsumeQueueTable(config, executor)
    assert table.load_blocking() == 3
    assert table.recover_blocking() == 640, "largest end offset over all queues"
    assert table.queue_offsets() == {"TopicA-0": 60, "TopicA-1": 3, "TopicB-0": 1}
    table.truncate_dirty_blocking(600)  # TopicA-1 and TopicB-0 point at 600..630
    assert table.queue_offsets() == {"TopicA-0": 60, "TopicA-1": 0, "TopicB-0": 0}
    assert table.max_physic_offset() == 600
    await table.shutdown()


async def test_load_refuses_a_queue_id_that_is_a_file(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    (tmp_path / "consumequeue" / "TopicA").mkdir(parents=True)
    (tmp_path / "consumequeue" / "TopicA" / "0").write_bytes(b"x")
    with pytest.raises(StoreLoadError, match="not a directory"):
        ConsumeQueueTable(small_config(tmp_path), executor).load_blocking()


async def test_expiry_min_offsets_flush_and_destroy(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    table = ConsumeQueueTable(small_config(tmp_path), executor)
    populate(table)
    assert await table.delete_expired(min_physical_offset=505) == 1, "TopicA-0's first file"
    queue = table.get("TopicA", 0)
    assert queue is not None and queue.min_offset == 51
    table.correct_min_offsets(615)
    assert table.get("TopicA", 1).min_offset == 2  # type: ignore[union-attr]
    await table.flush(0)
    assert all(q.queue.flushed_where == q.queue.max_offset for q in table)
    table.destroy_blocking()
    assert len(table) == 0 and not (tmp_path / "consumequeue" / "TopicA" / "0").exists()
