"""Forced cleaning on a full disk: the groups that lose unconsumed messages are named.

A real broker (in this process) whose store holds several CommitLog files; its disk
guard is pointed at a disk 95 % full, so a clean pass deletes every file but the
newest before fileReservedTime. Group A had consumed part of what went, group B all
but the last two of it: only A is logged and counted, once, on /metrics too.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from aiorocketmq.common.topic_config import TopicConfig
from tests.support.cluster import in_process_broker
from tests.unit.store.store_support import dispatched, inner, put_ok

TOPIC = "ForcedTopic"


async def test_groups_that_lose_unconsumed_messages_are_logged_and_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = {"mappedFileSizeCommitLog": 64 * 1024, "metricsPort": -1}
    async with in_process_broker(tmp_path, **settings) as broker:
        broker.ctx.topics.update_topic_config(TopicConfig(TOPIC, 1, 1))
        for i in range(300):  # ~1.1 KiB records: five 64 KiB files and a bit
            await put_ok(broker.store, inner(b"x" * 1000, topic=TOPIC, KEYS=f"k{i}"))
        await dispatched(broker.store)
        files = broker.store.commit_log.queue.files
        assert len(files) >= 5
        broker.ctx.offsets.commit_offset("client", "GroupA", TOPIC, 0, 10)
        broker.ctx.offsets.commit_offset("client", "GroupB", TOPIC, 0, 299)
        cleanup = broker.store.cleanup_service
        usage = [0.95]  # a full disk
        monkeypatch.setattr(cleanup, "_disk_usage", lambda _path: usage[0])
        caplog.set_level(logging.WARNING, logger="aiorocketmq.broker.forced_clean")
        await cleanup.clean_once()
        first = broker.store.get_min_offset_in_queue(TOPIC, 0)
        assert first > 10, "files went before fileReservedTime"
        assert broker.forced_clean.lost == {("GroupA", TOPIC): first - 10}
        lines = [r.getMessage() for r in caplog.records if r.name.endswith("forced_clean")]
        assert lines == [
            f"forced cleaning deleted {first - 10} messages of {TOPIC} that group GroupA "
            "had not consumed"
        ]
        await cleanup.clean_once()  # nothing more goes: nothing counted twice
        assert broker.forced_clean.lost == {("GroupA", TOPIC): first - 10}
        text = (await broker.metrics.render()).decode()
        counted = [
            line
            for line in text.splitlines()
            if line.startswith("aiorocketmq_forced_clean_lost_messages_total{")
        ]
        assert len(counted) == 1, text
        assert 'consumer_group="GroupA"' in counted[0] and f'topic="{TOPIC}"' in counted[0]
        assert counted[0].endswith(f"}} {float(first - 10)}")
        usage[0] = 0.5  # space is back: the broker shuts down healthy
        await cleanup.check_disk()
        assert broker.store.flags.writeable
