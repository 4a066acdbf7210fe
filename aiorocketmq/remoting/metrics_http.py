"""Metrics plumbing shared by the broker and the name server.

Owns: ``ObservedProcessorTable`` (a ``ProcessorTable`` whose handlers report
every request, its reply and its time to one observer: the cheap hook behind
``rocketmq_rpc_latency``), ``BucketHistogram`` (per-key bucket counts kept as
plain lists, turned into a Prometheus histogram only at scrape time) and
``MetricsHttpServer`` (a tiny asyncio HTTP server answering ``GET /metrics``).

Must not: know what a broker or a name server counts (their ``metrics`` modules
do), start threads, or block the loop (a scrape renders on the loop; anything
slow is the renderer's business, done in its executor before rendering).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Hashable, Iterator, Sequence
from time import perf_counter
from typing import Final

from prometheus_client.metrics_core import HistogramMetricFamily

from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.connection import (
    Handler,
    HandlerResult,
    ProcessorTable,
    RemotingConnection,
)

__all__ = [
    "RPC_LATENCY_BUCKETS_MS",
    "TEXT_CONTENT_TYPE",
    "BucketHistogram",
    "MetricsHttpServer",
    "ObservedProcessorTable",
    "RequestObserver",
    "free_or_configured_port",
]

log = logging.getLogger(__name__)

#: RocketMQ 5's ``rocketmq_rpc_latency`` buckets (RemotingMetricsManager), in ms.
RPC_LATENCY_BUCKETS_MS: Final = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)

#: Prometheus text format 0.0.4 (what ``generate_latest`` writes for our plain
#: names), which every Prometheus 2.x and 3.x server reads.
TEXT_CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

RequestObserver = Callable[[RemotingCommand, RemotingCommand | bytes | None, float], None]
"""``(request, reply or None, seconds)``: called once per handled request, on the loop
(the reply as the handler gave it: an already encoded one is ``bytes``)."""

#: Largest request head a scrape may send (request line + headers).
_MAX_HEAD: Final = 16 * 1024
_READ_TIMEOUT_S: Final = 10.0


class ObservedProcessorTable(ProcessorTable):
    """A processor table that times every handler and reports its reply.

    The wrapper is made once per registration, so a request costs two
    ``perf_counter`` calls and one observer call (plus one coroutine when the
    handler answers asynchronously). Held pulls report when their reply is ready,
    so their time includes the hold. A handler that raises reports ``None``.

    Args:
        observer: Gets ``(request, reply, seconds)``; it must not raise.
    """

    __slots__ = ("_observer",)

    def __init__(self, observer: RequestObserver) -> None:
        super().__init__()
        self._observer = observer

    def register(self, code: int, handler: Handler) -> None:
        """Route ``code`` to ``handler``, timed."""
        super().register(code, _observed(handler, self._observer))

    def set_default(self, handler: Handler) -> None:
        """Handle unregistered codes with ``handler``, timed."""
        super().set_default(_observed(handler, self._observer))


def _observed(handler: Handler, observer: RequestObserver) -> Handler:
    def run(conn: RemotingConnection, request: RemotingCommand) -> HandlerResult:
        start = perf_counter()
        try:
            result = handler(conn, request)
        except Exception:
            observer(request, None, perf_counter() - start)
            raise
        # Most handlers answer inline; check that first (isawaitable costs ~0.3 us).
        if (
            type(result) is RemotingCommand or type(result) is bytes or result is None
            or not inspect.isawaitable(result)
        ):  # fmt: skip
            observer(request, result, perf_counter() - start)
            return result
        return _finish(result, request, start, observer)

    return run


async def _finish(
    pending: Awaitable[RemotingCommand | None],
    request: RemotingCommand,
    start: float,
    observer: RequestObserver,
) -> RemotingCommand | None:
    reply: RemotingCommand | None = None
    try:
        reply = await pending
        return reply
    finally:
        observer(request, reply, perf_counter() - start)


class BucketHistogram:
    """Bucket counts and a sum per label key, cheap to observe (one dict lookup).

    Args:
        bounds: Upper bounds (``le``), increasing; +Inf is implied.
    """

    __slots__ = ("_bounds", "_rows")

    def __init__(self, bounds: Sequence[float]) -> None:
        self._bounds = tuple(bounds)
        # Per key: one count per bucket (+Inf last), then the sum.
        self._rows: dict[Hashable, list[float]] = {}

    @property
    def bounds(self) -> tuple[float, ...]:
        """The finite upper bounds."""
        return self._bounds

    def observe(self, key: Hashable, value: float) -> None:
        """Count ``value`` under ``key``."""
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = [0] * (len(self._bounds) + 2)
        row[bisect_left(self._bounds, value)] += 1
        row[-1] += value

    def items(self) -> Iterator[tuple[Hashable, list[int], float]]:
        """``(key, per-bucket counts (not cumulative, +Inf last), sum)`` for every key."""
        for key, row in list(self._rows.items()):
            yield key, [int(c) for c in row[:-1]], float(row[-1])


def histogram_family(
    name: str,
    documentation: str,
    labels: Sequence[str],
    bounds: Sequence[float],
    rows: Sequence[tuple[Sequence[str], Sequence[int], float]],
) -> HistogramMetricFamily:
    """A Prometheus histogram from per-bucket (non-cumulative, +Inf last) counts."""
    family = HistogramMetricFamily(name, documentation, labels=list(labels))
    for values, counts, total in rows:
        running = 0
        buckets: list[tuple[str, float]] = []
        for bound, count in zip((*map(_le, bounds), "+Inf"), counts, strict=True):
            running += count
            buckets.append((bound, float(running)))
        family.add_metric(list(values), buckets, total)
    return family


def _le(bound: float) -> str:
    return repr(float(bound))


def free_or_configured_port(port: int) -> int:
    """``-1`` (pick a free port) becomes 0 for ``bind``; other ports pass through."""
    return 0 if port < 0 else port


class MetricsHttpServer:
    """Serves ``GET /metrics`` (Prometheus text format) on its own port.

    Each connection carries one request, answered then closed. Other paths get
    404, other methods 405; a request head that is too large or too slow is dropped.

    Args:
        render: Produces the exposition bytes (may await executor work).
        content_type: The ``Content-Type`` of a scrape reply.
        name: For log lines.
    """

    def __init__(
        self, render: Callable[[], Awaitable[bytes]], content_type: str, *, name: str
    ) -> None:
        self._render = render
        self._content_type = content_type
        self._name = name
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> None:
        """Bind ``host:port`` (``-1`` or 0: a free port, read back from ``port``)."""
        self._server = await asyncio.start_server(
            self._serve, host, free_or_configured_port(port), reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("%s metrics listening address=%s:%d path=/metrics", self._name, host, self.port)

    async def shutdown(self) -> None:
        """Stop accepting and close the listener (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT_S)
            status, body, ctype = await self._answer(head)
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("ascii")
                + body
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass  # the scraper went away or sent garbage: nothing to answer
        except ConnectionError:
            pass
        except Exception:
            log.exception("%s metrics scrape failed", self._name)
        finally:
            writer.close()

    async def _answer(self, head: bytes) -> tuple[str, bytes, str]:
        if len(head) > _MAX_HEAD:
            return "431 Request Header Fields Too Large", b"", "text/plain"
        parts = head.split(b"\r\n", 1)[0].split()
        if len(parts) != 3:
            return "400 Bad Request", b"bad request line\n", "text/plain"
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if target != b"/metrics":
            return "404 Not Found", b"try /metrics\n", "text/plain"
        if method not in (b"GET", b"HEAD"):
            return "405 Method Not Allowed", b"", "text/plain"
        body = await self._render()
        return "200 OK", b"" if method == b"HEAD" else body, self._content_type
