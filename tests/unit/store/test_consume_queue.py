"""ConsumeQueue: units, offsets, idempotent puts, pre-blank fill, reads that never cross a
file, tag filtering, offset by time, recovery and expiry; and the numpy read path
cross-checked against a plain ``struct`` codec (STYLE habit 3)."""

from __future__ import annotations

import struct
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.store.allocator import MappedFileAllocator
from aiorocketmq.store.consume_queue import (
    BLANK_UNIT,
    CQ_UNIT_DTYPE,
    ConsumeQueue,
    PutUnitStatus,
    tags_match,
)
from aiorocketmq.store.mapped_file import offset_to_file_name

UNIT = struct.Struct(">qiq")
PER_FILE = 5
FILE_SIZE = PER_FILE * 20


def new_queue(root: Path, file_size: int = FILE_SIZE, **kwargs: object) -> ConsumeQueue:
    return ConsumeQueue("TopicTest", 3, root, file_size, **kwargs)  # type: ignore[arg-type]


def fill(queue: ConsumeQueue, count: int, *, first: int = 0, size: int = 100) -> None:
    """``count`` units of records laid back to back in the CommitLog."""
    for q in range(first, first + count):
        assert queue.put_blocking(q * size, size, q % 3, q, store_timestamp=1000 + q).name == "OK"


def struct_units(directory: Path) -> list[tuple[int, int, int]]:
    """Every unit of every file, decoded with plain struct (the reference codec)."""
    units = []
    for path in sorted(directory.iterdir()):
        data = path.read_bytes()
        units.extend(UNIT.unpack_from(data, pos) for pos in range(0, len(data), 20))
    return units


@pytest.fixture
async def executor() -> AsyncIterator[BlockingExecutor]:
    pool = BlockingExecutor("test-cq", 2)
    yield pool
    await pool.shutdown()


def test_dtype_is_the_20_byte_big_endian_unit() -> None:
    assert CQ_UNIT_DTYPE.itemsize == 20
    raw = UNIT.pack(-2, 7, -5) + UNIT.pack(2**40, 2**31 - 1, 2**62)
    arr = np.frombuffer(raw, dtype=CQ_UNIT_DTYPE)
    assert arr.tolist() == [(-2, 7, -5), (2**40, 2**31 - 1, 2**62)]
    assert UNIT.pack(0, 0x7FFFFFFF, 0) == BLANK_UNIT


def test_path_size_and_offsets(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="multiple of 20"):
        new_queue(tmp_path, 99)
    queue = new_queue(tmp_path)
    assert queue.queue.directory == tmp_path / "TopicTest" / "3"
    assert (queue.min_offset, queue.max_offset, queue.max_physic_offset) == (0, 0, -1)
    fill(queue, 7)
    assert (queue.min_offset, queue.max_offset, queue.message_total) == (0, 7, 7)
    assert [p.name for p in sorted(queue.queue.directory.iterdir())] == [
        offset_to_file_name(0),
        offset_to_file_name(FILE_SIZE),
    ]
    assert queue.roll_next_file(7) == 10 and queue.roll_next_file(5) == 10
    assert queue.get_unit(6) == (600, 100, 0) and queue.get_unit(7) is None
    queue.queue.shutdown()


def test_redispatch_is_idempotent(tmp_path: Path) -> None:
    queue = new_queue(tmp_path)
    fill(queue, 3)
    assert queue.put(100, 100, 9, 1) is PutUnitStatus.DUPLICATE, "ends below max physic offset"
    assert queue.put(1000, 100, 9, 1) is PutUnitStatus.DUPLICATE, "position already written"
    assert queue.max_offset == 3 and queue.get_unit(1) == (100, 100, 1)
    queue.queue.shutdown()


def test_gap_is_written_anyway_as_rocketmq_does(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    queue = new_queue(tmp_path)
    fill(queue, 2)
    assert queue.put_blocking(5000, 100, 0, 4) is PutUnitStatus.OK
    assert "[BUG] logic queue order" in caplog.text
    assert queue.get_unit(2) == (5000, 100, 0), "lands at the write position"
    queue.queue.shutdown()


def test_pre_blank_fill_when_a_queue_starts_mid_stream(tmp_path: Path) -> None:
    queue = new_queue(tmp_path)
    assert queue.put_blocking(9000, 50, 7, 7) is PutUnitStatus.OK
    first_file = FILE_SIZE  # queue offset 7 is in the second file's range (5..9)
    assert queue.queue.first_file.file_from_offset == first_file  # type: ignore[union-attr]
    assert queue.min_logic_offset == 7 * 20 and queue.min_offset == 7 and queue.max_offset == 8
    assert struct_units(queue.queue.directory)[:3] == [(0, 0x7FFFFFFF, 0)] * 2 + [(9000, 50, 7)]
    assert queue.get_units(6) is None, "below the minimum"
    assert queue.queue.flushed_where == 7 * 20
    queue.queue.shutdown()


def test_get_units_stays_in_one_file_and_is_read_only(tmp_path: Path) -> None:
    queue = new_queue(tmp_path)
    fill(queue, 8)
    with queue.get_units(3) as units:  # type: ignore[union-attr]
        assert units.first_queue_offset == 3 and len(units) == 2, "3 and 4; 5 is the next file"
        assert units.units["offset"].tolist() == [300, 400]
        with pytest.raises(ValueError):
            units.units["size"][0] = 1
    capped = queue.get_units(5, max_units=2)
    assert capped is not None and capped.units["offset"].tolist() == [500, 600]
    capped.release()
    assert queue.get_units(8) is None and queue.get_units(10**6) is None
    assert all(f.ref_count == 1 for f in queue.queue.files), "every slice released"
    queue.queue.shutdown()


def test_tags_match_is_vectorised_isin(tmp_path: Path) -> None:
    queue = new_queue(tmp_path, 20 * 10)
    for q, tag in enumerate([5, -3, 5, 2**40, 0, -(2**31)]):
        queue.put_blocking(q * 100, 100, tag, q)
    with queue.get_units(0) as sl:  # type: ignore[union-attr]
        assert tags_match(sl.units, {5, -(2**31)}).tolist() == [1, 0, 1, 0, 0, 1]
        assert tags_match(sl.units, [2**40]).tolist() == [0, 0, 0, 1, 0, 0]
        assert tags_match(sl.units, set()).all(), "no filter matches everything"
    queue.queue.shutdown()


def test_offset_by_time(tmp_path: Path) -> None:
    queue = new_queue(tmp_path, 20 * 20)
    times = {}
    for q in range(10):
        queue.put_blocking(q * 100, 100, 0, q)
        times[q * 100] = 1000 + 10 * q  # store times 1000, 1010, ... 1090
    queue.queue.files[0].store_timestamp = 0
    queue.queue.files[0].mtime_ms = 2000

    def store_time(offset: int, size: int) -> int:
        return times.get(offset, -1)

    assert queue.offset_by_time(1030, store_time, 0) == 3, "exact hit"
    assert queue.offset_by_time(1034, store_time, 0) == 3, "nearer earlier"
    assert queue.offset_by_time(1036, store_time, 0) == 4, "nearer later"
    assert queue.offset_by_time(1035, store_time, 0) == 3, "tie: the earlier"
    assert queue.offset_by_time(1, store_time, 0) == 0, "before everything"
    assert queue.offset_by_time(5000, store_time, 0) == 9, "after everything"
    assert queue.offset_by_time(1000, store_time, 450) == 5, "below the min offset: too early"
    assert queue.offset_by_time(1030, lambda o, s: -1, 0) == 0, "unreadable store time"
    queue.queue.shutdown()


def test_last_offset(tmp_path: Path) -> None:
    queue = new_queue(tmp_path)
    assert queue.last_offset() == -1
    fill(queue, 7)
    assert queue.last_offset() == 700
    queue.queue.shutdown()


def test_recover_finds_the_last_valid_unit(tmp_path: Path) -> None:
    queue = new_queue(tmp_path)
    fill(queue, 12)  # files at 0, 100, 200 (units 10, 11 in the third)
    directory = queue.queue.directory
    queue.queue.shutdown()
    again = new_queue(tmp_path)
    again.queue.load_blocking()
    assert again.max_offset == 15, "loaded files read as full"
    assert again.recover_blocking() == 12 * 20
    assert again.max_offset == 12 and again.max_physic_offset == 1200
    # A torn last unit (size 0) and a stray all-zero file after it.
    again.queue.last_file.buffer[20 + 8 : 20 + 12] = bytes(4)  # type: ignore[union-attr]
    again.queue.shutdown()
    (directory / offset_to_file_name(3 * FILE_SIZE)).write_bytes(bytes(FILE_SIZE))
    third = new_queue(tmp_path)
    third.queue.load_blocking()
    assert third.recover_blocking() == 11 * 20
    assert third.max_physic_offset == 1100 and len(third.queue) == 3
    assert not (directory / offset_to_file_name(3 * FILE_SIZE)).exists()
    third.queue.shutdown()


def test_truncate_dirty_logic_files(tmp_path: Path) -> None:
    queue = new_queue(tmp_path)
    fill(queue, 12)
    queue.truncate_dirty_logic_files_blocking(1050)  # units pointing at >= 1050 go
    assert queue.max_offset == 11 and queue.max_physic_offset == 1100
    queue.truncate_dirty_logic_files_blocking(1000)  # the whole third file goes
    assert queue.max_offset == 10 and len(queue.queue) == 2
    queue.truncate_dirty_logic_files_blocking(250)
    assert queue.max_offset == 3 and queue.max_physic_offset == 300 and len(queue.queue) == 1
    queue.queue.shutdown()


async def test_expiry_and_min_offset(tmp_path: Path, executor: BlockingExecutor) -> None:
    queue = new_queue(tmp_path)
    fill(queue, 12)
    expired = queue.pick_expired(min_physical_offset=650)
    assert [f.file_from_offset for f in expired] == [0], "file 1's last unit (900) is kept"
    assert queue.min_offset == 7, "first unit at or past 650"
    queue.correct_min_offset(10**9)
    assert queue.min_offset == 7, "no unit qualifies: unchanged"
    assert not expired[0].available
    queue.queue.shutdown()


async def test_need_file_then_allocate(tmp_path: Path, executor: BlockingExecutor) -> None:
    allocator = MappedFileAllocator(executor)
    await allocator.start()
    queue = new_queue(tmp_path, allocator=allocator)
    for q in range(7):
        status = queue.put(q * 10, 10, 0, q)
        if status is PutUnitStatus.NEED_FILE:
            await queue.allocate_file(q)
            status = queue.put(q * 10, 10, 0, q)
        assert status is PutUnitStatus.OK
    assert allocator.created == 2 and queue.max_offset == 7
    assert await queue.flush(executor, 0) is False
    await allocator.shutdown()
    queue.queue.shutdown()


def test_destroy(tmp_path: Path) -> None:
    queue = new_queue(tmp_path)
    fill(queue, 6)
    queue.destroy_blocking()
    assert not queue.queue.directory.exists()
    assert (queue.max_offset, queue.max_physic_offset, queue.min_offset) == (0, -1, 0)


# -- the numpy path against the struct codec --------------------------------------------

units_strategy = st.lists(
    st.tuples(
        st.integers(1, 5000),  # gap before the record (physical offsets only grow)
        st.integers(1, 2**31 - 1),  # size
        st.integers(-(2**63), 2**63 - 1),  # tagsCode, any long
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(
    units=units_strategy,
    first_queue_offset=st.integers(0, 12),
    per_file=st.integers(1, 7),
    tag_pick=st.lists(st.integers(0, 39), max_size=4),
)
def test_numpy_reads_agree_with_struct(
    units: list[tuple[int, int, int]], first_queue_offset: int, per_file: int, tag_pick: list[int]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        queue = ConsumeQueue("T", 0, root, per_file * 20)
        expected: list[tuple[int, int, int]] = []
        physical = 0
        for q, (gap, size, tag) in enumerate(units, start=first_queue_offset):
            physical += gap
            assert queue.put_blocking(physical, size, tag, q) is PutUnitStatus.OK
            expected.append((physical, size, tag))
            physical += size
        # The struct reference: blanks before the first offset within its file, then ours.
        on_disk = struct_units(queue.queue.directory)
        blanks = first_queue_offset % per_file
        assert on_disk[:blanks] == [(0, 0x7FFFFFFF, 0)] * blanks
        assert on_disk[blanks : blanks + len(expected)] == expected
        assert queue.min_offset == first_queue_offset
        assert queue.max_offset == first_queue_offset + len(expected)
        # numpy slices, walked file by file, give back exactly the same units.
        seen: list[tuple[int, int, int]] = []
        q = first_queue_offset
        while (sl := queue.get_units(q)) is not None:
            with sl:
                seen.extend(tuple(int(v) for v in row) for row in sl.units.tolist())
                q += len(sl)
        assert seen == expected
        # Vectorised tag filtering equals the scalar filter.
        codes = {units[i % len(units)][2] for i in tag_pick}
        q = first_queue_offset
        matched: list[bool] = []
        while (sl := queue.get_units(q)) is not None:
            with sl:
                matched.extend(tags_match(sl.units, codes).tolist())
                q += len(sl)
        assert matched == [not codes or tag in codes for _, _, tag in expected]
        queue.queue.shutdown()


def test_truncate_never_turns_zeros_into_a_unit(tmp_path: Path) -> None:
    # An empty last file (created, then the crash came before its first unit).
    queue = new_queue(tmp_path)
    fill(queue, 5)  # exactly one full file
    queue.queue.create_last_file_blocking()
    queue.truncate_dirty_logic_files_blocking(10_000)
    assert queue.max_offset == 5 and queue.max_physic_offset == 500
    assert queue.queue.last_file.wrote_position == 0  # type: ignore[union-attr]
    queue.truncate_dirty_logic_files_blocking(0)
    assert len(queue.queue) == 0 and queue.max_physic_offset == -1
    queue.queue.shutdown()
