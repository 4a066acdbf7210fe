"""mqbench's statistics and lines: Java's formats, rates over the window, percentiles."""

from __future__ import annotations

import json
import re

import pytest

from aiorocketmq.bench.stats import (
    ConsumerStats,
    ProducerStats,
    Window,
    consumer_line,
    consumer_report,
    human_time,
    percentile,
    producer_line,
    producer_report,
)
from aiorocketmq.cli.bench import main


def test_human_time_is_javas_time_millis_to_human_string2() -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,007", human_time(1_700_000_000_007))


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile([], 0.99) == 0.0
    assert percentile([7.0], 0.5) == 7.0


def test_producer_report_rates_over_the_window_and_resets_recent_latencies() -> None:
    stats, window = ProducerStats(), Window(10)
    window.add((0.0, 0, 0, 0, 0, 0.0))
    for rt in (1.0, 2.0, 3.0, 10.0):
        stats.sent(rt)
    stats.send_failed, stats.response_failed = 2, 1
    window.add((2000.0, 4, 2, 4, 1, 16.0))
    report = producer_report(window, stats)
    assert report["sendTps"] == 2 and report["averageRtMs"] == 4.0
    assert (report["maxRtMs"], report["p50RtMs"], report["p99RtMs"]) == (10, 2.0, 10.0)
    line = producer_line(report)
    assert re.fullmatch(
        r"Current Time: \S+ \S+ Send TPS: 2 Max RT\(ms\): 10 Average RT\(ms\):   4\.000 "
        r"Send Failed: 2 Response Failed: 1 p50 RT\(ms\):   2\.000 p99 RT\(ms\):  10\.000",
        line,
    )
    assert not stats.latencies_ms and len(stats.run_latencies_ms) == 4
    done = producer_report(window, stats, done=True)
    assert producer_line(done).startswith("[Complete] Send Total: 6 Send TPS: 2 Max RT(ms): 10")
    assert json.loads(producer_line(done, as_json=True))["p99RtMs"] == 10.0


def test_consumer_report_and_max_reset() -> None:
    stats, window = ConsumerStats(), Window(10)
    window.add(stats.snapshot())
    stats.consumed(born_ms=1000, store_ms=1005, now_ms=1010, failed=False)
    stats.consumed(born_ms=1000, store_ms=1002, now_ms=1030, failed=True)
    window.add((window.snapshots[0][0] + 1000, 2, 40, 33, 1))
    report = consumer_report(window, stats)
    assert (report["tps"], report["fail"], report["averageB2CRtMs"]) == (2, 1, 20.0)
    assert (report["maxB2CRtMs"], report["maxS2CRtMs"]) == (30, 28)
    assert stats.b2c_max_ms == stats.s2c_max_ms == 0
    assert re.fullmatch(
        r"Current Time: \d+ TPS: 2 FAIL: 1 AVG\(B2C\) RT\(ms\):  20\.000 AVG\(S2C\) RT\(ms\):  "
        r"16\.500 MAX\(B2C\) RT\(ms\): 30 MAX\(S2C\) RT\(ms\): 28 .*",
        consumer_line(report),
    )


@pytest.mark.parametrize(
    "argv",
    [["producer", "-w", "0"], ["consumer", "-r", "2"], ["producer", "-s", "x"], ["nothing"]],
)
def test_bad_usage_exits_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
