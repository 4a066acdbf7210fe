"""HAClient: the slave side of classic HA: connect, report, append what arrives.

Owns: the connection to the master's HA address (``HAService.HAClient``;
specs/store.md §11.3) and its state for runtime info:

* the address comes from ``haMasterAddress`` or ``update_master_address`` (the
  registrar learns it from the name server's REGISTER_BROKER reply);
* on connect the slave reports its max CommitLog offset at once (Java waits one
  heartbeat interval first; the master sends nothing before that report, so
  waiting only delays catch-up), then every ``haSendHeartbeatInterval`` and
  after each chunk of received frames that grew its CommitLog;
* every frame's master offset must equal the slave's own max offset (unless the
  slave is empty); on a mismatch, a refused append or a malformed stream the
  connection is closed and reopened, so the master restarts from the slave's
  real offset: nothing that does not continue the CommitLog is ever written;
* nothing received for ``haHousekeepingInterval`` (the master heartbeats every
  ``haSendHeartbeatInterval`` when idle) closes the connection too;
* a failed connect, or a session that ended without applying anything, retries
  after a capped, doubling backoff.

Must not: write to the store except through ``append_to_commit_log``, block the
loop, or sleep unwakeably (backoff waits end at once on an address change or
shutdown).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from typing import Any, Final

from aiorocketmq.broker.ha.codec import (
    HAProtocolError,
    TransferDecoder,
    TransferFrame,
    encode_report,
)
from aiorocketmq.remoting.tls import TlsConfig, build_client_context
from aiorocketmq.runtime.lifecycle import Service
from aiorocketmq.store.message_store import MessageStore

__all__ = ["HAClient", "parse_address"]

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S: Final = 5.0
"""Java's ``RemotingUtil.connect`` timeout."""

READ_CHUNK: Final = 256 * 1024
"""Bytes read per call: several 32 KiB frames, appended before one report."""

_SESSION_ERRORS: Final = (ConnectionError, HAProtocolError, TimeoutError, EOFError, OSError)


class OffsetMismatchError(HAProtocolError):
    """The master sent bytes that do not continue the slave's CommitLog."""


def parse_address(addr: str) -> tuple[str, int]:
    """``"host:port"`` -> ``(host, port)``.

    Raises:
        ValueError: not a ``host:port`` with a port in 1..65535.
    """
    host, sep, port_text = addr.strip().rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"not an HA address (host:port): {addr!r}")
    return host, int(port_text)


class HAClient(Service):
    """The slave's replication client; see the module docstring.

    Args:
        store: the slave's store (its config gives intervals and ``haMasterAddress``).
        backoff_s: first retry delay after a failure.
        backoff_max_s: the cap of the doubling retry delay (Java retries every 5 s).
        tls: connect with TLS using these client settings (None: plaintext).

    Attributes:
        master_address: where it connects (None: waits for one).
        connected: a session with the master is open.
        master_offset: end of the last frame received (-1 before any).
        reconnects: sessions ended (for tests and runtime info).
    """

    def __init__(
        self,
        store: MessageStore,
        *,
        backoff_s: float = 0.1,
        backoff_max_s: float = 5.0,
        tls: TlsConfig | None = None,
    ) -> None:
        super().__init__("ha-client")
        self._tls = tls
        self._ssl_context: ssl.SSLContext | None = None
        config = store.config
        self.store = store
        self.master_address: str | None = None
        address = config.ha_master_address
        if address is not None and len(address) >= 6:  # Java: >= 6 chars counts as set
            self.master_address = address
        self._heartbeat_s = config.ha_send_heartbeat_interval / 1000
        self._housekeeping_s = config.ha_housekeeping_interval / 1000
        self._backoff_s = backoff_s
        self._backoff_max_s = backoff_max_s
        self._address_changed = asyncio.Event()
        self.connected = False
        self.master_offset = -1
        self.reported_offset = -1
        self.reconnects = 0

    # -- state ---------------------------------------------------------------------------

    def update_master_address(self, addr: str | None) -> None:
        """Use ``addr`` from now on (``updateHaMasterAddress``); a change reconnects."""
        if addr == self.master_address:
            return
        log.info("HA master address changed old=%s new=%s", self.master_address, addr)
        self.master_address = addr
        self._address_changed.set()

    @property
    def own_offset(self) -> int:
        """The slave's CommitLog max offset."""
        return self.store.max_phy_offset

    @property
    def lag(self) -> int:
        """Bytes received from the master but not yet in the CommitLog (0 when idle)."""
        return max(self.master_offset - self.own_offset, 0)

    # -- lifecycle -----------------------------------------------------------------------

    async def on_start(self) -> None:
        if self._tls is not None:
            self._ssl_context = await asyncio.to_thread(build_client_context, self._tls)
        self.spawn(self._run_loop(), name="connect")

    async def _run_loop(self) -> None:
        """Connect, run a session, and retry with backoff, until shutdown."""
        delay = self._backoff_s
        while True:
            addr = self.master_address
            if addr is None:
                self._address_changed.clear()
                await self._address_changed.wait()
                continue
            self._address_changed.clear()
            applied = await self._connect_and_serve(addr)
            if applied:
                delay = self._backoff_s
                continue
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._address_changed.wait()
            delay = min(delay * 2, self._backoff_max_s)

    async def _connect_and_serve(self, addr: str) -> bool:
        """One session; True if it appended anything (then reconnect without delay)."""
        try:
            host, port = parse_address(addr)
            tls: dict[str, Any] = {}
            if self._ssl_context is not None:
                tls = {"ssl": self._ssl_context, "ssl_handshake_timeout": CONNECT_TIMEOUT_S}
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                reader, writer = await asyncio.open_connection(host, port, **tls)
        except (OSError, TimeoutError, ValueError) as exc:
            log.debug("HA connect to %s failed: %r", addr, exc)
            return False
        log.info(
            "HA connected to master addr=%s own_offset=%s tls=%s", addr, self.own_offset, bool(tls)
        )
        self.connected = True
        before = self.own_offset
        try:
            await self._session(reader, writer)
        except _SESSION_ERRORS as exc:
            log.warning("HA session with %s ended: %r", addr, exc)
        except Exception:
            # A bug must not end replication for good: log it and retry, as Java's
            # HAClient does after any exception.
            log.exception("HA session with %s failed", addr)
        finally:
            self.connected = False
            self.reconnects += 1
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        return self.own_offset > before

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Report, then receive frames until an error (raised) or an address change."""
        report_task = asyncio.create_task(self._report_loop(writer))
        receive_task = asyncio.create_task(self._receive_loop(reader, writer))
        address_task = asyncio.create_task(self._address_changed.wait())
        tasks = (report_task, receive_task, address_task)
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        for task in (receive_task, report_task):
            exc = task.exception() if task.done() and not task.cancelled() else None
            if exc is not None:
                raise exc

    async def _report_loop(self, writer: asyncio.StreamWriter) -> None:
        """Report the own offset now, then every heartbeat interval."""
        while True:
            await self._report(writer, self.own_offset)
            await asyncio.sleep(self._heartbeat_s)

    async def _report(self, writer: asyncio.StreamWriter, offset: int) -> None:
        writer.write(encode_report(offset))
        self.reported_offset = offset
        await writer.drain()

    async def _receive_loop(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        decoder = TransferDecoder()
        while True:
            try:
                async with asyncio.timeout(self._housekeeping_s):
                    data = await reader.read(READ_CHUNK)
            except TimeoutError:
                raise TimeoutError(
                    f"housekeeping: nothing from the master for {self._housekeeping_s:g}s"
                ) from None
            if not data:
                raise EOFError("the master closed the connection")
            for frame in decoder.feed(data):
                await self._apply(frame)
            own = self.own_offset
            if own > self.reported_offset:
                await self._report(writer, own)
            if decoder.error is not None:
                raise decoder.error  # after applying and reporting the valid frames

    async def _apply(self, frame: TransferFrame) -> None:
        """Check that ``frame`` continues the CommitLog, then append it."""
        own = self.own_offset
        if own not in (0, frame.master_offset):
            raise OffsetMismatchError(
                f"master sent offset {frame.master_offset}, the slave's max is {own}"
            )
        self.master_offset = frame.end_offset
        if not frame.body:
            return  # heartbeat
        if not await self.store.append_to_commit_log(frame.master_offset, frame.body):
            raise OffsetMismatchError(
                f"the store refused {len(frame.body)} bytes at {frame.master_offset}"
            )
