"""StoreStats: monotonic counters of puts, gets and dispatch.

Owns: the counters RocketMQ's ``StoreStatsService`` keeps for ``getRuntimeInfo``
(put/get totals, per-topic put times and bytes, messages transferred to pulls).
They only grow, so a sampler turns two ``snapshot()`` calls into TPS figures.

Must not: sample, schedule or log on its own (the broker's stats manager does), or
cost more than a few attribute increments on the put path.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Final

__all__ = ["PUT_SIZE_BUCKETS", "StoreStats"]

#: Upper bounds (bytes) of the per-put size histogram: RocketMQ 5's
#: ``rocketmq_message_size`` buckets (1 KB, 4 KB, 512 KB, 1 MB, 2 MB, 4 MB, +Inf).
PUT_SIZE_BUCKETS: Final = (1024, 4096, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)


@dataclass(slots=True)
class StoreStats:
    """Counters since the store started (never reset).

    Attributes:
        put_message_times_total: messages stored (a batch counts its messages).
        put_message_size_total: bytes appended to the CommitLog by puts.
        put_message_failed_times: puts that did not store their message(s).
        get_message_times_total_found: gets that returned messages.
        get_message_times_total_miss: gets that did not.
        get_message_transfered_msg_count: messages returned by gets.
        dispatched_messages: records the dispatcher put into queues and the index.
        topic_put_times: per topic, messages stored (on a slave: dispatched).
        topic_put_size: per topic, bytes stored (on a slave: dispatched).
        put_size_counts: puts by average stored size per message, one count per
            ``PUT_SIZE_BUCKETS`` bucket (``le``), +Inf last; not cumulative.
        put_size_sum: sum of those average sizes.
    """

    put_message_times_total: int = 0
    put_message_size_total: int = 0
    put_message_failed_times: int = 0
    get_message_times_total_found: int = 0
    get_message_times_total_miss: int = 0
    get_message_transfered_msg_count: int = 0
    dispatched_messages: int = 0
    topic_put_times: dict[str, int] = field(default_factory=dict)
    topic_put_size: dict[str, int] = field(default_factory=dict)
    put_size_counts: list[int] = field(default_factory=lambda: [0] * (len(PUT_SIZE_BUCKETS) + 1))
    put_size_sum: int = 0

    def count_put(self, topic: str, messages: int, size: int) -> None:
        """Record stored messages of one topic."""
        self.put_message_times_total += messages
        self.put_message_size_total += size
        times = self.topic_put_times
        times[topic] = times.get(topic, 0) + messages
        sizes = self.topic_put_size
        sizes[topic] = sizes.get(topic, 0) + size
        if messages > 0:
            # Like RocketMQ 5: one observation per put, of wroteBytes / msgNum.
            average = size // messages
            self.put_size_counts[bisect_left(PUT_SIZE_BUCKETS, average)] += 1
            self.put_size_sum += average

    def snapshot(self) -> dict[str, int]:
        """The scalar counters, for a sampler that computes rates."""
        return {
            "put_message_times_total": self.put_message_times_total,
            "put_message_size_total": self.put_message_size_total,
            "put_message_failed_times": self.put_message_failed_times,
            "get_message_times_total_found": self.get_message_times_total_found,
            "get_message_times_total_miss": self.get_message_times_total_miss,
            "get_message_transfered_msg_count": self.get_message_transfered_msg_count,
            "dispatched_messages": self.dispatched_messages,
        }
