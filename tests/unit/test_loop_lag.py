"""LoopLagProbe: a callback that holds the loop shows up as lag; the percentile helper."""

from __future__ import annotations

import time

import pytest

from aiorocketmq.runtime.loop_lag import LOOP_LAG_BUCKETS_MS, LoopLagProbe, percentile_from_buckets
from tests.support.wait import wait_until


async def test_a_blocking_callback_is_recorded_as_its_length() -> None:
    probe = LoopLagProbe(interval_s=0.005)
    probe.start()
    probe.start()  # idempotent: still one timer
    try:
        await wait_until(lambda: sum(probe.counts) >= 3, what="a few idle runs")
        idle = sum(probe.counts)
        time.sleep(0.03)  # noqa: ASYNC251 -- holds the loop on purpose: the stall to see
        await wait_until(lambda: sum(probe.counts) > idle, what="the run after the stall")
    finally:
        probe.stop()
    assert probe.max_ms >= 20.0, "the 30 ms stall, less at most one interval and a tick"
    assert sum(probe.counts[LOOP_LAG_BUCKETS_MS.index(20.0) :]) >= 1
    assert probe.total_ms >= probe.max_ms
    assert not probe.running


def test_interval_below_a_millisecond_is_refused() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        LoopLagProbe(interval_s=0.0001)


def test_percentile_from_buckets() -> None:
    bounds = (1.0, 2.0, 5.0)
    assert percentile_from_buckets(bounds, [0, 0, 0, 0], 99) == 0.0
    assert percentile_from_buckets(bounds, [98, 1, 1, 0], 99) == 2.0
    assert percentile_from_buckets(bounds, [98, 1, 1, 0], 50) == 1.0
    assert percentile_from_buckets(bounds, [90, 0, 0, 10], 99) == float("inf")
