"""RemotingClient: one reused connection per address, requests with timeouts.

Owns: the connection table (``host:port`` -> connection), connecting (concurrent
callers share one connect attempt), reconnecting on the next request after a
connection closed, the in-flight bounds (RocketMQ's async and oneway semaphores),
idle-connection expiry, and TLS when ``use_tls`` is on (the SSL context is built
once, in a thread, on the first connect; the handshake counts against the connect
timeout).

Must not: retry a failed request (callers decide: a producer retries another
broker, a pull is rescheduled) or interpret response codes.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Coroutine
from typing import Any

from aiorocketmq.remoting.acl_sign import SessionCredentials, sign_request
from aiorocketmq.remoting.codes import SerializeType
from aiorocketmq.remoting.command import RemotingCommand
from aiorocketmq.remoting.config import RemotingClientConfig
from aiorocketmq.remoting.connection import ProcessorTable, RemotingConnection
from aiorocketmq.remoting.errors import (
    RemotingConnectError,
    RemotingSendRequestError,
)
from aiorocketmq.remoting.in_flight import InFlightSlots
from aiorocketmq.remoting.tls import TlsConfigError, build_client_context

log = logging.getLogger(__name__)


def split_address(address: str) -> tuple[str, int]:
    """``"host:port"`` (or ``"[v6]:port"``) -> (host, port).

    Raises:
        ValueError: the address has no valid port.
    """
    host, sep, port_text = address.strip().rpartition(":")
    if not sep or not host:
        raise ValueError(f"address {address!r} is not host:port")
    port = int(port_text)
    if not 0 < port < 65536:
        raise ValueError(f"address {address!r} has an invalid port")
    return host.strip("[]"), port


class RemotingClient:
    """A RocketMQ remoting client.

    Args:
        config: connect timeout and in-flight bounds.
        processors: handlers for requests the servers send us (e.g.
            NOTIFY_CONSUMER_IDS_CHANGED); None answers them REQUEST_CODE_NOT_SUPPORTED.
        credentials: sign every request for a broker with ACL on (Java's
            ``AclClientRPCHook``); None sends requests unsigned.
    """

    def __init__(
        self,
        config: RemotingClientConfig | None = None,
        processors: ProcessorTable | None = None,
        *,
        credentials: SessionCredentials | None = None,
    ) -> None:
        self.config = config or RemotingClientConfig()
        self._processors = processors
        self._credentials = credentials
        self._connections: dict[str, RemotingConnection] = {}
        self._connecting: dict[str, asyncio.Future[RemotingConnection]] = {}
        self._async_slots = InFlightSlots(self.config.client_async_semaphore_value)
        self._oneway_slots = InFlightSlots(self.config.client_oneway_semaphore_value)
        mode = self.config.serialize_type
        self._fixed_type = None if mode == "AUTO" else SerializeType[mode]
        self._closed = False
        self._stopping = asyncio.Event()
        self._idle_task: asyncio.Task[None] | None = None
        self._ssl_context: asyncio.Future[ssl.SSLContext] | None = None

    @property
    def addresses(self) -> list[str]:
        """Addresses with an open connection."""
        return [a for a, c in self._connections.items() if not c.is_closed]

    def invoke(
        self, address: str, request: RemotingCommand, timeout_ms: int
    ) -> Coroutine[Any, Any, RemotingCommand]:
        """Send ``request`` to ``address`` and await the reply (the returned coroutine
        sends it when it runs).

        With a connection open and no signing to do, the coroutine is the
        connection's own: one coroutine less per request.

        Raises:
            RemotingConnectError: cannot connect within the connect timeout.
            RemotingTimeoutError: no reply within ``timeout_ms``.
            RemotingSendRequestError: the connection closed before the reply.
            RemotingTooMuchRequestError: the in-flight bound stayed full for ``timeout_ms``.
        """
        conn = self._connections.get(address)
        if conn is None or conn.is_closed or self._credentials is not None:
            return self._invoke(address, request, timeout_ms)
        request.serialize_type = self._request_type(conn)
        return conn.invoke(request, timeout_ms / 1000, self._async_slots)

    async def _invoke(
        self, address: str, request: RemotingCommand, timeout_ms: int
    ) -> RemotingCommand:
        # Connect first, then wait for a slot (as Java's invokeAsync): the time both
        # take comes off the reply's.
        started = time.monotonic()
        conn = await self.connection(address)
        request.serialize_type = self._request_type(conn)
        if self._credentials is not None:
            sign_request(request, self._credentials)
        timeout_s = max(0.001, timeout_ms / 1000 - (time.monotonic() - started))
        return await conn.invoke(request, timeout_s, self._async_slots)

    async def invoke_oneway(self, address: str, request: RemotingCommand, timeout_ms: int) -> None:
        """Send ``request`` with the oneway bit set; nothing comes back."""
        await self._oneway_slots.take(timeout_ms / 1000, address)
        try:
            conn = await self.connection(address)
            request.serialize_type = self._request_type(conn)
            if self._credentials is not None:
                sign_request(request, self._credentials)
            await conn.invoke_oneway(request, timeout_ms / 1000)
        finally:
            self._oneway_slots.give()

    async def connection(self, address: str) -> RemotingConnection:
        """The open connection to ``address``, connecting if there is none."""
        conn = self._connections.get(address)
        if conn is not None and not conn.is_closed:
            return conn
        if self._closed:
            raise RemotingSendRequestError("client is closed", address=address)
        attempt = self._connecting.get(address)
        if attempt is None:
            attempt = asyncio.ensure_future(self._connect(address))
            self._connecting[address] = attempt
            attempt.add_done_callback(lambda f: self._connect_done(address, f))
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            # close() cancels connect attempts; a caller that was not itself cancelled
            # gets the documented error, not a CancelledError it never asked for.
            task = asyncio.current_task()
            if attempt.cancelled() and task is not None and not task.cancelling():
                raise RemotingSendRequestError("client is closed", address=address) from None
            raise

    def _connect_done(self, address: str, attempt: asyncio.Future[RemotingConnection]) -> None:
        self._connecting.pop(address, None)
        # Callers wait through a shield: when all of them were cancelled, a failure
        # would otherwise be reported as "never retrieved" at garbage collection.
        if not attempt.cancelled():
            attempt.exception()

    def _request_type(self, conn: RemotingConnection) -> SerializeType:
        if self._fixed_type is not None:
            return self._fixed_type
        return SerializeType.MSGPACK if conn.peer_reads_msgpack else SerializeType.JSON

    def close_connection(self, address: str) -> None:
        """Close the connection to ``address`` (pending requests fail at once)."""
        conn = self._connections.pop(address, None)
        if conn is not None:
            conn.abort()

    async def close(self) -> None:
        """Close every connection and refuse new requests (idempotent)."""
        self._closed = True
        self._stopping.set()
        if self._idle_task is not None:
            self._idle_task.cancel()
            await asyncio.gather(self._idle_task, return_exceptions=True)
            self._idle_task = None
        for attempt in list(self._connecting.values()):
            attempt.cancel()
        connections = list(self._connections.values())
        self._connections.clear()
        for conn in connections:
            conn.close()
        for conn in connections:
            try:
                await asyncio.wait_for(conn.wait_closed(), 2.0)
            except TimeoutError:
                conn.abort()

    async def _connect(self, address: str) -> RemotingConnection:
        try:
            host, port = split_address(address)
        except ValueError as exc:
            raise RemotingConnectError(str(exc), address=address) from exc
        loop = asyncio.get_running_loop()
        timeout_s = self.config.connect_timeout_millis / 1000

        def factory() -> RemotingConnection:
            return RemotingConnection(
                self._processors,
                max_frame_length=self.config.frame_max_length,
                write_high_water=self.config.write_buffer_high_water,
                on_lost=lambda c: self._on_lost(address, c),
            )

        kwargs = await self._tls_kwargs(address, timeout_s)
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(factory, host, port, **kwargs), timeout_s
            )
        except (OSError, TimeoutError) as exc:
            raise RemotingConnectError(
                f"connect failed: {exc or type(exc).__name__}", address=address
            ) from exc
        if self._closed:
            conn.abort()
            raise RemotingSendRequestError("client is closed", address=address)
        self._connections[address] = conn
        self._ensure_idle_task()
        log.debug("connected address=%s", address)
        return conn

    async def _tls_kwargs(self, address: str, timeout_s: float) -> dict[str, Any]:
        """``create_connection``'s TLS arguments (none without ``use_tls``)."""
        if not self.config.use_tls:
            return {}
        if self._ssl_context is None:
            # Built once, off the loop (it reads files); concurrent connects share it.
            self._ssl_context = asyncio.ensure_future(
                asyncio.to_thread(build_client_context, self.config.tls)
            )
            # A failure is re-raised to every caller; mark it retrieved even if all left.
            self._ssl_context.add_done_callback(lambda f: f.cancelled() or f.exception())
        try:
            context = await asyncio.shield(self._ssl_context)
        except TlsConfigError as exc:
            raise RemotingConnectError(f"TLS client settings: {exc}", address=address) from exc
        return {"ssl": context, "ssl_handshake_timeout": timeout_s}

    def _on_lost(self, address: str, conn: RemotingConnection) -> None:
        if self._connections.get(address) is conn:
            del self._connections[address]

    def _ensure_idle_task(self) -> None:
        if self._idle_task is None and self.config.client_channel_max_idle_time_seconds > 0:
            self._idle_task = asyncio.get_running_loop().create_task(self._idle_loop())

    async def _idle_loop(self) -> None:
        max_idle_s = self.config.client_channel_max_idle_time_seconds
        period_s = max(0.05, min(10.0, max_idle_s / 4))
        while not self._stopping.is_set():
            try:
                await asyncio.wait_for(self._stopping.wait(), period_s)
            except TimeoutError:
                pass
            now = time.monotonic()
            for address, conn in list(self._connections.items()):
                idle = now - conn.last_active_monotonic > max_idle_s
                if idle and conn.pending_count == 0:
                    log.debug("closing idle connection address=%s", address)
                    self.close_connection(address)
