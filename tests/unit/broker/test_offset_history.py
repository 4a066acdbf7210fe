"""Offset history: snapshot lines, rotation, the periodic service, and the analytics reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiorocketmq.analytics.offsets import offset_history
from aiorocketmq.broker.offset_history import (
    HISTORY_FILE,
    OffsetHistoryService,
    append_offset_snapshot,
    snapshot_line,
)
from aiorocketmq.broker.offsets import ConsumerOffsetManager
from aiorocketmq.common.clock import Clock
from aiorocketmq.runtime import BlockingExecutor
from tests.support.wait import wait_until

pytestmark = pytest.mark.timeout(30)


class StepClock(Clock):
    """A clock that advances one second per reading."""

    def __init__(self, start_ms: int) -> None:
        self.now = start_ms

    def now_ms(self) -> int:
        self.now += 1000
        return self.now

    def monotonic_ms(self) -> int:
        return self.now


def test_snapshot_line_is_one_standard_json_line() -> None:
    line = snapshot_line({"T@g": {1: 9, 0: 12}}, 1_700_000_000_000)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {
        "timestamp": 1_700_000_000_000,
        "offsetTable": {"T@g": {"0": 12, "1": 9}},
    }


def test_appends_rotate_and_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "config" / HISTORY_FILE
    first = append_offset_snapshot(path, {"T@g": {0: 1}}, 1000)
    append_offset_snapshot(path, {"T@g": {0: 2}}, 2000)
    assert path.stat().st_size == 2 * first
    # The third line would pass max_bytes: the file becomes .1 and a new one starts.
    append_offset_snapshot(path, {"T@g": {0: 3}}, 3000, max_bytes=2 * first + 10)
    assert path.with_name(HISTORY_FILE + ".1").stat().st_size == 2 * first
    assert path.stat().st_size == first
    with path.open("ab") as fh:  # a crash in the middle of a write
        fh.write(b'{"timestamp":4000,"offsetTab')
    history = offset_history(tmp_path, "broker-a")
    assert history.bad_lines == 1
    assert [(r["timestamp"], r["offset"]) for r in history.rows] == [
        (1000, 1),
        (2000, 2),
        (3000, 3),
    ]
    assert {(r["broker"], r["topic"], r["group"], r["queueId"]) for r in history.rows} == {
        ("broker-a", "T", "g", 0)
    }


async def test_service_appends_the_live_table_each_period(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    offsets = ConsumerOffsetManager(tmp_path / "config" / "consumerOffset.json", executor)
    offsets.commit_offset("c", "group_a", "TopicA", 0, 5)
    path = tmp_path / "config" / HISTORY_FILE
    service = OffsetHistoryService(
        offsets, path, executor, StepClock(1_700_000_000_000), interval_ms=20
    )
    await service.start()
    try:
        await wait_until(lambda: service.snapshots >= 1, timeout=10, what="first snapshot")
        offsets.commit_offset("c", "group_a", "TopicA", 0, 8)
        offsets.commit_offset("c", "group_a", "TopicA", 1, 2)
        seen = service.snapshots
        await wait_until(lambda: service.snapshots > seen, timeout=10, what="next snapshot")
    finally:
        await service.shutdown()
    rows = offset_history(tmp_path, "b").rows
    stamps = sorted({r["timestamp"] for r in rows})
    assert stamps[0] > 1_700_000_000_000 and stamps == sorted(set(stamps))
    first = [(r["queueId"], r["offset"]) for r in rows if r["timestamp"] == stamps[0]]
    last = [(r["queueId"], r["offset"]) for r in rows if r["timestamp"] == stamps[-1]]
    assert first == [(0, 5)]
    assert sorted(last) == [(0, 8), (1, 2)]
    assert service.snapshots == len(path.read_bytes().splitlines())


async def test_a_write_error_is_logged_not_fatal(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    offsets = ConsumerOffsetManager(tmp_path / "consumerOffset.json", executor)
    blocker = tmp_path / "config"
    blocker.write_text("a file where the directory should be")
    service = OffsetHistoryService(offsets, blocker / HISTORY_FILE, executor, interval_ms=60_000)
    await service.snapshot()
    assert service.snapshots == 0
    assert blocker.read_text() == "a file where the directory should be"


async def test_snapshots_record_each_committed_queue_end(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    offsets = ConsumerOffsetManager(tmp_path / "consumerOffset.json", executor)
    offsets.commit_offset("c", "g", "T", 0, 5)
    offsets.commit_offset("c", "g", "T", 2, 1)
    offsets.commit_offset("c", "h", "T", 0, 7)
    ends = {("T", 0): 9, ("T", 2): 4}
    asked: list[tuple[str, int]] = []

    def max_offset(topic: str, queue_id: int) -> int:
        asked.append((topic, queue_id))
        return ends[(topic, queue_id)]

    path = tmp_path / "config" / HISTORY_FILE
    service = OffsetHistoryService(offsets, path, executor, max_offset=max_offset)
    await service.snapshot()
    doc = json.loads(path.read_bytes())
    assert doc["maxOffsetTable"] == {"T": {"0": 9, "2": 4}}
    assert sorted(asked) == [("T", 0), ("T", 2)]  # once per queue, not per group


async def test_a_non_positive_interval_turns_the_history_off(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    offsets = ConsumerOffsetManager(tmp_path / "consumerOffset.json", executor)
    service = OffsetHistoryService(offsets, tmp_path / HISTORY_FILE, executor, interval_ms=0)
    assert not service.enabled
    await service.start()  # used to raise: periodic() refuses a zero interval
    await service.shutdown()
    assert not (tmp_path / HISTORY_FILE).exists()
