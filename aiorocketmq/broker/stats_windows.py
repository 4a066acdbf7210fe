"""Per-topic and per-group counts over the last minute, hour and day (Java's StatsItem).

Owns: ``StatsWindows``, which samples counters (messages stored per topic,
messages pulled per topic@group, and their bytes) as Java 4.9's
``BrokerStatsManager`` does: every 10 s for the minute window (7 samples kept),
every 10 minutes for the hour window (7), every hour for the day window (25), and
answers a window's ``sum``, ``tps`` and ``avgpt`` for one stats name and key
(VIEW_BROKER_STATS_DATA, read by ``mqadmin statsAll``).

A window's sum is the counter now minus its value at the window's oldest sample
still within its span (0 when the key did not exist then); a sample taken at start
means a fresh broker answers at once for what it stored since. ``avgpt`` is 0.0:
no per-message times are kept.

Must not: count anything itself (the store and the metrics hook do) or do I/O.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from aiorocketmq.common.clock import Clock
from aiorocketmq.runtime import Service

__all__ = [
    "GROUP_GET_NUMS",
    "GROUP_GET_SIZE",
    "TOPIC_PUT_NUMS",
    "TOPIC_PUT_SIZE",
    "StatsWindows",
    "WindowStats",
]

TOPIC_PUT_NUMS: Final = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE: Final = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS: Final = "GROUP_GET_NUMS"  # key: topic@group
GROUP_GET_SIZE: Final = "GROUP_GET_SIZE"

Snapshot = dict[str, dict[str, int]]
"""Stats name -> key -> counter value."""

Source = Callable[[], Mapping[str, int]]

# (sampling period in ms, samples kept): Java's csListMinute / Hour / Day.
_WINDOWS: Final = {"minute": (10_000, 7), "hour": (600_000, 7), "day": (3_600_000, 25)}


@dataclass(frozen=True, slots=True)
class WindowStats:
    """One window's figures (Java's ``StatsSnapshot``)."""

    sum: int
    tps: float
    avgpt: float = 0.0

    def to_json_dict(self) -> dict[str, float | int]:
        """fastjson's (sorted) shape."""
        return {"avgpt": self.avgpt, "sum": self.sum, "tps": self.tps}


class StatsWindows(Service):
    """Samples counters into minute, hour and day windows (see the module docstring).

    Args:
        sources: stats name -> a function returning that name's counters by key.
        clock: the time of each sample.
    """

    def __init__(self, sources: Mapping[str, Source], clock: Clock) -> None:
        super().__init__("StatsWindows")
        self._sources = dict(sources)
        self._clock = clock
        self._samples: dict[str, deque[tuple[int, Snapshot]]] = {
            window: deque(maxlen=kept) for window, (_period, kept) in _WINDOWS.items()
        }

    async def on_start(self) -> None:
        """Sample at once, then every 10 s (the longer windows take every Nth)."""
        self.sample()
        self.periodic(_WINDOWS["minute"][0] / 1000, self.sample, name="stats-windows")

    def _snapshot(self) -> Snapshot:
        return {name: dict(source()) for name, source in self._sources.items()}

    def sample(self) -> None:
        """Take a sample into each window whose period has passed since its last one."""
        now, snapshot = self._clock.now_ms(), None
        for window, (period_ms, _kept) in _WINDOWS.items():
            samples = self._samples[window]
            if samples and now - samples[-1][0] < period_ms:
                continue
            snapshot = snapshot or self._snapshot()
            samples.append((now, snapshot))

    def stats(self, name: str, key: str) -> dict[str, WindowStats] | None:
        """``{"minute", "hour", "day"}`` figures of ``key``; None when it was never counted.

        Raises:
            KeyError: ``name`` is not a stats name of this broker.
        """
        current = self._sources[name]().get(key)
        if current is None:
            return None
        now, result = self._clock.now_ms(), {}
        for window, samples in self._samples.items():
            if not samples:
                result[window] = WindowStats(0, 0.0)
                continue
            period_ms, kept = _WINDOWS[window]
            # The oldest sample within the window's span; after a pause in sampling
            # (a stalled loop) the newest one, so a window never spans longer.
            recent = [s for s in samples if now - s[0] <= period_ms * (kept - 1)]
            first_ms, first = recent[0] if recent else samples[-1]
            total = current - first.get(name, {}).get(key, 0)
            elapsed_ms = now - first_ms
            result[window] = WindowStats(total, total * 1000 / elapsed_ms if elapsed_ms else 0.0)
        return result
