"""RemotingServer: accept connections and dispatch their requests by code.

Owns: the listening socket (port 0 picks a free port; the bound address is
readable), the set of live connections, close notifications for upper layers
(a name server evicts a broker at once when its connection closes), idle-connection
expiry, ``maxConnections`` (one more gets SYSTEM_BUSY and is closed), and
server-to-client requests bounded by RocketMQ's semaphores, and extra listening
ports at fixed offsets from the main one that serve exactly as it does (the
broker's VIP channel, RocketMQ's ``fastRemotingServer`` at ``listenPort - 2``;
with port 0 the pair is found together, so ``main + offset`` always holds). With
``tls.server.mode`` permissive or enforcing the listener is a ``TlsServer``
(``tls_listener.py``); disabled keeps ``loop.create_server``.

Must not: interpret request codes; that is the processors' job.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import ssl
import time
from collections.abc import Callable, Coroutine
from typing import Any

from aiorocketmq.remoting.codes import ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingServerConfig
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.in_flight import InFlightSlots
from aiorocketmq.remoting.tls import build_server_context
from aiorocketmq.remoting.tls_listener import TlsServer, start_tls_server

log = logging.getLogger(__name__)

#: How long a connection past ``maxConnections`` may stay without sending anything.
_OVER_LIMIT_GRACE_S = 2.0

#: With port 0, how many free main ports are tried before giving up finding one
#: whose offset ports are free too (each try is two binds; a busy host fails few).
_PAIR_ATTEMPTS = 64

Listener = asyncio.base_events.Server | TlsServer

ConnectionListener = Callable[[RemotingConnection], None]


class RemotingServer:
    """A RocketMQ remoting server.

    Args:
        processors: request handlers by code; unknown codes get
            REQUEST_CODE_NOT_SUPPORTED.
        config: listen address and limits.
        name: used in log lines (``namesrv``, ``broker``...).
        extra_port_offsets: more ports to listen on, each ``offset`` from the main
            one (the broker's VIP channel: ``(-2,)``); they share the processors,
            connections and limits of the main port.
    """

    def __init__(
        self,
        processors: ProcessorTable,
        config: RemotingServerConfig | None = None,
        *,
        name: str = "remoting",
        extra_port_offsets: tuple[int, ...] = (),
    ) -> None:
        self.config = config or RemotingServerConfig()
        self.name = name
        self._processors = processors
        self._offsets = extra_port_offsets
        self._server: Listener | None = None
        self._extra: list[Listener] = []
        self.extra_ports: list[int] = []
        self._connections: set[RemotingConnection] = set()
        self._open_listeners: list[ConnectionListener] = []
        self._close_listeners: list[ConnectionListener] = []
        self._async_slots = InFlightSlots(self.config.server_async_semaphore_value)
        self._oneway_slots = InFlightSlots(self.config.server_oneway_semaphore_value)
        self._idle_task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self.host = ""
        self.port = 0
        self._refused = 0

    @property
    def address(self) -> str:
        """The bound ``host:port`` (valid after ``start``)."""
        return f"{self.host}:{self.port}"

    @property
    def connections(self) -> frozenset[RemotingConnection]:
        """The live connections."""
        return frozenset(self._connections)

    def add_connection_listener(
        self, on_open: ConnectionListener | None = None, on_close: ConnectionListener | None = None
    ) -> None:
        """Get told when a connection opens or closes (called on the event loop)."""
        if on_open is not None:
            self._open_listeners.append(on_open)
        if on_close is not None:
            self._close_listeners.append(on_close)

    async def start(self) -> None:
        """Bind and start accepting; ``listen_port`` 0 picks a free port.

        Raises:
            OSError: a port (or, with port 0, every pair tried) is in use.
        """
        loop = asyncio.get_running_loop()
        tls = self.config.tls
        context = await asyncio.to_thread(build_server_context, tls) if tls.server_enabled else None
        port = self.config.listen_port
        for attempt in range(1 if port else _PAIR_ATTEMPTS):
            self._server = await self._listen(port, context)
            self.host, self.port = self._server.sockets[0].getsockname()[:2]
            try:
                await self._listen_extra(context)
                break
            except OSError as exc:
                if port or exc.errno not in (errno.EADDRINUSE, errno.EACCES, errno.EINVAL):
                    await self._unbind()
                    raise
                # Port 0: this main port's neighbour is taken; try another main port.
                await self._unbind()
                if attempt == _PAIR_ATTEMPTS - 1:
                    raise OSError(
                        exc.errno,
                        f"{self.name}: no free port P with P{self._offsets_text()} free too "
                        f"after {_PAIR_ATTEMPTS} tries",
                    ) from exc
        if self.config.server_channel_max_idle_time_seconds > 0:
            self._idle_task = loop.create_task(self._idle_loop(), name=f"{self.name}-idle")
        log.info(
            "%s listening address=%s extra_ports=%s tls=%s",
            self.name, self.address, self.extra_ports, tls.server_mode,
        )  # fmt: skip

    def _offsets_text(self) -> str:
        return ", ".join(f"{off:+d}" for off in self._offsets)

    async def _listen(self, port: int, context: ssl.SSLContext | None) -> Listener:
        tls = self.config.tls
        if context is not None:
            return await start_tls_server(
                self._make_protocol,
                self.config.listen_host,
                port,
                context,
                tls.server_mode,
                handshake_timeout_s=tls.handshake_timeout_s,
                name=self.name,
            )
        loop = asyncio.get_running_loop()
        return await loop.create_server(
            self._make_protocol, self.config.listen_host, port, reuse_address=True, backlog=1024
        )

    async def _listen_extra(self, context: ssl.SSLContext | None) -> None:
        """Bind every ``main + offset`` port, or raise OSError naming the one in use."""
        for offset in self._offsets:
            port = self.port + offset
            if not 0 < port <= 65535:
                raise OSError(errno.EINVAL, f"{self.name}: port {self.port}{offset:+d} is invalid")
            try:
                server = await self._listen(port, context)
            except OSError as exc:
                raise OSError(
                    exc.errno,
                    f"{self.name}: cannot listen on {port} (listenPort{offset:+d}): {exc}",
                ) from exc
            self._extra.append(server)
            self.extra_ports.append(port)

    async def _unbind(self) -> None:
        for server in [self._server, *self._extra]:
            if server is not None:
                server.close()
        self._server, self._extra, self.extra_ports = None, [], []

    async def shutdown(self, grace_s: float = 2.0) -> None:
        """Stop accepting, close every connection and wait for them (idempotent)."""
        self._stopping.set()
        if self._idle_task is not None:
            self._idle_task.cancel()
            await asyncio.gather(self._idle_task, return_exceptions=True)
            self._idle_task = None
        await self._unbind()
        connections = list(self._connections)
        for conn in connections:
            conn.close()
        if connections:
            waits = [asyncio.ensure_future(c.wait_closed()) for c in connections]
            _, slow = await asyncio.wait(waits, timeout=grace_s)
            for conn in connections:
                if not conn.is_closed:
                    conn.abort()
            for waiter in slow:
                waiter.cancel()

    def invoke(
        self, conn: RemotingConnection, request: RemotingCommand, timeout_s: float
    ) -> Coroutine[Any, Any, RemotingCommand]:
        """Send a request to a client on its connection and await the reply (the
        returned coroutine does it all, holding one of the async slots)."""
        return conn.invoke(request, timeout_s, self._async_slots)

    async def invoke_oneway(
        self, conn: RemotingConnection, request: RemotingCommand, timeout_s: float = 3.0
    ) -> None:
        """Send a oneway request (flag 2, no reply) to a client."""
        await self._oneway_slots.take(timeout_s, conn.remote_address)
        try:
            await conn.invoke_oneway(request, timeout_s)
        finally:
            self._oneway_slots.give()

    def _make_protocol(self) -> RemotingConnection:
        if len(self._connections) >= self.config.max_connections:
            return self._over_limit()
        conn = RemotingConnection(
            self._processors,
            max_frame_length=self.config.frame_max_length,
            max_in_flight=self.config.max_in_flight_per_connection,
            write_high_water=self.config.write_buffer_high_water,
            on_lost=self._on_lost,
            advertise_msgpack=True,
        )
        self._connections.add(conn)
        # The peer address is known only in connection_made; tell listeners after it.
        asyncio.get_running_loop().call_soon(self._on_open, conn)
        return conn

    def _over_limit(self) -> RemotingConnection:
        """A connection past ``maxConnections``: SYSTEM_BUSY to its first request, then
        closed; one that sends nothing is closed after ``_OVER_LIMIT_GRACE_S``."""
        loop = asyncio.get_running_loop()
        limit = self.config.max_connections
        remark = f"[OVERLOAD] {self.name} serves at most maxConnections={limit} connections"
        self._refused += 1
        if self._refused == 1 or self._refused % 1000 == 0:
            log.warning(
                "%s refused connections=%d (maxConnections=%d)", self.name, self._refused, limit
            )

        def busy(conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
            # The reply is flushed when data_received returns; close after that.
            loop.call_soon(conn.close)
            return request.response_to(ResponseCode.SYSTEM_BUSY, remark)

        table = ProcessorTable()
        table.set_default(busy)
        conn = RemotingConnection(
            table, max_frame_length=self.config.frame_max_length, max_in_flight=1,
            on_lost=self._connections.discard,
        )  # fmt: skip
        self._connections.add(conn)
        loop.call_later(_OVER_LIMIT_GRACE_S, conn.close)
        return conn

    @property
    def refused_connections(self) -> int:
        """Connections turned away by ``maxConnections`` since start."""
        return self._refused

    def _on_open(self, conn: RemotingConnection) -> None:
        for listener in self._open_listeners:
            _notify(listener, conn)

    def _on_lost(self, conn: RemotingConnection) -> None:
        self._connections.discard(conn)
        for listener in self._close_listeners:
            _notify(listener, conn)

    async def _idle_loop(self) -> None:
        max_idle_s = self.config.server_channel_max_idle_time_seconds
        period_s = max(0.05, min(10.0, max_idle_s / 4))
        while not self._stopping.is_set():
            try:
                await asyncio.wait_for(self._stopping.wait(), period_s)
            except TimeoutError:
                pass
            now = time.monotonic()
            for conn in list(self._connections):
                if now - conn.last_active_monotonic > max_idle_s and not conn.is_closed:
                    log.info("%s closing idle connection remote=%s", self.name, conn.remote_address)
                    conn.close()


def _notify(listener: ConnectionListener, conn: RemotingConnection) -> None:
    try:
        listener(conn)
    except Exception:
        log.exception("connection listener failed remote=%s", conn.remote_address)
