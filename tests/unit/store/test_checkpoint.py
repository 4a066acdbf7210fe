"""The checkpoint file's layout and min-timestamp rules (specs/store.md §7.1)."""

from __future__ import annotations

import struct
from pathlib import Path

from aiorocketmq.store.checkpoint import (
    CHECKPOINT_FILE_SIZE,
    StoreCheckpoint,
    write_checkpoint_blocking,
)


def test_layout_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "checkpoint"
    cp = StoreCheckpoint(path)
    cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp = 111, 222, 333
    write_checkpoint_blocking(path, cp.encode())
    raw = path.read_bytes()
    assert len(raw) == CHECKPOINT_FILE_SIZE
    assert struct.unpack_from(">qqq", raw) == (111, 222, 333)
    assert raw[24:] == bytes(CHECKPOINT_FILE_SIZE - 24)
    again = StoreCheckpoint.load_blocking(path)
    assert (again.physic_msg_timestamp, again.logics_msg_timestamp, again.index_msg_timestamp) == (
        111,
        222,
        333,
    )


def test_missing_file_reads_as_zeros(tmp_path: Path) -> None:
    cp = StoreCheckpoint.load_blocking(tmp_path / "checkpoint")
    assert cp.min_timestamp() == 0 and cp.min_timestamp_index() == 0


def test_min_timestamp_rules(tmp_path: Path) -> None:
    cp = StoreCheckpoint(tmp_path / "checkpoint")
    cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp = 10_000, 8_000, 4_000
    assert cp.min_timestamp() == 5_000  # min(physic, logics) - 3 s
    assert cp.min_timestamp_index() == 4_000
    cp.logics_msg_timestamp = 1_000
    assert cp.min_timestamp() == 0  # floored at 0
