"""The dashboard's HTTP server and ``mqadmin dashboard``.

Owns: ``DashboardServer``, a small asyncio HTTP/1.1 GET server (one request per
connection, like ``remoting.metrics_http``) that routes each path to a data
builder and renders it as HTML or, under ``/api/``, as JSON; the sampler task
that records every broker node's put/get TPS into a ``TpsHistory`` for the
chart; and ``dashboard``, the mqadmin command that serves until interrupted.

Must not: change anything on a broker (only read requests are sent), block the
loop, or answer with a traceback: bad input is a 4xx page, an unreachable
cluster a 502 page, anything unexpected a logged 500 with a one-line message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
from argparse import Namespace
from collections.abc import Awaitable, Callable
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

from aiorocketmq.admin.commands import UsageError, Write
from aiorocketmq.admin.mq_admin import MQAdmin
from aiorocketmq.client.errors import MQClientError
from aiorocketmq.dashboard import data, pages
from aiorocketmq.dashboard.chart import TpsHistory, lag_svg, tps_svg

__all__ = ["DEFAULT_PORT", "DashboardServer", "dashboard"]

log = logging.getLogger(__name__)

DEFAULT_PORT: Final = 8080
"""rocketmq-dashboard's default ``server.port``."""

_MAX_HEAD: Final = 16 * 1024
_READ_TIMEOUT_S: Final = 10.0
_HTML: Final = "text/html; charset=utf-8"
_JSON: Final = "application/json"
_REASONS: Final = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}

Reply = tuple[int, bytes, str]
Query = dict[str, str]


class DashboardServer:
    """Serves the dashboard pages for one ``MQAdmin``.

    Args:
        admin: the admin facade every page reads through (not closed here).
        sample_interval_s: how often the sampler records TPS (0 disables it).
        history: the ring buffer the chart draws (a 120-sample one when None).
        refresh_s: the cluster page reloads itself this often (0: never).
    """

    def __init__(
        self,
        admin: MQAdmin,
        *,
        sample_interval_s: float = 5.0,
        history: TpsHistory | None = None,
        refresh_s: int = 0,
    ) -> None:
        self.admin = admin
        self.history = history or TpsHistory()
        self.sample_interval_s = sample_interval_s
        self.refresh_s = refresh_s
        self.port = 0
        self._server: asyncio.Server | None = None
        self._sampler: asyncio.Task[None] | None = None
        self._routes: dict[str, Callable[[Query], Awaitable[tuple[Any, str]]]] = {
            "/": self._cluster,
            "/cluster": self._cluster,
            "/topics": self._topics,
            "/topic": self._topic,
            "/groups": self._groups,
            "/group": self._group,
            "/messages": self._messages,
        }

    async def start(self, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> None:
        """Bind ``host:port`` (0: a free port, read back from ``port``) and start sampling."""
        self._server = await asyncio.start_server(self._serve, host, port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        if self.sample_interval_s > 0:
            self._sampler = asyncio.create_task(self._sample_loop(), name="dashboard-sampler")

    async def shutdown(self) -> None:
        """Stop sampling and listening (idempotent)."""
        sampler, self._sampler = self._sampler, None
        if sampler is not None:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()

    # -- sampling ---------------------------------------------------------------------

    async def sample_once(self) -> None:
        """Record every node's current put/get TPS as one sample."""
        view = await data.cluster_view(self.admin)
        values: dict[str, float] = {}
        for cluster in view["clusters"]:
            for broker_set in cluster["brokerSets"]:
                for node in broker_set["nodes"]:
                    if node["online"]:
                        name = f"{broker_set['brokerName']}/{node['brokerId']}"
                        values[f"{name} put"] = node["putTps"]
                        values[f"{name} get"] = node["getTps"]
        self.history.add(values)

    async def _sample_loop(self) -> None:
        while True:
            try:
                await self.sample_once()
            except MQClientError as exc:  # the cluster may come and go; keep sampling
                log.warning("dashboard sample failed: %s", exc)
            await asyncio.sleep(self.sample_interval_s)

    # -- HTTP -------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT_S)
            status, body, ctype = await self.answer(head)
            reason = _REASONS.get(status, "Error")
            writer.write(
                f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\n"
                "Connection: close\r\n\r\n".encode("ascii")
                + (b"" if head.startswith(b"HEAD ") else body)  # HEAD: GET's headers only
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass  # the browser went away or sent garbage: nothing to answer
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def answer(self, head: bytes) -> Reply:
        """The reply (status, body, content type) to one request head (HEAD: as GET)."""
        parts = head.split(b"\r\n", 1)[0].split()
        if len(head) > _MAX_HEAD or len(parts) != 3:
            return 400, b"bad request\n", "text/plain"
        method, target = parts[0], parts[1].decode("latin-1")
        if method not in (b"GET", b"HEAD"):
            return 405, b"the dashboard is read-only: GET only\n", "text/plain"
        return await self.get(target)

    async def get(self, target: str) -> Reply:
        """Route ``target`` (path and query) to its page or its ``/api/`` JSON twin."""
        url = urlsplit(target)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        path = url.path.rstrip("/") or "/"
        as_json = path.startswith("/api/")
        if as_json:
            path = path[4:]
        if path in ("/tps", "/chart.svg"):
            return self._chart(as_json or path == "/tps")
        route = self._routes.get(path)
        try:
            if route is None:
                raise data.NotFound(f"no such page: {url.path}")
            view, html = await route(query)
        except data.DashboardError as exc:
            return self._error(exc.status, exc.message, as_json)
        except MQClientError as exc:
            return self._error(502, f"the cluster did not answer: {exc}", as_json)
        except Exception as exc:  # a bug must not take the dashboard down
            log.exception("dashboard page %s failed", target)
            return self._error(500, f"internal error: {type(exc).__name__}", as_json)
        if as_json:
            return 200, json.dumps(view, indent=1).encode(), _JSON
        return 200, html.encode(), _HTML

    def _chart(self, as_json: bool) -> Reply:
        if as_json:
            return 200, json.dumps(self.history.to_json()).encode(), _JSON
        return 200, tps_svg(self.history).encode(), "image/svg+xml"

    @staticmethod
    def _error(status: int, message: str, as_json: bool) -> Reply:
        if as_json:
            return status, json.dumps({"error": message, "status": status}).encode(), _JSON
        return status, pages.error_page(status, message).encode(), _HTML

    # -- pages ------------------------------------------------------------------------

    async def _cluster(self, query: Query) -> tuple[Any, str]:
        view = await data.cluster_view(self.admin)
        return view, pages.cluster_page(view, tps_svg(self.history), self.refresh_s)

    async def _topics(self, query: Query) -> tuple[Any, str]:
        view = await data.topics_view(self.admin, query.get("system", "") in ("1", "true"))
        return view, pages.topics_page(view)

    async def _topic(self, query: Query) -> tuple[Any, str]:
        view = await data.topic_detail(self.admin, _required(query, "topic"))
        return view, pages.topic_page(view)

    async def _groups(self, query: Query) -> tuple[Any, str]:
        view = await data.groups_view(self.admin)
        return view, pages.groups_page(view)

    async def _group(self, query: Query) -> tuple[Any, str]:
        view = await data.group_detail(self.admin, _required(query, "group"))
        return view, pages.group_page(view, lag_svg(view["lagHistory"]))

    async def _messages(self, query: Query) -> tuple[Any, str]:
        topic, key, msg_id = (query.get(k, "").strip() for k in ("topic", "key", "msgId"))
        view: dict[str, Any] | None = None
        if msg_id:
            view = await data.message_by_id(self.admin, msg_id, topic)
        elif key:
            if not topic:
                raise data.BadInput("a lookup by key needs the topic")
            view = await data.message_by_key(self.admin, topic, key)
        return view, pages.messages_page(view, topic, key, msg_id)


def _required(query: Query, name: str) -> str:
    value = query.get(name, "").strip()
    if not value:
        raise data.BadInput(f"the {name!r} parameter is required")
    return value


async def dashboard(admin: MQAdmin, args: Namespace, write: Write) -> None:
    """``mqadmin dashboard [-n] [--host] [--port]``: serve the pages until interrupted."""
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port out of range: {args.port}")
    admin.namesrv  # noqa: B018 - fail fast (NoNameServerError) without -n / NAMESRV_ADDR
    server = DashboardServer(admin, sample_interval_s=args.sampleInterval, refresh_s=args.refresh)
    try:
        await server.start(args.host, args.port)
    except OSError as exc:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc}") from exc
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        # A clean exit (0) on SIGTERM/SIGINT; not possible off the main thread.
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    write(f"dashboard ready at http://{args.host}:{server.port}/\n")
    try:
        await stop.wait()
    finally:
        await server.shutdown()
