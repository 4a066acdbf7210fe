"""MessageStore.clean_unused_topic: DELETE_TOPIC_IN_BROKER's ``cleanUnusedTopic``."""

from __future__ import annotations

from pathlib import Path

from aiorocketmq.common.constants import LMQ_PREFIX, RMQ_SYS_SCHEDULE_TOPIC
from aiorocketmq.store.message_store import MessageStore
from tests.unit.store.store_support import (
    TOPIC,
    dispatched,
    inner,
    open_store,
    put_ok,
    store_config,
)


async def test_unconfigured_topics_lose_their_queues_and_offsets(tmp_path: Path) -> None:
    store = await open_store(store_config(tmp_path))
    try:
        for queue_id in (0, 1):
            for _ in range(3):
                await put_ok(store, inner(topic=TOPIC, queue_id=queue_id))
        await put_ok(store, inner(topic="Kept"))
        await put_ok(store, inner(topic=f"{LMQ_PREFIX}lmq"))
        await put_ok(store, inner(b"d", DELAY="1"))
        await dispatched(store)
        assert store.get_max_offset_in_queue(TOPIC, 1) == 3
        cq_dir = store.config.consume_queue_dir

        assert await store.clean_unused_topic({"Kept"}) == 1

        assert store.cq_table.get(TOPIC, 0) is None and store.cq_table.get(TOPIC, 1) is None
        assert not (cq_dir / TOPIC / "0").exists() and not (cq_dir / TOPIC / "1").exists()
        assert store.get_max_offset_in_queue(TOPIC, 1) == 0
        assert store.commit_log.queue_offset(TOPIC, 1) == 0
        # kept: configured, schedule and LMQ topics
        assert store.get_max_offset_in_queue("Kept", 0) == 1
        assert store.cq_table.get(RMQ_SYS_SCHEDULE_TOPIC, 0) is not None
        assert store.cq_table.get(f"{LMQ_PREFIX}lmq", 0) is not None
        # a topic written again starts over at queue offset 0
        result = await put_ok(store, inner(topic=TOPIC, queue_id=1))
        assert result.queue_offset == 0
        await dispatched(store)
        assert store.get_max_offset_in_queue(TOPIC, 1) == 1
        assert await store.clean_unused_topic({"Kept", TOPIC}) == 0
    finally:
        await store.shutdown()


async def test_nothing_to_clean(tmp_path: Path) -> None:
    store: MessageStore = await open_store(store_config(tmp_path))
    try:
        assert await store.clean_unused_topic(set()) == 0
    finally:
        await store.shutdown()
