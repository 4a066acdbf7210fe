"""``mqadmin lag`` (ours): a group's lag now and over time, from the brokers' history.

Owns: asking every broker of the group's retry-topic route for its series
(GET_CONSUMER_OFFSET_HISTORY), merging the brokers' series into one per topic, and
printing it as a table with a trend line, or ``--json``. RocketMQ's mqadmin has no
such view: a 4.x broker keeps current offsets only. A broker that does not offer the
request (a Java broker) still counts with its live lag from GET_CONSUME_STATS, and
the output says so.

Merging: brokers snapshot on their own clocks, so points are put in buckets one
broker interval wide; a broker's topic counts in every bucket from its first point
on with its latest value so far, and a bucket's total is the sum over brokers. The
last bucket holds every broker's live point, so the series ends with the lag of now.

Must not: print ``-1`` or a negative lag (each queue's diff is clamped at 0, and only
queues with a committed offset count, as in consumerProgress).
"""

from __future__ import annotations

import asyncio
import re
import time
from argparse import Namespace
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from aiorocketmq.admin import json_render as jr
from aiorocketmq.admin import message_render as mr
from aiorocketmq.admin.commands import UsageError, Write
from aiorocketmq.admin.mq_admin import MQAdmin, select_broker_addr
from aiorocketmq.admin.render import human_time_ms
from aiorocketmq.client.errors import MQBrokerError
from aiorocketmq.common.constants import RETRY_GROUP_TOPIC_PREFIX
from aiorocketmq.common.offset_history import LagPoint, OffsetSnapshot, lag_points
from aiorocketmq.remoting.broker_admin_headers import GetConsumerOffsetHistoryRequestHeader
from aiorocketmq.remoting.codes import ResponseCode

__all__ = [
    "DEFAULT_POINTS",
    "DEFAULT_SINCE",
    "BrokerSeries",
    "fetch_series",
    "lag",
    "lag_json",
    "lag_text",
    "merge_series",
    "parse_since",
    "sparkline",
]

DEFAULT_SINCE: Final = "1h"
DEFAULT_POINTS: Final = 60
_DEFAULT_INTERVAL_MS: Final = 60_000
_UNITS_MS: Final = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION: Final = re.compile(r"(\d+)([smhd])")
_BARS: Final = "▁▂▃▄▅▆▇█"


def parse_since(text: str, now_ms: int) -> int:
    """``-s``: a duration back from now (``90s``, ``30m``, ``6h``, ``2d``), or a
    timestamp (milliseconds or ``yyyy-MM-dd#HH:mm:ss:SSS``).

    Raises:
        UsageError: neither form.
    """
    body = text.strip().lower()
    match = _DURATION.fullmatch(body)
    if match is not None:
        return now_ms - int(match.group(1)) * _UNITS_MS[match.group(2)]
    try:
        return mr.parse_timestamp(text)
    except ValueError as exc:
        raise UsageError(f"-s: not a duration (30m, 6h, 2d) or a timestamp: {text!r}") from exc


@dataclass
class BrokerSeries:
    """One broker's answer."""

    broker_name: str
    address: str
    #: The broker's snapshot period (ms); 0 when it keeps no history.
    interval: int
    points: list[LagPoint] = field(default_factory=list)
    bad_lines: int = 0
    #: Why the series is the live point only (None: the broker served its history).
    note: str | None = None


async def _live_only(
    admin: MQAdmin, broker_name: str, address: str, group: str, topic: str | None
) -> BrokerSeries:
    # GET_CONSUME_STATS answers 0 for a queue never committed on (Java's rule), so
    # such a queue counts whole here, as in consumerProgress.
    stats = await admin.broker.get_consume_stats(address, group, topic)
    offsets: dict[tuple[str, str], dict[int, int]] = {}
    ends: dict[str, dict[int, int]] = {}
    for mq, wrapper in stats.offset_table.items():
        offsets.setdefault((mq.topic, group), {})[mq.queue_id] = wrapper.consumer_offset
        ends.setdefault(mq.topic, {})[mq.queue_id] = wrapper.broker_offset
    now = OffsetSnapshot(int(time.time() * 1000), offsets, ends)
    points = lag_points([now], group)
    return BrokerSeries(
        broker_name, address, 0, points, note="no offset history on this broker: live lag only"
    )


async def fetch_series(
    admin: MQAdmin, group: str, topic: str | None, begin_ms: int, max_points: int
) -> list[BrokerSeries]:
    """Every broker's series for ``group`` (its retry topic's route names the brokers).

    Raises:
        NoRouteError: the group has no retry topic (it never consumed).
    """
    route = await admin.examine_topic_route(RETRY_GROUP_TOPIC_PREFIX + group)
    header = GetConsumerOffsetHistoryRequestHeader(group, topic, begin_ms, None, max_points)

    async def one(broker_name: str, address: str) -> BrokerSeries:
        try:
            reply = await admin.broker.get_consumer_offset_history(address, header)
        except MQBrokerError as exc:
            if exc.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                raise
            return await _live_only(admin, broker_name, address, group, topic)
        return BrokerSeries(
            reply.broker_name, address, reply.interval, reply.points, reply.bad_lines
        )

    targets = [
        (broker.broker_name, address)
        for broker in sorted(route.broker_datas, key=lambda b: b.broker_name)
        if (address := select_broker_addr(broker)) is not None
    ]
    # Concurrently: a file read per broker; the first failure is the command's.
    return list(await asyncio.gather(*(one(name, address) for name, address in targets)))


def merge_series(series: Sequence[BrokerSeries]) -> list[LagPoint]:
    """One series per topic over all brokers (see the module notes), oldest first."""
    interval = max((s.interval for s in series), default=0) or _DEFAULT_INTERVAL_MS
    last = max((p.timestamp // interval for s in series for p in s.points), default=0)
    # (bucket, topic) -> broker -> the broker's latest point in that bucket.
    latest: dict[tuple[int, str], dict[int, LagPoint]] = {}
    for index, s in enumerate(series):
        # A broker's newest points are its live ones (GET_CONSUMER_OFFSET_HISTORY ends
        # with them). The brokers answer moments apart, and a bucket edge between two
        # answers would otherwise split "now" into two points.
        live = max((p.timestamp for p in s.points), default=None)
        for p in s.points:
            bucket = last if p.timestamp == live else p.timestamp // interval
            slot = latest.setdefault((bucket, p.topic), {})
            if index not in slot or slot[index].timestamp <= p.timestamp:
                slot[index] = p
    carried: dict[str, dict[int, LagPoint]] = {}
    merged: list[LagPoint] = []
    for bucket, topic in sorted(latest):
        current = carried.setdefault(topic, {})
        current.update(latest[(bucket, topic)])
        points = current.values()
        merged.append(
            LagPoint(
                max(p.timestamp for p in latest[(bucket, topic)].values()),
                topic,
                sum(p.broker_offset for p in points),
                sum(p.consumer_offset for p in points),
                sum(p.diff for p in points),
            )
        )
    return merged


def sparkline(values: Sequence[int]) -> str:
    """One bar per value, scaled to the largest (all lowest bars when it is 0)."""
    top = max(values, default=0)
    if top <= 0:
        return _BARS[0] * len(values)
    last = len(_BARS) - 1
    return "".join(_BARS[min(last, v * last // top)] for v in values)


def _by_topic(merged: Sequence[LagPoint]) -> dict[str, list[LagPoint]]:
    topics: dict[str, list[LagPoint]] = {}
    for p in merged:
        topics.setdefault(p.topic, []).append(p)
    return dict(sorted(topics.items()))


def _broker_line(s: BrokerSeries) -> str:
    how = s.note or f"history every {s.interval / 1000:g} s"
    torn = f", {s.bad_lines} unreadable line(s)" if s.bad_lines else ""
    return f"Broker: {s.broker_name} {s.address} ({how}{torn})\n"


def lag_text(group: str, begin_ms: int, series: Sequence[BrokerSeries]) -> str:
    """The table: brokers, one summary row per topic with its trend, then the series."""
    merged = merge_series(series)
    lines = [f"Group: {group}  since {human_time_ms(begin_ms, millis=False)}\n"]
    lines += [_broker_line(s) for s in series]
    lines.append(f"\n{'#Topic':<32}  {'#Diff':<12}  {'#Min':<12}  {'#Max':<12}  #Trend\n")
    for topic, points in _by_topic(merged).items():
        diffs = [p.diff for p in points]
        lines.append(
            f"{topic:<32}  {diffs[-1]:<12d}  {min(diffs):<12d}  {max(diffs):<12d}  "
            f"{sparkline(diffs)}\n"
        )
    lines.append(
        f"\n{'#Time':<20}  {'#Topic':<32}  {'#Broker Offset':<16}  {'#Consumer Offset':<16}"
        "  #Diff\n"
    )
    for p in merged:
        when = human_time_ms(p.timestamp, millis=False)
        lines.append(
            f"{when:<20}  {p.topic:<32}  {p.broker_offset:<16d}  {p.consumer_offset:<16d}"
            f"  {p.diff}\n"
        )
    if not merged:
        lines.append("(no committed offsets for this group yet)\n")
    return "".join(lines)


def lag_json(group: str, begin_ms: int, series: Sequence[BrokerSeries]) -> jr.JsonObject:
    """``{"group", "since", "brokers": [...], "topics": [...], "series": [...]}``."""
    merged = merge_series(series)
    return {
        "group": group,
        "since": begin_ms,
        "brokers": [
            {
                "brokerName": s.broker_name,
                "brokerAddr": s.address,
                "interval": s.interval,
                "history": s.note is None,
                "badLines": s.bad_lines,
                "points": len(s.points),
                "note": s.note,
            }
            for s in series
        ],
        "topics": [
            {
                "topic": topic,
                "diff": points[-1].diff,
                "min": min(p.diff for p in points),
                "max": max(p.diff for p in points),
            }
            for topic, points in _by_topic(merged).items()
        ],
        "series": [p.to_json() for p in merged],
    }


async def lag(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``lag -g group [-t topic] [-s since] [-p points]``: lag now and its history.

    JSON: ``lag_json``'s document.
    """
    group = args.groupName.strip()
    topic = args.topic.strip() if args.topic and args.topic.strip() else None
    if args.points is not None and args.points <= 0:
        raise UsageError("-p: the number of points must be positive")
    points = args.points or DEFAULT_POINTS
    begin_ms = parse_since(args.since or DEFAULT_SINCE, int(time.time() * 1000))
    series = await fetch_series(admin, group, topic, begin_ms, points)
    write(jr.dump(lag_json(group, begin_ms, series)) if jr.wants_json(args)
          else lag_text(group, begin_ms, series))  # fmt: skip
