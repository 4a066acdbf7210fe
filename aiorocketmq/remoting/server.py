"""RemotingServer: accept connections and dispatch their requests by code.

Owns: the listening socket (port 0 picks a free port; the bound address is
readable), the set of live connections, close notifications for upper layers
(a name server evicts a broker at once when its connection closes), idle-connection
expiry, ``maxConnections`` (one more gets SYSTEM_BUSY and is closed), and
server-to-client requests bounded by RocketMQ's semaphores. With
``tls.server.mode`` permissive or enforcing the listener is a ``TlsServer``
(``tls_listener.py``); disabled keeps ``loop.create_server``.

Must not: interpret request codes; that is the processors' job.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from aiorocketmq.remoting.codes import ResponseCode
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingServerConfig
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection, acquire_slot
from aiorocketmq.remoting.tls import build_server_context
from aiorocketmq.remoting.tls_listener import TlsServer, start_tls_server

log = logging.getLogger(__name__)

#: How long a connection past ``maxConnections`` may stay without sending anything.
_OVER_LIMIT_GRACE_S = 2.0

ConnectionListener = Callable[[RemotingConnection], None]


class RemotingServer:
    """A RocketMQ remoting server.

    Args:
        processors: request handlers by code; unknown codes get
            REQUEST_CODE_NOT_SUPPORTED.
        config: listen address and limits.
        name: used in log lines (``namesrv``, ``broker``...).
    """

    def __init__(
        self,
        processors: ProcessorTable,
        config: RemotingServerConfig | None = None,
        *,
        name: str = "remoting",
    ) -> None:
        self.config = config or RemotingServerConfig()
        self.name = name
        self._processors = processors
        self._server: asyncio.base_events.Server | TlsServer | None = None
        self._connections: set[RemotingConnection] = set()
        self._open_listeners: list[ConnectionListener] = []
        self._close_listeners: list[ConnectionListener] = []
        self._async_slots = asyncio.Semaphore(self.config.server_async_semaphore_value)
        self._oneway_slots = asyncio.Semaphore(self.config.server_oneway_semaphore_value)
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
        """Bind and start accepting; ``listen_port`` 0 picks a free port."""
        loop = asyncio.get_running_loop()
        tls = self.config.tls
        if tls.server_enabled:
            context = await asyncio.to_thread(build_server_context, tls)
            self._server = await start_tls_server(
                self._make_protocol,
                self.config.listen_host,
                self.config.listen_port,
                context,
                tls.server_mode,
                handshake_timeout_s=tls.handshake_timeout_s,
                name=self.name,
            )
        else:
            self._server = await loop.create_server(
                self._make_protocol,
                self.config.listen_host,
                self.config.listen_port,
                reuse_address=True,
                backlog=1024,
            )
        sockname = self._server.sockets[0].getsockname()
        self.host, self.port = sockname[0], sockname[1]
        if self.config.server_channel_max_idle_time_seconds > 0:
            self._idle_task = loop.create_task(self._idle_loop(), name=f"{self.name}-idle")
        log.info("%s listening address=%s tls=%s", self.name, self.address, tls.server_mode)

    async def shutdown(self, grace_s: float = 2.0) -> None:
        """Stop accepting, close every connection and wait for them (idempotent)."""
        self._stopping.set()
        if self._idle_task is not None:
            self._idle_task.cancel()
            await asyncio.gather(self._idle_task, return_exceptions=True)
            self._idle_task = None
        if self._server is not None:
            self._server.close()
            self._server = None
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

    async def invoke(
        self, conn: RemotingConnection, request: RemotingCommand, timeout_s: float
    ) -> RemotingCommand:
        """Send a request to a client on its connection and await the reply."""
        await acquire_slot(self._async_slots, timeout_s, conn.remote_address)
        try:
            return await conn.invoke(request, timeout_s)
        finally:
            self._async_slots.release()

    async def invoke_oneway(
        self, conn: RemotingConnection, request: RemotingCommand, timeout_s: float = 3.0
    ) -> None:
        """Send a oneway request (flag 2, no reply) to a client."""
        await acquire_slot(self._oneway_slots, timeout_s, conn.remote_address)
        try:
            await conn.invoke_oneway(request, timeout_s)
        finally:
            self._oneway_slots.release()

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
