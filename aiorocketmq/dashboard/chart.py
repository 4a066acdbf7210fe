"""Throughput history and its server-side SVG chart.

Owns: ``TpsHistory``, a ring buffer of (time, {series: value}) samples kept by the
dashboard's sampler task (put and get TPS per broker node), and ``tps_svg``, which
renders that history as an SVG line chart: axes, tick labels, one polyline per
series and a legend; ``lag_svg`` draws a group's lag history the same way. Pure:
no I/O, no event loop, so unit tests feed it numbers.

Must not: fetch anything (the server's sampler does) or emit script or external
references (the page works offline and without JavaScript).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping
from html import escape
from typing import Any, Final

__all__ = ["PALETTE", "TpsHistory", "lag_svg", "tps_svg"]

PALETTE: Final = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b")
"""Series colours, cycled."""

_W, _H = 720, 260
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 170, 16, 36


class TpsHistory:
    """The last ``capacity`` samples of named series (e.g. ``"broker-a/0 put"``).

    Args:
        capacity: samples kept; older ones fall off.
    """

    def __init__(self, capacity: int = 120) -> None:
        if capacity < 2:
            raise ValueError(f"capacity must be at least 2, got {capacity}")
        self._samples: deque[tuple[float, dict[str, float]]] = deque(maxlen=capacity)

    def add(self, values: Mapping[str, float], at: float | None = None) -> None:
        """Record one sample taken at ``at`` (epoch seconds; now when None)."""
        self._samples.append((time.time() if at is None else at, dict(values)))

    def samples(self) -> list[tuple[float, dict[str, float]]]:
        """Oldest first."""
        return list(self._samples)

    def series(self) -> list[str]:
        """Every series name seen in the kept samples, sorted."""
        return sorted({name for _, values in self._samples for name in values})

    def to_json(self) -> dict[str, object]:
        """``{"series": [...], "samples": [{"t": ms, "values": {...}}]}``."""
        return {
            "series": self.series(),
            "samples": [{"t": int(t * 1000), "values": v} for t, v in self._samples],
        }


def _nice_max(value: float) -> float:
    """The smallest 1/2/5 x 10^k at or above ``value`` (at least 1)."""
    if value <= 1:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1)
    for step in (1, 2, 5, 10):
        if value <= step * magnitude:
            return float(step * magnitude)
    return float(10 * magnitude)


def _ago(seconds: float, span_s: float) -> str:
    """A tick label: tenths under 10 s of history, minutes over 5 min."""
    if span_s < 10:
        return f"-{seconds:.1f}s"
    if span_s > 300:
        return f"-{seconds / 60:.1f}m"
    return f"-{seconds:.0f}s"


def _axes(y_max: float, span_s: float, unit: str) -> list[str]:
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    parts = [
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + plot_h}" stroke="#444"/>',
        f'<line x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{_LEFT + plot_w}" '
        f'y2="{_TOP + plot_h}" stroke="#444"/>',
    ]
    for i in range(5):
        y = _TOP + plot_h - plot_h * i / 4
        label = f"{y_max * i / 4:g}"
        parts.append(
            f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_LEFT + plot_w}" y2="{y:.1f}" stroke="#eee"/>'
            f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{label}</text>'
        )
    for i in range(5):
        x = _LEFT + plot_w * i / 4
        label = "now" if i == 4 else _ago(span_s * (1 - i / 4), span_s)
        parts.append(
            f'<text x="{x:.1f}" y="{_TOP + plot_h + 18}" text-anchor="middle">{label}</text>'
        )
    parts.append(
        f'<text x="14" y="{_TOP + plot_h / 2:.0f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {_TOP + plot_h / 2:.0f})">{escape(unit)}</text>'
    )
    return parts


def tps_svg(
    history: TpsHistory,
    title: str = "Throughput (TPS)",
    *,
    unit: str = "msgs/s",
    empty: str = "waiting for samples...",
) -> str:
    """The history as an inline ``<svg>``; the ``empty`` note under 2 samples."""
    samples = history.samples()
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{_W}" height="{_H}" '
        f'viewBox="0 0 {_W} {_H}" role="img" font-family="sans-serif" font-size="11">'
        f"<title>{escape(title)}</title>"
    )
    if len(samples) < 2:
        return head + (
            f'<text x="{_W / 2}" y="{_H / 2}" text-anchor="middle">{escape(empty)}</text></svg>'
        )
    t0, t1 = samples[0][0], samples[-1][0]
    span = max(t1 - t0, 1e-9)
    names = history.series()
    y_max = _nice_max(max((v for _, vals in samples for v in vals.values()), default=0.0))
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM
    parts = [head, *_axes(y_max, t1 - t0, unit)]
    for i, name in enumerate(names):
        colour = PALETTE[i % len(PALETTE)]
        points = " ".join(
            f"{_LEFT + plot_w * (t - t0) / span:.1f},"
            f"{_TOP + plot_h - plot_h * min(vals[name], y_max) / y_max:.1f}"
            for t, vals in samples
            if name in vals
        )
        parts.append(
            f'<polyline class="series" data-series="{escape(name)}" fill="none" '
            f'stroke="{colour}" stroke-width="2" points="{points}"/>'
        )
        ly = _TOP + 8 + 16 * i
        lx = _W - _RIGHT + 12
        parts.append(
            f'<line x1="{lx}" y1="{ly}" x2="{lx + 16}" y2="{ly}" stroke="{colour}" '
            f'stroke-width="3"/><text x="{lx + 22}" y="{ly + 4}">{escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def lag_svg(points: Iterable[Mapping[str, Any]]) -> str:
    """A group's lag over time, one line per topic, from ``{"timestamp", "topic",
    "diff"}`` points (the group page's ``lagHistory``)."""
    samples: dict[int, dict[str, float]] = {}
    for p in points:
        samples.setdefault(int(p["timestamp"]), {})[str(p["topic"])] = float(p["diff"])
    history = TpsHistory(capacity=max(2, len(samples)))
    for stamp in sorted(samples):
        history.add(samples[stamp], at=stamp / 1000)
    return tps_svg(
        history,
        "Lag over time (messages)",
        unit="messages",
        empty="no offset history yet (brokers snapshot it every minute)",
    )
