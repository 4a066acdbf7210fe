"""Consumer-offset history: a snapshot of the offset table appended every interval.

Owns: writing the history file ``<storeRoot>/config/consumerOffsetHistory.jsonl``
(format and readers: ``aiorocketmq.common.offset_history``), its rotation (past
``max_bytes`` the file becomes ``.1``, replacing the older one),
``append_offset_snapshot`` (blocking; run it in the executor) and
``OffsetHistoryService`` (every ``interval_ms``, 60 s by default), which records each
queue's end beside the offsets so a line alone gives the lag of its moment.
RocketMQ has no such file: it is ours.

Wiring (BrokerController): ``OffsetHistoryService(ctx.offsets, store_root / "config" /
HISTORY_FILE, executor, clock, max_offset=store.get_max_offset_in_queue)``, started
after the offset manager loaded, shut down before it.

Must not: block the loop (the table is copied on the loop, written in the executor),
or fail the broker over a history write: an OSError is logged and the next run tries
again.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from aiorocketmq.broker.offsets import ConsumerOffsetManager, OffsetTable
from aiorocketmq.common.clock import Clock, SystemClock
from aiorocketmq.common.offset_history import HISTORY_FILE, snapshot_line
from aiorocketmq.runtime import BlockingExecutor, Service

__all__ = [
    "DEFAULT_INTERVAL_MS",
    "DEFAULT_MAX_BYTES",
    "HISTORY_FILE",
    "MaxOffset",
    "OffsetHistoryService",
    "append_offset_snapshot",
    "queue_ends",
    "snapshot_line",
]

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_MS: Final = 60_000
DEFAULT_MAX_BYTES: Final = 64 * 1024 * 1024

#: (topic, queueId) -> the queue's next logical offset (the store's getMaxOffsetInQueue).
MaxOffset = Callable[[str, int], int]


def queue_ends(table: OffsetTable, max_offset: MaxOffset) -> dict[str, dict[int, int]]:
    """Each queue's end for every topic in ``table``, per queue committed on."""
    ends: dict[str, dict[int, int]] = {}
    for key, queues in table.items():
        topic, _, _group = key.partition("@")
        per_topic = ends.setdefault(topic, {})
        for queue_id in queues:
            if queue_id not in per_topic:
                per_topic[queue_id] = max_offset(topic, queue_id)
    return ends


def append_offset_snapshot(
    path: Path,
    table: OffsetTable,
    timestamp_ms: int,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_offsets: Mapping[str, Mapping[int, int]] | None = None,
) -> int:
    """Append one snapshot line to ``path`` (blocking); rotate first if it is too big.

    One ``write`` of the whole line on an O_APPEND descriptor: a crash leaves at most
    a torn last line, which readers skip.

    Returns:
        The bytes written.
    """
    line = snapshot_line(table, timestamp_ms, max_offsets)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if path.stat().st_size + len(line) > max_bytes:
            os.replace(path, path.with_name(path.name + ".1"))
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        return os.write(fd, line)
    finally:
        os.close(fd)


class OffsetHistoryService(Service):
    """Appends the offset table to the history file every ``interval_ms``.

    Args:
        offsets: the broker's ``ConsumerOffsetManager``.
        path: the history file (``<storeRoot>/config/consumerOffsetHistory.jsonl``).
        executor: where the file is written.
        clock: timestamps (``SystemClock`` by default).
        interval_ms: snapshot period (60 s by default); the first one after one period;
            0 or less writes nothing (``enabled`` is False).
        max_bytes: rotate past this size.
        max_offset: the store's queue ends; None writes offsets alone.
    """

    def __init__(
        self,
        offsets: ConsumerOffsetManager,
        path: Path,
        executor: BlockingExecutor,
        clock: Clock | None = None,
        *,
        interval_ms: int = DEFAULT_INTERVAL_MS,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_offset: MaxOffset | None = None,
    ) -> None:
        super().__init__("OffsetHistoryService")
        self.offsets = offsets
        self.path = path
        self.executor = executor
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.interval_ms = interval_ms
        self.max_bytes = max_bytes
        self.max_offset = max_offset
        self.snapshots = 0

    @property
    def enabled(self) -> bool:
        """Whether snapshots are taken (a positive interval)."""
        return self.interval_ms > 0

    async def on_start(self) -> None:
        """Schedule the periodic snapshot (none when disabled)."""
        if self.enabled:
            self.periodic(self.interval_ms / 1000, self.snapshot, name="offset-history")

    async def snapshot(self) -> None:
        """Append one snapshot now (also what each period runs)."""
        # offset_table() copies on the loop: commits keep mutating the live table.
        table = self.offsets.offset_table()
        ends = None if self.max_offset is None else queue_ends(table, self.max_offset)
        try:
            await self.executor.run(
                append_offset_snapshot, self.path, table, self.clock.now_ms(), self.max_bytes, ends
            )
        except OSError as exc:
            log.warning("offset history not written to %s: %s", self.path, exc)
            return
        self.snapshots += 1
