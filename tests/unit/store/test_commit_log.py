"""CommitLog: the append section (patching, queue offsets, the end-of-file rule, batches),
reads by physical offset, HA raw appends, faults, and flush."""

from __future__ import annotations

import errno
import struct
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiorocketmq.common.constants import BLANK_MAGIC_CODE, MessageSysFlag
from aiorocketmq.common.message_codec import decode_record, encode_record, scan_records
from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.store import commit_log_batch
from aiorocketmq.store.commit_log import AppendStatus, CommitLog, queue_key
from aiorocketmq.store.errors import StoreError
from tests.support.kernels import IMPLEMENTATIONS, kernel_or_skip, use_commit_log_kernel
from tests.unit.store.helpers import (
    SMALL_COMMIT_LOG,
    append,
    append_batch,
    make_record,
    record_of_size,
    small_config,
    started_commit_log,
)

T0 = 1_700_000_123_456
KEY = queue_key("TopicTest", 0)


@pytest.fixture
async def executor() -> AsyncIterator[BlockingExecutor]:
    pool = BlockingExecutor("test-commitlog", 2)
    yield pool
    await pool.shutdown()


@pytest.fixture
async def commit_log(tmp_path: Path, executor: BlockingExecutor) -> AsyncIterator[CommitLog]:
    log = await started_commit_log(small_config(tmp_path), executor)
    yield log
    await log.shutdown()


def test_queue_key_uses_a_hyphen() -> None:
    assert queue_key("TopicA", 3) == "TopicA-3"


async def test_append_patches_offsets_and_store_time(commit_log: CommitLog) -> None:
    first = commit_log.append(make_record(body=b"one"), KEY, T0)
    second = commit_log.append(make_record(body=b"two"), KEY, T0 + 1)
    other = commit_log.append(make_record(queue_id=1, body=b"x"), queue_key("TopicTest", 1), T0)
    assert (first.status, first.physical_offset, first.queue_offset) == (AppendStatus.PUT_OK, 0, 0)
    assert second.physical_offset == first.next_offset and second.queue_offset == 1
    assert other.queue_offset == 0, "each queue counts on its own"
    assert commit_log.topic_queue_table == {KEY: 2, queue_key("TopicTest", 1): 1}
    assert commit_log.max_offset == other.next_offset and commit_log.min_offset == 0
    with commit_log.read_record(second.physical_offset) as sel:  # type: ignore[union-attr]
        view = decode_record(sel.view, check_crc=True)
        assert (view.queue_offset, view.store_timestamp) == (1, T0 + 1)
        assert view.physical_offset == second.physical_offset == 103
        assert view.body == b"two" and view.total_size == second.wrote_bytes


@pytest.mark.parametrize(
    ("tran_type", "gets_offset"),
    [
        (MessageSysFlag.TRANSACTION_NOT_TYPE, True),
        (MessageSysFlag.TRANSACTION_COMMIT_TYPE, True),
        (MessageSysFlag.TRANSACTION_PREPARED_TYPE, False),
        (MessageSysFlag.TRANSACTION_ROLLBACK_TYPE, False),
    ],
)
async def test_transaction_types_and_queue_offsets(
    commit_log: CommitLog, tran_type: int, gets_offset: bool
) -> None:
    commit_log.set_queue_offset("TopicTest", 0, 41)
    result = commit_log.append(make_record(sys_flag=tran_type), KEY, T0)
    assert result.queue_offset == (41 if gets_offset else 0)
    assert commit_log.queue_offset("TopicTest", 0) == (42 if gets_offset else 41)
    with commit_log.read_record(result.physical_offset) as sel:  # type: ignore[union-attr]
        assert decode_record(sel.view).queue_offset == result.queue_offset


async def test_roll_writes_a_blank_record_and_continues_in_the_next_file(
    tmp_path: Path, commit_log: CommitLog
) -> None:
    size = 1000
    per_file = (SMALL_COMMIT_LOG - 8) // size  # 65 records leave 536 bytes: not enough
    results = [commit_log.append(record_of_size(size), KEY, T0)]
    await commit_log.allocator.idle()  # file 1 was prepared when file 0 was taken
    results += [commit_log.append(record_of_size(size), KEY, T0) for _ in range(per_file)]
    assert all(r.status is AppendStatus.PUT_OK for r in results)
    last_in_first = results[per_file - 1]
    assert last_in_first.next_offset == per_file * size
    rolled = results[per_file]
    assert rolled.physical_offset == SMALL_COMMIT_LOG and rolled.queue_offset == per_file
    first_file = (tmp_path / "commitlog" / "00000000000000000000").read_bytes()
    blank_at = per_file * size
    total, magic = struct.unpack_from(">ii", first_file, blank_at)
    assert (total, magic) == (SMALL_COMMIT_LOG - blank_at, BLANK_MAGIC_CODE)
    assert first_file[blank_at + 8 :] == bytes(SMALL_COMMIT_LOG - blank_at - 8), "only 8 bytes"
    assert commit_log.read_record(blank_at) is None, "a BLANK is not a message"
    assert commit_log.allocator.waited == 0, "the next file was ready: the roll did not wait"


async def test_a_record_leaving_exactly_eight_bytes_fits(commit_log: CommitLog) -> None:
    commit_log.append(record_of_size(SMALL_COMMIT_LOG - 8 - 1000), KEY, T0)
    fits = commit_log.append(record_of_size(1000), KEY, T0)
    assert fits.physical_offset == SMALL_COMMIT_LOG - 8 - 1000, "record + 8 == maxBlank fits"
    rolled = await append(commit_log, record_of_size(100), KEY, T0)
    assert rolled.physical_offset == SMALL_COMMIT_LOG, "8 bytes left: BLANK of 8, then roll"


async def test_need_file_then_allocate(tmp_path: Path, executor: BlockingExecutor) -> None:
    log = CommitLog(small_config(tmp_path), executor)
    await log.allocator.start()  # not log.start(): nothing prepared
    result = log.append(make_record(), KEY, T0)
    assert result.status is AppendStatus.NEED_FILE and log.queue_offset("TopicTest", 0) == 0
    await log.allocate_next_file()
    assert log.append(make_record(), KEY, T0).status is AppendStatus.PUT_OK
    await log.shutdown()


async def test_oversized_and_undersized_records(commit_log: CommitLog) -> None:
    too_big = commit_log.append(record_of_size(SMALL_COMMIT_LOG - 7), KEY, T0)
    assert too_big.status is AppendStatus.MESSAGE_SIZE_EXCEEDED
    assert commit_log.append(bytearray(50), KEY, T0).status is AppendStatus.UNKNOWN_ERROR
    largest = commit_log.append(record_of_size(SMALL_COMMIT_LOG - 8), KEY, T0)
    assert largest.status is AppendStatus.PUT_OK and largest.physical_offset == 0
    assert commit_log.max_offset == SMALL_COMMIT_LOG - 8, "the BLANK comes with the next append"
    assert commit_log.queue_offset("TopicTest", 0) == 1
    after = await append(commit_log, make_record(), KEY, T0)
    assert after.physical_offset == SMALL_COMMIT_LOG


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
async def test_batch_is_placed_whole_with_consecutive_offsets(
    commit_log: CommitLog, implementation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_commit_log_kernel(implementation, monkeypatch)
    commit_log.append(record_of_size(SMALL_COMMIT_LOG - 2000), KEY, T0)
    batch = bytearray().join(record_of_size(700) for _ in range(3))  # 2100 > 2000 - 8 left
    result = await append_batch(commit_log, batch, KEY, T0 + 5)
    assert result.status is AppendStatus.PUT_OK and result.message_count == 3
    assert result.physical_offset == SMALL_COMMIT_LOG, "the whole batch moved to the next file"
    assert result.record_offsets == [SMALL_COMMIT_LOG + n * 700 for n in range(3)]
    assert result.queue_offset == 1 and commit_log.queue_offset("TopicTest", 0) == 4
    with commit_log.get_data(SMALL_COMMIT_LOG) as sel:  # type: ignore[union-attr]
        records, stop = scan_records(sel.view, check_crc=True)
    assert [r.queue_offset for r in records] == [1, 2, 3] and stop.clean
    assert [r.physical_offset for r in records] == result.record_offsets
    assert {r.store_timestamp for r in records} == {T0 + 5}


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
async def test_batch_that_does_not_frame_is_refused(
    commit_log: CommitLog, implementation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_commit_log_kernel(implementation, monkeypatch)
    broken = record_of_size(300) + bytearray(10)
    assert commit_log.append_batch(broken, KEY, T0).status is AppendStatus.UNKNOWN_ERROR
    assert commit_log.max_offset == 0 and commit_log.queue_offset("TopicTest", 0) == 0


async def test_reads_are_bounded_and_single_file(commit_log: CommitLog) -> None:
    results = [await append(commit_log, record_of_size(30_000), KEY, T0) for _ in range(3)]
    third = results[2].physical_offset
    assert third == SMALL_COMMIT_LOG
    whole = commit_log.get_data(results[1].physical_offset)
    assert whole is not None and whole.size == SMALL_COMMIT_LOG - 30_000, "to the file's end"
    whole.release()
    assert commit_log.get_message(0, 30_001) is not None  # within the first file's written part
    assert commit_log.get_message(third, 30_001) is None, "past the read position"
    assert commit_log.get_message(10**9, 10) is None
    from_zero = commit_log.get_data(0)
    assert from_zero is not None and from_zero.start_offset == 0
    from_zero.release()
    assert commit_log.pickup_store_timestamp(third, 30_000) == T0
    assert commit_log.pickup_store_timestamp(third + 1, 30_000) == -1
    assert commit_log.roll_next_file(third + 5) == 2 * SMALL_COMMIT_LOG


async def test_store_time_behind_an_ipv6_born_host(commit_log: CommitLog) -> None:
    record = make_record(born_host=("2001:db8::1", 7))
    result = commit_log.append(record, KEY, T0 + 9)
    assert commit_log.pickup_store_timestamp(result.physical_offset, result.wrote_bytes) == T0 + 9


async def test_write_fault_is_an_error_status_and_counts_nothing(commit_log: CommitLog) -> None:
    commit_log.append(make_record(), KEY, T0)
    current = commit_log.queue.last_file
    assert current is not None
    current.fail_writes = OSError(errno.ENOSPC, "injected")
    failed = commit_log.append(make_record(), KEY, T0)
    assert failed.status is AppendStatus.UNKNOWN_ERROR
    assert commit_log.queue_offset("TopicTest", 0) == 1 and commit_log.max_offset == 105
    current.fail_writes = None
    assert commit_log.append(make_record(), KEY, T0).queue_offset == 1


async def test_verify_writes_refuses_a_corrupt_record(commit_log: CommitLog) -> None:
    record = make_record(body=b"payload")
    record[-20] ^= 0xFF  # inside the body: the CRC no longer matches
    with pytest.raises(StoreError, match="does not verify"):
        commit_log.append(record, KEY, T0)
    assert commit_log.max_offset == 0


async def test_append_data_mirrors_a_masters_bytes(
    tmp_path: Path, commit_log: CommitLog, executor: BlockingExecutor
) -> None:
    for _ in range(70):
        await append(commit_log, record_of_size(1000), KEY, T0)
    slave = CommitLog(small_config(tmp_path / "slave"), executor)
    await slave.start()
    offset = 0
    while offset < commit_log.max_offset:
        with commit_log.get_data(offset) as chunk:  # type: ignore[union-attr]
            status = slave.append_data(offset, chunk.view)
            if status is AppendStatus.NEED_FILE:
                await slave.allocate_next_file(offset)
                status = slave.append_data(offset, chunk.view)
            assert status is AppendStatus.PUT_OK
            offset += chunk.size
    assert slave.max_offset == commit_log.max_offset
    for name in ("00000000000000000000", "00000000000000065536"):
        master_bytes = (tmp_path / "commitlog" / name).read_bytes()
        assert (tmp_path / "slave" / "commitlog" / name).read_bytes() == master_bytes
    assert slave.append_data(5, b"x") is AppendStatus.UNKNOWN_ERROR, "not where it ends"
    await slave.shutdown()


async def test_flush_reports_the_durable_offset(commit_log: CommitLog) -> None:
    result = commit_log.append(record_of_size(5000), KEY, T0)
    assert await commit_log.flush(4) == 0, "one page is not four"
    assert await commit_log.flush(0) == result.next_offset == commit_log.flushed_where
    assert commit_log.queue.store_timestamp == T0


async def test_shutdown_leaves_no_prepared_file(tmp_path: Path, executor: BlockingExecutor) -> None:
    log = await started_commit_log(small_config(tmp_path), executor)
    log.append(make_record(), KEY, T0)
    await log.allocator.idle()
    assert (tmp_path / "commitlog" / "00000000000000065536").exists(), "next one prepared"
    await log.shutdown()
    assert sorted(p.name for p in (tmp_path / "commitlog").iterdir()) == ["00000000000000000000"]


async def test_min_offset_skips_a_first_file_being_deleted(commit_log: CommitLog) -> None:
    assert commit_log.min_offset == -1
    commit_log.append(record_of_size(SMALL_COMMIT_LOG - 8), KEY, T0)
    await append(commit_log, make_record(), KEY, T0)
    first = commit_log.queue.first_file
    assert first is not None and commit_log.min_offset == 0
    assert first.hold()
    first.shutdown()  # being deleted, still in the queue: RocketMQ reports the next file
    assert commit_log.min_offset == SMALL_COMMIT_LOG
    first.release()


@settings(max_examples=200, deadline=None)
@given(
    hosts=st.lists(st.sampled_from([("127.0.0.1", 1), ("::1", 2)]), min_size=1, max_size=6),
    bodies=st.lists(st.binary(max_size=40), min_size=6, max_size=6),
    base=st.integers(0, 2**40),
    first=st.integers(0, 2**40),
    stamp=st.integers(0, 2**42),
    cut=st.integers(0, 120),
)
def test_batch_framing_and_patching_in_c_equal_python(
    hosts: list[tuple[str, int]], bodies: list[bytes], base: int, first: int, stamp: int, cut: int
) -> None:
    """IPv4 and IPv6 born hosts (the store time moves from 56 to 68); cut batches."""
    kernel = kernel_or_skip("aiorocketmq.common._record_kernels")
    records = bytearray().join(
        encode_record(topic="T", body=body, properties="K\x01v", queue_id=0,
                      born_timestamp=1, born_host=host, store_timestamp=0,
                      store_host=("127.0.0.1", 3))
        for host, body in zip(hosts, bodies, strict=False)
    )  # fmt: skip
    cut_records = records[: len(records) - cut % len(records)] if cut % 4 == 0 else records
    saved = commit_log_batch._KERNEL
    try:
        commit_log_batch._KERNEL = None
        want_sizes = commit_log_batch.frame_batch(cut_records)
        commit_log_batch._KERNEL = kernel
        assert commit_log_batch.frame_batch(cut_records) == want_sizes
        if want_sizes is None:
            return
        by_c, by_py = bytearray(cut_records), bytearray(cut_records)
        got = commit_log_batch.patch_batch(by_c, want_sizes, base, first, stamp)
        commit_log_batch._KERNEL = None
        want = commit_log_batch.patch_batch(by_py, want_sizes, base, first, stamp)
    finally:
        commit_log_batch._KERNEL = saved
    assert got == want and by_c == by_py
