"""One remoting connection: an ``asyncio.Protocol`` shell around ``FrameDecoder``.

Owns: the per-connection opaque counter, the table of requests awaiting replies
(opaque -> Future, since replies come back in any order), dispatch of incoming
requests to a ``ProcessorTable``, write batching and flow control.

Must not: parse bytes itself (``frame.py`` does), retry, or know any request code's
meaning. A malformed frame closes *this* connection only.

Both ends use the same class: a broker's connection from a consumer carries the
consumer's requests and the broker's NOTIFY_CONSUMER_IDS_CHANGED the other way.

Flow control: when the transport's write buffer passes its high-water mark the
connection stops reading (a peer that does not read our replies gets no more
service) and requesters wait before writing; the same happens when more than
``max_in_flight`` requests of this connection are being processed, and while the
requests of a read that outran its time budget (``_READ_BUDGET_S``) wait for later
loop iterations.

Zero-copy bodies. A command's ``body_parts`` (held CommitLog records) go to
``transport.writelines`` as they are, and the connection owns them from
``write_command`` on: it calls ``release()`` once the transport no longer
references them, never before (the parts are views into mapped files whose
references the release gives back). What "no longer references" means depends on
the transport, read from their sources (CPython 3.11 asyncio, uvloop 0.2x):

* asyncio's selector transport in 3.11 inherits ``WriteTransport.writelines``,
  which joins the items into new bytes before writing: nothing of ours is kept
  past the call, so the parts are released right after it.
* uvloop's ``writelines`` keeps each item (a ``memoryview(...).cast('b')`` of it)
  in its ``_buffer`` list, and a ``uv_write`` request pins Py_buffers of all its
  items until its completion callback. One request holds the items of one loop
  iteration (the immediate try-write's rest, or what the check phase queues), and
  libuv defers the callback of a request that completes inside ``uv_write`` to
  the next iteration's pending phase. So the connection counts the bytes it hands
  over and, in a drain-poll timer (the timers phase, where iterations begin),
  notes that count as a mark: once the transport has written past a mark
  (``get_write_buffer_size``), every request holding bytes before it completed,
  and bodies ending before it are released from a ``call_soon`` (the idle phase,
  after the pending phase). When the buffer is empty right after ``writelines``
  the bodies are released from a ``call_soon`` directly. A slow reader makes the
  poll back off. Any transport that does not join (3.12's selector transport
  keeps memoryviews too) takes this second path; its byte count is as exact.
* On close, uvloop calls ``connection_lost`` *before* closing the handle, which
  cancels in-flight writes (closing their requests) in the same iteration, and
  unsent items stay in its ``_buffer`` until the transport object dies. So
  ``connection_lost`` drops the transport reference and releases on the next
  iteration. Only then can a store file's mapping really close: an mmap with a
  buffer exported refuses ``close()`` (memory stays safe, the unmap just waits for
  the garbage collector), which the zero-copy tests check.

``held_bodies.py`` keeps the byte counts, the drain poll and the releases.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from time import perf_counter
from typing import Any

from aiorocketmq.common.errors import LocalProtocolError, RemoteProtocolError
from aiorocketmq.remoting.codes import CURRENT_VERSION, LanguageCode, ResponseCode
from aiorocketmq.remoting.command import RPC_ONEWAY, RPC_RESPONSE, Body, BodyParts, RemotingCommand
from aiorocketmq.remoting.errors import (
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from aiorocketmq.remoting.frame import (
    DEFAULT_MAX_FRAME_LENGTH,
    FrameDecoder,
    frame_buffers,
    kernel_head,
)
from aiorocketmq.remoting.held_bodies import HeldBodies, release_all
from aiorocketmq.remoting.in_flight import InFlightSlots
from aiorocketmq.remoting.processor_table import (
    Handler,
    HandlerResult,
    ProcessorTable,
    error_reply,
    not_supported,
)
from aiorocketmq.remoting.reply_deadlines import ReplyDeadlines

__all__ = [
    "SERIALIZE_ADVERT_FIELD",
    "Handler",  # processor_table's names, re-exported where they always lived
    "HandlerResult",
    "ProcessorTable",
    "RemotingConnection",
    "not_supported",
]

log = logging.getLogger(__name__)

_MAX_OPAQUE = 2**31 - 1

#: Time for the requests of one read (or of one backlog run) answered inline; the
#: rest wait in the backlog for the next loop iteration, reading paused meanwhile.
#: One read of pipelined batch sends holds several ms of work, and one loop iteration
#: runs several such callbacks (reads, backlogs, dispatch steps) against the broker's
#: 2 ms loop-lag budget.
_READ_BUDGET_S = 0.0005

#: Reply extField by which an aiorocketmq server tells our client, once per
#: connection, that it also reads MSGPACK headers. Stock clients ignore unknown
#: reply fields (a Java broker adds MSG_REGION and TRACE_ON the same way), and a
#: stock server never sends it, so our client keeps speaking JSON to Apache RocketMQ.
SERIALIZE_ADVERT_FIELD = "aiorocketmqSerializeTypes"


class RemotingConnection(asyncio.Protocol):
    """A framed RocketMQ connection; see the module docstring.

    Args:
        processors: handlers for requests the peer sends us (None: answer every
            request with REQUEST_CODE_NOT_SUPPORTED).
        max_frame_length: largest frame accepted or sent.
        max_in_flight: requests of this connection processed at once before we
            stop reading from it.
        write_high_water: transport write-buffer size that pauses us.
        on_lost: called once with this connection when it closes.
    """

    def __init__(
        self,
        processors: ProcessorTable | None = None,
        *,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        max_in_flight: int = 4096,
        write_high_water: int = 4 * 1024 * 1024,
        on_lost: Callable[[RemotingConnection], None] | None = None,
        advertise_msgpack: bool = False,
    ) -> None:
        self._processors = processors
        self._advertise = advertise_msgpack
        #: True once the peer said it reads MSGPACK headers (see SERIALIZE_ADVERT_FIELD).
        self.peer_reads_msgpack = False
        self._decoder = FrameDecoder(max_frame_length)
        self._max_frame = max_frame_length
        self._max_in_flight = max_in_flight
        self._high_water = write_high_water
        self._on_lost = on_lost
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._deadlines = ReplyDeadlines(self._loop, self._pending, self._expire)
        self._next_opaque = 0
        # Outgoing frames of this loop iteration: flushed with one gather write at the
        # end of data_received or in a call_soon callback, so pipelined requests and
        # replies cost one syscall per batch instead of one per frame (a request alone
        # in flight goes at once: nothing could join it).
        self._out: list[Body] = []
        self._out_bytes = 0  # what ``_out`` holds, counted as frames are queued
        #: Zero-copy bodies among ``_out``, released once the transport lets go.
        self._out_parts: list[BodyParts] = []
        #: Bodies handed to a transport that keeps references, until it lets go.
        self._held = HeldBodies(self._loop)
        self._writes_copy = False
        self._flush_scheduled = False
        self._in_read = False
        self._tasks: set[asyncio.Task[None]] = set()
        #: Requests read past max_in_flight or past a read's time budget; dispatched
        #: in order as handlers finish or the loop comes round, reading paused meanwhile.
        self._backlog: deque[RemotingCommand] = deque()
        self._backlog_scheduled = False
        self._write_paused = False
        self._reading_paused = False
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._closed = self._loop.create_future()
        self.remote_address = "?"
        self.last_active_monotonic = time.monotonic()
        #: Replies to the peer's requests handed to the transport.
        self.replies_sent = 0
        #: Free slots for upper layers (client id, language...), owned by them.
        self.attributes: dict[str, Any] = {}

    # ---------------------------------------------------------------- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport; they implement it.
        assert hasattr(transport, "write")
        self._transport = self._held.transport = transport  # type: ignore[assignment]
        transport.set_write_buffer_limits(high=self._high_water)  # type: ignore[attr-defined]
        # The stock writelines joins its items: nothing we pass is kept (module docstring).
        writelines = getattr(type(transport), "writelines", None)
        self._writes_copy = writelines is asyncio.WriteTransport.writelines
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            self.remote_address = f"{peer[0]}:{peer[1]}"

    def data_received(self, data: bytes) -> None:
        self.last_active_monotonic = time.monotonic()
        try:
            commands = self._decoder.feed(data)
        except RemoteProtocolError as exc:
            log.warning(
                "closing connection after a malformed frame remote=%s error=%s",
                self.remote_address,
                exc,
            )
            self.abort()
            return
        if not commands:
            return
        self._in_read = True
        deadline = perf_counter() + _READ_BUDGET_S
        try:
            for cmd in commands:
                if cmd.flag & RPC_RESPONSE:
                    self._on_response(cmd)
                elif (
                    self._backlog or len(self._tasks) >= self._max_in_flight
                    or perf_counter() > deadline
                ):  # fmt: skip
                    self._backlog.append(cmd)
                else:
                    self._on_request(cmd)
        finally:
            self._in_read = False
            if self._out:  # a read of replies (a client's) queued nothing
                self._flush()
        if self._backlog:
            self._schedule_backlog()

    def connection_lost(self, exc: Exception | None) -> None:
        self._backlog.clear()
        self._deadlines.close()
        release_all(self._out_parts)  # unsent; the handed-over ones next iteration
        self._out_parts, self._out, self._out_bytes = [], [], 0
        self._held.close()
        self._transport = None
        pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                # One exception per waiter: a shared instance would collect every
                # waiter's traceback.
                error = RemotingSendRequestError("connection closed", address=self.remote_address)
                error.__cause__ = exc
                future.set_exception(error)
        self._wake_drain_waiters()
        if not self._closed.done():
            self._closed.set_result(None)
        if self._on_lost is not None:
            self._on_lost(self)

    def pause_writing(self) -> None:
        self._write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        self._update_reading()
        self._wake_drain_waiters()

    # ------------------------------------------------------------------ public surface

    @property
    def is_closed(self) -> bool:
        """True once the transport is closing or closed."""
        return self._transport is None or self._transport.is_closing()

    @property
    def pending_count(self) -> int:
        """Requests we sent that await a reply."""
        return len(self._pending)

    @property
    def in_flight_count(self) -> int:
        """Requests from the peer being processed by async handlers."""
        return len(self._tasks)

    @property
    def write_buffer_size(self) -> int:
        """Bytes the transport holds, not yet sent (0 once closed)."""
        transport = self._transport
        return transport.get_write_buffer_size() if transport is not None else 0

    @property
    def held_body_count(self) -> int:
        """Zero-copy bodies written or queued but not yet released."""
        return len(self._out_parts) + len(self._held)

    @property
    def transport_copies_writes(self) -> bool:
        """True when the transport copies what ``writelines`` gets (asyncio 3.11)."""
        return self._writes_copy

    async def wait_closed(self) -> None:
        """Return once ``connection_lost`` has run."""
        await asyncio.shield(self._closed)

    def close(self) -> None:
        """Close after queued writes are flushed."""
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Close at once, dropping queued writes."""
        if self._transport is not None:
            self._transport.abort()

    async def invoke(
        self, request: RemotingCommand, timeout_s: float, slots: InFlightSlots | None = None
    ) -> RemotingCommand:
        """Send ``request`` and await its reply.

        Args:
            request: the request (its opaque is assigned here).
            timeout_s: the time for the whole call, a wait for a slot included.
            slots: hold one of these in-flight slots from before the write until the
                reply (an endpoint's bound, taken here to spare the endpoint a
                coroutine of its own per request).

        Raises:
            RemotingTimeoutError: no reply within ``timeout_s``.
            RemotingSendRequestError: the connection is or became closed.
            RemotingTooMuchRequestError: no slot came within ``timeout_s``.
            LocalProtocolError: the request cannot be encoded.
        """
        if slots is not None and not slots.take_now():
            waited_from = self._loop.time()
            await slots.take(timeout_s, self.remote_address)
            timeout_s = max(0.001, timeout_s - (self._loop.time() - waited_from))
        opaque, timer = 0, None
        try:
            if self._write_paused:
                await self._drain(timeout_s)
            opaque = self._new_opaque()
            request.opaque = opaque
            request.flag &= ~(RPC_RESPONSE | RPC_ONEWAY)
            future: asyncio.Future[RemotingCommand] = self._loop.create_future()
            self._pending[opaque] = future
            timer = self._deadlines.add(opaque, future, timeout_s)
            # Alone in flight (a sync send): written now, not in the next iteration.
            self.write_command(request, now=len(self._pending) == 1)
            return await future
        finally:
            if timer is not None:
                timer.cancel()
            self._pending.pop(opaque, None)
            self._deadlines.done()
            if slots is not None:
                slots.give()

    async def invoke_oneway(self, request: RemotingCommand, timeout_s: float) -> None:
        """Send ``request`` with the oneway bit; no reply is expected."""
        if self._write_paused:
            await self._drain(timeout_s)
        request.opaque = self._new_opaque()
        request.flag = (request.flag & ~RPC_RESPONSE) | RPC_ONEWAY
        self.write_command(request)

    def write_command(self, cmd: RemotingCommand, now: bool = False) -> None:
        """Encode ``cmd`` and queue it for this iteration's gather write (``now``: write
        at once unless a read or a scheduled write will take it anyway).

        Raises:
            RemotingSendRequestError: the connection is closed.
            LocalProtocolError: ``cmd`` cannot be encoded.
        """
        parts = cmd.body_parts
        if now and parts is None and not self._out and not self._in_read:
            # Alone in flight, nothing queued or scheduled: straight to the transport.
            transport = self._transport
            if transport is not None and not transport.is_closing():
                buffers, size = frame_buffers(cmd, self._max_frame)
                transport.writelines(buffers)
                if not self._writes_copy:
                    self._held.wrote(size)
                return
        try:
            transport = self._transport
            if transport is None or transport.is_closing():
                raise RemotingSendRequestError("connection closed", address=self.remote_address)
            buffers, size = frame_buffers(cmd, self._max_frame)
        except BaseException:
            if parts is not None:
                parts.release()  # never reaches the transport: give the records back now
            raise
        if parts is not None:
            self._out_parts.append(parts)
        self._queue(buffers, size, now)

    def _queue(self, buffers: list[Body], size: int, now: bool = False) -> None:
        """Add encoded frames to this iteration's gather write (``now``: write at once
        unless a read or a scheduled write will take them anyway)."""
        self._out += buffers
        self._out_bytes += size
        if not self._in_read and not self._flush_scheduled:
            if now:
                self._flush()
                return
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out, self._out = self._out, []
        parts, self._out_parts = self._out_parts, []
        wrote, self._out_bytes = self._out_bytes, 0
        transport = self._transport
        if not out or transport is None or transport.is_closing():
            release_all(parts)  # not handed to any transport
            return
        try:
            transport.writelines(out)
        except BaseException:
            release_all(parts)
            raise
        if self._writes_copy:
            release_all(parts)
            return
        self._held.wrote(wrote, parts)

    # --------------------------------------------------------------------- internals

    def _new_opaque(self) -> int:
        self._next_opaque = self._next_opaque + 1 if self._next_opaque < _MAX_OPAQUE else 1
        return self._next_opaque

    def _expire(self, opaque: int, timeout_s: float) -> None:
        future = self._pending.pop(opaque, None)
        if future is not None and not future.done():
            future.set_exception(
                RemotingTimeoutError(
                    f"no reply to opaque {opaque} within {timeout_s * 1000:.0f} ms",
                    address=self.remote_address,
                )
            )

    def _on_response(self, cmd: RemotingCommand) -> None:
        if not self.peer_reads_msgpack and SERIALIZE_ADVERT_FIELD in cmd.ext_fields:
            self.peer_reads_msgpack = "MSGPACK" in cmd.ext_fields[SERIALIZE_ADVERT_FIELD]
        future = self._pending.pop(cmd.opaque, None)
        if future is None or future.done():
            # Late (timed out) or unsolicited: stock clients drop these too.
            log.debug("reply for unknown opaque=%s remote=%s", cmd.opaque, self.remote_address)
            return
        future.set_result(cmd)

    def _on_request(self, request: RemotingCommand) -> None:
        handler = self._processors.get(request.code) if self._processors is not None else None
        if handler is None:
            self._reply(request, not_supported(request))
            return
        try:
            result = handler(self, request)
        except Exception as exc:
            self._reply(request, error_reply(request, exc, self.remote_address))
            return
        # Most handlers answer inline: test for that first (isawaitable costs ~0.3 us).
        if (
            type(result) is not RemotingCommand and type(result) is not bytes
            and inspect.isawaitable(result)
        ):  # fmt: skip
            task = self._loop.create_task(self._finish_async(request, result))
            self._tasks.add(task)
            task.add_done_callback(self._task_done)
            self._update_reading()
        else:
            self._reply(request, result)

    async def _finish_async(
        self, request: RemotingCommand, pending: Awaitable[RemotingCommand | None]
    ) -> None:
        try:
            reply = await pending
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reply = error_reply(request, exc, self.remote_address)
        self._reply(request, reply)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._run_backlog()

    def _run_backlog(self) -> None:
        """Answer backlog requests in order for up to ``_READ_BUDGET_S``; more next time."""
        self._backlog_scheduled = False
        deadline = perf_counter() + _READ_BUDGET_S
        self._in_read = True
        try:
            while self._backlog and len(self._tasks) < self._max_in_flight and not self.is_closed:
                self._on_request(self._backlog.popleft())
                if perf_counter() > deadline:
                    break
        finally:
            self._in_read = False
            self._flush()
        self._schedule_backlog()

    def _schedule_backlog(self) -> None:
        # Runnable backlog left (not waiting for a handler slot): the next iteration.
        runnable = self._backlog and len(self._tasks) < self._max_in_flight
        if runnable and not self._backlog_scheduled and not self.is_closed:
            self._backlog_scheduled = True
            self._loop.call_soon(self._run_backlog)
        self._update_reading()

    def encode_reply(
        self, request: RemotingCommand, code: int, ext_fields: dict[str, str]
    ) -> bytes | None:
        """``request.response_to(code, None, ext_fields)`` as this connection would
        write it, already encoded, for a handler to return instead: no reply object and
        no encoding step on the way out (a sent message's reply, every send).

        None when the reply must go the usual way: it still owes the peer the
        serialize-type advertisement, the request is oneway, or no kernel encodes it.
        """
        if self._advertise or request.flag & RPC_ONEWAY:
            return None
        return kernel_head(
            request.serialize_type, code, LanguageCode.JAVA, CURRENT_VERSION, request.opaque,
            RPC_RESPONSE, None, ext_fields, 0, self._max_frame,
        )  # fmt: skip

    def _reply(self, request: RemotingCommand, reply: RemotingCommand | bytes | None) -> None:
        # Go by the wire bit only: stock clients never set it, so "oneway" sends and
        # offset commits get answered and the client drops the answer.
        if reply is None or request.flag & RPC_ONEWAY or self.is_closed:
            if isinstance(reply, RemotingCommand) and reply.body_parts is not None:
                reply.body_parts.release()  # dropped: its held records go back
            return
        if type(reply) is bytes:  # ``encode_reply``'s frame: ready for the wire
            self.replies_sent += 1
            self._queue([reply], len(reply))
            return
        if not isinstance(reply, RemotingCommand):
            reply = error_reply(
                request,
                TypeError(f"processor returned {type(reply).__name__}"),
                self.remote_address,
            )
        reply.opaque = request.opaque
        reply.flag = (reply.flag | RPC_RESPONSE) & ~RPC_ONEWAY
        reply.serialize_type = request.serialize_type
        if self._advertise:
            self._advertise = False
            reply.ext_fields = {**reply.ext_fields, SERIALIZE_ADVERT_FIELD: "JSON,ROCKETMQ,MSGPACK"}
        self.replies_sent += 1
        try:
            self.write_command(reply)
        except LocalProtocolError as exc:
            log.warning(
                "reply not encodable code=%s opaque=%s error=%s", request.code, request.opaque, exc
            )
            self.write_command(request.response_to(ResponseCode.SYSTEM_ERROR, str(exc)))

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        should_pause = (
            self._write_paused or bool(self._backlog) or len(self._tasks) >= self._max_in_flight
        )
        if should_pause and not self._reading_paused:
            transport.pause_reading()
            self._reading_paused = True
        elif not should_pause and self._reading_paused:
            transport.resume_reading()
            self._reading_paused = False

    async def _drain(self, timeout_s: float) -> None:
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._drain_waiters.append(waiter)
        try:
            await asyncio.wait_for(waiter, timeout_s)
        except TimeoutError:
            raise RemotingTimeoutError(
                f"peer did not read for {timeout_s * 1000:.0f} ms", address=self.remote_address
            ) from None
        if self.is_closed:
            raise RemotingSendRequestError("connection closed", address=self.remote_address)

    def _wake_drain_waiters(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
