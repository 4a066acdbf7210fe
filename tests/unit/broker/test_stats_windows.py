"""StatsWindows: minute, hour and day windows of counters, on a manual clock.

The sample cadences are Java's (10 s / 10 min / 1 h, keeping 7 / 7 / 25), and a
window's sum is the counter now minus its value at the window's oldest sample.
"""

from __future__ import annotations

from aiorocketmq.broker.stats_windows import StatsWindows
from aiorocketmq.common.clock import ManualClock


def test_windows_follow_javas_cadences() -> None:
    clock = ManualClock()
    counters: dict[str, int] = {}
    windows = StatsWindows({"TOPIC_PUT_NUMS": lambda: counters}, clock)
    windows.sample()  # at start: the topic does not exist yet
    assert windows.stats("TOPIC_PUT_NUMS", "T") is None  # never counted: Java's "not exist"
    for _ in range(12):  # two minutes, 50 messages every 10 s
        clock.advance(10_000)
        counters["T"] = counters.get("T", 0) + 50
        windows.sample()
    stats = windows.stats("TOPIC_PUT_NUMS", "T")
    assert stats is not None
    # Minute: 7 samples 10 s apart, the oldest 60 s ago (its value 300 of 600).
    assert stats["minute"].sum == 300 and stats["minute"].tps == 5.0
    # Hour and day: sampled once, at start (0), so everything since.
    assert stats["hour"].sum == stats["day"].sum == 600
    assert stats["day"].tps == 600 * 1000 / 120_000
    clock.advance(600_000)  # ten minutes without traffic: the hour takes a new sample
    windows.sample()
    later = windows.stats("TOPIC_PUT_NUMS", "T")
    assert later is not None
    assert later["minute"].sum == 0 and later["hour"].sum == 600 and later["day"].sum == 600
