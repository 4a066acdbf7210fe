"""mqadmin lag's pure parts: -s, merging brokers' series, the trend line, both outputs."""

from __future__ import annotations

import json

import pytest

from aiorocketmq.admin import json_render as jr
from aiorocketmq.admin.commands import UsageError
from aiorocketmq.admin.lag import (
    BrokerSeries,
    lag_json,
    lag_text,
    merge_series,
    parse_since,
    sparkline,
)
from aiorocketmq.admin.message_render import parse_timestamp
from aiorocketmq.common.offset_history import LagPoint

NOW = 1_700_000_000_000


@pytest.mark.parametrize(
    ("text", "back_ms"),
    [("90s", 90_000), ("30m", 1_800_000), ("6H", 21_600_000), ("2d", 172_800_000), ("0m", 0)],
)
def test_since_takes_a_duration(text: str, back_ms: int) -> None:
    assert parse_since(text, NOW) == NOW - back_ms


def test_since_takes_a_timestamp() -> None:
    assert parse_since("1699999000000", NOW) == 1_699_999_000_000
    assert parse_since("2026-11-27#01:00:00:000", NOW) == parse_timestamp("2026-11-27#01:00:00:000")
    for bad in ("", "5w", "m5", "yesterday", "-5m"):
        with pytest.raises(UsageError):
            parse_since(bad, NOW)


def test_sparkline_scales_to_the_largest() -> None:
    assert sparkline([0, 4, 8]) == "▁▄█"
    assert sparkline([0, 0]) == "▁▁"
    assert sparkline([]) == ""
    assert len(sparkline(list(range(100)))) == 100


def series(name: str, interval: int, *points: tuple[int, str, int, int]) -> BrokerSeries:
    """Points as (timestamp, topic, brokerOffset, consumerOffset)."""
    return BrokerSeries(
        name,
        f"{name}:10911",
        interval,
        [LagPoint(t, topic, b, c, b - c) for t, topic, b, c in points],
    )


def test_brokers_merge_per_bucket_carrying_each_ones_latest_value() -> None:
    # a snapshots at :05 of each minute, b at :40; b starts a minute late.
    a = series("a", 60_000, (5_000, "T", 10, 5), (65_000, "T", 12, 12), (125_000, "T", 20, 12))
    b = series("b", 60_000, (100_000, "T", 4, 0), (160_000, "T", 4, 4))
    merged = merge_series([a, b])
    assert [(p.timestamp, p.broker_offset, p.consumer_offset, p.diff) for p in merged] == [
        (5_000, 10, 5, 5),  # a alone
        (100_000, 16, 12, 4),  # a's 65 s value + b's first
        (160_000, 24, 16, 8),  # a's 125 s value + b's 160 s value
    ]


def test_a_live_only_broker_joins_the_last_bucket() -> None:
    a = series("a", 30_000, (0, "T", 5, 5), (31_000, "T", 9, 5), (50_000, "T", 9, 9))
    java = series("java", 0, (59_000, "T", 7, 2), (59_000, "U", 3, 3))
    merged = merge_series([a, java])
    assert [(p.timestamp, p.topic, p.diff) for p in merged] == [
        (0, "T", 0),
        (59_000, "T", 5),  # a's 50 s point and the live 5
        (59_000, "U", 0),
    ]
    assert merge_series([]) == []


def test_the_live_points_share_the_last_bucket_across_a_bucket_edge() -> None:
    # a answers at 59.9 s, b at 60.1 s: one "now" point, after a's recorded one.
    a = series("a", 200, (59_700, "T", 5, 5), (59_900, "T", 9, 5))
    b = series("b", 0, (60_100, "T", 7, 2))
    merged = merge_series([a, b])
    assert [(p.timestamp, p.diff) for p in merged] == [(59_700, 0), (60_100, 9)]


def test_text_and_json_tell_the_same_story() -> None:
    a = series("broker-a", 60_000, (NOW - 120_000, "T", 10, 10), (NOW, "T", 40, 10))
    java = series("broker-b", 0, (NOW, "T", 5, 5))
    java.note = "no offset history on this broker: live lag only"
    a.bad_lines = 1
    text = lag_text("g", NOW - 3_600_000, [a, java])
    assert text.startswith("Group: g  since ")
    assert "Broker: broker-a broker-a:10911 (history every 60 s, 1 unreadable line(s))" in text
    assert "Broker: broker-b broker-b:10911 (no offset history on this broker" in text
    [row] = [line for line in text.splitlines() if line.startswith("T ")]
    assert row.split() == ["T", "30", "0", "30", "▁█"]
    assert text.count("\n") == 3 + 2 + 1 + 2 + 2  # heads, rows, series head, series

    doc = json.loads(jr.dump(lag_json("g", NOW - 3_600_000, [a, java])))
    assert doc["group"] == "g" and doc["since"] == NOW - 3_600_000
    assert [
        (b["brokerName"], b["history"], b["interval"], b["badLines"], b["points"])
        for b in doc["brokers"]
    ] == [
        ("broker-a", True, 60_000, 1, 2),
        ("broker-b", False, 0, 0, 1),
    ]
    assert doc["topics"] == [{"topic": "T", "diff": 30, "min": 0, "max": 30}]
    assert doc["series"][-1] == {
        "timestamp": NOW, "topic": "T", "brokerOffset": 45, "consumerOffset": 15, "diff": 30,
    }  # fmt: skip


def test_a_group_without_offsets_says_so() -> None:
    text = lag_text("g", NOW, [series("a", 60_000)])
    assert text.rstrip().endswith("(no committed offsets for this group yet)")
    assert lag_json("g", NOW, [])["series"] == []
