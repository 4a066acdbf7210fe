"""Recovery's decision table, row by row, on real small files (specs/store.md §7).

Each test writes a CommitLog and ConsumeQueues with the file layer, damages or
shuts them down the way a row of ``recovery.py``'s table describes, reloads them
into fresh objects and checks what ``recover_blocking`` kept, cut and reported.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from aiorocketmq.common.message_codec import iter_records
from aiorocketmq.runtime.executor import BlockingExecutor
from aiorocketmq.store.checkpoint import StoreCheckpoint
from aiorocketmq.store.commit_log import CommitLog, queue_key
from aiorocketmq.store.config import MessageStoreConfig
from aiorocketmq.store.consume_queue import PutUnitStatus
from aiorocketmq.store.consume_queue_table import ConsumeQueueTable
from aiorocketmq.store.recovery import recover_blocking
from tests.unit.store.helpers import append, make_record, small_config, started_commit_log

TOPIC = "TopicTest"
BASE_TIME = 1_700_000_000_000


@pytest.fixture
async def executor() -> AsyncIterator[BlockingExecutor]:
    pool = BlockingExecutor("test-recovery", 2)
    yield pool
    await pool.shutdown()


@dataclass
class Written:
    """What a test wrote: (physical offset, size, queue id, queue offset) per record."""

    config: MessageStoreConfig
    records: list[tuple[int, int, int, int]]

    @property
    def end(self) -> int:
        offset, size, _, _ = self.records[-1]
        return offset + size


async def write_store(
    root: Path, executor: BlockingExecutor, count: int, *, body_size: int = 900
) -> Written:
    """``count`` records over two queues, dispatched into ConsumeQueues, then closed."""
    config = small_config(root)
    commit_log = await started_commit_log(config, executor)
    table = ConsumeQueueTable(config, executor)
    records = []
    for i in range(count):
        queue_id = i % 2
        record = make_record(queue_id=queue_id, body=bytes([i % 251]) * body_size)
        result = await append(commit_log, record, queue_key(TOPIC, queue_id), BASE_TIME + i)
        queue = table.find_or_create(TOPIC, queue_id)
        status = queue.put_blocking(
            result.physical_offset, result.wrote_bytes, 0, result.queue_offset, BASE_TIME + i
        )
        assert status is PutUnitStatus.OK
        records.append((result.physical_offset, result.wrote_bytes, queue_id, result.queue_offset))
    await commit_log.flush(0)
    await commit_log.shutdown()
    await table.shutdown()
    return Written(config, records)


def reload(
    config: MessageStoreConfig, executor: BlockingExecutor
) -> tuple[CommitLog, ConsumeQueueTable]:
    commit_log = CommitLog(config, executor)
    commit_log.load_blocking()
    table = ConsumeQueueTable(config, executor)
    table.load_blocking()
    return commit_log, table


def valid_offsets(commit_log: CommitLog) -> list[int]:
    """Physical offsets of every record the recovered CommitLog still holds."""
    found = []
    for mapped in commit_log.queue.files:
        view = mapped.buffer[: mapped.wrote_position]
        found += [mapped.file_from_offset + r.position for r in iter_records(view)]
    return found


async def close(commit_log: CommitLog, table: ConsumeQueueTable) -> None:
    commit_log.queue.shutdown()
    await table.shutdown()


async def test_clean_exit_keeps_everything(tmp_path: Path, executor: BlockingExecutor) -> None:
    written = await write_store(tmp_path, executor, 200)  # several 64 KiB files
    commit_log, table = reload(written.config, executor)
    checkpoint = StoreCheckpoint(written.config.checkpoint_path)
    report = recover_blocking(written.config, commit_log, table, checkpoint, last_exit_ok=True)
    assert report.clean and report.lost_bytes == 0
    assert report.commit_log_end_offset == written.end == commit_log.max_offset
    assert report.stop_reason in {"zero", "end"}
    # Normal recovery rescans only the last three files.
    assert report.scan_start_offset == commit_log.queue.files[-3].file_from_offset
    assert valid_offsets(commit_log) == [r[0] for r in written.records]
    assert commit_log.topic_queue_table == {f"{TOPIC}-0": 100, f"{TOPIC}-1": 100}
    assert report.redispatch_from == written.end  # nothing for the reput to redo
    await close(commit_log, table)


async def test_torn_tail_is_cut_zeroed_and_reported(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    written = await write_store(tmp_path, executor, 30)
    last_offset, last_size, last_queue, _ = written.records[-1]
    # A crash mid-write: only the first half of the last record reached the file.
    commit_log, table = reload(written.config, executor)
    holder = commit_log.queue.find_file(last_offset)
    assert holder is not None
    pos = last_offset - holder.file_from_offset
    holder.buffer[pos + last_size // 2 : pos + last_size] = bytes(last_size - last_size // 2)
    checkpoint = StoreCheckpoint(written.config.checkpoint_path)
    report = recover_blocking(written.config, commit_log, table, checkpoint, last_exit_ok=False)
    assert report.commit_log_end_offset == last_offset
    # Inside a file a torn record is not "cut by the end of the buffer": its header
    # is whole and its body CRC no longer matches.
    assert report.stop_reason == "corrupt"
    assert report.lost_bytes == last_size // 2, "the half record that was on disk"
    assert report.truncated_queues == [f"{TOPIC}-{last_queue}"]
    assert valid_offsets(commit_log) == [r[0] for r in written.records[:-1]]
    assert bytes(holder.buffer[pos : pos + last_size]) == bytes(last_size), "garbage zeroed"
    assert table.get(TOPIC, last_queue) is not None
    assert table.get(TOPIC, last_queue).max_offset == 14  # type: ignore[union-attr]
    assert commit_log.topic_queue_table[queue_key(TOPIC, last_queue)] == 14
    await close(commit_log, table)


async def test_flipped_byte_stops_at_the_last_good_record(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    written = await write_store(tmp_path, executor, 40)
    bad_offset, _, _, _ = written.records[25]
    commit_log, table = reload(written.config, executor)
    holder = commit_log.queue.find_file(bad_offset)
    assert holder is not None
    # One flipped bit in the body: only the CRC can tell (checkCRCOnRecover).
    body_at = bad_offset - holder.file_from_offset + 200
    holder.buffer[body_at] ^= 0x01
    checkpoint = StoreCheckpoint(written.config.checkpoint_path)
    report = recover_blocking(written.config, commit_log, table, checkpoint, last_exit_ok=True)
    assert report.commit_log_end_offset == bad_offset
    assert report.stop_reason == "corrupt" and "crc" in report.stop_detail.lower()
    lost_records = written.records[25:]
    # Every byte of the cut records is counted but the last record's trailing
    # properties length (two zero bytes): "lost" counts data up to the last non-zero.
    assert report.lost_bytes == sum(r[1] for r in lost_records) - 2
    assert valid_offsets(commit_log) == [r[0] for r in written.records[:25]]
    # Units pointing at the cut records are gone from both queues.
    assert sorted(report.truncated_queues) == [f"{TOPIC}-0", f"{TOPIC}-1"]
    remaining_units = sum(q.max_offset for q in table)
    assert remaining_units == len(written.records) - len(lost_records)
    assert report.deleted_files == [] and commit_log.max_offset == bad_offset
    await close(commit_log, table)


async def test_abnormal_exit_starts_at_the_checkpointed_file(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    written = await write_store(tmp_path, executor, 200)
    commit_log, table = reload(written.config, executor)
    files = commit_log.queue.files
    assert len(files) >= 4
    # The checkpoint vouches for everything up to the second file's first record
    # (+3 s margin): a crash scan starts there, and the reput redoes from the first
    # record stored after that time (the second one of the file), not the whole file.
    second_first_time = next(iter_records(files[1].buffer)).store_timestamp
    checkpoint = StoreCheckpoint(written.config.checkpoint_path)
    checkpoint.physic_msg_timestamp = checkpoint.logics_msg_timestamp = second_first_time + 3000
    checkpoint.index_msg_timestamp = second_first_time + 3000
    report = recover_blocking(written.config, commit_log, table, checkpoint, last_exit_ok=False)
    assert report.scan_start_offset == files[1].file_from_offset
    after = [
        files[1].file_from_offset + r.position
        for r in iter_records(files[1].buffer)
        if r.store_timestamp > second_first_time
    ]
    assert after and after[0] > files[1].file_from_offset
    assert report.redispatch_from == report.first_unchecked_offset == after[0]
    assert report.commit_log_end_offset == written.end and report.clean
    await close(commit_log, table)


async def test_crash_scan_checks_crc_only_after_the_checkpoint(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    """Records the checkpoint vouches for were flushed before it was written: a torn
    write cannot be among them, so their CRC is not checked (a third of the scan); a bad
    CRC after the checkpoint's time still ends the data there."""
    written = await write_store(tmp_path, executor, 200)  # store times BASE_TIME + i
    vouched, torn = written.records[20], written.records[120]
    commit_log, table = reload(written.config, executor)
    for offset, _size, _queue, _qoffset in (vouched, torn):
        holder = commit_log.queue.find_file(offset)
        assert holder is not None
        holder.buffer[offset - holder.file_from_offset + 200] ^= 0x01  # inside the body
    checkpoint = StoreCheckpoint(written.config.checkpoint_path)
    checkpoint.physic_msg_timestamp = checkpoint.logics_msg_timestamp = BASE_TIME + 60 + 3000
    checkpoint.index_msg_timestamp = BASE_TIME + 60 + 3000
    report = recover_blocking(written.config, commit_log, table, checkpoint, last_exit_ok=False)
    assert report.first_unchecked_offset == written.records[61][0]
    assert report.commit_log_end_offset == torn[0], "the bad CRC after the checkpoint cuts"
    assert report.stop_reason == "corrupt" and "crc" in report.stop_detail.lower()
    assert vouched[0] in valid_offsets(commit_log), "the vouched record is kept"
    assert report.redispatch_from == written.records[61][0]
    await close(commit_log, table)


async def test_an_older_index_time_moves_the_replay_back(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    """The index's durable time counts too (RocketMQ: only with messageIndexSafe): the
    replay must reach every key the crash may have lost; without an index it does not."""
    written = await write_store(tmp_path, executor, 200)  # store times BASE_TIME + i
    checkpoint = StoreCheckpoint(written.config.checkpoint_path)
    checkpoint.physic_msg_timestamp = checkpoint.logics_msg_timestamp = BASE_TIME + 150 + 3000
    checkpoint.index_msg_timestamp = BASE_TIME + 100  # RocketMQ takes no margin off this one
    commit_log, table = reload(written.config, executor)
    report = recover_blocking(written.config, commit_log, table, checkpoint, last_exit_ok=False)
    assert report.redispatch_from == written.records[101][0]
    await close(commit_log, table)
    no_index = written.config.model_copy(update={"message_index_enable": False})
    commit_log, table = reload(no_index, executor)
    report = recover_blocking(no_index, commit_log, table, checkpoint, last_exit_ok=False)
    assert report.redispatch_from == written.records[151][0]
    await close(commit_log, table)


async def test_abnormal_exit_without_checkpoint_scans_from_the_first_file(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    written = await write_store(tmp_path, executor, 80)
    commit_log, table = reload(written.config, executor)
    report = recover_blocking(
        written.config,
        commit_log,
        table,
        StoreCheckpoint(written.config.checkpoint_path),
        last_exit_ok=False,
    )
    assert report.scan_start_offset == 0 and report.redispatch_from == 0
    assert report.records_scanned == 80
    await close(commit_log, table)


async def test_consume_queue_beyond_commit_log_is_trimmed(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    written = await write_store(tmp_path, executor, 20)
    # The CommitLog lost its last file's data (e.g. it was never flushed) but the
    # ConsumeQueue units for it were: they must go.
    commit_log, table = reload(written.config, executor)
    cut_at = written.records[10][0]
    for mapped in commit_log.queue.files:
        start = max(0, cut_at - mapped.file_from_offset)
        if start < mapped.file_size:
            mapped.buffer[start:] = bytes(mapped.file_size - start)
    report = recover_blocking(
        written.config,
        commit_log,
        table,
        StoreCheckpoint(written.config.checkpoint_path),
        last_exit_ok=True,
    )
    assert report.commit_log_end_offset == cut_at and report.stop_reason == "zero"
    assert report.lost_bytes == 0, "zeros are not data"
    assert commit_log.topic_queue_table == {f"{TOPIC}-0": 5, f"{TOPIC}-1": 5}
    assert report.consume_queue_max_physical_offset == cut_at
    await close(commit_log, table)


async def test_no_commit_log_files_destroys_consume_queues(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    written = await write_store(tmp_path, executor, 6)
    for path in (tmp_path / "commitlog").iterdir():
        path.unlink()
    commit_log, table = reload(written.config, executor)
    report = recover_blocking(
        written.config,
        commit_log,
        table,
        StoreCheckpoint(written.config.checkpoint_path),
        last_exit_ok=True,
    )
    assert report.stop_reason == "no-files" and report.commit_log_end_offset == 0
    assert sorted(report.truncated_queues) == [f"{TOPIC}-0", f"{TOPIC}-1"]
    assert sum(q.max_offset for q in table) == 0
    assert commit_log.topic_queue_table == {}
    await close(commit_log, table)


async def test_corruption_before_the_last_file_deletes_later_files(
    tmp_path: Path, executor: BlockingExecutor
) -> None:
    written = await write_store(tmp_path, executor, 200)
    commit_log, table = reload(written.config, executor)
    files = commit_log.queue.files
    victim = files[-2]
    # Smash the magic of the second record of the next-to-last file.
    first = next(iter_records(victim.buffer))
    bad = victim.file_from_offset + first.total_size
    victim.buffer[first.total_size + 4 : first.total_size + 8] = b"\x00\x00\x00\x01"
    last_name = files[-1].file_name
    report = recover_blocking(
        written.config,
        commit_log,
        table,
        StoreCheckpoint(written.config.checkpoint_path),
        last_exit_ok=True,
    )
    assert report.commit_log_end_offset == bad and report.stop_reason == "corrupt"
    assert report.deleted_files == [last_name]
    assert not (tmp_path / "commitlog" / last_name).exists()
    kept = [r for r in written.records if r[0] < bad]
    assert valid_offsets(commit_log) == [r[0] for r in kept]
    assert sum(q.max_offset for q in table) == len(kept)
    cut = [r for r in written.records if r[0] >= bad]
    # At least every cut record's bytes, less the two zero bytes each one ends with
    # (its empty properties length); BLANK fillers may add more.
    assert report.lost_bytes >= sum(r[1] for r in cut) - 2 * len(cut)
    await close(commit_log, table)
