"""PNG plots (matplotlib, Agg) and the self-contained HTML page of the report.

Owns: ``write_plots`` (one PNG per chart whose table has rows) and ``write_html``
(one file: summary, every plot inlined as base64, every table as HTML).

Must not: compute anything from store files (``report`` builds the tables), or use an
interactive matplotlib backend (reports run headless, often on servers).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd  # type: ignore[import-untyped]
from matplotlib.axes import Axes

__all__ = ["write_html", "write_plots"]

Tables = dict[str, pd.DataFrame]


def _throughput(ax: Axes, t: Tables) -> None:
    frame = t["throughput"].copy()
    frame["time"] = pd.to_datetime(frame["minute"], unit="ms", utc=True)
    frame["series"] = frame["broker"] + "/" + frame["topic"]
    for name, part in frame.groupby("series"):
        ax.plot(part["time"], part["messages"], marker="o", label=str(name))
    ax.set_title("Messages per minute, by broker/topic")
    ax.set_ylabel("messages")
    ax.legend(fontsize="small")
    ax.figure.autofmt_xdate()


def _bars(table: str, x: str, y: str, title: str, horizontal: bool = False) -> Callable[..., None]:
    def draw(ax: Axes, t: Tables) -> None:
        frame = t[table]
        labels = [str(v) for v in frame[x]]
        if horizontal:
            ax.barh(labels[::-1], list(frame[y])[::-1])
            ax.set_xlabel(y)
        else:
            ax.bar(labels, frame[y])
            ax.set_ylabel(y)
            ax.tick_params(axis="x", labelrotation=30)
        ax.set_title(title)

    return draw


def _top_tags(ax: Axes, t: Tables) -> None:
    frame = t["top_tags"]
    labels = [f"{r.topic} / {r.tags}" for r in frame.itertuples()]
    ax.barh(labels[::-1], list(frame["count"])[::-1])
    ax.set_xlabel("messages")
    ax.set_title("Top tags (topic / tag)")


def _lag(ax: Axes, t: Tables) -> None:
    frame = t["lag"]
    labels = [f"{r.group}\n{r.topic}#{r.queueId}" for r in frame.itertuples()]
    ax.bar(labels, frame["lag"])
    ax.set_title("Consumer lag now (messages)")
    ax.tick_params(axis="x", labelsize="x-small")


def _lag_history(ax: Axes, t: Tables) -> None:
    frame = t["lag_history"].copy()
    frame["time"] = pd.to_datetime(frame["timestamp"], unit="ms", utc=True)
    total = frame.groupby(["group", "topic", "time"], as_index=False)["lag"].sum()
    for (group, topic), part in total.groupby(["group", "topic"]):
        ax.plot(part["time"], part["lag"], marker=".", label=f"{group} / {topic}")
    ax.set_title("Consumer lag over time (offset history)")
    ax.legend(fontsize="small")
    ax.figure.autofmt_xdate()


_CHARTS: dict[str, tuple[str, Callable[..., None]]] = {
    "throughput": ("throughput", _throughput),
    "sizes": ("sizes", _bars("sizes", "bucket", "messages", "Message body sizes")),
    "top_keys": ("top_keys", _bars("top_keys", "key", "count", "Top keys", horizontal=True)),
    "top_tags": ("top_tags", _top_tags),
    "producers": ("producers", _bars("producers", "host", "messages", "Producer hosts")),
    "retry_share": ("retry_share", _bars("retry_share", "kind", "count", "Retry / DLQ share")),
    "lag": ("lag", _lag),
    "lag_history": ("lag_history", _lag_history),
}


def write_plots(tables: Tables, directory: Path) -> list[Path]:
    """One PNG per chart whose table is non-empty; the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (table, draw) in _CHARTS.items():
        if table not in tables or tables[table].empty:
            continue
        fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
        try:
            draw(ax, tables)
            fig.tight_layout()
            path = directory / f"{name}.png"
            fig.savefig(path)
        finally:
            plt.close(fig)
        written.append(path)
    return written


def _summary(tables: Tables) -> str:
    topics = tables.get("topics", pd.DataFrame())
    scan = tables.get("scan", pd.DataFrame())
    messages = int(topics["messages"].sum()) if not topics.empty else 0
    size = int(topics["bytes"].sum()) if not topics.empty else 0
    skipped = int(scan["skippedBytes"].sum()) if not scan.empty else 0
    torn = int((scan["stopReason"].isin(["truncated", "corrupt"])).sum()) if not scan.empty else 0
    items = [
        f"{messages} messages, {size} body bytes, {len(topics)} broker/topic pairs",
        f"{torn} chunk(s) ended on torn or corrupt data; {skipped} bytes skipped",
    ]
    return "<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>"


def write_html(tables: Tables, plots: list[Path], path: Path, *, title: str) -> Path:
    """The report page with every plot inlined; returns ``path``."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;"
        "font-size:small}td,th{border:1px solid #ccc;padding:2px 6px}img{max-width:100%}"
        "</style></head><body>",
        f"<h1>{html.escape(title)}</h1><p>Generated {stamp}</p>",
        _summary(tables),
    ]
    for plot in plots:
        data = base64.b64encode(plot.read_bytes()).decode("ascii")
        parts.append(f"<h2>{html.escape(plot.stem)}</h2>")
        parts.append(f"<img alt='{html.escape(plot.stem)}' src='data:image/png;base64,{data}'>")
    for name, frame in tables.items():
        parts.append(f"<h2>Table: {html.escape(name)}</h2>")
        parts.append(frame.head(200).to_html(index=False, escape=True))
    parts.append("</body></html>")
    path.write_text("\n".join(parts), "utf-8")
    return path
