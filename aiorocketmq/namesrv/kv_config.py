"""KVConfigManager: namespaced key/value settings, persisted to ``kvConfig.json``.

Owns: the table namespace -> key -> value (RocketMQ keeps ``ORDER_TOPIC_CONFIG``
there: topic -> ``"broker-a:4;broker-b:4"``), loading it at start, and writing it
back after every change, atomically: the new text goes to a temporary file that is
fsynced and renamed over ``kvConfig.json``, after the previous file was copied to
``kvConfig.json.bak``; the directory is fsynced too. At load a missing or unreadable
main file falls back to the ``.bak``.

File format (Java's ``KVConfigSerializeWrapper``)::

    {"configTable":{"ORDER_TOPIC_CONFIG":{"TopicTest":"broker-a:4"}}}

Must not: do blocking I/O on the event loop. Reads and mutations are plain ``def``
methods on the loop; the file work runs in a one-thread ``BlockingExecutor`` whose
queue is FIFO, so snapshots reach the disk in the order they were taken.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from aiorocketmq.common import fastjson
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.route import KVTable
from aiorocketmq.runtime import BlockingExecutor
from aiorocketmq.runtime.files import read_with_backup_blocking, write_file_atomic_blocking

__all__ = ["NAMESPACE_ORDER_TOPIC_CONFIG", "KVConfigManager"]

log = logging.getLogger(__name__)

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
"""``NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG``: topic -> ``brokerName:queueNums;...``."""

ConfigTable = dict[str, dict[str, str]]


class KVConfigManager:
    """The KV-config table and its file.

    Args:
        path: ``kvConfigPath``, e.g. ``~/namesrv/kvConfig.json`` (already expanded).
        executor: Where file work runs; the manager does not own it.

    Attributes:
        generation: Bumped on every change, so callers can cache derived answers.
    """

    def __init__(self, path: Path, executor: BlockingExecutor) -> None:
        self.path = path
        self._executor = executor
        self._table: ConfigTable = {}
        self.generation = 0

    async def load(self) -> None:
        """Read the file (or its ``.bak``); a missing file means an empty table.

        Raises:
            RemoteProtocolError: neither the file nor its backup parses.
        """
        self._table = await self._executor.run(load_table_blocking, self.path)
        self.generation += 1
        log.info("kv config loaded path=%s namespaces=%d", self.path, len(self._table))

    def put(self, namespace: str, key: str, value: str) -> None:
        """Set ``namespace``/``key`` in memory; call ``persist`` to write it out."""
        table = self._table.setdefault(namespace, {})
        previous = table.get(key)
        table[key] = value
        self.generation += 1
        log.info(
            "kv config %s namespace=%s key=%s value=%s",
            "updated" if previous is not None else "created", namespace, key, value,
        )  # fmt: skip

    def delete(self, namespace: str, key: str) -> None:
        """Remove ``namespace``/``key`` in memory (a no-op when absent)."""
        table = self._table.get(namespace)
        if table is not None and table.pop(key, None) is not None:
            self.generation += 1
            log.info("kv config deleted namespace=%s key=%s", namespace, key)

    def get(self, namespace: str, key: str) -> str | None:
        """The value, or None."""
        table = self._table.get(namespace)
        return None if table is None else table.get(key)

    def get_kv_list_by_namespace(self, namespace: str) -> KVTable | None:
        """A copy of one namespace, or None if it was never created.

        A namespace whose last key was deleted still exists (and is empty), as in Java.
        """
        table = self._table.get(namespace)
        return None if table is None else KVTable(dict(table))

    def snapshot_text(self) -> str:
        """The file's content for the current table."""
        return fastjson.dumps({"configTable": self._table})

    def persist(self) -> asyncio.Future[None]:
        """Write the current table to the file (atomically, see the module docstring).

        The snapshot is taken now, at the call, on the loop; the returned future
        completes once the thread has written it. Await it: a failed write (disk
        full...) raises there.
        """
        text = self.snapshot_text()
        return asyncio.ensure_future(
            self._executor.run(write_file_atomic_blocking, self.path, text)
        )


def _parse_table(text: str, source: Path) -> ConfigTable:
    doc = fastjson.loads_object(text, str(source))
    table = fastjson.as_dict(doc.get("configTable") or {}, "configTable")
    out: ConfigTable = {}
    for namespace, entries in table.items():
        values = fastjson.as_dict(entries, f"configTable[{namespace}]")
        if not all(isinstance(v, str) for v in values.values()):
            raise RemoteProtocolError(f"{source}: namespace {namespace!r} has non-string values")
        out[namespace] = dict(values)
    return out


def load_table_blocking(path: Path) -> ConfigTable:
    """Read ``path``, falling back to ``path.bak``; runs in the executor.

    A missing or empty file reads as an empty table
    (``runtime.files.read_with_backup_blocking``).

    Raises:
        RemoteProtocolError: a file has content but neither parses.
        OSError: a file exists but cannot be read.
    """
    table = read_with_backup_blocking(path, lambda text: _parse_table(text, path))
    return {} if table is None else table
