"""A read-only web dashboard over the admin API (``mqadmin dashboard``).

Owns: the data builders (``data``), the HTML pages (``pages``), the throughput
history and its SVG chart (``chart``) and the HTTP server (``server``).

Must not: change anything on brokers or name servers, or load anything from the
network at run time (no CDN, no external script).
"""

from aiorocketmq.dashboard.chart import TpsHistory, tps_svg
from aiorocketmq.dashboard.server import DEFAULT_PORT, DashboardServer, dashboard

__all__ = ["DEFAULT_PORT", "DashboardServer", "TpsHistory", "dashboard", "tps_svg"]
