"""A small asyncio TCP proxy for chaos tests: forward, drop, pause, delay, heal.

Owns: one listening socket on 127.0.0.1 (ephemeral port) that forwards every
accepted connection to ``target`` and lets a test cut the link in three ways:

* ``drop()``: close every open connection (both sides) and close new ones at
  once, as a broken network path with resets would;
* ``pause()``: keep connections open but forward nothing (bytes are held, not
  lost), as a stalled path would; ``heal()`` forwards what was held;
* ``delay_s``: forward each chunk that much later (latency, order kept).

``heal()`` ends drop and pause. Counters (``accepted``, ``refused``,
``bytes_forwarded``) let a test prove the cut actually happened.

Must not: change the bytes it forwards, or leave tasks running after ``close``.
"""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["TcpProxy"]

_CHUNK = 64 * 1024


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target`` (``host:port``; settable later).

    Connections accepted while ``target`` is None, or while dropped, are closed
    at once (the peer sees EOF and retries).
    """

    def __init__(self, target: str | None = None, *, delay_s: float = 0.0) -> None:
        self.target = target
        self.delay_s = delay_s
        self.port = 0
        self.accepted = 0
        self.refused = 0
        self.bytes_forwarded = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._dropped = False
        self._open = asyncio.Event()  # cleared while paused
        self._open.set()

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>`` to give the client instead of the target."""
        return f"127.0.0.1:{self.port}"

    @property
    def connections(self) -> int:
        """Open client-side connections."""
        return len(self._writers) // 2

    async def start(self) -> TcpProxy:
        """Listen on an ephemeral loopback port."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def drop(self) -> None:
        """Close every connection now and refuse new ones until ``heal``."""
        self._dropped = True
        for writer in list(self._writers):
            writer.transport.abort()

    def pause(self) -> None:
        """Stop forwarding (connections stay open, bytes are held) until ``heal``."""
        self._open.clear()

    def heal(self) -> None:
        """Forward again: end ``drop`` and ``pause``."""
        self._dropped = False
        self._open.set()

    async def close(self) -> None:
        """Stop listening, close every connection and wait for the pumps."""
        if self._server is not None:
            self._server.close()
        self.drop()
        self._open.set()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._dropped or self.target is None:
            self.refused += 1
            writer.transport.abort()
            return
        host, _, port = self.target.rpartition(":")
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            self.refused += 1
            writer.transport.abort()
            return
        self.accepted += 1
        self._writers |= {writer, up_writer}
        pumps = [
            asyncio.ensure_future(self._pump(reader, up_writer)),
            asyncio.ensure_future(self._pump(up_reader, writer)),
        ]
        self._tasks.update(pumps)
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pumps:
                task.cancel()
            await asyncio.gather(*pumps, return_exceptions=True)
            self._tasks.difference_update(pumps)
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.transport.abort()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while True:
                data = await reader.read(_CHUNK)
                if not data:
                    return
                if self.delay_s > 0:
                    await asyncio.sleep(self.delay_s)  # the injected latency itself
                await self._open.wait()
                if self._dropped:
                    return
                writer.write(data)
                self.bytes_forwarded += len(data)
                await writer.drain()
