"""The vectorised pull scan (``get_runs.scan_units``) answers every pull as the
per-unit scan does: status, next offset, the records and their queue offsets, the
slave suggestion; across tag filters, batch limits in memory and on disk, and pulls
that start anywhere in a queue of records of mixed sizes."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiorocketmq.common.tag_hash import tags_code
from aiorocketmq.store.consume_queue import CQ_UNIT_DTYPE
from aiorocketmq.store.get_runs import py_scan_cut, scan_units
from aiorocketmq.store.message_store import MessageStore
from aiorocketmq.store.results import GetMessageResult, RunRecords
from tests.support.kernels import IMPLEMENTATIONS, kernel_or_skip, use_scan_kernel
from tests.unit.store.store_support import (
    TOPIC,
    dispatched,
    inner,
    open_store,
    put_ok,
    store_config,
)

TAGS = ("a", "b", "c")
COUNT = 120


@pytest.fixture(autouse=True, params=IMPLEMENTATIONS)
def _scan_kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here runs on the C cut and on the numpy reference."""
    use_scan_kernel(request.param, monkeypatch)


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A store with COUNT records of random sizes and tags in queue 0 (one file)."""
    import asyncio

    root: Path = tmp_path_factory.mktemp("runs")
    rng = random.Random(19)
    loop = asyncio.new_event_loop()

    async def build() -> MessageStore:
        store = await open_store(store_config(root, mapped_file_size_commit_log=4 << 20))
        for i in range(COUNT):
            body = bytes(rng.randrange(1, 3000))
            await put_ok(store, inner(body, TAGS=TAGS[rng.randrange(3)], KEYS=f"k{i}"))
        await dispatched(store)
        return store

    store = loop.run_until_complete(build())
    yield store
    loop.run_until_complete(store.shutdown())
    loop.close()


def _view(result: GetMessageResult) -> tuple[Any, ...]:
    with result:
        return (
            result.status, result.next_begin_offset, result.message_queue_offsets,
            result.body(), result.suggest_pulling_from_slave, result.buffer_total_size,
        )  # fmt: skip


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    offset=st.integers(0, COUNT - 1),
    max_msgs=st.integers(1, 40),
    tags=st.none() | st.sets(st.sampled_from(TAGS), min_size=1),
    memory=st.tuples(st.integers(1, 60_000), st.integers(1, 40)),
    disk=st.tuples(st.integers(1, 60_000), st.integers(1, 40)),
    threshold=st.integers(0, 200_000),
)
def test_the_vectorised_scan_answers_as_the_per_unit_scan(
    filled: MessageStore,
    offset: int,
    max_msgs: int,
    tags: set[str] | None,
    memory: tuple[int, int],
    disk: tuple[int, int],
    threshold: int,
) -> None:
    getter = filled._getter
    getter.memory_threshold = threshold
    getter._memory_limits, getter._disk_limits = memory, disk
    codes = None if tags is None else frozenset(tags_code(t) for t in tags)
    queue = filled.cq_table.get(TOPIC, 0)
    assert queue is not None
    units = queue.get_units(offset, 800)
    assert units is not None
    with units:
        fast = scan_units(
            units, max_msgs, codes, filled.commit_log, memory_threshold=threshold,
            memory_limits=memory, disk_limits=disk,
        )  # fmt: skip
        slow = getter._scan(units, max_msgs, codes, None)
    assert fast is not None  # one file, all readable: the vectorised scan answers
    assert _view(fast) == _view(slow)


@pytest.mark.parametrize("extra", [-1, 0, 1])
def test_a_byte_limit_met_exactly_takes_the_record_that_meets_it(
    filled: MessageStore, extra: int
) -> None:
    """``total + size > max_bytes`` is full: a record that brings the total to the limit
    exactly is still taken (the boundary random sizes rarely hit)."""
    queue = filled.cq_table.get(TOPIC, 0)
    assert queue is not None
    units = queue.get_units(0, 800)
    assert units is not None
    with units:
        limit = int(units.units["size"][:3].sum()) + extra
        limits = (limit, 100)
        fast = scan_units(
            units, 32, None, filled.commit_log, memory_threshold=1 << 40,
            memory_limits=limits, disk_limits=limits,
        )  # fmt: skip
        filled._getter.memory_threshold = 1 << 40
        filled._getter._memory_limits = filled._getter._disk_limits = limits
        slow = filled._getter._scan(units, 32, None, None)
    assert fast is not None
    assert _view(fast) == _view(slow)
    assert fast.message_count == (2 if extra < 0 else 3)


def test_tag_gaps_make_one_wire_view_per_back_to_back_run(filled: MessageStore) -> None:
    """One held slice; its wire views skip the records the tags left out, and join to
    exactly the chosen records."""
    queue = filled.cq_table.get(TOPIC, 0)
    assert queue is not None
    units = queue.get_units(0, 800)
    assert units is not None
    code = tags_code("a")
    with units:
        chosen = [i for i, tags in enumerate(units.units["tags"].tolist()) if tags == code]
        result = scan_units(
            units, 40, frozenset({code}), filled.commit_log, memory_threshold=1 << 40,
            memory_limits=(1 << 30, 40), disk_limits=(1 << 30, 40),
        )  # fmt: skip
    assert result is not None
    with result:
        taken = chosen[:40]
        runs = sum(1 for j, i in enumerate(taken) if j == 0 or taken[j - 1] != i - 1)
        views = result.wire_views()
        assert len(result.buffers) == 1 and len(views) == runs > 1
        assert b"".join(views) == result.body() and result.message_queue_offsets == taken


def test_a_runs_records_are_made_when_read_and_unreadable_after_release(
    filled: MessageStore,
) -> None:
    """A pull reply writes the run and never reads its records one by one; a reader
    (POP, timers) gets the same views the per-unit scan holds, until ``release()``."""
    limits = (1 << 30, 40)
    filled._getter._memory_limits = filled._getter._disk_limits = limits
    queue = filled.cq_table.get(TOPIC, 0)
    assert queue is not None

    def scans() -> tuple[GetMessageResult | None, GetMessageResult]:
        units = queue.get_units(3, 800)
        assert units is not None
        with units:
            fast = scan_units(
                units, 20, None, filled.commit_log, memory_threshold=1 << 40,
                memory_limits=limits, disk_limits=limits,
            )  # fmt: skip
            return fast, filled._getter._scan(units, 20, None, None)

    fast, slow = scans()
    assert fast is not None
    records = fast.messages
    assert isinstance(records, RunRecords) and len(records) == 20
    with slow:
        expected = [bytes(view) for view in slow.messages]
    assert bytes(records[0]) == expected[0] and [bytes(v) for v in records[5:7]] == expected[5:7]
    assert [bytes(view) for view in records] == expected
    read = records[19]
    fast.release()
    with pytest.raises(ValueError):
        bytes(read)
    unread, slow = scans()  # released before anyone read its records
    slow.release()
    assert unread is not None
    unread.release()
    with pytest.raises(ValueError):
        list(unread.messages)


_UNITS = st.lists(
    st.tuples(st.integers(0, 3), st.integers(-1, 3000), st.integers(-2, 3)),
    min_size=0, max_size=60,
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    gaps_sizes_tags=_UNITS,
    first=st.integers(0, 2**40),
    codes=st.none() | st.frozensets(st.integers(-2, 3), max_size=3),
    max_msgs=st.integers(1, 40),
    threshold=st.integers(0, 40_000),
    limits=st.tuples(*[st.integers(1, 60_000), st.integers(1, 40)] * 2),
)
def test_the_kernel_cuts_as_the_reference(
    gaps_sizes_tags: list[tuple[int, int, int]],
    first: int,
    codes: frozenset[int] | None,
    max_msgs: int,
    threshold: int,
    limits: tuple[int, int, int, int],
) -> None:
    """Any units (gaps between records, sizes <= 0, tags in and out of the set, byte
    and count limits in memory and on disk): the same cut, records and segments."""
    kernel = kernel_or_skip("aiorocketmq.store._scan_kernels")
    array = np.zeros(len(gaps_sizes_tags), dtype=CQ_UNIT_DTYPE)
    offset = 1000
    for i, (gap, size, tag) in enumerate(gaps_sizes_tags):
        offset += gap * 7
        array[i] = (offset, size, tag)
        offset += max(size, 0)
    max_offset = offset + 100
    args = (first, codes or None, max_msgs, max_offset, threshold, *limits)
    assert kernel.scan_units(array, *args) == py_scan_cut(array, *args)
