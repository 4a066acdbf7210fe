"""The dashboard's HTML: one function per page, from the data builders' dicts.

Owns: the page frame (navigation, the one CSS block, the optional auto-refresh
script), the tables of each page, the message lookup forms and the error page.
Every value is escaped; cells carry ``data-*`` attributes naming what they show,
so a browser test can read the numbers a user sees.

Must not: fetch data (``data`` does) or speak HTTP (``server`` does); no CDN,
no external script or stylesheet.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from html import escape
from typing import Any, Final
from urllib.parse import quote

__all__ = [
    "cluster_page",
    "error_page",
    "group_page",
    "groups_page",
    "messages_page",
    "topic_page",
    "topics_page",
]

_CSS: Final = """
body{font-family:system-ui,sans-serif;margin:0;color:#222;background:#f6f7f9}
header{background:#1d3557;color:#fff;padding:10px 20px;display:flex;gap:18px;align-items:center}
header a{color:#dfe7f2;text-decoration:none}header a.on{color:#fff;font-weight:bold}
header .brand{font-weight:bold;margin-right:12px}
main{padding:16px 20px}h1{font-size:20px;margin:4px 0 12px}h2{font-size:16px}
table{border-collapse:collapse;background:#fff;margin-bottom:16px;min-width:50%}
th,td{border:1px solid #d8dde3;padding:4px 10px;text-align:left;font-size:13px}
td{white-space:nowrap}
th{background:#e9edf2}td.num{text-align:right;font-variant-numeric:tabular-nums}
.error{background:#fdecea;border:1px solid #f5c2c0;padding:10px 14px;color:#8a1c14}
.muted{color:#777;font-size:12px}form{margin:8px 0 16px}input{margin-right:6px}
pre{background:#fff;border:1px solid #d8dde3;padding:8px;white-space:pre-wrap}
"""

_REFRESH: Final = "<script>setTimeout(function(){location.reload()},{ms});</script>"  # reload only

_NAV: Final = (
    ("cluster", "/", "Cluster"),
    ("topics", "/topics", "Topics"),
    ("groups", "/groups", "Consumers"),
    ("messages", "/messages", "Messages"),
)


def _fmt_time(ms: int | None) -> str:
    if not ms:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def _cell(value: Any, name: str = "", num: bool = False) -> str:
    text = "-" if value is None else str(value)
    attrs = (f' data-field="{escape(name)}"' if name else "") + (' class="num"' if num else "")
    return f"<td{attrs}>{escape(text)}</td>"


def _table(headers: Sequence[str], rows: Iterable[str], table_id: str) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(rows)
    return f'<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def frame(title: str, active: str, body: str, refresh_s: int = 0) -> str:
    """The whole document around a page's body."""
    nav = "".join(
        f'<a href="{href}"{" class=on" if key == active else ""}>{label}</a>'
        for key, href, label in _NAV
    )
    script = _REFRESH.replace("{ms}", str(refresh_s * 1000)) if refresh_s > 0 else ""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)} - aiorocketmq dashboard</title><style>{_CSS}</style></head>"
        f'<body><header><span class="brand">aiorocketmq</span>{nav}</header>'
        f"<main><h1>{escape(title)}</h1>{body}</main>{script}</body></html>"
    )


def error_page(status: int, message: str) -> str:
    """A clear error, never a traceback."""
    body = f'<div class="error" id="error" data-status="{status}">{escape(message)}</div>'
    return frame(f"Error {status}", "", body)


def _node_row(cluster: str, name: str, node: dict[str, Any]) -> str:
    ratio = node["diskRatio"]
    return (
        f'<tr class="broker" data-address="{escape(node["address"])}">'
        + _cell(cluster)
        + _cell(name, "brokerName")
        + _cell(node["brokerId"], "brokerId", True)
        + _cell(node["role"], "role")
        + _cell(node["address"], "address")
        + _cell(node["version"] if node["online"] else "offline", "version")
        + _cell(f"{node['putTps']:.2f}", "putTps", True)
        + _cell(f"{node['getTps']:.2f}", "getTps", True)
        + _cell(node["commitLogMaxOffset"], "commitLogMaxOffset", True)
        + _cell(node["replicationLag"], "replicationLag", True)
        + _cell(None if ratio is None else f"{ratio:.2%}", "diskRatio", True)
        + "</tr>"
    )


def cluster_page(view: dict[str, Any], chart_svg: str, refresh_s: int = 0) -> str:
    """Clusters and their nodes, then the throughput chart."""
    rows = [
        _node_row(c["cluster"], s["brokerName"], node)
        for c in view["clusters"]
        for s in c["brokerSets"]
        for node in s["nodes"]
    ]
    headers = (
        "Cluster", "Broker", "BID", "Role", "Address", "Version", "Put TPS", "Get TPS",
        "CommitLog max offset", "Replication lag", "Disk used",
    )  # fmt: skip
    body = (
        _table(headers, rows, "brokers")
        + f'<h2>Throughput</h2><div id="chart">{chart_svg}</div>'
        + f'<p class="muted">as of {_fmt_time(view["generatedAt"])}</p>'
    )
    return frame("Cluster", "cluster", body, refresh_s)


def topics_page(view: dict[str, Any]) -> str:
    """Every topic with queue count, total messages and last update."""
    rows = [
        f'<tr class="topic" data-topic="{escape(t["topic"])}">'
        f'<td><a href="/topic?topic={quote(t["topic"])}">{escape(t["topic"])}</a></td>'
        + _cell(t["queues"], "queues", True)
        + _cell(t["totalMessages"], "totalMessages", True)
        + _cell(_fmt_time(t["lastUpdateTimestamp"]), "lastUpdate")
        + "</tr>"
        for t in view["topics"]
    ]
    toggle = (
        '<a id="toggle-system" href="/topics">hide system topics</a>'
        if view["showSystem"]
        else f'<a id="toggle-system" href="/topics?system=1">show {view["hidden"]} system topics'
        "</a>"
    )
    body = f"<p>{toggle}</p>" + _table(
        ("Topic", "Queues", "Total messages", "Last update"), rows, "topics"
    )
    return frame("Topics", "topics", body)


def topic_page(view: dict[str, Any]) -> str:
    """One topic's queues."""
    rows = [
        f'<tr class="queue" data-broker="{escape(q["brokerName"])}" data-queue="{q["queueId"]}">'
        + _cell(q["brokerName"])
        + _cell(q["queueId"], "queueId", True)
        + _cell(q["minOffset"], "minOffset", True)
        + _cell(q["maxOffset"], "maxOffset", True)
        + _cell(_fmt_time(q["lastUpdateTimestamp"]), "lastUpdate")
        + "</tr>"
        for q in view["queues"]
    ]
    body = f'<p>Total messages: <b id="total-messages">{view["totalMessages"]}</b></p>' + _table(
        ("Broker", "Queue", "Min offset", "Max offset", "Last update"), rows, "queues"
    )
    return frame(f"Topic {view['topic']}", "topics", body)


def groups_page(view: dict[str, Any]) -> str:
    """Every consumer group with its lag and TPS."""
    rows = [
        f'<tr class="group" data-group="{escape(g["group"])}">'
        f'<td><a href="/group?group={quote(g["group"])}">{escape(g["group"])}</a></td>'
        + _cell(g["lag"], "lag", True)
        + _cell(g["consumeTps"], "consumeTps", True)
        + _cell(g["clients"], "clients", True)
        + "</tr>"
        for g in view["groups"]
    ]
    body = _table(("Group", "Lag", "Consume TPS", "Clients"), rows, "groups")
    return frame("Consumer groups", "groups", body)


def group_page(view: dict[str, Any], lag_chart_svg: str = "") -> str:
    """One group's queues (broker offset, consumer offset, lag, client) and its lag
    over time (``chart.lag_svg``)."""
    rows = [
        f'<tr class="queue" data-broker="{escape(q["brokerName"])}" data-queue="{q["queueId"]}">'
        + _cell(q["topic"])
        + _cell(q["brokerName"])
        + _cell(q["queueId"], "queueId", True)
        + _cell(q["brokerOffset"], "brokerOffset", True)
        + _cell(q["consumerOffset"], "consumerOffset", True)
        + _cell(q["lag"], "lag", True)
        + _cell(q["client"], "client")
        + "</tr>"
        for q in view["queues"]
    ]
    body = (
        f'<p>Total lag: <b id="total-lag">{view["lag"]}</b> &middot; consume TPS: '
        f'<b id="consume-tps">{view["consumeTps"]}</b></p>'
        + _table(
            ("Topic", "Broker", "Queue", "Broker offset", "Consumer offset", "Lag", "Clients"),
            rows,
            "queues",
        )
        + (
            f'<h2>Lag over time</h2><div id="lag-chart">{lag_chart_svg}</div>'
            if lag_chart_svg
            else ""
        )
    )
    return frame(f"Consumer group {view['group']}", "groups", body)


def _forms(topic: str, key: str, msg_id: str) -> str:
    t, k, i = (escape(v, quote=True) for v in (topic, key, msg_id))
    return (
        '<form id="by-key" action="/messages"><b>By key</b> '
        f'<input name="topic" placeholder="topic" value="{t}">'
        f'<input name="key" placeholder="key" value="{k}"><button>Search</button></form>'
        '<form id="by-id" action="/messages"><b>By id</b> '
        f'<input name="topic" placeholder="topic (for a unique key)" value="{t}">'
        f'<input name="msgId" placeholder="offsetMsgId or unique key" size="40" value="{i}">'
        "<button>Search</button></form>"
    )


def _message(msg: dict[str, Any]) -> str:
    props = "".join(
        f"<tr><td>{escape(k)}</td><td>{escape(v)}</td></tr>" for k, v in msg["properties"].items()
    )
    facts = (
        f"<tr><td>Topic</td><td>{escape(msg['topic'])}</td></tr>"
        f'<tr><td>Message id</td><td data-field="msgId">{escape(msg["msgId"])}</td></tr>'
        f'<tr><td>offsetMsgId</td><td data-field="offsetMsgId">'
        f"{escape(msg['offsetMsgId'])}</td></tr>"
        f"<tr><td>Queue / offset</td><td>{msg['queueId']} / {msg['queueOffset']}</td></tr>"
        f"<tr><td>Stored</td><td>{_fmt_time(msg['storeTimestamp'])} at "
        f"{escape(msg['storeHost'])}</td></tr>"
        f"<tr><td>Born host</td><td>{escape(msg['bornHost'])}</td></tr>"
    )
    return (
        '<section class="message">'
        f"<table>{facts}</table><h2>Properties</h2><table>{props}</table>"
        f"<h2>Body ({msg['bodySize']} bytes)</h2>"
        f'<pre class="body-preview">{escape(msg["bodyPreview"])}</pre></section>'
    )


def messages_page(
    view: dict[str, Any] | None, topic: str = "", key: str = "", msg_id: str = ""
) -> str:
    """The lookup forms, and the messages found (``view`` None: nothing asked yet)."""
    body = _forms(topic, key, msg_id)
    if view is not None:
        body += f'<p id="found">{len(view["messages"])} message(s)</p>'
        body += "".join(_message(m) for m in view["messages"])
    return frame("Message lookup", "messages", body)
