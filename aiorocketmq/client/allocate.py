"""Queue allocation strategies of a consumer group, as pure functions.

Owns: ``allocate_averagely``, ``allocate_averagely_by_circle`` and
``allocate_consistent_hash`` (with ``ConsistentHashRing``), giving the same answers
as Java 4.9.8's ``AllocateMessageQueueAveragely``, ``...AveragelyByCircle`` and
``...ConsistentHash`` (MD5 ring, 10 virtual nodes per consumer by default), and the
``AllocateStrategy`` type a push consumer takes.

Every consumer of a group runs the same function over the same sorted inputs
(the rebalance sorts queues and consumer ids first, as Java's ``RebalanceImpl``),
so each queue ends up with exactly one owner without any coordination.

Must not: sort its inputs (callers do, so that all consumers agree), do I/O, or
keep state between calls.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Sequence
from typing import Final

from aiorocketmq.client.errors import InvalidArgumentError
from aiorocketmq.common.message import MessageQueue

__all__ = [
    "DEFAULT_VIRTUAL_NODES",
    "AllocateStrategy",
    "ConsistentHashRing",
    "allocate_averagely",
    "allocate_averagely_by_circle",
    "allocate_consistent_hash",
    "java_mq_string",
    "md5_hash",
]

AllocateStrategy = Callable[[str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]
"""(current client id, all queues, all client ids) -> this client's queues."""

DEFAULT_VIRTUAL_NODES: Final = 10
"""Java's ``AllocateMessageQueueConsistentHash()`` default virtualNodeCnt."""


def _check(current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]) -> bool:
    """Java's ``AbstractAllocateMessageQueueStrategy.check``: raise on empty inputs,
    answer False (allocate nothing) when the current client is not listed."""
    if not current_cid:
        raise InvalidArgumentError("currentCID is empty")
    if not mq_all:
        raise InvalidArgumentError("mqAll is null or mqAll empty")
    if not cid_all:
        raise InvalidArgumentError("cidAll is null or cidAll empty")
    return current_cid in cid_all


def allocate_averagely(
    current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """Contiguous blocks; the first ``len(mq_all) % len(cid_all)`` consumers get one more.

    Raises:
        InvalidArgumentError: an input is empty.
    """
    if not _check(current_cid, mq_all, cid_all):
        return []
    n_mq, n_cid = len(mq_all), len(cid_all)
    index = cid_all.index(current_cid)
    mod = n_mq % n_cid
    if n_mq <= n_cid:
        average = 1
    elif mod > 0 and index < mod:
        average = n_mq // n_cid + 1
    else:
        average = n_mq // n_cid
    start = index * average if mod > 0 and index < mod else index * average + mod
    # Java's Math.min may go negative (more consumers than queues): range() is then empty.
    count = min(average, n_mq - start)
    return [mq_all[(start + i) % n_mq] for i in range(count)]


def allocate_averagely_by_circle(
    current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
) -> list[MessageQueue]:
    """Deal queues round the consumers like cards: queue i goes to consumer ``i % n``.

    Raises:
        InvalidArgumentError: an input is empty.
    """
    if not _check(current_cid, mq_all, cid_all):
        return []
    index = cid_all.index(current_cid)
    return [mq_all[i] for i in range(index, len(mq_all), len(cid_all))]


def md5_hash(key: str) -> int:
    """Java ``ConsistentHashRouter.MD5Hash``: the first 4 MD5 bytes as an unsigned int.

    Java hashes ``key.getBytes()`` in the platform charset; UTF-8 is assumed (client
    ids and queue strings are ASCII in practice).
    """
    return int.from_bytes(hashlib.md5(key.encode("utf-8"), usedforsecurity=False).digest()[:4])


def java_mq_string(mq: MessageQueue) -> str:
    """Java's ``MessageQueue.toString()``, the key queues are hashed by."""
    return f"MessageQueue [topic={mq.topic}, brokerName={mq.broker_name}, queueId={mq.queue_id}]"


class ConsistentHashRing:
    """Java's ``ConsistentHashRouter`` over client ids.

    Virtual node ``i`` of client ``cid`` sits at ``hash(f"{cid}-{i}")``; a later node
    with the same hash replaces an earlier one (Java's ``TreeMap.put``). A key routes
    to the first virtual node at or after its hash, wrapping round.

    Args:
        cids: the physical nodes, in order.
        virtual_nodes: virtual nodes per client.
        hash_function: the hash (default ``md5_hash``).
    """

    def __init__(
        self,
        cids: Sequence[str],
        virtual_nodes: int = DEFAULT_VIRTUAL_NODES,
        hash_function: Callable[[str], int] = md5_hash,
    ) -> None:
        if virtual_nodes < 0:
            raise InvalidArgumentError(f"illegal virtual node counts :{virtual_nodes}")
        self._hash = hash_function
        ring: dict[int, str] = {}
        replicas: dict[str, int] = {}
        for cid in cids:
            existing = replicas.get(cid, 0)  # a repeated cid adds further replicas, as Java
            for i in range(virtual_nodes):
                ring[hash_function(f"{cid}-{i + existing}")] = cid
            replicas[cid] = existing + virtual_nodes
        self._keys = sorted(ring)
        self._nodes = [ring[k] for k in self._keys]

    def route(self, key: str) -> str | None:
        """The client owning ``key``, or None for an empty ring."""
        if not self._keys:
            return None
        i = bisect.bisect_left(self._keys, self._hash(key))
        return self._nodes[i if i < len(self._keys) else 0]


def allocate_consistent_hash(
    current_cid: str,
    mq_all: Sequence[MessageQueue],
    cid_all: Sequence[str],
    *,
    virtual_nodes: int = DEFAULT_VIRTUAL_NODES,
    hash_function: Callable[[str], int] = md5_hash,
) -> list[MessageQueue]:
    """Each queue goes to the client its ``MessageQueue [...]`` string hashes to.

    Raises:
        InvalidArgumentError: an input is empty, or ``virtual_nodes`` is negative.
    """
    if not _check(current_cid, mq_all, cid_all):
        return []
    ring = ConsistentHashRing(cid_all, virtual_nodes, hash_function)
    return [mq for mq in mq_all if ring.route(java_mq_string(mq)) == current_cid]
