"""Benchmark statistics: one-second snapshots, a sliding window, and the report lines.

Owns: ``ProducerStats`` / ``ConsumerStats`` (counters the load loops bump), the window
of snapshots a report is computed over (Java keeps the last 10 one-second snapshots
and prints every 10 s; ours keeps ``report_interval`` seconds of them), and the line
formats, verbatim from RocketMQ 4.9.8's ``benchmark/Producer.java`` and
``Consumer.java``, with our p50/p99 appended after Java's fields so a parser of
Java's line still matches.

Must not: do I/O or know about the client; callers print the lines.
"""

from __future__ import annotations

import json
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "ConsumerStats",
    "ProducerStats",
    "Window",
    "consumer_line",
    "consumer_report",
    "consumer_summary",
    "human_time",
    "percentile",
    "producer_line",
    "producer_report",
]

LATENCY_SAMPLES: Final = 100_000
"""Latencies kept for percentiles (the most recent ones)."""


def human_time(now_ms: int) -> str:
    """Java's ``UtilAll.timeMillisToHumanString2``: ``yyyy-MM-dd HH:mm:ss,SSS`` (local)."""
    seconds, millis = divmod(now_ms, 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds)) + f",{millis:03d}"


def percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values (0.0 when empty)."""
    if not sorted_values:
        return 0.0
    rank = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[rank]


@dataclass
class ProducerStats:
    """Java's ``StatsBenchmarkProducer``, plus recent latencies for percentiles."""

    send_success: int = 0
    send_failed: int = 0
    response_success: int = 0
    response_failed: int = 0
    success_time_total_ms: float = 0.0
    max_rt_ms: float = 0.0
    latencies_ms: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCY_SAMPLES))
    """Since the last report (its p50/p99)."""
    run_latencies_ms: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCY_SAMPLES))
    """The whole run's (the summary's p50/p99; the most recent when there are more)."""

    def sent(self, rt_ms: float) -> None:
        """One send acknowledged after ``rt_ms``."""
        self.send_success += 1
        self.response_success += 1
        self.success_time_total_ms += rt_ms
        self.max_rt_ms = max(self.max_rt_ms, rt_ms)
        self.latencies_ms.append(rt_ms)
        self.run_latencies_ms.append(rt_ms)

    def snapshot(self) -> tuple[float, ...]:
        """(now ms, send ok, send failed, response ok, response failed, rt total ms)."""
        return (
            time.time() * 1000,
            self.send_success,
            self.send_failed,
            self.response_success,
            self.response_failed,
            self.success_time_total_ms,
        )


@dataclass
class ConsumerStats:
    """Java's ``StatsBenchmarkConsumer``: born-to-consumer and store-to-consumer times."""

    received: int = 0
    failed: int = 0
    b2c_total_ms: int = 0
    s2c_total_ms: int = 0
    b2c_max_ms: int = 0
    s2c_max_ms: int = 0
    latencies_ms: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCY_SAMPLES))
    """Born-to-consumer times since the last report (its p50/p99)."""

    def consumed(self, born_ms: int, store_ms: int, now_ms: int, failed: bool) -> None:
        """One message handed to the listener at ``now_ms``."""
        b2c, s2c = now_ms - born_ms, now_ms - store_ms
        self.received += 1
        self.failed += failed
        self.b2c_total_ms += b2c
        self.s2c_total_ms += s2c
        self.b2c_max_ms = max(self.b2c_max_ms, b2c)
        self.s2c_max_ms = max(self.s2c_max_ms, s2c)
        self.latencies_ms.append(float(b2c))

    def snapshot(self) -> tuple[float, ...]:
        """(now ms, received, b2c total, s2c total, failed)."""
        return (time.time() * 1000, self.received, self.b2c_total_ms, self.s2c_total_ms,
                self.failed)  # fmt: skip


class Window:
    """The last ``size`` snapshots (taken every second)."""

    def __init__(self, size: int) -> None:
        self.snapshots: deque[tuple[float, ...]] = deque(maxlen=max(size, 2))

    def add(self, snapshot: tuple[float, ...]) -> None:
        """Append a snapshot, dropping the oldest beyond the window."""
        self.snapshots.append(snapshot)

    def ready(self) -> bool:
        """Two snapshots at least: a rate can be computed."""
        return len(self.snapshots) >= 2

    def span(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """(first, last) snapshot."""
        return self.snapshots[0], self.snapshots[-1]


def producer_report(
    window: Window, stats: ProducerStats, *, done: bool = False
) -> dict[str, float]:
    """Java's ``doPrintStats`` figures over the window, with p50/p99 of recent sends."""
    begin, end = window.span()
    elapsed = end[0] - begin[0]
    acked = end[3] - begin[3]
    recent = sorted(stats.run_latencies_ms if done else stats.latencies_ms)
    stats.latencies_ms.clear()
    return {
        "time": int(end[0]), "sendTotal": stats.send_success + stats.send_failed,
        "sendTps": int(acked / elapsed * 1000) if elapsed > 0 else 0,
        "maxRtMs": int(stats.max_rt_ms),
        "averageRtMs": (end[5] - begin[5]) / acked if acked else 0.0,
        "p50RtMs": percentile(recent, 0.50), "p99RtMs": percentile(recent, 0.99),
        "sendFailed": int(end[2]), "responseFailed": int(end[4]), "complete": done,
    }  # fmt: skip


def producer_line(report: dict[str, float], *, as_json: bool = False) -> str:
    """Java's producer line (``[Complete] ...`` at the end), or one JSON object."""
    if as_json:
        return json.dumps(report)
    tail = " p50 RT(ms): %7.3f p99 RT(ms): %7.3f" % (report["p50RtMs"], report["p99RtMs"])  # noqa: UP031
    if report["complete"]:
        return (
            "[Complete] Send Total: %d Send TPS: %d Max RT(ms): %d Average RT(ms): %7.3f "  # noqa: UP031
            "Send Failed: %d Response Failed: %d"
            % (report["sendTotal"], report["sendTps"], report["maxRtMs"],
               report["averageRtMs"], report["sendFailed"], report["responseFailed"])
        ) + tail  # fmt: skip
    return (
        "Current Time: %s Send TPS: %d Max RT(ms): %d Average RT(ms): %7.3f "  # noqa: UP031
        "Send Failed: %d Response Failed: %d"
        % (human_time(int(report["time"])), report["sendTps"], report["maxRtMs"],
           report["averageRtMs"], report["sendFailed"], report["responseFailed"])
    ) + tail  # fmt: skip


def consumer_report(window: Window, stats: ConsumerStats) -> dict[str, float]:
    """Java's consumer figures over the window; the maxima restart after each report."""
    begin, end = window.span()
    elapsed, got = end[0] - begin[0], end[1] - begin[1]
    recent = sorted(stats.latencies_ms)
    report = {
        "time": int(end[0]), "tps": int(got / elapsed * 1000) if elapsed > 0 else 0,
        "fail": int(end[4] - begin[4]),
        "averageB2CRtMs": (end[2] - begin[2]) / got if got else 0.0,
        "averageS2CRtMs": (end[3] - begin[3]) / got if got else 0.0,
        "maxB2CRtMs": stats.b2c_max_ms, "maxS2CRtMs": stats.s2c_max_ms,
        "p50B2CRtMs": percentile(recent, 0.50), "p99B2CRtMs": percentile(recent, 0.99),
        "received": stats.received,
    }  # fmt: skip
    stats.b2c_max_ms = stats.s2c_max_ms = 0
    stats.latencies_ms.clear()
    return report


def consumer_line(report: dict[str, float], *, as_json: bool = False) -> str:
    """Java's consumer line (``Current Time`` is epoch ms there), or one JSON object."""
    if as_json:
        return json.dumps(report)
    return (
        "Current Time: %s TPS: %d FAIL: %d AVG(B2C) RT(ms): %7.3f AVG(S2C) RT(ms): %7.3f "  # noqa: UP031
        "MAX(B2C) RT(ms): %d MAX(S2C) RT(ms): %d p50(B2C) RT(ms): %7.3f p99(B2C) RT(ms): %7.3f"
        % (report["time"], report["tps"], report["fail"], report["averageB2CRtMs"],
           report["averageS2CRtMs"], report["maxB2CRtMs"], report["maxS2CRtMs"],
           report["p50B2CRtMs"], report["p99B2CRtMs"])
    )  # fmt: skip


def consumer_summary(stats: ConsumerStats, *, as_json: bool = False) -> str:
    """Our closing consumer line (Java's consumer runs until killed and has none)."""
    if as_json:
        return json.dumps({"complete": True, "received": stats.received, "fail": stats.failed})
    return f"[Complete] Receive Total: {stats.received} FAIL: {stats.failed}"
