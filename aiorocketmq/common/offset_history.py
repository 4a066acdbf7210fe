"""The consumer-offset history format, and consumer lag over time read from it.

Owns: the file name, one snapshot line (``snapshot_line``), its parser
(``parse_snapshot``), reading both files of a store (``read_snapshots``) and the
per-topic lag series of one group (``lag_points``). RocketMQ has no such file: it is
ours. The broker writes it (``aiorocketmq.broker.offset_history``) and serves it
(GET_CONSUMER_OFFSET_HISTORY); the analytics reader reads it offline.

File: ``<storeRoot>/config/consumerOffsetHistory.jsonl``, one standard-JSON object a
line, appended once per interval; ``.1`` is the file before the last rotation::

    {"timestamp":1700000000000,
     "offsetTable":{"TopicA@group_a":{"0":12,"1":9}},
     "maxOffsetTable":{"TopicA":{"0":15,"1":9}}}

``maxOffsetTable`` holds each queue's end at the snapshot for every topic in
``offsetTable``, so the lag of that moment needs no store; lines written before it
existed lack it and give no lag. A crash can tear the last line: readers skip it and
count it, never fail on it.

Must not: do I/O on an event loop (callers run ``read_snapshots`` in an executor).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from aiorocketmq.common import fastjson
from aiorocketmq.common.errors import RemoteProtocolError

__all__ = [
    "HISTORY_FILE",
    "HistoryReply",
    "LagPoint",
    "OffsetSnapshot",
    "QueueOffsets",
    "lag_points",
    "parse_offset_table",
    "parse_snapshot",
    "read_snapshots",
    "snapshot_line",
]

HISTORY_FILE: Final = "consumerOffsetHistory.jsonl"
_STAMP_PREFIX: Final = b'{"timestamp":'

#: queueId -> offset.
QueueOffsets = dict[int, int]


@dataclass(frozen=True, slots=True)
class OffsetSnapshot:
    """One history line: committed offsets per (topic, group), queue ends per topic."""

    timestamp: int
    offsets: dict[tuple[str, str], QueueOffsets]
    #: None for a line written before queue ends were recorded.
    max_offsets: dict[str, QueueOffsets] | None


@dataclass(frozen=True, slots=True)
class LagPoint:
    """A group's position on one topic of one broker at one moment (queue sums)."""

    timestamp: int
    topic: str
    broker_offset: int
    consumer_offset: int
    #: Sum over queues of max(queue end - committed, 0): never negative, never -1.
    diff: int

    def to_json(self) -> dict[str, int | str]:
        """The point with Java-style field names (the wire's and ``mqadmin lag --json``'s)."""
        return {
            "timestamp": self.timestamp,
            "topic": self.topic,
            "brokerOffset": self.broker_offset,
            "consumerOffset": self.consumer_offset,
            "diff": self.diff,
        }


def snapshot_line(
    table: Mapping[str, Mapping[int, int]],
    timestamp_ms: int,
    max_offsets: Mapping[str, Mapping[int, int]] | None = None,
) -> bytes:
    """One history line (with its newline).

    Args:
        table: the offset table, keyed ``topic@group`` as the broker keeps it.
        timestamp_ms: when it was taken.
        max_offsets: queue ends per topic; omitted when None.
    """
    doc: dict[str, object] = {
        "timestamp": timestamp_ms,
        "offsetTable": {
            key: {str(q): o for q, o in sorted(queues.items())}
            for key, queues in sorted(table.items())
        },
    }
    if max_offsets is not None:
        doc["maxOffsetTable"] = {
            topic: {str(q): o for q, o in sorted(queues.items())}
            for topic, queues in sorted(max_offsets.items())
        }
    return json.dumps(doc, separators=(",", ":")).encode("utf-8") + b"\n"


def _queues(doc: object, what: str) -> QueueOffsets:
    try:
        return {int(q): int(v) for q, v in fastjson.as_dict(doc or {}, what).items()}
    except (TypeError, ValueError):
        raise RemoteProtocolError(f"{what} has a non-integer entry") from None


def parse_offset_table(doc: object, what: str) -> dict[tuple[str, str], QueueOffsets]:
    """``{"offsetTable": {"topic@group": {...}}}`` as ``(topic, group) -> queues``.

    Keys without exactly one ``@`` are skipped, as Java's ConsumerOffsetManager does.
    Raises ``RemoteProtocolError`` on a non-integer entry or a non-object.
    """
    table = fastjson.as_dict(fastjson.as_dict(doc, what).get("offsetTable") or {}, what)
    result: dict[tuple[str, str], QueueOffsets] = {}
    for key, queues in table.items():
        parts = key.split("@")
        if len(parts) == 2:
            result[(parts[0], parts[1])] = _queues(queues, f"{what}: {key}")
    return result


def parse_snapshot(line: bytes, what: str) -> OffsetSnapshot:
    """Parse one history line; raises ``RemoteProtocolError`` when it does not parse."""
    try:
        doc = fastjson.as_dict(fastjson.loads(line), what)
        stamp = int(doc["timestamp"])
    except (KeyError, TypeError, ValueError, json.JSONDecodeError) as exc:
        raise RemoteProtocolError(f"{what}: not a snapshot line ({exc})") from None
    ends = doc.get("maxOffsetTable")
    max_offsets = None
    if ends is not None:
        max_offsets = {
            topic: _queues(queues, f"{what}: maxOffsetTable[{topic}]")
            for topic, queues in fastjson.as_dict(ends, what).items()
        }
    return OffsetSnapshot(stamp, parse_offset_table(doc, what), max_offsets)


def _leading_stamp(line: bytes) -> int | None:
    # Our writer puts the timestamp first: a range filter skips a line without
    # parsing it. Any other layout parses in full.
    if not line.startswith(_STAMP_PREFIX):
        return None
    end = line.find(b",", len(_STAMP_PREFIX))
    if end < 0:
        return None
    try:
        return int(line[len(_STAMP_PREFIX) : end])
    except ValueError:
        return None


def _evenly(items: list[bytes], limit: int) -> list[bytes]:
    # Every step-th line counted back from the newest: the newest is always kept
    # and the series spans the whole range at an even spacing.
    if limit <= 0 or len(items) <= limit:
        return items
    step = -(-len(items) // limit)
    return items[::-step][::-1]


def read_snapshots(
    config_dir: Path,
    *,
    begin_ms: int = 0,
    end_ms: int | None = None,
    contains: bytes = b"",
    limit: int = 0,
) -> tuple[list[OffsetSnapshot], int]:
    """The snapshots of ``config_dir``'s history files, oldest first (blocking).

    Args:
        config_dir: ``<storeRoot>/config``.
        begin_ms: skip snapshots taken before this.
        end_ms: skip snapshots taken after this (None: no limit).
        contains: skip lines without these bytes, unparsed (e.g. ``b'@group"'``).
        limit: at most this many snapshots, evenly spaced, the newest kept (0: all).
            Lines are thinned before they are parsed.

    Returns:
        The snapshots and the number of lines that did not parse (a torn last line).
    """
    lines: list[bytes] = []
    for path in (config_dir / f"{HISTORY_FILE}.1", config_dir / HISTORY_FILE):
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        for line in data.splitlines():
            if not line.strip() or (contains and contains not in line):
                continue
            stamp = _leading_stamp(line)
            if stamp is None or (begin_ms <= stamp and (end_ms is None or stamp <= end_ms)):
                lines.append(line)
    snapshots: list[OffsetSnapshot] = []
    bad = 0
    for line in _evenly(lines, limit):
        try:
            snap = parse_snapshot(line, str(config_dir / HISTORY_FILE))
        except RemoteProtocolError:
            bad += 1
            continue
        if begin_ms <= snap.timestamp and (end_ms is None or snap.timestamp <= end_ms):
            snapshots.append(snap)
    return snapshots, bad


def lag_points(
    snapshots: Iterable[OffsetSnapshot], group: str, topic: str | None = None
) -> list[LagPoint]:
    """The per-topic lag series of ``group`` (optionally one ``topic``), in input order.

    Only queues the group committed on count, as in consumerProgress; a snapshot
    without queue ends gives no point.
    """
    points: list[LagPoint] = []
    for snap in snapshots:
        if snap.max_offsets is None:
            continue
        for (t, g), queues in sorted(snap.offsets.items()):
            if g != group or (topic is not None and t != topic):
                continue
            ends = snap.max_offsets.get(t, {})
            broker = consumer = diff = 0
            for queue_id, offset in queues.items():
                end = ends.get(queue_id, 0)
                broker += end
                consumer += offset
                diff += max(end - offset, 0)
            points.append(LagPoint(snap.timestamp, t, broker, consumer, diff))
    return points


# -- GET_CONSUMER_OFFSET_HISTORY's body ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class HistoryReply:
    """GET_CONSUMER_OFFSET_HISTORY's body: one broker's lag series for a group."""

    broker_name: str
    #: The broker's snapshot period (ms).
    interval: int
    #: History lines that did not parse (a torn last line after a crash).
    bad_lines: int
    points: list[LagPoint]

    def encode(self) -> bytes:
        """Standard JSON with Java-style field names."""
        doc = {
            "brokerName": self.broker_name,
            "interval": self.interval,
            "badLines": self.bad_lines,
            "points": [p.to_json() for p in self.points],
        }
        return json.dumps(doc, separators=(",", ":")).encode("utf-8")

    @classmethod
    def decode(cls, body: bytes) -> HistoryReply:
        """Parse; raises ``RemoteProtocolError`` on anything but ``encode``'s form."""
        try:
            doc = fastjson.as_dict(fastjson.loads(body), "offset history")
            points = [
                LagPoint(
                    int(p["timestamp"]), str(p["topic"]), int(p["brokerOffset"]),
                    int(p["consumerOffset"]), int(p["diff"]),
                )
                for p in doc.get("points") or []
            ]  # fmt: skip
            return cls(
                str(doc["brokerName"]), int(doc["interval"]), int(doc.get("badLines") or 0), points
            )
        except (KeyError, TypeError, ValueError, json.JSONDecodeError) as exc:
            raise RemoteProtocolError(f"offset history: malformed body ({exc})") from None
