"""Builders the MessageStore tests share: messages, started stores, readers of results.

Owns: a ``MessageExtBrokerInner`` builder with test hosts, ``open_store`` (load +
start on small files in a temp dir), and helpers that read a ``GetMessageResult``
back into decoded records.

Must not: hide what a test checks: every builder returns real objects on real files.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from aiorocketmq.common.clock import ManualClock
from aiorocketmq.common.message_codec import RecordView, decode_record
from aiorocketmq.common.properties import properties_to_string
from aiorocketmq.store.commit_log import CommitLog
from aiorocketmq.store.config import MessageStoreConfig
from aiorocketmq.store.inner_message import MessageExtBrokerInner
from aiorocketmq.store.message_store import MessageStore
from aiorocketmq.store.results import GetMessageResult, PutMessageResult
from tests.unit.store.helpers import BORN_HOST, STORE_HOST, small_config

TOPIC = "TopicTest"
BORN_TS = 1_700_000_000_000
T = TypeVar("T")


def inner(
    body: bytes = b"hello",
    *,
    topic: str = TOPIC,
    queue_id: int = 0,
    sys_flag: int = 0,
    **properties: str,
) -> MessageExtBrokerInner:
    """A message to put; keyword arguments become properties (``TAGS="a"``...)."""
    return MessageExtBrokerInner(
        topic=topic,
        queue_id=queue_id,
        body=body,
        properties=dict(properties),
        properties_string=properties_to_string(properties),
        sys_flag=sys_flag,
        born_timestamp=BORN_TS,
        born_host=BORN_HOST,
        store_host=STORE_HOST,
    )


def store_config(root: Path, **overrides: Any) -> MessageStoreConfig:
    """``small_config`` with intervals short enough for tests and larger index files."""
    values: dict[str, Any] = {
        "max_hash_slot_num": 64,
        "max_index_num": 400,
        "flush_interval_commit_log": 20,
        "flush_interval_consume_queue": 20,
    }
    values.update(overrides)
    return small_config(root, **values)


async def open_store(config: MessageStoreConfig, **kwargs: Any) -> MessageStore:
    """A loaded and started store."""
    store = MessageStore(config, **kwargs)
    try:
        await store.load()
        await store.start()
    except BaseException:
        await store.shutdown()
        raise
    return store


async def put_ok(store: MessageStore, msg: MessageExtBrokerInner) -> PutMessageResult:
    """Put and assert it was stored."""
    result = await store.put_message(msg)
    assert result.ok, result
    return result


async def dispatched(store: MessageStore) -> None:
    """Wait until the dispatcher has caught up with the CommitLog."""
    assert await store.dispatcher.wait_dispatched(store.max_phy_offset)


def records(result: GetMessageResult) -> list[RecordView]:
    """Decode the held records (valid until the result is released)."""
    return [decode_record(view) for view in result.messages]


def bodies(result: GetMessageResult) -> list[bytes]:
    """The returned bodies, copied."""
    return [record.body for record in records(result)]


def commit_log_bytes(log: CommitLog) -> bytes:
    """Every byte the CommitLog holds, from its first file to its max offset."""
    end = log.max_offset
    out = bytearray()
    for mapped in log.queue.files:
        out += bytes(mapped.buffer[: min(mapped.file_size, end - mapped.file_from_offset)])
    return bytes(out)


async def put_watched(
    root: Path,
    items: Sequence[T],
    put: Callable[[MessageStore, T], Awaitable[PutMessageResult]],
    watched: str,
    **config: Any,
) -> tuple[list[PutMessageResult], bytes, list[bool]]:
    """Put ``items`` one by one into a new store on a manual clock (3 ms apart).

    Returns the results, the CommitLog's bytes, and per item whether the CommitLog's
    method ``watched`` took it (answered something but None). The next file is ready
    before each put, as the allocator normally has it: a put that finds it not ready
    takes the general way, which waits for it.
    """
    clock = ManualClock()
    store = await open_store(store_config(root, **config), clock=clock)
    took: list[bool] = []
    real = getattr(store.commit_log, watched)

    def watch(*args: Any) -> Any:
        answer = real(*args)
        took[-1] = answer is not None
        return answer

    setattr(store.commit_log, watched, watch)
    results = []
    try:
        for item in items:
            await store.commit_log.allocator.idle()
            took.append(False)
            results.append(await put(store, item))
            clock.advance(3)
        return results, commit_log_bytes(store.commit_log), took
    finally:
        await store.shutdown()
