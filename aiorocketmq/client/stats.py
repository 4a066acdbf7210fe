"""Consumer figures per (group, topic), as Java's ``ConsumerStatsManager`` keeps them.

Pull RT and TPS, consume RT, consume OK and failed TPS over the last minute, and
failed messages over the last hour; ``consume_status`` answers them as the
``ConsumeStatus`` bean GET_CONSUMER_RUNNING_INFO reports (``mqadmin consumerStatus``).

Events go into per-second buckets (a count and a sum each); a rate is the events of
the window divided by the seconds the window covers so far (at most 60), so a
consumer started 5 s ago reports its real rate, not a fifth of it.

Owns: the buckets. Must not: block or allocate per event beyond one bucket a second.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from aiorocketmq.common.running_info import ConsumeStatus

__all__ = ["ConsumerStatsManager"]

_MINUTE_S = 60
_HOUR_S = 3600


class _Series:
    """Per-second (second, count, sum) buckets, kept ``horizon_s`` seconds."""

    __slots__ = ("_buckets", "_first", "_horizon")

    def __init__(self, horizon_s: int) -> None:
        self._horizon = horizon_s
        self._buckets: deque[list[float]] = deque()
        self._first: float | None = None

    def add(self, now: float, count: float, total: float) -> None:
        second = int(now)
        buckets = self._buckets
        if buckets and buckets[-1][0] == second:  # the usual event: this second's bucket
            bucket = buckets[-1]
            bucket[1] += count
            bucket[2] += total
            return
        if self._first is None:
            self._first = now
        buckets.append([second, count, total])
        self._trim(second)  # only a new second can push an old one out

    def _trim(self, second: int) -> None:
        while self._buckets and self._buckets[0][0] <= second - self._horizon:
            self._buckets.popleft()

    def window(self, now: float, seconds: int) -> tuple[float, float, float]:
        """(count, sum, covered seconds) of the last ``seconds``."""
        second = int(now)
        self._trim(second)
        count = total = 0.0
        for start, n, s in self._buckets:
            if start > second - seconds:
                count += n
                total += s
        covered = seconds if self._first is None else min(seconds, max(1.0, now - self._first))
        return count, total, covered


class ConsumerStatsManager:
    """One client instance's consumer figures (Java's ``ConsumerStatsManager``).

    Args:
        clock: seconds (monotonic); tests pass their own.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._series: dict[tuple[str, str, str], _Series] = {}

    def _add(self, kind: str, group: str, topic: str, count: float, total: float = 0.0) -> None:
        key = (kind, group, topic)
        series = self._series.get(key)
        if series is None:
            horizon = _HOUR_S if kind == "failed" else _MINUTE_S
            series = self._series[key] = _Series(horizon)
        series.add(self._clock(), count, total)

    def inc_pull_rt(self, group: str, topic: str, rt_ms: float) -> None:
        """One pull took ``rt_ms``."""
        self._add("pull_rt", group, topic, 1, rt_ms)

    def inc_pull_tps(self, group: str, topic: str, msgs: int) -> None:
        """A pull found ``msgs`` messages."""
        self._add("pull_tps", group, topic, msgs)

    def inc_consume_rt(self, group: str, topic: str, rt_ms: float) -> None:
        """One listener call took ``rt_ms``."""
        self._add("consume_rt", group, topic, 1, rt_ms)

    def inc_consume_ok(self, group: str, topic: str, msgs: int) -> None:
        """``msgs`` messages were consumed."""
        self._add("ok", group, topic, msgs)

    def inc_consume_failed(self, group: str, topic: str, msgs: int) -> None:
        """``msgs`` messages failed (to be retried)."""
        self._add("failed", group, topic, msgs)

    def _window(self, kind: str, group: str, topic: str) -> tuple[float, float, float]:
        series = self._series.get((kind, group, topic))
        if series is None:
            return 0.0, 0.0, 1.0
        return series.window(self._clock(), _MINUTE_S)

    def consume_status(self, group: str, topic: str) -> ConsumeStatus:
        """The last minute's figures (failed messages: the last hour's)."""
        status = ConsumeStatus()
        n, total, _ = self._window("pull_rt", group, topic)
        status.pull_rt = total / n if n else 0.0
        n, _, covered = self._window("pull_tps", group, topic)
        status.pull_tps = n / covered
        n, total, _ = self._window("consume_rt", group, topic)
        status.consume_rt = total / n if n else 0.0
        n, _, covered = self._window("ok", group, topic)
        status.consume_ok_tps = n / covered
        n, _, covered = self._window("failed", group, topic)
        status.consume_failed_tps = n / covered
        failed = self._series.get(("failed", group, topic))
        if failed is not None:
            status.consume_failed_msgs = int(failed.window(self._clock(), _HOUR_S)[0])
        return status
