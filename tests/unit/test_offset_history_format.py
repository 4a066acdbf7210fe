"""The offset history format: lines, the reader's filters and thinning, lag points,
and GET_CONSUMER_OFFSET_HISTORY's body."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.offset_history import (
    HISTORY_FILE,
    HistoryReply,
    LagPoint,
    OffsetSnapshot,
    lag_points,
    parse_snapshot,
    read_snapshots,
    snapshot_line,
)


def write_lines(config: Path, name: str, stamps: list[int], group: str = "g") -> None:
    config.mkdir(parents=True, exist_ok=True)
    with (config / name).open("ab") as fh:
        for stamp in stamps:
            fh.write(snapshot_line({f"T@{group}": {0: stamp}}, stamp, {"T": {0: stamp + 5}}))


def test_a_line_carries_queue_ends_beside_the_offsets() -> None:
    line = snapshot_line({"T@g": {1: 9, 0: 12}}, 1_700_000_000_000, {"T": {1: 9, 0: 15}})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert line.startswith(b'{"timestamp":1700000000000,')  # the reader's fast range filter
    assert json.loads(line) == {
        "timestamp": 1_700_000_000_000,
        "offsetTable": {"T@g": {"0": 12, "1": 9}},
        "maxOffsetTable": {"T": {"0": 15, "1": 9}},
    }
    snap = parse_snapshot(line, "x")
    assert snap == OffsetSnapshot(
        1_700_000_000_000, {("T", "g"): {0: 12, 1: 9}}, {"T": {0: 15, 1: 9}}
    )


def test_an_old_line_without_queue_ends_parses_with_none() -> None:
    snap = parse_snapshot(b'{"timestamp":5,"offsetTable":{"T@g":{"0":1},"bad-key":{}}}', "x")
    assert snap.max_offsets is None
    assert snap.offsets == {("T", "g"): {0: 1}}  # a key without one "@" is skipped


@pytest.mark.parametrize(
    "line",
    [
        b'{"timestamp":5,"offsetTab',
        b'{"offsetTable":{}}',
        b'{"timestamp":"soon","offsetTable":{}}',
        b'{"timestamp":5,"offsetTable":{"T@g":{"0":"x"}}}',
        b'{"timestamp":5,"offsetTable":{},"maxOffsetTable":{"T":{"q":1}}}',
        b"[1,2]",
    ],
)
def test_a_bad_line_is_a_protocol_error(line: bytes) -> None:
    with pytest.raises(RemoteProtocolError):
        parse_snapshot(line, "x")


def test_reader_joins_both_files_filters_and_counts_a_torn_line(tmp_path: Path) -> None:
    write_lines(tmp_path, f"{HISTORY_FILE}.1", [1000, 2000])
    write_lines(tmp_path, HISTORY_FILE, [3000, 4000])
    write_lines(tmp_path, HISTORY_FILE, [5000], group="other")
    with (tmp_path / HISTORY_FILE).open("ab") as fh:
        fh.write(b'{"timestamp":6000,"offsetTable":{"T@g":{"0":')
    snaps, bad = read_snapshots(tmp_path)
    assert [s.timestamp for s in snaps] == [1000, 2000, 3000, 4000, 5000]
    assert bad == 1
    snaps, bad = read_snapshots(tmp_path, begin_ms=2000, end_ms=4000)
    assert [s.timestamp for s in snaps] == [2000, 3000, 4000] and bad == 0
    snaps, bad = read_snapshots(tmp_path, contains=b'@g"')
    assert [s.timestamp for s in snaps] == [1000, 2000, 3000, 4000] and bad == 1
    assert read_snapshots(tmp_path / "missing") == ([], 0)


def test_limit_thins_evenly_and_keeps_the_newest(tmp_path: Path) -> None:
    write_lines(tmp_path, HISTORY_FILE, [1000 * i for i in range(1, 11)])
    snaps, _ = read_snapshots(tmp_path, limit=3)
    assert [s.timestamp for s in snaps] == [2000, 6000, 10_000]
    snaps, _ = read_snapshots(tmp_path, limit=10)
    assert len(snaps) == 10
    snaps, _ = read_snapshots(tmp_path, limit=1)
    assert [s.timestamp for s in snaps] == [10_000]


def test_lag_points_sum_committed_queues_and_never_go_negative() -> None:
    snaps = [
        OffsetSnapshot(1, {("T", "g"): {0: 3}}, None),  # written before queue ends: no point
        OffsetSnapshot(
            2,
            {("T", "g"): {0: 3, 1: 9, 2: 4}, ("U", "g"): {0: 1}, ("T", "h"): {0: 0}},
            # queue 1 was reset past its end (diff 0, not -1); queue 2's end is unknown (0)
            {"T": {0: 10, 1: 7}, "U": {0: 6}},
        ),
    ]
    assert lag_points(snaps, "g") == [LagPoint(2, "T", 17, 16, 7), LagPoint(2, "U", 6, 1, 5)]
    assert lag_points(snaps, "g", "U") == [LagPoint(2, "U", 6, 1, 5)]
    assert lag_points(snaps, "h") == [LagPoint(2, "T", 10, 0, 10)]
    assert lag_points(snaps, "nobody") == []


def test_history_reply_round_trips_and_refuses_other_bodies() -> None:
    reply = HistoryReply("broker-a", 60_000, 1, [LagPoint(5, "T", 10, 7, 3)])
    body = reply.encode()
    assert json.loads(body)["points"] == [
        {"timestamp": 5, "topic": "T", "brokerOffset": 10, "consumerOffset": 7, "diff": 3}
    ]
    assert HistoryReply.decode(body) == reply
    for bad in (b"{}", b"[]", b'{"brokerName":"b","interval":1,"points":[{"topic":"T"}]}'):
        with pytest.raises(RemoteProtocolError):
            HistoryReply.decode(bad)
