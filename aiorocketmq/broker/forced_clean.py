"""ForcedCleanLosses: who lost what when a full disk forced CommitLog files out early.

Owns: after each forced deletion (``cleanFileForciblyEnable`` with the disk above
``diskSpaceCleanForciblyRatio``: files go before ``fileReservedTime``), comparing
every group's committed offset with its queues' new first offset, logging the groups
that lost messages they had not consumed (one WARN line per group and topic) and
keeping the totals ``/metrics`` exports. Messages behind a committed offset were
consumed already and do not count; each lost message counts once, however many
deletions follow.

Must not: touch the store's files or offsets (the cleanup service deleted and
corrected them before calling), or run anywhere but the event loop.
"""

from __future__ import annotations

import logging

from aiorocketmq.broker.context import BrokerContext

__all__ = ["ForcedCleanLosses"]

log = logging.getLogger(__name__)


class ForcedCleanLosses:
    """Unconsumed messages lost to forced cleaning, per group and topic.

    Args:
        ctx: the broker's context (store and committed offsets).

    Attributes:
        lost: ``(group, topic) -> messages`` lost since the broker started.
    """

    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx
        self._counted_to: dict[tuple[str, str, int], int] = {}
        self.lost: dict[tuple[str, str], int] = {}

    def on_forced_delete(self) -> None:
        """Count, log and keep what each group lost (the cleanup service's hook)."""
        store, offsets = self._ctx.store, self._ctx.offsets
        for topic, group in offsets.groups_and_topics():
            lost = 0
            for queue_id, committed in (offsets.query_offsets(group, topic) or {}).items():
                if committed < 0:
                    continue
                key = (group, topic, queue_id)
                first = store.get_min_offset_in_queue(topic, queue_id)
                start = max(committed, self._counted_to.get(key, 0))
                if first > start:
                    lost += first - start
                    self._counted_to[key] = first
            if lost:
                self.lost[(group, topic)] = self.lost.get((group, topic), 0) + lost
                log.warning(
                    "forced cleaning deleted %d messages of %s that group %s had not consumed",
                    lost, topic, group,
                )  # fmt: skip
