"""The dashboard's pure parts: the TPS ring buffer, its SVG chart, the HTML pages.

No network: the builders get dicts shaped like ``dashboard.data``'s, and the SVG is
parsed as XML to check its geometry.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from aiorocketmq.common.message import MessageExt
from aiorocketmq.dashboard import pages
from aiorocketmq.dashboard.chart import TpsHistory, lag_svg, tps_svg
from aiorocketmq.dashboard.data import message_dict, tps_of

SVG = "{http://www.w3.org/2000/svg}"


def test_history_is_a_ring_buffer_of_named_series() -> None:
    history = TpsHistory(capacity=3)
    for i in range(5):
        history.add({"a/0 put": float(i), "a/0 get": 0.5}, at=100.0 + i)
    assert [t for t, _ in history.samples()] == [102.0, 103.0, 104.0]
    assert history.series() == ["a/0 get", "a/0 put"]
    assert history.to_json()["samples"] == [
        {"t": 102000, "values": {"a/0 put": 2.0, "a/0 get": 0.5}},
        {"t": 103000, "values": {"a/0 put": 3.0, "a/0 get": 0.5}},
        {"t": 104000, "values": {"a/0 put": 4.0, "a/0 get": 0.5}},
    ]
    with pytest.raises(ValueError, match="capacity"):
        TpsHistory(capacity=1)


def test_svg_has_axes_labels_and_one_polyline_per_series() -> None:
    history = TpsHistory()
    for i, put in enumerate([0.0, 40.0, 80.0, 20.0]):
        history.add({"broker-a/0 put": put, "broker-a/0 get": put / 2}, at=1000.0 + 5 * i)
    root = ET.fromstring(tps_svg(history))
    lines = root.findall(f"{SVG}polyline")
    assert [p.get("data-series") for p in lines] == ["broker-a/0 get", "broker-a/0 put"]
    put = [tuple(map(float, xy.split(","))) for xy in lines[1].get("points", "").split()]
    assert len(put) == 4
    xs, ys = [x for x, _ in put], [y for _, y in put]
    assert xs == sorted(xs) and xs[0] < xs[-1]  # time runs left to right
    assert ys[2] == min(ys) and ys[0] == max(ys)  # 80 is the top, 0 the bottom
    labels = [t.text for t in root.iter(f"{SVG}text")]
    assert "100" in labels and "0" in labels  # y axis up to the next 1/2/5 step
    assert "-15s" in labels and "now" in labels  # x axis: 15 s of history
    assert "broker-a/0 put" in labels  # legend


def test_svg_waits_for_two_samples_and_escapes_names() -> None:
    history = TpsHistory()
    assert "waiting for samples" in tps_svg(history)
    history.add({"<x>&": 1.0}, at=1.0)
    history.add({"<x>&": 2.0}, at=2.0)
    root = ET.fromstring(tps_svg(history))  # well-formed despite the name
    assert root.find(f"{SVG}polyline") is not None


def test_tps_of_reads_the_ten_second_figure() -> None:
    assert tps_of({"putTps": "12.5 10.0 8.0"}, "putTps") == 12.5
    assert tps_of({"putTps": "  "}, "putTps") == 0.0  # a broker without samples yet
    assert tps_of(None, "putTps") == 0.0
    assert tps_of({"putTps": "x"}, "putTps") == 0.0


def _topic_view() -> dict[str, Any]:
    return {
        "topic": "T<1>",
        "system": False,
        "totalMessages": 7,
        "lastUpdateTimestamp": 0,
        "queues": [
            {
                "brokerName": "b",
                "queueId": 0,
                "minOffset": 1,
                "maxOffset": 5,
                "lastUpdateTimestamp": 0,
            },
            {
                "brokerName": "b",
                "queueId": 1,
                "minOffset": 0,
                "maxOffset": 3,
                "lastUpdateTimestamp": 0,
            },
        ],
    }


def test_pages_escape_values_and_mark_the_numbers() -> None:
    html = pages.topic_page(_topic_view())
    assert "T&lt;1&gt;" in html and "T<1>" not in html
    assert 'id="total-messages">7<' in html
    assert '<td data-field="maxOffset" class="num">5</td>' in html
    assert "<script" not in html and "http" not in html.replace('xmlns="http', "")


def test_error_page_shows_the_message_not_a_traceback() -> None:
    html = pages.error_page(404, "topic 'X<' not found")
    assert 'data-status="404"' in html and "topic &#x27;X&lt;&#x27; not found" in html


def test_cluster_page_refresh_script_only_when_asked() -> None:
    view = {"clusters": [], "generatedAt": 0}
    assert "<script" not in pages.cluster_page(view, "<svg></svg>")
    assert "location.reload()},5000)" in pages.cluster_page(view, "<svg></svg>", refresh_s=5)


def test_message_dict_previews_the_body_and_lists_properties() -> None:
    msg = MessageExt("T", b"\xff" + b"a" * 600, properties={"KEYS": "k1", "UNIQ_KEY": "AB"})
    msg.msg_id, msg.store_host = "C0A8", ("127.0.0.1", 10911)
    view = message_dict(msg)
    assert view["msgId"] == "AB" and view["offsetMsgId"] == "C0A8"
    assert view["bodySize"] == 601 and len(view["bodyPreview"]) == 512
    assert view["bodyPreview"][0] == "\ufffd"  # not UTF-8: replaced, not an error
    assert view["storeHost"] == "127.0.0.1:10911"
    html = pages.messages_page({"messages": [view]}, "T", "k1")
    assert 'id="found">1 message(s)' in html and "KEYS" in html


def test_lag_chart_draws_one_line_per_topic() -> None:
    points = [
        {"timestamp": 1_000_000, "topic": "A", "diff": 0},
        {"timestamp": 1_000_000, "topic": "B", "diff": 5},
        {"timestamp": 1_060_000, "topic": "A", "diff": 40},
        {"timestamp": 1_061_000, "topic": "B", "diff": 2},
    ]
    root = ET.fromstring(lag_svg(points))
    lines = {p.get("data-series"): p.get("points", "").split() for p in root.iter(f"{SVG}polyline")}
    assert sorted(lines) == ["A", "B"] and all(len(xy) == 2 for xy in lines.values())
    labels = [t.text for t in root.iter(f"{SVG}text")]
    assert "messages" in labels and "50" in labels  # y axis: 40 rounds up to 50
    assert "no offset history" in lag_svg(points[:1])  # one moment is no line


def test_group_page_shows_the_lag_chart_when_given() -> None:
    view = {"group": "g", "lag": 3, "consumeTps": 0.0, "clients": "", "queues": []}
    assert 'id="lag-chart"' not in pages.group_page(view)
    page = pages.group_page(view, lag_svg([]))
    assert '<div id="lag-chart"><svg' in page and "no offset history" in page
