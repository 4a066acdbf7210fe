"""Consumer-offset history: a snapshot of the offset table appended every interval.

Owns: the history file ``<storeRoot>/config/consumerOffsetHistory.jsonl`` (one JSON
object a line: ``{"timestamp":<ms>,"offsetTable":{"topic@group":{"<queueId>":<offset>}}}``,
standard JSON with quoted keys), its rotation (past ``max_bytes`` the file becomes
``.1``, replacing the older one), ``append_offset_snapshot`` (blocking; run it in the
executor) and ``OffsetHistoryService`` (every ``interval_ms``, 60 s by default).
``aiorocketmq.analytics.offsets.offset_history`` reads the file, so consumer lag over
time is a join with the ConsumeQueue ends. RocketMQ has no such file: it is ours.

Wiring (BrokerController): ``OffsetHistoryService(ctx.offsets, store_root / "config" /
HISTORY_FILE, executor, clock)``, started after the offset manager loaded, shut down
before it.

Must not: block the loop (the table is copied on the loop, written in the executor),
or fail the broker over a history write: an OSError is logged and the next run tries
again.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Final

from aiorocketmq.broker.offsets import ConsumerOffsetManager, OffsetTable
from aiorocketmq.common.clock import Clock, SystemClock
from aiorocketmq.runtime import BlockingExecutor, Service

__all__ = [
    "DEFAULT_INTERVAL_MS",
    "DEFAULT_MAX_BYTES",
    "HISTORY_FILE",
    "OffsetHistoryService",
    "append_offset_snapshot",
    "snapshot_line",
]

log = logging.getLogger(__name__)

HISTORY_FILE: Final = "consumerOffsetHistory.jsonl"
DEFAULT_INTERVAL_MS: Final = 60_000
DEFAULT_MAX_BYTES: Final = 64 * 1024 * 1024


def snapshot_line(table: OffsetTable, timestamp_ms: int) -> bytes:
    """One history line (with its newline) for ``table`` at ``timestamp_ms``."""
    doc = {
        "timestamp": timestamp_ms,
        "offsetTable": {
            key: {str(q): o for q, o in sorted(queues.items())}
            for key, queues in sorted(table.items())
        },
    }
    return json.dumps(doc, separators=(",", ":")).encode("utf-8") + b"\n"


def append_offset_snapshot(
    path: Path, table: OffsetTable, timestamp_ms: int, max_bytes: int = DEFAULT_MAX_BYTES
) -> int:
    """Append one snapshot line to ``path`` (blocking); rotate first if it is too big.

    One ``write`` of the whole line on an O_APPEND descriptor: a crash leaves at most
    a torn last line, which readers skip.

    Returns:
        The bytes written.
    """
    line = snapshot_line(table, timestamp_ms)
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
        interval_ms: snapshot period (60 s by default); the first one after one period.
        max_bytes: rotate past this size.
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
    ) -> None:
        super().__init__("OffsetHistoryService")
        self.offsets = offsets
        self.path = path
        self.executor = executor
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.interval_ms = interval_ms
        self.max_bytes = max_bytes
        self.snapshots = 0

    async def on_start(self) -> None:
        """Schedule the periodic snapshot."""
        self.periodic(self.interval_ms / 1000, self.snapshot, name="offset-history")

    async def snapshot(self) -> None:
        """Append one snapshot now (also what each period runs)."""
        # offset_table() copies on the loop: commits keep mutating the live table.
        table = self.offsets.offset_table()
        try:
            await self.executor.run(
                append_offset_snapshot, self.path, table, self.clock.now_ms(), self.max_bytes
            )
        except OSError as exc:
            log.warning("offset history not written to %s: %s", self.path, exc)
            return
        self.snapshots += 1
