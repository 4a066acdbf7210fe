"""HAServer: the master side of classic HA, one pair of tasks per connected slave.

Owns: the HA listener (``AcceptSocketService``), one ``SlaveConnection`` per slave
(``HAConnection``'s read and write services as two tasks of one owned task), the
slaves' acknowledged offsets, and the ``GroupTransfer`` that SYNC_MASTER puts
wait on (specs/store.md §11.2, §11.4). Per connection:

* read: 8-byte offset reports (``codec.ReportDecoder``). The first one is where
  the transfer starts; a first report of 0 starts at the beginning of the
  master's last CommitLog file (a new slave gets the last file, not history).
  Every report is an ack (``notify_transfer_some``). A report beyond the
  master's max offset (4.9.3+), a malformed stream, or silence for longer than
  ``haHousekeepingInterval`` closes the connection.
* write: frames of at most ``haTransferBatchSize`` bytes from
  ``MessageStore.get_commit_log_data`` (never spanning two files); an empty frame
  as heartbeat once ``haSendHeartbeatInterval`` passed without a write. The
  writer waits on the transport's flow control (``drain``), yields to the loop
  every ``YIELD_BYTES`` (drain does not while the socket takes everything), and
  between data waits on a per-connection event woken by SYNC_MASTER waits and by
  the dispatcher's arrival listener (``wakeup_all``), with a 100 ms safety poll.

Must not: block the loop, or keep a ``SelectedBuffer`` past the write: the frame
is copied into one ``bytes`` (header + body) and the buffer released before the
write, because a transport may keep a reference to what it was given, and a
CommitLog file must not stay pinned by a slow slave.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from aiorocketmq.broker.ha.codec import HAProtocolError, ReportDecoder, encode_header
from aiorocketmq.broker.ha.group_transfer import GroupTransfer
from aiorocketmq.common.clock import Clock, SystemClock
from aiorocketmq.remoting.tls import TlsConfig, build_server_context
from aiorocketmq.remoting.tls_listener import TlsServer, start_tls_server, stream_protocol_factory
from aiorocketmq.runtime.lifecycle import Service
from aiorocketmq.store.message_store import MessageStore

__all__ = ["HAServer", "SlaveConnection"]

log = logging.getLogger(__name__)

IDLE_WAIT_S: Final = 0.1
"""Longest a writer waits for new data without being woken (Java's 100 ms)."""

YIELD_BYTES: Final = 1024 * 1024
"""Bytes a writer sends before it yields to the loop (a few ms of work at most)."""

READ_CHUNK: Final = 64 * 1024
"""Bytes read per call from a slave; reports are 8 bytes, so this is plenty."""

_CLOSE_ERRORS: Final = (ConnectionError, HAProtocolError, TimeoutError, EOFError)


@dataclass(slots=True, eq=False)
class SlaveConnection:
    """One connected slave, as runtime info shows it.

    Attributes:
        addr: the slave's ``ip:port``.
        request_offset: its first report (-1 until it arrives).
        ack_offset: its latest report (-1 until the first).
        transfer_from: the next offset the master will send (-1 until known).
        last_read_ms: monotonic ms of the last bytes read from it.
    """

    addr: str
    request_offset: int = -1
    ack_offset: int = -1
    transfer_from: int = -1
    last_read_ms: int = 0
    wake: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    requested: asyncio.Event = field(default_factory=asyncio.Event, repr=False)


class HAServer(Service):
    """The master's HA listener and per-slave transfer; see the module docstring.

    Args:
        store: the master's store (read with ``get_commit_log_data``).
        host: interface to listen on.
        port: ``haListenPort`` (0 picks a free port; see ``port`` after start).
        clock: housekeeping and heartbeat timing.
        tls: TLS settings; permissive or enforcing ``tls.server.mode`` makes the
            listener a ``TlsServer`` (None or disabled: plaintext, as Java's HA).
    """

    def __init__(
        self,
        store: MessageStore,
        *,
        host: str = "0.0.0.0",
        port: int | None = None,
        clock: Clock | None = None,
        tls: TlsConfig | None = None,
    ) -> None:
        super().__init__("ha-server")
        self._tls = tls
        config = store.config
        self.store = store
        self.host = host
        self.port = config.ha_listen_port if port is None else port
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._batch = config.ha_transfer_batch_size
        self._file_size = config.mapped_file_size_commit_log
        self._heartbeat_ms = config.ha_send_heartbeat_interval
        self._housekeeping_s = config.ha_housekeeping_interval / 1000
        self.connections: list[SlaveConnection] = []
        self.group_transfer = GroupTransfer(
            timeout_ms=config.slave_timeout,
            fallbehind_max=config.ha_slave_fallbehind_max,
            connection_count=lambda: len(self.connections),
            on_wait=self.wakeup_all,
        )
        self._server: asyncio.Server | TlsServer | None = None
        #: Told a slave's ``ip:port`` when its first report arrives: a slave that
        #: (re)connects may hold consumer offsets committed while it was alone.
        self.on_slave_connected: Callable[[str], None] | None = None

    # -- lifecycle -----------------------------------------------------------------------

    async def on_start(self) -> None:
        tls = self._tls
        if tls is not None and tls.server_enabled:
            context = await asyncio.to_thread(build_server_context, tls)
            self._server = await start_tls_server(
                stream_protocol_factory(self._on_accept),
                self.host,
                self.port,
                context,
                tls.server_mode,
                handshake_timeout_s=tls.handshake_timeout_s,
                name="ha-server",
            )
        else:
            self._server = await asyncio.start_server(
                self._on_accept, self.host, self.port, reuse_address=True
            )
        self.port = self._server.sockets[0].getsockname()[1]
        mode = tls.server_mode if tls is not None else "disabled"
        log.info("HA server listening host=%s port=%s tls=%s", self.host, self.port, mode)

    async def shutdown(self) -> None:
        """Stop accepting, close every slave connection, fail pending waits."""
        if self._server is not None:
            self._server.close()
        await super().shutdown()

    async def on_shutdown(self) -> None:
        self.group_transfer.close()
        if self._server is not None:
            await self._server.wait_closed()
        log.info("HA server stopped port=%s", self.port)

    # -- figures -------------------------------------------------------------------------

    @property
    def connection_count(self) -> int:
        """Slaves connected now."""
        return len(self.connections)

    @property
    def push2slave_max_offset(self) -> int:
        """Highest offset any slave acknowledged (Java's ``push2SlaveMaxOffset``)."""
        return self.group_transfer.push2slave_max_offset

    def slave_fall_behind_much(self) -> int:
        """Master max offset minus ``push2SlaveMaxOffset`` (``slaveFallBehindMuch``)."""
        return self.store.max_phy_offset - self.push2slave_max_offset

    def wakeup_all(self) -> None:
        """New data: wake every connection's writer (Java's ``wakeupAll``)."""
        for conn in self.connections:
            conn.wake.set()

    def on_arrival(self, *_args: object) -> None:
        """Arrival listener for the store: an ASYNC_MASTER's writers learn of new data."""
        for conn in self.connections:
            conn.wake.set()

    # -- connections ---------------------------------------------------------------------

    def _on_accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        addr = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        if self.stopping.is_set():
            writer.close()
            return
        log.info("HA server accepted slave addr=%s", addr)
        conn = SlaveConnection(addr, last_read_ms=self.clock.monotonic_ms())
        self.connections.append(conn)
        self.spawn(self._serve(conn, reader, writer), name=f"slave:{addr}")

    async def _serve(
        self, conn: SlaveConnection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Run the read and write sides; when one ends, end the other and close."""
        read_task = asyncio.create_task(self._read_loop(conn, reader))
        write_task = asyncio.create_task(self._write_loop(conn, writer))
        try:
            await asyncio.wait((read_task, write_task), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (read_task, write_task):
                task.cancel()
            await asyncio.gather(read_task, write_task, return_exceptions=True)
            with contextlib.suppress(ValueError):
                self.connections.remove(conn)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        reasons = [_ended_because(task) for task in (read_task, write_task)]
        reason = reasons[0] or reasons[1]
        log.info(
            "HA connection closed addr=%s ack=%s reason=%s", conn.addr, conn.ack_offset, reason
        )

    async def _read_loop(self, conn: SlaveConnection, reader: asyncio.StreamReader) -> None:
        """Read reports until EOF, a bad report or housekeeping silence (raises)."""
        decoder = ReportDecoder()
        while True:
            try:
                async with asyncio.timeout(self._housekeeping_s):
                    data = await reader.read(READ_CHUNK)
            except TimeoutError:
                raise TimeoutError(
                    f"housekeeping: nothing from the slave for {self._housekeeping_s:g}s"
                ) from None
            if not data:
                raise EOFError("the slave closed the connection")
            conn.last_read_ms = self.clock.monotonic_ms()
            offsets = decoder.feed(data)
            if offsets:
                self._on_report(conn, offsets[-1])

    def _on_report(self, conn: SlaveConnection, offset: int) -> None:
        conn.ack_offset = offset
        if conn.request_offset < 0:
            conn.request_offset = offset
            conn.requested.set()
            log.info("HA slave request offset addr=%s offset=%s", conn.addr, offset)
            if self.on_slave_connected is not None:
                self.on_slave_connected(conn.addr)
        elif offset > self.store.max_phy_offset:
            # 4.9.3+: a slave ahead of its master is not this master's replica.
            raise HAProtocolError(
                f"slave reports {offset}, beyond the master's max {self.store.max_phy_offset}"
            )
        self.group_transfer.notify_transfer_some(offset)

    def _first_transfer_offset(self, request_offset: int) -> int:
        if request_offset != 0:
            return request_offset
        max_offset = self.store.max_phy_offset
        return max(max_offset - max_offset % self._file_size, 0)

    async def _write_loop(self, conn: SlaveConnection, writer: asyncio.StreamWriter) -> None:
        """Stream CommitLog bytes from the slave's request offset on; heartbeat when idle."""
        await conn.requested.wait()
        conn.transfer_from = self._first_transfer_offset(conn.request_offset)
        log.info(
            "HA transfer starts addr=%s from=%s request=%s",
            conn.addr, conn.transfer_from, conn.request_offset,
        )  # fmt: skip
        last_write_ms = self.clock.monotonic_ms()
        unyielded = 0
        read_ahead = self.store.read_ahead
        while True:
            conn.wake.clear()  # before looking, so a put after the look is not lost
            # Bytes not in memory (a slave catching up) are read in a thread first: the
            # frame's copy would wait for the disk on the loop (store/read_ahead.py).
            pending = read_ahead.fault_in_commit_log(conn.transfer_from, self._batch)
            if pending is not None:
                await pending
            frame = self._next_frame(conn)
            if frame is None and self.clock.monotonic_ms() - last_write_ms > self._heartbeat_ms:
                frame = encode_header(conn.transfer_from, 0)
            if frame is not None:
                writer.write(frame)
                last_write_ms = self.clock.monotonic_ms()
                await writer.drain()
                # drain() returns without yielding while the transport takes
                # everything (loopback): yield every YIELD_BYTES, or a backlog would
                # starve puts and the dispatcher until it is all sent; but not after
                # every frame, or under load the slave would get one frame per turn
                # of a loop that puts many.
                unyielded += len(frame)
                if unyielded >= YIELD_BYTES:
                    unyielded = 0
                    await asyncio.sleep(0)
                continue
            unyielded = 0
            idle_s = min(IDLE_WAIT_S, self._heartbeat_ms / 1000)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(idle_s):
                    await conn.wake.wait()

    def _next_frame(self, conn: SlaveConnection) -> bytes | None:
        """Header + up to one batch of bytes at ``transfer_from``, or None when none."""
        selected = self.store.get_commit_log_data(conn.transfer_from)
        if selected is None:
            return None
        try:
            size = min(selected.size, self._batch)
            offset = conn.transfer_from
            # get_data(0) may answer with the first file when 0 is in none: those
            # bytes are not at ``offset`` and must not be sent as if they were.
            if size <= 0 or selected.start_offset != offset:
                return None
            # The slice is released before ``selected`` is: release() refuses a
            # memoryview that still has exports.
            with selected.view[:size] as body:
                frame = b"".join((encode_header(offset, size), body))
        finally:
            selected.release()
        conn.transfer_from = offset + size
        return frame


def _ended_because(task: asyncio.Task[None]) -> str | None:
    if not task.done() or task.cancelled():
        return None
    exc = task.exception()
    if exc is None:
        return "ended"
    if not isinstance(exc, _CLOSE_ERRORS):
        log.error("HA connection task failed", exc_info=exc)
    return repr(exc)
