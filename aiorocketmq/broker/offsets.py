"""ConsumerOffsetManager: committed consumer offsets and ``consumerOffset.json``.

Owns: the table ``"topic@group" -> {queueId: offset}`` (the offset is the next
ConsumeQueue index to consume), its file (read tolerantly: fastjson writes the
queue ids bare, ``{0:250,1:250}``; written in RocketMQ's PrettyFormat form, the
same bare keys, tab-indented), the queries the consumer-manage and admin
processors need, the merge rules of master/slave offset exchange (a slave keeps
the larger of its and its master's offsets; a master takes its slaves' larger
offsets, capped at its own queue ends: ``merge_from_slaves``), and
``ConsumerOffsetFlushService``, which persists the table every
``flushConsumerOffsetInterval`` (first after 10 s, as ``BrokerController``) and
once more at shutdown.

Must not: do file I/O on the loop (``ConfigManager.persist`` uses the executor),
or reach into the store: the queries that need the store's min or max offsets
take them as callables.

File form (``RemotingSerializable.toJson(this, true)``)::

    {
    \t"offsetTable":{
    \t\t"TopicTest@group_a":{0:250,1:250
    \t\t}
    \t}
    }
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final, NamedTuple

from aiorocketmq.broker.config_manager import ConfigManager
from aiorocketmq.common import fastjson
from aiorocketmq.common.errors import RemoteProtocolError
from aiorocketmq.runtime import BlockingExecutor, Service

__all__ = [
    "TOPIC_GROUP_SEPARATOR",
    "ConsumerOffsetFlushService",
    "ConsumerOffsetManager",
    "MaxOffset",
    "OffsetTable",
    "RaisedOffset",
    "merge_offset_tables",
]

log = logging.getLogger(__name__)

TOPIC_GROUP_SEPARATOR: Final = "@"
OffsetTable = dict[str, dict[int, int]]
#: ``(topic, queue_id) -> the queue's max offset`` on this broker (0 when unknown).
MaxOffset = Callable[[str, int], int]
FIRST_FLUSH_DELAY_MS: Final = 10_000
"""BrokerController schedules the first consumerOffset.json flush 10 s after start."""


def _key(topic: str, group: str) -> str:
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


def _split(key: str) -> tuple[str, str] | None:
    # Java: key.split("@") must give exactly two parts; other keys are skipped.
    parts = key.split(TOPIC_GROUP_SEPARATOR)
    return (parts[0], parts[1]) if len(parts) == 2 else None


class RaisedOffset(NamedTuple):
    """One offset a master raised to its slaves' value (``merge_from_slaves``).

    Attributes:
        topic, group, queue_id: where.
        before: the master's offset before (-1: none).
        after: the new offset.
    """

    topic: str
    group: str
    queue_id: int
    before: int
    after: int


def merge_offset_tables(tables: Iterable[OffsetTable]) -> OffsetTable:
    """The largest offset per ``topic@group`` and queue over several tables (one per
    slave): the slave that saw the most progress wins, whichever it is."""
    merged: OffsetTable = {}
    for table in tables:
        for key, queues in table.items():
            into = merged.setdefault(key, {})
            for queue_id, offset in queues.items():
                if offset > into.get(queue_id, -1):
                    into[queue_id] = offset
    return merged


class ConsumerOffsetManager(ConfigManager[OffsetTable]):
    """Committed offsets per topic, group and queue.

    Args:
        path: ``<storePathRootDir>/config/consumerOffset.json``.
        executor: Where file work runs; not owned.
    """

    def __init__(self, path: Path, executor: BlockingExecutor) -> None:
        super().__init__(path, executor)
        self._table: OffsetTable = {}

    # -- file form -----------------------------------------------------------------

    def encode(self, pretty: bool = False) -> str:
        """``{"offsetTable":{...}}`` with bare queue-id keys (the compact form is
        GET_ALL_CONSUMER_OFFSET's body)."""
        doc = {"offsetTable": self._table}
        return fastjson.dumps_pretty(doc) if pretty else fastjson.dumps(doc, unquoted_int_keys=True)

    def parse(self, text: str) -> OffsetTable:
        """Read the file form (bare or quoted queue ids). Raises ``RemoteProtocolError``."""
        doc = fastjson.loads_object(text, str(self.path))
        raw = fastjson.as_dict(doc.get("offsetTable") or {}, "offsetTable")
        table: OffsetTable = {}
        for key, queues in raw.items():
            entries = fastjson.as_dict(queues or {}, f"offsetTable[{key}]")
            try:
                table[key] = {int(q): int(v) for q, v in entries.items()}
            except (TypeError, ValueError):
                raise RemoteProtocolError(f"offsetTable[{key}]: non-integer entry") from None
        return table

    def apply(self, table: OffsetTable) -> None:
        """Install a parsed table."""
        self._table = table

    # -- commit and query ------------------------------------------------------------

    def commit_offset(
        self, client_host: str, group: str, topic: str, queue_id: int, offset: int
    ) -> bool:
        """Record ``offset`` as the next one ``group`` consumes in ``topic``/``queue_id``.

        A negative offset is ignored (ali-ons commits -1 for queues it never read;
        RocketMQ 4.9.8 would store it). A smaller offset than before is stored, as
        in Java (a consumer reset its offset).

        Returns:
            Whether the offset was stored.
        """
        if offset < 0:
            log.debug(
                "negative offset ignored client=%s group=%s topic=%s queue_id=%d offset=%d",
                client_host, group, topic, queue_id, offset,
            )  # fmt: skip
            return False
        self._table.setdefault(_key(topic, group), {})[queue_id] = offset
        return True

    def merge_from_master(self, table: OffsetTable) -> bool:
        """A slave's sync: take the master's offsets, keeping a larger one committed
        here (consumers commit to a slave while the master is down; Java's
        ``putAll`` would roll that progress back). Whether anything changed."""
        changed = False
        for key, queues in table.items():
            mine = self._table.setdefault(key, {})
            for queue_id, offset in queues.items():
                if offset > mine.get(queue_id, -1):
                    mine[queue_id] = offset
                    changed = True
        return changed

    def merge_from_slaves(self, table: OffsetTable, max_offset: MaxOffset) -> list[RaisedOffset]:
        """A master's catch-up: raise offsets to what its slaves hold.

        Consumers commit to a slave while the master is down; without this the
        restarted master sends them back to its older offsets and everything
        consumed in between is delivered again. The rules:

        * an offset only moves forward: a slave's smaller value never lowers one;
        * it never moves past ``max_offset(topic, queue_id)``, the master's own
          end of that queue: a slave that holds offsets for data the master
          lost would otherwise make the master skip the messages it writes
          there next;
        * keys that are not ``topic@group`` are skipped (as Java's readers do).

        Args:
            table: the slaves' offsets, already merged (``merge_offset_tables``).
            max_offset: the master's max offset of a queue (0 when unknown).

        Returns:
            What was raised, in table order (empty when nothing changed).
        """
        raised: list[RaisedOffset] = []
        for key, queues in table.items():
            tg = _split(key)
            if tg is None:
                continue
            mine = self._table.get(key)
            for queue_id, offset in queues.items():
                current = -1 if mine is None else mine.get(queue_id, -1)
                capped = min(offset, max_offset(tg[0], queue_id))
                if capped <= current:
                    continue
                if mine is None:
                    mine = self._table[key] = {}
                mine[queue_id] = capped
                raised.append(RaisedOffset(tg[0], tg[1], queue_id, current, capped))
        return raised

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when none."""
        queues = self._table.get(_key(topic, group))
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int] | None:
        """A copy of ``group``'s offsets in ``topic`` (queueId -> offset), or None."""
        queues = self._table.get(_key(topic, group))
        return None if queues is None else dict(queues)

    def offset_table(self) -> OffsetTable:
        """A copy of the whole table (GET_ALL_CONSUMER_OFFSET, slave sync)."""
        return {k: dict(v) for k, v in self._table.items()}

    def which_topic_by_consumer(self, group: str) -> set[str]:
        """Topics ``group`` has offsets in."""
        return {tg[0] for k in self._table if (tg := _split(k)) is not None and tg[1] == group}

    def which_group_by_topic(self, topic: str) -> set[str]:
        """Groups that have offsets in ``topic``."""
        return {tg[1] for k in self._table if (tg := _split(k)) is not None and tg[0] == topic}

    def groups_and_topics(self) -> list[tuple[str, str]]:
        """Every ``(topic, group)`` with offsets."""
        return [tg for k in self._table if (tg := _split(k)) is not None]

    # -- admin -----------------------------------------------------------------------

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> None:
        """Copy ``src_group``'s offsets in ``topic`` to ``dest_group`` (cloneGroupOffset)."""
        queues = self._table.get(_key(topic, src_group))
        if queues is not None:
            self._table[_key(topic, dest_group)] = dict(queues)

    def reset_offset(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        """Overwrite ``group``'s offsets in ``topic`` (admin reset; negatives kept out)."""
        table = self._table.setdefault(_key(topic, group), {})
        table.update({q: o for q, o in offsets.items() if o >= 0})

    def remove_offset(self, group: str) -> None:
        """Forget every offset of ``group`` (its subscription group was deleted)."""
        for key in [k for k in self._table if (tg := _split(k)) and tg[1] == group]:
            del self._table[key]

    def query_min_offset_in_all_group(
        self, topic: str, filter_groups: str, min_offset_in_queue: Callable[[str, int], int]
    ) -> dict[int, int]:
        """Per queue, the smallest committed offset of ``topic`` over all groups.

        Groups in the ``,``-separated ``filter_groups`` are skipped; offsets below
        the queue's min offset in the store are skipped (``queryMinOffsetInAllGroup``).
        """
        skipped = {g for g in filter_groups.split(",") if g.strip()} if filter_groups else set()
        result: dict[int, int] = {}
        for key, queues in self._table.items():
            tg = _split(key)
            if tg is None or tg[0] != topic or tg[1] in skipped:
                continue
            for queue_id, offset in queues.items():
                if offset >= min_offset_in_queue(topic, queue_id):
                    result[queue_id] = min(offset, result.get(queue_id, offset))
        return result


class ConsumerOffsetFlushService(Service):
    """Persists consumer offsets periodically and at shutdown.

    Args:
        manager: The offsets.
        interval_ms: ``flushConsumerOffsetInterval`` (5000 by default).
        initial_delay_ms: Delay of the first flush (RocketMQ: 10 s).
    """

    def __init__(
        self,
        manager: ConsumerOffsetManager,
        interval_ms: int,
        initial_delay_ms: int = FIRST_FLUSH_DELAY_MS,
    ) -> None:
        super().__init__("ConsumerOffsetFlushService")
        self.manager = manager
        self._interval_s = interval_ms / 1000
        self._initial_delay_s = initial_delay_ms / 1000
        self.flushes = 0

    async def on_start(self) -> None:
        """Schedule the periodic flush."""
        self.periodic(
            self._interval_s,
            self._flush,
            name="consumer-offset-flush",
            initial_delay_s=self._initial_delay_s,
        )

    async def _flush(self) -> None:
        await self.manager.persist()
        self.flushes += 1

    async def on_shutdown(self) -> None:
        """The last flush: what consumers committed just before SIGTERM is kept."""
        await self._flush()
