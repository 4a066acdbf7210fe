"""ConfigManager: the load/persist protocol of the broker's JSON config files.

Owns: ``ConfigManager``, the base of ``TopicConfigManager``,
``SubscriptionGroupManager`` and ``ConsumerOffsetManager`` (RocketMQ's
``common/.../ConfigManager.java``): ``load()`` reads the file, falling back to
``<file>.bak`` when it is missing, empty or unparsable
(``runtime.files.read_with_backup_blocking``); ``persist()`` snapshots the
table as text on the loop and writes it atomically (temp file, fsync, rename,
``.bak``; ``runtime.files.write_file_atomic_blocking``) in the executor. File
names under ``<storePathRootDir>/config/`` (``BrokerPathConfigHelper``).

Must not: do file I/O on the event loop. The executor given is one thread with
a FIFO queue, so snapshots reach the disk in the order they were taken.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Final, Generic, TypeVar

from aiorocketmq.runtime import BlockingExecutor
from aiorocketmq.runtime.files import read_with_backup_blocking, write_file_atomic_blocking

__all__ = [
    "CONSUMER_OFFSET_FILE",
    "SUBSCRIPTION_GROUP_FILE",
    "TOPICS_FILE",
    "ConfigManager",
    "config_file_path",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

TOPICS_FILE: Final = "topics.json"
CONSUMER_OFFSET_FILE: Final = "consumerOffset.json"
SUBSCRIPTION_GROUP_FILE: Final = "subscriptionGroup.json"


def config_file_path(store_root: Path, name: str) -> Path:
    """``<storePathRootDir>/config/<name>`` (``BrokerPathConfigHelper``)."""
    return store_root / "config" / name


class ConfigManager(Generic[T]):
    """A table kept in memory and mirrored to one JSON file.

    Subclasses implement ``encode`` (the file's text for the current table),
    ``parse`` (a file's text -> a new table; pure, it runs in the executor;
    raises ``ValueError`` or ``RemoteProtocolError`` on bad content) and
    ``apply`` (install a parsed table; runs on the loop).

    Args:
        path: The file (already expanded).
        executor: Where file work runs; not owned.
    """

    def __init__(self, path: Path, executor: BlockingExecutor) -> None:
        self.path = path
        self._executor = executor
        self._dirty = False
        self._persist_task: asyncio.Task[None] | None = None
        self.persist_failures = 0

    def encode(self, pretty: bool = False) -> str:
        """The table as JSON text (``pretty``: fastjson's PrettyFormat, the file form)."""
        raise NotImplementedError

    def parse(self, text: str) -> T:
        """A table from a file's text (pure: no state touched)."""
        raise NotImplementedError

    def apply(self, table: T) -> None:
        """Install a parsed table."""
        raise NotImplementedError

    def decode(self, text: str) -> None:
        """Replace the table with the content of ``text`` (``ConfigManager.decode``)."""
        self.apply(self.parse(text))

    async def load(self) -> bool:
        """Read the file (or its ``.bak``). A missing file leaves the table empty.

        Returns:
            True if a file was read.

        Raises:
            RemoteProtocolError | ValueError: a file has content but neither parses
                (RocketMQ refuses to start then too).
        """
        table = await self._executor.run(read_with_backup_blocking, self.path, self.parse)
        log.info("config loaded path=%s found=%s", self.path, table is not None)
        if table is None:
            return False
        self.apply(table)
        return True

    async def persist(self) -> None:
        """Write the current table to the file, atomically.

        The snapshot is taken when this coroutine starts; a failed write (disk
        full...) raises here.
        """
        text = self.encode(pretty=True)
        await self._executor.run(write_file_atomic_blocking, self.path, text)

    def request_persist(self) -> None:
        """Persist soon, from a plain ``def`` mutation on the loop (RocketMQ persists
        on every change). Requests made while a write runs coalesce into one more
        write of the then-current table. A failed write is logged and counted in
        ``persist_failures``; the next change or ``flush()`` retries it.
        """
        self._dirty = True
        if self._persist_task is None or self._persist_task.done():
            self._persist_task = asyncio.get_running_loop().create_task(
                self._persist_pending(), name=f"persist-{self.path.name}"
            )

    async def _persist_pending(self) -> None:
        while self._dirty:
            self._dirty = False
            try:
                await self.persist()
            except OSError as exc:
                self.persist_failures += 1
                log.error("config persist failed path=%s error=%s", self.path, exc)
                return

    async def flush(self) -> None:
        """Wait for requested writes, then write the current table (shutdown)."""
        if self._persist_task is not None:
            await asyncio.gather(self._persist_task, return_exceptions=True)
        self._dirty = False
        await self.persist()
