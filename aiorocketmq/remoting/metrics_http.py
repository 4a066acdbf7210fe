"""Metrics plumbing shared by the broker and the name server.

Owns: ``ObservedProcessorTable`` (a ``ProcessorTable`` whose handlers count every
request's time into a histogram, and hand the replies of the codes that ask for them
to one observer: the cheap hook behind ``rocketmq_rpc_latency``),
``BucketHistogram`` (per-key bucket counts kept as plain lists, turned into a
Prometheus histogram only at scrape time) and
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
from collections.abc import Awaitable, Callable, Hashable, Iterable, Iterator, Sequence
from time import perf_counter
from typing import Final

from prometheus_client.metrics_core import HistogramMetricFamily

from aiorocketmq.common.kernels import load_kernel
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
    "observed",
]

log = logging.getLogger(__name__)

#: ``remoting/_observe_kernels.pyx``: a timed handler in C when built and not turned off.
_KERNEL = load_kernel("aiorocketmq.remoting._observe_kernels")
_KERNEL_MAX_BOUNDS: Final = 64  # the kernel's fixed room for bounds

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
    """A processor table that times every handler into a latency histogram.

    Every request's handler time goes to ``latency`` (milliseconds, keyed by request
    code); the requests whose code is in ``reply_codes`` also go to ``on_reply`` with
    their reply (a pull's traffic, a route lookup's outcome). Held pulls report when
    their reply is ready, so their time includes the hold. A handler that raises
    reports ``None``.

    The wrapper is made once per registration (``observed``): compiled when the kernel
    is built, so a request costs two ``perf_counter`` calls and no Python frame of
    its own (plus one coroutine when the handler answers asynchronously).

    Args:
        latency: Gets every request's time.
        on_reply: Gets ``(request, reply, seconds)`` for ``reply_codes``; must not raise.
        reply_codes: The request codes ``on_reply`` wants.
    """

    __slots__ = ("_latency", "_on_reply", "_reply_codes")

    def __init__(
        self,
        latency: BucketHistogram,
        on_reply: RequestObserver | None = None,
        reply_codes: Iterable[int] = (),
    ) -> None:
        super().__init__()
        self._latency = latency
        self._on_reply = on_reply
        self._reply_codes = frozenset(reply_codes)

    def register(self, code: int, handler: Handler) -> None:
        """Route ``code`` to ``handler``, timed."""
        super().register(code, self._observed(handler))

    def set_default(self, handler: Handler) -> None:
        """Handle unregistered codes with ``handler``, timed."""
        super().set_default(self._observed(handler))

    def _observed(self, handler: Handler) -> Handler:
        return observed(handler, self._latency, self._on_reply, self._reply_codes)


def observed(
    handler: Handler,
    latency: BucketHistogram,
    on_reply: RequestObserver | None = None,
    reply_codes: frozenset[int] = frozenset(),
) -> Handler:
    """``handler`` timed into ``latency``, its replies of ``reply_codes`` to ``on_reply``
    (``ObservedProcessorTable``); the C kernel's ``ObservedHandler`` when built."""
    if _KERNEL is not None and len(latency.bounds) <= _KERNEL_MAX_BOUNDS:
        return _KERNEL.ObservedHandler(  # type: ignore[no-any-return]
            handler, latency._rows, latency.bounds, on_reply, reply_codes, _finish,
            RemotingCommand, inspect.isawaitable, perf_counter,
        )  # fmt: skip

    def report(request: RemotingCommand, reply: HandlerResult, seconds: float) -> None:
        code = request.code
        latency.observe(code, seconds * 1000.0)
        if on_reply is not None and code in reply_codes:
            on_reply(request, reply, seconds)  # type: ignore[arg-type]

    def run(conn: RemotingConnection, request: RemotingCommand) -> HandlerResult:
        start = perf_counter()
        try:
            result = handler(conn, request)
        except Exception:
            report(request, None, perf_counter() - start)
            raise
        # Most handlers answer inline; check that first (isawaitable costs ~0.3 us).
        if (
            type(result) is RemotingCommand or type(result) is bytes or result is None
            or not inspect.isawaitable(result)
        ):  # fmt: skip
            report(request, result, perf_counter() - start)
            return result
        return _finish(result, request, start, report)

    return run


async def _finish(
    pending: Awaitable[RemotingCommand | None],
    request: RemotingCommand,
    start: float,
    report: RequestObserver,
) -> RemotingCommand | None:
    reply: RemotingCommand | None = None
    try:
        reply = await pending
        return reply
    finally:
        report(request, reply, perf_counter() - start)


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
