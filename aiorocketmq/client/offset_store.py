"""Consumer offset stores: on the brokers (clustering) or in a local file (broadcasting).

Owns (Java 4.9.8 ``RemoteBrokerOffsetStore`` / ``LocalFileOffsetStore``):

- the in-memory table ``MessageQueue -> next offset to consume`` with
  ``update_offset(increase_only)``, ``read_offset(ReadOffsetType)`` (-1 "none",
  -2 "could not ask"), ``remove_offset`` and ``clone_offset_table``;
- ``RemoteBrokerOffsetStore``: reads ask the master only (``only_this_broker``
  true), falling back to any node after a route refresh; writes go to the master,
  and to a slave when the route lists no master any more
  (``find_broker_address_in_subscribe(name, 0, only_this_broker=False)``), oneway
  for the periodic persist as Java does;
- ``LocalFileOffsetStore``: ``<dir>/<clientId>/<group>/offsets.json`` in the shape
  Java's fastjson writes (``{"offsetTable":{{"brokerName":..,"queueId":..,"topic":..}:5}}``,
  object keys, hence the small reader here), replaced atomically with a ``.bak``.

Must not: choose where consumption starts (the consumer does), or block the loop
(file work runs in the instance's ``BlockingExecutor``).
"""

from __future__ import annotations

import enum
import json
import logging
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from aiorocketmq.client.errors import BrokerNotFoundError, MQBrokerError, MQClientError
from aiorocketmq.client.instance import ClientInstance, FindBrokerResult
from aiorocketmq.common.constants import MASTER_ID
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.common.message import MessageQueue
from aiorocketmq.remoting.broker_headers import (
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from aiorocketmq.runtime import BlockingExecutor
from aiorocketmq.runtime.files import read_with_backup_blocking, write_file_atomic_blocking

__all__ = [
    "LocalFileOffsetStore",
    "OffsetStore",
    "ReadOffsetType",
    "RemoteBrokerOffsetStore",
    "decode_offsets_json",
    "encode_offsets_json",
    "new_offset_store",
]

log = logging.getLogger(__name__)

OFFSET_REQUEST_TIMEOUT_MS: Final = 5_000
"""Java's RemoteBrokerOffsetStore uses 5 s for offset requests."""


def new_offset_store(
    instance: ClientInstance, group: str, *, broadcasting: bool, directory: Path
) -> tuple[RemoteBrokerOffsetStore | LocalFileOffsetStore, BlockingExecutor | None]:
    """A consumer's offset store: a local file in BROADCASTING, the brokers otherwise.

    Returns:
        The store, and the executor a local file store writes through (the consumer
        shuts it down after the store's last persist); None for the brokers' store.
    """
    if broadcasting:
        executor = BlockingExecutor(f"offsets-{group}")
        return LocalFileOffsetStore(directory, instance.client_id, group, executor), executor
    return RemoteBrokerOffsetStore(instance, group), None


class ReadOffsetType(enum.Enum):
    """Where ``read_offset`` looks (Java's ``ReadOffsetType``)."""

    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class OffsetStore:
    """The in-memory table both stores share."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.offset_table: dict[MessageQueue, int] = {}

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        """Set ``mq``'s offset; with ``increase_only`` never move it back."""
        current = self.offset_table.get(mq)
        if increase_only and current is not None and offset <= current:
            return
        self.offset_table[mq] = offset

    def remove_offset(self, mq: MessageQueue) -> None:
        """Forget ``mq`` (the queue went to another consumer)."""
        self.offset_table.pop(mq, None)

    def clone_offset_table(self, topic: str) -> dict[MessageQueue, int]:
        """A copy of the offsets of ``topic``'s queues."""
        return {mq: o for mq, o in self.offset_table.items() if mq.topic == topic}

    def _memory(self, mq: MessageQueue) -> int | None:
        return self.offset_table.get(mq)


class RemoteBrokerOffsetStore(OffsetStore):
    """Offsets kept by the brokers, for clustering consumers (module docstring).

    Args:
        instance: the client instance (broker lookup, requests).
        group: the consumer group.
    """

    def __init__(self, instance: ClientInstance, group: str) -> None:
        super().__init__(group)
        self.instance = instance

    async def load(self) -> None:
        """Nothing to load: offsets are read from the broker on demand."""

    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        """The offset to consume ``mq`` from: -1 when there is none, -2 when asking failed."""
        if read_type is not ReadOffsetType.READ_FROM_STORE:
            offset = self._memory(mq)
            if offset is not None:
                return offset
            if read_type is ReadOffsetType.READ_FROM_MEMORY:
                return -1
        try:
            offset = await self.fetch_consume_offset_from_broker(mq)
        except MQBrokerError:
            return -1  # the broker has no offset for this group and queue
        except MQClientError as exc:
            log.warning("fetch consume offset failed mq=%s error=%s", mq, exc)
            return -2
        self.update_offset(mq, offset)
        return offset

    async def _find(self, mq: MessageQueue, only_this_broker: bool) -> FindBrokerResult:
        found = self.instance.find_broker_address_in_subscribe(
            mq.broker_name, MASTER_ID, only_this_broker
        )
        if found is None:
            await self.instance.update_topic_route(mq.topic)
            found = self.instance.find_broker_address_in_subscribe(mq.broker_name, MASTER_ID, False)
        if found is None:
            raise BrokerNotFoundError(mq.broker_name)
        return found

    async def fetch_consume_offset_from_broker(self, mq: MessageQueue) -> int:
        """QUERY_CONSUMER_OFFSET to the master (any node after a route refresh)."""
        found = await self._find(mq, only_this_broker=True)
        header = QueryConsumerOffsetRequestHeader(self.group, mq.topic, mq.queue_id)
        return await self.instance.api.query_consumer_offset(
            found.address, header, OFFSET_REQUEST_TIMEOUT_MS
        )

    async def update_consume_offset_to_broker(
        self, mq: MessageQueue, offset: int, *, oneway: bool = True
    ) -> None:
        """UPDATE_CONSUMER_OFFSET to the master, or a slave when the master is gone."""
        found = await self._find(mq, only_this_broker=False)
        header = UpdateConsumerOffsetRequestHeader(self.group, mq.topic, mq.queue_id, offset)
        await self.instance.api.update_consumer_offset(
            found.address, header, OFFSET_REQUEST_TIMEOUT_MS, oneway=oneway
        )

    async def persist(self, mq: MessageQueue, *, oneway: bool = True) -> None:
        """Send ``mq``'s cached offset to its broker (if cached)."""
        offset = self._memory(mq)
        if offset is not None:
            await self.update_consume_offset_to_broker(mq, offset, oneway=oneway)

    async def persist_all(self, mqs: Iterable[MessageQueue], *, oneway: bool = True) -> None:
        """Send the offsets of ``mqs`` (Java's persistAll); forget cached queues not in it.

        One queue's failure is logged and does not stop the others.
        """
        wanted = set(mqs)
        if not wanted:
            return
        for mq, offset in list(self.offset_table.items()):
            if mq not in wanted:
                continue
            try:
                await self.update_consume_offset_to_broker(mq, offset, oneway=oneway)
            except MQClientError as exc:
                log.warning("persist offset failed group=%s mq=%s error=%s", self.group, mq, exc)
        for mq in [mq for mq in self.offset_table if mq not in wanted]:
            del self.offset_table[mq]
            log.info("removed unused mq from offset table group=%s mq=%s", self.group, mq)


_ENTRY_RE: Final = re.compile(r"\{([^{}]*)\}\s*:\s*(-?\d+)")


def encode_offsets_json(table: dict[MessageQueue, int]) -> str:
    """Java's ``OffsetSerializeWrapper`` as fastjson writes it (MessageQueue object keys)."""
    entries = ",".join(
        f'{{"brokerName":{json.dumps(mq.broker_name)},"queueId":{mq.queue_id},'
        f'"topic":{json.dumps(mq.topic)}}}:{offset}'
        for mq, offset in sorted(table.items())
    )
    return '{"offsetTable":{' + entries + "}}"


def decode_offsets_json(text: str) -> dict[MessageQueue, int]:
    """Read ``encode_offsets_json``'s shape, compact or pretty (any key order).

    Raises:
        RemoteProtocolError: the text has no ``offsetTable`` or an entry is malformed.
    """
    if '"offsetTable"' not in text:
        raise RemoteProtocolError("offsets file has no offsetTable")
    table: dict[MessageQueue, int] = {}
    for match in _ENTRY_RE.finditer(text):
        try:
            key = json.loads("{" + match.group(1) + "}")
        except ValueError as exc:
            raise RemoteProtocolError(f"bad offsets entry {match.group(0)!r}") from exc
        table[MessageQueue.from_json_dict(key)] = int(match.group(2))
    return table


class LocalFileOffsetStore(OffsetStore):
    """Offsets in a local file, for broadcasting consumers (module docstring).

    Args:
        store_dir: Java's ``rocketmq.client.localOffsetStoreDir`` (default
            ``~/.rocketmq_offsets``).
        client_id: the client id (a directory level, as Java).
        group: the consumer group.
        executor: where the file work runs.
    """

    def __init__(
        self, store_dir: Path, client_id: str, group: str, executor: BlockingExecutor
    ) -> None:
        super().__init__(group)
        self.path = store_dir / client_id / group / "offsets.json"
        self._executor = executor

    async def load(self) -> None:
        """Read the file (or its ``.bak``) into the table."""
        loaded = await self._executor.run(read_with_backup_blocking, self.path, decode_offsets_json)
        if loaded:
            self.offset_table.update(loaded)

    async def read_offset(self, mq: MessageQueue, read_type: ReadOffsetType) -> int:
        """The offset of ``mq``: from memory, or from the file; -1 when none."""
        if read_type is not ReadOffsetType.READ_FROM_STORE:
            offset = self._memory(mq)
            if offset is not None or read_type is ReadOffsetType.READ_FROM_MEMORY:
                return -1 if offset is None else offset
        loaded = await self._executor.run(read_with_backup_blocking, self.path, decode_offsets_json)
        offset = (loaded or {}).get(mq)
        if offset is None:
            return -1
        self.update_offset(mq, offset)
        return offset

    async def persist_all(self, mqs: Iterable[MessageQueue], *, oneway: bool = True) -> None:
        """Write the offsets of ``mqs`` to the file, atomically."""
        wanted = set(mqs)
        if not wanted:
            return
        text = encode_offsets_json({mq: o for mq, o in self.offset_table.items() if mq in wanted})
        await self._executor.run(write_file_atomic_blocking, self.path, text)

    async def persist(self, mq: MessageQueue, *, oneway: bool = True) -> None:
        """Java persists nothing per queue for the local store; neither do we."""
