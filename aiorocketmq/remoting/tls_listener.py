"""TlsServer: a listener that tells TLS from plaintext by each connection's first byte.

Owns: the TLS-aware accept path, used only when ``tls.server.mode`` is not
``disabled`` (a disabled listener keeps ``loop.create_server``'s fast path):

* the listening socket, read by a reader callback that accepts a batch of
  connections per wake-up (as asyncio's own accept loop does; EMFILE and the like
  pause accepting for ``ACCEPT_PAUSE_S``);
* per accepted socket, one task that waits (reader callback, not a thread) until
  the socket is readable and peeks its first byte with ``MSG_PEEK``, under
  ``tls.handshake.timeout.millis``: a peer that connects and sends nothing is
  closed then, and never holds up the accept path. 0x16 (a TLS handshake record)
  hands the socket to the loop with the SSL context and the same timeout for the
  handshake; any other byte hands it over as plaintext in ``permissive`` mode, and
  closes it in ``enforcing`` mode (Java's HandshakeHandler), logged at INFO;
* at most ``MAX_PENDING`` sockets waiting for a first byte or a handshake: past
  it new connections are closed at once, so a flood of silent peers costs
  bounded memory and file descriptors.

The protocol factory is called only once a connection is usable (after the TLS
handshake), so a failed handshake never creates a half-made connection upstream.

Must not: build SSL contexts from settings (``tls.py``) or know the remoting
protocol: it serves ``RemotingServer`` and the broker's HA listener alike.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any, Final

from aiorocketmq.remoting.tls import TLS_HANDSHAKE_MAGIC, TlsMode

__all__ = ["MAX_PENDING", "TlsServer", "start_tls_server", "stream_protocol_factory"]

log = logging.getLogger(__name__)

MAX_PENDING: Final = 1024
"""Accepted sockets awaiting their first byte or TLS handshake, at most (the backlog)."""

ACCEPT_BATCH: Final = 64
"""Connections accepted per readable event before yielding to the loop."""

ACCEPT_PAUSE_S: Final = 1.0
"""Pause after EMFILE/ENFILE/ENOBUFS/ENOMEM (asyncio's accept loop waits 1 s too)."""

_RESOURCE_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

ProtocolFactory = Callable[[], asyncio.BaseProtocol]


class _Deferred(asyncio.Protocol):
    """Stands in until the handshake completes, then hands the transport over."""

    def __init__(self, factory: ProtocolFactory) -> None:
        self._factory = factory

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        protocol = self._factory()
        transport.set_protocol(protocol)
        protocol.connection_made(transport)


class TlsServer:
    """A listener serving TLS and/or plaintext on one port; see the module docstring.

    Args:
        protocol_factory: makes the protocol of each usable connection.
        context: the server SSL context.
        mode: ``permissive`` or ``enforcing``.
        handshake_timeout_s: first-byte wait, then TLS handshake limit.
        name: used in log lines.
        max_pending: ``MAX_PENDING`` unless a test wants fewer.

    Attributes:
        tls_accepted, plain_accepted, refused: connections handed over as TLS, as
            plaintext, and closed (plaintext under enforcing, silent, failed handshake).
    """

    def __init__(
        self,
        protocol_factory: ProtocolFactory,
        context: ssl.SSLContext,
        mode: TlsMode,
        *,
        handshake_timeout_s: float,
        name: str = "tls",
        max_pending: int = MAX_PENDING,
    ) -> None:
        if mode is TlsMode.DISABLED:
            raise ValueError("a disabled listener uses loop.create_server")
        self._factory = protocol_factory
        self._context = context
        self._mode = mode
        self._timeout_s = handshake_timeout_s
        self._name = name
        self._max_pending = max_pending
        self._loop = asyncio.get_running_loop()
        self._sock: socket.socket | None = None
        self._pause: asyncio.TimerHandle | None = None
        self._pending: set[asyncio.Task[None]] = set()
        self.tls_accepted = 0
        self.plain_accepted = 0
        self.refused = 0

    @property
    def sockets(self) -> tuple[socket.socket, ...]:
        """The listening socket (empty once closed), like ``asyncio.Server.sockets``."""
        return (self._sock,) if self._sock is not None else ()

    @property
    def pending_count(self) -> int:
        """Sockets waiting for a first byte or a handshake."""
        return len(self._pending)

    async def start(self, host: str, port: int, backlog: int = 1024) -> None:
        """Bind ``host:port`` (0 = any free port) and start accepting."""
        infos = await self._loop.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        family, _, _, _, address = infos[0]
        sock = socket.create_server(address[:2], family=family, backlog=backlog)
        sock.setblocking(False)
        self._sock = sock
        self._loop.add_reader(sock.fileno(), self._on_readable)

    def close(self) -> None:
        """Stop accepting and drop every connection not yet handed over (idempotent)."""
        if self._pause is not None:
            self._pause.cancel()
            self._pause = None
        if self._sock is not None:
            self._loop.remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
        for task in self._pending:
            task.cancel()

    async def wait_closed(self) -> None:
        """Wait until the connections not yet handed over are closed."""
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    # -- accepting ----------------------------------------------------------------------

    def _on_readable(self) -> None:
        sock = self._sock
        for _ in range(ACCEPT_BATCH):
            if sock is None:
                return
            try:
                conn, peer = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _RESOURCE_ERRNOS:
                    log.error("%s accept paused %.0fs: %s", self._name, ACCEPT_PAUSE_S, exc)
                    self._loop.remove_reader(sock.fileno())
                    self._pause = self._loop.call_later(ACCEPT_PAUSE_S, self._resume)
                    return
                continue  # ECONNABORTED and the like: that peer is gone, go on
            conn.setblocking(False)
            if len(self._pending) >= self._max_pending:
                self.refused += 1
                log.warning(
                    "%s closed %s: %d connections await a first byte or handshake",
                    self._name,
                    _addr(peer),
                    len(self._pending),
                )
                conn.close()
                continue
            task = self._loop.create_task(self._classify(conn, _addr(peer)))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    def _resume(self) -> None:
        self._pause = None
        if self._sock is not None:
            self._loop.add_reader(self._sock.fileno(), self._on_readable)

    async def _classify(self, conn: socket.socket, peer: str) -> None:
        """Peek the first byte, then hand ``conn`` over with or without TLS, or close it."""
        try:
            async with asyncio.timeout(self._timeout_s):
                first = await self._peek(conn)
        except TimeoutError:
            self._refuse(conn, peer, f"sent nothing within {self._timeout_s:g}s")
            return
        except OSError as exc:
            self._refuse(conn, peer, f"failed before its first byte: {exc!r}")
            return
        except BaseException:
            conn.close()
            raise
        if not first:
            self._refuse(conn, peer, "closed before sending anything")
            return
        is_tls = first[0] == TLS_HANDSHAKE_MAGIC
        if not is_tls and self._mode is TlsMode.ENFORCING:
            self._refuse(conn, peer, "is plaintext; tls.server.mode=enforcing")
            return
        await self._hand_over(conn, peer, is_tls)

    async def _peek(self, conn: socket.socket) -> bytes:
        """The first byte, without consuming it (b"" when the peer closed)."""
        while True:
            ready = self._loop.create_future()
            fd = conn.fileno()
            self._loop.add_reader(fd, _set_done, ready)
            try:
                await ready
            finally:
                self._loop.remove_reader(fd)
            try:
                return conn.recv(1, socket.MSG_PEEK)
            except (BlockingIOError, InterruptedError):
                continue  # a spurious wake-up

    async def _hand_over(self, conn: socket.socket, peer: str, is_tls: bool) -> None:
        kwargs: dict[str, Any] = {}
        if is_tls:
            kwargs = {"ssl": self._context, "ssl_handshake_timeout": self._timeout_s}
        try:
            await self._loop.connect_accepted_socket(
                lambda: _Deferred(self._factory), conn, **kwargs
            )
        except OSError as exc:  # ssl.SSLError, ConnectionAbortedError (timeout), resets
            # The loop closed the socket already (fileno -1); close it if it did not.
            if conn.fileno() != -1:
                conn.close()
            self.refused += 1
            log.info("%s TLS handshake with %s failed: %s", self._name, peer, exc)
            return
        if is_tls:
            self.tls_accepted += 1
        else:
            self.plain_accepted += 1
        log.debug("%s accepted %s tls=%s", self._name, peer, is_tls)

    def _refuse(self, conn: socket.socket, peer: str, why: str) -> None:
        self.refused += 1
        conn.close()
        log.info("%s closed connection from %s: it %s", self._name, peer, why)


async def start_tls_server(
    protocol_factory: ProtocolFactory,
    host: str,
    port: int,
    context: ssl.SSLContext,
    mode: TlsMode,
    *,
    handshake_timeout_s: float,
    name: str = "tls",
    backlog: int = 1024,
) -> TlsServer:
    """A started ``TlsServer`` on ``host:port`` (0 = any free port)."""
    server = TlsServer(
        protocol_factory, context, mode, handshake_timeout_s=handshake_timeout_s, name=name
    )
    await server.start(host, port, backlog)
    return server


def stream_protocol_factory(
    client_connected: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any],
    limit: int = 2**16,
) -> ProtocolFactory:
    """A factory of the protocol ``asyncio.start_server`` builds, for a ``TlsServer``."""

    def factory() -> asyncio.BaseProtocol:
        reader = asyncio.StreamReader(limit=limit)
        return asyncio.StreamReaderProtocol(reader, client_connected)

    return factory


def _set_done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _addr(peer: Any) -> str:
    return f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)
