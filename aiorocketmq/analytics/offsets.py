"""Consumer offsets, ConsumeQueue ends and offset history, read offline from store roots.

Owns: ``committed_offsets`` (``config/consumerOffset.json``, fastjson's bare integer
keys accepted, ``.bak`` when the file is missing or torn), ``queue_max_offsets`` (the
end of every ``consumequeue/<topic>/<queueId>``), ``consumer_lag`` (their join) and
``offset_history`` (``config/consumerOffsetHistory.jsonl``, see below).

History: ``config/consumerOffsetHistory.jsonl`` and its ``.1``, in the format of
``aiorocketmq.common.offset_history`` (a torn last line is skipped and counted).

Must not: write anything, import pyspark (rows are plain dicts; callers build frames).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from aiorocketmq.common import fastjson
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.offset_history import HISTORY_FILE, parse_offset_table, read_snapshots

__all__ = [
    "CQ_UNIT_SIZE",
    "HISTORY_FILE",
    "OffsetHistory",
    "committed_offsets",
    "consumer_lag",
    "offset_history",
    "queue_max_offsets",
]

CQ_UNIT_SIZE: Final = 20
_CQ_UNIT: Final = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags", ">i8")])

Row = dict[str, Any]


def committed_offsets(store_root: str | Path, broker: str) -> list[Row]:
    """Rows ``broker, topic, group, queueId, offset`` of ``consumerOffset.json``.

    Reads ``consumerOffset.json.bak`` when the file is missing or does not parse (the
    broker's persist protocol leaves one of them whole). No file at all: no rows.
    """
    config = Path(store_root) / "config"
    for name in ("consumerOffset.json", "consumerOffset.json.bak"):
        path = config / name
        try:
            table = parse_offset_table(fastjson.loads(path.read_bytes()), str(path))
        except (FileNotFoundError, RemoteProtocolError):
            continue
        return [
            {"broker": broker, "topic": t, "group": g, "queueId": q, "offset": o}
            for (t, g), queues in sorted(table.items())
            for q, o in sorted(queues.items())
        ]
    return []


def _queue_end(directory: Path) -> tuple[int, int] | None:
    """(min, max) logical offsets of one queue directory, or None without files."""
    files = sorted(
        (int(e.name), e.path) for e in os.scandir(directory) if e.is_file() and e.name.isdigit()
    )
    if not files:
        return None
    first_base, last_base = files[0][0], files[-1][0]
    units = np.fromfile(files[-1][1], dtype=_CQ_UNIT)
    # Java's recovery: a unit counts while offset >= 0 and size > 0.
    bad = np.flatnonzero((units["offset"] < 0) | (units["size"] <= 0))
    written = int(bad[0]) if len(bad) else len(units)
    return first_base // CQ_UNIT_SIZE, last_base // CQ_UNIT_SIZE + written


def queue_max_offsets(store_root: str | Path, broker: str) -> list[Row]:
    """Rows ``broker, topic, queueId, minOffset, maxOffset`` of every ConsumeQueue.

    ``maxOffset`` is the next logical offset (units written); ``minOffset`` is the
    first file's first unit.
    """
    root = Path(store_root) / "consumequeue"
    rows: list[Row] = []
    if not root.is_dir():
        return rows
    for topic_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for queue_dir in sorted(p for p in topic_dir.iterdir() if p.is_dir()):
            if not queue_dir.name.isdigit():
                continue  # as RocketMQ's load: non-numeric queue directories are skipped
            ends = _queue_end(queue_dir)
            if ends is not None:
                rows.append({
                    "broker": broker, "topic": topic_dir.name, "queueId": int(queue_dir.name),
                    "minOffset": ends[0], "maxOffset": ends[1],
                })  # fmt: skip
    return rows


def consumer_lag(store_root: str | Path, broker: str) -> list[Row]:
    """Committed offsets joined with queue ends: ``lag = maxOffset - offset`` (>= 0).

    A queue a group committed on but that has no ConsumeQueue gets maxOffset 0.
    """
    ends = {
        (r["topic"], r["queueId"]): r["maxOffset"] for r in queue_max_offsets(store_root, broker)
    }
    rows = []
    for row in committed_offsets(store_root, broker):
        max_offset = ends.get((row["topic"], row["queueId"]), 0)
        rows.append({**row, "maxOffset": max_offset, "lag": max(max_offset - row["offset"], 0)})
    return rows


@dataclass
class OffsetHistory:
    """Offset snapshots as rows, and how many lines could not be read."""

    rows: list[Row] = field(default_factory=list)
    bad_lines: int = 0


def offset_history(store_root: str | Path, broker: str) -> OffsetHistory:
    """Rows ``broker, timestamp, topic, group, queueId, offset`` from the history files."""
    snapshots, bad = read_snapshots(Path(store_root) / "config")
    history = OffsetHistory(bad_lines=bad)
    for snap in snapshots:
        history.rows.extend(
            {"broker": broker, "timestamp": snap.timestamp, "topic": t, "group": g,
             "queueId": q, "offset": o}
            for (t, g), queues in snap.offsets.items()
            for q, o in queues.items()
        )  # fmt: skip
    return history
