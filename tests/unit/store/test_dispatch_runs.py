"""Dispatch by runs: ``ConsumeQueue.put_run`` against unit-by-unit puts, and the
chunk's arrival notices against notices record by record."""

from __future__ import annotations

import struct
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.common.constants import MessageSysFlag
from aiorocketmq.common.message import Message
from aiorocketmq.common.message_codec import encode_batch
from aiorocketmq.common.tag_hash import tags_code
from aiorocketmq.store.consume_queue import ConsumeQueue, PutUnitStatus
from aiorocketmq.store.dispatch_request import DispatchRequest, pack_units, py_pack_units
from aiorocketmq.store.dispatch_runs import (
    group_runs,
    newest_arrivals,
    py_group_runs,
    py_newest_arrivals,
)
from aiorocketmq.store.inner_message import MessageExtBatch
from aiorocketmq.store.mapped_file import MappedFile
from tests.support.kernels import IMPLEMENTATIONS, kernel_or_skip, use_dispatch_runs_kernel
from tests.unit.store.helpers import BORN_HOST, STORE_HOST
from tests.unit.store.store_support import TOPIC, dispatched, open_store, store_config


def request(
    physical: int, size: int, tag: int, queue_offset: int, stamp: int, queue_id: int = 0
) -> DispatchRequest:
    return DispatchRequest("T", queue_id, physical, size, tag, stamp, queue_offset)


# Runs that mostly continue the queue, with the cases that must leave the fast way:
# a duplicate (an old physical offset), a queue-offset gap or step back, a zero
# store timestamp, a run across files, a queue that starts mid-stream.
run_strategy = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from(["next", "next", "next", "duplicate", "gap", "back", "no-stamp"]),
            st.integers(1, 300),  # size
            st.integers(-(2**63), 2**63 - 1),  # tagsCode
        ),
        min_size=1,
        max_size=12,
    ),
    min_size=1,
    max_size=6,
)


def build_runs(
    runs: list[list[tuple[str, int, int]]], first_queue_offset: int
) -> list[list[DispatchRequest]]:
    physical, queue_offset, stamp = 1000, first_queue_offset, 5
    built = []
    for run in runs:
        out = []
        for kind, size, tag in run:
            stamp += 1
            if kind == "duplicate":
                out.append(request(max(physical - 2 * size, 0), size, tag, queue_offset, stamp))
                continue
            queue_offset += {"gap": 2, "back": -1}.get(kind, 0)
            out.append(
                request(
                    physical, size, tag, max(queue_offset, 0), 0 if kind == "no-stamp" else stamp
                )
            )
            physical += size
            queue_offset = max(queue_offset, 0) + 1
        built.append(out)
    return built


def put_each(queue: ConsumeQueue, run: list[DispatchRequest]) -> tuple[int, list[int]]:
    """The reference: ``put`` unit by unit, a missing file created in between."""
    last_ok, failed = -1, []
    for i, r in enumerate(run):
        args = (r.commit_log_offset, r.msg_size, r.tags_code, r.consume_queue_offset)
        status = queue.put(*args, r.store_timestamp)
        if status is PutUnitStatus.NEED_FILE:
            queue.queue.create_last_file_blocking(r.consume_queue_offset * 20)
            status = queue.put(*args, r.store_timestamp)
        last_ok = i if status is PutUnitStatus.OK else last_ok
        if status is PutUnitStatus.ERROR:
            failed.append(i)
    return last_ok, failed


def put_as_run(queue: ConsumeQueue, run: list[DispatchRequest]) -> tuple[int, list[int]]:
    """``put_run``, a missing file created where it stops, then the rest of the run."""
    last_ok, failed, start = -1, [], 0
    while start < len(run):
        result = queue.put_run(run[start:])
        last_ok = start + result.last_ok if result.last_ok >= 0 else last_ok
        failed.extend(start + i for i in result.failed)
        start += result.done
        if start < len(run):
            queue.queue.create_last_file_blocking(run[start].consume_queue_offset * 20)
    return last_ok, failed


def queue_state(queue: ConsumeQueue) -> tuple[object, ...]:
    files = [(f.file_from_offset, f.wrote_position, f.store_timestamp) for f in queue.queue.files]
    data = {p.name: p.read_bytes() for p in sorted(queue.queue.directory.iterdir())}
    return files, data, queue.max_physic_offset, queue.min_logic_offset, queue.queue.flushed_where


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@settings(max_examples=150, deadline=None)
@given(runs=run_strategy, first_queue_offset=st.integers(0, 12), per_file=st.integers(1, 9))
def test_put_run_writes_what_unit_by_unit_puts_write(
    implementation: str,
    runs: list[list[tuple[str, int, int]]],
    first_queue_offset: int,
    per_file: int,
) -> None:
    with pytest.MonkeyPatch.context() as patch:
        use_dispatch_runs_kernel(implementation, patch)
        _put_run_against_puts(runs, first_queue_offset, per_file)


def _put_run_against_puts(
    runs: list[list[tuple[str, int, int]]], first_queue_offset: int, per_file: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        each = ConsumeQueue("T", 0, Path(tmp) / "each", per_file * 20)
        as_run = ConsumeQueue("T", 0, Path(tmp) / "run", per_file * 20)
        try:
            for run in build_runs(runs, first_queue_offset):
                assert put_as_run(as_run, run) == put_each(each, run)
                assert queue_state(as_run)[1:] == queue_state(each)[1:]
                assert queue_state(as_run)[0] == queue_state(each)[0]
        finally:
            each.queue.shutdown()
            as_run.queue.shutdown()


def test_a_run_that_continues_the_queue_is_one_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = ConsumeQueue("T", 0, tmp_path, 100 * 20)
    queue.queue.create_last_file_blocking(0)
    mapped = queue.queue.files[0]
    appends: list[int] = []
    append = MappedFile.append

    def spy(self: MappedFile, data: bytes) -> int:
        appends.append(len(data))
        return append(self, data)

    monkeypatch.setattr(MappedFile, "append", spy)
    result = queue.put_run([request(i * 10, 10, 7, i, 100 + i) for i in range(64)])
    assert (result.done, result.last_ok, result.failed) == (64, 63, [])
    assert appends == [64 * 20] and queue.max_offset == 64 and queue.get_unit(63) == (630, 10, 7)
    assert queue.max_physic_offset == 640 and mapped.store_timestamp == 163
    queue.queue.shutdown()


held_strategy = st.lists(
    st.tuples(st.integers(0, 3), st.integers(0, 30), st.none() | st.frozensets(st.integers(0, 3))),
    max_size=8,
)


@settings(max_examples=200, deadline=None)
@given(
    records=st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(0, 30)), max_size=30
    ),
    held=held_strategy,
)
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_newest_per_queue_and_tag_wakes_the_pulls_every_record_would(
    implementation: str,
    records: list[tuple[int, int, int]],
    held: list[tuple[int, int, frozenset[int] | None]],
) -> None:
    """A held pull (queue, pull offset, tag codes) wakes for a notice of its queue with
    max_offset > its offset and a tagsCode it takes (``HeldPull.matches``)."""
    requests = [
        request(i, 1, tag, offset, 1, queue_id) for i, (queue_id, tag, offset) in enumerate(records)
    ]

    def woken(notices: list[DispatchRequest]) -> set[int]:
        return {
            i
            for i, (queue_id, pull_from, codes) in enumerate(held)
            for r in notices
            if r.queue_id == queue_id and r.consume_queue_offset + 1 > pull_from
            and (codes is None or r.tags_code in codes)
        }  # fmt: skip

    with pytest.MonkeyPatch.context() as patch:
        use_dispatch_runs_kernel(implementation, patch)
        newest = list(newest_arrivals(requests))
    assert woken(newest) == woken(requests)
    assert len({(r.queue_id, r.tags_code) for r in newest}) == len(newest)


async def test_a_batch_is_announced_once_per_queue_and_tag(tmp_path: Path) -> None:
    store = await open_store(store_config(tmp_path))
    heard: list[tuple[object, ...]] = []
    store.add_arrival_listener(lambda *args: heard.append(args[:4]))
    tags = ["TagA", "TagB", "TagA", "TagA", "TagB", "TagC"]
    messages = [Message(TOPIC, b"x", properties={"TAGS": t}) for t in tags]
    batch = MessageExtBatch(
        TOPIC,
        1,
        encode_batch(messages),
        born_timestamp=1,
        born_host=BORN_HOST,
        store_host=STORE_HOST,
    )
    try:
        assert (await store.put_messages(batch)).ok
        await dispatched(store)
        queue = store.cq_table.get(TOPIC, 1)
        assert queue is not None and queue.max_offset == 6
        assert [queue.get_unit(q)[2] for q in range(6)] == [tags_code(t) for t in tags]  # type: ignore[index]
    finally:
        await store.shutdown()
    assert sorted(heard, key=lambda h: h[2]) == [
        (TOPIC, 1, 4, tags_code("TagA")),
        (TOPIC, 1, 5, tags_code("TagB")),
        (TOPIC, 1, 6, tags_code("TagC")),
    ]
    assert store.stats.dispatched_messages == 6


_BIG = 2**63 - 1
chunk_strategy = st.lists(
    st.tuples(
        st.sampled_from(["T", "T", "U", "T\u00e9"]),  # topic
        st.sampled_from([0, 0, 1, 300, 300]),  # queue id (300: not a cached small int)
        st.sampled_from([0, 0, 0, MessageSysFlag.TRANSACTION_PREPARED_TYPE, 12, 8]),
        st.integers(-3, 3),  # queue offset step from the one before
        st.integers(-2, 400),  # size (a step back in the CommitLog at <= 0)
        st.sampled_from([0, 7, -1, -(2**63), _BIG]),  # tagsCode
    ),
    max_size=40,
)


Row = tuple[str, int, int, int, int, int]


def build_chunk(rows: list[Row], base: int) -> list[DispatchRequest]:
    chunk, physical, queue_offset = [], base, 5
    for topic, queue_id, sys_flag, step, size, tag in rows:
        queue_offset += step
        args = (topic, queue_id, physical, size, tag, 1, queue_offset)
        chunk.append(DispatchRequest(*args, sys_flag=sys_flag))
        physical += size
    return chunk


def packed(
    pack: Callable[[list[DispatchRequest]], bytes | None], run: list[DispatchRequest]
) -> object:
    """What ``pack`` answers for ``run``: the bytes, None, or the struct.error it raised."""
    try:
        return pack(run)
    except struct.error:
        return struct.error


@settings(max_examples=300, deadline=None)
@given(rows=chunk_strategy, base=st.sampled_from([0, 1000, _BIG - 2000, -(2**63)]))
def test_the_kernels_answer_as_the_references(rows: list[Row], base: int) -> None:
    """Grouping, notices and packing: the C kernels give what the references give,
    object for object (offsets near the int64 edges send the packing back to Python)."""
    kernel_or_skip("aiorocketmq.store._dispatch_kernels")
    chunk = build_chunk(rows, base)
    assert group_runs(chunk) == py_group_runs(chunk)
    assert [list(map(id, run)) for run in group_runs(chunk).values()] == [
        list(map(id, run)) for run in py_group_runs(chunk).values()
    ]
    assert list(map(id, newest_arrivals(chunk))) == list(map(id, py_newest_arrivals(chunk)))
    for run in py_group_runs(chunk).values():
        assert packed(pack_units, run) == packed(py_pack_units, run)


def test_a_request_the_kernels_cannot_read_is_left_to_the_references() -> None:
    class Other(DispatchRequest):
        __slots__ = ()

    kernel_or_skip("aiorocketmq.store._dispatch_kernels")
    chunk = [DispatchRequest("T", 0, 0, 10, 1, 1, 0), Other("T", 0, 10, 10, 1, 1, 1)]
    assert pack_units(chunk) == py_pack_units(chunk) is not None
    assert list(group_runs(chunk).values()) == [chunk]
    assert list(newest_arrivals(chunk)) == [chunk[1]]
